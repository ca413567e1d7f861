"""WebSocket clients: the same protocol in WebSocket frames, side by side with TCP clients."""

from __future__ import annotations

from pathlib import Path

import nats
import pytest

import pynatsd
from support.configured import server_from_config
from support.ports import free_port


@pytest.fixture
async def ws_server(tmp_path: Path) -> pynatsd.Server:
    conf = f"websocket {{\n  port: {free_port()}\n  no_tls: true\n}}\n"
    async with server_from_config(tmp_path, conf) as server:
        yield server


async def test_websocket_and_tcp_clients_talk(ws_server: pynatsd.Server) -> None:
    ws = await nats.connect(f"ws://127.0.0.1:{ws_server.websocket_port}")
    tcp = await nats.connect(ws_server.client_url)
    sub = await ws.subscribe("mixed")
    await ws.flush()
    await tcp.publish("mixed", b"from tcp", headers={"H": "1"})
    msg = await sub.next_msg(timeout=2)
    assert (msg.data, msg.headers) == (b"from tcp", {"H": "1"})

    async def echo(m: nats.aio.msg.Msg) -> None:
        await m.respond(m.data[::-1])

    await tcp.subscribe("rev", cb=echo)
    await tcp.flush()
    assert (await ws.request("rev", b"abc", timeout=2)).data == b"cba"
    await ws.close()
    await tcp.close()


async def test_websocket_large_payload(ws_server: pynatsd.Server) -> None:
    ws = await nats.connect(f"ws://127.0.0.1:{ws_server.websocket_port}")
    sub = await ws.subscribe("big")
    payload = bytes(range(256)) * 2048  # 512 KiB: many WebSocket frames
    await ws.publish("big", payload)
    assert (await sub.next_msg(timeout=5)).data == payload
    await ws.close()
