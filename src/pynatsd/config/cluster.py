"""The `cluster` block: routes to the other servers of a cluster, as nats-server's `parseCluster`
(server/opts.go) reads it, the defaults `setBaselineOptions` gives it and the checks
`validateCluster` (server/server.go) makes at start-up.

nats-server walks the block's keys in Go map order and recovers a failed type assertion (a
panic) for the whole block: such an error ends the block here too. Every other problem is
collected and the next key is read, as there.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from pynatsd.config.authorization import parse_authorization
from pynatsd.config.parser import ConfigError, Node, to_plain
from pynatsd.config.registry import (
    Abort,
    Loader,
    SkipKey,
    config_key,
    conversion,
    read_block,
    string_or_list,
    want_bool,
    want_int,
    want_list,
    want_map,
    want_str,
)
from pynatsd.config.tls import read_tls_block
from pynatsd.config.urls import URLError, host_port_error, parse_url
from pynatsd.config.users import _check_subjects, parse_permissions
from pynatsd.config.values import NANOS, go_atoi, go_type, split_host_port
from pynatsd.gofmt import parse_go_duration
from pynatsd.options import (
    AUTH_TIMEOUT,
    TLS_TIMEOUT,
    ClusterOptions,
    Options,
    Permissions,
    TLSBlock,
)
from pynatsd.tls import TLSConfigError, peer_contexts

# Routes never ping less often than this (nats-server's routeMaxPingInterval).
ROUTE_MAX_PING_INTERVAL = 30.0
DEFAULT_POOL_SIZE = 3
DEFAULT_SYSTEM_ACCOUNT = "$SYS"
CLUSTER_NAME_HAS_SPACES = "cluster name cannot contain spaces"
NIL_POINTER = "runtime error: invalid memory address or nil pointer dereference"

# What `compression` may say (any case), and the mode each spelling means for routes
# (nats-server's validateAndNormalizeCompressionOption with "on" meaning s2_fast).
COMPRESSION_MODES = {
    "on": "s2_fast",
    "enabled": "s2_fast",
    "true": "s2_fast",
    "not supported": "not supported",
    "not_supported": "not supported",
    "disabled": "off",
    "off": "off",
    "false": "off",
    "accept": "accept",
    "auto": "s2_auto",
    "s2_auto": "s2_auto",
    "fast": "s2_fast",
    "s2_fast": "s2_fast",
    "better": "s2_better",
    "s2_better": "s2_better",
    "best": "s2_best",
    "s2_best": "s2_best",
}


@config_key("cluster")
def _apply_cluster(loader: Loader, name: str, node: Node) -> None:
    if not isinstance(node.value, dict):
        raise loader.abort(node, f"Expected map to define cluster, got {go_type(node.value)}")
    cluster = _cluster_of(loader.opts)
    read_block(loader, _FIELDS, cluster, node)


def _cluster_of(opts: Options) -> ClusterOptions:
    """The options' cluster settings, made unset if there are none yet: durations and counts
    0 as in nats-server's ClusterOpts, the defaults settled once the whole file is read."""
    if opts.cluster is None:
        opts.cluster = ClusterOptions(
            host="",
            pool_size=0,
            compression="",
            auth_timeout=0.0,
            tls_timeout=0.0,
            ping_interval=0.0,
            ping_max=0,
        )
    return opts.cluster


class Listener(Protocol):
    """A block with a listen address and links to other servers (the cluster's, the
    gateway's): the keys both read alike."""

    host: str
    port: int
    advertise: str
    connect_retries: int
    connect_backoff: bool
    write_deadline: float
    write_timeout: str


def _error(loader: Loader, node: Node, reason: str) -> SkipKey:
    loader.error(node, reason)
    return SkipKey()


def _name(loader: Loader, cluster: ClusterOptions, key: str, entry: Node) -> None:
    name = want_str(loader, entry)
    if " " in name:
        raise _error(loader, entry, CLUSTER_NAME_HAS_SPACES)
    cluster.name = name


