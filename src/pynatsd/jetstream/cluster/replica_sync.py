"""Snapshots and catch-up of one stream replica, on the event loop (nats-server's
`monitorStream` snapshot policy, `stateSnapshot`, `processSnapshot` and the leader's
`handleClusterSyncRequest`, in `server/jetstream_cluster.go`).

- **Snapshots** (`SnapshotPolicy`, `ReplicaSync.snapshot`): the binary stream state of the
  local store at the RAFT group's applied index (`encode_stream_snapshot`, with `clfs` as
  `failed`) is installed in the node, which compacts its log up to there. When: after an
  apply once 65,536 entries or 8 MiB were applied since the last snapshot, or when an apply
  failed (clfs grew); every 2 minutes plus up to a minute at random; on winning leadership
  with no snapshot yet; on a clean shutdown. Not while the log replays at start-up, nor while
  catching up. A failure shortens the timer to 15 s and skips the other triggers; after five
  the RAFT node's own catch-ups no longer hold a snapshot back.
- **Applying a snapshot** (`apply_snapshot`): the store drops what the leader dropped (its
  first sequence, interior deletes), `clfs` becomes the snapshot's, and if the snapshot's last
  sequence is past the store's, a catch-up (`catchup.CatchupFollower`) asks the leader for the
  rest while the node is paused and everything committed meanwhile is held, to be applied in
  order once the store is there (nats-server pauses its apply queue the same way).
- **Serving catch-ups** (leader only): the assignment's `sync` subject in the system account
  starts a `catchup.CatchupRun` per request.

`PYNATSD_TEST_STREAM_SNAPSHOTS` (tests only, read when a replica starts) overrides the
policy's numbers: comma-separated `entries=N`, `bytes=N`, `interval=seconds`,
`jitter=seconds`, e.g. `entries=200,interval=5,jitter=0`; nats-server's configuration has no
such setting and pynatsd's configuration file gets none.
"""

from __future__ import annotations

import asyncio
import os
import random
import weakref
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, Any, Protocol

from pynatsd.jetstream.cluster.catchup import (
    SYNC_ACK_PREFIX,
    CatchupFollower,
    CatchupRun,
    FollowerState,
    OutstandingBytes,
    Publish,
    RunState,
    Subscribe,
    SyncSlots,
    Unsubscribe,
    decode_sync_request,
)
from pynatsd.jetstream.cluster.codec import EntryError
from pynatsd.jetstream.cluster.entries import DeleteRange
from pynatsd.jetstream.cluster.placement import sync_subject
from pynatsd.jetstream.cluster.seqset import SequenceSet
from pynatsd.jetstream.cluster.snapshots import (
    DeleteBlock,
    StreamSnapshotState,
    decode_stream_snapshot,
    encode_stream_snapshot,
)
from pynatsd.jetstream.store.base import StoreError, StreamStore
from pynatsd.logger import log
from pynatsd.raft.node import Committed, RaftNode, RaftState
from pynatsd.raft.wire import NO_PEER
from pynatsd.server.subscription import InternalClient, InternalSubscription

if TYPE_CHECKING:
    from pynatsd.jetstream.cluster.assignments import StreamAssignment
    from pynatsd.jetstream.stream import Stream
    from pynatsd.protocol.events import Pub
    from pynatsd.server.client import Client

SNAPSHOT_ENV = "PYNATSD_TEST_STREAM_SNAPSHOTS"
# Records a catch-up run sends in one turn of the event loop (the rest of its batch follows
# in the next turns: the same records on the wire, the loop never blocked for long).
SEND_LIMIT = 1024
# Runs of at least this many deleted sequences go into a snapshot as one run-length block;
# the rest as one sequence set.
RUN_BLOCK_MIN = 64


@dataclass(frozen=True, slots=True)
class SnapshotPolicy:
    """When a stream replica snapshots (monitorStream's constants)."""

    entries: int = 65536  # compactNumMin: entries applied since the last snapshot
    bytes: int = 8 * 1024 * 1024  # compactSizeMin: their bytes
    interval: float = 120.0  # compactInterval
    jitter: float = 60.0  # up to this much more, at random, so servers spread them
    retry: float = 15.0  # compactMinInterval: the timer after a failure
    forced_after: int = 4  # failures after which the node's catch-ups no longer stop one

    @classmethod
    def from_env(cls, environ: dict[str, str] | os._Environ[str] = os.environ) -> SnapshotPolicy:
        """Go's numbers, or those of PYNATSD_TEST_STREAM_SNAPSHOTS (tests)."""
        text = environ.get(SNAPSHOT_ENV, "")
        if not text:
            return cls()
        known = {f.name: f.type for f in fields(cls)}
        values: dict[str, Any] = {}
        for item in text.split(","):
            name, _, value = item.strip().partition("=")
            if name not in known:
                raise ValueError(f"{SNAPSHOT_ENV}: unknown setting {name!r}")
            values[name] = float(value) if known[name] == "float" else int(value)
        return cls(**values)


