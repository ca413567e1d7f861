"""Cluster nodes for the tests of this folder: pynatsd in the test's own event loop, nats-server
as a process, both joined to the same cluster by their route URLs.

(The general mixed-cluster harness and `pynatsd.Cluster` are built elsewhere; this is the small
part these core tests need.)
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import nats

import pynatsd
from pynatsd.options import ClusterOptions
from support.natsserver import require_nats_server
from support.ports import LOOPBACK, free_port, wait_listening
from support.processes import ServerProcess, start_server

CLUSTER = "TC"


@dataclass
class Node:
    """One node: its client and route ports, and what runs it."""

    kind: str  # "py" or "go"
    port: int
    cluster_port: int
    routes: list[str]
    server: pynatsd.Server | None = None
    process: ServerProcess | None = None
    extra: list[str] = field(default_factory=list)
    http_port: int = 0  # the monitor's port, if any
    pool_size: int = 3  # pynatsd's route pool (-1: one connection per peer)

    @property
    def url(self) -> str:
        return f"nats://{LOOPBACK}:{self.port}"

    async def start(self) -> None:
        if self.kind == "py":
            opts = ClusterOptions(
                name=CLUSTER,
                host=LOOPBACK,
                port=self.cluster_port,
                routes=list(self.routes),
                pool_size=self.pool_size,
            )
            self.server = pynatsd.Server(
                port=self.port, host=LOOPBACK, cluster=opts, http_port=self.http_port
            )
            await self.server.start()
        else:
            binary = require_nats_server()
            args = [
                "--cluster",
                f"nats://{LOOPBACK}:{self.cluster_port}",
                "--cluster_name",
                CLUSTER,
                *self.extra,
            ]
            if self.http_port:
                args += ["-m", str(self.http_port)]
            if self.routes:
                args += ["--routes", ",".join(self.routes)]
            self.process = await asyncio.to_thread(start_server, [binary], args, port=self.port)
            # nats-server opens its route listener after the client one.
            if not await asyncio.to_thread(wait_listening, self.cluster_port, 15):
                raise RuntimeError(f"nats-server's route port {self.cluster_port} never opened")

    async def stop(self) -> None:
        if self.server is not None:
            await self.server.shutdown()
            self.server = None
        if self.process is not None:
            await asyncio.to_thread(self.process.stop)
            self.process = None

    def kill(self) -> None:
        """SIGKILL a process node."""
        assert self.process is not None
        self.process.proc.kill()
        self.process.proc.wait()
        self.process = None


def plan_nodes(kinds: str, full_mesh: bool = False) -> list[Node]:
    """Nodes for `kinds` ("pgg": pynatsd, nats-server, nats-server): every node routes to the
    first (gossip completes the mesh), or to every node with `full_mesh`."""
    ports = [(free_port(), free_port()) for _ in kinds]
    seeds = [f"nats://{LOOPBACK}:{cp}" for _, cp in ports]
    nodes = []
    for i, kind in enumerate(kinds):
        routes = seeds if full_mesh else ([] if i == 0 else seeds[:1])
        nodes.append(Node("py" if kind == "p" else "go", ports[i][0], ports[i][1], list(routes)))
    return nodes


async def eventually(check: Callable[[], Awaitable[bool] | bool], timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while True:
        ok = check()
        if not isinstance(ok, bool):
            ok = await ok
        if ok:
            return
        if time.monotonic() > deadline:
            raise AssertionError("condition not met in time")
        await asyncio.sleep(0.1)


async def connect(node: Node, **kwargs: Any) -> nats.NATS:
    return await nats.connect(node.url, allow_reconnect=False, **kwargs)


async def wait_routed(publisher: nats.NATS, subscriber: nats.NATS, timeout: float = 10.0) -> None:
    """Until a message published by `publisher` reaches `subscriber` (interest has crossed)."""
    inbox = subscriber.new_inbox()
    sub = await subscriber.subscribe(inbox)
    await subscriber.flush()

    async def arrived() -> bool:
        await publisher.publish(inbox, b"probe")
        await publisher.flush()
        try:
            await sub.next_msg(timeout=0.2)
        except nats.errors.TimeoutError:
            return False
        return True

    await eventually(arrived, timeout)
    await sub.unsubscribe()


async def wait_all_routed(clients: list[nats.NATS], timeout: float = 10.0) -> None:
    """Until every client's messages reach every other client (the mesh carries interest)."""
    for a in clients:
        for b in clients:
            if a is not b:
                await wait_routed(a, b, timeout)
