"""The stream catch-up protocol (pynatsd/jetstream/cluster/catchup.py), sans-IO: a leader's
`CatchupRun` and a follower's `CatchupFollower` on real stores, joined by a fake pipe that can
drop, hold back and lose messages, with a virtual clock.

Table tests give the exact records nats-server's `runCatchup` puts on the wire and what its
`processCatchupMsg` accepts; the rest drives whole catch-ups: gaps, flow control, stalls,
aborts, retries, restarts of either side, and a hypothesis property that the follower ends with
exactly the leader's messages (same sequences, contents and timestamps).
"""

from __future__ import annotations

import json
import random
from collections import deque
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pynatsd.jetstream.cluster.catchup import (
    ERR_BAD_MSG,
    ERR_NO_LEADER,
    ERR_STALLED,
    ERR_TOO_MANY_RETRIES,
    ERR_WRONG_SEQ_FOR_SKIP,
    GO_TIMINGS,
    CatchupError,
    CatchupFollower,
    CatchupRun,
    FollowerState,
    OutstandingBytes,
    Publish,
    RunState,
    Subscribe,
    SyncRequest,
    SyncSlots,
    Unsubscribe,
    apply_catchup_record,
    decode_sync_request,
    encode_sync_request,
)
from pynatsd.jetstream.cluster.entries import (
    DeleteRange,
    EntryError,
    decode_stream_msg,
    encode_delete_range,
    encode_stream_msg,
)
from pynatsd.jetstream.store import (
    FileStore,
    MemoryStore,
    StreamLimits,
    open_file_store,
    open_memory_store,
)
from pynatsd.raft.wire import put_uvarint

SYNC = "$JSC.SYNC.Ab3dEf9h"
MISMATCH = "expected sequence does not match store"  # ErrSequenceMismatch
PEER = "44jzkV9D"
HDR = b"NATS/1.0\r\nNats-Msg-Id: x\r\n\r\n"
Store = MemoryStore | FileStore


def mem() -> MemoryStore:
    return open_memory_store(StreamLimits())


def fill(store: Store, n: int, start_ts: int = 1_000) -> None:
    for i in range(n):
        store.store_msg(f"s.{i % 3}", HDR if i % 2 else b"", b"m%d" % i, ts=start_ts + i)


def contents(store: Store) -> list[tuple[int, str, bytes, bytes, int]]:
    out = []
    msg = store.load_next_msg(">", 0)
    while msg is not None:
        out.append((msg.seq, msg.subject, msg.header, msg.data, msg.ts))
        msg = store.load_next_msg(">", msg.seq + 1)
    return out


def assert_same(leader: Store, follower: Store) -> None:
    assert contents(follower) == contents(leader)
    a, b = leader.state(), follower.state()
    assert (b.messages, b.first_seq, b.last_seq, b.num_deleted) == (
        a.messages,
        a.first_seq,
        a.last_seq,
        a.num_deleted,
    )


# -- the sync request ----------------------------------------------------------------------------


def test_sync_request_is_go_json() -> None:
    request = SyncRequest(5, 100, PEER, True, 42)
    assert encode_sync_request(request) == (
        b'{"peer":"44jzkV9D","first_seq":5,"last_seq":100,"delete_ranges":true,"min_applied":42}'
    )
    assert decode_sync_request(encode_sync_request(request)) == request
    # `peer` is omitempty.
    assert encode_sync_request(SyncRequest(1, 2, "", False, 0)) == (
        b'{"first_seq":1,"last_seq":2,"delete_ranges":false,"min_applied":0}'
    )


def test_sync_request_decodes_as_go_does() -> None:
    got = decode_sync_request(b'{"First_Seq":3,"LAST_SEQ":9,"extra":[1],"delete_ranges":null}')
    assert got == SyncRequest(3, 9, "", False, 0)
    for bad in (b'{"first_seq":"3"}', b'{"first_seq":-1}', b"[1]", b"{", b'{"peer":1}'):
        with pytest.raises(EntryError):
            decode_sync_request(bad)


# -- the leader's records ------------------------------------------------------------------------