class SyncedReplica(Protocol):
    """What a ReplicaSync uses of its replica (jetstream/cluster/replica.py)."""

    stream: Stream
    node: RaftNode | None
    assignment: StreamAssignment
    node_id: str
    clfs: int
    recovering: bool

    def apply_entries(self, committed: Committed) -> None: ...


@dataclass(slots=True)
class _ServerShare:
    """What a server's replicas share: catch-up bytes out, sync requests out."""

    outstanding: OutstandingBytes
    slots: SyncSlots


_shares: weakref.WeakKeyDictionary[Any, _ServerShare] = weakref.WeakKeyDictionary()


def _share_of(server: Any) -> _ServerShare:
    share = _shares.get(server)
    if share is None:
        share = _shares[server] = _ServerShare(OutstandingBytes(), SyncSlots())
    return share


def delete_blocks(deleted: list[int]) -> tuple[DeleteBlock, ...]:
    """A store's interior deletes as snapshot delete blocks: long runs as runs, the rest in
    one sequence set (any mix is valid to nats-server's reader)."""
    runs: list[DeleteBlock] = []
    loose: list[int] = []
    i, n = 0, len(deleted)
    while i < n:
        j = i
        while j + 1 < n and deleted[j + 1] == deleted[j] + 1:
            j += 1
        if j - i + 1 >= RUN_BLOCK_MIN:
            runs.append(DeleteRange(deleted[i], j - i + 1))
        else:
            loose.extend(deleted[i : j + 1])
        i = j + 1
    if loose:
        runs.append(SequenceSet.from_sequences(loose))
    return tuple(runs)


def stream_snapshot(store: StreamStore, clfs: int) -> bytes:
    """stateSnapshot: the store's state as nats-server's binary stream snapshot."""
    st = store.state()
    state = StreamSnapshotState(
        msgs=st.messages,
        total_bytes=st.bytes,
        first_seq=st.first_seq,
        last_seq=st.last_seq,
        failed=clfs,
        deleted=delete_blocks(store.deleted_seqs()) if st.num_deleted else (),
    )
    return encode_stream_snapshot(state)


def _payload(msg: Pub) -> bytes:
    hs = msg.header_size
    return bytes(msg.payload[hs:] if hs > 0 else msg.payload)


