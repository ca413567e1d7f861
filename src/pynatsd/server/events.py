"""System account advisories: client connect and disconnect events.

Corresponds to nats-server's `server/events.go` (`accountConnectEvent`,
`accountDisconnectEvent`): JSON published in the system account on `$SYS.ACCOUNT.<acc>.CONNECT`
and `$SYS.ACCOUNT.<acc>.DISCONNECT`, which monitoring tools and system users subscribe to.
"""

from __future__ import annotations

import secrets
import time
from itertools import count
from typing import TYPE_CHECKING, Any

from pynatsd.gofmt import go_json, rfc3339_ns
from pynatsd.version import COMPAT_VERSION

if TYPE_CHECKING:
    from pynatsd.server.server import Server
    from pynatsd.server.session import ClientSession

CONNECT_TYPE = "io.nats.server.advisory.v1.client_connect"
DISCONNECT_TYPE = "io.nats.server.advisory.v1.client_disconnect"
# nats-server 2.15.1's feature flags (getMergedFeatureFlags), as /varz and every system
# message's `server` show them.
FEATURE_FLAGS = {
    "js_ack_fc_v2": False,
    "js_api_reply_v2": False,
    "js_raft_delete_range": True,
    "js_snapshot_sources": False,
}
# ServerCapability flags: JetStreamEnabled | BinaryStreamSnapshot | AccountNRG, set together
# when JetStream runs.
_JETSTREAM_FLAGS = 1 | 2 | 4
_seq = count(1)


def server_info(server: Server) -> dict[str, Any]:
    """The `server` block of every message the server publishes itself (Go's ServerInfo, as
    its internal send loop fills it in): `seq` counts them all."""
    jetstream = "jetstream" in server.parts
    info: dict[str, Any] = {
        "name": server.server_name,
        "host": server.options.host,
        "id": server.server_id,
    }
    if jetstream and server.options.jetstream_domain:
        info["domain"] = server.options.jetstream_domain
    info["ver"] = COMPAT_VERSION
    info["feature_flags"] = FEATURE_FLAGS
    info["jetstream"] = jetstream
    info["flags"] = _JETSTREAM_FLAGS if jetstream else 0
    info["seq"] = next(_seq)
    info["time"] = rfc3339_ns(time.time_ns())
    return info


def client_info(client: ClientSession, stopped: bool) -> dict[str, Any]:
    opts = client.connect_opts
    info: dict[str, Any] = {
        "start": rfc3339_ns(int(client.start * 1e9)),
        "host": client.host,
        "id": client.cid,
        "acc": client.account.name,
    }
    if client.auth_user:
        info["user"] = client.auth_user
    for key, name in (("name", "name"), ("lang", "lang"), ("version", "ver")):
        if opts.get(key):
            info[name] = opts[key]
    if client.rtt:
        info["rtt"] = int(client.rtt * 1e9)
    info["server"] = client.server.server_name
    if stopped:
        info["stop"] = rfc3339_ns(int((client.stop or time.time()) * 1e9))
    info["kind"] = "Client"
    info["client_type"] = "nats"
    return info


def _event(kind: str) -> dict[str, Any]:
    return {"type": kind, "id": secrets.token_hex(11), "timestamp": rfc3339_ns(time.time_ns())}


def client_connected(server: Server, client: ClientSession) -> None:
    system = server.system_account
    subject = f"$SYS.ACCOUNT.{client.account.name}.CONNECT"
    if not system.sublist.has_interest(subject):
        return  # nobody listens: skip building the event
    body = {
        **_event(CONNECT_TYPE),
        "server": server_info(server),
        "client": client_info(client, stopped=False),
    }
    server.publish_internal(system, subject, "", b"", go_json(body))


def client_disconnected(server: Server, client: ClientSession) -> None:
    system = server.system_account
    subject = f"$SYS.ACCOUNT.{client.account.name}.DISCONNECT"
    if not system.sublist.has_interest(subject):
        return
    body = {
        **_event(DISCONNECT_TYPE),
        "server": server_info(server),
        "client": client_info(client, stopped=True),
        "sent": {"msgs": client.stats.out_msgs, "bytes": client.stats.out_bytes},
        "received": {"msgs": client.stats.in_msgs, "bytes": client.stats.in_bytes},
        "reason": client.close_reason,
    }
    server.publish_internal(system, subject, "", b"", go_json(body))