def start_run(
    store: Store, first: int, last: int, *, delete_ranges: bool = True, **kw: object
) -> CatchupRun:
    request = SyncRequest(first, last, PEER, delete_ranges, 7)
    run = CatchupRun(store, request, "$JSC.R.inbox", "$JSC.ACK.AbCdEfGh", **kw)  # type: ignore[arg-type]
    run.start(0.0)
    return run


def test_records_of_a_run_with_gaps() -> None:
    """Messages with their own sequence as lseq and an ack reply carrying the record's length,
    a single deleted sequence as an acked skip, a longer run as a deleteRangeOp without a
    reply, and an empty EOF."""
    store = mem()
    fill(store, 10)
    store.remove_msg(3)
    for seq in (5, 6, 7):
        store.remove_msg(seq)
    run = start_run(store, 2, 9)
    out = run.take_outputs()
    assert out[0] == Subscribe("$JSC.ACK.AbCdEfGh.*")
    published = [o for o in out if isinstance(o, Publish)]
    assert all(p.subject == "$JSC.R.inbox" for p in published)

    def msg_record(seq: int) -> bytes:
        m = store.load_msg(seq)
        assert m is not None
        return encode_stream_msg(m.subject, "", m.header, m.data, seq, m.ts)

    skip3 = encode_stream_msg("", "", b"", b"", 3, 0)
    expected = [
        (msg_record(2), True),
        (skip3, True),
        (msg_record(4), True),
        (b'\x0f{"First":5,"Num":3}\n', False),
        (msg_record(8), True),
        (msg_record(9), True),
        (b"", False),
    ]
    assert [p.payload for p in published] == [e[0] for e in expected]
    for p, (payload, acked) in zip(published, expected, strict=True):
        assert p.reply == (f"$JSC.ACK.AbCdEfGh.{len(payload)}" if acked else "")
    assert encode_delete_range(DeleteRange(5, 3)) == b'\x0f{"First":5,"Num":3}\n'
    assert run.state is RunState.DONE
    assert out[-1] == Unsubscribe("$JSC.ACK.AbCdEfGh.*")
    assert run.outstanding.total == 0  # what was out no longer counts once the run ended


def test_without_delete_ranges_every_gap_is_a_skip() -> None:
    store = mem()
    fill(store, 6)
    store.remove_msg(2)
    store.remove_msg(3)
    run = start_run(store, 1, 6, delete_ranges=False)
    records = [o for o in run.take_outputs() if isinstance(o, Publish)]
    skips = [decode_stream_msg(p.payload) for p in records[1:3]]
    assert [(m.subject, m.lseq, m.ts) for m in skips] == [("", 2, 0), ("", 3, 0)]
    assert all(p.reply for p in records[:-1])


def test_a_sparse_store_is_walked_message_by_message() -> None:
    """More interior deletes than twice the messages: the run jumps from message to message
    (useLoadNext), the gaps go as ranges, a gap reaching the last sequence too."""
    store = mem()
    store.store_msg("a", b"", b"1", ts=1)
    store.skip_msgs(2, 5000)
    store.store_msg("a", b"", b"2", ts=2)
    store.skip_msgs(5003, 100)
    store.store_msg("a", b"", b"3", ts=3)
    run = start_run(store, 1, 5102)
    assert run.use_load_next
    payloads = [o.payload for o in run.take_outputs() if isinstance(o, Publish)]
    assert payloads[1] == encode_delete_range(DeleteRange(2, 5000))
    assert decode_stream_msg(payloads[2]).lseq == 5002
    assert payloads[3] == encode_delete_range(DeleteRange(5003, 100))
    assert payloads[4] == b""
    follower = mem()
    for payload in payloads[:-1]:
        apply_catchup_record(follower, payload)
    assert follower.state().last_seq == 5102
    assert [m[0] for m in contents(follower)] == [1, 5002]


def test_a_leader_that_has_not_applied_the_snapshot_skips_the_request() -> None:
    store = mem()
    fill(store, 5)
    request = SyncRequest(1, 5, PEER, True, min_applied=20)
    run = CatchupRun(store, request, "in", "$JSC.ACK.x", progress=(25, 19))
    run.start(0.0)
    assert run.state is RunState.SKIPPED and run.take_outputs() == []
    run = CatchupRun(store, request, "in", "$JSC.ACK.x", progress=(19, 19))  # not in our log
    run.start(0.0)
    assert run.state is RunState.DONE


