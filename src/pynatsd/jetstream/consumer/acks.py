"""What an acknowledgement does to a consumer: +ACK, -NAK, +WPI, +TERM, +NXT.

From nats-server's `server/consumer.go`: processAck, processAckMsg, processNak and
processTerm. What waits for an acknowledgement is the state's `pending` (stream seq ->
`Pending`); the ack floor (`adflr`/`asflr`, delivery and stream sequence) says everything at
or below it is acknowledged. A -NAKed message goes to the redelivery queue (redelivery.py).
What the tracker needs of its consumer is an `AckOwner`.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sized
from typing import TYPE_CHECKING, Protocol

from pynatsd.jetstream.consumer.ack_subjects import plain_ack_sequences
from pynatsd.jetstream.consumer.status import TERM_UNACKED_DELETED
from pynatsd.jetstream.util import now_ns, parse_go_duration

if TYPE_CHECKING:
    from pynatsd.jetstream.consumer.ports import ConsumedStream, ConsumerHost
    from pynatsd.jetstream.consumer.redelivery import Redelivery
    from pynatsd.jetstream.consumer.state import ConsumerState
    from pynatsd.jetstream.consumer_config import ConsumerConfig
    from pynatsd.protocol.events import Pub
    from pynatsd.server.client import Client
    from pynatsd.server.subscription import InternalSubscription


class AckOwner(Protocol):
    """What the tracker uses of its consumer."""

    @property
    def closed(self) -> bool: ...

    @property
    def config(self) -> ConsumerConfig: ...

    @property
    def stream(self) -> ConsumedStream: ...

    @property
    def ajs(self) -> ConsumerHost: ...

    @property
    def waiting(self) -> Sized:
        """The pull requests waiting: an ack may let the next message go to one."""

    @property
    def dthresh(self) -> int:
        """The inactivity threshold (ns, 0: none): acks restart its countdown."""

    def wants(self, subject: str) -> bool:
        """Whether `subject` passes the consumer's filters."""

    def signal(self) -> None:
        """Something changed that may let messages out."""

    def save(self) -> None: ...

    def process_next_request(self, reply: str, body: bytes) -> None:
        """An `+NXT` ack's request for more."""

    def ack_activity(self) -> None:
        """An ack came: restart the inactivity countdown."""

    def advise_ack(self, dseq: int, sseq: int, dc: int, delivered_ns: int) -> None: ...

    def advise_nak(self, dseq: int, sseq: int, dc: int) -> None: ...

    def advise_terminated(self, dseq: int, sseq: int, dc: int, reason: str) -> None: ...


