"""A cluster of server processes on loopback: nats-server and pynatsd nodes in any mix.

Each node is a subprocess (`nats-server` or `python -m pynatsd`, same configuration text or
same flags) with its own client, monitor and route ports, picked free at construction and kept
across restarts, so a node that comes back is the node the others knew. The routes are either a
full mesh (every node lists every other), a single seed (every node lists node 0, and the rest
is left to gossip), or every node listing every node including itself (the nats.py tests' way,
where a route to self must be detected and dropped).

    with ProcessCluster(["nats-server", "pynatsd", "nats-server"], tmp_path) as cluster:
        cluster.start()      # all at once; returns when every route is up
        nc = await nats.connect(cluster.nodes[1].url)
        cluster.kill(2)      # SIGKILL
        cluster.restart(2)   # same ports, waits until its routes are up again

"Routes up" is read two ways. On each node's monitor port, `/routez` must show a route to
every other running node (matched by `server_id` from `/varz`), and between two nats-server
nodes the whole pool (3 pooled connections and the `$SYS` pinned one:
nats-cluster-facts §1.2), so that no account's traffic waits for a connection still being
dialled. And, as clients see it, a message published on any node must reach a subscriber on
every other node.
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import time
import urllib.request
import uuid
from collections import Counter
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import nats
import nats.errors
from nats.aio.client import Client
from nats.aio.subscription import Subscription

from support.natsserver import NATS_SERVER
from support.ports import LOOPBACK, free_port, wait_listening
from support.processes import PYNATSD, ServerProcess

GO = "nats-server"
PY = "pynatsd"
Kind = Literal["nats-server", "pynatsd"]
Routes = Literal["mesh", "seed", "all"]

SRC = Path(__file__).resolve().parents[2] / "src"
ROUTES_TIMEOUT = 20.0
# The route listener opens with the client one; a little slack for a loaded machine.
ROUTE_LISTEN_TIMEOUT = 3.0
# Connections nats-server keeps to another nats-server node: its default pool of 3 plus the
# connection pinned to `$SYS` (nats-cluster-facts §1.2).
GO_ROUTES_PER_PEER = 4
# Kinds whose /routez the harness waits on (a kind whose /routez cannot be trusted yet is left
# out: its routes are then known from its peers' /routez and from client messages crossing).
ROUTEZ_KINDS = frozenset({"nats-server", "pynatsd"})


# What both servers log once a SIGHUP's reload is done.
RELOADED = "Reloaded server configuration"


class ClusterError(RuntimeError):
    """The cluster did not form (or re-form) in time; the message has each node's view."""


@dataclass
class Node:
    """One member: its kind, ports and the process currently running it (None while down)."""

    index: int
    kind: Kind
    name: str
    port: int
    http_port: int
    cluster_port: int
    process: ServerProcess | None = None
    # Earlier incarnations (killed or stopped), kept for their logs.
    past: list[ServerProcess] = field(default_factory=list)
    server_id: str = ""

    @property
    def url(self) -> str:
        return f"nats://{LOOPBACK}:{self.port}"

    @property
    def client_address(self) -> str:
        """The form of this node's URL in INFO `connect_urls`."""
        return f"{LOOPBACK}:{self.port}"

    @property
    def route_url(self) -> str:
        return f"nats-route://{LOOPBACK}:{self.cluster_port}"

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.alive()

    def log_text(self) -> str:
        texts = [p.log_text() for p in [*self.past, *([self.process] if self.process else [])]]
        return "\n--- restarted ---\n".join(texts)


def _raw_client(port: int) -> socket.socket:
    """A plain protocol connection (CONNECT sent, no echo of our own messages needed)."""
    sock = socket.create_connection((LOOPBACK, port), timeout=5.0)
    sock.sendall(b'CONNECT {"verbose":false,"pedantic":false,"protocol":1}\r\n')
    sock.setblocking(False)
    return sock


def _recv_available(sock: socket.socket) -> bytes:
    data = b""
    while True:
        try:
            chunk = sock.recv(65536)
        except BlockingIOError:
            return data
        if not chunk:
            return data
        if b"PING\r\n" in chunk:
            sock.sendall(b"PONG\r\n")
        data += chunk


def _http_json(port: int, path: str, timeout: float = 2.0) -> dict[str, Any]:
    with urllib.request.urlopen(f"http://{LOOPBACK}:{port}{path}", timeout=timeout) as r:
        data: dict[str, Any] = json.loads(r.read())
        return data


