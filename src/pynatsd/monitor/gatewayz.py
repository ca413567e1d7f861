"""`/gatewayz` and the gateway parts of `/varz`, in nats-server's JSON (`monitor.go`:
`Gatewayz`, `RemoteGatewayz`, `AccountGatewayz`, `GatewayOptsVarz`), read from the gateway
part through `gateway_of`."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from pynatsd.gateway import gateway_of
from pynatsd.gateway.connection import OPTIMISTIC
from pynatsd.gofmt import go_uptime, rfc3339
from pynatsd.monitor.routez import rtt_text

if TYPE_CHECKING:
    from pynatsd.gateway.connection import GatewayConnection
    from pynatsd.server.server import Server

# gatewayMaxRUnsubBeforeSwitch, shown with every account.
INTEREST_ONLY_THRESHOLD = 1000


def gatewayz(server: Server, query: dict[str, str]) -> dict[str, Any]:
    gateway = gateway_of(server)
    out: dict[str, Any] = {"server_id": server.server_id, "now": rfc3339(time.time())}
    if gateway is None or not gateway.url:
        out["outbound_gateways"] = {}
        out["inbound_gateways"] = {}
        return out
    info = gateway.info()
    out["name"] = gateway.gateway_name
    out["host"] = info["host"]
    out["port"] = info["port"]
    target = query.get("gw_name", "")
    account = query.get("acc_name", "")
    accounts = bool(account) or query.get("accs", "").lower() in ("1", "true")
    subs = query.get("subs", "").lower() in ("1", "true")
    now = time.time()
    outbound: dict[str, Any] = {}
    for name, conn in sorted(gateway.outbound.items()):
        if target and name != target:
            continue
        remote: dict[str, Any] = {
            "configured": conn.remote is not None and not conn.remote.implicit
        }
        remote["connection"] = _connection(conn, now)
        if accounts:
            remote["accounts"] = _outbound_accounts(conn, account, subs)
        outbound[name] = remote
    inbound: dict[str, list[Any]] = {}
    for conn in sorted(gateway.inbound.values(), key=lambda c: c.gid):
        if target and conn.name != target:
            continue
        entry: dict[str, Any] = {"configured": False, "connection": _connection(conn, now)}
        if accounts:
            entry["accounts"] = _inbound_accounts(conn, account)
        inbound.setdefault(conn.name, []).append(entry)
    out["outbound_gateways"] = outbound
    out["inbound_gateways"] = inbound
    return out


def _connection(conn: GatewayConnection, now: float) -> dict[str, Any]:
    stats = conn.stats
    return {
        "cid": conn.gid,
        "kind": "Gateway",
        "ip": conn.host,
        "port": conn.port,
        "start": rfc3339(conn.start),
        "last_activity": rfc3339(conn.last_activity),
        "rtt": rtt_text(conn.rtt),
        "uptime": go_uptime(now - conn.start),
        "idle": go_uptime(now - conn.last_activity),
        "pending_bytes": conn.outbound.pending_bytes,
        "in_msgs": stats.in_msgs,
        "out_msgs": stats.out_msgs,
        "in_bytes": stats.in_bytes,
        "out_bytes": stats.out_bytes,
        "subscriptions": len(conn.subs),
        "name": conn.remote_id,
    }


def _outbound_accounts(conn: GatewayConnection, only: str, subs: bool) -> list[dict[str, Any]]:
    """What the remote told us per account: its mode, and the interest it sent."""
    names = set(conn.modes) | {account for (account, _, _) in conn.subs}
    result = []
    for name in sorted(names):
        text = name.decode(errors="replace")
        if only and text != only:
            continue
        mine = [(subject, queue) for (account, subject, queue) in conn.subs if account == name]
        entry: dict[str, Any] = {
            "name": text,
            "interest_mode": conn.modes.get(name) or OPTIMISTIC,
            "interest_only_threshold": INTEREST_ONLY_THRESHOLD,
        }
        if mine:
            entry["num_subs"] = len(mine)
        queues = sum(1 for _, queue in mine if queue)
        if queues:
            entry["num_queue_subs"] = queues
        if subs and mine:
            entry["subscriptions_list"] = [s.decode(errors="replace") for s, _ in mine]
        result.append(entry)
    return result


def _inbound_accounts(conn: GatewayConnection, only: str) -> list[dict[str, Any]]:
    """The mode we put each account in for the remote."""
    return [
        {
            "name": name.decode(errors="replace"),
            "interest_mode": mode or OPTIMISTIC,
            "interest_only_threshold": INTEREST_ONLY_THRESHOLD,
        }
        for name, mode in sorted(conn.modes.items())
        if not only or name.decode(errors="replace") == only
    ]


def varz_gateway(server: Server) -> dict[str, Any]:
    """The `gateway` section of /varz (GatewayOptsVarz): `{}` without a gateway."""
    opts = server.options.gateway
    gateway = gateway_of(server)
    if opts is None or gateway is None:
        return {}
    out: dict[str, Any] = {
        "name": opts.name,
        "host": opts.host,
        "port": gateway.port or opts.port,
        "auth_timeout": opts.auth_timeout,
        "tls_timeout": opts.tls_timeout,
    }
    if opts.tls is not None:
        out["tls_required"] = out["tls_verify"] = True
    if opts.advertise:
        out["advertise"] = opts.advertise
    if opts.connect_retries:
        out["connect_retries"] = opts.connect_retries
    if opts.gateways:
        out["gateways"] = [_varz_remote(gateway, r.name, r.tls_timeout) for r in opts.gateways]
    if opts.reject_unknown:
        out["reject_unknown"] = True
    return out


def _varz_remote(gateway: Any, name: str, tls_timeout: float) -> dict[str, Any]:
    remote = gateway.remotes.get(name)
    urls = [u.split("://", 1)[-1].rsplit("@", 1)[-1] for u in remote.urls] if remote else []
    if remote is None and name == gateway.gateway_name:
        urls = [u.split("://", 1)[-1].rsplit("@", 1)[-1] for u in gateway.own_urls]
    out: dict[str, Any] = {"name": name}
    if tls_timeout:
        out["tls_timeout"] = tls_timeout
    if urls:
        out["urls"] = urls
    return out


def gateway_counts(server: Server) -> tuple[int, int]:
    """Outbound and inbound gateway connections (for /metrics)."""
    gateway = gateway_of(server)
    if gateway is None:
        return 0, 0
    return gateway.num_outbound, gateway.num_inbound
