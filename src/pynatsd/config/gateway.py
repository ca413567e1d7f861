"""The `gateway` block: connections between clusters (a super-cluster), as nats-server's
`parseGateway` and `parseGateways` (server/opts.go) read it, the defaults `setBaselineOptions`
gives it and the checks `validateGatewayOptions` (server/gateway.go) and `validateCluster`
(server/server.go) make at start-up.

A wrong type for a key is a recovered Go panic that ends the block, as in config/cluster.py;
other problems are collected and the next key is read. A `tls` block (the gateway's, or a
remote's own) is read as the cluster's is (nats-server's getTLSConfig).
"""

from __future__ import annotations

from pynatsd.config.authorization import parse_authorization
from pynatsd.config.cluster import (
    _advertise,
    _connect_backoff,
    _connect_retries,
    _error,
    _host,
    _listen,
    _port,
    _write_deadline,
    _write_timeout,
    read_peer_tls,
)
from pynatsd.config.parser import ConfigError, Node
from pynatsd.config.registry import (
    Abort,
    Loader,
    SkipKey,
    config_key,
    read_block,
    want_bool,
    want_list,
    want_map,
    want_str,
)
from pynatsd.config.urls import URLError, parse_url
from pynatsd.config.values import go_type
from pynatsd.options import (
    AUTH_TIMEOUT,
    TLS_TIMEOUT,
    GatewayOptions,
    Options,
    RemoteGatewayOptions,
)

GATEWAY_NAME_HAS_SPACES = "gateway name cannot contain spaces"
CLUSTER_NAME_CONFLICT = "cluster name conflicts between cluster and gateway definitions"
NIL_POINTER = "runtime error: invalid memory address or nil pointer dereference"


@config_key("gateway")
def _apply_gateway(loader: Loader, name: str, node: Node) -> None:
    if not isinstance(node.value, dict):
        raise loader.abort(node, f"Expected gateway to be a map, got {go_type(node.value)}")
    gateway = loader.opts.gateway
    if gateway is None:
        gateway = loader.opts.gateway = GatewayOptions()
    read_block(loader, _FIELDS, gateway, node)


def _name(loader: Loader, gateway: GatewayOptions, key: str, entry: Node) -> None:
    name = want_str(loader, entry)
    if " " in name:
        raise _error(loader, entry, GATEWAY_NAME_HAS_SPACES)
    gateway.name = name


def _authorization(loader: Loader, gateway: GatewayOptions, key: str, entry: Node) -> None:
    fields = want_map(loader, entry)
    errors_before = len(loader.errors)
    try:
        auth = parse_authorization(loader, key, entry)
    except Abort:
        raise SkipKey() from None
    if len(loader.errors) > errors_before:
        raise SkipKey()
    if auth.users is not None or auth.nkeys:
        raise _error(loader, entry, "Gateway authorization does not allow multiple users")
    if auth.token:
        raise _error(loader, entry, "Gateway authorization does not support tokens")
    if any(k.lower() in ("auth_callout", "auth_hook") for k in fields):
        raise _error(loader, entry, "Gateway authorization does not support callouts")
    gateway.username, gateway.password = auth.user, auth.password
    gateway.auth_timeout = auth.timeout


def _tls(loader: Loader, gateway: GatewayOptions, key: str, entry: Node) -> None:
    gateway.tls = read_peer_tls(loader, entry)
    gateway.tls_timeout = gateway.tls.timeout


def _reject_unknown(loader: Loader, gateway: GatewayOptions, key: str, entry: Node) -> None:
    gateway.reject_unknown = want_bool(loader, entry)


def _gateways(loader: Loader, gateway: GatewayOptions, key: str, entry: Node) -> None:
    if not isinstance(entry.value, list):
        # parseGateways is handed the value already unwrapped: its error has no position, and
        # parseGateway returns it, ending the block.
        reason = f"Expected gateways field to be an array, got {go_type(entry.value)}"
        loader.errors.append(ConfigError(reason))
        raise Abort()
    remotes: list[RemoteGatewayOptions] = []
    for element in entry.value:
        if not isinstance(element.value, dict):
            loader.error(element, f"Expected gateway entry to be a map/struct, got {element.value}")
            continue
        remote = RemoteGatewayOptions()
        try:
            for field_name, value in element.value.items():
                _remote_field(loader, remote, field_name, value)
        except Abort:
            return  # parseGateways recovers the panic; the list stays unset
        remotes.append(remote)
    gateway.gateways = remotes


