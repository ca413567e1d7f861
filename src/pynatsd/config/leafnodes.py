"""The `leafnodes` block (alias `leaf`): the leaf node listener (the hub role) and the remotes this
server dials (the leaf role), as nats-server's `parseLeafNodes`, `parseLeafAuthorization`,
`parseLeafUsers` and `parseRemoteLeafNodes` (server/opts.go) read them.

nats-server walks the block's keys in Go map order and recovers a failed type assertion (a
panic) for the whole block: such an error ends the block here too. Every other problem is
collected and the next key is read, as there. `tls` blocks are read as the client one is;
`compression` is read and checked, but pynatsd never compresses a leaf link (see
docs/leafnodes.md).
"""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import Callable
from typing import Any

import nkeys

from pynatsd.auth.keys import PREFIX_USER, is_valid_public_key
from pynatsd.config.cluster import COMPRESSION_MODES
from pynatsd.config.cluster import _duration as _duration
from pynatsd.config.parser import Node
from pynatsd.config.registry import (
    HANDLERS,
    Abort,
    Loader,
    SkipKey,
    config_key,
    read_block,
    want_bool,
    want_int,
    want_map,
    want_str,
)
from pynatsd.config.urls import URLError, parse_url
from pynatsd.config.users import _subjects
from pynatsd.config.values import NANOS, go_atoi, go_type, split_host_port
from pynatsd.gofmt import parse_go_duration
from pynatsd.options import (
    AUTH_TIMEOUT,
    TLS_TIMEOUT,
    LeafNodeOptions,
    LeafUser,
    Options,
    RemoteLeafOptions,
)

# A remote URL without a port means nats-server's default leaf node port.
DEFAULT_LEAF_PORT = 7422
LEAF_AND_GATEWAY_NEED_SYSTEM_ACCOUNT = (
    "leaf nodes and gateways (both being defined) require a system account to also be configured"
)
MIXED_WEBSOCKET_URLS = (
    "remote leaf node configuration cannot have a mix of websocket and non-websocket urls"
)
_PASSWORD = re.compile(r"^([^:/]+://[^:/@]*):[^@/]*@")
_HIGH_AUTH_TIMEOUT = 60.0


@config_key("leafnodes", "leaf")
def _apply_leafnodes(loader: Loader, name: str, node: Node) -> None:
    if not isinstance(node.value, dict):
        raise loader.abort(node, f"Expected map to define a leafnode, got {go_type(node.value)}")
    leaf = loader.opts.leafnodes or LeafNodeOptions()
    loader.opts.leafnodes = leaf
    read_block(loader, _FIELDS, leaf, node)


def _listen(loader: Loader, leaf: LeafNodeOptions, key: str, entry: Node) -> None:
    value = entry.value
    if isinstance(value, int) and not isinstance(value, bool):
        leaf.host, leaf.port = "", value
        return
    if not isinstance(value, str):
        loader.error(entry, f"expected port or host:port, got {go_type(value)}")
        raise SkipKey()
    try:
        host, port = split_host_port(value)
        leaf.port = go_atoi(port)
    except ValueError:
        loader.error(entry, f'could not parse address string "{value}"')
        raise SkipKey() from None
    leaf.host = host


def _authorization(loader: Loader, leaf: LeafNodeOptions, key: str, entry: Node) -> None:
    fields = want_map(loader, entry)
    for field_name, value in fields.items():
        lowered = field_name.lower()
        if lowered in ("user", "username"):
            leaf.username = want_str(loader, value)
        elif lowered in ("pass", "password"):
            leaf.password = want_str(loader, value)
        elif lowered == "nkey":
            leaf.nkey = want_str(loader, value)
            if not is_valid_public_key(leaf.nkey, PREFIX_USER):
                loader.error(value, "Not a valid public nkey for leafnode authorization")
        elif lowered == "timeout":
            leaf.auth_timeout = _auth_timeout(loader, field_name, value)
        elif lowered == "users":
            leaf.users = _users(loader, value)
        elif lowered == "account":
            leaf.account = want_str(loader, value)
        elif lowered == "proxy_required":
            want_bool(loader, value)
            loader.ignore(f"leafnodes.authorization.{field_name}", value, "proxies")
        else:
            loader.unknown(field_name, value)
    if leaf.users and (leaf.username or leaf.nkey):
        loader.error(entry, "can not have a single user/pass and a users array")
        raise SkipKey()


