"""Which message a consumer delivers next: redeliveries first, then the last-per-subject
skip list, then the stream.

From nats-server's `server/consumer.go`: getNextMsg, and the "redo" of loopAndGatherMsgs
that puts back a message no one could take. Within one pump round the stream is read a run
at a time (the read-ahead), which the pump forgets at the end of the round. What the reader
needs of its consumer is a `ReaderOwner`; it moves the state's sequences, the redelivery
queue (`Redelivery`) and the `PendingCount`, and terminates (`AckTracker`) a redelivery whose
message is gone.
"""

from __future__ import annotations

from collections import deque
from typing import TYPE_CHECKING, Protocol

from pynatsd.jetstream.consumer.status import TERM_UNACKED_DELETED

if TYPE_CHECKING:
    from pynatsd.jetstream.consumer.acks import AckTracker
    from pynatsd.jetstream.consumer.count import PendingCount
    from pynatsd.jetstream.consumer.ports import ConsumedStream
    from pynatsd.jetstream.consumer.redelivery import Redelivery
    from pynatsd.jetstream.consumer.state import ConsumerState
    from pynatsd.jetstream.consumer.waiting import PullRequest
    from pynatsd.jetstream.consumer_config import ConsumerConfig
    from pynatsd.jetstream.store.base import StoredMsg

# Messages a pump round reads from the store at once (StreamReader._next_from_stream).
_READ_AHEAD = 128


class ReaderOwner(Protocol):
    """What the reader uses of its consumer."""

    @property
    def config(self) -> ConsumerConfig: ...

    @property
    def push(self) -> bool: ...

    @property
    def filters(self) -> list[str]: ...

    @property
    def stream(self) -> ConsumedStream: ...

    @property
    def state(self) -> ConsumerState: ...

    def advise_max_deliver(self, sseq: int, dc: int) -> None: ...


class StreamReader:
    """The next message to deliver and its delivery count."""

    def __init__(
        self,
        owner: ReaderOwner,
        acks: AckTracker,
        redelivery: Redelivery,
        count: PendingCount,
        waiting: deque[PullRequest],
    ) -> None:
        self._owner = owner
        self._state = owner.state
        self._stream = owner.stream
        self._acks = acks
        self._redelivery = redelivery
        self._count = count
        self._waiting = waiting  # the pull requests: a round reads ahead what they want
        self.ahead: deque[StoredMsg] = deque()  # read-ahead of one pump round
        self.from_lss = False  # the last message next_msg gave came from the skip list

    def put_back(self, seq: int, dc: int) -> None:
        """No request could take the message after all: put it back (Go's "redo")."""
        state = self._state
        if dc == 1 and self.from_lss:
            state.lss = [seq, *(state.lss or [])]
            state.sseq = seq
        elif dc == 1 and seq == state.sseq - 1:
            state.sseq -= 1
            if self._count.npc is not None:
                self._count.npc += 1
        elif seq not in self._redelivery.rdqi:
            self._redelivery.dec_delivery_count(seq)
            self._redelivery.add_to_rdq(seq, front=True)

    def next_msg(self) -> tuple[StoredMsg, int] | None:
        """Go's getNextMsg: redeliveries first, then the skip list, then the stream. Returns
        the message and its delivery count (Go's dc: 1 for a first delivery)."""
        store = self._stream.store
        state = self._state
        redelivery = self._redelivery
        max_deliver = self._owner.config.max_deliver
        self.from_lss = False
        rdq = redelivery.rdq
        while rdq:
            seq = rdq.popleft()
            redelivery.rdqi.discard(seq)
            dc = redelivery.inc_delivery_count(seq)
            if max_deliver > 0 and dc > max_deliver:
                if dc == max_deliver + 1:
                    self._owner.advise_max_deliver(seq, dc - 1)
                p = state.pending.pop(seq, None)
                if p is not None:
                    state.move_ack_floor(p.dseq, seq)
                continue
            msg = store.load_msg(seq)
            if msg is None:
                redelivery.dec_delivery_count(seq)
                p = state.pending.get(seq)
                if p is not None:
                    self._acks.process_term(seq, p.dseq, dc - 1, TERM_UNACKED_DELETED)
                continue
            return msg, dc
        if redelivery.at_max_ack_pending():
            return None
        if state.lss is not None:
            while state.lss:
                seq = state.lss.pop(0)
                if not state.lss:
                    state.sseq = state.lss_resume
                    state.lss = None
                else:
                    state.sseq = seq
                state.sseq += 1
                msg = store.load_msg(seq)
                if msg is not None:
                    self.from_lss = True
                    return msg, 1
            state.lss = None
            state.sseq = max(state.sseq, state.lss_resume + 1)
        msg = self._next_from_stream()
        if msg is None:
            last = store.state().last_seq
            if last >= state.sseq:
                state.sseq = last + 1
            return None
        state.sseq = msg.seq + 1
        if self._count.npc:
            self._count.npc -= 1
        return msg, 1

    def _next_from_stream(self) -> StoredMsg | None:
        """The next message at or after `sseq` for this consumer. Within one pump round the
        store is read a run at a time (as many as the waiting requests want, at most
        `_READ_AHEAD`); a message removed since the run was read is skipped, and every
        message that arrives later has a higher sequence than the run."""
        ahead = self.ahead
        store = self._stream.store
        sseq = self._state.sseq
        while ahead:
            msg = ahead.popleft()
            if msg.seq >= sseq and store.msg_ts(msg.seq) is not None:
                return msg
        owner = self._owner
        filters = owner.filters
        if len(filters) > 1:
            return self.load_next(sseq)
        want = _READ_AHEAD if owner.push else min(sum(wr.n for wr in self._waiting), _READ_AHEAD)
        flt = filters[0] if filters else ""
        if want <= 1:
            return store.load_next_msg(flt, sseq)
        ahead.extend(store.load_next_msgs(flt, sseq, want))
        return ahead.popleft() if ahead else None

    def load_next(self, start: int) -> StoredMsg | None:
        """The first message at or after `start` that the consumer's filters take."""
        store = self._stream.store
        filters = self._owner.filters
        if not filters:
            return store.load_next_msg("", start)
        if len(filters) == 1:
            return store.load_next_msg(filters[0], start)
        best: StoredMsg | None = None
        for f in filters:
            msg = store.load_next_msg(f, start)
            if msg is not None and (best is None or msg.seq < best.seq):
                best = msg
        return best
