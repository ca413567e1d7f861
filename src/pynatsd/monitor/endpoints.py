"""Monitoring endpoints as data: /varz, /connz, /subsz, /healthz and friends.

Corresponds to nats-server's `server/monitor.go`; key names and order follow the real server's
JSON so that tools written for it (prometheus-nats-exporter, nats-top) work unchanged.
"""

from __future__ import annotations

import os
import resource
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from pynatsd.gofmt import NANOS_PER_SECOND, go_duration_ns, go_uptime, rfc3339
from pynatsd.jetstream import jetstream_of
from pynatsd.leafnode import leafnodes_of
from pynatsd.monitor.gatewayz import gateway_counts, varz_gateway
from pynatsd.monitor.routez import varz_route_counts
from pynatsd.options import DEFAULT_HOST, TLS_TIMEOUT
from pynatsd.server.delivery import Stats
from pynatsd.version import COMPAT_VERSION, PROTO_VERSION

if TYPE_CHECKING:
    from pynatsd.server.client import Client
    from pynatsd.server.server import Server


class BadRequest(ValueError):
    """A query value the endpoint cannot use: answered with HTTP 400 and this text."""


def _rtt(seconds: float) -> str:
    """A client's RTT as /connz shows it (nats-server's getRTT): truncated to the microsecond
    between 1µs and 1ms, to the nanosecond otherwise."""
    ns = round(seconds * NANOS_PER_SECOND)
    if 1_000 < ns < 1_000_000:
        ns -= ns % 1_000
    return go_duration_ns(ns)


def _int_arg(query: Mapping[str, str], name: str, default: int) -> int:
    raw = query.get(name)
    if raw is None or raw == "":
        return default
    try:
        return int(raw)
    except ValueError:
        raise BadRequest(
            f"Error decoding int for '{name}': strconv.Atoi: parsing \"{raw}\": invalid syntax"
        ) from None


def _bool_arg(query: Mapping[str, str], name: str) -> bool:
    raw = query.get(name, "")
    if raw in ("", "0", "false", "False", "f", "F", "FALSE"):
        return False
    if raw in ("1", "true", "True", "t", "T", "TRUE"):
        return True
    raise BadRequest(
        f"Error decoding boolean for '{name}': strconv.ParseBool: parsing \"{raw}\": invalid syntax"
    )


def varz(server: Server) -> dict[str, Any]:
    opts = server.options
    now = time.time()
    totals = Stats()
    totals.add(server.closed_stats)
    for c in server.clients.values():
        totals.add(c.stats)
    usage = resource.getrusage(resource.RUSAGE_SELF)
    cpu = usage.ru_utime + usage.ru_stime
    elapsed = max(now - server.start_time, 1e-9)
    zero_kinds = {"clients": 0, "routes": 0, "gateways": 0, "leafs": 0}
    routes, remotes = varz_route_counts(server)
    leaf = leafnodes_of(server)
    out = {
        "server_id": server.server_id,
        "server_name": server.server_name,
        "version": COMPAT_VERSION,
        "proto": PROTO_VERSION,
        "git_commit": server._info_base.get("git_commit", ""),
        "go": server._info_base.get("go", ""),
        "host": opts.host,
        "port": server.port,
        "auth_required": True if server.auth_required else None,
        "connect_urls": list(server.connect_urls) or None,
        "max_connections": opts.max_connections,
        "ping_interval": int(opts.ping_interval * 1e9),
        "ping_max": opts.ping_max,
        "http_host": opts.http_host or opts.host,
        # The bound monitoring port, under the key of its kind (the other one is 0).
        "http_port": 0 if opts.https_port else server.http_port,
        "http_base_path": opts.http_base_path,
        "https_port": server.http_port if opts.https_port else 0,
        "auth_timeout": opts.auth_timeout,
        "max_control_line": opts.max_control_line,
        "max_payload": opts.max_payload,
        "max_pending": opts.max_pending,
        "cluster": _varz_cluster(server),
        "gateway": varz_gateway(server),
        "leaf": leaf.varz() if leaf is not None else {},
        "mqtt": _varz_mqtt(server),
        "websocket": {},
        "jetstream": _varz_jetstream(server),
        "tls_timeout": 2,
        "write_deadline": int(opts.write_deadline * 1e9),
        "start": rfc3339(server.start_time),
        "now": rfc3339(now),
        "uptime": go_uptime(now - server.start_time),
        "mem": usage.ru_maxrss * 1024,
        "cores": os.cpu_count() or 1,
        "gomaxprocs": 1,
        "cpu": round(100.0 * cpu / elapsed, 2),
        "connections": len(server.clients),
        "total_connections": server.total_connections,
        "routes": routes,
        "remotes": remotes,
        "leafnodes": len(leaf.leafs) if leaf is not None else 0,
        "in_msgs": totals.in_msgs,
        "in_bytes": totals.in_bytes,
        "in_client_msgs": totals.in_msgs,
        "in_client_bytes": totals.in_bytes,
        "out_msgs": totals.out_msgs,
        "out_bytes": totals.out_bytes,
        "out_client_msgs": totals.out_msgs,
        "out_client_bytes": totals.out_bytes,
        "slow_consumers": server.slow_consumers,
        "stale_connections": server.stale_connections,
        "stalled_clients": server.stalled_clients,
        "subscriptions": server.num_subscriptions(),
        "http_req_stats": dict(server.http_req_stats),
        "config_load_time": rfc3339(server.config_load_time),
        "config_digest": server.config_digest,
        "feature_flags": {
            "js_ack_fc_v2": False,
            "js_api_reply_v2": False,
            "js_raft_delete_range": True,
            "js_snapshot_sources": False,
        },
        "system_account": server.system_account.name,
        "slow_consumer_stats": {**zero_kinds, "clients": server.slow_consumers},
        "stale_connection_stats": {**zero_kinds, "clients": server.stale_connections},
        "disk_io_wait_stats": {"waiters": 0, "waits": 0, "wait_time": 0, "max_wait_time": 0},
    }
    return {k: v for k, v in out.items() if v is not None}