def _auth_timeout(loader: Loader, key: str, entry: Node) -> float:
    value = entry.value
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        loader.error(entry, "error parsing leafnode authorization config, 'timeout' wrong type")
        raise SkipKey()
    if isinstance(value, str):
        try:
            seconds = parse_go_duration(value) / NANOS
        except ValueError as e:
            loader.error(entry, f"error parsing leafnode authorization config, 'timeout' {e}")
            raise SkipKey() from None
    else:
        seconds = float(value)
    if seconds > _HIGH_AUTH_TIMEOUT:
        loader.warn(
            entry,
            key,
            f"timeout of {value} ({seconds:f} seconds) is high, consider keeping it under 60 "
            "seconds. possibly caused by unquoted duration; use '1m' instead of 1m, for example",
        )
    return seconds


def _users(loader: Loader, node: Node) -> list[LeafUser]:
    if not isinstance(node.value, list):
        loader.error(node, f"Expected users field to be an array, got {node.value}")
        raise SkipKey()
    users: list[LeafUser] = []
    for element in node.value:
        if not isinstance(element.value, dict):
            loader.error(element, f"Expected user entry to be a map/struct, got {element.value}")
            continue
        user = LeafUser()
        for field_name, value in element.value.items():
            lowered = field_name.lower()
            if lowered in ("user", "username"):
                user.username = want_str(loader, value)
            elif lowered in ("pass", "password"):
                user.password = want_str(loader, value)
            elif lowered == "account":
                user.account = want_str(loader, value)
            elif lowered == "proxy_required":
                want_bool(loader, value)
            else:
                loader.unknown(field_name, value)
        users.append(user)
    return users


def _remotes(loader: Loader, leaf: LeafNodeOptions, key: str, entry: Node) -> None:
    if not isinstance(entry.value, list):
        loader.error(entry, f"Expected remotes field to be an array, got {go_type(entry.value)}")
        raise SkipKey()
    remotes: list[RemoteLeafOptions] = []
    for element in entry.value:
        if not isinstance(element.value, dict):
            loader.error(
                element, f"Expected remote leafnode entry to be a map/struct, got {element.value}"
            )
            continue
        remote = RemoteLeafOptions()
        for field_name, value in element.value.items():
            read = _REMOTE_FIELDS.get(field_name.lower())
            if read is None:
                loader.unknown(field_name, value)
                continue
            with contextlib.suppress(SkipKey):
                read(loader, remote, field_name, value)
        remotes.append(remote)
    leaf.remotes = remotes


def _remote_urls(loader: Loader, remote: RemoteLeafOptions, key: str, entry: Node) -> None:
    value = entry.value
    if isinstance(value, str):
        elements = [entry]
    elif isinstance(value, list):
        elements = value
    else:
        loader.error(entry, f"Expected remote leafnode url to be an array or string, got {value}")
        raise SkipKey()
    for element in elements:
        text = want_str(loader, element).strip()
        try:
            parse_url(text)
        except URLError as e:
            loader.error(element, f"error parsing leafnode url [{text!r}]: {e}")
            continue
        remote.urls.append(text)


def _remote_credentials(loader: Loader, remote: RemoteLeafOptions, key: str, entry: Node) -> None:
    path = want_str(loader, entry)
    if remote.nkey:
        loader.error(entry, "Remote leafnode can not have both creds and nkey defined")
        raise SkipKey()
    remote.credentials = path


def _remote_nkey(loader: Loader, remote: RemoteLeafOptions, key: str, entry: Node) -> None:
    seed = want_str(loader, entry)
    try:
        pair = nkeys.from_seed(seed.encode())
        valid = pair.public_key.startswith(b"U")
    except Exception:
        valid = False
    if not valid:
        loader.error(entry, f'Remote leafnode nkey is not a valid seed: "{seed}"')
        raise SkipKey()
    if remote.credentials:
        loader.error(entry, "Remote leafnode can not have both creds and nkey defined")
        raise SkipKey()
    remote.nkey = seed


def _set(attribute: str, read: Callable[[Loader, Node], Any]) -> Callable[..., None]:
    """A key that sets one field (of the block or of a remote) to its value read by `read`."""

    def handler(loader: Loader, target: Any, key: str, entry: Node) -> None:
        setattr(target, attribute, read(loader, entry))

    return handler