class ProcessCluster:
    """N server processes (N <= 3 is what the tests use; nothing here limits it) clustered over
    loopback. `kinds[i]` says what node i runs."""

    def __init__(
        self,
        kinds: Sequence[str],
        directory: Path,
        *,
        routes: Routes = "mesh",
        name: str = "C1",
        via: Literal["config", "flags"] = "config",
        extra_config: str = "",
        cluster_config: str | Sequence[str] = "",
        node_config: dict[int, str] | None = None,
    ) -> None:
        for kind in kinds:
            if kind not in (GO, PY):
                raise ValueError(f"unknown node kind {kind!r}")
        self.directory = directory
        self.cluster_name = name
        self.routes: Routes = routes
        self.via = via
        # Top-level configuration lines added to every node's file (config mode only).
        self.extra_config = extra_config
        # Lines added inside every node's `cluster {}` block, or one text per node.
        self.cluster_config = (
            [cluster_config] * len(kinds) if isinstance(cluster_config, str) else cluster_config
        )
        # Top-level configuration lines for one node, by index (JetStream on one node).
        self.node_config = dict(node_config or {})
        if (extra_config or any(self.cluster_config) or self.node_config) and via != "config":
            raise ValueError("extra_config, cluster_config and node_config need via='config'")
        ports: set[int] = set()

        def port() -> int:
            while (p := free_port()) in ports:
                pass
            ports.add(p)
            return p

        self.nodes = [
            Node(i, kind, f"n{i + 1}", port(), port(), port())  # type: ignore[arg-type]
            for i, kind in enumerate(kinds)
        ]

    # -- configuration ----------------------------------------------------------------------

    def route_urls(self, node: Node) -> list[str]:
        """The explicit routes node `node` is given."""
        if self.routes == "seed":
            return [] if node.index == 0 else [self.nodes[0].route_url]
        return [n.route_url for n in self.nodes if self.routes == "all" or n is not node]

    def config_text(self, node: Node) -> str:
        routes = "".join(f'\n    "{url}"' for url in self.route_urls(node))
        return (
            f"server_name: {node.name}\n"
            f'listen: "{LOOPBACK}:{node.port}"\n'
            f'http: "{LOOPBACK}:{node.http_port}"\n'
            "cluster {\n"
            f"  name: {self.cluster_name}\n"
            f'  listen: "{LOOPBACK}:{node.cluster_port}"\n'
            f"  routes: [{routes}\n  ]\n"
            f"{self.cluster_config[node.index]}"
            "}\n" + self.extra_config + self.node_config.get(node.index, "")
        )

    def argv(self, node: Node) -> list[str]:
        cmd = [str(NATS_SERVER)] if node.kind == GO else list(PYNATSD)
        if self.via == "config":
            path = self.directory / f"{node.name}.conf"
            path.write_text(self.config_text(node))
            return [*cmd, "-c", str(path)]
        flags = [
            *("-p", str(node.port), "-a", LOOPBACK, "-m", str(node.http_port)),
            *("--server_name", node.name, "--cluster_name", self.cluster_name),
            *("--cluster", f"nats://{LOOPBACK}:{node.cluster_port}"),
        ]
        routes = self.route_urls(node)
        if routes:
            flags += ["--routes", ",".join(routes)]
        return [*cmd, *flags]

    def _env(self, node: Node) -> dict[str, str] | None:
        if node.kind != PY:
            return None
        # The package from this checkout even when it is not pip-installed in the venv.
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(SRC), env.get("PYTHONPATH")) if p)
        return env

    # -- life cycle -------------------------------------------------------------------------

    def _start_node(self, node: Node) -> None:
        process = ServerProcess(self.argv(node), node.port, env=self._env(node))
        node.process = process
        process.start()
        node.server_id = str(self.varz(node.index)["server_id"])
        # A server that ignores its cluster settings would only show as a routes timeout.
        if not wait_listening(node.cluster_port, ROUTE_LISTEN_TIMEOUT):
            raise ClusterError(
                f"{node.name} ({node.kind}) does not listen on its route port "
                f"{node.cluster_port}:{self.describe()}"
            )

    def start(self, *, wait: bool = True, timeout: float = ROUTES_TIMEOUT) -> None:
        """Start every node at once (each in its own thread, so their route dials race as in a
        simultaneous start-up), then wait until every route is up."""
        with ThreadPoolExecutor(len(self.nodes)) as pool:
            errors = [e for e in pool.map(self._start_or_error, self.nodes) if e is not None]
        if errors:
            self.stop()
            raise errors[0]
        if wait:
            self.wait_routes(timeout)

    def _start_or_error(self, node: Node) -> BaseException | None:
        try:
            self._start_node(node)
        except BaseException as e:  # re-raised by start() in the calling thread
            return e
        return None

    def kill(self, index: int) -> None:
        """SIGKILL node `index` (no lame duck, no goodbye on its routes) and reap it."""
        node = self.nodes[index]
        process = node.process
        if process is None:
            return
        if process.alive():
            process.proc.send_signal(signal.SIGKILL)
            process.proc.wait(10)
        node.past.append(process)
        node.process = None

    def restart(self, index: int, *, wait: bool = True, timeout: float = ROUTES_TIMEOUT) -> None:
        """Start node `index` again on its old ports (after kill) and wait for its routes."""
        node = self.nodes[index]
        if node.running:
            raise RuntimeError(f"{node.name} is still running")
        self._start_node(node)
        if wait:
            self.wait_routes(timeout)

    def reload(self, index: int, cluster_config: str, timeout: float = ROUTES_TIMEOUT) -> None:
        """Rewrite node `index`'s file with `cluster_config` in its cluster block, SIGHUP it
        and return once its log says the reload is done."""
        node = self.nodes[index]
        assert node.process is not None and self.via == "config"
        done = node.log_text().count(RELOADED)
        self.cluster_config = list(self.cluster_config)
        self.cluster_config[index] = cluster_config
        self.argv(node)  # writes the file
        node.process.proc.send_signal(signal.SIGHUP)
        deadline = time.monotonic() + timeout
        while node.log_text().count(RELOADED) == done:
            if time.monotonic() > deadline:
                raise ClusterError(f"{node.name} did not reload:{self.describe()}")
            time.sleep(0.05)

    def stop(self) -> None:
        for node in self.nodes:
            if node.process is not None:
                node.process.stop()
                node.past.append(node.process)
                node.process = None
        for node in self.nodes:
            for process in node.past:
                process.stop()  # closes the logs of killed incarnations
            node.past.clear()

    def __enter__(self) -> ProcessCluster:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- monitoring -------------------------------------------------------------------------

    def varz(self, index: int) -> dict[str, Any]:
        return _http_json(self.nodes[index].http_port, "/varz")

    def routez(self, index: int, query: str = "") -> dict[str, Any]:
        return _http_json(self.nodes[index].http_port, "/routez" + query)

    def routes_by_peer(self, index: int) -> Counter[str]:
        """remote server_id -> number of route connections node `index` has to it."""
        return Counter(r.get("remote_id", "") for r in self.routez(index).get("routes") or [])

    def expected_routes(self, a: Node, b: Node) -> int:
        """The fewest connections `a` shows to `b` once the cluster has settled: the whole
        pool between two nats-server nodes, at least one otherwise."""
        return GO_ROUTES_PER_PEER if a.kind == GO and b.kind == GO else 1

    def missing_routes(self) -> list[str]:
        """What the monitor ports say is not up yet, one line per (node, peer): read on the
        nodes whose kind is in ROUTEZ_KINDS."""
        running = [n for n in self.nodes if n.running]
        missing: list[str] = []
        for node in running:
            if node.kind not in ROUTEZ_KINDS:
                continue
            try:
                peers = self.routes_by_peer(node.index)
            except (OSError, ValueError) as e:
                missing.append(f"{node.name} ({node.kind}): /routez: {e}")
                continue
            for other in running:
                if other is node:
                    continue
                want = self.expected_routes(node, other)
                have = peers.get(other.server_id, 0)
                if have < want:
                    missing.append(
                        f"{node.name} ({node.kind}) -> {other.name} ({other.kind}): "
                        f"{have} of {want} routes"
                    )
        return missing

    def missing_paths(self, timeout: float) -> list[str]:
        """The ordered pairs of running nodes between which a client's message does not get
        through within `timeout` (what "routes up" means to a client)."""
        running = [n for n in self.nodes if n.running]
        if len(running) < 2:
            return []
        token = uuid.uuid4().hex[:12]
        socks = {n.index: _raw_client(n.port) for n in running}
        try:
            for n in running:
                socks[n.index].sendall(f"SUB ready.{token}.{n.index} 1\r\nPING\r\n".encode())
            buffers = {n.index: b"" for n in running}
            want = {(a.index, b.index) for a in running for b in running if a is not b}
            deadline = time.monotonic() + timeout
            while want and time.monotonic() < deadline:
                for a, b in want:
                    socks[a].sendall(f"PUB ready.{token}.{b} 1\r\n{a}\r\n".encode())
                time.sleep(0.05)
                for index, sock in socks.items():
                    buffers[index] += _recv_available(sock)
                    for frm in re.findall(
                        rb"MSG ready\.%s\.\d+ 1 1\r\n(\d)" % token.encode(), buffers[index]
                    ):
                        want.discard((int(frm), index))
            names = {n.index: n.name for n in running}
            return [f"no messages {names[a]} -> {names[b]}" for a, b in sorted(want)]
        finally:
            for sock in socks.values():
                sock.close()

    def wait_routes(self, timeout: float = ROUTES_TIMEOUT) -> None:
        """Wait until every running node has its routes to every other running node: the
        monitor ports of the kinds in ROUTEZ_KINDS show them, and a client message gets through
        from every node to every other."""
        deadline = time.monotonic() + timeout
        while True:
            missing = self.missing_routes()
            if not missing:
                missing = self.missing_paths(max(deadline - time.monotonic(), 0.5))
                if not missing:
                    return
            if time.monotonic() > deadline:
                raise ClusterError(
                    f"routes not up within {timeout}s: " + "; ".join(missing) + self.describe()
                )
            time.sleep(0.1)

    def describe(self) -> str:
        """Every node's kind, ports and log tail (for failure messages)."""
        out = []
        for n in self.nodes:
            state = "running" if n.running else "down"
            out.append(
                f"\n=== {n.name} {n.kind} {state} client {n.port} http {n.http_port} "
                f"route {n.cluster_port} id {n.server_id}\n{n.log_text()[-1500:]}"
            )
        return "".join(out)


