"""Parsed configuration -> `pynatsd.options.Options`, as nats-server's `server/opts.go` does it.

Top-level keys are matched case-insensitively, with the real server's names and aliases. Keys that
nats-server knows but pynatsd does not implement yet (cluster, gateway, leafnodes, tls, accounts,
...) are accepted and ignored with a logged warning, so existing files still load. Anything else
that is unknown, of the wrong type or out of range is an error that names `file:line:col`.

Like nats-server, all errors are collected before failing, and some problems are only *warnings*
(a bare number where a duration is expected, an empty file, a long auth timeout): the server starts
with them, but `-t` reports them and fails. `load_config` returns them; `check_config` fails on
them as `-t` does.
"""

from __future__ import annotations

import base64
import binascii
import logging
import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from pynatsd.config.parser import ConfigError, Node, config_digest, parse_file_nodes, to_plain
from pynatsd.options import (
    AUTH_TIMEOUT,
    DEFAULT_HOST,
    JETSTREAM_SYNC_INTERVAL,
    Options,
    Permissions,
    ResponsePermission,
    SubjectPermission,
    User,
)
from pynatsd.subjects import is_valid_subject

log = logging.getLogger("pynatsd.config")

_NANOS = 1_000_000_000
_INT32_MAX = (1 << 31) - 1
_MIN_LAME_DUCK_DURATION = 30 * _NANOS
_HIGH_AUTH_TIMEOUT = 60.0
_CONNECTION_TYPES = frozenset(
    {"STANDARD", "WEBSOCKET", "LEAFNODE", "LEAFNODE_WS", "MQTT", "MQTT_WS", "IN_PROCESS"}
)
_USER_NKEY_PREFIX = 20 << 3  # the byte that base32-encodes to a leading 'U'


class ConfigErrors(ConfigError):
    """Every error (and warning) found while applying a configuration; `str()` lists them one a
    line, warnings first, as nats-server prints them."""

    def __init__(self, errors: list[ConfigError], warnings: list[str]) -> None:
        self.errors = errors
        self.warnings = warnings
        first = errors[0] if errors else None
        super().__init__(
            first.reason if first else (warnings[0] if warnings else ""),
            first.file if first else None,
            first.line if first else 0,
            first.col if first else 0,
        )

    def __str__(self) -> str:
        return "\n".join([*self.warnings, *(str(e) for e in self.errors)])


@dataclass(slots=True)
class LoadedConfig:
    """The outcome of reading a configuration file."""

    options: Options
    warnings: list[str] = field(default_factory=list)
    # Keys accepted but not acted on because pynatsd does not implement them yet.
    ignored: list[str] = field(default_factory=list)
    digest: str = ""


class _Abort(Exception):
    """Stop processing the current top-level key (nats-server recovers a panic per key)."""


# -- Go-compatible helpers -------------------------------------------------------------------

_DURATION_UNITS = {
    "ns": 1,
    "us": 1_000,
    "\u00b5s": 1_000,
    "\u03bcs": 1_000,
    "ms": 1_000_000,
    "s": _NANOS,
    "m": 60 * _NANOS,
    "h": 3600 * _NANOS,
}
_DURATION_PART = re.compile(r"([0-9]*)(?:\.([0-9]*))?([^0-9.]*)")


def parse_go_duration(text: str) -> int:
    """Go's time.ParseDuration (`"1h30m"`, `"1.5s"`, `"300ms"`), in nanoseconds.

    Raises ValueError with Go's message, which nats-server shows to the user."""
    invalid = f'time: invalid duration "{text}"'
    s, negative = text, False
    if s[:1] in ("-", "+"):
        negative, s = s[0] == "-", s[1:]
    if s == "0":
        return 0
    if not s:
        raise ValueError(invalid)
    total = 0
    while s:
        if not (s[0] == "." or "0" <= s[0] <= "9"):
            raise ValueError(invalid)
        m = _DURATION_PART.match(s)
        assert m is not None
        whole, fraction, unit = m.group(1), m.group(2), m.group(3)
        if not whole and not fraction:
            raise ValueError(invalid)
        if not unit:
            raise ValueError(f'time: missing unit in duration "{text}"')
        scale = _DURATION_UNITS.get(unit)
        if scale is None:
            raise ValueError(f'time: unknown unit "{unit}" in duration "{text}"')
        value = int(whole or "0") * scale
        if fraction:
            # Go drops fraction digits beyond what fits in an int64, then truncates.
            digits = fraction[:18]
            value += int(int(digits) * (scale / 10 ** len(digits)))
        total += value
        if total > 1 << 63:
            raise ValueError(invalid)
        s = s[m.end() :]
    if not negative and total > (1 << 63) - 1:
        raise ValueError(invalid)
    return -total if negative else total