def _remote_deny(attribute: str) -> Callable[[Loader, RemoteLeafOptions, str, Node], None]:
    def read(loader: Loader, remote: RemoteLeafOptions, key: str, entry: Node) -> None:
        subjects = _subjects(loader, entry, False)
        if subjects is None and loader.errors:
            raise SkipKey()
        setattr(remote, attribute, subjects or [])

    return read


def _remote_compression(loader: Loader, remote: RemoteLeafOptions, key: str, entry: Node) -> None:
    remote.compression = _compression_mode(loader, entry)


def _remote_ignored(loader: Loader, remote: RemoteLeafOptions, key: str, entry: Node) -> None:
    loader.ignore(f"leafnodes.remotes.{key}", entry, "this remote leaf node setting")


def _remote_tls(loader: Loader, remote: RemoteLeafOptions, key: str, entry: Node) -> None:
    tls = _read_tls(loader, key, entry)
    remote.tls = True
    remote.tls_cert, remote.tls_key, remote.tls_ca_cert = tls.tls_cert, tls.tls_key, tls.tls_ca_cert
    remote.tls_timeout = tls.tls_timeout
    remote.tls_handshake_first = tls.tls_handshake_first
    fields = entry.value if isinstance(entry.value, dict) else {}
    insecure = next((v for k, v in fields.items() if k.lower() == "insecure"), None)
    remote.tls_insecure = bool(insecure is not None and insecure.value is True)


def _read_tls(loader: Loader, key: str, entry: Node) -> Options:
    """The block read (and its files loaded) as the client `tls` block is, so that a bad one
    fails as in nats-server: the options it sets."""
    scratch = Loader(Options())
    with contextlib.suppress(Abort):
        HANDLERS["tls"](scratch, key, entry)
    loader.errors.extend(scratch.errors)
    loader.warnings.extend(scratch.warnings)
    if scratch.errors:
        raise SkipKey()
    scratch.opts.tls = True
    return scratch.opts


def _tls(loader: Loader, leaf: LeafNodeOptions, key: str, entry: Node) -> None:
    leaf.tls = _read_tls(loader, key, entry)
    leaf.tls_timeout = leaf.tls.tls_timeout


def _compression_mode(loader: Loader, entry: Node) -> str:
    value = entry.value
    if isinstance(value, bool):
        return "s2_auto" if value else "off"
    if isinstance(value, dict):
        mode = value.get("mode")
        return _compression_mode(loader, mode) if mode is not None else "s2_auto"
    text = want_str(loader, entry)
    if text.lower() not in COMPRESSION_MODES:
        loader.error(entry, f'unsupported compression mode "{text}"')
        raise SkipKey()
    return COMPRESSION_MODES[text.lower()]


def _compression(loader: Loader, leaf: LeafNodeOptions, key: str, entry: Node) -> None:
    leaf.compression = _compression_mode(loader, entry)


def _reconnect(loader: Loader, leaf: LeafNodeOptions, key: str, entry: Node) -> None:
    leaf.reconnect_interval = _duration(loader, "reconnect", entry)


def _dial_timeout(loader: Loader, leaf: LeafNodeOptions, key: str, entry: Node) -> None:
    leaf.dial_timeout = _duration(loader, "dial_timeout", entry)


def _write_deadline(loader: Loader, leaf: LeafNodeOptions, key: str, entry: Node) -> None:
    leaf.write_deadline = _duration(loader, "write_deadline", entry)


def _write_timeout(loader: Loader, leaf: LeafNodeOptions, key: str, entry: Node) -> None:
    policy = want_str(loader, entry)
    if policy not in ("default", "close", "retry"):
        loader.error(entry, "write_timeout must be 'default', 'close' or 'retry'")


_FIELDS: dict[str, Callable[[Loader, LeafNodeOptions, str, Node], None]] = {
    "listen": _listen,
    "port": _set("port", want_int),
    "host": _set("host", want_str),
    "net": _set("host", want_str),
    "authorization": _authorization,
    "remotes": _remotes,
    "reconnect": _reconnect,
    "reconnect_delay": _reconnect,
    "reconnect_interval": _reconnect,
    "dial_timeout": _dial_timeout,
    "tls": _tls,
    "leafnode_advertise": _set("advertise", want_str),
    "advertise": _set("advertise", want_str),
    "no_advertise": _set("no_advertise", want_bool),
    "min_version": _set("min_version", want_str),
    "minimum_version": _set("min_version", want_str),
    "compression": _compression,
    "isolate_leafnode_interest": _set("isolate_leafnode_interest", want_bool),
    "isolate": _set("isolate_leafnode_interest", want_bool),
    "write_deadline": _write_deadline,
    "write_timeout": _write_timeout,
}