def test_a_leader_whose_store_is_short_steps_down() -> None:
    store = mem()
    fill(store, 5)
    run = CatchupRun(store, SyncRequest(1, 9, PEER, True, 3), "in", "$JSC.ACK.x", progress=(3, 3))
    run.start(0.0)
    assert run.state is RunState.STEP_DOWN and run.take_outputs() == []


def test_flow_control_waits_for_free_slots_or_the_batch_wait() -> None:
    store = mem()
    fill(store, 40)
    run = start_run(store, 1, 40, max_out_msgs=8, min_batch_slots=4)
    first = [o for o in run.take_outputs() if isinstance(o, Publish)]
    assert len(first) == 9  # Go's loop checks `outm <= maxOutMsgs` before each record
    for p in first[:5]:
        run.handle_ack(0.1, p.reply, b"")
    assert run.take_outputs() == []  # 4 free slots: not more than the minimum yet
    run.handle_ack(0.2, first[5].reply, b"")
    second = [o for o in run.take_outputs() if isinstance(o, Publish)]
    assert [decode_stream_msg(p.payload).lseq for p in second] == list(range(10, 16))
    # 9 out again: nothing more until more than 4 slots are free.
    run.tick(0.7)
    out = [*first[6:], *second]
    for p in out[:5]:
        run.handle_ack(1.0, p.reply, b"")
    assert run.take_outputs() == []
    run.handle_ack(1.1, out[5].reply, b"")
    third = [o for o in run.take_outputs() if isinstance(o, Publish)]
    assert [decode_stream_msg(p.payload).lseq for p in third] == list(range(16, 22))
    # Or until the batch wait (5 s from the first look) is over.
    for p in [*out[6:], third[0]]:
        run.handle_ack(2.0, p.reply, b"")
    assert run.take_outputs() == []
    run.tick(6.9)
    assert run.take_outputs() == []
    run.tick(7.1)
    fourth = [o for o in run.take_outputs() if isinstance(o, Publish)]
    assert [decode_stream_msg(p.payload).lseq for p in fourth] == [22, 23, 24, 25]


def test_outstanding_bytes_are_shared_by_a_servers_runs() -> None:
    store = mem()
    fill(store, 20)
    shared = OutstandingBytes(limit=100)
    a = start_run(store, 1, 20, outstanding=shared)
    sent = [o for o in a.take_outputs() if isinstance(o, Publish)]
    assert shared.total > 100 and len(sent) < 20
    b = start_run(store, 1, 20, outstanding=shared)
    assert [o for o in b.take_outputs() if isinstance(o, Publish)] == []
    a.handle_ack(0.1, sent[0].reply, b"")
    assert [o for o in a.take_outputs() if isinstance(o, Publish)]  # a takes the room again
    a.stop()  # what a still had out no longer counts
    assert shared.total == 0
    b.tick(0.6)  # the retry timer
    assert [o for o in b.take_outputs() if isinstance(o, Publish)]


def test_send_limit_splits_a_batch_into_turns() -> None:
    store = mem()
    fill(store, 10)
    store.remove_msg(4)
    store.remove_msg(5)
    whole = start_run(store, 1, 10)
    split = start_run(store, 1, 10, send_limit=3)
    records: list[Publish] = []
    for _ in range(10):
        records += [o for o in split.take_outputs() if isinstance(o, Publish)]
        if not split.wants_more:
            break
        split.resume(0.0)
    assert records == [o for o in whole.take_outputs() if isinstance(o, Publish)]


def test_a_run_ends_when_stalled_or_aborted() -> None:
    store = mem()
    fill(store, 5)
    run = start_run(store, 1, 5, max_out_msgs=1)
    run.take_outputs()
    run.tick(29.0)
    assert run.state is RunState.SENDING
    run.tick(30.5)
    assert run.state is RunState.STALLED
    assert run.take_outputs() == [Unsubscribe("$JSC.ACK.AbCdEfGh.*")]
    run = start_run(store, 1, 5, max_out_msgs=1)
    run.take_outputs()
    run.handle_ack(1.0, "$JSC.ACK.AbCdEfGh.40", ERR_STALLED.encode())
    assert run.state is RunState.ABORTED and run.outstanding.total == 0


