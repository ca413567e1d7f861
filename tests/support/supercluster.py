"""A super-cluster on loopback: clusters of nats-server and pynatsd processes joined by
gateways, in any mix.

Each cluster has a name (its gateway name) and one or more nodes; the nodes of a cluster are
routed to each other (a full mesh). `dials` says which clusters list which others in their
`gateway { gateways: [...] }`: a cluster that is not listed learns of the other from its
inbound connection and dials back (an implicit gateway), which is how both dialling orders are
made.

    with SuperCluster(tmp_path, {"A": [PY], "B": [GO]}, dials={"A": ["B"]}) as sc:
        sc.start()             # returns when every node has a gateway to every other cluster
        nc = await nats.connect(sc.cluster("A")[0].url)

"Up" is read on each node's monitor port: `/gatewayz` must list an outbound connection to every
other cluster, and the inbound connections each cluster receives must add up to the nodes of
every other cluster; `/routez` must show every peer of the node's own cluster.
"""

from __future__ import annotations

import json
import os
import time
import urllib.request
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from support.cluster import GO, PY, SRC
from support.natsserver import NATS_SERVER
from support.ports import LOOPBACK, free_port
from support.processes import PYNATSD, ServerProcess

UP_TIMEOUT = 30.0


@dataclass
class GatewayNode:
    kind: str
    cluster: str
    name: str
    port: int = field(default_factory=free_port)
    http_port: int = field(default_factory=free_port)
    gateway_port: int = field(default_factory=free_port)
    route_port: int = field(default_factory=free_port)
    process: ServerProcess | None = None

    @property
    def url(self) -> str:
        return f"nats://{LOOPBACK}:{self.port}"

    @property
    def gateway_url(self) -> str:
        return f"nats://{LOOPBACK}:{self.gateway_port}"

    def http(self, path: str) -> dict[str, Any]:
        with urllib.request.urlopen(f"http://{LOOPBACK}:{self.http_port}{path}", timeout=2) as r:
            result: dict[str, Any] = json.load(r)
            return result


class SuperCluster:
    def __init__(
        self,
        directory: Path,
        clusters: Mapping[str, Sequence[str]],
        *,
        dials: Mapping[str, Sequence[str]],
        gateway_extra: Mapping[str, str] | None = None,
        extra: str = "",
        cluster_extra: Mapping[str, str] | None = None,
    ) -> None:
        for kinds in clusters.values():
            for kind in kinds:
                if kind not in (GO, PY):
                    raise ValueError(f"unknown node kind {kind!r}")
        self.directory = directory
        self.dials = dials
        # Lines added inside a cluster's `gateway {}` block.
        self.gateway_extra = dict(gateway_extra or {})
        self.extra = extra  # top-level lines in every server's file
        # Top-level lines in the files of one cluster's servers (a leafnodes block, say).
        self.cluster_extra = dict(cluster_extra or {})
        self.clusters = {
            name: [GatewayNode(kind, name, f"{name}{i + 1}") for i, kind in enumerate(kinds)]
            for name, kinds in clusters.items()
        }

    def __enter__(self) -> SuperCluster:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def cluster(self, name: str) -> list[GatewayNode]:
        return self.clusters[name]

    @property
    def nodes(self) -> list[GatewayNode]:
        return [node for nodes in self.clusters.values() for node in nodes]

    # -- configuration --------------------------------------------------------------------------

    def config_text(self, node: GatewayNode) -> str:
        peers = self.clusters[node.cluster]
        text = (
            f"server_name: {node.name}\n"
            f'listen: "{LOOPBACK}:{node.port}"\n'
            f'http: "{LOOPBACK}:{node.http_port}"\n'
            f"{self.extra}"
            f"{self.cluster_extra.get(node.cluster, '')}"
        )
        if len(peers) > 1:
            routes = "".join(
                f'\n    "nats://{LOOPBACK}:{p.route_port}"' for p in peers if p is not node
            )
            text += (
                "cluster {\n"
                f"  name: {node.cluster}\n"
                f'  listen: "{LOOPBACK}:{node.route_port}"\n'
                f"  routes: [{routes}\n  ]\n"
                "}\n"
            )
        remotes = ""
        for other in self.dials.get(node.cluster, ()):
            urls = ", ".join(f'"{n.gateway_url}"' for n in self.clusters[other])
            remotes += f"\n    {{name: {other}, urls: [{urls}]}}"
        return (
            text + "gateway {\n"
            f"  name: {node.cluster}\n"
            f'  listen: "{LOOPBACK}:{node.gateway_port}"\n'
            f"  gateways: [{remotes}\n  ]\n"
            f"{self.gateway_extra.get(node.cluster, '')}"
            "}\n"
        )

    # -- lifecycle ------------------------------------------------------------------------------

    def start(self, wait: bool = True) -> None:
        for node in self.nodes:
            self.start_node(node)
        if wait:
            self.wait_up()

    def start_node(self, node: GatewayNode) -> None:
        path = self.directory / f"{node.name}.conf"
        path.write_text(self.config_text(node))
        if node.kind == GO:
            assert NATS_SERVER is not None
            argv = [NATS_SERVER, "-c", str(path)]
            env = None
        else:
            argv = [*PYNATSD, "-c", str(path)]
            env = dict(os.environ)
            env["PYTHONPATH"] = os.pathsep.join(p for p in (str(SRC), env.get("PYTHONPATH")) if p)
        node.process = ServerProcess(argv, node.port, env=env)
        node.process.start()

    def restart(self, node: GatewayNode) -> None:
        """Stop `node` and start it again on the same ports (same configuration)."""
        if node.process is not None:
            node.process.stop()
        self.start_node(node)

    def stop(self) -> None:
        for node in self.nodes:
            if node.process is not None:
                node.process.stop()
                node.process = None

    def logs(self) -> str:
        return "\n".join(
            f"--- {n.name} ({n.kind})\n{n.process.log_text()[-3000:]}"
            for n in self.nodes
            if n.process is not None
        )

    def wait_up(self, timeout: float = UP_TIMEOUT) -> None:
        deadline = time.monotonic() + timeout
        while True:
            problem = self._not_up()
            if problem is None:
                return
            if time.monotonic() > deadline:
                raise AssertionError(f"super-cluster not up: {problem}\n{self.logs()}")
            time.sleep(0.1)

    def _not_up(self) -> str | None:
        inbound: dict[tuple[str, str], int] = {}
        for node in self.nodes:
            try:
                gatewayz = node.http("/gatewayz")
                routez = node.http("/routez")
            except OSError as e:
                return f"{node.name}: {e}"
            others = set(self.clusters) - {node.cluster}
            if set(gatewayz.get("outbound_gateways") or {}) != others:
                return f"{node.name} outbound: {sorted(gatewayz.get('outbound_gateways') or {})}"
            for name, conns in (gatewayz.get("inbound_gateways") or {}).items():
                inbound[(name, node.cluster)] = inbound.get((name, node.cluster), 0) + len(conns)
            peers = {r.get("remote_name") for r in routez.get("routes") or []}
            wanted = {p.name for p in self.clusters[node.cluster] if p is not node}
            if not wanted <= peers:
                return f"{node.name} routes: {sorted(str(p) for p in peers)}"
        for origin, nodes in self.clusters.items():
            for target in self.clusters:
                if target != origin and inbound.get((origin, target), 0) < len(nodes):
                    return f"inbound {origin} -> {target}: {inbound.get((origin, target), 0)}"
        return None
