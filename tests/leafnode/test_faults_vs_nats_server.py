"""Leaf node faults and filters, pynatsd against nats-server: bad input on a leaf connection gets
nats-server's error, `deny_imports`/`deny_exports` keep subjects on their side, and a leaf that
stops reading never stalls the hub's own clients."""

from __future__ import annotations

import asyncio
import json
import socket
from pathlib import Path

import pytest

from leafnode.topology import (
    Node,
    connect,
    hub_conf,
    leaf_conf,
    remote,
    running,
    wait_leafs,
)
from support.cluster import wait_interest
from support.ports import LOOPBACK, free_port

# Bounded: lines read from a hub while looking for its answer.
MAX_LINES = 200


def _after_handshake(port: int, send: bytes) -> bytes:
    """Be a leaf of the hub at `port` (no credentials needed), send `send`, and return the
    first -ERR line the hub answers with (b"" if it closes first)."""
    with socket.create_connection((LOOPBACK, port), timeout=5) as sock:
        reader = sock.makefile("rb")
        reader.readline()  # INFO
        sock.sendall(b'CONNECT {"name":"RAW","headers":true}\r\n' + send)
        for _ in range(MAX_LINES):
            line = reader.readline()
            if not line or line.startswith(b"-ERR"):
                return line
        return b""


def _before_connect(port: int, send: bytes) -> bytes:
    """Send `send` to the hub at `port` before any CONNECT: its answer's first line."""
    with socket.create_connection((LOOPBACK, port), timeout=5) as sock:
        reader = sock.makefile("rb")
        info = json.loads(reader.readline()[5:])
        assert info["leafnode_urls"] and info["client_id"] and info["auth_required"]
        sock.sendall(send)
        return reader.readline()


def _dead_leaf(port: int) -> socket.socket:
    """A leaf of the hub at `port` that subscribes to `slow.>` and never reads again."""
    sock = socket.create_connection((LOOPBACK, port), timeout=5)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.makefile("rb").readline()
    sock.sendall(b'CONNECT {"name":"DEAD"}\r\nLS+ slow.>\r\n')
    return sock


@pytest.mark.parametrize("hub_kind", ["go", "py"])
async def test_bad_input_gets_nats_servers_error(tmp_path: Path, hub_kind: str) -> None:
    port = free_port()
    hub = Node(hub_kind, "HUB", hub_conf(port), tmp_path)
    async with running(hub):
        answers = [
            await asyncio.to_thread(_after_handshake, port, send)
            for send in (b"FOO bar\r\n", b"RS+ $G foo\r\n")
        ]
        # An unknown op is refused with -ERR; a route op closes the connection without a word.
        assert answers == [b"-ERR 'Unknown Protocol Operation'\r\n", b""]
        first = await asyncio.to_thread(_before_connect, port, b"LS+ foo\r\n")
        assert first == b"-ERR 'Authorization Violation'\r\n"


async def test_deny_imports_and_exports(tmp_path: Path, setup: tuple[str, str]) -> None:
    hub_kind, leaf_kind = setup
    port = free_port()
    hub = Node(hub_kind, "HUB", hub_conf(port), tmp_path)
    fields = ', deny_imports: ["di.>"], deny_exports: ["de.>"]'
    leaf = Node(
        leaf_kind, "LEAF", leaf_conf(remote(f"nats-leaf://{LOOPBACK}:{port}", fields)), tmp_path
    )
    async with running(hub, leaf):
        await wait_leafs(hub, 1)
        ch, cl = await connect(hub), await connect(leaf)
        try:
            at_leaf = await cl.subscribe("*.x")
            at_hub = await ch.subscribe("*.x")
            await wait_interest(cl, [ch])
            await wait_interest(ch, [cl])
            # Each side publishes a denied subject, then one that passes: once that one is in,
            # the denied one would have been too (a connection keeps its order).
            await ch.publish("di.x", b"hub")
            await ch.publish("ok.x", b"hub")
            await cl.publish("de.x", b"leaf")
            await cl.publish("ok.x", b"leaf")
            await ch.flush()
            await cl.flush()
            from_hub = [await at_leaf.next_msg(timeout=5) for _ in range(3)]
            from_leaf = [await at_hub.next_msg(timeout=5) for _ in range(3)]
            assert sorted(f"{m.subject}:{m.data.decode()}" for m in from_hub) == [
                "de.x:leaf",
                "ok.x:hub",
                "ok.x:leaf",
            ]
            assert sorted(f"{m.subject}:{m.data.decode()}" for m in from_leaf) == [
                "di.x:hub",
                "ok.x:hub",
                "ok.x:leaf",
            ]
        finally:
            await ch.close()
            await cl.close()


async def test_dead_leaf_never_stalls_local_clients(tmp_path: Path) -> None:
    """A leaf that subscribes and then never reads is closed as a slow consumer; the hub's
    own subscriber gets every message meanwhile."""
    port = free_port()
    hub = Node("py", "HUB", hub_conf(port, "max_pending: 256KB"), tmp_path)
    await hub.start()
    dead = await asyncio.to_thread(_dead_leaf, port)
    try:
        await wait_leafs(hub, 1)
        ch = await connect(hub)
        try:
            sub = await ch.subscribe("slow.x")
            payload = b"x" * 16384
            count = 400  # 6.4 MB: far past what the dead leaf's socket and budget hold
            for _ in range(count):
                await ch.publish("slow.x", payload)
            await ch.flush()
            for _ in range(count):
                assert (await sub.next_msg(timeout=5)).data == payload
            await wait_leafs(hub, 0)
        finally:
            await ch.close()
    finally:
        dead.close()
        await hub.stop()
