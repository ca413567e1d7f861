"""This server's member of the JetStream meta group `_meta_` (nats-server's `setupMetaGroup`,
`monitorCluster`, `applyMetaEntries`, `processLeaderChange`).

Every JetStream-enabled server of a cluster is a peer of one NRG group named `_meta_`, in the
system account, with its files in `<store>/jetstream/$SYS/_js_/_meta_`. A new directory is
bootstrapped with the peers known at start (ourselves, and the JetStream servers whose route
INFO we already have) and nats-server's expected size: at least 2, at least the number of
configured routes (each route URL counts as a server, even one to ourselves). The peers are
then learned the RAFT way: a leader adds whoever answers it (an unmanaged group), so a pynatsd
node joins a nats-server cluster's meta group, and nats-server nodes join ours, with nothing
configured.

The members apply the same assignments (`assignments.MetaState`). Placing and serving
replicated streams builds on this (docs/jetstream-cluster.md says what is done and what not).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pynatsd.jetstream.cluster.assignments import MetaEntryError, MetaOp, MetaState, decode_entry
from pynatsd.jetstream.cluster.peers import replica_infos
from pynatsd.jetstream.util import go_hash
from pynatsd.logger import log
from pynatsd.raft.group import open_group
from pynatsd.raft.node import NATS_TIMINGS, Committed, RaftNode, Timings
from pynatsd.raft.transport import NrgTransport
from pynatsd.raft.wire import EntryType

if TYPE_CHECKING:
    from pynatsd.server.server import Server

META_GROUP = "_meta_"  # defaultMetaGroupName
SYSTEM_STORE_DIR = "_js_"  # defaultStoreDirName


class MetaGroup:
    """The meta group seen from this server: its RAFT node, the assignments, the names of
    the peers (for monitoring), and whether the upper layer may act as meta leader."""

    def __init__(self, server: Server, store_dir: str, timings: Timings = NATS_TIMINGS) -> None:
        self.server = server
        self.store_dir = store_dir  # the JetStream store root, `<store>/jetstream`
        self.timings = timings
        self.node_id = go_hash(server.server_name)
        self.state = MetaState()
        self.names: dict[str, str] = {self.node_id: server.server_name}  # node id -> name
        self.is_leader = False  # the upper layer's view: set once the leader has applied all
        self.leader_since = 0.0
        self.node: RaftNode | None = None
        self.started = 0.0
        self.transport: NrgTransport | None = None
        self.known_jetstream: set[str] = set()  # node ids of JetStream servers seen on routes
        # Told of every assignment applied (jetstream/cluster/clustered.py places replicas).
        self.on_assignment: Callable[[MetaOp, dict[str, Any]], None] | None = None
        # While the log replays at start-up: what it holds was answered long ago.
        self.replaying = False

    def clock(self) -> float:
        return asyncio.get_running_loop().time()

    def leaderless(self) -> bool:
        """isLeaderless: no leader known, and running long enough to know (nats-server waits
        its lost-quorum interval, 10 s, after start-up before it says so)."""
        node = self.node
        if node is None or node.leader:
            return False
        return self.clock() - self.started > node.timings.lost_quorum

    def was_clustered(self) -> bool:
        """The group's files name other peers: this server was in a JetStream cluster."""
        node = self.node
        return node is not None and len(node.peers) > 1

    @property
    def directory(self) -> Path:
        system = self.server.system_account
        return Path(self.store_dir) / system.name / SYSTEM_STORE_DIR / META_GROUP

    def start(self) -> None:
        server = self.server
        known = [self.node_id, *sorted(self.known_jetstream - {self.node_id})]
        routes = server.options.cluster.routes if server.options.cluster else []
        expected = max(2, len(known), len(routes))
        if not (self.directory / "peers.idx").exists():
            log.info("JetStream cluster bootstrapping")
        else:
            log.info("JetStream cluster recovering state")
        self.replaying = True
        node, bootstrapped = open_group(
            self.directory,
            self.node_id,
            META_GROUP,
            known_peers=known,
            cluster_size=expected,
            clock=self.clock,
            timings=self.timings,
        )
        self.node = node
        self.started = self.clock()
        self.transport = NrgTransport(
            node, server.system_account, server.publish_internal, self._on_commit, self._on_leader
        )
        self.transport.start()  # applies what the log replayed
        self.replaying = False
        if bootstrapped:
            # A new group campaigns soon (nats-server's Campaign after a bootstrap).
            node.campaign()
            self.transport.pump()

    def stop(self) -> None:
        if self.transport is not None:
            self.transport.close()
        if self.node is not None:
            self.node.log.close()

    def peer_changed(self, server_id: str, info: dict[str, Any] | None) -> None:
        """A route's INFO names a server (its node id is the hash of its name)."""
        if info is None:
            return
        name = str(info.get("server_name") or "")
        if not name:
            return
        node_id = go_hash(name)
        self.names[node_id] = name
        if info.get("jetstream"):
            self.known_jetstream.add(node_id)

    # ----- what the group commits
    def _on_commit(self, committed: Committed) -> None:
        for entry in committed.entries:
            if entry.type == EntryType.SNAPSHOT:
                try:
                    self.state.load_snapshot(entry.data)
                except MetaEntryError as e:
                    log.error("JetStream cluster could not apply meta snapshot: %s", e)
            elif entry.type == EntryType.NORMAL:
                try:
                    op, assignment = decode_entry(entry.data)
                except MetaEntryError as e:
                    log.error("JetStream cluster could not decode meta entry: %s", e)
                    continue
                self.state.apply(op, assignment)
                if self.on_assignment is not None:
                    self.on_assignment(op, assignment)
        assert self.node is not None
        self.node.on_applied(committed.index)

    def _on_leader(self, is_leader: bool) -> None:
        """processLeaderChange: the notices nats-server logs."""
        self.is_leader = is_leader
        node = self.node
        if is_leader:
            self.leader_since = time.time()
            log.info("Self is new JetStream cluster metadata leader")
            return
        leader = node.leader if node is not None else ""
        if not leader:
            log.info("JetStream cluster no metadata leader")
        elif leader not in self.names:
            log.info("JetStream cluster new remote metadata leader")
        else:
            log.info(
                "JetStream cluster new metadata leader: %s/%s",
                self.names[leader],
                self.server.cluster_name,
            )

    # ----- monitoring
    def leader_name(self) -> str:
        node = self.node
        if node is None or not node.leader:
            return ""
        return self.names.get(node.leader, "")

    def cluster_info(self) -> dict[str, Any]:
        """MetaClusterInfo, as /jsz `meta_cluster` shows it."""
        node = self.node
        out: dict[str, Any] = {"name": self.server.cluster_name}
        if node is None:
            return out
        leader = self.leader_name()
        if leader:
            out["leader"] = leader
        if node.leader:
            out["peer"] = node.leader
        replicas = self.replicas()
        if replicas:
            out["replicas"] = replicas
        out["cluster_size"] = node.cluster_size
        out["quorum_needed"] = node.quorum
        out["pending"] = 0
        return out

    def replicas(self) -> list[dict[str, Any]]:
        """Every peer but this server, by name (`raft.Peers`, `raftNodeToClusterInfo`)."""
        node = self.node
        if node is None:
            return []
        return replica_infos(node, list(node.peers), self.node_id, self.names)
