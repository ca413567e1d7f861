"""Configuration reload (SIGHUP or `--signal reload`): re-read the file, apply what may change
while running, refuse the rest.

Corresponds to nats-server's `server/reload.go`. A change to an option that cannot change at run
time is refused with the real server's text, `config reload not supported for <Field>: old=...,
new=...`, and the whole old configuration stays in force. Command-line flags keep overriding the
file, as at start-up.
"""

from __future__ import annotations

import dataclasses
import random
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from pynatsd.config import ConfigError, load_config, startup_errors
from pynatsd.config.values import go_atoi, split_host_port
from pynatsd.flags import apply_flags
from pynatsd.gofmt import go_duration
from pynatsd.logger import configure_from_options, log
from pynatsd.options import ClusterOptions, GatewayOptions, Options
from pynatsd.protocol import errors
from pynatsd.protocol.errors import CloseReason
from pynatsd.server.accounts import GLOBAL_ACCOUNT

if TYPE_CHECKING:
    from pynatsd.server.client import Client
    from pynatsd.server.server import Server

# Options that cannot change while running, with nats-server's Go field names (for the error).
NOT_RELOADABLE: dict[str, str] = {
    "host": "Host",
    "port": "Port",
    "server_name": "ServerName",
    "http_host": "HTTPHost",
    "http_port": "HTTPPort",
    "https_port": "HTTPSPort",
    "http_base_path": "HTTPBasePath",
    "max_pending": "MaxPending",
    "max_subscriptions": "MaxSubs",
    "no_auth_user": "NoAuthUser",
    "system_account": "SystemAccount",
    "store_dir": "StoreDir",
    "lame_duck_duration": "LameDuckDuration",
    "lame_duck_grace_period": "LameDuckGracePeriod",
    "no_header_support": "NoHeaderSupport",
    "disable_sublist_cache": "NoSublistCache",
    "max_closed_clients": "MaxClosedClients",
    "gateway": "Gateway",  # nats-server refuses any change to the gateway block but its TLS
}
# Options whose change needs every connection's credentials checked again.
AUTH_FIELDS = (
    "username",
    "password",
    "authorization",
    "users",
    "auth_timeout",
    "accounts",
    "operator_jwts",
    "trusted_keys",
    "resolver_preload",
)
# Options whose change needs the logging set up again.
LOGGING_FIELDS = frozenset(
    {"debug", "trace", "trace_verbose", "logtime", "logtime_utc", "log_file"}
)
# Fields that are bookkeeping rather than configuration, and the top-level `mappings`, which
# nats-server keeps as the global account's and reloads (and logs) with the accounts.
IGNORED = ("config_file", "mappings")


def _go_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return go_duration(value)  # float options are durations in seconds
    return str(value)


def changed_fields(old: Options, new: Options) -> list[str]:
    out = []
    for f in dataclasses.fields(Options):
        if f.name in IGNORED:
            continue
        if getattr(old, f.name) != getattr(new, f.name):
            out.append(f.name)
    return out


def reload(server: Server, flags: Mapping[str, Any]) -> bool:
    """Reload the configuration file, with the command-line `flags` given at start applied over
    it again; True when the new configuration is in force."""
    old = server.options
    path = old.config_file
    if not path:
        log.error("Failed to reload server configuration: no configuration file in use")
        return False
    try:
        loaded = load_config(path)
    except ConfigError as e:
        log.error("Failed to reload server configuration: %s", e)
        return False
    new = loaded.options
    try:
        apply_flags(new, dict(flags))
    except ConfigError as e:
        log.error("Failed to reload server configuration: %s", e)
        return False
    problems = startup_errors(new)
    if problems:
        log.error("Failed to reload server configuration: %s", problems[0])
        return False
    changes = changed_fields(old, new)
    for name in changes:
        if name == "cluster":
            problem = cluster_reload_problem(old.cluster, new.cluster)
            if problem:
                log.error("Failed to reload server configuration: %s", problem)
                return False
        if name == "gateway" and _without_tls(old.gateway) == _without_tls(new.gateway):
            continue  # only its TLS: applied to new connections below
        go_name = NOT_RELOADABLE.get(name)
        if go_name is not None:
            log.error(
                "Failed to reload server configuration: config reload not supported for %s: "
                "old=%s, new=%s",
                go_name,
                _go_value(getattr(old, name)),
                _go_value(getattr(new, name)),
            )
            return False
    server.options = new
    apply_changes(server, old, new, changes)
    for name in changes:
        if name in AUTH_FIELDS or name in ("users", "cluster", "gateway"):
            continue
        log.info("Reloaded: %s = %s", name, _go_value(getattr(new, name)))
    if any(name in AUTH_FIELDS for name in changes):
        log.info("Reloaded: authorization users")
    log.info("Reloaded: accounts")
    if "cluster" in changes:
        reload_cluster(server, old.cluster, new.cluster)
    if "gateway" in changes and new.gateway is not None:
        hook = getattr(server.parts.get("gateway"), "reload_tls", None)
        if hook is not None:
            hook(new.gateway)
    server.config_load_time = time.time()
    server.config_digest = loaded.digest
    log.info("Reloaded server configuration (%s)", loaded.digest)
    return True