class ReplicaSync:
    """One replica's snapshots and catch-ups."""

    def __init__(self, replica: SyncedReplica) -> None:
        self.replica = replica
        self.policy = SnapshotPolicy.from_env()
        self.rng = random.Random()
        self.held: deque[Committed] = deque()  # committed while catching up, in order
        self.draining = False
        self.follower: CatchupFollower | None = None
        self.runs: dict[str, CatchupRun] = {}  # by their ack subject filter
        self.subs: dict[str, InternalSubscription] = {}
        self._owner: InternalClient | None = None
        self.applied_bytes = 0  # entry bytes applied since the last snapshot
        self.last_clfs = 0
        self.failed_snapshots = 0
        self.snapshots = 0  # installed so far (monitoring and tests)
        self._snapshot_timer: asyncio.TimerHandle | None = None
        self._timer: asyncio.TimerHandle | None = None
        self._timer_at = 0.0
        self._retry: asyncio.TimerHandle | None = None
        self._closed = False

    # ----- the surroundings
    @property
    def stream(self) -> Stream:
        return self.replica.stream

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        return self.stream.ajs.loop

    def _gone(self) -> bool:
        node = self.replica.node
        return self._closed or self.stream.closed or node is None or node.state is RaftState.CLOSED

    @property
    def catching_up(self) -> bool:
        return self.follower is not None or self._retry is not None

    # ----- applying (the replica's apply_entries calls these)
    def hold(self, committed: Committed) -> bool:
        """While catching up, committed entries wait (in order) for the catch-up to end."""
        if not self.catching_up and (not self.held or self.draining):
            return False
        self.held.append(committed)
        return True

    def apply_snapshot(self, data: bytes, committed: Committed, position: int) -> bool:
        """processSnapshot for the EntrySnapshot at `committed.entries[position]`. True when a
        catch-up began: the rest of `committed` is held with what follows, and applied (and
        its index reported applied) once the store reaches the snapshot."""
        replica = self.replica
        stream = replica.stream
        try:
            snap = decode_stream_snapshot(data)
        except EntryError as e:
            log.error("JetStream cluster bad stream snapshot for '%s': %s", stream.name, e)
            return False
        self._adopt_deletes(snap)
        replica.clfs = snap.failed
        self.last_clfs = snap.failed
        if stream.store.state().last_seq >= snap.last_seq:
            return False
        if not str(replica.assignment.raw.get("sync") or ""):
            log.error(
                "JetStream cluster corrupt stream snapshot for '%s' (no sync subject)", stream.name
            )
            return False
        node = replica.node
        if node is None:
            return False
        if not node.pause_apply():
            node.step_down()  # a leader cannot catch up: let another lead
            node.pause_apply()
        self.held.appendleft(Committed(committed.index, committed.entries[position + 1 :]))
        self._start_catchup(snap.last_seq, committed.index)
        return True

    def applied(self, committed: Committed) -> None:
        """After the replica applied `committed` and told the node: snapshot if due."""
        self.applied_bytes += sum(len(e.data) for e in committed.entries)
        node = self.replica.node
        if node is None:
            return
        if self._snapshot_timer is None:
            self._arm_snapshot_timer(self._snapshot_delay())
        clfs = self.replica.clfs
        grew, self.last_clfs = clfs > self.last_clfs, clfs
        policy = self.policy
        if (
            node.applied - node.papplied >= policy.entries
            or self.applied_bytes > policy.bytes
            or grew
        ):
            self.snapshot()

    def _adopt_deletes(self, snap: StreamSnapshotState) -> None:
        """processSnapshotDeletes: the leader's first sequence, and its interior deletes
        among what this store has."""
        stream = self.stream
        st = stream.store.state()
        if snap.first_seq > st.first_seq:
            log.warning(
                "Catchup for stream '%s > %s' resetting first sequence: %d on catchup request",
                stream.ajs.account.name,
                stream.name,
                snap.first_seq,
            )
            stream.purge(seq=snap.first_seq)
            st = stream.store.state()
        if not snap.deleted or not st.messages:
            return
        first, last = st.first_seq, st.last_seq
        for block in snap.deleted:
            seqs: Iterable[int]
            if isinstance(block, DeleteRange):
                seqs = range(max(block.first, first), min(block.first + block.num - 1, last) + 1)
            else:
                seqs = (s for s in block if first <= s <= last)
            for seq in seqs:
                stream.remove_msg(seq)

    # ----- the follower's catch-up
    def _start_catchup(self, last_seq: int, index: int) -> None:
        replica = self.replica
        node = replica.node
        assert node is not None
        self._retry = None
        follower = CatchupFollower(
            self.stream.store,
            sync_subject=str(replica.assignment.raw.get("sync") or ""),
            peer=replica.node_id,
            snapshot_last_seq=last_seq,
            min_applied=index,
            leaderless=lambda: node.leader == NO_PEER,
            slots=_share_of(self.stream.ajs.server).slots,
            rng=self.rng,
        )
        self.follower = follower
        log.info(
            "Catchup for stream '%s > %s' from %d to %d",
            self.stream.ajs.account.name,
            self.stream.name,
            self.stream.store.state().last_seq + 1,
            last_seq,
        )
        follower.start(self.loop.time())
        self._follower_outputs(follower)

    def _on_catchup_record(self, inbox: str, msg: Pub) -> None:
        follower = self.follower
        if follower is None:
            return
        if self._gone():
            self.close()
            return
        follower.handle(self.loop.time(), inbox, msg.reply.decode(), _payload(msg))
        self._follower_outputs(follower)

    def _follower_outputs(self, follower: CatchupFollower) -> None:
        self._carry(follower.take_outputs(), self._on_catchup_record)
        if follower.state is FollowerState.DONE:
            self._caught_up(follower)
        elif follower.state is FollowerState.FAILED:
            self._catchup_failed(follower)
        self._arm()

    def _caught_up(self, follower: CatchupFollower) -> None:
        self.follower = None
        stream = self.stream
        try:
            stream.store.flush()  # what the snapshot says must be on disk (flushAllPending)
        except StoreError as e:
            log.error("Catchup for stream '%s' could not flush: %s", stream.name, e)
        stream.rebuild_msg_ids()
        if follower.records:
            log.info(
                "Catchup for stream '%s > %s' complete (took %dms, %d records)",
                stream.ajs.account.name,
                stream.name,
                round(follower.took * 1000),
                follower.records,
            )
        node = self.replica.node
        if node is not None:
            node.resume_apply()
        self._drain()
        self._pump()

    def _catchup_failed(self, follower: CatchupFollower) -> None:
        """Too many retries, no leader, a bad record: nats-server drains its apply queue and
        replays the snapshot, which starts another catch-up; so do we, a little later, the
        node still paused and the entries still held."""
        self.follower = None
        if self._gone():
            return
        log.warning(
            "Catchup for stream '%s > %s' failed: %s; will retry",
            self.stream.ajs.account.name,
            self.stream.name,
            follower.error,
        )
        last_seq, index = follower.snapshot_last_seq, follower.min_applied
        self._retry = self.loop.call_later(
            follower.timings.start, lambda: self._retry_catchup(last_seq, index)
        )

    def _retry_catchup(self, last_seq: int, index: int) -> None:
        self._retry = None
        if self._gone():
            self.close()
            return
        if self.stream.store.state().last_seq >= last_seq:
            node = self.replica.node
            if node is not None:
                node.resume_apply()
            self._drain()
            self._pump()
            return
        self._start_catchup(last_seq, index)

    def _drain(self) -> None:
        """Apply what was held, in order, until done or another catch-up begins."""
        self.draining = True
        try:
            while self.held and not self.catching_up:
                self.replica.apply_entries(self.held.popleft())
        finally:
            self.draining = False

    # ----- the leader's side
    def leader_changed(self, is_leader: bool) -> None:
        subject = str(self.replica.assignment.raw.get("sync") or "")
        if is_leader and subject and not self._closed:
            if subject not in self.subs:
                self._subscribe(subject, self._on_sync_request)
            node = self.replica.node
            if node is not None and node.papplied == 0 and node.applied > 0:
                self.snapshot()  # NeedSnapshot: none yet
        elif subject in self.subs:
            self._unsubscribe(subject)

    def _on_sync_request(self, subject: str, msg: Pub) -> None:
        reply = msg.reply.decode()
        node = self.replica.node
        if not reply or node is None or self._gone():
            return
        try:
            request = decode_sync_request(_payload(msg))
        except EntryError:
            return
        run = CatchupRun(
            self.stream.store,
            request,
            reply,
            sync_subject(SYNC_ACK_PREFIX, self.rng),
            outstanding=_share_of(self.stream.ajs.server).outstanding,
            progress=(node.pindex, node.applied),
            send_limit=SEND_LIMIT,
        )
        self.runs[run.ack_filter] = run
        run.start(self.loop.time())
        if run.state is RunState.STEP_DOWN:
            node.step_down()
            self._pump()
        self._run_outputs(run)

    def _on_ack(self, ack_filter: str, msg: Pub) -> None:
        run = self.runs.get(ack_filter)
        if run is None:
            return
        run.handle_ack(self.loop.time(), msg.subject.decode(), _payload(msg))
        self._run_outputs(run)

    def _run_outputs(self, run: CatchupRun) -> None:
        self._carry(run.take_outputs(), self._on_ack)
        if run.finished:
            self.runs.pop(run.ack_filter, None)
            if run.state is RunState.DONE:
                log.info(
                    "Catchup of stream '%s > %s' for %s complete (%d to %d)",
                    self.stream.ajs.account.name,
                    self.stream.name,
                    run.request.peer or "a peer",
                    run.request.first_seq,
                    run.request.last_seq,
                )
        elif run.wants_more:
            self.loop.call_soon(self._resume, run)
        self._arm()

    def _resume(self, run: CatchupRun) -> None:
        if self._gone():
            self.close()
            return
        if run.wants_more:
            run.resume(self.loop.time())
            self._run_outputs(run)

    # ----- snapshots
    def snapshot(self, force: bool = False) -> bool:
        """doSnapshot: install the store's state at the applied index; True if installed."""
        replica = self.replica
        node = replica.node
        if node is None or replica.recovering or self.catching_up or self.held:
            return False
        if node.state is RaftState.CLOSED:
            return False
        if not force and self.failed_snapshots > 0:
            return False
        if node.progress and self.failed_snapshots <= self.policy.forced_after:
            return self._snapshot_failed("catchups running")
        store = self.stream.store
        try:
            data = stream_snapshot(store, replica.clfs)
            store.flush()
            installed = node.install_snapshot(data)
        except (StoreError, OSError, EntryError) as e:
            return self._snapshot_failed(str(e))
        if not installed:
            return False  # nothing applied since the last one
        self.snapshots += 1
        self.applied_bytes = 0
        if self.failed_snapshots:
            self.failed_snapshots = 0
            self._arm_snapshot_timer(self._snapshot_delay())
        return True

    def _snapshot_failed(self, why: str) -> bool:
        log.warning("Failed to install snapshot for stream '%s': %s", self.stream.name, why)
        if self.failed_snapshots == 0:
            self._arm_snapshot_timer(self.policy.retry)
        self.failed_snapshots += 1
        return False

    def _snapshot_delay(self) -> float:
        return self.policy.interval + self.rng.uniform(0, self.policy.jitter)

    def _arm_snapshot_timer(self, delay: float) -> None:
        if self._snapshot_timer is not None:
            self._snapshot_timer.cancel()
        self._snapshot_timer = self.loop.call_later(delay, self._on_snapshot_timer)

    def _on_snapshot_timer(self) -> None:
        self._snapshot_timer = None
        if self._gone():
            self.close()
            return
        self.snapshot(force=self.failed_snapshots > 0)
        if self._snapshot_timer is None:
            delay = self.policy.retry if self.failed_snapshots else self._snapshot_delay()
            self._arm_snapshot_timer(delay)

    # ----- the system account
    def _carry(self, outputs: list[Any], callback: Callable[[str, Pub], None]) -> None:
        server = self.stream.ajs.server
        for out in outputs:
            if isinstance(out, Publish):
                server.publish_internal(
                    server.system_account, out.subject, out.reply, b"", out.payload
                )
            elif isinstance(out, Subscribe):
                self._subscribe(out.subject, callback)
            elif isinstance(out, Unsubscribe):
                self._unsubscribe(out.subject)

    def _subscribe(self, subject: str, callback: Callable[[str, Pub], None]) -> None:
        if self._closed:
            return
        server = self.stream.ajs.server
        if self._owner is None:
            self._owner = InternalClient(server.system_account, f"stream-sync:{self.stream.name}")

        def on_message(sub: InternalSubscription, publisher: Client | None, msg: Pub) -> None:
            callback(subject, msg)

        sub = InternalSubscription(self._owner, subject, on_message)
        server.system_account.sublist.insert(sub)
        self.subs[subject] = sub

    def _unsubscribe(self, subject: str) -> None:
        sub = self.subs.pop(subject, None)
        if sub is not None and self._owner is not None:
            self._owner.unsubscribe(sub)

    def _pump(self) -> None:
        transport = getattr(self.replica, "transport", None)
        if transport is not None:
            transport.pump()

    # ----- the catch-up timer
    def _arm(self) -> None:
        deadlines = [d for run in self.runs.values() if (d := run.next_deadline()) is not None]
        if self.follower is not None and (d := self.follower.next_deadline()) is not None:
            deadlines.append(d)
        if not deadlines or self._closed:
            if self._timer is not None:
                self._timer.cancel()
                self._timer = None
            return
        at = min(deadlines)
        if self._timer is not None:
            if at == self._timer_at:
                return
            self._timer.cancel()
        self._timer_at = at
        self._timer = self.loop.call_at(at, self._on_timer)

    def _on_timer(self) -> None:
        self._timer = None
        if self._gone():
            self.close()
            return
        now = self.loop.time()
        for run in list(self.runs.values()):
            run.tick(now)
            self._run_outputs(run)
        follower = self.follower
        if follower is not None:
            follower.tick(now)
            self._follower_outputs(follower)
        self._arm()

    # ----- the end
    def shutdown(self) -> None:
        """A clean shutdown of the server: snapshot (a restart then replays nothing), close."""
        if not self._closed:
            self.snapshot(force=True)
        self.close()

    def close(self) -> None:
        """Stop every catch-up and timer, leave every subject (the stream goes away)."""
        if self._closed:
            return
        self._closed = True
        if self.follower is not None:
            self.follower.stop()
            self.follower = None
        for run in self.runs.values():
            run.stop()
        self.runs.clear()
        for handle in (self._timer, self._snapshot_timer, self._retry):
            if handle is not None:
                handle.cancel()
        self._timer = self._snapshot_timer = self._retry = None
        for subject in list(self.subs):
            self._unsubscribe(subject)