# -- the follower's side of a record -------------------------------------------------------------


def s2_literal_block(data: bytes) -> bytes:
    """An S2 block of one literal (what s2.Encode makes of incompressible data)."""
    n = len(data) - 1
    tag = bytes(((60 << 2), n)) if n >= 60 else bytes((n << 2,))
    assert n < 256
    return put_uvarint(len(data)) + tag + data


def test_records_the_follower_takes() -> None:
    store = mem()
    fill(store, 2)
    # A message at the next sequence, with the leader's timestamp.
    assert apply_catchup_record(store, encode_stream_msg("a.b", "", HDR, b"x", 3, 77)) == 3
    msg = store.load_msg(3)
    assert msg is not None and (msg.subject, msg.header, msg.data, msg.ts) == ("a.b", HDR, b"x", 77)
    # A compressed one (op 14: an S2 block of the body).
    body = encode_stream_msg("c", "", b"", b"zz", 4, 78)[1:]
    assert apply_catchup_record(store, b"\x0e" + s2_literal_block(body)) == 4
    # A skip, a range.
    assert apply_catchup_record(store, encode_stream_msg("", "", b"", b"", 5, 0)) == 5
    assert apply_catchup_record(store, encode_delete_range(DeleteRange(6, 10))) == 15
    st = store.state()
    assert (st.messages, st.last_seq, st.num_deleted) == (4, 15, 11)
    assert store.store_msg("n", b"", b"")[0] == 16


@pytest.mark.parametrize(
    ("record", "text", "retry"),
    [
        (b"", ERR_BAD_MSG, False),
        (b"\x05{}", ERR_BAD_MSG, False),  # a purge: never a catch-up record
        (b"\x04short", ERR_BAD_MSG, False),
        (b"\x0e\xff\xff", ERR_BAD_MSG, False),  # not an S2 block
        (b'\x0f{"First":"x"}', ERR_BAD_MSG, False),
        (
            encode_stream_msg("a", "", b"", b"", 9, 1),
            "expected sequence does not match store",
            True,
        ),
        (
            encode_stream_msg("a", "", b"", b"", 2, 1),
            "expected sequence does not match store",
            True,
        ),
        (encode_stream_msg("", "", b"", b"", 9, 0), ERR_WRONG_SEQ_FOR_SKIP, True),
        (encode_delete_range(DeleteRange(2, 3)), ERR_WRONG_SEQ_FOR_SKIP, True),
    ],
)
def test_records_the_follower_refuses(record: bytes, text: str, retry: bool) -> None:
    store = mem()
    fill(store, 2)
    with pytest.raises(CatchupError) as info:
        apply_catchup_record(store, record)
    assert (info.value.text, info.value.retry) == (text, retry)
    assert store.state().last_seq == 2


# -- the follower --------------------------------------------------------------------------------


def new_follower(store: Store, last: int, **kw: object) -> CatchupFollower:
    return CatchupFollower(
        store,
        sync_subject=SYNC,
        peer=PEER,
        snapshot_last_seq=last,
        min_applied=11,
        rng=random.Random(1),
        **kw,  # type: ignore[arg-type]
    )


def test_a_follower_that_has_it_all_asks_nothing() -> None:
    store = mem()
    fill(store, 5)
    follower = new_follower(store, 5)
    follower.start(0.0)
    assert follower.state is FollowerState.DONE and follower.take_outputs() == []


def test_a_follower_asks_from_its_last_sequence() -> None:
    store = mem()
    fill(store, 5)
    follower = new_follower(store, 50)
    follower.start(0.0)
    sub, request = follower.take_outputs()
    assert isinstance(sub, Subscribe) and sub.subject.startswith("$JSC.R.")
    assert len(sub.subject) == len("$JSC.R.") + 8
    assert isinstance(request, Publish) and (request.subject, request.reply) == (SYNC, sub.subject)
    assert json.loads(request.payload) == {
        "peer": PEER,
        "first_seq": 6,
        "last_seq": 50,
        "delete_ranges": True,
        "min_applied": 11,
    }