def _fraction(value: int, digits: int) -> str:
    text = f"{value:0{digits}d}".rstrip("0")
    return "." + text if text else ""


def format_go_duration(nanos: int) -> str:
    """Go's Duration.String(): `1m30s`, `1.5s`, `250ms`, `0s`."""
    if nanos == 0:
        return "0s"
    sign, u = ("-" if nanos < 0 else ""), abs(nanos)
    if u < _NANOS:
        if u < 1_000:
            precision, unit = 0, "ns"
        elif u < 1_000_000:
            precision, unit = 3, "\u00b5s"
        else:
            precision, unit = 6, "ms"
        scale = 10**precision
        return f"{sign}{u // scale}{_fraction(u % scale, precision)}{unit}"
    seconds, rest = divmod(u, _NANOS)
    text = f"{seconds % 60}{_fraction(rest, 9)}s"
    minutes = seconds // 60
    if minutes:
        text = f"{minutes % 60}m{text}"
        if minutes // 60:
            text = f"{minutes // 60}h{text}"
    return sign + text


def go_type(value: Any) -> str:
    """The Go type nats-server would name for a parsed value (its messages use %T)."""
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "int64"
    if isinstance(value, float):
        return "float64"
    if isinstance(value, str):
        return "string"
    if isinstance(value, dict):
        return "map[string]interface {}"
    if isinstance(value, list):
        return "[]interface {}"
    if isinstance(value, datetime):
        return "time.Time"
    return type(value).__name__


def _shown(value: Any) -> str:
    """A short rendering of a scalar for an error message (containers are left out)."""
    if isinstance(value, bool):
        return " (true)" if value else " (false)"
    if isinstance(value, str):
        return f' ("{value}")'
    if isinstance(value, dict | list):
        return ""
    return f" ({value})"


def _split_host_port(address: str) -> tuple[str, str]:
    """Go's net.SplitHostPort; ValueError when it would fail."""
    colon = address.rfind(":")
    if colon < 0:
        raise ValueError("missing port in address")
    start, end = 0, 0
    if address.startswith("["):
        close = address.find("]")
        if close < 0 or close + 1 != colon:
            raise ValueError("bad brackets in address")
        host, start, end = address[1:close], 1, close + 1
    else:
        host = address[:colon]
        if ":" in host:
            raise ValueError("too many colons in address")
    if "[" in address[start:] or "]" in address[end:]:
        raise ValueError("unexpected bracket in address")
    return host, address[colon + 1 :]


def _go_atoi(text: str) -> int:
    if re.fullmatch(r"[+-]?[0-9]+", text, re.ASCII) is None:
        raise ValueError(text)
    number = int(text)
    if not -(1 << 63) <= number < 1 << 63:
        raise ValueError(text)
    return number


def _crc16(data: bytes) -> int:
    crc = 0
    for byte in data:
        crc ^= byte << 8
        for _ in range(8):
            crc = ((crc << 1) ^ 0x1021) if crc & 0x8000 else crc << 1
            crc &= 0xFFFF
    return crc


def is_valid_user_nkey(key: str) -> bool:
    """A public user nkey: base32 of the 'U' prefix byte, 32 key bytes and a CRC16."""
    try:
        raw = base64.b32decode(key + "=" * (-len(key) % 8))
    except (binascii.Error, ValueError):
        return False
    if len(raw) != 35 or raw[0] != _USER_NKEY_PREFIX:
        return False
    return _crc16(raw[:-2]) == int.from_bytes(raw[-2:], "little")


# -- the loader ------------------------------------------------------------------------------

_Handler = Callable[["_Loader", str, Node], None]
_HANDLERS: dict[str, _Handler] = {}
_UNSUPPORTED: dict[str, str] = {}


def _key(*names: str) -> Callable[[_Handler], _Handler]:
    def register(handler: _Handler) -> _Handler:
        for name in names:
            _HANDLERS[name] = handler
        return handler

    return register


def _unsupported(what: str, *names: str) -> None:
    for name in names:
        _UNSUPPORTED[name] = what


_unsupported("clustering", "cluster")
_unsupported("gateways", "gateway")
_unsupported("leaf nodes", "leaf", "leafnodes")
_unsupported("WebSocket", "websocket", "ws")
_unsupported("MQTT", "mqtt")
_unsupported("TLS", "tls", "allow_non_tls", "ocsp", "ocsp_cache", "https", "https_port")
_unsupported("accounts", "accounts", "mappings", "maps", "default_js_domain")
_unsupported(
    "operator mode",
    "operator",
    "operators",
    "root",
    "roots",
    "root_operator",
    "root_operators",
    "resolver",
    "account_resolver",
    "accounts_resolver",
    "resolver_tls",
    "resolver_preload",
    "resolver_pinned_accounts",
    "trusted",
    "trusted_keys",
    "default_sentinel",
)
_unsupported("profiling", "prof_port", "prof_block_rate")
_unsupported("proxies", "proxies", "proxy_protocol")
_unsupported("feature flags", "feature_flags")