def _remote_field(loader: Loader, remote: RemoteGatewayOptions, key: str, entry: Node) -> None:
    lowered = key.lower()
    if lowered == "name":
        remote.name = want_str(loader, entry)
    elif lowered == "url":
        url = want_str(loader, entry).strip()
        if _bad_url(url):
            loader.error(entry, f'error parsing gateway url ["{url}"]')
            return
        remote.urls.append(url)
    elif lowered == "urls":
        urls: list[str] = []
        seen: set[str] = set()
        for element in want_list(loader, entry):
            text = want_str(loader, element)
            if text in seen:
                loader.warn(element, text, "Duplicate gateway entry detected")
                continue
            seen.add(text)
            if _bad_url(text.strip()):
                loader.error(element, f'error parsing gateway url ["{text.strip()}"]')
                return
            urls.append(text.strip())
        remote.urls = urls
    elif lowered == "tls":
        try:
            remote.tls = read_peer_tls(loader, entry)
        except SkipKey:
            return
        remote.tls_timeout = remote.tls.timeout
    elif not entry.used_variable:
        loader.error(entry, f'unknown field "{key}"')


def _bad_url(text: str) -> bool:
    try:
        parse_url(text)
    except URLError:
        return True
    return False


_FIELDS = {
    "name": _name,
    "listen": _listen,
    "port": _port,
    "host": _host,
    "net": _host,
    "authorization": _authorization,
    "tls": _tls,
    "advertise": _advertise,
    "connect_retries": _connect_retries,
    "connect_backoff": _connect_backoff,
    "gateways": _gateways,
    "reject_unknown": _reject_unknown,
    "reject_unknown_cluster": _reject_unknown,
    "write_deadline": _write_deadline,
    "write_timeout": _write_timeout,
}


# -- after the whole file, and at start-up -------------------------------------------------------


def settle(opts: Options) -> None:
    """setBaselineOptions for the gateway: defaults for a server with a gateway listener."""
    gateway = opts.gateway
    if gateway is None or gateway.port == 0:
        return
    gateway.host = gateway.host or "0.0.0.0"
    gateway.tls_timeout = gateway.tls_timeout or TLS_TIMEOUT
    if gateway.tls is not None:
        gateway.tls.timeout = gateway.tls_timeout
    gateway.auth_timeout = gateway.auth_timeout or AUTH_TIMEOUT
    cluster = opts.cluster
    if gateway.name and cluster is not None and not cluster.name:
        cluster.name = gateway.name  # set here so the cluster is not dynamic (validateCluster)


def startup_problems(opts: Options) -> list[str]:
    """validateGatewayOptions, and validateCluster's check that the names agree (the gateway
    name becomes the cluster name)."""
    gateway = opts.gateway
    if gateway is None or (not gateway.name and gateway.port == 0):
        return []
    if not gateway.name:
        return ["gateway has no name"]
    if " " in gateway.name:
        return [GATEWAY_NAME_HAS_SPACES]
    if gateway.port == 0:
        return [f'gateway "{gateway.name}" has no port specified (select -1 for random port)']
    for i, remote in enumerate(gateway.gateways):
        if not remote.name:
            return [f"gateway in the list {i} has no name"]
        if not remote.urls:
            return [f'gateway "{remote.name}" has no URL']
    cluster = opts.cluster
    if cluster is not None and cluster.name and cluster.name != gateway.name:
        return [CLUSTER_NAME_CONFLICT]
    return []


def gateway_enabled(opts: Options) -> bool:
    """nats-server's `gateway.enabled`: both a name and a port."""
    gateway = opts.gateway
    return gateway is not None and bool(gateway.name) and gateway.port != 0
