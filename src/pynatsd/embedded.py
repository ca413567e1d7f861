"""pynatsd inside a Python program or test: an async context manager and a threaded runner,
for one server or for a cluster of them (nats-server's test helpers `RunServer` and
`createClusterEx`, for users who test cluster-aware code with no binary).

async with pynatsd.Server(port=0) as server:      # in the caller's event loop
    ...
with pynatsd.ThreadedServer(port=0) as server:    # in a background thread with its own loop
    ...
async with pynatsd.Cluster(size=3) as cluster:    # three servers routed over loopback
    ...
async with pynatsd.Server.leaf_of("nats-leaf://hub:7422") as leaf:  # a leaf of a NATS system
    ...
with pynatsd.ThreadedCluster(size=3) as cluster:
    ...
"""

from __future__ import annotations

import asyncio
import dataclasses
import threading
import time
from collections.abc import Awaitable, Callable
from typing import Any

from pynatsd.assembly import attach_parts
from pynatsd.cluster import cluster_of
from pynatsd.leafnode import leafnodes_of
from pynatsd.options import ClusterOptions, LeafNodeOptions, Options, RemoteLeafOptions
from pynatsd.server.server import Server as _CoreServer

# How long Cluster.start waits for every server to have a route to every other.
FORM_TIMEOUT = 10.0


def _options(options: Options | None, overrides: dict[str, Any]) -> Options:
    opts = dataclasses.replace(options) if options is not None else Options(port=0)
    if options is None and "host" not in overrides:
        opts.host = "127.0.0.1"
    for key, value in overrides.items():
        if not hasattr(opts, key):
            raise TypeError(f"unknown server option {key!r}")
        setattr(opts, key, value)
    return opts


class Server(_CoreServer):
    """The server for embedding: `Server(port=0, max_payload=..., ...)` takes any `Options` field
    as a keyword. Binds 127.0.0.1 on a random port unless told otherwise."""

    def __init__(self, options: Options | None = None, **overrides: Any) -> None:
        super().__init__(_options(options, overrides))
        attach_parts(self)

    @classmethod
    def leaf_of(cls, *urls: str, account: str = "", **overrides: Any) -> Server:
        """A server that joins the NATS system at `urls` as a leaf node (`nats-leaf://user:
        password@hub:7422`), its `account` (default the global one) bound to the account the
        hub gives its credentials; other keywords as for `Server`."""
        remote = RemoteLeafOptions(urls=list(urls), local_account=account)
        return cls(leafnodes=LeafNodeOptions(remotes=[remote]), **overrides)

    async def wait_leafnodes(self, count: int = 1, timeout: float = FORM_TIMEOUT) -> None:
        """Return once `count` leaf node connections are up (the link is made after start,
        and again after a hub restart); TimeoutError otherwise."""
        deadline = time.monotonic() + timeout
        while True:
            part = leafnodes_of(self)
            if part is not None and len(part.leafs) >= count:
                return
            if time.monotonic() > deadline:
                raise TimeoutError(f"{count} leaf node connection(s) not up within {timeout}s")
            await asyncio.sleep(0.05)