def _listen(loader: Loader, cluster: Listener, key: str, entry: Node) -> None:
    value = entry.value
    if isinstance(value, int) and not isinstance(value, bool):
        cluster.host, cluster.port = "", value
        return
    if not isinstance(value, str):
        raise _error(loader, entry, f"expected port or host:port, got {go_type(value)}")
    try:
        host, port = split_host_port(value)
    except ValueError:
        raise _error(loader, entry, f'could not parse address string "{value}"') from None
    try:
        cluster.port = go_atoi(port)
    except ValueError:
        raise _error(loader, entry, f'could not parse port "{port}"') from None
    cluster.host = host


def _port(loader: Loader, cluster: Listener, key: str, entry: Node) -> None:
    cluster.port = want_int(loader, entry)


def _host(loader: Loader, cluster: Listener, key: str, entry: Node) -> None:
    cluster.host = want_str(loader, entry)


def _authorization(loader: Loader, cluster: ClusterOptions, key: str, entry: Node) -> None:
    try:
        fields = want_map(loader, entry)
    except Abort:
        raise loader.abort(entry, NIL_POINTER) from None
    if any(k.lower() in ("auth_callout", "auth_hook") for k in fields):
        raise _error(loader, entry, "Cluster authorization does not support callouts")
    errors_before = len(loader.errors)
    try:
        auth = parse_authorization(loader, key, entry)
    except Abort:
        if loader.errors[-1].reason.startswith("error parsing authorization config"):
            raise SkipKey() from None  # an error parseAuthorization returns
        # parseAuthorization recovers a panic and returns no result, which parseCluster then
        # dereferences: a second panic, that ends the block.
        raise loader.abort(entry, NIL_POINTER) from None
    if len(loader.errors) > errors_before:
        raise SkipKey()
    if auth.users is not None or auth.nkeys:
        raise _error(loader, entry, "Cluster authorization does not allow multiple users")
    if auth.token:
        raise _error(loader, entry, "Cluster authorization does not support tokens")
    cluster.username, cluster.password = auth.user, auth.password
    cluster.auth_timeout = auth.timeout
    perms = auth.default_permissions
    if perms is not None:
        problem = _cluster_subjects_problem(perms)
        if problem:
            raise _error(loader, entry, problem)
        loader.warn(
            entry,
            key,
            'setting "permissions" within cluster authorization block is deprecated',
        )
        # The block's own `permissions` wins, whichever comes first.
        if cluster.permissions is None:
            cluster.permissions = perms


def _routes(loader: Loader, cluster: ClusterOptions, key: str, entry: Node) -> None:
    elements = want_list(loader, entry)
    routes: list[str] = []
    seen: set[str] = set()
    failed = False
    for element in elements:
        try:
            text = want_str(loader, element)
        except Abort:
            # parseURLs recovers its own panic: the routes stay unset, the block goes on.
            raise SkipKey() from None
        if text in seen:
            loader.warn(element, text, "Duplicate route entry detected")
            continue
        seen.add(text)
        trimmed = text.strip()
        try:
            parse_url(trimmed)
        except URLError:
            loader.error(element, f'error parsing route url ["{trimmed}"]')
            failed = True
            continue
        routes.append(trimmed)
    if failed:
        raise SkipKey()
    cluster.routes = routes


def _tls(loader: Loader, cluster: ClusterOptions, key: str, entry: Node) -> None:
    cluster.tls = read_peer_tls(loader, entry)
    cluster.tls_timeout = cluster.tls.timeout


