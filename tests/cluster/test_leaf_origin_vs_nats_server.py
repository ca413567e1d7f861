"""A leaf cluster attached to both nodes of a hub cluster: the interest and messages of its
leaf nodes cross the hub's route as LS+/LMSG with the leaf cluster's name (`lnoc`), so that
nothing goes back to that cluster through the other hub node.

Hub cluster H: two nodes, each with a leaf listener, in every pairing of nats-server and
pynatsd (two nats-server nodes are the reference). Leaf cluster LX: two nats-server nodes, l1
dialing hub node 0 and l2 dialing hub node 1. Clients on all four servers subscribe (plain and
in a queue group) and publish; each subscriber must get each message exactly once, whichever
server it was published on. Without the origin rule a message of LX reaches the other LX node
twice: over LX's own route and back through the hub.

The raw route frames: a fake route peer that announces `lnoc` is told the interest of a leaf
of a named cluster as `LS+ <origin> <account> <subject> [<queue> <weight>]`, by nats-server
and by pynatsd alike.
"""

from __future__ import annotations

import asyncio
import json
import socket
import time
import urllib.request
from collections import Counter
from collections.abc import AsyncIterator
from pathlib import Path

import nats
import nats.errors
import pytest
from nats.aio.client import Client

from support.cluster import GO, PY, ProcessCluster, wait_interest
from support.natsserver import nats_server_binary
from support.ports import LOOPBACK, free_port

pytestmark = pytest.mark.skipif(nats_server_binary() is None, reason="nats-server not found")

MSGS = 5
SETUPS = [(GO, GO), (PY, GO), (GO, PY), (PY, PY)]
SETUP_IDS = ["go-go", "py-go", "go-py", "py-py"]


def _leaf_remote(port: int) -> str:
    """A leaf node of the hub node whose leaf port is `port`."""
    return (
        f'leafnodes {{ reconnect: 1s, remotes: [ {{ url: "nats-leaf://{LOOPBACK}:{port}" }} ] }}\n'
    )


def _leafz_count(http_port: int) -> int:
    url = f"http://{LOOPBACK}:{http_port}/leafz"
    with urllib.request.urlopen(url, timeout=2) as r:
        return int(json.loads(r.read())["leafnodes"])


async def _wait_leafs(hub: ProcessCluster) -> None:
    deadline = time.monotonic() + 20
    while True:
        counts = [await asyncio.to_thread(_leafz_count, n.http_port) for n in hub.nodes]
        if counts == [1, 1]:
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"leaf connections per hub node: {counts}")
        await asyncio.sleep(0.1)


@pytest.fixture(params=SETUPS, ids=SETUP_IDS)
async def servers(
    request: pytest.FixtureRequest, tmp_path: Path
) -> AsyncIterator[dict[str, Client]]:
    """Clients on hub nodes h0, h1 and leaf nodes l1 (on h0), l2 (on h1)."""
    leaf_ports = [free_port(), free_port()]
    hub_dir, lx_dir = tmp_path / "hub", tmp_path / "lx"
    hub_dir.mkdir()
    lx_dir.mkdir()
    hub = ProcessCluster(
        list(request.param),
        hub_dir,
        name="H",
        node_config={
            i: f'leafnodes {{ listen: "{LOOPBACK}:{p}" }}\n' for i, p in enumerate(leaf_ports)
        },
    )
    lx = ProcessCluster(
        [GO, GO],
        lx_dir,
        name="LX",
        node_config={i: _leaf_remote(p) for i, p in enumerate(leaf_ports)},
    )
    with hub, lx:
        await asyncio.to_thread(hub.start)
        await asyncio.to_thread(lx.start)
        await _wait_leafs(hub)
        clients: dict[str, Client] = {}
        try:
            for name, node in (
                ("h0", hub.nodes[0]),
                ("h1", hub.nodes[1]),
                ("l1", lx.nodes[0]),
                ("l2", lx.nodes[1]),
            ):
                clients[name] = await nats.connect(node.url, allow_reconnect=False)
            yield clients
        finally:
            for client in clients.values():
                await client.close()


async def _drain(counts: Counter[str], total: int, quiet: float = 0.5) -> None:
    """Until `total` messages were counted, and then `quiet` seconds with no more."""
    deadline = time.monotonic() + 10
    while sum(counts.values()) < total and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
    last = -1
    while last != sum(counts.values()):
        last = sum(counts.values())
        await asyncio.sleep(quiet)