class Cluster:
    """`size` servers in the caller's event loop, clustered over loopback: each has its own
    client port and route port (both picked by the kernel) and explicit routes to the servers
    started before it, so they form a full mesh without depending on gossip. `start` (or
    `async with`) returns once every server has a route to every other.

    `options` and the keyword overrides apply to every server, as for `Server`; a `cluster`
    block given in them (name, authorization, ...) is kept, with its listen address and routes
    replaced. Servers are named `<name>-1`, `<name>-2`, ... unless `server_name` is given.
    JetStream (`jetstream=True`) runs on the first server only, which the others' clients
    reach through the routes: pynatsd has no clustered JetStream yet (docs/clustering.md).

    As in any cluster, a subscription made on one server reaches the others asynchronously:
    a message published elsewhere right after SUB may find no interest yet (flush the
    subscriber, then allow the routes a moment, or retry a request).
    """

    def __init__(
        self,
        size: int = 3,
        options: Options | None = None,
        *,
        name: str = "pynatsd",
        **overrides: Any,
    ) -> None:
        if size < 1:
            raise ValueError("a cluster needs at least one server")
        self.size = size
        self.name = name
        self._options = options
        self._overrides = overrides
        self.servers: list[Server] = []

    @property
    def client_urls(self) -> list[str]:
        return [s.client_url for s in self.servers]

    @property
    def route_urls(self) -> list[str]:
        urls = []
        for server in self.servers:
            part = cluster_of(server)
            if part is not None:
                urls.append(f"nats-route://127.0.0.1:{part.port}")
        return urls

    def _node_options(self, index: int, routes: list[str]) -> Options:
        opts = _options(self._options, self._overrides)
        given = opts.cluster
        cluster = dataclasses.replace(given) if given is not None else ClusterOptions()
        cluster.name = cluster.name or self.name
        cluster.host, cluster.port = "127.0.0.1", -1  # any free port
        cluster.routes = list(routes)
        opts.cluster = cluster
        if not opts.server_name:
            opts.server_name = f"{self.name}-{index + 1}"
        if index:
            opts.jetstream = False  # one JetStream server per cluster (jetstream/standalone.py)
        return opts

    async def start(self, timeout: float = FORM_TIMEOUT) -> None:
        try:
            for index in range(self.size):
                server = Server(self._node_options(index, self.route_urls))
                await server.start()
                self.servers.append(server)
            await self.wait_formed(timeout)
        except BaseException:
            await self.shutdown()
            raise

    def formed(self) -> bool:
        """Every server has a route to every other."""
        for server in self.servers:
            part = cluster_of(server)
            if part is None or len(part.routes) < len(self.servers) - 1:
                return False
        return True

    async def wait_formed(self, timeout: float = FORM_TIMEOUT) -> None:
        deadline = time.monotonic() + timeout
        while not self.formed():
            if time.monotonic() > deadline:
                raise TimeoutError(f"the cluster's routes were not all up within {timeout}s")
            await asyncio.sleep(0.01)

    async def shutdown(self) -> None:
        for server in reversed(self.servers):
            await server.shutdown()

    async def wait_for_shutdown(self) -> None:
        for server in self.servers:
            await server.wait_for_shutdown()

    async def __aenter__(self) -> Cluster:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.shutdown()


class _LoopThread:
    """Runs something with async `start`, `shutdown` and `wait_for_shutdown` in a daemon
    thread with its own event loop, for synchronous code and any other event loop."""

    def __init__(self) -> None:
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._started = threading.Event()
        self._error: BaseException | None = None

    def _target(self) -> Any:
        raise NotImplementedError

    def _running(self) -> bool:
        raise NotImplementedError

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="pynatsd", daemon=True)
        self._thread.start()
        self._started.wait(30)
        if self._error is not None:
            raise self._error

    def _run(self) -> None:
        loop = asyncio.new_event_loop()
        self._loop = loop
        target = self._target()
        try:
            loop.run_until_complete(target.start())
        except BaseException as e:  # reported to the starting thread
            self._error = e
            self._started.set()
            loop.close()
            return
        self._started.set()
        loop.run_until_complete(target.wait_for_shutdown())
        loop.run_until_complete(asyncio.sleep(0))
        loop.close()

    def call(self, fn: Callable[[], Awaitable[Any]], timeout: float = 30) -> Any:
        """Run `fn()` (a coroutine function) in the thread's loop and return its result."""
        loop = self._loop
        if loop is None:
            raise RuntimeError("not started")

        async def run() -> Any:
            return await fn()

        return asyncio.run_coroutine_threadsafe(run(), loop).result(timeout)

    def stop(self) -> None:
        if self._loop is None or self._thread is None:
            return
        if self._running():
            self.call(self._target().shutdown)
        self._thread.join(30)
        self._thread = None


class ThreadedServer(_LoopThread):
    """Runs a server in a daemon thread; usable from synchronous code and any event loop."""

    def __init__(self, options: Options | None = None, **overrides: Any) -> None:
        super().__init__()
        self.server = Server(options, **overrides)

    def _target(self) -> Server:
        return self.server

    def _running(self) -> bool:
        return self.server.running

    @property
    def client_url(self) -> str:
        return self.server.client_url

    @property
    def port(self) -> int:
        return self.server.port

    @property
    def http_port(self) -> int:
        return self.server.http_port

    def __enter__(self) -> ThreadedServer:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


class ThreadedCluster(_LoopThread):
    """A `Cluster` run in a daemon thread with its own event loop (same arguments)."""

    def __init__(
        self,
        size: int = 3,
        options: Options | None = None,
        *,
        name: str = "pynatsd",
        **overrides: Any,
    ) -> None:
        super().__init__()
        self.cluster = Cluster(size, options, name=name, **overrides)

    def _target(self) -> Cluster:
        return self.cluster

    def _running(self) -> bool:
        return any(s.running for s in self.cluster.servers)

    @property
    def servers(self) -> list[Server]:
        return self.cluster.servers

    @property
    def client_urls(self) -> list[str]:
        return self.cluster.client_urls

    def __enter__(self) -> ThreadedCluster:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
