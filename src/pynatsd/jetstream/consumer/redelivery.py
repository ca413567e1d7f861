"""What waits for an acknowledgement and what is delivered again: the ack wait, backoff,
the redelivery queue and `max_deliver`.

From nats-server's `server/consumer.go`: trackPending, checkPending, the redelivery queue
(addToRedeliverQueue, ...), incDeliveryCount/decDeliveryCount and hasMaxDeliveries. A delivery
waits in the state's `pending` (stream seq -> `Pending`) until its ack (acks.py); once its ack
wait (or backoff step) passes, it goes to the redelivery queue (`rdq`), served before new
messages, and the state's `rdc` counts its redeliveries against `max_deliver`. What this needs
of its consumer is a `RedeliveryOwner`.
"""

from __future__ import annotations

from collections import deque
from typing import TYPE_CHECKING, Protocol

from pynatsd.jetstream.consumer.state import MS, NS, ConsumerState, Pending
from pynatsd.jetstream.consumer.status import TERM_UNACKED_DELETED
from pynatsd.jetstream.util import now_ns

if TYPE_CHECKING:
    import asyncio

    from pynatsd.jetstream.consumer.ports import ConsumedStream, ConsumerHost
    from pynatsd.jetstream.consumer_config import ConsumerConfig

# Go adds 1 ms to ack-wait timers so that bursts are handled in one go (ackWaitDelay).
_ACK_WAIT_DELAY = MS


class RedeliveryOwner(Protocol):
    """What redelivery uses of its consumer."""

    @property
    def closed(self) -> bool: ...

    @property
    def config(self) -> ConsumerConfig: ...

    @property
    def stream(self) -> ConsumedStream: ...

    @property
    def ajs(self) -> ConsumerHost: ...

    def signal(self) -> None:
        """Something is due again: messages may go out."""

    def save(self) -> None: ...

    def advise_terminated(self, dseq: int, sseq: int, dc: int, reason: str) -> None: ...

    def advise_max_deliver(self, sseq: int, dc: int) -> None: ...


class Redelivery:
    """The ack wait timer, the redelivery queue and the delivery counts."""

    def __init__(self, owner: RedeliveryOwner, state: ConsumerState) -> None:
        self._owner = owner
        self._state = state
        self._stream = owner.stream
        self._ajs = owner.ajs
        self.rdq: deque[int] = deque()  # Go's rdq: stream seqs queued for redelivery
        self.rdqi: set[int] = set()  # Go's rdqi: the same seqs, for membership tests
        self._ptmr: asyncio.TimerHandle | None = None  # Go's ptmr: the pending (ack wait) timer
        self._ptmr_end = 0  # when `_ptmr` fires (ns)

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
            state.move_ack_floor(p.dseq, seq)
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

    def check_soon(self) -> None:
        """A pending message's ack wait was moved (a -NAK with a delay): look again soon."""
        if self._ptmr is not None:
            self._reset_ptmr(now_ns() + 10 * MS)

    def at_max_ack_pending(self) -> bool:
        config = self._owner.config
        maxp: int = config.max_ack_pending
        return config.ack_policy != "none" and 0 < maxp <= len(self._state.pending)

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