# -- interest across routes, as clients see it ----------------------------------------------------


async def reaches(publisher: Client, subscriber: Client, subject: str, tries: int = 100) -> bool:
    """Publish `subject` until `subscriber`'s new subscription to it receives one (its interest
    has reached the publisher's node): False when none came after `tries` attempts."""
    sub = await subscriber.subscribe(subject)
    await subscriber.flush()
    try:
        return await arrives(publisher, sub, tries)
    finally:
        await sub.unsubscribe()


async def arrives(publisher: Client, sub: Subscription, tries: int = 100) -> bool:
    """Publish to `sub`'s subject until `sub` receives one: False when none came after
    `tries` attempts (0.1 s apart)."""
    for _ in range(tries):
        await publisher.publish(sub.subject, b"")
        await publisher.flush()
        try:
            await sub.next_msg(timeout=0.1)
            return True
        except nats.errors.TimeoutError:
            continue
    return False


PROBE_TIMEOUT = 10.0


async def wait_interest(
    subscriber: Client, publishers: Sequence[Client], timeout: float = PROBE_TIMEOUT
) -> None:
    """Return once every SUB and UNSUB that `subscriber`'s server has processed so far has
    reached the servers of `publishers` (each on any node of the cluster).

    A server forwards its interest changes on a route in the order it processes them, so a probe
    subscription made after them arrives after them: once each publisher's probe message comes
    back, the earlier changes are in place there too. Implementation-agnostic: no monitoring
    endpoint, only what a client can do.
    """
    await subscriber.flush()
    subject = f"probe.{uuid.uuid4().hex}"
    seen: set[int] = set()
    sub = await subscriber.subscribe(subject, cb=None)
    try:
        await subscriber.flush()
        deadline = time.monotonic() + timeout
        while len(seen) < len(publishers):
            for i, pub in enumerate(publishers):
                if i not in seen:
                    await pub.publish(subject, str(i).encode())
                    await pub.flush()
            while True:
                try:
                    msg = await sub.next_msg(timeout=0.02)
                except nats.errors.TimeoutError:
                    break
                seen.add(int(msg.data))
            if time.monotonic() > deadline:
                raise ClusterError(
                    f"interest did not cross the routes within {timeout}s: "
                    f"{len(seen)} of {len(publishers)} publishers reached the subscriber"
                )
    finally:
        await sub.unsubscribe()
