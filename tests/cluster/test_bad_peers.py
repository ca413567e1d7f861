"""Route peers that misbehave: garbage after the handshake closes that route and nothing else;
a peer that stops reading is a slow consumer, closed, and never stalls local clients."""

from __future__ import annotations

import asyncio
import os

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import pynatsd
from cluster.nodes import CLUSTER, eventually
from cluster.test_handshake_vs_nats_server import GOOD_CONNECT, peer_info
from pynatsd.options import ClusterOptions


def _server(**overrides: object) -> pynatsd.Server:
    cluster = ClusterOptions(name=CLUSTER, host="127.0.0.1", port=-1)
    return pynatsd.Server(port=0, host="127.0.0.1", cluster=cluster, **overrides)


async def _handshake(server: pynatsd.Server) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    port = server.parts["cluster"].port  # type: ignore[attr-defined]
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    await asyncio.wait_for(reader.readline(), 5)
    writer.write(GOOD_CONNECT + peer_info(1))
    await writer.drain()
    return reader, writer


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.binary(min_size=1, max_size=300))
def test_garbage_never_breaks_the_server(garbage: bytes) -> None:
    async def run() -> None:
        async with _server() as server:
            _reader, writer = await _handshake(server)
            writer.write(garbage + b"\r\nRS+ $G ok\r\n" + os.urandom(20) + b"\r\n")
            await writer.drain()
            await asyncio.sleep(0.05)
            writer.close()
            client = await connect_port(server.port)
            sub = await client.subscribe("still.works")
            await client.publish("still.works", b"yes")
            msg = await sub.next_msg(timeout=5)
            assert msg.data == b"yes"
            await client.close()

    asyncio.run(run())


async def connect_port(port: int):  # type: ignore[no-untyped-def]
    import nats

    return await nats.connect(f"nats://127.0.0.1:{port}", allow_reconnect=False)


async def test_peer_that_stops_reading_is_closed_and_never_stalls_clients() -> None:
    async with _server(max_pending=2 * 1024 * 1024, write_deadline=0.5) as server:
        _reader, writer = await _handshake(server)
        writer.write(b"RS+ $G flood\r\n")
        await writer.drain()
        cluster = server.parts["cluster"]
        await eventually(lambda: len(cluster.routes) == 1)  # type: ignore[attr-defined]
        # The peer never reads again.
        client = await connect_port(server.port)
        sub = await client.subscribe("flood")
        got = 0
        payload = b"x" * 4096
        for _ in range(3000):  # 12 MB: over what the route and its socket can hold
            await client.publish("flood", payload)
        await client.flush(timeout=10)
        while got < 3000:
            await sub.next_msg(timeout=5)
            got += 1
        await eventually(lambda: not cluster.routes, timeout=5)  # type: ignore[attr-defined]
        assert server.slow_consumers >= 1
        await client.close()
        writer.close()
