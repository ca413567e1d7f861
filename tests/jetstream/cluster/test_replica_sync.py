"""A stream replica's snapshots and catch-ups on the event loop (jetstream/cluster/replica_sync.py):
the snapshot policy and its encoding of a store, and two replicas, a leader and a follower,
joined through one system account's SubList: the follower applies a snapshot past its store,
holds what commits meanwhile, catches up from the leader and then applies the held entries in
order."""

from __future__ import annotations

import asyncio
from collections import deque
from dataclasses import dataclass, field
from typing import Any

import pytest

from pynatsd.jetstream.cluster.entries import DeleteRange
from pynatsd.jetstream.cluster.replica_sync import (
    SNAPSHOT_ENV,
    ReplicaSync,
    SnapshotPolicy,
    delete_blocks,
    stream_snapshot,
)
from pynatsd.jetstream.cluster.seqset import SequenceSet
from pynatsd.jetstream.cluster.snapshots import decode_stream_snapshot
from pynatsd.jetstream.store import MemoryStore, StreamLimits, open_memory_store
from pynatsd.protocol.events import Pub
from pynatsd.raft.node import Committed, RaftState
from pynatsd.raft.wire import Entry, EntryType
from pynatsd.server.accounts import Account

SYNC = "$JSC.SYNC.Ab3dEf9h"

# -- the policy and the snapshot's bytes ---------------------------------------------------------


def test_the_policy_is_nats_servers_unless_a_test_says_otherwise() -> None:
    go = SnapshotPolicy.from_env({})
    assert (go.entries, go.bytes, go.interval, go.jitter, go.retry) == (
        65536,
        8 * 1024 * 1024,
        120.0,
        60.0,
        15.0,
    )
    test = SnapshotPolicy.from_env({SNAPSHOT_ENV: "entries=200, interval=2,jitter=0"})
    assert (test.entries, test.bytes, test.interval, test.jitter) == (200, go.bytes, 2.0, 0.0)
    with pytest.raises(ValueError, match="unknown setting"):
        SnapshotPolicy.from_env({SNAPSHOT_ENV: "entires=3"})


def test_delete_blocks_runs_and_a_set() -> None:
    deleted = [3, 5, 6, *range(100, 300), 400]
    blocks = delete_blocks(deleted)
    assert blocks[0] == DeleteRange(100, 200)
    assert isinstance(blocks[1], SequenceSet) and list(blocks[1]) == [3, 5, 6, 400]
    assert delete_blocks([]) == ()


def test_a_stores_snapshot_is_nats_servers_stream_state() -> None:
    store = open_memory_store(StreamLimits())
    # A store that never held a message: what nats-server's file store writes.
    assert stream_snapshot(store, 0) == bytes.fromhex("2a01000000000000")
    for i in range(500):
        store.store_msg("a", b"", b"x%d" % i, ts=i + 1)
    for seq in (1, 2, 7, 9, *range(100, 200)):
        store.remove_msg(seq)
    state = decode_stream_snapshot(stream_snapshot(store, 4))
    st = store.state()
    assert (state.msgs, state.total_bytes, state.first_seq, state.last_seq, state.failed) == (
        st.messages,
        st.bytes,
        3,
        500,
        4,
    )
    assert state.interior_deletes() == st.num_deleted == 102
    assert sorted(state.deleted_sequences()) == store.deleted_seqs()


# -- two replicas over one system account --------------------------------------------------------


class Server:
    """The system account and a publish that queues (a network, in order)."""

    def __init__(self) -> None:
        self.system_account = Account("$SYS")
        self.queue: deque[tuple[str, str, bytes]] = deque()
        self.loop = asyncio.get_running_loop()

    def publish_internal(
        self, account: Account, subject: str, reply: str, header: bytes, data: bytes
    ) -> bool:
        self.queue.append((subject, reply, data))
        return True

    def deliver(self) -> int:
        n = 0
        while self.queue:
            subject, reply, data = self.queue.popleft()
            for sub in self.system_account.sublist.match(subject).psubs:
                sub.callback(sub, None, Pub(subject.encode(), reply.encode(), data))  # type: ignore[attr-defined]
            n += 1
        return n


@dataclass
class Ajs:
    server: Server
    loop: asyncio.AbstractEventLoop
    account: Account = field(default_factory=lambda: Account("$G"))


class Stream:
    def __init__(self, ajs: Ajs) -> None:
        self.ajs = ajs
        self.name = "S"
        self.store: MemoryStore = open_memory_store(StreamLimits())
        self.closed = False
        self.rebuilt = 0

    def purge(self, seq: int) -> int:
        return self.store.purge(seq=seq)

    def remove_msg(self, seq: int) -> bool:
        return self.store.remove_msg(seq)

    def rebuild_msg_ids(self) -> None:
        self.rebuilt += 1


class Node:
    """What ReplicaSync asks of a RAFT node."""

    def __init__(self, leader: str) -> None:
        self.state = RaftState.FOLLOWER
        self.leader = leader
        self.paused = False
        self.applied = self.papplied = self.pindex = 0
        self.progress: dict[str, Any] = {}
        self.snapshots: list[bytes] = []
        self.steps_down = 0

    def pause_apply(self) -> bool:
        self.paused = True
        return True

    def resume_apply(self) -> None:
        self.paused = False

    def step_down(self) -> bool:
        self.steps_down += 1
        return True

    def on_applied(self, index: int) -> None:
        self.applied = max(self.applied, index)

    def install_snapshot(self, data: bytes) -> bool:
        if self.applied <= self.papplied:
            return False
        self.snapshots.append(data)
        self.papplied = self.applied
        return True