def read_peer_tls(loader: Loader, entry: Node) -> TLSBlock:
    """A `tls` block between servers (cluster, gateway), read as the client `tls` block is
    (nats-server's getTLSConfig), its files loaded now so that a bad block fails the load as
    it does there; SkipKey when it does."""
    try:
        draft = read_tls_block(loader, entry)
    except Abort as e:
        raise SkipKey() from e
    block = TLSBlock(
        cert_file=draft.cert,
        key_file=draft.key,
        ca_file=draft.ca,
        insecure=draft.insecure,
        timeout=draft.timeout,
        min_version=draft.min_version,
        ciphers=draft.ciphers,
        pinned_certs=draft.pinned,
    )
    try:
        peer_contexts(block)
    except TLSConfigError as e:
        loader.error(entry, str(e))
        raise SkipKey() from None
    return block


def _advertise(loader: Loader, cluster: Listener, key: str, entry: Node) -> None:
    cluster.advertise = want_str(loader, entry)


def _no_advertise(loader: Loader, cluster: ClusterOptions, key: str, entry: Node) -> None:
    cluster.no_advertise = want_bool(loader, entry)


def _connect_retries(loader: Loader, cluster: Listener, key: str, entry: Node) -> None:
    cluster.connect_retries = want_int(loader, entry)


def _connect_backoff(loader: Loader, cluster: Listener, key: str, entry: Node) -> None:
    cluster.connect_backoff = want_bool(loader, entry)


def _permissions(loader: Loader, cluster: ClusterOptions, key: str, entry: Node) -> None:
    if not isinstance(entry.value, dict):
        # parseUserPermissions' own error carries no position.
        reason = f"Expected permissions to be a map/struct, got {to_plain(entry.value)}"
        loader.errors.append(ConfigError(reason))
        raise SkipKey()
    errors_before = len(loader.errors)
    perms = parse_permissions(loader, entry)
    if perms is None or len(loader.errors) > errors_before:
        raise SkipKey()
    if perms.response is not None:
        raise _error(loader, entry, "Cluster permissions do not support dynamic responses")
    problem = _cluster_subjects_problem(perms)
    if problem:
        raise _error(loader, entry, problem)
    cluster.permissions = perms


def _pool_size(loader: Loader, cluster: ClusterOptions, key: str, entry: Node) -> None:
    cluster.pool_size = want_int(loader, entry)


def _accounts(loader: Loader, cluster: ClusterOptions, key: str, entry: Node) -> None:
    value = entry.value
    if isinstance(value, list):
        cluster.accounts = string_or_list(loader, entry, "accounts")
    elif isinstance(value, str):
        cluster.accounts = [value]
    else:
        # parseStringArray reports it and the field stays unset.
        loader.error(entry, f"error parsing accounts: unsupported type {go_type(value)}")
        cluster.accounts = []


def _compression(loader: Loader, cluster: ClusterOptions, key: str, entry: Node) -> None:
    value = entry.value
    if isinstance(value, bool):
        cluster.compression = "s2_fast" if value else "off"
    elif isinstance(value, str):
        cluster.compression = value  # checked at start-up, as nats-server does
    elif isinstance(value, dict):
        for field_name, field_entry in value.items():
            lowered = field_name.lower()
            if lowered == "mode":
                cluster.compression = _compression_str(loader, field_entry)
            elif lowered in ("rtt_thresholds", "thresholds", "rtts", "rtt"):
                for element in _compression_list(loader, field_entry):
                    text = _compression_str(loader, element)
                    try:
                        parse_go_duration(text)
                    except ValueError as e:
                        raise _error(loader, field_entry, str(e)) from None
            elif not field_entry.used_variable:
                raise _error(loader, field_entry, f'unknown field "{field_name}"')
    else:
        raise _error(
            loader,
            entry,
            f'field "{key}" should be a boolean or a structure, got {go_type(value)}',
        )


def _compression_str(loader: Loader, node: Node) -> str:
    # parseCompression recovers its own panics into one error for the `compression` key.
    if not isinstance(node.value, str):
        raise _error(loader, node, conversion(node, "string"))
    return node.value


def _compression_list(loader: Loader, node: Node) -> list[Node]:
    if not isinstance(node.value, list):
        raise _error(loader, node, conversion(node, "[]interface {}"))
    return node.value


