"""`/routez` and the cluster parts of `/varz`, in nats-server's JSON (`monitor.go`: `Routez`,
`RouteInfo`, `ClusterOptsVarz`), read from the cluster part through `cluster_of`."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from pynatsd.cluster import cluster_of
from pynatsd.cluster.permissions import info_fields
from pynatsd.gofmt import go_duration_ns, go_uptime, rfc3339

if TYPE_CHECKING:
    from pynatsd.cluster.route import Route
    from pynatsd.server.server import Server


def routez(server: Server, query: dict[str, str]) -> dict[str, Any]:
    subs = query.get("subs", "")
    detail = subs == "detail"
    listed = detail or subs.lower() in ("1", "true")
    cluster = cluster_of(server)
    routes = sorted(cluster.connections(), key=lambda r: r.rid) if cluster else []
    now = time.time()
    out: dict[str, Any] = {
        "server_id": server.server_id,
        "server_name": server.server_name,
        "now": rfc3339(now),
    }
    # The permissions every route has (this server's), then each route's peer's own.
    out.update(info_fields(server.options.cluster.permissions if server.options.cluster else None))
    out["num_routes"] = len(routes)
    out["routes"] = [_route(r, now, listed, detail) for r in routes]
    return out


def _route(route: Route, now: float, listed: bool, detail: bool) -> dict[str, Any]:
    stats = route.stats
    out: dict[str, Any] = {
        "rid": route.rid,
        "remote_id": route.remote_id,
        "remote_name": route.remote_name,
        "did_solicit": route.solicited,
        "is_configured": route.configured,
        "ip": route.host,
        "port": route.port,
        "start": rfc3339(route.start),
        "last_activity": rfc3339(route.last_activity),
    }
    if route.rtt:
        out["rtt"] = rtt_text(route.rtt)
    out["uptime"] = go_uptime(now - route.start)
    out["idle"] = go_uptime(now - route.last_activity)
    for key in ("import", "export"):
        if key in route.remote_info:
            out[key] = route.remote_info[key]
    out["pending_size"] = route.outbound.pending_bytes
    out["in_msgs"] = stats.in_msgs
    out["out_msgs"] = stats.out_msgs
    out["in_bytes"] = stats.in_bytes
    out["out_bytes"] = stats.out_bytes
    out["subscriptions"] = len(route.subs)
    if listed and route.subs:
        if detail:
            out["subscriptions_list_detail"] = [
                _sub_detail(route, account, subject, queue)
                for (account, subject, queue) in route.subs
            ]
        else:
            out["subscriptions_list"] = [
                subject.decode(errors="replace") for (_, subject, _) in route.subs
            ]
    if route.pinned_account:
        out["account"] = route.pinned_account.decode()
    out["compression"] = "off"
    return out


def _sub_detail(route: Route, account: bytes, subject: bytes, queue: bytes) -> dict[str, Any]:
    sub = route.subs[(account, subject, queue)]
    out: dict[str, Any] = {"account": account.decode(errors="replace")}
    out["subject"] = subject.decode(errors="replace")
    if queue:
        out["qgroup"] = queue.decode(errors="replace")
    out["sid"] = sub.sid.decode(errors="replace")
    out["msgs"] = sub.delivered
    out["cid"] = route.rid
    return out


def rtt_text(seconds: float) -> str:
    ns = round(seconds * 1e9)
    if 1_000 < ns < 1_000_000:
        ns -= ns % 1_000
    return go_duration_ns(ns)


def varz_route_counts(server: Server) -> tuple[int, int]:
    """`routes` (connections) and `remotes` (distinct remote servers)."""
    cluster = cluster_of(server)
    if cluster is None:
        return 0, 0
    return len(cluster.connections()), len(cluster.peers)


def _host_port(url: str) -> str:
    rest = url.split("://", 1)[-1]
    rest = rest.rsplit("@", 1)[-1]
    return rest.rstrip("/")