def apply_changes(server: Server, old: Options, new: Options, changes: list[str]) -> None:
    """Make the running server follow the new options."""
    if LOGGING_FIELDS & set(changes):
        configure_from_options(new)
    # nats-server reloads authorization on every reload: its options always differ in
    # `accounts` and `users` (they carry run-time state), so every account and user limit and
    # permission is applied to the live connections again below, changed or not.
    server.reload_auth()
    server.rebuild_info()
    if "max_control_line" in changes:
        for client in list(server.clients.values()):
            client.parser.max_control_line = new.max_control_line
    if "max_payload" in changes:
        # The server's limit for every client; the account and user limits are applied over
        # it again below (nats-server's maxPayloadOption, then reloadAuthorization). As with
        # nats-server, only new connections learn the new value, from their INFO.
        for client in list(server.clients.values()):
            client.parser.max_payload = new.max_payload
    if "max_connections" in changes:
        _close_over_max_connections(server, new.max_connections)
    reauthorize_clients(server)
    server.flush_dirty()


def reauthorize_clients(server: Server) -> None:
    """What a reload does to each live client (nats-server's reloadAuthorization): a client
    whose user is gone or now belongs to another account is closed without a word; one whose
    credentials no longer pass gets `Authorization Violation`; every other one is bound again
    (account limits, user and account permissions) and loses the subscriptions its new
    permissions refuse."""
    clients = [c for c in server.clients.values() if c.connected and not c.closed]
    staying = []
    for client in clients:
        if _changed_account(server, client):
            client.close(CloseReason.CLIENT_CLOSED)
        else:
            staying.append(client)
    if not server.auth_required:
        # nats-server re-registers a client only when authentication is required.
        return
    for client in staying:
        if not client.recheck_auth():
            if not client.closed:
                log.error("%s - Authorization Error", client.label)
                client.close_with_error(
                    errors.AUTHORIZATION_VIOLATION, CloseReason.AUTHENTICATION_VIOLATION
                )
            continue
        _remove_refused_subscriptions(client)


def _changed_account(server: Server, client: Client) -> bool:
    """True when the client logged in by user name or nkey and no configured user of that name
    is in its account any more (nats-server's clientHasMovedToDifferentAccount). nats-server
    looks only at its `users` list, so a client of a single configured user, or one that sent
    a user name to a server without authentication, counts as moved on every reload."""
    user = client.config_user
    if user is not None:
        nkey, username = user.nkey, user.username
    else:
        nkey, username = _text(client.connect_opts, "nkey"), _text(client.connect_opts, "user")
    if not nkey and not username:
        return False
    now = server.authenticator.configured_user(nkey, username)
    return now is None or (now.account or GLOBAL_ACCOUNT) != client.account.name


