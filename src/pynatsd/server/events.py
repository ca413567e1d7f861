"""System account advisories: connect and disconnect events of clients and leaf nodes.

Corresponds to nats-server's `server/events.go` (`accountConnectEvent`,
`accountDisconnectEvent`, `sendLeafNodeConnect`, `accConnsUpdate`): JSON published in the
system account on `$SYS.ACCOUNT.<acc>.CONNECT` and `$SYS.ACCOUNT.<acc>.DISCONNECT`,
`$SYS.ACCOUNT.<acc>.LEAFNODE.CONNECT`, and the account's connection counts on
`$SYS.SERVER.ACCOUNT.<acc>.CONNS` and `$SYS.ACCOUNT.<acc>.SERVER.CONNS`, which monitoring tools
and system users subscribe to.
"""

from __future__ import annotations

import secrets
import time
from itertools import count
from typing import TYPE_CHECKING, Any, Protocol

from pynatsd.gofmt import go_json, rfc3339_ns
from pynatsd.version import COMPAT_VERSION

if TYPE_CHECKING:
    from pynatsd.server.accounts import Account
    from pynatsd.server.delivery import Stats
    from pynatsd.server.server import Server
    from pynatsd.server.session import ClientSession

CONNECT_TYPE = "io.nats.server.advisory.v1.client_connect"
CONNS_TYPE = "io.nats.server.advisory.v1.account_connections"
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


class Link(Protocol):
    """What the events read of a server-to-server connection (a leaf node's)."""

    kind: str
    start: float
    host: str
    rtt: float
    stats: Stats
    close_reason: str

    @property
    def cid(self) -> int: ...

    @property
    def account(self) -> Account: ...


def server_info(server: Server) -> dict[str, Any]:
    """The `server` block of every message the server publishes itself (Go's ServerInfo, as
    its internal send loop fills it in): `seq` counts them all."""
    jetstream = "jetstream" in server.parts
    info: dict[str, Any] = {
        "name": server.server_name,
        "host": server.options.host,
        "id": server.server_id,
    }
    cluster = cluster_name(server)
    if cluster:
        info["cluster"] = cluster
    if jetstream and server.options.jetstream_domain:
        info["domain"] = server.options.jetstream_domain
    info["ver"] = COMPAT_VERSION
    info["feature_flags"] = FEATURE_FLAGS
    info["jetstream"] = jetstream
    info["flags"] = _JETSTREAM_FLAGS if jetstream else 0
    info["seq"] = next(_seq)
    info["time"] = rfc3339_ns(time.time_ns())
    return info


def cluster_name(server: Server) -> str:
    """nats-server's cachedClusterName: the cluster's (or gateway's) name; a server that dials
    leaf remotes without a cluster takes its own name."""
    if server.cluster_name:
        return server.cluster_name
    options = server.options
    if options.leafnodes and options.leafnodes.remotes and options.cluster is None:
        return server.server_name
    return ""


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


def leaf_info(leaf: Link, user: str, name: str, version: str, stopped: bool) -> dict[str, Any]:
    """The `client` block of a leaf connection's events: what its CONNECT said (`user`, `name`,
    `version`: nothing on the side that dialed), and the account's name tag."""
    info: dict[str, Any] = {
        "start": rfc3339_ns(int(leaf.start * 1e9)),
        "host": leaf.host,
        "id": leaf.cid,
        "acc": leaf.account.name,
    }
    for key, value in (("user", user), ("name", name), ("ver", version)):
        if value:
            info[key] = value
    if leaf.rtt:
        info["rtt"] = int(leaf.rtt * 1e9)
    if stopped:
        info["stop"] = rfc3339_ns(time.time_ns())
    config = leaf.account.config
    info["name_tag"] = (
        config.name_tag if config is not None and config.name_tag else leaf.account.name
    )
    info["kind"] = leaf.kind
    return info


def leaf_connected(server: Server, leaf: Link, info: dict[str, Any]) -> None:
    """accountConnectEvent for a leaf connection this server dialed."""
    subject = f"$SYS.ACCOUNT.{leaf.account.name}.CONNECT"
    if not server.system_account.sublist.has_interest(subject):
        return
    body = {**_event(CONNECT_TYPE), "server": server_info(server), "client": info}
    server.publish_internal(server.system_account, subject, "", b"", go_json(body))


def leaf_disconnected(server: Server, leaf: Link, info: dict[str, Any]) -> None:
    """accountDisconnectEvent for a leaf connection, on either side."""
    subject = f"$SYS.ACCOUNT.{leaf.account.name}.DISCONNECT"
    if not server.system_account.sublist.has_interest(subject):
        return
    body = {
        **_event(DISCONNECT_TYPE),
        "server": server_info(server),
        "client": info,
        "sent": {"msgs": leaf.stats.out_msgs, "bytes": leaf.stats.out_bytes},
        "received": {"msgs": leaf.stats.in_msgs, "bytes": leaf.stats.in_bytes},
        "reason": leaf.close_reason,
    }
    server.publish_internal(server.system_account, subject, "", b"", go_json(body))


def leafnode_connect(server: Server, account: Account) -> None:
    """sendLeafNodeConnect: a leaf bound to `account` connected; only with gateways on (the
    other clusters switch the account to interest-only mode)."""
    if "gateway" not in server.parts:
        return
    subject = f"$SYS.ACCOUNT.{account.name}.LEAFNODE.CONNECT"
    if not server.system_account.sublist.has_interest(subject):
        return
    body = {"server": server_info(server), "acc": account.name}
    server.publish_internal(server.system_account, subject, "", b"", go_json(body))


def conns_changed(server: Server, account: Account) -> None:
    """A connection joined or left `account` (nats-server's Account.addClient/removeClient):
    whoever keeps the account's counts (the system services) is told."""
    for hook in server.account_conns_hooks:
        hook(account)


def account_conns(server: Server, account: Account, stat: dict[str, Any]) -> None:
    """accConnsUpdate: the account's connection counts (`stat`, Account.statz) after a
    connection came or went, on the old subject and the new one; never for the global
    account."""
    if account is server.global_account:
        return
    system = server.system_account
    event = _event(CONNS_TYPE)  # one event on both subjects, each sent with its own seq
    for subject in (
        f"$SYS.SERVER.ACCOUNT.{account.name}.CONNS",
        f"$SYS.ACCOUNT.{account.name}.SERVER.CONNS",
    ):
        if system.sublist.has_interest(subject):
            body = {**event, "server": server_info(server), **stat}
            server.publish_internal(system, subject, "", b"", go_json(body))