def _varz_cluster(server: Server) -> dict[str, Any]:
    """The `cluster` section (nats-server's ClusterOptsVarz): every field is omitted when
    empty, so a server outside a cluster shows `{}`. The name and port are the running ones
    (a generated name, the port bound for `-1`) once the cluster part has them."""
    cluster = server.options.cluster
    if cluster is None:
        # A gateway names the cluster even without a cluster block (validateCluster).
        gateway = server.options.gateway
        return {"name": gateway.name} if gateway is not None and gateway.name else {}
    part = server.parts.get("cluster")
    fields: dict[str, Any] = {
        "name": getattr(part, "cluster_name", "") or cluster.name,
        "addr": cluster.host,
        "cluster_port": getattr(part, "port", 0) or cluster.port,
        "auth_timeout": cluster.auth_timeout,
        # A route URL as Go's url.URL.Host: host:port without the credentials.
        "urls": [urlsplit(route).netloc.rpartition("@")[2] for route in cluster.routes],
        "tls_timeout": cluster.tls_timeout,
        "tls_required": cluster.tls is not None,
        "tls_verify": cluster.tls is not None,
        "pool_size": cluster.pool_size,
        "write_deadline": round(cluster.write_deadline * NANOS_PER_SECOND),
        "write_timeout": cluster.write_timeout,
    }
    return {key: value for key, value in fields.items() if value}


def _connection_info(
    client: Client, now: float, subs: str, auth: bool, closed: bool = False
) -> dict[str, Any]:
    opts = client.connect_opts
    info: dict[str, Any] = {
        "cid": client.cid,
        "kind": "Client",
        "type": "mqtt" if getattr(client, "mqtt_client", "") else "nats",
        "ip": client.host,
        "port": client.port,
        "start": rfc3339(client.start),
        "last_activity": rfc3339(client.last_activity),
    }
    if closed:
        info["stop"] = rfc3339(client.stop)
        info["reason"] = client.close_reason
    info["rtt"] = _rtt(client.rtt)
    end = client.stop if closed else now
    info["uptime"] = go_uptime(end - client.start)
    info["idle"] = go_uptime(end - client.last_activity)
    info["pending_bytes"] = 0 if closed else client.pending_bytes
    info["in_msgs"] = client.stats.in_msgs
    info["out_msgs"] = client.stats.out_msgs
    info["in_bytes"] = client.stats.in_bytes
    info["out_bytes"] = client.stats.out_bytes
    info["subscriptions"] = len(client.subs)
    for key in ("name", "lang", "version"):
        if opts.get(key):
            info[key] = opts[key]
    if auth:
        if client.auth_user:
            info["authorized_user"] = client.auth_user
        info["account"] = client.account.name
    mqtt_client = getattr(client, "mqtt_client", "")
    if mqtt_client:
        info["mqtt_client"] = mqtt_client
    if subs == "detail":
        info["subscriptions_list_detail"] = [
            {
                "subject": s.subject,
                **({"qgroup": s.queue} if s.queue else {}),
                "sid": s.sid.decode(errors="replace"),
                "msgs": s.delivered,
                **({"max": s.max_msgs} if s.max_msgs else {}),
                "cid": client.cid,
            }
            for s in client.subs.values()
        ]
    elif subs and client.subs:
        info["subscriptions_list"] = [s.subject for s in client.subs.values()]
    return info