def _ping_interval(loader: Loader, cluster: ClusterOptions, key: str, entry: Node) -> None:
    seconds = _duration(loader, "ping_interval", entry)
    cluster.ping_interval = seconds
    if seconds > ROUTE_MAX_PING_INTERVAL:
        loader.warnings.append(
            f"{entry.where}: Cluster 'ping_interval' will reset to 30s which is the max for routes"
        )


def _ping_max(loader: Loader, cluster: ClusterOptions, key: str, entry: Node) -> None:
    cluster.ping_max = want_int(loader, entry)


def _write_deadline(loader: Loader, cluster: Listener, key: str, entry: Node) -> None:
    cluster.write_deadline = _duration(loader, "write_deadline", entry)


def _write_timeout(loader: Loader, cluster: Listener, key: str, entry: Node) -> None:
    policy = want_str(loader, entry)
    if policy not in ("default", "close", "retry"):
        raise _error(loader, entry, "write_timeout must be 'default', 'close' or 'retry'")
    cluster.write_timeout = policy


def _duration(loader: Loader, name: str, entry: Node) -> float:
    """nats-server's parseDuration: a duration string, or (with a warning) whole seconds."""
    value = entry.value
    if isinstance(value, str):
        try:
            return parse_go_duration(value) / NANOS
        except ValueError as e:
            loader.error(entry, f"error parsing {name}: {e}")
            return 0.0
    loader.warn(entry, name, f"{name} should be converted to a duration")
    return float(want_int(loader, entry))


_FIELDS = {
    "name": _name,
    "listen": _listen,
    "port": _port,
    "host": _host,
    "net": _host,
    "authorization": _authorization,
    "routes": _routes,
    "tls": _tls,
    "cluster_advertise": _advertise,
    "advertise": _advertise,
    "no_advertise": _no_advertise,
    "connect_retries": _connect_retries,
    "connect_backoff": _connect_backoff,
    "permissions": _permissions,
    "pool_size": _pool_size,
    "accounts": _accounts,
    "compression": _compression,
    "ping_interval": _ping_interval,
    "ping_max": _ping_max,
    "write_deadline": _write_deadline,
    "write_timeout": _write_timeout,
}


def _cluster_subjects_problem(perms: Permissions) -> str:
    """checkClusterPermissionSubjects: no queue groups in route permissions."""
    for what, permission in (("import", perms.publish), ("export", perms.subscribe)):
        if permission is None:
            continue
        for kind in ("allow", "deny"):
            subjects: list[str] | None = getattr(permission, kind)
            problem = _check_subjects(subjects or [], allow_queue=False)
            if problem:
                return f"cluster {what} {kind}: {problem}"
    return ""


# -- after the whole file, and at start-up -------------------------------------------------------


def settle(opts: Options) -> None:
    """setBaselineOptions for the cluster: defaults for a server with a route listener."""
    cluster = opts.cluster
    if cluster is None:
        return
    if cluster.port != 0:
        cluster.host = cluster.host or "0.0.0.0"
        cluster.tls_timeout = cluster.tls_timeout or TLS_TIMEOUT
        if cluster.tls is not None:
            cluster.tls.timeout = cluster.tls_timeout
        cluster.auth_timeout = cluster.auth_timeout or AUTH_TIMEOUT
        cluster.pool_size = cluster.pool_size or DEFAULT_POOL_SIZE
        if cluster.pool_size > 0:
            system = opts.system_account or ("" if opts.no_system_account else "$SYS")
            if system and system not in cluster.accounts:
                cluster.accounts.append(system)
        cluster.compression = cluster.compression or "accept"
    # The mode's canonical name ("on" is s2_fast); an unknown one fails at start-up.
    cluster.compression = COMPRESSION_MODES.get(cluster.compression.lower(), cluster.compression)
    # What a route uses when the block does not say (nats-server reads these per route).
    interval = cluster.ping_interval or opts.ping_interval
    cluster.ping_interval = min(interval, ROUTE_MAX_PING_INTERVAL)
    cluster.ping_max = cluster.ping_max or opts.ping_max