class _Loader:
    def __init__(self, opts: Options) -> None:
        self.opts = opts
        self.errors: list[ConfigError] = []
        self.warnings: list[str] = []
        self.ignored: list[str] = []

    # -- reporting ---------------------------------------------------------------------------

    def error(self, node: Node, reason: str) -> None:
        self.errors.append(ConfigError(reason, node.file, node.line, node.col))

    def abort(self, node: Node, reason: str) -> _Abort:
        self.error(node, reason)
        return _Abort()

    def warn(self, node: Node, name: str, reason: str) -> None:
        self.warnings.append(f'{node.where}: invalid use of field "{name}": {reason}')

    def ignore(self, name: str, node: Node, what: str) -> None:
        self.ignored.append(name)
        log.warning("%s: %r is not supported by pynatsd yet (%s); ignored", node.where, name, what)

    def unknown(self, name: str, node: Node) -> None:
        if not node.used_variable:
            self.error(node, f'unknown field "{name}"')

    # -- typed access; a wrong type aborts the current key, like a failed Go type assertion --

    def _want(self, name: str, node: Node, kind: type | tuple[type, ...], what: str) -> Any:
        value = node.value
        if isinstance(value, kind) and not (isinstance(value, bool) and kind is int):
            return value
        raise self.abort(node, f'"{name}" must be {what}, got {go_type(value)}{_shown(value)}')

    def string(self, name: str, node: Node) -> str:
        result: str = self._want(name, node, str, "a string")
        return result

    def integer(self, name: str, node: Node) -> int:
        result: int = self._want(name, node, int, "an integer")
        return result

    def boolean(self, name: str, node: Node) -> bool:
        result: bool = self._want(name, node, bool, "a boolean")
        return result

    def mapping(self, name: str, node: Node) -> dict[str, Node]:
        result: dict[str, Node] = self._want(name, node, dict, "a map")
        return result

    def array(self, name: str, node: Node) -> list[Node]:
        result: list[Node] = self._want(name, node, list, "an array")
        return result

    def duration(self, name: str, node: Node, *, allow_seconds: bool) -> int:
        """A duration string; with `allow_seconds`, a bare integer of seconds with a warning."""
        value = node.value
        if allow_seconds and isinstance(value, int) and not isinstance(value, bool):
            self.warn(node, name, f"{name} should be converted to a duration")
            return value * _NANOS
        text = self.string(name, node)
        try:
            return parse_go_duration(text)
        except ValueError as e:
            raise self.abort(node, f"error parsing {name}: {e}") from None

    # -- top level -----------------------------------------------------------------------------

    def apply(self, parsed: Mapping[str, Node], source: str) -> None:
        if not parsed:
            self.warnings.append(f"{source}: config has no values or is empty")
        for name, node in parsed.items():
            lowered = name.lower()
            handler = _HANDLERS.get(lowered)
            try:
                if handler is not None:
                    handler(self, name, node)
                elif lowered in _UNSUPPORTED:
                    self.ignore(name, node, _UNSUPPORTED[lowered])
                else:
                    self.unknown(name, node)
            except _Abort:
                continue


def _setter(attribute: str, kind: str) -> _Handler:
    def handler(loader: _Loader, name: str, node: Node) -> None:
        value = getattr(loader, kind)(name, node)
        setattr(loader.opts, attribute, value)

    return handler


for _names, _attribute, _kind in (
    (("client_advertise",), "client_advertise", "string"),
    (("host", "net"), "host", "string"),
    (("port",), "port", "integer"),
    (("debug",), "debug", "boolean"),
    (("trace",), "trace", "boolean"),
    (("logtime",), "logtime", "boolean"),
    (("logtime_utc",), "logtime_utc", "boolean"),
    (("disable_sublist_cache", "no_sublist_cache"), "disable_sublist_cache", "boolean"),
    (("http_port", "monitor_port"), "http_port", "integer"),
    (("http_base_path",), "http_base_path", "string"),
    (("logfile", "log_file"), "log_file", "string"),
    (("logfile_size_limit", "log_size_limit"), "log_size_limit", "integer"),
    (("logfile_max_num", "log_max_num"), "log_max_num", "integer"),
    (("syslog",), "syslog", "boolean"),
    (("remote_syslog",), "remote_syslog", "string"),
    (("pidfile", "pid_file"), "pid_file", "string"),
    (("ports_file_dir",), "ports_file_dir", "string"),
    (("max_pending",), "max_pending", "integer"),
    (("max_traced_msg_len",), "max_traced_msg_len", "integer"),
    (("max_subscriptions", "max_subs"), "max_subscriptions", "integer"),
    (("ping_max",), "ping_max", "integer"),
    (("no_auth_user",), "no_auth_user", "string"),
    (("no_system_account", "no_system", "no_sys_acc"), "no_system_account", "boolean"),
    (("no_header_support",), "no_header_support", "boolean"),
    (("connect_error_reports",), "connect_error_reports", "integer"),
    (("reconnect_error_reports",), "reconnect_error_reports", "integer"),
    (("no_fast_producer_stall",), "no_fast_producer_stall", "boolean"),
    (("max_closed_clients",), "max_closed_clients", "integer"),
):
    _key(*_names)(_setter(_attribute, _kind))