def closed_connection_info(server: Server, client: Client) -> dict[str, Any]:
    """Snapshot of a connection as it closes, for the closed-connections ring."""
    record = _connection_info(client, client.stop or time.time(), "detail", True, closed=True)
    record["_subjects"] = [s.subject for s in client.subs.values()]
    return record


_SORT_KEYS: dict[str, Any] = {
    "cid": lambda c: c["cid"],
    "start": lambda c: c["start"],
    "subs": lambda c: -c["subscriptions"],
    "pending": lambda c: -c["pending_bytes"],
    "msgs_to": lambda c: -c["out_msgs"],
    "msgs_from": lambda c: -c["in_msgs"],
    "bytes_to": lambda c: -c["out_bytes"],
    "bytes_from": lambda c: -c["in_bytes"],
    "last": lambda c: c["last_activity"],
    "idle": lambda c: c["last_activity"],
    "uptime": lambda c: c["start"],
    "stop": lambda c: c.get("stop", ""),
    "reason": lambda c: c.get("reason", ""),
    "rtt": lambda c: c["rtt"],
}


def _varz_mqtt(server: Server) -> dict[str, Any]:
    """nats-server's MQTTOptsVarz: the configured block, empty fields left out."""
    mqtt = server.options.mqtt
    if mqtt is None:
        return {}
    fields: dict[str, Any] = {
        "host": mqtt.host or DEFAULT_HOST,
        "port": mqtt.port,
        "no_auth_user": mqtt.no_auth_user,
        "auth_timeout": mqtt.auth_timeout,
        "tls_map": mqtt.tls_map,
        "tls_timeout": mqtt.tls_timeout or TLS_TIMEOUT,
        "js_domain": mqtt.js_domain,
        "tls_cert_not_after": _cert_not_after(mqtt.tls_cert),
    }
    return {key: value for key, value in fields.items() if value}


def _cert_not_after(path: str) -> str:
    """When the certificate in a PEM file expires, as Go writes a time.Time ("" without
    one, or when it cannot be read)."""
    if not path:
        return ""
    from cryptography import x509

    try:
        with open(path, "rb") as f:
            cert = x509.load_pem_x509_certificate(f.read())
    except (OSError, ValueError):
        return ""
    return cert.not_valid_after_utc.strftime("%Y-%m-%dT%H:%M:%SZ")


def connz(server: Server, query: Mapping[str, str]) -> dict[str, Any]:
    now = time.time()
    offset = max(_int_arg(query, "offset", 0), 0)
    limit = _int_arg(query, "limit", 1024)
    if limit <= 0:
        limit = 1024
    subs_raw = query.get("subs", "")
    subs = "detail" if subs_raw == "detail" else ("1" if _bool_arg(query, "subs") else "")
    auth = _bool_arg(query, "auth")
    sort = query.get("sort", "cid") or "cid"
    if sort not in _SORT_KEYS:
        raise BadRequest(f"invalid sorting option: {sort}")
    state = query.get("state", "open") or "open"
    if state not in ("open", "closed", "any", "all"):
        raise BadRequest(f"Error decoding state for {state}")
    cid_filter = _int_arg(query, "cid", 0)
    user = query.get("user", "")
    acc = query.get("acc", "")
    conns: list[dict[str, Any]] = []
    if state in ("open", "any", "all"):
        # The account filter holds whether or not the account is shown (auth).
        conns.extend(
            _connection_info(c, now, subs, auth)
            for c in server.clients.values()
            if c.connected and (not acc or c.account.name == acc)
        )
    if state in ("closed", "any", "all"):
        for rec in server.closed_clients:
            if acc and rec.get("account", "$G") != acc:
                continue
            item = {k: v for k, v in rec.items() if not k.startswith("_")}
            if subs == "detail":
                pass
            elif subs:
                item.pop("subscriptions_list_detail", None)
                if rec["_subjects"]:
                    item["subscriptions_list"] = rec["_subjects"]
            else:
                item.pop("subscriptions_list_detail", None)
            if not auth:
                item.pop("authorized_user", None)
                item.pop("account", None)
            conns.append(item)
    if cid_filter:
        conns = [c for c in conns if c["cid"] == cid_filter]
    if user:
        conns = [c for c in conns if c.get("authorized_user") == user]
    mqtt_client = query.get("mqtt_client", "")
    if mqtt_client:
        conns = [c for c in conns if c.get("mqtt_client") == mqtt_client]
    conns.sort(key=_SORT_KEYS[sort])
    total = len(conns)
    page = conns[offset : offset + limit]
    return {
        "server_id": server.server_id,
        "now": rfc3339(now),
        "num_connections": len(page),
        "total": total,
        "offset": offset,
        "limit": limit,
        "connections": page,
    }


