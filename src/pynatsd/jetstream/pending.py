"""The pending/ack/redelivery tracker of a consumer.

From nats-server's `server/consumer.go`: processAck, processAckMsg, processNak, processTerm,
checkPending, the redelivery queue (addToRedeliverQueue, ...) and the ack floor. What waits for
an acknowledgement is `pending` (stream seq -> `Pending`); the ack floor (`adflr`/`asflr`,
delivery and stream sequence) says everything at or below it is acknowledged. A message whose
ack wait (or backoff step) passes, or that is -NAKed, goes to the redelivery queue (`rdq`),
served before new messages; `rdc` counts its redeliveries against `max_deliver`.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

from pynatsd.jetstream import advisories
from pynatsd.jetstream.ack_subjects import plain_ack_sequences
from pynatsd.jetstream.consumer_state import MS, NS, ConsumerState
from pynatsd.jetstream.util import now_ns, parse_go_duration

if TYPE_CHECKING:
    from pynatsd.protocol.events import Pub
    from pynatsd.server.client import Client
    from pynatsd.server.subscription import InternalSubscription

# Go adds 1 ms to ack-wait timers so that bursts are handled in one go (ackWaitDelay).
_ACK_WAIT_DELAY = MS


@dataclass(slots=True)
class Pending:
    """A delivered message waiting for its acknowledgement (Go's Pending)."""

    dseq: int  # delivery sequence of the first delivery
    ts: int  # when last delivered (ns); the ack wait runs from here


class AckTracker(ConsumerState):
    """Acknowledgements and redeliveries: what waits, for how long, and what comes again."""

    def needs_ack(self, seq: int, subject: str) -> bool:
        """Go's needAck: would this consumer still deliver or wait for an ack of `seq`?"""
        if not self.wants(subject):
            return False
        if self.config.ack_policy == "none":
            return seq >= self.sseq
        if seq in self.pending:
            return True
        return seq > self.asflr and seq >= self.sseq

    def _at_max_ack_pending(self) -> bool:
        maxp: int = self.config.max_ack_pending
        return self.config.ack_policy != "none" and 0 < maxp <= len(self.pending)

    def _track_pending(self, sseq: int, dseq: int, now: int) -> None:
        p = self.pending.get(sseq)
        if p is not None:
            p.ts = now  # keep the first delivery sequence
        else:
            self.pending[sseq] = Pending(dseq, now)
        deadline = now + self._ack_wait_for(sseq)
        if self._ptmr is None or self._ptmr_end > deadline:
            self._reset_ptmr(deadline)

    def _ack_wait_for(self, sseq: int) -> int:
        backoff = self.config.backoff
        if backoff:
            i = min(max(self.rdc.get(sseq, 0), 0), len(backoff) - 1)
            return int(backoff[i]) + _ACK_WAIT_DELAY
        return int(self.config.ack_wait) + _ACK_WAIT_DELAY

    def _add_to_rdq(self, seq: int, front: bool = False) -> None:
        if front:
            self.rdq.appendleft(seq)
        else:
            self.rdq.append(seq)
        self.rdqi.add(seq)

    def _remove_from_rdq(self, seq: int) -> None:
        if seq in self.rdqi:
            self.rdqi.discard(seq)
            self.rdq.remove(seq)

    def _inc_delivery_count(self, sseq: int) -> int:
        self.rdc[sseq] = self.rdc.get(sseq, 0) + 1
        return self.rdc[sseq] + 1

    def _dec_delivery_count(self, sseq: int) -> None:
        n = self.rdc.get(sseq, 0) - 1
        if n > 0:
            self.rdc[sseq] = n
        else:
            self.rdc.pop(sseq, None)

    def _delivery_count(self, sseq: int) -> int:
        return max(self.rdc.get(sseq, 0), 1)

    def _has_max_deliveries(self, seq: int) -> bool:
        max_deliver = self.config.max_deliver
        if max_deliver <= 0:
            return False
        dc = self._delivery_count(seq)
        if dc < max_deliver:
            return False
        if dc == max_deliver:
            self._notify_delivery_exceeded(seq, dc)
        p = self.pending.pop(seq, None)
        if p is not None:
            self._move_ack_floor(p.dseq, seq)
            self.signal()
        self.rdc[seq] = dc
        return True

    def _notify_delivery_exceeded(self, sseq: int, dc: int) -> None:
        advisories.max_deliver(self, sseq, dc)

    def _reset_ptmr(self, deadline: int) -> None:
        self._cancel(self._ptmr)
        self._ptmr_end = deadline
        delay = max((deadline - now_ns()) / NS, 0.0)
        self._ptmr = self.ajs.loop.call_later(delay, self._check_pending)

    def _schedule_pending_check(self) -> None:
        if self.pending and self.config.ack_wait > 0:
            now = now_ns()
            self._reset_ptmr(min(p.ts + self._ack_wait_for(s) for s, p in self.pending.items()))
            if self._ptmr_end < now:
                self._reset_ptmr(now)

    def _check_pending(self) -> None:
        """Go's checkPending: queue what passed its ack wait (or backoff) for redelivery."""
        self._ptmr = None
        if self.closed or self.config.ack_wait == 0:
            return
        st = self.stream.store.state()
        now = now_ns()
        backoff = self.config.backoff
        nxt = self.config.ack_wait + _ACK_WAIT_DELAY
        if backoff:
            nxt = int(backoff[-1])
        expired: list[int] = []
        changed = False
        for seq, p in list(self.pending.items()):
            if seq < st.first_seq or seq <= self.asflr:
                if seq < st.first_seq:
                    # Removed by the stream's limits: nats-server terminates it when it goes,
                    # this store tells no one, so the advisory comes now.
                    dc = self._delivery_count(seq)
                    advisories.terminated(self, p.dseq, seq, dc, advisories.TERM_UNACKED_DELETED)
                del self.pending[seq]
                self.rdc.pop(seq, None)
                self._remove_from_rdq(seq)
                changed = True
                self.asflr = max(self.asflr, seq)
                self.adflr = max(self.adflr, p.dseq)
                continue
            elapsed = now - p.ts
            deadline = self.config.ack_wait
            if backoff:
                dc = max(self.rdc.get(seq, 0), 0)
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
                self._add_to_rdq(seq)
            off = now - self.pending[expired[0]].ts
            for seq in expired:
                p2 = self.pending.get(seq)
                if p2 is not None:
                    p2.ts += off
            self.signal()
        if self.pending:
            self._reset_ptmr(now + max(nxt, 0))
        else:
            self.rdq.clear()
            self.rdqi.clear()
            self.adflr, self.asflr = self.dseq - 1, self.sseq - 1
        if changed:
            self.save()

    def _on_ack(self, sub: InternalSubscription, publisher: Client | None, ev: Pub) -> None:
        """Go's processAck. Runs once per acknowledged message: the `Pub` is read by tuple
        index (0 subject, 1 reply, 2 payload, 3 header size), not through its properties."""
        if self.closed:
            return
        tokens = ev[0].split(b".")
        # From the ack subject: dc (delivery count: 1 = first delivery), sseq (stream
        # sequence), dseq (delivery sequence); see delivery.py for the whole subject.
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
                self.process_next_request(reply.decode("utf-8", "surrogateescape"), body[4:])
                skip_reply = True
            elif body.startswith(b"-NAK"):
                self._process_nak(sseq, dseq, dc, body)
            elif body == b"+WPI":
                p = self.pending.get(sseq)
                if p is not None:
                    p.ts = now_ns()
                    self.save()
            elif body.startswith(b"+TERM"):
                reason = body[5:].strip().decode("utf-8", "replace")
                skip_reply = not self._process_term(sseq, dseq, dc, reason)
        if reply and not skip_reply:
            self.ajs.reply(reply.decode("utf-8", "surrogateescape"), b"")

    def _on_acks(self, sub: InternalSubscription, publisher: Client | None, evs: list[Pub]) -> None:
        """A client's run of acks from one read (ClientSession._process_acks), in order, with
        the effect of `_on_ack` on each. The usual one (`+ACK` or an empty body, explicit
        policy, a limits stream; its sequences read by the compiled `plain_ack_sequences`) is
        `ack` inlined, and what `ack` schedules after each (the state write, the signal to the
        pump, the inactivity countdown) is scheduled once at the end: all three only schedule
        work for the event loop, so once is the same. Any other goes through `_on_ack`."""
        config = self.config
        if config.ack_policy != "explicit" or self.stream.config.retention != "limits":
            for ev in evs:
                self._on_ack(sub, publisher, ev)
            return
        pending = self.pending
        maxp: int = config.max_ack_pending
        sample = config.sample_freq
        flow_control = config.flow_control
        acked = False
        wake = False
        seqs = plain_ack_sequences(evs, self._ack_prefix)
        for ev, (sseq, dseq, dc) in zip(evs, seqs, strict=True):
            if self.closed:
                break
            if not sseq:
                self._on_ack(sub, publisher, ev)  # not a plain ack: read as nats-server does
                continue
            # `ack`, inlined (its explicit branch).
            if sseq >= self.sseq and not flow_control:
                continue  # beyond what was delivered: not answered
            if not wake and (0 < maxp <= len(pending) or self.waiting):
                wake = True
            p = pending.pop(sseq, None)
            if p is not None:
                if sample:
                    advisories.ack_metric(self, dseq, sseq, dc, p.ts)
                # `_acked_floor`, inlined: acks in delivery order, the next one pending.
                nxt = pending.get(sseq + 1) if p.dseq == self.adflr + 1 else None
                if nxt is not None and nxt.dseq > 0:
                    self.adflr, self.asflr = nxt.dseq - 1, sseq
                else:
                    self._move_ack_floor(p.dseq, sseq)
            if self.rdc:
                self.rdc.pop(sseq, None)
            if self.rdqi:
                self._remove_from_rdq(sseq)
            acked = True
            reply: bytes = ev[1]
            if reply:
                self.ajs.reply(reply.decode("utf-8", "surrogateescape"), b"")
        if acked and not self.closed:
            self.lat = time.time_ns()
            self.save()
            if wake:
                self.signal()
            if not self.push and self.dthresh > 0 and self._dtmr is not None:
                self._cancel(self._dtmr)
                self._dtmr = self.ajs.loop.call_later(self.dthresh / NS, self._delete_not_active)

    def ack(self, sseq: int, dseq: int = 0, dc: int = 0, sample: bool = False) -> bool:
        """Go's processAckMsg. Returns whether an acknowledgement with a reply subject is
        answered (nats-server stays silent for an ack beyond what was delivered, and for an
        ack-none consumer on a limits stream). `sample`: a client's ack, which the consumer's
        `sample_freq` may report as a metric (a +TERM is not)."""
        if self.closed:
            return False
        config = self.config
        if sseq >= self.sseq and not config.flow_control:
            return False
        policy = config.ack_policy
        acked: list[int] = []
        pending = self.pending
        # _at_max_ack_pending, inlined: this runs for every ack.
        maxp: int = config.max_ack_pending
        at_limit = policy != "none" and 0 < maxp <= len(pending)
        if policy == "explicit":
            p = pending.pop(sseq, None)
            if p is not None:
                if sample and config.sample_freq:
                    advisories.ack_metric(self, dseq, sseq, dc, p.ts)
                self._acked_floor(p, sseq)
                acked.append(sseq)
            if self.rdc:
                self.rdc.pop(sseq, None)
            if self.rdqi:
                self._remove_from_rdq(sseq)
        elif policy in ("all", "flow_control"):
            if dseq <= self.adflr or sseq <= self.asflr:
                return True
            self.adflr, self.asflr = dseq, sseq
            for seq in [s for s in self.pending if s <= sseq]:
                del self.pending[seq]
                acked.append(seq)
                self.rdc.pop(seq, None)
                self._remove_from_rdq(seq)
            if not self.pending:
                self.adflr, self.asflr = self.dseq - 1, self.sseq - 1
        else:
            return bool(self.stream.config.retention != "limits")
        self.lat = time.time_ns()  # now_ns, without the call
        if acked and self.stream.config.retention != "limits":
            for seq in sorted(acked):
                self.stream.on_acked(self, seq)
        self.save()
        if at_limit or self.waiting:
            self.signal()
        if not self.push and self.dthresh > 0 and self._dtmr is not None:
            # Acks show activity: restart the countdown from here.
            self._cancel(self._dtmr)
            self._dtmr = self.ajs.loop.call_later(self.dthresh / NS, self._delete_not_active)
        return True

    def _acked_floor(self, p: Pending, sseq: int) -> None:
        """The ack floor once `p`, the pending message at `sseq`, is acknowledged (explicit
        policy). _move_ack_floor's usual case first: acks in delivery order, the next message
        still pending."""
        if p.dseq == self.adflr + 1 and self.pending:
            nxt = self.pending.get(sseq + 1)
            if nxt is not None and nxt.dseq > 0:
                self.adflr, self.asflr = nxt.dseq - 1, sseq
                return
        self._move_ack_floor(p.dseq, sseq)

    def _move_ack_floor(self, dseq: int, sseq: int) -> None:
        if not self.pending:
            self.adflr = self.dseq - 1
            self.asflr = self.sseq - 1
        elif dseq == self.adflr + 1:
            self.adflr, self.asflr = dseq, sseq
            for ss in range(sseq + 1, self.sseq):
                p = self.pending.get(ss)
                if p is not None:
                    if p.dseq > 0:
                        self.adflr, self.asflr = p.dseq - 1, ss - 1
                    break

    def _process_nak(self, sseq: int, dseq: int, dc: int, body: bytes) -> None:
        if dseq <= self.adflr or dseq > self.dseq or sseq not in self.pending:
            return
        advisories.nak(self, dseq, sseq, dc)
        arg = body[4:].strip()
        if arg:
            delay = _parse_nak_delay(arg)
            if delay is not None:
                self._remove_from_rdq(sseq)
                p = self.pending.get(sseq)
                if p is not None:
                    p.ts = now_ns() - self.config.ack_wait + delay
                    self.save()
                    if self._ptmr is not None:
                        self._reset_ptmr(now_ns() + 10 * MS)
                return
        if sseq not in self.rdqi:
            self._add_to_rdq(sseq)
        self.signal()

    def _process_term(self, sseq: int, dseq: int, dc: int, reason: str) -> bool:
        """+TERM: acknowledged as far as redelivery goes, plus the advisory. Returns whether
        a reply is due (as for an ack)."""
        p = self.pending.get(sseq)
        answered = self.ack(sseq, p.dseq if p is not None else dseq)
        advisories.terminated(self, dseq, sseq, dc, reason)
        return answered


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