def _listen(loader: _Loader, name: str, node: Node) -> tuple[str, int]:
    value = node.value
    if isinstance(value, int) and not isinstance(value, bool):
        return "", value
    if not isinstance(value, str):
        raise loader.abort(node, f"expected port or host:port, got {go_type(value)}")
    try:
        host, port = _split_host_port(value)
    except ValueError:
        raise loader.abort(node, f'could not parse address string "{value}"') from None
    try:
        return host, _go_atoi(port)
    except ValueError:
        raise loader.abort(node, f'could not parse port "{port}"') from None


@_key("listen")
def _apply_listen(loader: _Loader, name: str, node: Node) -> None:
    host, loader.opts.port = _listen(loader, name, node)
    loader.opts.host = host or DEFAULT_HOST


@_key("http")
def _apply_http(loader: _Loader, name: str, node: Node) -> None:
    loader.opts.http_host, loader.opts.http_port = _listen(loader, name, node)


@_key("server_name")
def _apply_server_name(loader: _Loader, name: str, node: Node) -> None:
    server_name = loader.string(name, node)
    if " " in server_name:
        raise loader.abort(node, "server name cannot contain spaces")
    loader.opts.server_name = server_name


@_key("trace_verbose")
def _apply_trace_verbose(loader: _Loader, name: str, node: Node) -> None:
    loader.opts.trace_verbose = loader.opts.trace = loader.boolean(name, node)


@_key("trace_headers")
def _apply_trace_headers(loader: _Loader, name: str, node: Node) -> None:
    loader.opts.trace_headers = loader.opts.trace = loader.boolean(name, node)


@_key("system_account", "system")
def _apply_system_account(loader: _Loader, name: str, node: Node) -> None:
    if not isinstance(node.value, str):
        raise loader.abort(node, "system account name must be a string")
    loader.opts.system_account = node.value


@_key("max_control_line", "max_payload")
def _apply_int32_limit(loader: _Loader, name: str, node: Node) -> None:
    value = loader.integer(name, node)
    if value > _INT32_MAX:
        raise loader.abort(node, f"{name} value is too big")
    setattr(loader.opts, name.lower(), value)


@_key("max_connections", "max_conn")
def _apply_max_connections(loader: _Loader, name: str, node: Node) -> None:
    # 0 in a file means "no clients at all", which the server spells -1.
    loader.opts.max_connections = loader.integer(name, node) or -1


@_key("max_sub_tokens", "max_subscription_tokens")
def _apply_max_sub_tokens(loader: _Loader, name: str, node: Node) -> None:
    value = loader.integer(name, node)
    if value > 255:
        raise loader.abort(node, f"{name} value is too big")
    if value <= 0:
        raise loader.abort(node, f"{name} value can not be negative")
    loader.opts.max_sub_tokens = value


@_key("ping_interval")
def _apply_ping_interval(loader: _Loader, name: str, node: Node) -> None:
    loader.opts.ping_interval = loader.duration("ping_interval", node, allow_seconds=True) / _NANOS


@_key("write_deadline")
def _apply_write_deadline(loader: _Loader, name: str, node: Node) -> None:
    nanos = loader.duration("write_deadline", node, allow_seconds=True)
    loader.opts.write_deadline = nanos / _NANOS


@_key("write_timeout")
def _apply_write_timeout(loader: _Loader, name: str, node: Node) -> None:
    policy = loader.string(name, node)
    if policy not in ("default", "close", "retry"):
        raise loader.abort(node, "write_timeout must be 'default', 'close' or 'retry'")
    loader.opts.write_timeout = policy


@_key("lame_duck_duration")
def _apply_lame_duck_duration(loader: _Loader, name: str, node: Node) -> None:
    nanos = loader.duration("lame_duck_duration", node, allow_seconds=False)
    if nanos < _MIN_LAME_DUCK_DURATION:
        raise loader.abort(
            node,
            f"invalid lame_duck_duration of {format_go_duration(nanos)}, minimum is 30 seconds",
        )
    loader.opts.lame_duck_duration = nanos / _NANOS


