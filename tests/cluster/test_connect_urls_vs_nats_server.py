"""Clients learn the cluster's client URLs as nodes come and go: an asynchronous INFO per
change, own URL first, side by side with nats-server; and a lame-duck node's URL dropped."""

from __future__ import annotations

import asyncio
import json

from cluster.nodes import eventually, plan_nodes
from support.rawclient import RawClient


async def _infos(client: RawClient) -> list[list[str]]:
    data, _ = await client.read_all(quiet=0.3, limit=3)
    infos = [json.loads(line[5:]) for line in data.split(b"\r\n") if line.startswith(b"INFO ")]
    # Updates only, not the INFO that follows the first PONG.
    return [info.get("connect_urls", []) for info in infos if not info.get("connect_info")]


async def _join_and_leave(kind: str) -> list[list[list[str]]]:
    a, b = plan_nodes(kind * 2)
    b.routes = [f"nats://127.0.0.1:{a.cluster_port}"]
    await a.start()
    try:
        client = await RawClient.connect(a.port)
        await client.send(b'CONNECT {"protocol":1,"verbose":false}\r\nPING\r\n')
        await client.read_until(b"PONG\r\n")
        await b.start()
        joined = await _wait_infos(client)
        await b.stop()
        left = await _wait_infos(client)
        await client.close()
    finally:
        await b.stop()
        await a.stop()
    # Ports by role: "a" (the client's node), "b" (the node that joined).
    names = {f"127.0.0.1:{a.port}": "a", f"127.0.0.1:{b.port}": "b"}
    return [[[names.get(u, u) for u in urls] for urls in infos] for infos in (joined, left)]


async def _wait_infos(client: RawClient) -> list[list[str]]:
    seen: list[list[str]] = []

    async def some() -> bool:
        seen.extend(await _infos(client))
        return bool(seen)

    await eventually(some, timeout=10)
    return seen


async def test_async_info_when_nodes_join_and_leave() -> None:
    go = await _join_and_leave("g")
    py = await _join_and_leave("p")
    assert go == [[["a", "b"]], [["a"]]]
    assert py == go


async def test_lame_duck_node_dropped_from_connect_urls() -> None:
    a, b = plan_nodes("pp", full_mesh=True)
    await a.start()
    await b.start()
    try:
        assert a.server is not None and b.server is not None
        await eventually(lambda: len(a.server.connect_urls) == 2)  # type: ignore[union-attr]
        # A client on b keeps b in lame duck mode for its grace period.
        client = await RawClient.connect(b.port)
        await client.send(b'CONNECT {"protocol":1}\r\nPING\r\n')
        await client.read_until(b"PONG\r\n")
        task = asyncio.create_task(b.server.lame_duck_mode())
        await eventually(lambda: a.server.connect_urls in ([], [f"127.0.0.1:{a.port}"]))  # type: ignore[union-attr]
        task.cancel()
        await client.close()
    finally:
        await b.stop()
        await a.stop()