def subsz(server: Server, query: Mapping[str, str]) -> dict[str, Any]:
    now = time.time()
    detail = _bool_arg(query, "subs")
    offset = max(_int_arg(query, "offset", 0), 0)
    limit = _int_arg(query, "limit", 1024)
    if limit <= 0:
        limit = 1024
    test = query.get("test", "")
    acc_name = query.get("acc", "")
    accounts = [a for a in server.accounts.values() if not acc_name or a.name == acc_name]
    num_subs = num_cache = num_inserts = num_removes = num_matches = 0
    max_fanout = 0
    fanouts = 0.0
    hit_weighted = 0.0
    for account in accounts:
        st = account.sublist.stats()
        num_subs += st.num_subs
        num_cache += st.num_cache
        num_inserts += st.num_inserts
        num_removes += st.num_removes
        num_matches += st.num_matches
        max_fanout = max(max_fanout, st.max_fanout)
        fanouts += st.avg_fanout * st.num_cache
        hit_weighted += st.cache_hit_rate * st.num_matches
    out: dict[str, Any] = {
        "server_id": server.server_id,
        "now": rfc3339(now),
        "num_subscriptions": num_subs,
        "num_cache": num_cache,
        "num_inserts": num_inserts,
        "num_removes": num_removes,
        "num_matches": num_matches,
        "cache_hit_rate": hit_weighted / num_matches if num_matches else 0,
        "max_fanout": max_fanout,
        "avg_fanout": fanouts / num_cache if num_cache else 0,
    }
    if detail or test:
        items: list[dict[str, Any]] = []
        for account in accounts:
            if test:
                res = account.sublist.match(test)
                subs = list(res.psubs) + [s for g in res.qsubs for s in g]
            else:
                subs = account.sublist.all()
            for s in subs:
                item: dict[str, Any] = {
                    "account": account.name,
                    "account_tag": account.name,
                    "subject": s.subject,
                }
                if s.queue:
                    item["qgroup"] = s.queue
                item["sid"] = s.sid.decode(errors="replace")
                item["msgs"] = s.delivered
                if s.max_msgs:
                    item["max"] = s.max_msgs
                item["cid"] = s.client.cid
                items.append(item)
        out["total"] = len(items)
        out["offset"] = offset
        out["limit"] = limit
        if items[offset : offset + limit]:
            out["subscriptions_list"] = items[offset : offset + limit]
    else:
        out["total"] = 0
        out["offset"] = offset
        out["limit"] = limit
    return out


def healthz(server: Server, query: Mapping[str, str]) -> tuple[int, dict[str, Any]]:
    """Liveness/readiness. As in nats-server, the JetStream options narrow what is checked; a
    server without JetStream is healthy for all of them (a single server has no meta leader or
    stream replicas to wait for). The body is the HTTP one, without `status_code` (the
    `$SYS` service adds it, as nats-server does)."""
    for flag in ("js-enabled-only", "js-server-only", "js-enabled", "details"):
        _bool_arg(query, flag)
    if not server.running:
        return 503, {"status": "unavailable", "error": "server not running"}
    js = jetstream_of(server)
    if js is not None and js.standing_down and not _bool_arg(query, "js-server-only"):
        # Another server of the cluster serves JetStream (jetstream/standalone.py): reported
        # as nats-server reports JetStream that is configured but not running.
        if _bool_arg(query, "details"):
            errors = [{"type": "JETSTREAM", "error": js.standing_down}]
            return 503, {"status": "error", "errors": errors}
        return 503, {"status": "unavailable", "error": js.standing_down}
    return 200, {"status": "ok"}