def test_a_bad_record_fails_the_catch_up_and_tells_the_leader() -> None:
    store = mem()
    follower = new_follower(store, 3)
    follower.start(0.0)
    inbox = follower.inbox
    follower.take_outputs()
    follower.handle(0.5, inbox, "$JSC.ACK.x.9", b"\x05{}")
    assert follower.state is FollowerState.FAILED and follower.error == ERR_BAD_MSG
    assert follower.take_outputs() == [
        Publish("$JSC.ACK.x.9", "", ERR_BAD_MSG.encode()),
        Unsubscribe(inbox),
    ]
    assert follower.slots.free == 32


def test_a_short_eof_and_a_stall_ask_again_then_give_up() -> None:
    store = mem()
    follower = new_follower(store, 3)
    follower.start(0.0)
    first = follower.inbox
    follower.handle(0.5, first, "r.1", encode_stream_msg("a", "", b"", b"", 1, 5))
    follower.handle(0.6, first, "", b"")  # EOF before the snapshot's last sequence
    assert follower.state is FollowerState.RETRY_WAIT and follower.next_deadline() == 2.0
    follower.tick(2.0)
    assert follower.state is FollowerState.REQUESTED and follower.attempts == 2
    second = follower.inbox
    request = [o for o in follower.take_outputs() if isinstance(o, Publish)][-1]
    assert json.loads(request.payload)["first_seq"] == 2
    follower.handle(2.1, first, "r.2", encode_stream_msg("a", "", b"", b"", 2, 5))  # old inbox
    assert store.state().last_seq == 1
    follower.tick(7.0)  # 5 s without a first record: stalled
    assert follower.attempts == 3 and follower.inbox not in (first, second)
    follower.tick(12.5)
    assert follower.state is FollowerState.FAILED and follower.error == ERR_TOO_MANY_RETRIES


def test_a_follower_without_leader_waits_once() -> None:
    leaderless = [True]
    follower = new_follower(mem(), 3, leaderless=lambda: leaderless[0])
    follower.start(0.0)
    assert follower.state is FollowerState.WAITING_LEADER and follower.take_outputs() == []
    leaderless[0] = False
    follower.tick(5.0)
    assert follower.state is FollowerState.REQUESTED and follower.attempts == 1
    leaderless[0] = True
    follower.tick(10.0)  # stalled, and no leader now: give up
    assert follower.state is FollowerState.FAILED and follower.error == ERR_NO_LEADER


def test_sync_requests_out_at_once_are_limited() -> None:
    slots = SyncSlots(1)
    a = new_follower(mem(), 3, slots=slots)
    b = new_follower(mem(), 3, slots=slots)
    a.start(0.0)
    b.start(0.0)
    assert a.state is FollowerState.REQUESTED and b.state is FollowerState.WAITING_SLOT
    a.stop()
    b.tick(0.5)
    assert b.state is FollowerState.REQUESTED and slots.free == 0


# -- whole catch-ups over a fake pipe ------------------------------------------------------------