@_key("lame_duck_grace_period")
def _apply_lame_duck_grace_period(loader: _Loader, name: str, node: Node) -> None:
    nanos = loader.duration("lame_duck_grace_period", node, allow_seconds=False)
    if nanos < 0:
        raise loader.abort(node, "invalid lame_duck_grace_period, needs to be positive")
    loader.opts.lame_duck_grace_period = nanos / _NANOS


@_key("server_tags")
def _apply_server_tags(loader: _Loader, name: str, node: Node) -> None:
    value = node.value
    if isinstance(value, str):
        tags = [value]
    elif isinstance(value, list):
        tags = []
        for element in value:
            if not isinstance(element.value, str):
                raise loader.abort(
                    element,
                    f"error parsing tags: unsupported type {go_type(element.value)} "
                    "where string is expected",
                )
            tags.append(element.value)
    else:
        raise loader.abort(node, f"error parsing tags: unsupported type {go_type(value)}")
    # nats-server's tag list lower-cases, trims, drops empty tags and duplicates.
    for tag in tags:
        tag = tag.strip().lower()
        if tag and tag not in loader.opts.server_tags:
            loader.opts.server_tags.append(tag)


@_key("server_metadata")
def _apply_server_metadata(loader: _Loader, name: str, node: Node) -> None:
    if not isinstance(node.value, dict):
        raise loader.abort(node, f"error parsing metadata: unsupported type {go_type(node.value)}")
    for key, entry in node.value.items():
        loader.opts.server_metadata[key] = loader.string(key, entry)


@_key("store_dir", "storedir")
def _apply_store_dir(loader: _Loader, name: str, node: Node) -> None:
    if loader.opts.store_dir:
        raise loader.abort(node, "Duplicate 'store_dir' configuration")
    loader.opts.store_dir = loader.string(name, node)


# -- jetstream -----------------------------------------------------------------------------

_STORAGE_SUFFIXES = {"K": 10, "M": 20, "G": 30, "T": 40}


