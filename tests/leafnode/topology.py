"""Servers joined by leaf node connections for the tests of this folder: pynatsd in the test's own
event loop, nats-server as a process, each configured from the same configuration text.

A scenario is written once against `Topology` and run for the all-nats-server setup and for the
mixed ones (a pynatsd leaf of a nats-server hub, a nats-server leaf of a pynatsd hub); the test
compares what the clients observed.
"""

from __future__ import annotations

import asyncio
import json
import time
import urllib.request
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import nats
import nats.errors

import pynatsd
from pynatsd.config import load_config
from support.cluster import wait_interest
from support.natsserver import require_nats_server
from support.ports import LOOPBACK, free_port
from support.processes import ServerProcess, start_server

# (hub kind, leaf kind): the reference first.
SETUPS = [("go", "go"), ("go", "py"), ("py", "go")]
SETUP_IDS = ["go-hub-go-leaf", "go-hub-py-leaf", "py-hub-go-leaf"]


@dataclass
class Node:
    """One server: its ports, its configuration (without `port`, `listen` or `http`), and what
    runs it."""

    kind: str  # "py" or "go"
    name: str
    conf: str
    directory: Path
    port: int = field(default_factory=free_port)
    http_port: int = field(default_factory=free_port)
    server: pynatsd.Server | None = None
    process: ServerProcess | None = None

    @property
    def url(self) -> str:
        return f"nats://{LOOPBACK}:{self.port}"

    def _text(self) -> str:
        return (
            f"server_name: {self.name}\nhost: {LOOPBACK}\nport: {self.port}\n"
            f"http: {LOOPBACK}:{self.http_port}\n{self.conf}\n"
        )

    async def start(self) -> None:
        path = self.directory / f"{self.name}-{self.kind}.conf"
        path.write_text(self._text())
        if self.kind == "py":
            self.server = pynatsd.Server(load_config(path).options)
            await self.server.start()
        else:
            binary = require_nats_server()
            self.process = await asyncio.to_thread(
                start_server, [binary], ["-c", str(path)], port=self.port
            )

    async def stop(self) -> None:
        if self.server is not None:
            await self.server.shutdown()
            self.server = None
        if self.process is not None:
            await asyncio.to_thread(self.process.stop)
            self.process = None

    def log_text(self) -> str:
        return self.process.log_text() if self.process is not None else ""

    async def leafz(self, query: str = "") -> dict[str, Any]:
        def get() -> dict[str, Any]:
            url = f"http://{LOOPBACK}:{self.http_port}/leafz{query}"
            with urllib.request.urlopen(url, timeout=5) as r:
                data: dict[str, Any] = json.loads(r.read())
                return data

        return await asyncio.to_thread(get)

    async def varz(self) -> dict[str, Any]:
        def get() -> dict[str, Any]:
            with urllib.request.urlopen(f"http://{LOOPBACK}:{self.http_port}/varz", timeout=5) as r:
                data: dict[str, Any] = json.loads(r.read())
                return data

        return await asyncio.to_thread(get)


@asynccontextmanager
async def running(*nodes: Node) -> AsyncIterator[None]:
    """Start `nodes` in order; stop them in reverse, whatever happens."""
    started: list[Node] = []
    try:
        for node in nodes:
            await node.start()
            started.append(node)
        yield
    finally:
        for node in reversed(started):
            await node.stop()


async def eventually(check: Callable[[], Awaitable[bool]], timeout: float = 15.0) -> None:
    deadline = time.monotonic() + timeout
    while not await check():
        if time.monotonic() > deadline:
            raise AssertionError("condition not met in time")
        await asyncio.sleep(0.1)


async def wait_leafs(node: Node, count: int, timeout: float = 15.0) -> None:
    """Until `node` has `count` leaf connections registered."""

    async def check() -> bool:
        return int((await node.leafz())["leafnodes"]) == count

    await eventually(check, timeout)


async def collect(sub: nats.aio.subscription.Subscription, quiet: float = 0.3) -> list[str]:
    """Messages of `sub` as "subject:data:headers" until none comes for `quiet` seconds (after
    a flush on both sides)."""
    seen = []
    while True:
        try:
            msg = await sub.next_msg(timeout=quiet)
        except nats.errors.TimeoutError:
            return seen
        headers = ",".join(f"{k}={v}" for k, v in sorted((msg.headers or {}).items()))
        seen.append(f"{msg.subject}:{msg.data.decode()}:{headers}")


async def exchange(hub: Node, leaf: Node, prefix: str, big: int = 0) -> tuple[list[str], list[str]]:
    """Messages with and without headers published on either side for the other, as
    (what a leaf client got, what a hub client got); `big` makes the first hub-bound payload
    that many bytes long."""
    ch, cl = await connect(hub), await connect(leaf)
    try:
        on_leaf = await cl.subscribe(f"{prefix}.toleaf.>")
        on_hub = await ch.subscribe(f"{prefix}.tohub.>")
        await wait_interest(cl, [ch])
        await wait_interest(ch, [cl])
        await ch.publish(f"{prefix}.toleaf.1", b"a")
        await ch.publish(f"{prefix}.toleaf.2", b"b", headers={"X-K": "v"})
        await cl.publish(f"{prefix}.tohub.1", b"c" * (big or 1))
        await cl.publish(f"{prefix}.tohub.2", b"d", headers={"X-K": "w"})
        await ch.flush()
        await cl.flush()
        return await collect(on_leaf), await collect(on_hub)
    finally:
        await ch.close()
        await cl.close()


async def connect(node: Node, **kwargs: Any) -> nats.NATS:
    return await nats.connect(node.url, allow_reconnect=False, **kwargs)


def hub_conf(leaf_port: int, extra: str = "", authorization: str = "") -> str:
    return f"leafnodes {{\n  listen: {LOOPBACK}:{leaf_port}\n  {authorization}\n}}\n{extra}"


def leaf_conf(remotes: str, extra: str = "") -> str:
    return f"leafnodes {{\n  reconnect: 1s\n  remotes: [\n{remotes}\n  ]\n}}\n{extra}"


def remote(url: str, fields: str = "") -> str:
    return f'    {{ url: "{url}" {fields} }}'