class Replica:
    """StreamReplica's apply_entries, on a fake stream: messages are stored as they come."""

    def __init__(self, server: Server, node_id: str, leader: str) -> None:
        self.stream = Stream(Ajs(server, server.loop))
        self.node = Node(leader)
        self.assignment = type("A", (), {"raw": {"sync": SYNC}})()
        self.node_id = node_id
        self.clfs = 0
        self.recovering = False
        self.applied: list[bytes] = []
        self.sync = ReplicaSync(self)  # type: ignore[arg-type]

    def apply_entries(self, committed: Committed) -> None:
        if self.sync.hold(committed):
            return
        for position, entry in enumerate(committed.entries):
            if entry.type == EntryType.SNAPSHOT:
                if self.sync.apply_snapshot(entry.data, committed, position):
                    return
                continue
            self.applied.append(entry.data)
            self.stream.store.store_msg("x", b"", entry.data)
        if committed.index:
            self.node.on_applied(committed.index)
            self.sync.applied(committed)


def normal(data: bytes) -> Entry:
    return Entry(EntryType.NORMAL, data)


async def test_a_follower_catches_up_from_the_leader_and_applies_what_it_held() -> None:
    server = Server()
    leader = Replica(server, "LEADER01", "LEADER01")
    follower = Replica(server, "FOLLOW01", "LEADER01")
    for i in range(30):
        leader.stream.store.store_msg(f"s.{i % 3}", b"", b"m%d" % i, ts=100 + i)
    for seq in (4, 10, 11, 12):
        leader.stream.store.remove_msg(seq)
    for i in range(3):  # the follower had the first three
        m = leader.stream.store.load_msg(i + 1)
        assert m is not None
        follower.stream.store.store_msg(m.subject, m.header, m.data, m.ts)
    leader.clfs = 2
    leader.sync.leader_changed(True)
    snapshot = stream_snapshot(leader.stream.store, leader.clfs)

    follower.apply_entries(Committed(40, (Entry(EntryType.SNAPSHOT, snapshot), normal(b"a"))))
    follower.apply_entries(Committed(41, (normal(b"b"),)))
    assert follower.node.paused and follower.clfs == 2
    assert follower.applied == [] and follower.node.applied == 0  # held
    assert server.deliver() > 20
    # Caught up: the held entries applied in order, after the store reached the snapshot.
    assert not follower.node.paused and follower.stream.rebuilt == 1
    assert follower.applied == [b"a", b"b"] and follower.node.applied == 41
    got = follower.stream.store
    want = leader.stream.store
    for seq in range(1, 31):
        a, b = want.load_msg(seq), got.load_msg(seq)
        assert (a is None) == (b is None), seq
        if a is not None and b is not None:
            assert (b.subject, b.data, b.ts) == (a.subject, a.data, a.ts)
    assert got.state().last_seq == 32  # then the two held entries
    assert leader.sync.runs == {} and follower.sync.subs == {}
    leader.sync.close()
    assert leader.sync.subs == {}


async def test_a_snapshot_the_store_already_has_needs_no_catch_up() -> None:
    server = Server()
    replica = Replica(server, "FOLLOW01", "LEADER01")
    for i in range(5):
        replica.stream.store.store_msg("a", b"", b"%d" % i)
    replica.stream.store.remove_msg(2)
    other = open_memory_store(StreamLimits())
    for i in range(5):
        other.store_msg("a", b"", b"%d" % i)
    for seq in (1, 3):
        other.remove_msg(seq)
    replica.apply_entries(Committed(7, (Entry(EntryType.SNAPSHOT, stream_snapshot(other, 1)),)))
    # The leader's deletes are adopted (its first sequence, an interior one).
    st = replica.stream.store.state()
    assert (st.messages, st.first_seq, st.last_seq) == (2, 4, 5)
    assert not replica.node.paused and replica.node.applied == 7 and server.queue == deque()


async def test_snapshots_follow_the_policy() -> None:
    server = Server()
    replica = Replica(server, "FOLLOW01", "LEADER01")
    replica.sync.policy = SnapshotPolicy(entries=3, bytes=1 << 30, interval=3600)
    for index in (1, 2):
        replica.apply_entries(Committed(index, (normal(b"x"),)))
    assert replica.node.snapshots == []
    replica.apply_entries(Committed(3, (normal(b"x"),)))
    assert len(replica.node.snapshots) == 1
    state = decode_stream_snapshot(replica.node.snapshots[0])
    assert (state.msgs, state.last_seq, state.failed) == (3, 3, 0)
    # An apply that fails (clfs grows) snapshots at once.
    replica.clfs = 1
    replica.apply_entries(Committed(4, (normal(b"x"),)))
    assert len(replica.node.snapshots) == 2
    # Not while the log replays, nor while the node catches a follower up, which counts as a
    # failure: the timer then comes back after 15 s.
    replica.recovering = True
    for index in (5, 6, 7):
        replica.apply_entries(Committed(index, (normal(b"x"),)))
    assert len(replica.node.snapshots) == 2
    replica.recovering = False
    replica.node.progress = {"FOLLOW02": object()}
    replica.apply_entries(Committed(8, (normal(b"x"),)))
    assert len(replica.node.snapshots) == 2 and replica.sync.failed_snapshots == 1
    replica.node.progress = {}
    assert replica.sync.snapshot(force=True)
    assert replica.sync.failed_snapshots == 0
    replica.sync.close()