def _storage_size(value: Any) -> int:
    """nats-server's getStorageSize: an integer, or a string such as "1G" (upper-case suffix)."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if not isinstance(value, str):
        raise ValueError("must be int64 or string")
    if value == "":
        return 0
    try:
        number = _go_atoi(value[:-1])
    except ValueError:
        raise ValueError(f'strconv.ParseInt: parsing "{value[:-1]}": invalid syntax') from None
    shift = _STORAGE_SUFFIXES.get(value[-1])
    if shift is None:
        raise ValueError("sizes defined as strings must end in K, M, G, T")
    return number << shift


_JETSTREAM_IGNORED = frozenset(
    {
        "key",
        "ek",
        "encryption_key",
        "prev_key",
        "prev_ek",
        "prev_encryption_key",
        "cipher",
        "extension_hint",
        "limits",
        "tpm",
        "max_outstanding_catchup",
        "max_buffered_size",
        "max_buffered_msgs",
        "request_queue_limit",
        "info_queue_limit",
        "meta_compact",
        "meta_compact_size",
        "meta_compact_sync",
        "max_concurrent_io",
    }
)


@_key("jetstream")
def _apply_jetstream(loader: _Loader, name: str, node: Node) -> None:
    value = node.value
    opts = loader.opts
    if isinstance(value, bool):
        opts.jetstream = value
    elif isinstance(value, str):
        state = value.lower()
        if state not in ("enabled", "enable", "disabled", "disable"):
            raise loader.abort(
                node, f"Expected 'enabled' or 'disabled' for string value, got '{value}'"
            )
        opts.jetstream = state.startswith("enable")
    elif isinstance(value, dict):
        enable = True
        for key, entry in value.items():
            enable = _apply_jetstream_entry(loader, key, entry, enable)
        opts.jetstream = enable
    else:
        raise loader.abort(
            node, f"Expected map, bool or string to define JetStream, got {go_type(value)}"
        )


def _apply_jetstream_entry(loader: _Loader, key: str, node: Node, enable: bool) -> bool:
    opts = loader.opts
    lowered = key.lower()
    if lowered == "strict":
        if not isinstance(node.value, bool):
            raise loader.abort(
                node, f"Expected 'true' or 'false' for bool value, got '{to_plain(node.value)}'"
            )
        opts.jetstream_strict = node.value
    elif lowered in ("store", "store_dir", "storedir"):
        if opts.store_dir:
            raise loader.abort(node, "Duplicate 'store_dir' configuration")
        opts.store_dir = loader.string(key, node)
    elif lowered in ("sync", "sync_interval"):
        if isinstance(node.value, str) and node.value.lower() == "always":
            opts.jetstream_sync_interval, opts.jetstream_sync_always = JETSTREAM_SYNC_INTERVAL, True
        else:
            nanos = loader.duration(key, node, allow_seconds=True)
            opts.jetstream_sync_interval = nanos / _NANOS
    elif lowered in ("max_memory_store", "max_mem_store", "max_mem", "max_file_store", "max_file"):
        label = "max_file_store" if "file" in lowered else "max_mem_store"
        try:
            size = _storage_size(node.value)
        except ValueError as e:
            raise loader.abort(node, f"{label} {e}") from None
        if label == "max_mem_store":
            opts.jetstream_max_memory = size
        else:
            opts.jetstream_max_store = size
    elif lowered == "domain":
        opts.jetstream_domain = loader.string(key, node)
    elif lowered in ("enable", "enabled"):
        enable = loader.boolean(key, node)
    elif lowered == "unique_tag":
        opts.jetstream_unique_tag = loader.string(key, node).strip().lower()
    elif lowered in _JETSTREAM_IGNORED:
        loader.ignore(f"jetstream.{key}", node, "JetStream tuning")
    else:
        loader.unknown(key, node)
    return enable


# -- authorization ---------------------------------------------------------------------------


@dataclass(slots=True)
class _Auth:
    user: str = ""
    password: str = ""
    token: str = ""
    timeout: float = 0.0
    users: list[User] | None = None
    nkeys: list[User] = field(default_factory=list)
    default_permissions: Permissions | None = None


@_key("authorization")
def _apply_authorization(loader: _Loader, name: str, node: Node) -> None:
    auth = _parse_authorization(loader, name, node)
    opts = loader.opts
    opts.username, opts.password, opts.authorization = auth.user, auth.password, auth.token
    # 0 (or no timeout) means the default, as nats-server fills it in at start-up.
    opts.auth_timeout = auth.timeout or AUTH_TIMEOUT
    if (auth.user or auth.password) and auth.token:
        raise loader.abort(node, "Cannot have a user/pass and token")
    if auth.users is not None:
        if auth.user:
            raise loader.abort(node, "Can not have a single user/pass and a users array")
        if auth.token:
            raise loader.abort(node, "Can not have a token and a users array")
    seen = {u.username for u in opts.users if u.username} | {u.nkey for u in opts.users if u.nkey}
    for user in auth.users or []:
        if user.username in seen:
            raise loader.abort(node, f'Duplicate user "{user.username}" detected')
        seen.add(user.username)
        opts.users.append(user)
    for user in auth.nkeys:
        if user.nkey in seen:
            raise loader.abort(node, f'Duplicate nkey "{user.nkey}" detected')
        seen.add(user.nkey)
        opts.users.append(user)


def _parse_authorization(loader: _Loader, name: str, node: Node) -> _Auth:
    auth = _Auth()
    for key, entry in loader.mapping(name, node).items():
        lowered = key.lower()
        if lowered in ("user", "username"):
            auth.user = loader.string(key, entry)
        elif lowered in ("pass", "password"):
            auth.password = loader.string(key, entry)
        elif lowered == "token":
            auth.token = loader.string(key, entry)
        elif lowered == "timeout":
            auth.timeout = _auth_timeout(loader, key, entry)
        elif lowered == "users":
            auth.users, auth.nkeys = _parse_users(loader, key, entry)
        elif lowered in ("default_permission", "default_permissions", "permissions"):
            auth.default_permissions = _parse_permissions(loader, entry)
        elif lowered in ("auth_callout", "auth_hook"):
            loader.ignore(f"{name}.{key}", entry, "auth callout")
        elif lowered == "proxy_required":
            loader.boolean(key, entry)
            loader.ignore(f"{name}.{key}", entry, "proxies")
        else:
            loader.unknown(key, entry)
    if auth.default_permissions is not None:
        for user in [*(auth.users or []), *auth.nkeys]:
            if user.permissions is None:
                user.permissions = auth.default_permissions
    return auth


def _auth_timeout(loader: _Loader, key: str, node: Node) -> float:
    value = node.value
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise loader.abort(node, "error parsing authorization config, 'timeout' wrong type")
    if isinstance(value, str):
        try:
            seconds = parse_go_duration(value) / _NANOS
        except ValueError as e:
            raise loader.abort(node, f"error parsing authorization config, 'timeout' {e}") from None
    else:
        seconds = float(value)
    if seconds > _HIGH_AUTH_TIMEOUT:
        loader.warn(
            node,
            key,
            f"timeout of {value} ({seconds:f} seconds) is high, consider keeping it under 60 "
            "seconds. possibly caused by unquoted duration; use '1m' instead of 1m, for example",
        )
    return seconds


def _parse_users(loader: _Loader, key: str, node: Node) -> tuple[list[User], list[User]]:
    if not isinstance(node.value, list):
        raise loader.abort(node, f"Expected users field to be an array, got {to_plain(node.value)}")
    users: list[User] = []
    nkeys: list[User] = []
    for element in node.value:
        if not isinstance(element.value, dict):
            loader.error(
                element,
                f"Expected user entry to be a map/struct, got {to_plain(element.value)}",
            )
            continue
        user = User()
        last = element
        for field_name, entry in element.value.items():
            last = entry
            lowered = field_name.lower()
            if lowered == "nkey":
                user.nkey = loader.string(field_name, entry)
            elif lowered in ("user", "username"):
                user.username = loader.string(field_name, entry)
            elif lowered in ("pass", "password"):
                user.password = loader.string(field_name, entry)
            elif lowered in ("permission", "permissions", "authorization"):
                user.permissions = _parse_permissions(loader, entry)
            elif lowered in ("allowed_connection_types", "connection_types", "clients"):
                user.allowed_connection_types = _connection_types(loader, field_name, entry)
            elif lowered == "proxy_required":
                loader.boolean(field_name, entry)
                loader.ignore(f"users.{field_name}", entry, "proxies")
            else:
                loader.unknown(field_name, entry)
        if not user.nkey and not user.username:
            raise loader.abort(last, "User entry requires a user")
        if user.nkey:
            if not is_valid_user_nkey(user.nkey):
                raise loader.abort(last, "Not a valid public nkey for a user")
            if user.username or user.password:
                raise loader.abort(last, "Nkey users do not take usernames or passwords")
            nkeys.append(user)
        else:
            users.append(user)
    return users, nkeys


def _connection_types(loader: _Loader, key: str, node: Node) -> set[str] | None:
    value = node.value
    if isinstance(value, str):
        names = [value]
    elif isinstance(value, list):
        names = []
        for element in value:
            if isinstance(element.value, str):
                names.append(element.value)
            else:
                loader.error(
                    element,
                    "error parsing allowed connection types: unsupported type in array "
                    f"{go_type(element.value)}",
                )
    else:
        loader.error(
            node, f"error parsing allowed connection types: unsupported type {go_type(value)}"
        )
        return None
    wanted = [n.upper() for n in names]
    unknown = [n for n in wanted if n not in _CONNECTION_TYPES]
    if unknown:
        loader.error(node, "invalid connection types [" + " ".join(f'"{n}"' for n in unknown) + "]")
    return {n for n in wanted if n in _CONNECTION_TYPES}


def _parse_permissions(loader: _Loader, node: Node) -> Permissions | None:
    if not isinstance(node.value, dict):
        loader.error(node, f"Expected permissions to be a map/struct, got {to_plain(node.value)}")
        return None
    perms = Permissions()
    for key, entry in node.value.items():
        lowered = key.lower()
        if lowered in ("pub", "publish", "import"):
            perms.publish = _subject_permission(loader, entry, allow_queue=False)
        elif lowered in ("sub", "subscribe", "export"):
            perms.subscribe = _subject_permission(loader, entry, allow_queue=True)
        elif lowered in ("publish_allow_responses", "allow_responses"):
            if isinstance(entry.value, bool):
                perms.response = ResponsePermission() if entry.value else None
            else:
                perms.response = _response_permission(loader, entry)
            if perms.response is not None:
                # Responses alone turn off the blanket "publish anything" of no allow list.
                perms.publish = perms.publish or SubjectPermission()
                if perms.publish.allow is None:
                    perms.publish.allow = []
        elif not entry.used_variable:
            loader.error(entry, f'Unknown field "{key}" parsing permissions')
    return perms


def _subject_permission(loader: _Loader, node: Node, *, allow_queue: bool) -> SubjectPermission:
    if not isinstance(node.value, dict):
        return SubjectPermission(allow=_subjects(loader, node, allow_queue))
    permission = SubjectPermission()
    for key, entry in node.value.items():
        lowered = key.lower()
        if lowered == "allow":
            permission.allow = _subjects(loader, entry, allow_queue)
        elif lowered == "deny":
            permission.deny = _subjects(loader, entry, allow_queue)
        elif not entry.used_variable:
            loader.error(
                entry,
                f'Unknown field name "{key}" parsing subject permissions, '
                "only 'allow' or 'deny' are permitted",
            )
    return permission


def _subjects(loader: _Loader, node: Node, allow_queue: bool) -> list[str] | None:
    value = node.value
    if isinstance(value, str):
        subjects = [value]
    elif isinstance(value, list):
        subjects = []
        for element in value:
            if not isinstance(element.value, str):
                loader.error(element, "Subject in permissions array cannot be cast to string")
                return None
            subjects.append(element.value)
    else:
        loader.error(
            node,
            "Expected subject permissions to be a subject, or array of subjects, "
            f"got {go_type(value)}",
        )
        return None
    problem = _check_subjects(subjects, allow_queue)
    if problem:
        loader.error(node, problem)
        return None
    return subjects


def _check_subjects(subjects: list[str], allow_queue: bool) -> str:
    for subject in subjects:
        if is_valid_subject(subject):
            continue
        # A subscribe permission may name a queue group: "subject queue".
        parts = subject.split()
        if not allow_queue or len(parts) != 2:
            return f'subject "{subject}" is not a valid subject'
        if not is_valid_subject(parts[0]):
            return f'subject "{parts[0]}" is not a valid subject'
        if not is_valid_subject(parts[1]):
            return f'queue "{parts[1]}" is not a valid queue'
    return ""


def _response_permission(loader: _Loader, node: Node) -> ResponsePermission | None:
    if not isinstance(node.value, dict):
        loader.error(node, "error parsing response permissions, expected a boolean or a map")
        return None
    permission = ResponsePermission()
    for key, entry in node.value.items():
        lowered = key.lower()
        if lowered in ("max", "max_msgs", "max_messages", "max_responses"):
            # Negative means unlimited; 0 keeps the default.
            permission.max_msgs = loader.integer(key, entry) or permission.max_msgs
        elif lowered in ("expires", "expiration", "ttl"):
            if not isinstance(entry.value, str):
                loader.error(entry, "error parsing expires, not a duration string")
                return None
            try:
                nanos = parse_go_duration(entry.value)
            except ValueError as e:
                loader.error(entry, f"error parsing expires: {e}")
                return None
            permission.expires = nanos / _NANOS or permission.expires
        elif not entry.used_variable:
            loader.error(entry, f'Unknown field "{key}" parsing permissions')
    return permission


# -- public API ------------------------------------------------------------------------------


def _as_nodes(value: Any, file: str) -> Any:
    """Wrap plain values (from `parse()`) into position-less `Node`s."""
    if isinstance(value, Node):
        return value
    if isinstance(value, dict):
        return Node({k: _as_nodes(v, file) for k, v in value.items()}, file, 0, 0)
    if isinstance(value, list):
        return Node([_as_nodes(v, file) for v in value], file, 0, 0)
    return Node(value, file, 0, 0)


def apply_config(opts: Options, parsed: Mapping[str, Any], source: str = "<config>") -> list[str]:
    """Apply a parsed configuration to `opts` (in place) and return its warnings.

    `parsed` comes from `parse_nodes`/`parse_file_nodes` (errors then carry positions) or from
    `parse`. Raises `ConfigErrors` listing every problem if any key is invalid.
    """
    loader = _Loader(opts)
    loader.apply({k: _as_nodes(v, source) for k, v in parsed.items()}, source)
    if loader.errors:
        raise ConfigErrors(loader.errors, loader.warnings)
    return loader.warnings


def load_config(path: str | os.PathLike[str], opts: Options | None = None) -> LoadedConfig:
    """Read, parse and apply the configuration file at `path` on top of `opts` (or defaults)."""
    source = os.fspath(path)
    nodes = parse_file_nodes(source)
    options = opts if opts is not None else Options()
    loader = _Loader(options)
    loader.apply(nodes, source)
    if loader.errors:
        raise ConfigErrors(loader.errors, loader.warnings)
    options.config_file = source
    return LoadedConfig(options, loader.warnings, loader.ignored, config_digest(nodes))


def load_options(path: str | os.PathLike[str]) -> tuple[Options, list[str]]:
    """Options from the configuration file at `path`, and the file's warnings."""
    loaded = load_config(path)
    return loaded.options, loaded.warnings