_REMOTE_FIELDS: dict[str, Callable[[Loader, RemoteLeafOptions, str, Node], None]] = {
    "url": _remote_urls,
    "urls": _remote_urls,
    "account": _set("local_account", want_str),
    "local": _set("local_account", want_str),
    "creds": _remote_credentials,
    "credentials": _remote_credentials,
    "nkey": _remote_nkey,
    "seed": _remote_nkey,
    "tls": _remote_tls,
    "hub": _set("hub", want_bool),
    "deny_imports": _remote_deny("deny_imports"),
    "deny_import": _remote_deny("deny_imports"),
    "deny_exports": _remote_deny("deny_exports"),
    "deny_export": _remote_deny("deny_exports"),
    "no_randomize": _set("no_randomize", want_bool),
    "dont_randomize": _set("no_randomize", want_bool),
    "disabled": _set("disabled", want_bool),
    "name": _set("name", want_str),
    "compression": _remote_compression,
    "ws_compress": _remote_ignored,
    "ws_compression": _remote_ignored,
    "websocket_compress": _remote_ignored,
    "websocket_compression": _remote_ignored,
    "ws_no_masking": _remote_ignored,
    "websocket_no_masking": _remote_ignored,
    "first_info_timeout": _remote_ignored,
    "request_isolation": _remote_ignored,
    "ignore_discovered_servers": _remote_ignored,
    "jetstream_cluster_migrate": _remote_ignored,
    "js_cluster_migrate": _remote_ignored,
    "proxy": _remote_ignored,
}


# -- after the whole file ------------------------------------------------------------------------


def settle(opts: Options) -> None:
    """setBaselineOptions for leaf nodes: defaults for a server with a leaf listener."""
    leaf = opts.leafnodes
    if leaf is None:
        return
    if leaf.port != 0:
        leaf.host = leaf.host or "0.0.0.0"
        leaf.tls_timeout = leaf.tls_timeout or TLS_TIMEOUT
        leaf.auth_timeout = leaf.auth_timeout or AUTH_TIMEOUT
    leaf.reconnect_interval = leaf.reconnect_interval or 1.0


def startup_problems(opts: Options) -> list[str]:
    """validateLeafNode's check at start-up (not `-t`) once gateways are configured too: a
    leaf listener beside a gateway needs a system account named (`system_account`, or an
    operator's), not the default one."""
    leaf, gateway = opts.leafnodes, opts.gateway
    if leaf is None:
        return []
    for remote in leaf.remotes:
        if len({is_websocket_url(url) for url in remote.urls}) > 1:
            urls = " ".join(json.dumps(_redacted(url)) for url in remote.urls)
            return [f"{MIXED_WEBSOCKET_URLS}: [{urls}]"]
    if leaf.port == 0 or gateway is None:
        return []
    if (gateway.name or gateway.port) and not opts.system_account:
        return [LEAF_AND_GATEWAY_NEED_SYSTEM_ACCOUNT]
    return []


def is_websocket_url(url: str) -> bool:
    """nats-server's isWSURL: the scheme starts with `ws` (`ws://`, `wss://`)."""
    return url.lower().startswith("ws")


def _redacted(url: str) -> str:
    """A URL as nats-server's redactURLList shows it: its password replaced by `xxxxx`."""
    return _PASSWORD.sub(r"\1:xxxxx@", url)


def remote_host_port(url: str) -> tuple[str, int]:
    """Where a remote URL points: its host, and its port or the leaf node default 7422."""
    parsed = parse_url(url if "://" in url else f"nats-leaf://{url}")
    port = parsed.port
    return parsed.hostname or "127.0.0.1", int(port) if port.isdigit() else DEFAULT_LEAF_PORT


def remote_credentials(url: str) -> tuple[str, str] | None:
    """The user and password a remote URL carries, None when it has no userinfo."""
    parsed = parse_url(url if "://" in url else f"nats-leaf://{url}")
    if parsed.username is None:
        return None
    return parsed.username, parsed.password or ""


def url_host(url: str) -> str:
    """Go's url.URL.Host of a remote URL: host and port as written, without credentials."""
    return parse_url(url if "://" in url else f"nats-leaf://{url}").host
