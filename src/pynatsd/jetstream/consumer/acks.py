"""The pending/ack/redelivery tracker of a consumer.

From nats-server's `server/consumer.go`: processAck, processAckMsg, processNak, processTerm,
checkPending, the redelivery queue (addToRedeliverQueue, ...) and the ack floor. What waits for
an acknowledgement is the state's `pending` (stream seq -> `Pending`); the ack floor (`adflr`/
`asflr`, delivery and stream sequence) says everything at or below it is acknowledged. A message
whose ack wait (or backoff step) passes, or that is -NAKed, goes to the redelivery queue
(`rdq`), served before new messages; the state's `rdc` counts its redeliveries against
`max_deliver`. What the tracker needs of its consumer is an `AckOwner`.
"""

from __future__ import annotations

import json
import time
from collections import deque
from collections.abc import Sized
from typing import TYPE_CHECKING, Protocol

from pynatsd.jetstream.consumer.ack_subjects import plain_ack_sequences
from pynatsd.jetstream.consumer.state import MS, NS, ConsumerState, Pending
from pynatsd.jetstream.util import now_ns, parse_go_duration

if TYPE_CHECKING:
    import asyncio

    from pynatsd.jetstream.consumer.ports import ConsumedStream, ConsumerHost
    from pynatsd.jetstream.consumer_config import ConsumerConfig
    from pynatsd.protocol.events import Pub
    from pynatsd.server.client import Client
    from pynatsd.server.subscription import InternalSubscription

# Go adds 1 ms to ack-wait timers so that bursts are handled in one go (ackWaitDelay).
_ACK_WAIT_DELAY = MS
# nats-server's reason for a +TERM it makes itself when a pending message goes
# (consumer.go's ackTermUnackedLimitsReason; advisories.TERM_UNACKED_DELETED).
TERM_UNACKED_DELETED = "Unacknowledged message was deleted"


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

    def advise_max_deliver(self, sseq: int, dc: int) -> None: ...


