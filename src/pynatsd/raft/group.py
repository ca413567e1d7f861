"""A group opened from its directory, as nats-server's `bootstrapRaftNode` and `initRaftNode`
do it: a new directory is bootstrapped with the peers known so far and the expected cluster
size; an existing one is recovered from its `peers.idx`, `tav.idx`, newest snapshot and log.

`GroupDirectory` is the node's `GroupFiles` on such a directory (`raft/files.py` has the
formats).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from pathlib import Path

from pynatsd.raft import files
from pynatsd.raft.log import FileLog, MemoryLog, RaftLog
from pynatsd.raft.node import NATS_TIMINGS, MemoryFiles, RaftNode, Timings
from pynatsd.raft.wire import ID_LEN, PeerState


class GroupDirectory:
    """GroupFiles on a group's directory (durable: each write is fsynced before it returns)."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def write_term_vote(self, term: int, vote: str) -> None:
        files.write_term_vote(self.path, term, vote)

    def write_peer_state(self, state: PeerState) -> None:
        files.write_peer_state(self.path, state)

    def write_snapshot(self, term: int, index: int, peer_state: bytes, data: bytes) -> None:
        files.write_snapshot(self.path, term, index, peer_state, data)

    def latest_snapshot(self) -> tuple[int, int, bytes, bytes] | None:
        snap = files.read_latest_snapshot(self.path)
        if snap is None:
            return None
        return snap.last_term, snap.last_index, snap.peer_state, snap.data


def open_group(
    directory: Path | None,
    node_id: str,
    group: str,
    *,
    known_peers: Sequence[str],
    cluster_size: int,
    clock: Callable[[], float],
    timings: Timings = NATS_TIMINGS,
    observer: bool = False,
    managed: bool = False,
    sync_always: bool = False,
    rng: random.Random | None = None,
) -> tuple[RaftNode, bool]:
    """The group's node, and whether it was bootstrapped (new) rather than recovered.

    `directory` None keeps the group in memory (a memory stream's group: nats-server keeps its
    log in memory too, and such a node is rebuilt from its peers after a restart).
    """
    for peer in known_peers:
        if len(peer) != ID_LEN:
            raise ValueError(f"raft: illegal peer: {peer!r}")
    log_: RaftLog
    group_files: GroupDirectory | MemoryFiles
    if directory is None:
        log_, group_files = MemoryLog(), MemoryFiles()
        state, term, vote, snapshot = None, 0, "", None
    else:
        directory.mkdir(parents=True, exist_ok=True)
        group_files = GroupDirectory(directory)
        state = files.read_peer_state(directory)
        term, vote = files.read_term_vote(directory)
        snapshot = group_files.latest_snapshot()
        log_ = FileLog(directory / "wal", sync_always=sync_always)
    bootstrapped = state is None
    if state is None:
        state = PeerState(tuple(known_peers), max(cluster_size, len(known_peers)))
        group_files.write_peer_state(state)
    node = RaftNode(
        node_id,
        group,
        log_,
        group_files,
        state,
        term=term,
        vote=vote,
        clock=clock,
        rng=rng,
        timings=timings,
        observer=observer,
        managed=managed,
        recovering=not bootstrapped,
        snapshot=snapshot,
    )
    return node, bootstrapped