def empty_routez(server: Server) -> dict[str, Any]:
    return {
        "server_id": server.server_id,
        "server_name": server.server_name,
        "now": rfc3339(time.time()),
        "num_routes": 0,
        "routes": [],
    }


def _js_config(server: Server) -> dict[str, Any]:
    js = jetstream_of(server)
    assert js is not None
    return {
        "max_memory": js.max_memory if js.max_memory > 0 else _default_max_memory(),
        "max_storage": js.max_store if js.max_store > 0 else _default_max_storage(js.store_dir),
        "store_dir": os.path.join(js.store_dir, "jetstream"),
        "sync_interval": int(js.sync_interval * 1e9),
        "strict": True,
    }


def _default_max_memory() -> int:
    # nats-server: 75% of the machine's memory.
    try:
        pages = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError):
        return 0
    return int(pages * 0.75)


def _default_max_storage(path: str) -> int:
    # nats-server: 75% of the free space where the store lives.
    try:
        st = os.statvfs(path)
    except OSError:
        return 0
    return int(st.f_bavail * st.f_frsize * 0.75)


def _js_stats(server: Server) -> dict[str, Any]:
    js = jetstream_of(server)
    assert js is not None
    totals = js.totals()
    api_total = sum(a.api_total for a in js.accounts.values())
    api_errors = sum(a.api_errors for a in js.accounts.values())
    return {
        "memory": totals["memory"],
        "storage": totals["storage"],
        "reserved_memory": 0,
        "reserved_storage": 0,
        "accounts": len(js.accounts),
        "ha_assets": 0,
        "api": {"level": 5, "total": api_total, "errors": api_errors},
    }


def _varz_jetstream(server: Server) -> dict[str, Any]:
    if jetstream_of(server) is None:
        return {}
    return {
        "config": _js_config(server),
        "stats": _js_stats(server),
        "limits": {"default_max_consumers": 1000},
    }


def jsz(server: Server, query: Mapping[str, str]) -> tuple[int, dict[str, Any]]:
    now = rfc3339(time.time())
    js = jetstream_of(server)
    if js is None:
        return 200, {
            "server_id": server.server_id,
            "now": now,
            "disabled": True,
            "config": {},
            "limits": {},
            "total": 0,
        }
    want_accounts = _bool_arg(query, "accounts")
    want_streams = _bool_arg(query, "streams")
    want_consumers = _bool_arg(query, "consumers")
    messages = nbytes = streams = consumers = 0
    for ajs in js.accounts.values():
        for stream in ajs.streams.values():
            st = stream.store.state()
            messages += st.messages
            nbytes += st.bytes
            streams += 1
            consumers += len(stream.consumers)
    out: dict[str, Any] = dict(_js_stats(server))
    out["server_id"] = server.server_id
    out["now"] = now
    if js.standing_down:
        out["disabled"] = True
    out["config"] = _js_config(server)
    out["limits"] = {"default_max_consumers": 1000}
    if js.meta is not None:
        out["meta_cluster"] = js.meta.cluster_info()
    out["streams"] = streams
    out["consumers"] = consumers
    out["messages"] = messages
    out["bytes"] = nbytes
    out["total"] = len(js.accounts)
    if want_accounts or want_streams or want_consumers:
        details = []
        for name, ajs in js.accounts.items():
            detail: dict[str, Any] = {"name": name, "id": name}
            memory, storage, _ = ajs.usage()
            detail["memory"] = memory
            detail["storage"] = storage
            if want_streams or want_consumers:
                items = []
                for stream in ajs.streams.values():
                    item: dict[str, Any] = {
                        "name": stream.name,
                        "created": stream.info()["created"],
                        "state": stream.state_json(),
                    }
                    if want_consumers:
                        item["consumer_detail"] = [c.info() for c in stream.consumers.values()]
                    items.append(item)
                detail["stream_detail"] = items
            details.append(detail)
        out["account_details"] = details
    # pynatsd's own key: another JetStream server in the cluster (jetstream/standalone.py).
    if js.standing_down or js.conflict:
        out["error"] = js.standing_down or js.conflict
    return 200, out