class Pipe:
    """A leader and a follower joined by subjects, as the system account joins two servers:
    a message to a subject nobody listens on is lost; `drop` loses any message with that
    probability; `hold` keeps messages back until the clock passes a time (a stall)."""

    def __init__(
        self,
        leader: Store,
        follower: Store,
        snapshot_last: int,
        rng: random.Random,
        drop: float = 0.0,
        send_limit: int = 1 << 30,
        max_out_msgs: int = 256 * 1024,
    ) -> None:
        self.leader = leader
        self.follower_store = follower
        self.snapshot_last = snapshot_last
        self.rng = rng
        self.drop = drop
        self.send_limit = send_limit
        self.max_out_msgs = max_out_msgs
        self.now = 0.0
        self.hold_until = 0.0
        self.queue: deque[Publish] = deque()
        self.subs: dict[str, Callable[[Publish], None]] = {}
        self.runs: list[CatchupRun] = []
        self.outstanding = OutstandingBytes()
        self.followers = 0
        self.follower = self.new_follower()
        self.subs[SYNC] = self.on_sync_request

    def new_follower(self) -> CatchupFollower:
        """A follower's catch-up for the snapshot (again after a failure: nats-server replays
        the snapshot, which starts a new one)."""
        self.followers += 1
        follower = CatchupFollower(
            self.follower_store,
            sync_subject=SYNC,
            peer=PEER,
            snapshot_last_seq=self.snapshot_last,
            min_applied=3,
            rng=random.Random(self.rng.random()),
        )
        follower.start(self.now)
        self.collect(follower.take_outputs(), self.on_follower_inbox(follower))
        return follower

    def on_follower_inbox(self, follower: CatchupFollower) -> Callable[[Publish], None]:
        def deliver(p: Publish) -> None:
            follower.handle(self.now, p.subject, p.reply, p.payload)
            self.collect(follower.take_outputs(), deliver)

        return deliver

    def on_sync_request(self, p: Publish) -> None:
        request = decode_sync_request(p.payload)
        ack = f"$JSC.ACK.{len(self.runs):08d}"
        run = CatchupRun(
            self.leader,
            request,
            p.reply,
            ack,
            outstanding=self.outstanding,
            progress=(10, 10),
            send_limit=self.send_limit,
            max_out_msgs=self.max_out_msgs,
            min_batch_slots=min(4096, self.max_out_msgs // 2),
        )
        self.runs.append(run)
        run.start(self.now)

        def on_ack(p: Publish) -> None:
            run.handle_ack(self.now, p.subject, p.payload)
            self.collect(run.take_outputs(), on_ack)

        self.collect(run.take_outputs(), on_ack)

    def collect(self, outputs: list[object], handler: Callable[[Publish], None]) -> None:
        for out in outputs:
            if isinstance(out, Subscribe):
                self.subs[out.subject] = handler
            elif isinstance(out, Unsubscribe):
                self.subs.pop(out.subject, None)
            elif isinstance(out, Publish):
                self.queue.append(out)

    def route(self, p: Publish) -> Callable[[Publish], None] | None:
        handler = self.subs.get(p.subject)
        if handler is None and p.subject.startswith("$JSC.ACK."):
            handler = self.subs.get(p.subject.rpartition(".")[0] + ".*")
        return handler

    def deliver_all(self, limit: int = 1 << 62) -> None:
        while self.queue and self.now >= self.hold_until and limit > 0:
            limit -= 1
            p = self.queue.popleft()
            if self.drop and self.rng.random() < self.drop:
                continue
            handler = self.route(p)
            if handler is not None:
                handler(p)

    def kill_runs(self) -> None:
        """The leader restarts: its runs and their subscriptions are gone, unannounced."""
        for run in self.runs:
            if not run.finished:
                run.stop()
                run.take_outputs()
                self.subs.pop(run.ack_filter, None)

    def step(self) -> None:
        """Everything that happens at this instant (deliveries, runs going on with a batch
        cut by `send_limit`, as the event loop's next turns would), then the clock moves
        to the next deadline."""
        for _ in range(10_000):
            self.deliver_all()
            wanting = [run for run in self.runs if run.wants_more]
            for run in wanting:
                run.resume(self.now)
                self.collect(run.take_outputs(), self.subs.get(run.ack_filter, lambda p: None))
            if not wanting and (not self.queue or self.now < self.hold_until):
                break
        deadlines = [d for r in self.runs if (d := r.next_deadline()) is not None]
        if (d := self.follower.next_deadline()) is not None:
            deadlines.append(d)
        if self.queue:
            deadlines.append(self.hold_until)
        self.now = max(self.now, min(deadlines)) if deadlines else self.now + 1.0
        for run in self.runs:
            run.tick(self.now)
            self.collect(run.take_outputs(), self.subs.get(run.ack_filter, lambda p: None))
        follower = self.follower
        follower.tick(self.now)
        self.collect(follower.take_outputs(), self.on_follower_inbox(follower))
        if follower.state is FollowerState.FAILED:
            self.follower = self.new_follower()

    def run(self, max_steps: int = 20_000) -> None:
        for _ in range(max_steps):
            if self.follower.state is FollowerState.DONE:
                return
            self.step()
        raise AssertionError(f"no end: {self.follower.state} after {self.now:.1f}s")


def leader_with_history(n: int, deletes: list[int], purge_to: int) -> MemoryStore:
    store = mem()
    fill(store, n)
    for seq in deletes:
        store.remove_msg(seq)
    if purge_to:
        store.purge(seq=purge_to)
    return store


def follower_behind(leader: Store, upto: int) -> MemoryStore:
    """What a follower had of the leader's stream up to `upto` (deletes included)."""
    store = mem()
    for seq in range(1, upto + 1):
        msg = leader.load_msg(seq)
        if msg is None:
            store.skip_msgs(seq, 1)
        else:
            store.store_msg(msg.subject, msg.header, msg.data, msg.ts)
    return store


def test_a_whole_catch_up() -> None:
    leader = leader_with_history(300, [5, 6, 7, 100, 250], purge_to=3)
    follower = follower_behind(leader, 50)
    pipe = Pipe(leader, follower, 300, random.Random(3), send_limit=17)
    pipe.run()
    assert_same(leader, follower)
    assert pipe.followers == 1 and len(pipe.runs) == 1


def test_an_empty_follower_catches_up_from_a_purged_leader() -> None:
    leader = leader_with_history(100, [], purge_to=60)
    follower = mem()
    Pipe(leader, follower, 100, random.Random(4)).run()
    assert_same(leader, follower)
    assert follower.state().first_seq == 60


def test_a_stall_and_a_leader_restart_mid_way() -> None:
    leader = leader_with_history(200, [10, 11], purge_to=0)
    follower = follower_behind(leader, 20)
    pipe = Pipe(leader, follower, 200, random.Random(5), max_out_msgs=16)
    pipe.deliver_all(limit=30)
    reached = follower.state().last_seq
    assert 20 < reached < 200
    pipe.hold_until = pipe.now + 45.0  # nothing gets through for a while: both sides stall
    for _ in range(1000):
        if pipe.now > 44.0:
            break
        pipe.step()
    assert pipe.runs[0].state is RunState.STALLED
    assert pipe.follower.attempts == 2 and follower.state().last_seq == reached
    pipe.kill_runs()
    pipe.hold_until = 0.0
    pipe.run()
    assert_same(leader, follower)
    assert len(pipe.runs) >= 2


def test_a_follower_restart_mid_way(tmp_path: Path) -> None:
    """The follower's file store is closed half way and reopened: a new catch-up for the same
    snapshot goes on from where the store is."""
    leader = leader_with_history(120, [30, 31, 32], purge_to=0)
    store = open_file_store(str(tmp_path / "f"), StreamLimits())
    for msg in contents(leader)[:10]:
        store.store_msg(msg[1], msg[2], msg[3], msg[4])
    pipe = Pipe(leader, store, 120, random.Random(6), max_out_msgs=8)
    pipe.deliver_all(limit=40)
    reached = store.state().last_seq
    assert 10 < reached < 120
    pipe.follower.stop()
    store.close()
    store = open_file_store(str(tmp_path / "f"), StreamLimits())
    pipe.follower_store = store
    pipe.follower = pipe.new_follower()
    pipe.run()
    assert_same(leader, store)
    store.close()


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    n=st.integers(1, 150),
    deletes=st.lists(st.integers(1, 150), max_size=40),
    purge_to=st.sampled_from([0, 0, 2, 30, 151]),
    behind=st.floats(0, 1),
    drop=st.sampled_from([0.0, 0.0, 0.01, 0.05]),
    send_limit=st.sampled_from([1, 5, 1 << 30]),
    max_out_msgs=st.sampled_from([4, 32, 256 * 1024]),
    seed=st.integers(0, 1 << 30),
)
def test_the_follower_ends_with_exactly_the_leaders_messages(
    n: int,
    deletes: list[int],
    purge_to: int,
    behind: float,
    drop: float,
    send_limit: int,
    max_out_msgs: int,
    seed: int,
) -> None:
    leader = leader_with_history(n, [d for d in deletes if d <= n], purge_to)
    last = leader.state().last_seq
    follower = follower_behind(leader, int(last * behind))
    pipe = Pipe(leader, follower, last, random.Random(seed), drop, send_limit, max_out_msgs)
    pipe.run()
    assert_same(leader, follower)
    assert pipe.outstanding.total >= 0
    if not drop:
        assert pipe.followers == 1


def test_go_timings_are_nats_servers() -> None:
    assert (GO_TIMINGS.start, GO_TIMINGS.activity, GO_TIMINGS.min_retry_wait) == (5.0, 30.0, 2.0)