def startup_problems(opts: Options) -> list[str]:
    """validateCluster: what nats-server refuses to start with."""
    cluster = opts.cluster
    if cluster is None:
        return []
    if cluster.name and " " in cluster.name:
        return [CLUSTER_NAME_HAS_SPACES]
    if cluster.compression:
        mode = COMPRESSION_MODES.get(cluster.compression.lower())
        if mode is None:
            return [f'unsupported compression mode "{cluster.compression}"']
    if cluster.accounts:
        if cluster.pool_size < 0:
            return ["pool_size cannot be negative if pinned accounts are specified"]
        seen: set[str] = set()
        for account in cluster.accounts:
            if account in seen:
                listed = " ".join(f'"{a}"' for a in cluster.accounts)
                return [
                    f'found duplicate account name "{account}" in pinned accounts list [{listed}]'
                ]
            seen.add(account)
    return []


# -- the command line ----------------------------------------------------------------------------

# Flags that set one field of the cluster options ({flag dest: ClusterOptions field}).
_CLUSTER_FLAGS = {
    "cluster_name": "name",
    "cluster_advertise": "advertise",
    "no_advertise": "no_advertise",
    "connect_retries": "connect_retries",
}
ROUTES_NEED_CLUSTER = "solicited routes require cluster capabilities, e.g. --cluster"


def apply_cluster_flags(opts: Options, flags: Mapping[str, Any]) -> None:
    """`--cluster`/`--cluster_listen`, `--routes` and the other cluster flags over the file, as
    nats-server's ConfigureOptions (overrideCluster, RoutesFromStr) applies them. Raises
    `ConfigError` with nats-server's text for a flag it refuses."""
    given = [dest for dest in (*_CLUSTER_FLAGS, "cluster_listen", "routes") if dest in flags]
    if not given:
        return
    cluster = _cluster_of(opts)
    for dest, attribute in _CLUSTER_FLAGS.items():
        if dest in flags:
            setattr(cluster, attribute, flags[dest])
    listen = flags.get("cluster_listen")
    if listen is not None:
        _override_cluster(cluster, listen)
    routes = flags.get("routes")
    if routes is not None:
        cluster.routes = routes_from_flag(routes)
        if routes and not listen and not cluster.host and cluster.port == 0:
            raise ConfigError(ROUTES_NEED_CLUSTER)
    settle(opts)


def routes_from_flag(text: str) -> list[str]:
    """RoutesFromStr: comma-separated URLs; an empty string is no routes."""
    if not text:
        return []
    routes = [part.strip() for part in text.split(",")]
    for route in routes:
        try:
            parse_url(route)
        except URLError as e:
            # nats-server keeps a nil URL here and crashes later; refusing it is kinder.
            raise ConfigError(str(e)) from None
    return routes


def _override_cluster(cluster: ClusterOptions, listen: str) -> None:
    """overrideCluster: the listen URL's host and port (":-1" for a random one), and its
    userinfo as the route credentials."""
    if not listen:
        cluster.port = 0  # `--cluster ""` turns clustering off
        return
    random_port = listen.endswith(":-1")
    if random_port:
        listen = listen[:-3] + ":0"
    try:
        url = parse_url(listen)
    except URLError as e:
        raise ConfigError(str(e)) from None
    problem = host_port_error(url.host)
    if problem:
        raise ConfigError(problem)
    host, port = split_host_port(url.host)
    cluster.host = host
    if random_port:
        cluster.port = -1
    else:
        try:
            cluster.port = int(port)
        except ValueError:
            raise ConfigError("expected integer") from None
    if url.username is not None:
        if url.password is None:
            raise ConfigError("expected cluster password to be set")
        cluster.username, cluster.password = url.username, url.password
    else:
        # The command line's URL has no credentials: none from the file either.
        cluster.username = cluster.password = ""