def accountz(server: Server, query: Mapping[str, str]) -> tuple[int, dict[str, Any]]:
    now = rfc3339(time.time())
    name = query.get("acc", "")
    out: dict[str, Any] = {
        "server_id": server.server_id,
        "now": now,
        "system_account": server.system_account.name,
    }
    if not name:
        # `$SYS` exists only as the system account; another system account replaces it.
        out["accounts"] = sorted(
            n for n, a in server.accounts.items() if n != "$SYS" or a is server.system_account
        )
        return 200, out
    account = server.accounts.get(name)
    if account is None:
        raise BadRequest(f"Account {name} does not exist")
    st = account.sublist.stats()
    js_enabled = (js := jetstream_of(server)) is not None and name in js.accounts
    out["account_detail"] = {
        "account_name": name,
        "update_time": rfc3339(server.start_time),
        "expired": False,
        "complete": True,
        "jetstream_enabled": js_enabled,
        "leafnode_connections": 0,
        "client_connections": sum(1 for c in server.clients.values() if c.account is account),
        "subscriptions": st.num_subs,
        **({"mappings": account.mappings.describe()} if account.mappings is not None else {}),
        "name_tag": name,
        "sublist_stats": {
            "num_subscriptions": st.num_subs,
            "num_cache": st.num_cache,
            "num_inserts": st.num_inserts,
            "num_removes": st.num_removes,
            "num_matches": st.num_matches,
            "cache_hit_rate": st.cache_hit_rate,
            "max_fanout": st.max_fanout,
            "avg_fanout": st.avg_fanout,
        },
    }
    return 200, out


# (metric, help, type, /varz key) for the native Prometheus endpoint.
_METRICS = (
    ("connections", "Current client connections", "gauge", "connections"),
    ("total_connections", "Client connections since start", "counter", "total_connections"),
    ("subscriptions", "Current subscriptions", "gauge", "subscriptions"),
    ("in_msgs", "Messages received from clients", "counter", "in_msgs"),
    ("out_msgs", "Messages sent to clients", "counter", "out_msgs"),
    ("in_bytes", "Payload bytes received from clients", "counter", "in_bytes"),
    ("out_bytes", "Payload bytes sent to clients", "counter", "out_bytes"),
    ("slow_consumers", "Clients closed as slow consumers", "counter", "slow_consumers"),
    ("stale_connections", "Clients closed as stale", "counter", "stale_connections"),
    ("stalled_clients", "Fast producers stalled", "counter", "stalled_clients"),
    ("mem_bytes", "Peak resident memory of the process", "gauge", "mem"),
    ("cpu_percent", "Process CPU use", "gauge", "cpu"),
    ("max_payload_bytes", "Maximum message payload", "gauge", "max_payload"),
    ("leafnodes", "Current leaf node connections", "gauge", "leafnodes"),
)


def metrics(server: Server) -> str:
    """The Prometheus text exposition format (0.0.4) of the main /varz counters, with the
    metric names prometheus-nats-exporter uses (`gnatsd_varz_*`)."""
    v = varz(server)
    label = f'server_id="{server.server_id}"'
    lines: list[str] = []
    for name, help_text, kind, key in _METRICS:
        metric = f"gnatsd_varz_{name}"
        lines.append(f"# HELP {metric} {help_text}")
        lines.append(f"# TYPE {metric} {kind}")
        lines.append(f"{metric}{{{label}}} {v.get(key, 0)}")
    uptime = max(time.time() - server.start_time, 0.0)
    lines.append("# HELP gnatsd_varz_uptime_seconds Seconds since the server started")
    lines.append("# TYPE gnatsd_varz_uptime_seconds gauge")
    lines.append(f"gnatsd_varz_uptime_seconds{{{label}}} {uptime:.3f}")
    outbound, inbound = gateway_counts(server)
    if outbound or inbound or server.options.gateway is not None:
        for name, value in (("outbound", outbound), ("inbound", inbound)):
            metric = f"gnatsd_gatewayz_{name}_gateways"
            lines.append(f"# HELP {metric} Gateway connections {name} of this server")
            lines.append(f"# TYPE {metric} gauge")
            lines.append(f"{metric}{{{label}}} {value}")
    js = jetstream_of(server)
    if js is not None:
        stats = _js_stats(server)
        totals = js.totals()
        for name, value in (
            ("streams", totals["streams"]),
            ("consumers", totals["consumers"]),
            ("memory_bytes", stats["memory"]),
            ("storage_bytes", stats["storage"]),
            ("api_requests", stats["api"]["total"]),
            ("api_errors", stats["api"]["errors"]),
        ):
            metric = f"jetstream_server_{name}"
            lines.append(f"# TYPE {metric} gauge")
            lines.append(f"{metric}{{{label}}} {value}")
    return "\n".join(lines) + "\n"