class AckTracker:
    """Acknowledgements and redeliveries: what waits, for how long, and what comes again."""

    def __init__(self, owner: AckOwner, state: ConsumerState, ack_prefix: bytes) -> None:
        self._owner = owner
        self._state = state
        self._stream = owner.stream
        self._ajs = owner.ajs
        self._ack_prefix = ack_prefix  # `$JS.ACK.<stream>.<consumer>.`
        self.rdq: deque[int] = deque()  # Go's rdq: stream seqs queued for redelivery
        self.rdqi: set[int] = set()  # Go's rdqi: the same seqs, for membership tests
        self._ptmr: asyncio.TimerHandle | None = None  # Go's ptmr: the pending (ack wait) timer
        self._ptmr_end = 0  # when `_ptmr` fires (ns)

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

    def at_max_ack_pending(self) -> bool:
        config = self._owner.config
        maxp: int = config.max_ack_pending
        return config.ack_policy != "none" and 0 < maxp <= len(self._state.pending)

    def track_pending(self, sseq: int, dseq: int, now: int) -> None:
        """A delivery of `sseq` now waits for its ack."""
        pending = self._state.pending
        p = pending.get(sseq)
        if p is not None:
            p.ts = now  # keep the first delivery sequence
        else:
            pending[sseq] = Pending(dseq, now)
        deadline = now + self.ack_wait_for(sseq)
        if self._ptmr is None or self._ptmr_end > deadline:
            self._reset_ptmr(deadline)

    def expect_acks_by(self, deadline: int) -> None:
        """Deliveries wait for acks until `deadline` (ns): the timer fires no later."""
        if self._ptmr is None or self._ptmr_end > deadline:
            self._reset_ptmr(deadline)

    def ack_wait_for(self, sseq: int) -> int:
        config = self._owner.config
        backoff = config.backoff
        if backoff:
            i = min(max(self._state.rdc.get(sseq, 0), 0), len(backoff) - 1)
            return int(backoff[i]) + _ACK_WAIT_DELAY
        return int(config.ack_wait) + _ACK_WAIT_DELAY

    def add_to_rdq(self, seq: int, front: bool = False) -> None:
        if front:
            self.rdq.appendleft(seq)
        else:
            self.rdq.append(seq)
        self.rdqi.add(seq)

    def remove_from_rdq(self, seq: int) -> None:
        if seq in self.rdqi:
            self.rdqi.discard(seq)
            self.rdq.remove(seq)

    def inc_delivery_count(self, sseq: int) -> int:
        rdc = self._state.rdc
        rdc[sseq] = rdc.get(sseq, 0) + 1
        return rdc[sseq] + 1

    def dec_delivery_count(self, sseq: int) -> None:
        rdc = self._state.rdc
        n = rdc.get(sseq, 0) - 1
        if n > 0:
            rdc[sseq] = n
        else:
            rdc.pop(sseq, None)

    def delivery_count(self, sseq: int) -> int:
        return max(self._state.rdc.get(sseq, 0), 1)

    def _has_max_deliveries(self, seq: int) -> bool:
        max_deliver = self._owner.config.max_deliver
        if max_deliver <= 0:
            return False
        dc = self.delivery_count(seq)
        if dc < max_deliver:
            return False
        if dc == max_deliver:
            self._owner.advise_max_deliver(seq, dc)
        state = self._state
        p = state.pending.pop(seq, None)
        if p is not None:
            self.move_ack_floor(p.dseq, seq)
            self._owner.signal()
        state.rdc[seq] = dc
        return True

    def _reset_ptmr(self, deadline: int) -> None:
        if self._ptmr is not None:
            self._ptmr.cancel()
        self._ptmr_end = deadline
        delay = max((deadline - now_ns()) / NS, 0.0)
        self._ptmr = self._ajs.loop.call_later(delay, self._check_pending)

    def schedule_pending_check(self) -> None:
        """Start the ack wait timer for what is pending (a consumer starting up)."""
        pending = self._state.pending
        if pending and self._owner.config.ack_wait > 0:
            now = now_ns()
            self._reset_ptmr(min(p.ts + self.ack_wait_for(s) for s, p in pending.items()))
            if self._ptmr_end < now:
                self._reset_ptmr(now)

    def ack_wait_changed(self) -> None:
        """The configuration's ack wait changed: look at what is pending again soon."""
        if self._ptmr is not None:
            self._reset_ptmr(now_ns() + 100 * MS)

    def _check_pending(self) -> None:
        """Go's checkPending: queue what passed its ack wait (or backoff) for redelivery."""
        self._ptmr = None
        owner = self._owner
        config = owner.config
        if owner.closed or config.ack_wait == 0:
            return
        state = self._state
        pending = state.pending
        st = self._stream.store.state()
        now = now_ns()
        backoff = config.backoff
        nxt = config.ack_wait + _ACK_WAIT_DELAY
        if backoff:
            nxt = int(backoff[-1])
        expired: list[int] = []
        changed = False
        for seq, p in list(pending.items()):
            if seq < st.first_seq or seq <= state.asflr:
                if seq < st.first_seq:
                    # Removed by the stream's limits: nats-server terminates it when it goes,
                    # this store tells no one, so the advisory comes now.
                    dc = self.delivery_count(seq)
                    owner.advise_terminated(p.dseq, seq, dc, TERM_UNACKED_DELETED)
                del pending[seq]
                state.rdc.pop(seq, None)
                self.remove_from_rdq(seq)
                changed = True
                state.asflr = max(state.asflr, seq)
                state.adflr = max(state.adflr, p.dseq)
                continue
            elapsed = now - p.ts
            deadline = config.ack_wait
            if backoff:
                dc = max(state.rdc.get(seq, 0), 0)
                nbi = dc + 1
                if dc + 1 >= len(backoff):
                    dc = len(backoff) - 1
                    nbi = dc
                deadline = int(backoff[dc])
                nxt = min(nxt, int(backoff[nbi]))
            if elapsed >= deadline:
                if seq not in self.rdqi and not self._has_max_deliveries(seq):
                    expired.append(seq)
            elif deadline - elapsed < nxt:
                nxt = deadline - elapsed
        if expired:
            expired.sort()
            for seq in expired:
                self.add_to_rdq(seq)
            off = now - pending[expired[0]].ts
            for seq in expired:
                p2 = pending.get(seq)
                if p2 is not None:
                    p2.ts += off
            owner.signal()
        if pending:
            self._reset_ptmr(now + max(nxt, 0))
        else:
            self.rdq.clear()
            self.rdqi.clear()
            state.adflr, state.asflr = state.dseq - 1, state.sseq - 1
        if changed:
            owner.save()

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
                # `_acked_floor`, inlined: acks in delivery order, the next one pending.
                nxt = pending.get(sseq + 1) if p.dseq == state.adflr + 1 else None
                if nxt is not None and nxt.dseq > 0:
                    state.adflr, state.asflr = nxt.dseq - 1, sseq
                else:
                    self.move_ack_floor(p.dseq, sseq)
            if state.rdc:
                state.rdc.pop(sseq, None)
            if self.rdqi:
                self.remove_from_rdq(sseq)
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
                self._acked_floor(p, sseq)
                acked.append(sseq)
            if state.rdc:
                state.rdc.pop(sseq, None)
            if self.rdqi:
                self.remove_from_rdq(sseq)
        elif policy in ("all", "flow_control"):
            if dseq <= state.adflr or sseq <= state.asflr:
                return True
            state.adflr, state.asflr = dseq, sseq
            for seq in [s for s in pending if s <= sseq]:
                del pending[seq]
                acked.append(seq)
                state.rdc.pop(seq, None)
                self.remove_from_rdq(seq)
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

    def _acked_floor(self, p: Pending, sseq: int) -> None:
        """The ack floor once `p`, the pending message at `sseq`, is acknowledged (explicit
        policy). move_ack_floor's usual case first: acks in delivery order, the next message
        still pending."""
        state = self._state
        if p.dseq == state.adflr + 1 and state.pending:
            nxt = state.pending.get(sseq + 1)
            if nxt is not None and nxt.dseq > 0:
                state.adflr, state.asflr = nxt.dseq - 1, sseq
                return
        self.move_ack_floor(p.dseq, sseq)

    def move_ack_floor(self, dseq: int, sseq: int) -> None:
        state = self._state
        pending = state.pending
        if not pending:
            state.adflr = state.dseq - 1
            state.asflr = state.sseq - 1
        elif dseq == state.adflr + 1:
            state.adflr, state.asflr = dseq, sseq
            for ss in range(sseq + 1, state.sseq):
                p = pending.get(ss)
                if p is not None:
                    if p.dseq > 0:
                        state.adflr, state.asflr = p.dseq - 1, ss - 1
                    break

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
                self.remove_from_rdq(sseq)
                p = state.pending.get(sseq)
                if p is not None:
                    p.ts = now_ns() - owner.config.ack_wait + delay
                    owner.save()
                    if self._ptmr is not None:
                        self._reset_ptmr(now_ns() + 10 * MS)
                return
        if sseq not in self.rdqi:
            self.add_to_rdq(sseq)
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
        dc = self.delivery_count(seq)
        self._owner.advise_terminated(p.dseq, seq, dc, TERM_UNACKED_DELETED)
        state.rdc.pop(seq, None)
        self.remove_from_rdq(seq)
        self.move_ack_floor(p.dseq, seq)
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
        for seq in list(self.rdq):
            if seq not in pending:
                self.remove_from_rdq(seq)

    def clear(self) -> None:
        """Nothing to redeliver and no ack wait running (a reset; the state's pending map
        and counts are cleared with it)."""
        self.rdq.clear()
        self.rdqi.clear()
        self.stop()

    def stop(self) -> None:
        if self._ptmr is not None:
            self._ptmr.cancel()
        self._ptmr = None


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