class AckTracker:
    """Acknowledgements: the ack floor, what an ack, a nak or a term does."""

    def __init__(
        self, owner: AckOwner, state: ConsumerState, redelivery: Redelivery, ack_prefix: bytes
    ) -> None:
        self._owner = owner
        self._state = state
        self._redelivery = redelivery
        self._stream = owner.stream
        self._ajs = owner.ajs
        self._ack_prefix = ack_prefix  # `$JS.ACK.<stream>.<consumer>.`

    def needs_ack(self, seq: int, subject: str) -> bool:
        """Go's needAck: would this consumer still deliver or wait for an ack of `seq`?"""
        owner = self._owner
        if not owner.wants(subject):
            return False
        state = self._state
        if owner.config.ack_policy == "none":
            return seq >= state.sseq
        if seq in state.pending:
            return True
        return seq > state.asflr and seq >= state.sseq

    def on_ack(self, sub: InternalSubscription, publisher: Client | None, ev: Pub) -> None:
        """Go's processAck. Runs once per acknowledged message: the `Pub` is read by tuple
        index (0 subject, 1 reply, 2 payload, 3 header size), not through its properties."""
        owner = self._owner
        if owner.closed:
            return
        tokens = ev[0].split(b".")
        # From the ack subject: dc (delivery count: 1 = first delivery), sseq (stream
        # sequence), dseq (delivery sequence); see pump.py for the whole subject.
        sseq = dseq = dc = 0
        if len(tokens) >= 9:
            try:
                dc, sseq, dseq = int(tokens[4]), int(tokens[5]), int(tokens[6])
            except ValueError:
                sseq = 0
        hs: int = ev[3]
        body: bytes = ev[2][hs:] if hs > 0 else ev[2]
        reply: bytes = ev[1]
        skip_reply = sseq == 0
        if sseq:
            if not body or body == b"+ACK" or body == b"+OK":
                skip_reply = not self.ack(sseq, dseq, dc, sample=True)
            elif body.startswith(b"+NXT"):
                self.ack(sseq, dseq, dc, sample=True)
                owner.process_next_request(reply.decode("utf-8", "surrogateescape"), body[4:])
                skip_reply = True
            elif body.startswith(b"-NAK"):
                self._process_nak(sseq, dseq, dc, body)
            elif body == b"+WPI":
                p = self._state.pending.get(sseq)
                if p is not None:
                    p.ts = now_ns()
                    owner.save()
            elif body.startswith(b"+TERM"):
                reason = body[5:].strip().decode("utf-8", "replace")
                skip_reply = not self.process_term(sseq, dseq, dc, reason)
        if reply and not skip_reply:
            self._ajs.reply(reply.decode("utf-8", "surrogateescape"), b"")

    def on_acks(self, sub: InternalSubscription, publisher: Client | None, evs: list[Pub]) -> None:
        """A client's run of acks from one read (ClientSession._process_acks), in order, with
        the effect of `on_ack` on each. The usual one (`+ACK` or an empty body, explicit
        policy, a limits stream; its sequences read by the compiled `plain_ack_sequences`) is
        `ack` inlined, and what `ack` schedules after each (the state write, the signal to the
        pump, the inactivity countdown) is scheduled once at the end: all three only schedule
        work for the event loop, so once is the same. Any other goes through `on_ack`."""
        owner = self._owner
        config = owner.config
        if config.ack_policy != "explicit" or self._stream.config.retention != "limits":
            for ev in evs:
                self.on_ack(sub, publisher, ev)
            return
        state = self._state
        pending = state.pending
        redelivery = self._redelivery
        waiting = owner.waiting
        maxp: int = config.max_ack_pending
        sample = config.sample_freq
        flow_control = config.flow_control
        reply_to = self._ajs.reply
        acked = False
        wake = False
        seqs = plain_ack_sequences(evs, self._ack_prefix)
        for ev, (sseq, dseq, dc) in zip(evs, seqs, strict=True):
            if owner.closed:
                break
            if not sseq:
                self.on_ack(sub, publisher, ev)  # not a plain ack: read as nats-server does
                continue
            # `ack`, inlined (its explicit branch).
            if sseq >= state.sseq and not flow_control:
                continue  # beyond what was delivered: not answered
            if not wake and (0 < maxp <= len(pending) or waiting):
                wake = True
            p = pending.pop(sseq, None)
            if p is not None:
                if sample:
                    owner.advise_ack(dseq, sseq, dc, p.ts)
                # `state.acked_floor`, inlined: acks in delivery order, the next one pending.
                nxt = pending.get(sseq + 1) if p.dseq == state.adflr + 1 else None
                if nxt is not None and nxt.dseq > 0:
                    state.adflr, state.asflr = nxt.dseq - 1, sseq
                else:
                    state.move_ack_floor(p.dseq, sseq)
            if state.rdc:
                state.rdc.pop(sseq, None)
            if redelivery.rdqi:
                redelivery.remove_from_rdq(sseq)
            acked = True
            reply: bytes = ev[1]
            if reply:
                reply_to(reply.decode("utf-8", "surrogateescape"), b"")
        if acked and not owner.closed:
            state.lat = time.time_ns()
            owner.save()
            if wake:
                owner.signal()
            if owner.dthresh > 0:
                owner.ack_activity()

    def ack(self, sseq: int, dseq: int = 0, dc: int = 0, sample: bool = False) -> bool:
        """Go's processAckMsg. Returns whether an acknowledgement with a reply subject is
        answered (nats-server stays silent for an ack beyond what was delivered, and for an
        ack-none consumer on a limits stream). `sample`: a client's ack, which the consumer's
        `sample_freq` may report as a metric (a +TERM is not)."""
        owner = self._owner
        if owner.closed:
            return False
        config = owner.config
        state = self._state
        if sseq >= state.sseq and not config.flow_control:
            return False
        policy = config.ack_policy
        acked: list[int] = []
        pending = state.pending
        # at_max_ack_pending, inlined: this runs for every ack.
        maxp: int = config.max_ack_pending
        at_limit = policy != "none" and 0 < maxp <= len(pending)
        if policy == "explicit":
            p = pending.pop(sseq, None)
            if p is not None:
                if sample and config.sample_freq:
                    owner.advise_ack(dseq, sseq, dc, p.ts)
                state.acked_floor(p, sseq)
                acked.append(sseq)
            if state.rdc:
                state.rdc.pop(sseq, None)
            if self._redelivery.rdqi:
                self._redelivery.remove_from_rdq(sseq)
        elif policy in ("all", "flow_control"):
            if dseq <= state.adflr or sseq <= state.asflr:
                return True
            state.adflr, state.asflr = dseq, sseq
            for seq in [s for s in pending if s <= sseq]:
                del pending[seq]
                acked.append(seq)
                state.rdc.pop(seq, None)
                self._redelivery.remove_from_rdq(seq)
            if not pending:
                state.adflr, state.asflr = state.dseq - 1, state.sseq - 1
        else:
            return bool(self._stream.config.retention != "limits")
        state.lat = time.time_ns()  # now_ns, without the call
        if acked and self._stream.config.retention != "limits":
            for seq in sorted(acked):
                self._stream.on_acked(owner, seq)
        owner.save()
        if at_limit or owner.waiting:
            owner.signal()
        if owner.dthresh > 0:
            owner.ack_activity()  # acks show activity: restart the countdown from here
        return True

    def _process_nak(self, sseq: int, dseq: int, dc: int, body: bytes) -> None:
        state = self._state
        if dseq <= state.adflr or dseq > state.dseq or sseq not in state.pending:
            return
        owner = self._owner
        owner.advise_nak(dseq, sseq, dc)
        arg = body[4:].strip()
        if arg:
            delay = _parse_nak_delay(arg)
            if delay is not None:
                self._redelivery.remove_from_rdq(sseq)
                p = state.pending.get(sseq)
                if p is not None:
                    p.ts = now_ns() - owner.config.ack_wait + delay
                    owner.save()
                    self._redelivery.check_soon()
                return
        if sseq not in self._redelivery.rdqi:
            self._redelivery.add_to_rdq(sseq)
        owner.signal()

    def process_term(self, sseq: int, dseq: int, dc: int, reason: str) -> bool:
        """+TERM: acknowledged as far as redelivery goes, plus the advisory. Returns whether
        a reply is due (as for an ack)."""
        p = self._state.pending.get(sseq)
        answered = self.ack(sseq, p.dseq if p is not None else dseq)
        self._owner.advise_terminated(dseq, sseq, dc, reason)
        return answered

    def removed(self, seq: int) -> bool:
        """Message `seq` left the stream: it no longer waits for an ack (nats-server
        terminates it, with the advisory). Returns whether it was pending."""
        state = self._state
        p = state.pending.pop(seq, None)
        if p is None:
            return False
        redelivery = self._redelivery
        dc = redelivery.delivery_count(seq)
        self._owner.advise_terminated(p.dseq, seq, dc, TERM_UNACKED_DELETED)
        state.rdc.pop(seq, None)
        redelivery.remove_from_rdq(seq)
        state.move_ack_floor(p.dseq, seq)
        return True

    def purged(self, first_seq: int) -> None:
        """The stream was purged below `first_seq` (Go's consumer.purge): what went is
        acknowledged, the floor moves up."""
        state = self._state
        store = self._stream.store
        pending = state.pending
        for seq, p in list(pending.items()):
            if seq < first_seq or store.msg_ts(seq) is None:
                state.adflr = max(state.adflr, p.dseq)
                del pending[seq]
                state.rdc.pop(seq, None)
        state.asflr = max(state.asflr, first_seq - 1)
        if not pending:
            state.adflr, state.asflr = state.dseq - 1, state.sseq - 1
        redelivery = self._redelivery
        for seq in list(redelivery.rdq):
            if seq not in pending:
                redelivery.remove_from_rdq(seq)


def _parse_nak_delay(arg: bytes) -> int | None:
    """The delay of `-NAK {"delay": ns}` or `-NAK 5s`; None means a plain NAK."""
    if arg[:1] == b"{":
        try:
            data = json.loads(arg)
        except ValueError:
            return None
        delay = data.get("delay") if isinstance(data, dict) else None
        return int(delay) if isinstance(delay, int) and not isinstance(delay, bool) else 0
    return parse_go_duration(arg.decode("utf-8", "replace"))
