"""The per-message loop of a pull consumer's run of first deliveries (pump.py's `_pull_run`).

Compiled by mypyc (docs/performance.md): nats-server's counterpart is the body of
consumer.go's loopAndGatherMsgs for one message (getNextMsg, waitQueue.pop, deliverMsg) run in
a loop. `DeliveryPump._pull_run` decides that a run may go (simple requests, receivers with an
outbound queue), reads the messages from the store and resolves each waiting request's receiver
once; this module then hands the messages out: the requests taken in Go's waitQueue order (a
request that wants more goes to the back), the `$JS.ACK` reply of each message built natively
(mypyc compiles `bytes % (bytes, int...)` to one allocation, where the interpreter parses the
format each time), the MSG/HMSG frame appended to the receiver's queue, the pending entry of an
explicit ack recorded. What it cannot frame itself (a receiver without a plain queue, headers
to a client that did not ask for them) it leaves to the caller one message at a time, with the
same round-robin and reply (`take`, `next_reply`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from pynatsd.protocol.frames import pulled_msg_frame

if TYPE_CHECKING:
    from pynatsd.jetstream.store.base import StoredMsg


class PullRun:
    """The state of one run: the waiting requests (by index, in the order the run found them)
    and the consumer's counters as they move along it."""

    # Per request, by index:
    frames: list[list[bytes] | None]  # the receiver's outbound frames, None: not framed here
    sids: list[bytes]  # the receiver's sid
    headers: list[bool]  # whether the receiver's client takes headers
    left: list[int]  # messages the request still wants (PullRequest.n)
    given: list[int]  # messages it was given in this run
    sent: list[int]  # of which framed here (the caller counts them: settle_stored)
    nbytes: list[int]  # header and body bytes of those
    # The wait queue: request indices; `pos` is its head (a ring, as Go's waitQueue rotates).
    queue: list[int]
    pos: int
    ack_prefix: bytes  # `$JS.ACK.<stream>.<consumer>.`
    dseq: int  # the next delivery sequence
    npc: int  # messages not yet delivered (the last token of the reply)
    seq: int  # the stream sequence of the last message handed out (0: none)
    pending: dict[int, Any] | None  # stream seq -> Pending; None for ack policy none
    now: int  # the delivery time of the run (ns)
    # Pending(dseq, ts), state.py's class: interpreted code reads its fields, which a slots
    # class keeps as Python ints (a compiled class would box them at each read).
    new_pending: Callable[[int, int], Any]

    def __init__(
        self,
        ack_prefix: bytes,
        dseq: int,
        npc: int,
        pending: dict[int, Any] | None,
        now: int,
        new_pending: Callable[[int, int], Any],
    ) -> None:
        self.frames = []
        self.sids = []
        self.headers = []
        self.left = []
        self.given = []
        self.sent = []
        self.nbytes = []
        self.queue = []
        self.pos = 0
        self.ack_prefix = ack_prefix
        self.dseq = dseq
        self.npc = npc
        self.seq = 0
        self.pending = pending
        self.now = now
        self.new_pending = new_pending

    def add_request(self, n: int, frames: list[bytes] | None, sid: bytes, headers: bool) -> None:
        """The next waiting request, in queue order: it wants `n` messages."""
        self.queue.append(len(self.left))
        self.frames.append(frames)
        self.sids.append(sid)
        self.headers.append(headers)
        self.left.append(n)
        self.given.append(0)
        self.sent.append(0)
        self.nbytes.append(0)

    def take(self) -> int:
        """Go's waitQueue.pop: the request at the head takes a message; one that wants more
        goes to the back of the queue, one that is served leaves it."""
        queue = self.queue
        pos = self.pos
        k = queue[pos]
        left = self.left[k] - 1
        self.left[k] = left
        self.given[k] += 1
        if left <= 0:
            del queue[pos]
            if pos >= len(queue):
                pos = 0
        elif len(queue) > 1:
            pos += 1
            if pos >= len(queue):
                pos = 0
        self.pos = pos
        return k

    def order(self) -> list[int]:
        """The requests still waiting, head first."""
        queue = self.queue
        pos = self.pos
        return queue[pos:] + queue[:pos]

    def _advance(self, seq: int) -> tuple[int, int]:
        """The next first delivery is stream sequence `seq`: its delivery sequence and the
        count left after it, and its pending entry (an explicit ack's), as Go's deliverMsg
        records them."""
        npc = self.npc
        if npc:
            npc -= 1
            self.npc = npc
        dseq = self.dseq
        pending = self.pending
        if pending is not None:
            p = pending.get(seq)
            if p is not None:
                p.ts = self.now  # a message delivered again keeps its first delivery sequence
            else:
                pending[seq] = self.new_pending(dseq, self.now)
        self.dseq = dseq + 1
        self.seq = seq
        return dseq, npc

    def next_reply(self, seq: int, ts: int) -> bytes:
        """The ack reply of the next first delivery, stream sequence `seq` (see `_advance`)."""
        dseq, npc = self._advance(seq)
        return b"%s1.%d.%d.%d.%d" % (self.ack_prefix, seq, dseq, ts, npc)

    def frame_msgs(self, msgs: list[StoredMsg], i: int) -> int:
        """Hand out `msgs[i:]` while the request at the head can be framed here; returns the
        index of the first message not handed out (the queue is empty, or its head needs the
        caller). Each frame is frames.pulled_msg_frame: stored_msg_frame with the reply made
        in the same formatting pass."""
        n = len(msgs)
        queue = self.queue
        frames = self.frames
        prefix = self.ack_prefix
        last_subject = ""
        subject_bytes = b""
        while i < n and queue:
            k = queue[self.pos]
            out = frames[k]
            if out is None:
                return i
            msg = msgs[i]
            header: bytes = msg[2]
            if header and not self.headers[k]:
                return i
            self.take()
            subject: str = msg[1]
            if subject is not last_subject:
                last_subject = subject
                subject_bytes = subject.encode()
            data: bytes = msg[3]
            seq: int = msg[0]
            ts: int = msg[4]
            dseq, npc = self._advance(seq)
            out.append(
                pulled_msg_frame(
                    subject_bytes, self.sids[k], prefix, seq, dseq, ts, npc, header, data
                )
            )
            self.sent[k] += 1
            self.nbytes[k] += len(header) + len(data)
            i += 1
        return i
