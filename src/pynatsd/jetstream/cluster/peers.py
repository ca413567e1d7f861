"""How a RAFT group's peers look in monitoring (nats-server's `raft.Peers` and
`clusterInfo`/`raftNodeToClusterInfo`), for the meta group's `/jsz` and the `cluster` block
of stream and consumer info: one rule for all three.

On the leader a peer is current when it was heard from within the lost-quorum interval and
has every committed entry (else its lag shows); on a follower only the leader can be current,
heard from within 2 s. Every peer but this server, sorted by name; an unknown name reads as
nats-server writes it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from pynatsd.raft.node import RaftNode, RaftState

FOLLOWER_CURRENT = 2.0  # a follower calls the leader current when heard from this recently


def peer_name(names: Mapping[str, str], peer: str) -> str:
    return names.get(peer, f"Server name unknown at this time (peerID: {peer})")


def replica_infos(
    node: RaftNode, peers: Iterable[str], self_id: str, names: Mapping[str, str]
) -> list[dict[str, Any]]:
    now = node.clock()
    leading = node.state is RaftState.LEADER
    out = []
    for peer in peers:
        if peer == self_id:
            continue
        progress = node.peers.get(peer)
        heard = now - progress.heard if progress is not None and progress.heard else None
        lag = 0
        if leading:
            lag = max(0, node.commit - progress.last_index) if progress is not None else 0
            current = heard is not None and heard < node.timings.lost_quorum and lag == 0
        else:
            current = peer == node.leader and heard is not None and heard < FOLLOWER_CURRENT
        info: dict[str, Any] = {
            "name": peer_name(names, peer),
            "current": current,
            "active": int((heard or 0) * 1e9),
            "peer": peer,
        }
        if lag:
            info["lag"] = lag
        out.append(info)
    out.sort(key=lambda r: r["name"])
    return out


def cluster_block(
    server: Any,
    node: RaftNode | None,
    group: str,
    peers: Iterable[str],
    self_id: str,
    names: Mapping[str, str],
) -> dict[str, Any]:
    """The `cluster` block of a stream's or consumer's info (clusterInfo): an R1 asset (no
    group) names this server as leader."""
    out: dict[str, Any] = {"name": server.cluster_name}
    if node is None:
        out["leader"] = server.server_name
        return out
    out["raft_group"] = group
    if node.leader:
        out["leader"] = names.get(node.leader, node.leader)
    out["system_account"] = True
    out["traffic_account"] = "$SYS"
    replicas = replica_infos(node, peers, self_id, names)
    if replicas:
        out["replicas"] = replicas
    return out