def check_config(path: str | os.PathLike[str]) -> LoadedConfig:
    """What `nats-server -t` does: like `load_config`, but warnings are errors too."""
    loaded = load_config(path)
    if loaded.warnings:
        raise ConfigErrors([], loaded.warnings)
    return loaded


def startup_errors(opts: Options) -> list[str]:
    """Checks nats-server makes when it starts rather than when it reads the file (`-t` skips
    them): limits that contradict each other and a `no_auth_user` that names nobody."""
    problems = []
    if opts.lame_duck_duration > 0 and opts.lame_duck_grace_period >= opts.lame_duck_duration:
        problems.append(
            "lame duck grace period "
            f"({format_go_duration(round(opts.lame_duck_grace_period * _NANOS))}) should be "
            "strictly lower than lame duck duration "
            f"({format_go_duration(round(opts.lame_duck_duration * _NANOS))})"
        )
    if opts.max_payload > opts.max_pending:
        problems.append(
            f"max_payload ({opts.max_payload}) cannot be higher than max_pending "
            f"({opts.max_pending})"
        )
    if opts.no_auth_user:
        if not opts.users:
            problems.append(
                f'no_auth_user: "{opts.no_auth_user}" present, but users/nkeys are not defined'
            )
        elif not any(opts.no_auth_user in (u.username, u.nkey) for u in opts.users):
            problems.append(
                f'no_auth_user: "{opts.no_auth_user}" not present as user or nkey in '
                "authorization block or account configuration"
            )
    return problems