def _remove_refused_subscriptions(client: Client) -> None:
    """Unsubscribe what the client's permissions no longer allow, telling it and the log
    (nats-server's processSubsOnConfigReload)."""
    perms = client.perms
    for sub in list(client.subs.values()):
        if perms.can_subscribe(sub.subject, sub.queue):
            continue
        client.unsubscribe(sub)
        sid = sub.sid.decode(errors="replace")
        client.send_err(errors.permissions_subscribe_removed(sub.subject, sub.queue, sid))
        if sub.queue:
            log.info(
                'Removed sub "%s" using queue "%s" (sid "%s") for %s - not authorized',
                sub.subject,
                sub.queue,
                sid,
                client.auth_user,
            )
        else:
            log.info(
                'Removed sub "%s" (sid "%s") for %s - not authorized',
                sub.subject,
                sid,
                client.auth_user,
            )


def _close_over_max_connections(server: Server, max_connections: int) -> None:
    """Close clients until no more than `max_connections` remain (nats-server's
    maxConnOption, which picks them in its map's random order)."""
    clients = [c for c in server.clients.values() if not c.closed]
    excess = len(clients) - max(max_connections, 0)
    if excess <= 0:
        return
    for client in random.sample(clients, excess):
        log.error("%s - maximum connections exceeded", client.label)
        client.close_with_error(
            errors.MAXIMUM_CONNECTIONS_EXCEEDED, CloseReason.MAX_CONNECTIONS_EXCEEDED
        )
    log.info("Closed %d connections to fall within max_connections", excess)


def _text(connect: Mapping[str, Any], key: str) -> str:
    value = connect.get(key)
    return value if isinstance(value, str) else ""


def _without_tls(gateway: GatewayOptions | None) -> GatewayOptions | None:
    """The gateway block as nats-server compares it on a reload: without its TLS blocks (their
    certificates, keys, CAs and pinned certificates; the timeouts still count)."""
    if gateway is None:
        return None
    remotes = [dataclasses.replace(r, tls=None) for r in gateway.gateways]
    return dataclasses.replace(gateway, tls=None, gateways=remotes)


# -- the cluster (nats-server's clusterOption, routesOption and validateClusterOpts) -------------


def _cluster_or_none(cluster: ClusterOptions | None) -> ClusterOptions:
    # A server outside a cluster has nats-server's zero ClusterOpts: no host, no port.
    return cluster if cluster is not None else ClusterOptions(host="")


def cluster_reload_problem(old: ClusterOptions | None, new: ClusterOptions | None) -> str:
    """validateClusterOpts: the route listener cannot move (nor start or stop), and a new
    advertise address must parse; "" when the change can be applied."""
    was, now = _cluster_or_none(old), _cluster_or_none(new)
    if was.host != now.host:
        return f"config reload not supported for cluster host: old={was.host}, new={now.host}"
    if was.port != now.port:
        return f"config reload not supported for cluster port: old={was.port}, new={now.port}"
    if now.advertise:
        problem = advertise_problem(now.advertise)
        if problem:
            return f"invalid Cluster.Advertise value of {now.advertise}, err={problem}"
    return ""


def advertise_problem(advertise: str) -> str:
    """nats-server's parseHostPort on an advertise address (a missing port is allowed)."""
    try:
        _, port = split_host_port(advertise)
    except ValueError as e:
        if "missing port" not in str(e):
            return f"address {advertise}: {e}"
        port = "0"
    try:
        go_atoi(port.strip())
    except ValueError:
        reason = (
            "invalid syntax" if not port.strip().lstrip("+-").isdigit() else "value out of range"
        )
        return f'strconv.Atoi: parsing "{port.strip()}": {reason}'
    return ""


def reload_cluster(server: Server, old: ClusterOptions | None, new: ClusterOptions | None) -> None:
    """Apply a reloaded cluster block: the cluster part (if the server has one) learns the new
    routes through `reload_routes(routes)` and the other settings through
    `reload_options(cluster)`, each only when it changed; the log says what was reloaded, as
    nats-server's `Reloaded: cluster` and `Reloaded: cluster routes`."""
    was, now = _cluster_or_none(old), _cluster_or_none(new)
    part = server.parts.get("cluster")
    if dataclasses.replace(was, routes=now.routes) != now:
        hook = getattr(part, "reload_options", None)
        if hook is not None and new is not None:
            hook(new)
        log.info("Reloaded: cluster")
    if was.routes != now.routes:
        hook = getattr(part, "reload_routes", None)
        if hook is not None:
            hook(list(now.routes))
        log.info("Reloaded: cluster routes")
