"""`pullrun.PullRun`, the compiled loop of a pull consumer's run, against a model written the
plain way (Go's waitQueue as a deque, the reply formatted per message, `stored_msg_frame`),
and the compiled module against its pure-Python copy."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from types import ModuleType
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pynatsd import native
from pynatsd.jetstream.consumer import pullrun
from pynatsd.jetstream.consumer.state import Pending
from pynatsd.jetstream.store.base import StoredMsg
from pynatsd.protocol.frames import stored_msg_frame

PREFIX = b"$JS.ACK.S.C."
NOW = 1_700_000_000_000_000_000


@dataclass
class Req:
    n: int
    direct: bool  # framed by the run (a plain receiver), else handed to the caller
    headers: bool
    sid: bytes


def _drive(module: ModuleType, reqs: list[Req], msgs: list[StoredMsg], ack: bool, npc: int) -> Any:
    """What `DeliveryPump._pull_run` does with a `PullRun`: returns each receiver's frames, what
    went to the caller, the queue left, the counters and the pending entries."""
    pending: dict[int, Pending] | None = {3: Pending(1, 5)} if ack else None
    run = module.PullRun(PREFIX, 10, npc, pending, NOW, Pending)
    outs: list[list[bytes] | None] = [[] if r.direct else None for r in reqs]
    for r, out in zip(reqs, outs, strict=True):
        run.add_request(r.n, out, r.sid, r.headers)
    slow: list[tuple[int, int, bytes]] = []
    i = 0
    while True:
        i = run.frame_msgs(msgs, i)
        if i >= len(msgs) or not run.queue:
            break
        k = run.take()
        slow.append((k, msgs[i].seq, run.next_reply(msgs[i].seq, msgs[i].ts)))
        i += 1
    counts = (list(run.left), list(run.given), list(run.sent), list(run.nbytes))
    table = None if pending is None else {s: (p.dseq, p.ts) for s, p in pending.items()}
    return outs, slow, i, run.order(), counts, (run.dseq, run.npc, run.seq), table


def _model(reqs: list[Req], msgs: list[StoredMsg], ack: bool, npc: int) -> Any:
    """The same, as the loop was written before it was compiled."""
    pending: dict[int, tuple[int, int]] | None = {3: (1, 5)} if ack else None
    outs: list[list[bytes] | None] = [[] if r.direct else None for r in reqs]
    left = [r.n for r in reqs]
    given_ = [0] * len(reqs)
    sent = [0] * len(reqs)
    nbytes = [0] * len(reqs)
    waiting = deque(range(len(reqs)))
    slow: list[tuple[int, int, bytes]] = []
    dseq, seq, i = 10, 0, 0
    for msg in msgs:
        if not waiting:
            break
        k = waiting[0]
        left[k] -= 1
        given_[k] += 1
        if left[k] <= 0:
            waiting.popleft()
        elif len(waiting) > 1:
            waiting.rotate(-1)
        seq = msg.seq
        if npc:
            npc -= 1
        reply = b"%s1.%d.%d.%d.%d" % (PREFIX, seq, dseq, msg.ts, npc)
        if pending is not None:
            pending[seq] = (pending[seq][0], NOW) if seq in pending else (dseq, NOW)
        dseq += 1
        out = outs[k]
        if out is not None and (reqs[k].headers or not msg.header):
            out.append(
                stored_msg_frame(msg.subject.encode(), reqs[k].sid, reply, msg.header, msg.data)
            )
            sent[k] += 1
            nbytes[k] += len(msg.header) + len(msg.data)
        else:
            slow.append((k, seq, reply))
        i += 1
    counts = (left, given_, sent, nbytes)
    return outs, slow, i, list(waiting), counts, (dseq, npc, seq), pending


requests = st.lists(
    st.builds(
        Req,
        n=st.integers(1, 6),
        direct=st.booleans(),
        headers=st.booleans(),
        sid=st.sampled_from([b"1", b"22", b"abc"]),
    ),
    min_size=1,
    max_size=5,
)


@st.composite
def stored(draw: st.DrawFn) -> list[StoredMsg]:
    count = draw(st.integers(1, 20))
    seqs = sorted(draw(st.sets(st.integers(1, 60), min_size=count, max_size=count)))
    return [
        StoredMsg(
            seq,
            draw(st.sampled_from(["s.a", "s.b", "s.é"])),
            draw(st.sampled_from([b"", b"NATS/1.0\r\nK: v\r\n\r\n"])),
            draw(st.binary(max_size=8)),
            draw(st.integers(0, 2**62)),
        )
        for seq in seqs
    ]


@given(requests, stored(), st.booleans(), st.integers(0, 30))
def test_the_run_hands_out_as_the_plain_loop_did(
    reqs: list[Req], msgs: list[StoredMsg], ack: bool, npc: int
) -> None:
    assert _drive(pullrun, reqs, msgs, ack, npc) == _model(reqs, msgs, ack, npc)


@pytest.mark.skipif(not native.select().compiled, reason="the pure-Python path is active")
@given(requests, stored(), st.booleans(), st.integers(0, 30))
def test_compiled_run_is_the_pure_run(
    reqs: list[Req], msgs: list[StoredMsg], ack: bool, npc: int
) -> None:
    assert native.is_compiled(pullrun)
    pure = native.load_pure("pynatsd.jetstream.consumer.pullrun")
    assert _drive(pullrun, reqs, msgs, ack, npc) == _drive(pure, reqs, msgs, ack, npc)
