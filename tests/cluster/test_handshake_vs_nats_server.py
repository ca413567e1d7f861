"""A raw route peer against the route port of nats-server and of pynatsd: the handshake's
refusals, bad input, and the RS+/RS- a queue group's weight changes produce, side by side."""

from __future__ import annotations

import asyncio
import json

import pytest

import pynatsd
from cluster.nodes import CLUSTER, Node, connect, plan_nodes, wait_routed
from pynatsd.options import ClusterOptions

PEER_ID = "NPYRAWPEER0000000000000000000000000000000000000000000001"
GOOD_CONNECT = (
    b'CONNECT {"echo":true,"verbose":false,"pedantic":false,"tls_required":false,'
    b'"headers":true,"name":"' + PEER_ID.encode() + b'","cluster":"' + CLUSTER.encode() + b'"}\r\n'
)


def peer_info(port: int, **extra: object) -> bytes:
    info: dict[str, object] = {
        "server_id": PEER_ID,
        "server_name": "RAW",
        "version": "2.15.1",
        "proto": 2,
        "host": "127.0.0.1",
        "port": port,
        "headers": True,
        "max_payload": 1048576,
        "cluster": CLUSTER,
        **extra,
    }
    return b"INFO " + json.dumps(info).encode() + b"\r\n"


async def _exchange(node: Node, send: bytes, quiet: float = 0.5) -> tuple[bytes, bool]:
    """Connect to the route port, read its INFO, send `send`; what came back and whether the
    server closed the connection."""
    reader, writer = await asyncio.open_connection("127.0.0.1", node.cluster_port)
    try:
        first = await asyncio.wait_for(reader.readline(), 5)
        assert first.startswith(b"INFO {")
        writer.write(send)
        await writer.drain()
        data = b""
        closed = False
        while True:
            try:
                chunk = await asyncio.wait_for(reader.read(65536), quiet)
            except TimeoutError:
                break
            if not chunk:
                closed = True
                break
            data += chunk
        return data, closed
    finally:
        writer.close()


async def _both(scenario: bytes) -> list[tuple[list[bytes], bool]]:
    seen = []
    for kind in "gp":
        (node,) = plan_nodes(kind)
        await node.start()
        try:
            data, closed = await _exchange(node, scenario)
        finally:
            await node.stop()
        errs = [line for line in data.split(b"\r\n") if line.startswith(b"-ERR")]
        seen.append((errs, closed))
    return seen


@pytest.mark.parametrize(
    ("scenario", "expected"),
    [
        (b"PING\r\n", [b"-ERR 'Authorization Violation'"]),
        (
            b'CONNECT {"lang":"python","verbose":false}\r\n',
            [b"-ERR 'attempted to connect to route port'"],
        ),
        (
            GOOD_CONNECT.replace(CLUSTER.encode(), b"WRONG"),
            [b'-ERR \'Rejecting connection, cluster name "WRONG" does not match "TC"\''],
        ),
        (GOOD_CONNECT + peer_info(1) + b"FOO\r\n", [b"-ERR 'Unknown Protocol Operation'"]),
        (GOOD_CONNECT + peer_info(1) + b"RS+ $G\r\n", []),
        (
            GOOD_CONNECT + peer_info(1, route_pool_size=3, route_pool_idx=7),
            [b"-ERR 'Invalid route pool index: 7 - pool size is 3'"],
        ),
        (
            GOOD_CONNECT + peer_info(1, route_pool_size=3, route_account="$G"),
            [b"-ERR 'No route for account \"$G\"'"],
        ),
        (
            GOOD_CONNECT + peer_info(1, route_pool_size=3, route_account="NOPE"),
            [b"-ERR 'Unable to lookup account \"NOPE\": account missing'"],
        ),
    ],
)
async def test_refusals(scenario: bytes, expected: list[bytes]) -> None:
    go, py = await _both(scenario)
    assert go == (expected, True)
    assert py == go


async def _queue_weights(node: Node) -> list[bytes]:
    reader, writer = await asyncio.open_connection("127.0.0.1", node.cluster_port)
    client = await connect(node)
    try:
        await asyncio.wait_for(reader.readline(), 5)
        writer.write(GOOD_CONNECT + peer_info(1))
        await writer.drain()
        await asyncio.sleep(0.3)
        seen: list[bytes] = []

        async def drain() -> None:
            while True:
                try:
                    chunk = await asyncio.wait_for(reader.read(65536), 0.3)
                except TimeoutError:
                    return
                seen.extend(
                    line for line in chunk.split(b"\r\n") if line.startswith((b"RS+ $G", b"RS- $G"))
                )

        await drain()
        seen.clear()  # the initial interest dump
        s1 = await client.subscribe("bar", queue="q1")
        await client.flush()
        s2 = await client.subscribe("bar", queue="q1")
        await client.flush()
        p1 = await client.subscribe("foo")
        await client.flush()
        p2 = await client.subscribe("foo")
        await client.flush()
        await drain()
        for sub in (s1, s2, p1, p2):
            await sub.unsubscribe()
            await client.flush()
        await drain()
        return seen
    finally:
        await client.close()
        writer.close()


async def test_queue_weights_and_plain_interest() -> None:
    results = []
    for kind in "gp":
        (node,) = plan_nodes(kind)
        await node.start()
        try:
            results.append(await _queue_weights(node))
        finally:
            await node.stop()
    go, py = results
    assert go == [
        b"RS+ $G bar q1 1",
        b"RS+ $G bar q1 2",
        b"RS+ $G foo",
        b"RS+ $G bar q1 1",
        b"RS- $G bar q1",
        b"RS- $G foo",
    ]
    assert py == go


async def test_cluster_authorization() -> None:
    """`cluster { authorization }`: a peer without the credentials is refused as nats-server
    refuses it; pynatsd dialing with `user:pass@` in the route URL joins a Go node."""
    seen = []
    for kind in "gp":
        (node,) = plan_nodes(kind)
        if kind == "g":
            node.extra = ["--cluster", f"nats://ruser:rpass@127.0.0.1:{node.cluster_port}"]
            await node.start()
        else:
            node.server = pynatsd.Server(
                port=node.port,
                host="127.0.0.1",
                cluster=ClusterOptions(
                    name=CLUSTER,
                    host="127.0.0.1",
                    port=node.cluster_port,
                    username="ruser",
                    password="rpass",
                ),
            )
            await node.server.start()
        try:
            data, closed = await _exchange(node, GOOD_CONNECT + peer_info(1))
            errs = [line for line in data.split(b"\r\n") if line.startswith(b"-ERR")]
            seen.append((errs, closed))
            if kind == "g":
                (py,) = plan_nodes("p")
                py.routes = [f"nats://ruser:rpass@127.0.0.1:{node.cluster_port}"]
                await py.start()
                try:
                    cp, cg = await connect(py), await connect(node)
                    await wait_routed(cp, cg)
                    await wait_routed(cg, cp)
                    await cp.close()
                    await cg.close()
                finally:
                    await py.stop()
        finally:
            await node.stop()
    assert seen[0] == ([b"-ERR 'Authorization Violation'"], True)
    assert seen[1] == seen[0]