async def test_each_subscriber_gets_each_message_once(servers: dict[str, Client]) -> None:
    got: Counter[str] = Counter()

    def counter(name: str):  # type: ignore[no-untyped-def]
        async def on_msg(msg: object) -> None:
            got[name] += 1

        return on_msg

    for name, client in servers.items():
        await client.subscribe("all.sub", cb=counter(name))
        await client.subscribe("all.q", queue="g1", cb=counter(f"q:{name}"))
    for client in servers.values():
        await wait_interest(client, list(servers.values()))
    for client in servers.values():
        for i in range(MSGS):
            await client.publish("all.sub", b"%d" % i)
            await client.publish("all.q", b"%d" % i)
        await client.flush()
    publishers = len(servers)
    await _drain(got, len(servers) * publishers * MSGS + publishers * MSGS)
    plain = {name: got[name] for name in servers}
    assert plain == dict.fromkeys(servers, publishers * MSGS)
    assert sum(got[f"q:{name}"] for name in servers) == publishers * MSGS


async def test_leaf_queue_group_served_once_from_the_hub(servers: dict[str, Client]) -> None:
    """A queue group whose members are all in the leaf cluster, behind the other hub node."""
    got: Counter[str] = Counter()

    async def on_msg(msg: object) -> None:
        got["l2"] += 1

    await servers["l2"].subscribe("lx.q", queue="workers", cb=on_msg)
    await wait_interest(servers["l2"], [servers["h0"], servers["h1"], servers["l1"]])
    for name in ("h0", "h1", "l1"):
        for i in range(MSGS):
            await servers[name].publish("lx.q", b"%d" % i)
        await servers[name].flush()
    await _drain(got, 3 * MSGS)
    assert got["l2"] == 3 * MSGS


# -- raw route frames --------------------------------------------------------------------------


def _read_until(sock: socket.socket, needle: bytes, timeout: float = 10.0) -> bytes:
    data = b""
    deadline = time.monotonic() + timeout
    while needle not in data:
        sock.settimeout(max(deadline - time.monotonic(), 0.01))
        try:
            chunk = sock.recv(65536)
        except TimeoutError:
            break
        if not chunk:
            break
        data += chunk
    return data


@pytest.mark.parametrize("kind", [GO, PY])
async def test_fake_lnoc_peer_is_told_ls_plus(kind: str, tmp_path: Path) -> None:
    """A route peer that announces `lnoc` (no pool, as a minimal peer) is sent LS+ for the
    interest of a leaf of cluster LX, with a queue group's weight; LS- with the origin once
    it announced `lnocu`."""
    leaf_port = free_port()
    hub_dir, lx_dir = tmp_path / "hub", tmp_path / "lx"
    hub_dir.mkdir()
    lx_dir.mkdir()
    hub = ProcessCluster(
        [kind],
        hub_dir,
        name="H",
        cluster_config="  pool_size: -1\n",
        node_config={0: f'leafnodes {{ listen: "{LOOPBACK}:{leaf_port}" }}\n'},
    )
    lx = ProcessCluster(
        [GO],
        lx_dir,
        name="LX",
        cluster_config=[""],
        node_config={0: _leaf_remote(leaf_port)},
    )
    with hub, lx:
        await asyncio.to_thread(hub.start)
        await asyncio.to_thread(lx.start)
        deadline = time.monotonic() + 20
        while await asyncio.to_thread(_leafz_count, hub.nodes[0].http_port) != 1:
            assert time.monotonic() < deadline
            await asyncio.sleep(0.1)
        leaf = await nats.connect(lx.nodes[0].url, allow_reconnect=False)
        try:
            sub = await leaf.subscribe("lx.sub")
            qsub = await leaf.subscribe("lx.q", queue="g1")
            await leaf.flush()
            sock = socket.create_connection((LOOPBACK, hub.nodes[0].cluster_port), timeout=5)
            try:
                _read_until(sock, b"\r\n")
                info = {
                    "server_id": "NFAKEPEER",
                    "server_name": "fake",
                    "version": "2.15.1",
                    "proto": 2,
                    "host": LOOPBACK,
                    "port": free_port(),
                    "headers": True,
                    "max_payload": 1048576,
                    "cluster": "H",
                    "lnoc": True,
                    "lnocu": True,
                }
                connect = {
                    "echo": True,
                    "verbose": False,
                    "pedantic": False,
                    "tls_required": False,
                    "headers": True,
                    "name": "NFAKEPEER",
                    "cluster": "H",
                    "lnoc": True,
                }
                sock.sendall(
                    b"CONNECT %s\r\nINFO %s\r\nPING\r\n"
                    % (json.dumps(connect).encode(), json.dumps(info).encode())
                )
                told = _read_until(sock, b"LS+ LX $G lx.q g1 1\r\n")
                assert b"LS+ LX $G lx.sub\r\n" in told
                assert b"LS+ LX $G lx.q g1 1\r\n" in told
                assert b"RS+ $G lx.sub" not in told
                await sub.unsubscribe()
                await qsub.unsubscribe()
                await leaf.flush()
                gone = _read_until(sock, b"LS- LX $G lx.q g1\r\n")
                assert b"LS- LX $G lx.sub\r\n" in gone
                assert b"LS- LX $G lx.q g1\r\n" in gone
            finally:
                sock.close()
        finally:
            await leaf.close()
