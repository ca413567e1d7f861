"""A leaf's stream of LMSGs with the same line (taken as runs by the receiving hub, then sent by
delivery plan) reaches the hub's subscribers whole and in wire order, side by side with a
nats-server hub: other lines, a message with headers and a PING in between, runs split across
reads, a subscriber that comes between two runs of a line (the plan is made again), and
JetStream's API subjects, denied on a leaf of a non-system account; the hub's /leafz counts
the messages as nats-server's does."""

from __future__ import annotations

import json
from pathlib import Path

from leafnode.topology import Node, hub_conf, running
from support.linkruns import COUNT, deliveries
from support.ports import free_port
from support.rawclient import RawClient

CONNECT = {
    "version": "2.15.1",
    "server_id": "NRAWLEAFRAWLEAFRAWLEAFRAWLEAFRAWLEAFRAWLEAFRAWLEAFRAWL",
    "name": "rawleaf",
    "cluster": "RAWLEAF",
    "headers": True,
    "compress_mode": "off",
    "remote_account": "$G",
    "protocol": 1,
}


async def _raw_leaf(port: int) -> RawClient:
    """A leaf connection as nats-server's spoke makes one, registered with the hub."""
    leaf = await RawClient.connect(port)
    await leaf.send(b"CONNECT " + json.dumps(CONNECT).encode() + b"\r\nPING\r\n")
    await leaf.read_until(b"PONG\r\n")
    return leaf


async def _run(kind: str, directory: Path) -> tuple[object, ...]:
    leaf_port = free_port()
    hub = Node(kind, "HUB", hub_conf(leaf_port), directory)
    async with running(hub):
        leaf = await _raw_leaf(leaf_port)
        got = await deliveries(hub.port, leaf, b"LMSG ")
        leafz = await hub.leafz()
        await leaf.close()
    return *got, [(c["in_msgs"], c["in_bytes"]) for c in leafz["leafs"]]


async def test_runs_reach_hub_subscribers_as_from_nats_server(tmp_path: Path) -> None:
    (tmp_path / "go").mkdir()
    (tmp_path / "py").mkdir()
    first, second, counts = await _run("go", tmp_path / "go")
    assert len(first) > COUNT and len(second) > 90  # the runs were delivered at all
    # nats-server checks its deny list (here JetStream's API) on what it sends a leaf and on
    # the interest a leaf brings, not on the messages a leaf sends: a nats-server leaf never
    # sends these. pynatsd drops them as they come too, whether their line was planned or not.
    first = [m for m in first if not m[0].startswith(b"$JS.API.")]
    assert await _run("py", tmp_path / "py") == (first, second, counts)
