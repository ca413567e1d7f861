"""The JetStream meta group `_meta_` across real server processes: pynatsd nodes alone, and
pynatsd nodes as ordinary members of the same group as nats-server nodes (same NRG wire format,
membership learned the RAFT way). What is compared is what an operator sees: every node's
`/jsz` `meta_cluster` (leader, cluster size, replicas)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import nats
import pytest

from support.cluster import GO, PY, ProcessCluster
from support.eventually import eventually

# nats-server's election timeout is 4-9 s; a kill, an election and the news reaching everyone
# fit well inside this.
ELECTION = 40.0


def start(kinds: list[str], tmp_path: Path) -> ProcessCluster:
    stores = {i: f'jetstream {{ store_dir: "{tmp_path}/js{i}" }}\n' for i in range(len(kinds))}
    cluster = ProcessCluster(kinds, tmp_path, node_config=stores)
    cluster.start()
    return cluster


def meta(cluster: ProcessCluster, index: int) -> dict[str, Any]:
    from support.cluster import _http_json

    info = _http_json(cluster.nodes[index].http_port, "/jsz")["meta_cluster"]
    assert isinstance(info, dict)
    return info


def agreed_leader(cluster: ProcessCluster, among: list[int], not_: str = "") -> str:
    """The one leader every node in `among` names, with the full cluster size; "" if not yet.
    A follower names the leader it last heard from until it holds an election, so a test that
    killed the leader says it is `not_` that one."""
    views = [meta(cluster, i) for i in among]
    leaders = {v.get("leader", "") for v in views}
    sizes = {v.get("cluster_size") for v in views}
    if len(leaders) == 1 and not leaders & {"", not_} and sizes == {len(cluster.nodes)}:
        return leaders.pop()
    return ""


def replicas_current(cluster: ProcessCluster, leader_index: int) -> set[str]:
    return {r["name"] for r in meta(cluster, leader_index).get("replicas", []) if r["current"]}


def index_of(cluster: ProcessCluster, name: str) -> int:
    return next(n.index for n in cluster.nodes if n.name == name)


def test_three_pynatsd_nodes_elect_one_meta_leader(tmp_path: Path) -> None:
    with start([PY, PY, PY], tmp_path) as cluster:
        leader = eventually(lambda: agreed_leader(cluster, [0, 1, 2]), ELECTION, "one leader")
        info = meta(cluster, index_of(cluster, leader))
        assert info["quorum_needed"] == 2
        others = {n.name for n in cluster.nodes} - {leader}
        eventually(lambda: replicas_current(cluster, index_of(cluster, leader)) == others, 15)


@pytest.mark.parametrize("kinds", [[GO, GO, PY], [GO, PY, PY]], ids=["2go-1py", "1go-2py"])
def test_pynatsd_is_a_member_of_the_same_meta_group_as_nats_server(
    tmp_path: Path, kinds: list[str]
) -> None:
    """Whoever leads, every node names it, and the leader counts every other node current:
    a Go leader the pynatsd nodes, a pynatsd leader the Go node."""
    with start(kinds, tmp_path) as cluster:
        leader = eventually(lambda: agreed_leader(cluster, [0, 1, 2]), ELECTION, "one leader")
        others = {n.name for n in cluster.nodes} - {leader}
        at = index_of(cluster, leader)
        eventually(lambda: replicas_current(cluster, at) == others, 15, "all current")
        for view in (meta(cluster, i) for i in range(3)):
            assert view["peer"] == meta(cluster, at)["peer"]


def test_nats_server_follows_a_pynatsd_meta_leader_after_its_own_leader_dies(
    tmp_path: Path,
) -> None:
    """Kill the meta leader whatever its kind until a pynatsd node leads; the nats-server node
    that comes back follows it, and the pynatsd leader counts it current."""
    with start([GO, PY, PY], tmp_path) as cluster:
        leader = eventually(lambda: agreed_leader(cluster, [0, 1, 2]), ELECTION, "one leader")
        if leader == cluster.nodes[0].name:
            cluster.kill(0)
            dead = cluster.nodes[0].name
            leader = eventually(lambda: agreed_leader(cluster, [1, 2], dead), ELECTION, "new")
            assert leader != cluster.nodes[0].name
            cluster.restart(0)
        assert cluster.nodes[index_of(cluster, leader)].kind == PY
        eventually(lambda: agreed_leader(cluster, [0, 1, 2]) == leader, ELECTION, "Go follows")
        at = index_of(cluster, leader)
        eventually(lambda: cluster.nodes[0].name in replicas_current(cluster, at), 15)


SYSTEM_USERS = """
accounts {
  SYS { users = [{user: sys, password: sys}] }
  APP { jetstream: enabled, users = [{user: app, password: app}] }
}
system_account: SYS
no_auth_user: app
"""


def test_nats_server_hands_the_meta_lead_to_pynatsd_and_takes_it_back(tmp_path: Path) -> None:
    """A Go meta leader asked to step down in favour of the pynatsd node sends it an
    EntryLeaderTransfer: the pynatsd node campaigns at once and leads the Go nodes. Killed, it
    is replaced by a Go node, and restarted it follows."""
    stores = {i: f'jetstream {{ store_dir: "{tmp_path}/js{i}" }}\n' for i in range(3)}
    cluster = ProcessCluster([GO, GO, PY], tmp_path, node_config=stores, extra_config=SYSTEM_USERS)
    cluster.start()
    with cluster:
        leader = eventually(lambda: agreed_leader(cluster, [0, 1, 2]), ELECTION, "one leader")
        py = cluster.nodes[2].name
        if leader != py:
            at = index_of(cluster, leader)
            eventually(lambda: py in replicas_current(cluster, at), 15, "py current")
            reply = asyncio.run(
                system_request(
                    cluster.nodes[at].port,
                    "$JS.API.META.LEADER.STEPDOWN",
                    {"placement": {"preferred": py}},
                )
            )
            assert reply.get("success") is True, reply
        eventually(lambda: agreed_leader(cluster, [0, 1, 2]) == py, ELECTION, "py leads")
        eventually(lambda: replicas_current(cluster, 2) == {"n1", "n2"}, 15, "Go current")
        # Asked the same way, the pynatsd leader hands the lead back to the Go node named.
        reply = asyncio.run(
            system_request(
                cluster.nodes[2].port,
                "$JS.API.META.LEADER.STEPDOWN",
                {"placement": {"preferred": "n1"}},
            )
        )
        assert reply == {
            "type": "io.nats.jetstream.api.v1.meta_leader_stepdown_response",
            "success": True,
        }
        eventually(lambda: agreed_leader(cluster, [0, 1, 2]) == "n1", ELECTION, "n1 leads")
        at = index_of(cluster, "n1")
        eventually(lambda: py in replicas_current(cluster, at), 15, "py current again")
        reply = asyncio.run(
            system_request(
                cluster.nodes[0].port,
                "$JS.API.META.LEADER.STEPDOWN",
                {"placement": {"preferred": py}},
            )
        )
        assert reply.get("success") is True, reply
        eventually(lambda: agreed_leader(cluster, [0, 1, 2]) == py, ELECTION, "py leads again")
        cluster.kill(2)
        new = eventually(lambda: agreed_leader(cluster, [0, 1], py), ELECTION, "Go leader")
        assert new in ("n1", "n2")
        cluster.restart(2)
        eventually(lambda: agreed_leader(cluster, [0, 1, 2]) == new, ELECTION, "py follows")


async def system_request(port: int, subject: str, body: dict[str, Any]) -> dict[str, Any]:
    nc = await nats.connect(f"nats://127.0.0.1:{port}", user="sys", password="sys")
    try:
        msg = await nc.request(subject, json.dumps(body).encode(), timeout=10)
        reply = json.loads(msg.data)
        assert isinstance(reply, dict)
        return reply
    finally:
        await nc.close()
