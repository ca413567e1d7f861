"""Parsed configuration -> `pynatsd.options.Options`, as nats-server's `server/opts.go` does it.

Top-level keys are matched case-insensitively, with the real server's names and aliases. Keys that
nats-server knows but pynatsd does not implement yet (cluster, gateway, leafnodes, mappings, ...)
are accepted and ignored with a logged warning, so existing files still load. Anything else
that is unknown, of the wrong type or out of range is an error that names `file:line:col`.

Like nats-server, all errors are collected before failing, and some problems are only *warnings*
(a bare number where a duration is expected, an empty file, a long auth timeout): the server starts
with them, but `-t` reports them and fails. `load_config` returns them; `check_config` fails on
them as `-t` does.
"""

from __future__ import annotations

import base64
import binascii
import json
import logging
import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from pynatsd.auth.jwt import (
    JwtError,
    decode_account,
    decode_operator,
    decode_user,
    read_operator_jwt,
)
from pynatsd.auth.keys import PREFIX_ACCOUNT, PREFIX_OPERATOR, is_valid_public_key
from pynatsd.auth.permissions import subject_is_subset_match
from pynatsd.config.parser import ConfigError, Node, config_digest, parse_file_nodes, to_plain
from pynatsd.options import (
    AUTH_TIMEOUT,
    DEFAULT_HOST,
    JETSTREAM_SYNC_INTERVAL,
    TLS_HANDSHAKE_FIRST_FALLBACK_DELAY,
    TLS_TIMEOUT,
    AccountConfig,
    JetStreamAccountLimits,
    Options,
    Permissions,
    ResponsePermission,
    ServiceExport,
    ServiceImport,
    StreamExport,
    StreamImport,
    SubjectPermission,
    User,
)
from pynatsd.subjects import is_valid_subject, subjects_collide
from pynatsd.tls import CIPHER_SUITES, INSECURE_CIPHER_SUITES, TLSConfigError, server_context

log = logging.getLogger("pynatsd.config")

_NANOS = 1_000_000_000
_INT32_MAX = (1 << 31) - 1
_MIN_LAME_DUCK_DURATION = 30 * _NANOS
_HIGH_AUTH_TIMEOUT = 60.0
_CONNECTION_TYPES = frozenset(
    {"STANDARD", "WEBSOCKET", "LEAFNODE", "LEAFNODE_WS", "MQTT", "MQTT_WS", "IN_PROCESS"}
)
_USER_NKEY_PREFIX = 20 << 3  # the byte that base32-encodes to a leading 'U'
GLOBAL_ACCOUNT = "$G"
SYSTEM_ACCOUNT = "$SYS"


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
_unsupported("MQTT", "mqtt")
_unsupported("TLS", "ocsp", "ocsp_cache", "https", "https_port")
_unsupported("subject mappings", "mappings", "maps")
_unsupported("accounts", "default_js_domain")
_unsupported("operator mode", "resolver_tls", "operators_resolver_tls")
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
        self.finish()

    def finish(self) -> None:
        """What nats-server settles after reading the whole file (setBaselineOptions)."""
        opts = self.opts
        if opts.tls_timeout <= 0:
            opts.tls_timeout = TLS_TIMEOUT
        if opts.tls and not opts.auth_timeout_set:
            # With TLS the default auth timeout covers the handshake too.
            opts.auth_timeout = opts.tls_timeout + 1.0


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
    opts.auth_timeout_set = auth.timeout > 0
    if (auth.user or auth.password) and auth.token:
        raise loader.abort(node, "Cannot have a user/pass and token")
    # Users from `accounts {}` (read first) count as a users array too.
    if auth.users is not None or opts.users:
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


def _subject_permission(
    loader: _Loader, node: Node, *, allow_queue: bool
) -> SubjectPermission | None:
    if not isinstance(node.value, dict):
        return SubjectPermission(allow=_subjects(loader, node, allow_queue))
    if not node.value:
        return None  # `{}` sets nothing, as in nats-server
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
    # An empty array is no list at all in nats-server (a nil slice), not "nothing allowed".
    return subjects or None


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


# -- security: accounts, operator mode, TLS ---------------------------------------------------


def _conversion(node: Node, want: str) -> str:
    """The message of the panic a failed Go type assertion raises (nats-server reports it)."""
    return f"interface conversion: interface {{}} is {go_type(node.value)}, not {want}"


def _go_quote(value: Any) -> str:
    """Go's %q of a string or integer, for messages that quote a value."""
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value < 0x110000:
        return "'" + json.dumps(chr(value))[1:-1].replace("\\u00", "\\x") + "'"
    return f"%!q({go_type(value)}={value})"


def _want_str(loader: _Loader, node: Node) -> str:
    if not isinstance(node.value, str):
        raise loader.abort(node, _conversion(node, "string"))
    return node.value


def _want_int(loader: _Loader, node: Node) -> int:
    if isinstance(node.value, bool) or not isinstance(node.value, int):
        raise loader.abort(node, _conversion(node, "int64"))
    return node.value


def _want_bool(loader: _Loader, node: Node) -> bool:
    if not isinstance(node.value, bool):
        raise loader.abort(node, _conversion(node, "bool"))
    return node.value


def _want_map(loader: _Loader, node: Node) -> dict[str, Node]:
    if not isinstance(node.value, dict):
        raise loader.abort(node, _conversion(node, "map[string]interface {}"))
    return node.value


def _want_list(loader: _Loader, node: Node) -> list[Node]:
    if not isinstance(node.value, list):
        raise loader.abort(node, _conversion(node, "[]interface {}"))
    return node.value


def _string_or_list(loader: _Loader, node: Node, what: str) -> list[str]:
    """A string or an array of strings (operators, trusted keys, pinned accounts)."""
    value = node.value
    if isinstance(value, str):
        return [value]
    if not isinstance(value, list):
        raise loader.abort(node, f"error parsing {what}: unsupported type {go_type(value)}")
    out = []
    for element in value:
        if not isinstance(element.value, str):
            loader.error(
                element,
                f"error parsing {what}: unsupported type in array {go_type(element.value)}",
            )
            continue
        out.append(element.value)
    return out


def _subject_is_literal(subject: str) -> bool:
    return not any(t in ("*", ">") for t in subject.split("."))


# -- accounts {} -------------------------------------------------------------------------------


@dataclass(slots=True)
class _PendingExport:
    account: AccountConfig
    export: StreamExport | ServiceExport


@dataclass(slots=True)
class _PendingImport:
    account: AccountConfig
    stream: StreamImport | None = None
    service: ServiceImport | None = None


@_key("accounts")
def _apply_accounts(loader: _Loader, name: str, node: Node) -> None:
    opts = loader.opts
    value = node.value
    exports: list[_PendingExport] = []
    imports: list[_PendingImport] = []
    if isinstance(value, list):
        # A plain list of account names.
        seen: set[str] = set()
        for element in value:
            account_name = _want_str(loader, element)
            if account_name == GLOBAL_ACCOUNT:
                loader.error(element, f'"{account_name}" is a Reserved Account')
                continue
            if account_name in seen:
                loader.error(element, f"Duplicate Account Entry: {account_name}")
                continue
            seen.add(account_name)
            opts.accounts[account_name] = AccountConfig(account_name)
    elif isinstance(value, dict):
        known = {u.username for u in opts.users if u.username} | {
            u.nkey for u in opts.users if u.nkey
        }
        for account_name, entry in value.items():
            if entry.used_variable:
                continue
            if not isinstance(entry.value, dict):
                loader.error(entry, "Expected map entries for accounts")
                continue
            if account_name == GLOBAL_ACCOUNT:
                loader.error(entry, f'"{account_name}" is a Reserved Account')
                continue
            account = AccountConfig(account_name)
            opts.accounts[account_name] = account
            _parse_account(loader, account, entry.value, known, exports, imports)
    if loader.errors:
        # nats-server stops here when anything before failed: exports and imports are only
        # checked in a configuration that is otherwise valid.
        return
    _check_exports(loader, node, exports)
    _check_imports(loader, node, imports)


def _parse_account(
    loader: _Loader,
    account: AccountConfig,
    fields: dict[str, Node],
    known: set[str],
    exports: list[_PendingExport],
    imports: list[_PendingImport],
) -> None:
    opts = loader.opts
    users: list[User] = []
    nkeys: list[User] = []
    users_node: Node | None = None
    for key, entry in fields.items():
        lowered = key.lower()
        try:
            if lowered == "nkey":
                nkey = entry.value
                if not isinstance(nkey, str) or not is_valid_public_key(nkey, PREFIX_ACCOUNT):
                    loader.error(
                        entry, f"Not a valid public nkey for an account: {_go_quote(nkey)}"
                    )
                    continue
                account.nkey = nkey
            elif lowered == "imports":
                imports.extend(_parse_imports(loader, account, entry))
            elif lowered == "exports":
                exports.extend(_parse_exports(loader, account, entry))
            elif lowered == "jetstream":
                account.jetstream = _parse_account_jetstream(loader, entry)
            elif lowered == "users":
                users_node = entry
                users, nkeys = _parse_users(loader, key, entry)
            elif lowered == "default_permissions":
                account.default_permissions = _parse_permissions(loader, entry)
            elif lowered in ("mappings", "maps"):
                loader.ignore(f"accounts.{account.name}.{key}", entry, "subject mappings")
            elif lowered == "limits":
                _parse_account_limits(loader, account, entry)
            elif lowered in ("msg_trace", "trace_dest"):
                loader.ignore(f"accounts.{account.name}.{key}", entry, "message tracing")
            else:
                loader.unknown(key, entry)
        except _Abort:
            continue
    if not (users or nkeys):
        return
    assert users_node is not None
    if opts.username:
        loader.error(users_node, "Can not have a single user/pass and accounts")
        return
    if opts.authorization:
        loader.error(users_node, "Can not have a token and accounts")
        return
    for user in [*users, *nkeys]:
        if user.permissions is None and account.default_permissions is not None:
            user.permissions = account.default_permissions
    for user in nkeys:
        if user.nkey in known:
            loader.error(users_node, f'Duplicate nkey "{user.nkey}" detected')
            continue
        known.add(user.nkey)
        user.account = account.name
        opts.users.append(user)
    for user in users:
        if user.username in known:
            loader.error(users_node, f'Duplicate user "{user.username}" detected')
            continue
        known.add(user.username)
        user.account = account.name
        opts.users.append(user)


def _parse_account_limits(loader: _Loader, account: AccountConfig, node: Node) -> None:
    if not isinstance(node.value, dict):
        raise loader.abort(
            node, f"Expected account limits to be a map/struct, got {to_plain(node.value)}"
        )
    limits = account.limits
    for key, entry in node.value.items():
        lowered = key.lower()
        if lowered in ("max_connections", "max_conn"):
            limits.max_connections = _want_int(loader, entry)
        elif lowered in ("max_subscriptions", "max_subs"):
            limits.max_subscriptions = _want_int(loader, entry)
        elif lowered in ("max_payload", "max_pay"):
            limits.max_payload = _want_int(loader, entry)
        elif lowered in ("max_leafnodes", "max_leafs"):
            limits.max_leafnodes = _want_int(loader, entry)
        elif not entry.used_variable:
            loader.error(entry, f'Unknown field "{key}" parsing account limits')


_JS_ACCOUNT_SIZES = {
    "max_memory": "max_memory",
    "max_mem": "max_memory",
    "mem": "max_memory",
    "memory": "max_memory",
    "max_store": "max_store",
    "max_file": "max_store",
    "max_disk": "max_store",
    "store": "max_store",
    "disk": "max_store",
    "max_streams": "max_streams",
    "streams": "max_streams",
    "max_consumers": "max_consumers",
    "consumers": "max_consumers",
    "mem_max_stream_bytes": "memory_max_stream_bytes",
    "memory_max_stream_bytes": "memory_max_stream_bytes",
    "disk_max_stream_bytes": "store_max_stream_bytes",
    "store_max_stream_bytes": "store_max_stream_bytes",
    "max_ack_pending": "max_ack_pending",
}


def _parse_account_jetstream(loader: _Loader, node: Node) -> JetStreamAccountLimits | None:
    value = node.value
    if isinstance(value, bool):
        return JetStreamAccountLimits() if value else None
    # nats-server reports these two without a position (it has lost the token by then).
    if isinstance(value, str):
        state = value.lower()
        if state in ("enabled", "enable"):
            return JetStreamAccountLimits()
        if state in ("disabled", "disable"):
            return None
        loader.errors.append(
            ConfigError(f"Expected 'enabled' or 'disabled' for string value, got '{value}'")
        )
        raise _Abort()
    if not isinstance(value, dict):
        loader.errors.append(
            ConfigError(f"Expected map, bool or string to define JetStream, got {go_type(value)}")
        )
        raise _Abort()
    limits = JetStreamAccountLimits()
    for key, entry in value.items():
        lowered = key.lower()
        shown = to_plain(entry.value)
        if lowered in _JS_ACCOUNT_SIZES:
            if isinstance(entry.value, bool) or not isinstance(entry.value, int):
                raise loader.abort(entry, f'Expected a parseable size for "{key}", got {shown}')
            setattr(limits, _JS_ACCOUNT_SIZES[lowered], entry.value)
        elif lowered in ("max_bytes_required", "max_stream_bytes", "max_bytes"):
            if not isinstance(entry.value, bool):
                raise loader.abort(entry, f'Expected a parseable bool for "{key}", got {shown}')
            limits.max_bytes_required = entry.value
        elif lowered == "cluster_traffic":
            if entry.value not in ("system", "owner", ""):
                raise loader.abort(
                    entry, f"Expected 'system' or 'owner' string value for \"{key}\", got {shown}"
                )
        elif not entry.used_variable:
            loader.error(entry, f'unknown field "{key}"')
    return limits


def _parse_exports(loader: _Loader, account: AccountConfig, node: Node) -> list[_PendingExport]:
    if not isinstance(node.value, list):
        raise loader.abort(node, f"Exports should be an array, got {go_type(node.value)}")
    out = []
    for element in node.value:
        try:
            pending = _parse_export(loader, account, element)
        except _Abort:
            continue
        if pending is not None:
            out.append(pending)
    return out


def _parse_export(loader: _Loader, account: AccountConfig, node: Node) -> _PendingExport | None:
    if not isinstance(node.value, dict):
        raise loader.abort(
            node, f"Export Items should be a map with type entry, got {go_type(node.value)}"
        )
    stream: StreamExport | None = None
    service: ServiceExport | None = None
    accounts: list[str] | None = None
    response: str | None = None
    response_node: Node | None = None
    threshold: float | None = None
    latency: tuple[str, int] | None = None
    latency_node: Node | None = None
    position = 0
    allow_trace: bool | None = None
    trace_node: Node | None = None
    for key, entry in node.value.items():
        lowered = key.lower()
        if lowered == "stream":
            if service is not None:
                loader.error(
                    entry, f"Detected stream {_go_quote(entry.value)} but already saw a service"
                )
                continue
            for seen, what in ((response_node, "response"), (latency_node, "latency")):
                if seen is not None:
                    loader.error(seen, f"Detected {what} directive on non-service")
            if trace_node is not None:
                loader.error(trace_node, "Detected allow_trace directive on non-service")
            if response_node or latency_node or trace_node:
                continue
            if not isinstance(entry.value, str):
                loader.error(
                    entry, f"Expected stream name to be string, got {go_type(entry.value)}"
                )
                continue
            stream = StreamExport(entry.value, accounts)
        elif lowered == "service":
            if stream is not None:
                loader.error(
                    entry, f"Detected service {_go_quote(entry.value)} but already saw a stream"
                )
                continue
            if not isinstance(entry.value, str):
                loader.error(
                    entry, f"Expected service name to be string, got {go_type(entry.value)}"
                )
                continue
            service = ServiceExport(entry.value, accounts)
        elif lowered in ("response", "response_type"):
            if response_node is not None:
                loader.error(entry, "Duplicate response type definition")
                continue
            response_node = entry
            if not isinstance(entry.value, str):
                loader.error(
                    entry, f"Expected response type to be string, got {go_type(entry.value)}"
                )
                continue
            kind = {"single": "Singleton", "singleton": "Singleton", "stream": "Stream"}.get(
                entry.value.lower()
            ) or {"chunk": "Chunked", "chunked": "Chunked"}.get(entry.value.lower())
            if kind is None:
                loader.error(entry, f'Unknown response type: "{entry.value}"')
                continue
            response = kind
            if stream is not None:
                loader.error(entry, "Detected response directive on non-service")
        elif lowered in ("threshold", "response_threshold", "response_max_time", "response_time"):
            if threshold is not None:
                loader.error(entry, "Duplicate response threshold detected")
                continue
            if not isinstance(entry.value, str):
                loader.error(
                    entry,
                    "Expected response threshold to be a parseable time duration, "
                    f"got {go_type(entry.value)}",
                )
                continue
            try:
                threshold = parse_go_duration(entry.value) / _NANOS
            except ValueError:
                loader.error(
                    entry,
                    "Expected response threshold to be a parseable time duration, "
                    f'got "{entry.value}"',
                )
                continue
            if stream is not None:
                loader.error(entry, "Detected response directive on non-service")
        elif lowered == "accounts":
            # An empty list is no list (a public export), as a nil slice in nats-server.
            accounts = [_want_str(loader, e) for e in _want_list(loader, entry)] or None
            if stream is not None:
                stream.accounts = accounts
            elif service is not None:
                service.accounts = accounts
        elif lowered == "latency":
            latency_node = entry
            try:
                latency = _parse_latency(loader, entry)
            except _Abort:
                continue
            if stream is not None:
                loader.error(entry, "Detected latency directive on non-service")
                continue
        elif lowered == "account_token_position":
            position = _want_int(loader, entry)
        elif lowered == "allow_trace":
            trace_node = entry
            allow_trace = _want_bool(loader, entry)
            if stream is not None:
                loader.error(entry, "Detected allow_trace directive on non-service")
                continue
        elif not entry.used_variable:
            loader.error(entry, f'unknown field "{key}"')
    if service is not None:
        if response is not None:
            service.response_type = response
        if threshold is not None:
            service.response_threshold = threshold
        if latency is not None:
            service.latency_subject, service.latency_sampling = latency
        if allow_trace is not None:
            service.allow_trace = allow_trace
        service.account_token_position = position
        return _PendingExport(account, service)
    if stream is not None:
        stream.account_token_position = position
        return _PendingExport(account, stream)
    return None


_DEFAULT_LATENCY_SAMPLING = 100


def _parse_latency(loader: _Loader, node: Node) -> tuple[str, int]:
    value = node.value
    if isinstance(value, str):
        return value, _DEFAULT_LATENCY_SAMPLING
    if not isinstance(value, dict):
        raise loader.abort(
            node,
            f"Expected latency entry to be a map/struct or string, got {go_type(value)}",
        )
    sampling = _DEFAULT_LATENCY_SAMPLING
    if "sampling" in value:
        entry = value["sampling"]
        sample = entry.value
        if isinstance(sample, str):
            if sample.strip().lower() == "headers":
                sample = 0
            else:
                try:
                    sample = _go_atoi(sample.removesuffix("%"))
                except ValueError:
                    raise loader.abort(
                        entry,
                        "Failed to parse latency sample: strconv.Atoi: parsing "
                        f'"{sample.removesuffix("%")}": invalid syntax',
                    ) from None
                if not 1 <= sample <= 100:
                    raise loader.abort(entry, "bad sampling percentage, should be 1-100")
        elif isinstance(sample, int) and not isinstance(sample, bool):
            if not 1 <= sample <= 100:
                raise loader.abort(entry, "bad sampling percentage, should be 1-100")
        else:
            raise loader.abort(
                entry,
                f"Expected latency sample to be a string or map/struct, got {go_type(sample)}",
            )
        sampling = sample
    if "subject" not in value:
        raise loader.abort(node, "Latency subject required, but missing")
    subject = value["subject"]
    if not isinstance(subject.value, str):
        raise loader.abort(subject, "Expected latency subject to be a string, got string")
    return subject.value, sampling


def _parse_imports(loader: _Loader, account: AccountConfig, node: Node) -> list[_PendingImport]:
    if not isinstance(node.value, list):
        raise loader.abort(node, f"Imports should be an array, got {go_type(node.value)}")
    out: list[_PendingImport] = []
    by_local: dict[str, list[ServiceImport]] = {}
    for element in node.value:
        try:
            pending = _parse_import(loader, account, element)
        except _Abort:
            continue
        if pending is None:
            continue
        service = pending.service
        if service is not None:
            clash = next(
                (s for s in by_local.get(service.to, []) if s.account == service.account), None
            )
            if clash is not None:
                loader.error(
                    element,
                    f'Duplicate service import subject "{service.to}", previously used in '
                    f'import for account "{clash.account}", subject "{clash.subject}"',
                )
                continue
            by_local.setdefault(service.to, []).append(service)
        out.append(pending)
    return out


def _import_source(loader: _Loader, node: Node) -> tuple[str, str]:
    account = subject = ""
    for key, entry in _want_map(loader, node).items():
        lowered = key.lower()
        if lowered == "account":
            account = _want_str(loader, entry)
        elif lowered == "subject":
            subject = _want_str(loader, entry)
        elif not entry.used_variable:
            loader.error(entry, f'unknown field "{key}"')
    if not account or not subject:
        raise loader.abort(node, "Expect an account name and a subject")
    return account, subject


def _parse_import(loader: _Loader, account: AccountConfig, node: Node) -> _PendingImport | None:
    if not isinstance(node.value, dict):
        raise loader.abort(
            node, f"Import Items should be a map with type entry, got {go_type(node.value)}"
        )
    stream: StreamImport | None = None
    service: ServiceImport | None = None
    prefix = to = ""
    share = False
    allow_trace: bool | None = None
    trace_node: Node | None = None
    for key, entry in node.value.items():
        lowered = key.lower()
        if lowered == "stream":
            if service is not None:
                loader.error(entry, "Detected stream but already saw a service")
                continue
            if not isinstance(entry.value, dict):
                loader.error(
                    entry, f"Stream entry should be an account map, got {go_type(entry.value)}"
                )
                continue
            try:
                source, subject = _import_source(loader, entry)
            except _Abort:
                continue
            stream = StreamImport(source, subject, to=to, prefix=prefix)
            if allow_trace is not None:
                stream.allow_trace = allow_trace
        elif lowered == "service":
            if stream is not None:
                loader.error(entry, "Detected service but already saw a stream")
                continue
            if trace_node is not None:
                loader.error(trace_node, "Detected allow_trace directive on a non-stream")
                continue
            if not isinstance(entry.value, dict):
                loader.error(
                    entry, f"Service entry should be an account map, got {go_type(entry.value)}"
                )
                continue
            try:
                source, subject = _import_source(loader, entry)
            except _Abort:
                continue
            service = ServiceImport(source, subject, to=to or subject, share=share)
        elif lowered == "prefix":
            prefix = _want_str(loader, entry)
            if stream is not None:
                stream.prefix = prefix
        elif lowered == "to":
            to = _want_str(loader, entry)
            if service is not None:
                service.to = to
            if stream is not None:
                stream.to = to
                if stream.prefix:
                    loader.error(entry, "Stream import can not have a 'prefix' and a 'to' property")
                    continue
        elif lowered == "share":
            share = _want_bool(loader, entry)
            if service is not None:
                service.share = share
        elif lowered == "allow_trace":
            if service is not None:
                loader.error(entry, "Detected allow_trace directive on a non-stream")
                continue
            allow_trace, trace_node = _want_bool(loader, entry), entry
            if stream is not None:
                stream.allow_trace = allow_trace
        elif not entry.used_variable:
            loader.error(entry, f'unknown field "{key}"')
    if stream is not None:
        return _PendingImport(account, stream=stream)
    if service is not None:
        return _PendingImport(account, service=service)
    return None


def _export_allows(
    exports: list[StreamExport] | list[ServiceExport], importer: str, subject: str
) -> bool:
    """checkStreamExportApproved / checkServiceExportApproved: an export equal to the imported
    subject decides; else the first export the subject is a subset of."""
    if not is_valid_subject(subject):
        return False
    tokens = subject.split(".")
    exact = [e for e in exports if e.subject == subject]
    candidates = exact or [e for e in exports if subject_is_subset_match(subject, e.subject)]
    if not candidates:
        return False
    export = candidates[0]
    position = export.account_token_position
    if export.accounts is None and position == 0:
        return True
    if position > 0:
        return not exact and position <= len(tokens) and tokens[position - 1] == importer
    return importer in export.accounts if export.accounts else False


def _check_exports(loader: _Loader, node: Node, exports: list[_PendingExport]) -> None:
    opts = loader.opts
    for pending in exports:
        export = pending.export
        kind = "service" if isinstance(export, ServiceExport) else "stream"
        valid = []
        for name in export.accounts or []:
            if name not in opts.accounts:
                loader.error(node, f'"{name}" account not defined for {kind} export')
                continue
            valid.append(name)
        if export.accounts is not None:
            export.accounts = valid
        position = export.account_token_position
        if position > 0:
            tokens = export.subject.split(".")
            if len(tokens) < position or tokens[position - 1] != "*":
                loader.error(
                    node,
                    f'Error adding {kind} export "{export.subject}": sublist: invalid subject',
                )
                continue
        if isinstance(export, ServiceExport):
            if export.latency_subject and opts.no_system_account:
                loader.error(
                    node,
                    f'Error adding service latency sampling for "{export.subject}": '
                    "system account not setup",
                )
                continue
            pending.account.service_exports.append(export)
        else:
            pending.account.stream_exports.append(export)


def _check_imports(loader: _Loader, node: Node, imports: list[_PendingImport]) -> None:
    accounts = loader.opts.accounts
    for pending in imports:
        stream, service = pending.stream, pending.service
        if stream is not None:
            source = accounts.get(stream.account)
            if source is None:
                loader.error(node, f'"{stream.account}" account not defined for stream import')
                continue
            problem = _add_stream_import(pending.account, source, stream)
            if problem:
                loader.error(node, f'Error adding stream import "{stream.subject}": {problem}')
        elif service is not None:
            source = accounts.get(service.account)
            if source is None:
                loader.error(node, f'"{service.account}" account not defined for service import')
                continue
            problem = _add_service_import(pending.account, source, service, accounts)
            if problem:
                loader.error(node, f'Error adding service import "{service.subject}": {problem}')


def _add_stream_import(account: AccountConfig, source: AccountConfig, imp: StreamImport) -> str:
    if not _export_allows(source.stream_exports, account.name, imp.subject):
        return "stream import not authorized"
    if imp.prefix:
        if not _subject_is_literal(imp.prefix):
            return "stream import prefix can not contain wildcard tokens"
        prefix = imp.prefix if imp.prefix.endswith(".") else imp.prefix + "."
        imp.to = prefix + imp.subject
    elif not imp.to:
        imp.to = imp.subject
    visited = {account.name}
    for subject in (imp.to, imp.subject):
        if _stream_cycle(source, subject, visited, {}):
            return "import forms a cycle"
    if any(s.account == source.name and s.subject == imp.subject for s in account.stream_imports):
        return "stream import already exists"
    account.stream_imports.append(imp)
    return ""


def _stream_cycle(
    account: AccountConfig, to: str, visited: set[str], accounts: Mapping[str, AccountConfig]
) -> bool:
    if not any(subject_is_subset_match(to, e.subject) for e in account.stream_exports):
        return False
    for imp in account.stream_imports:
        if subjects_collide(to, imp.to):
            if imp.account in visited:
                return True
            visited.add(account.name)
            nxt = accounts.get(imp.account)
            subject = imp.to if subject_is_subset_match(imp.to, to) else to
            if nxt is not None and _stream_cycle(nxt, subject, visited, accounts):
                return True
    return False


def _add_service_import(
    account: AccountConfig,
    source: AccountConfig,
    imp: ServiceImport,
    accounts: Mapping[str, AccountConfig],
) -> str:
    local, remote = imp.to or imp.subject, imp.subject
    imp.to = local
    if not is_valid_subject(local) or not is_valid_subject(remote):
        return "sublist: invalid subject"
    if not _export_allows(source.service_exports, account.name, remote):
        return "service import not authorized"
    if _service_cycle(source, local, {account.name}, accounts):
        return "import forms a cycle"
    account.service_imports.append(imp)
    return ""


def _service_cycle(
    account: AccountConfig, local: str, visited: set[str], accounts: Mapping[str, AccountConfig]
) -> bool:
    for imp in account.service_imports:
        if subjects_collide(local, imp.subject):
            if imp.account in visited:
                return True
            visited.add(account.name)
            nxt = accounts.get(imp.account)
            subject = imp.to if subject_is_subset_match(imp.to, local) else local
            if nxt is not None and _service_cycle(nxt, subject, visited, accounts):
                return True
    return False


# -- operator mode -------------------------------------------------------------------------------

_MEMORY_RESOLVER = re.compile(r"(?i)(MEM|MEMORY)\s*")
_URL_RESOLVER = re.compile(r'(?i)(?:URL)(?:\(\s*"?([^\s"]*)"?\s*\))?\s*')


@_key("operator", "operators", "roots", "root", "root_operators", "root_operator")
def _apply_operator(loader: _Loader, name: str, node: Node) -> None:
    opts = loader.opts
    sources = _string_or_list(loader, node, "operators")
    opts.operator_jwts = []
    operators = []
    for source in sources:
        try:
            operator = read_operator_jwt(source)
        except FileNotFoundError:
            loader.error(
                node, f"error parsing operator JWT: open {source}: no such file or directory"
            )
            continue
        except (OSError, JwtError) as e:
            loader.error(node, f"error parsing operator JWT: {e}")
            continue
        opts.operator_jwts.append(operator.claims.token)
        operators.append(operator)
    if len(operators) == 1:
        # The operator's account server becomes the resolver unless one is configured (even
        # an empty URL, as nats-server does), and its system account the system account
        # unless `system_account` names one.
        if not opts.resolver:
            opts.resolver = "URL"
            opts.resolver_url = operators[0].account_server_url + "/accounts"
        if not opts.system_account:
            opts.system_account = operators[0].system_account


@_key("resolver", "account_resolver", "accounts_resolver")
def _apply_resolver(loader: _Loader, name: str, node: Node) -> None:
    opts = loader.opts
    value = node.value
    opts.resolver = opts.resolver_url = opts.resolver_dir = ""
    if isinstance(value, str):
        if _MEMORY_RESOLVER.search(value):
            opts.resolver = "MEMORY"
        elif (m := _URL_RESOLVER.search(value)) is not None:
            opts.resolver, opts.resolver_url = "URL", m.group(1) or ""
    elif isinstance(value, dict):
        _apply_resolver_map(loader, node, value)
    else:
        raise loader.abort(node, f"error parsing operator resolver, wrong type {go_type(value)}")
    if not opts.resolver:
        loader.error(
            node,
            'error parsing account resolver, should be MEM or  URL("url") or a map containing '
            "dir and type state=[FULL|CACHE])",
        )


def _apply_resolver_map(loader: _Loader, node: Node, fields: dict[str, Node]) -> None:
    opts = loader.opts
    directory = kind = ""
    delete = hard_delete_set = hard_delete = False
    ttl = interval = 0
    if "dir" in fields:
        directory = _want_str(loader, fields["dir"])
    if "type" in fields:
        kind = _want_str(loader, fields["type"])
    if "allow_delete" in fields:
        delete = _want_bool(loader, fields["allow_delete"])
    if "hard_delete" in fields:
        hard_delete_set, hard_delete = True, _want_bool(loader, fields["hard_delete"])
    if "limit" in fields:
        _want_int(loader, fields["limit"])
    for key in ("ttl", "interval", "timeout"):
        if key in fields:
            try:
                nanos = parse_go_duration(_want_str(loader, fields[key]))
            except ValueError as e:
                raise loader.abort(node, str(e)) from None
            if key == "ttl":
                ttl = nanos
            elif key == "interval":
                interval = nanos

    def check_dir() -> None:
        if not directory:
            loader.error(node, "dir has no value and needs to point to a directory")
        elif os.path.exists(directory) and not os.path.isdir(directory):
            loader.error(node, "dir needs to point to an accessible directory")

    upper = kind.upper()
    if upper == "CACHE":
        check_dir()
        if interval:
            loader.error(node, "CACHE does not accept sync")
        if delete:
            loader.error(node, "CACHE does not accept allow_delete")
        if hard_delete_set:
            loader.error(node, "CACHE does not accept hard_delete")
    elif upper == "FULL":
        check_dir()
        if ttl:
            loader.error(node, "FULL does not accept ttl")
        if hard_delete_set and not delete:
            loader.error(node, "hard_delete has no effect without delete")
    elif upper not in ("MEM", "MEMORY"):
        return
    opts.resolver = "MEMORY" if upper in ("MEM", "MEMORY") else upper
    opts.resolver_dir = directory if upper in ("FULL", "CACHE") else ""
    del hard_delete


@_key("resolver_preload")
def _apply_resolver_preload(loader: _Loader, name: str, node: Node) -> None:
    if not isinstance(node.value, dict):
        raise loader.abort(node, "preload should be a map of account_public_key:account_jwt")
    preload = loader.opts.resolver_preload
    preload.clear()
    for key, entry in node.value.items():
        if not isinstance(entry.value, str):
            loader.error(entry, "preload map value should be a string JWT")
            continue
        try:
            decode_account(entry.value)
        except JwtError:
            loader.error(entry, "invalid account JWT")
            continue
        preload[key] = entry.value


@_key("resolver_pinned_accounts")
def _apply_resolver_pinned_accounts(loader: _Loader, name: str, node: Node) -> None:
    loader.opts.resolver_pinned_accounts = _string_or_list(loader, node, "resolver_pinned_accounts")


@_key("trusted", "trusted_keys")
def _apply_trusted(loader: _Loader, name: str, node: Node) -> None:
    keys = _string_or_list(loader, node, "trusted")
    loader.opts.trusted_keys = keys
    for key in keys:
        if not is_valid_public_key(key, PREFIX_OPERATOR):
            loader.error(node, f'trust key "{key}" required to be a valid public operator nkey')


@_key("default_sentinel")
def _apply_default_sentinel(loader: _Loader, name: str, node: Node) -> None:
    loader.opts.default_sentinel = _want_str(loader, node)


# -- tls {} ------------------------------------------------------------------------------------

_TLS_BOOLS = {
    "insecure": "insecure",
    "verify": "verify",
    "verify_and_map": "verify_and_map",
    "verify_cert_and_check_known_urls": "verify_cert_and_check_known_urls",
    "allow_insecure_cipher_suites": "allow_insecure_cipher_suites",
}
_GO_CURVES = frozenset(
    {
        "CurveP256",
        "CurveP384",
        "CurveP521",
        "X25519",
        "X25519MLKEM768",
        "SecP256r1MLKEM768",
        "SecP384r1MLKEM1024",
    }
)
_PINNED_CERT = re.compile(r"^[A-Fa-f0-9]{64}$")


@_key("websocket", "ws")
def _apply_websocket(loader: _Loader, name: str, node: Node) -> None:
    """The WebSocket listener: `port`, `host`/`listen`, `no_tls`, `tls {}`, `compression`,
    `same_origin`, `allowed_origins`; the rest is accepted and logged as not supported."""
    opts = loader.opts
    for field_name, entry in _want_map(loader, node).items():
        lowered = field_name.lower()
        value = entry.value
        if lowered == "port":
            if not isinstance(value, int) or isinstance(value, bool):
                raise loader.abort(entry, _conversion(entry, "int64"))
            opts.websocket_port = value
        elif lowered in ("host", "net"):
            opts.websocket_host = str(value)
        elif lowered == "listen":
            host, port = _split_host_port(str(value))
            opts.websocket_host = host or opts.websocket_host
            if port:
                opts.websocket_port = _go_atoi(port)
        elif lowered in ("no_tls", "compression", "same_origin"):
            if not isinstance(value, bool):
                raise loader.abort(entry, _conversion(entry, "bool"))
            setattr(opts, f"websocket_{lowered}", value)
        elif lowered == "allowed_origins":
            opts.websocket_allowed_origins = _string_or_list(loader, entry, "allowed_origins")
        elif lowered == "tls":
            for tls_name, tls_entry in _want_map(loader, entry).items():
                key = {"cert_file": "cert", "key_file": "key", "ca_file": "ca_cert"}.get(
                    tls_name.lower()
                )
                if key is not None:
                    setattr(opts, f"websocket_tls_{key}", str(tls_entry.value))
        else:
            loader.ignore(f"websocket.{field_name}", entry, "WebSocket")


@_key("tls")
def _apply_tls(loader: _Loader, name: str, node: Node) -> None:
    fields = _want_map(loader, node)
    opts = loader.opts
    cert = key = ca = ""
    verify = tls_map = False
    timeout = 0.0
    min_version = ""
    ciphers: list[str] = []
    insecure_ciphers: list[str] = []
    allow_insecure = False
    pinned: list[str] = []
    rate_limit = 0
    first, fallback = False, 0.0
    for field_name, entry in fields.items():
        lowered = field_name.lower()
        value = entry.value
        if lowered in ("cert_file", "key_file", "ca_file"):
            if not isinstance(value, str):
                raise loader.abort(
                    entry, f"error parsing tls config, expected '{lowered}' to be filename"
                )
            if lowered == "cert_file":
                cert = value
            elif lowered == "key_file":
                key = value
            else:
                ca = value
        elif lowered in _TLS_BOOLS:
            if not isinstance(value, bool):
                raise loader.abort(
                    entry, f"error parsing tls config, expected '{lowered}' to be a boolean"
                )
            if lowered == "verify":
                verify = value
            elif lowered == "verify_and_map":
                verify = verify or value
                tls_map = value
            elif lowered == "verify_cert_and_check_known_urls" and value:
                raise loader.abort(
                    entry, "verify_cert_and_check_known_urls not supported in this context"
                )
            elif lowered == "allow_insecure_cipher_suites":
                allow_insecure = value
            elif lowered == "insecure" and value:
                loader.ignore("tls.insecure", entry, "insecure TLS for outgoing connections")
        elif lowered == "cipher_suites":
            entries = _want_list(loader, entry)
            if not entries:
                raise loader.abort(
                    entry, "error parsing tls config, 'cipher_suites' cannot be empty"
                )
            for element in entries:
                suite = _want_str(loader, element)
                if suite not in CIPHER_SUITES:
                    raise loader.abort(element, f"unrecognized cipher {suite}")
                ciphers.append(suite)
                if suite in INSECURE_CIPHER_SUITES:
                    insecure_ciphers.append(suite)
        elif lowered == "curve_preferences":
            entries = _want_list(loader, entry)
            if not entries:
                raise loader.abort(
                    entry, "error parsing tls config, 'curve_preferences' cannot be empty"
                )
            for element in entries:
                curve = _want_str(loader, element)
                if curve not in _GO_CURVES:
                    raise loader.abort(element, f"unrecognized curve preference {curve}")
            loader.ignore("tls.curve_preferences", entry, "TLS curve preferences")
        elif lowered == "timeout":
            timeout = _tls_timeout(loader, entry)
        elif lowered == "connection_rate_limit":
            if isinstance(value, bool) or not isinstance(value, int):
                raise loader.abort(
                    entry, "error parsing tls config, 'connection_rate_limit' wrong type"
                )
            rate_limit = value
        elif lowered == "pinned_certs":
            if not isinstance(value, list):
                raise loader.abort(
                    entry,
                    "error parsing tls config, expected 'pinned_certs' to be a list of "
                    "hex-encoded sha256 of DER encoded SubjectPublicKeyInfo",
                )
            for element in value:
                pin = _want_str(loader, element).lower()
                if not _PINNED_CERT.match(pin):
                    raise loader.abort(
                        element,
                        f"error parsing tls config, 'pinned_certs' key {pin} does not look "
                        "like hex-encoded sha256 of DER encoded SubjectPublicKeyInfo",
                    )
                pinned.append(pin)
        elif lowered in ("handshake_first", "first", "immediate"):
            first, fallback = _handshake_first(loader, field_name, entry)
        elif lowered == "min_version":
            if not isinstance(value, str):
                raise loader.abort(
                    entry, f"error parsing tls config: 'min_version' wrong type: {value}"
                )
            version = value
            if version not in ("1.0", "1.1", "1.2", "1.3"):
                raise loader.abort(entry, f"error parsing tls config: unknown version: {value}")
            if version in ("1.0", "1.1"):
                raise loader.abort(
                    entry, f"error parsing tls config: unsupported TLS version: TLS {version}"
                )
            min_version = version
        elif lowered in (
            "cert_store",
            "cert_match_by",
            "cert_match",
            "ca_certs_match",
            "cert_match_skip_invalid",
            "ocsp_peer",
        ):
            loader.ignore(f"tls.{field_name}", entry, "Windows certificate store and OCSP")
        elif lowered in ("certs", "certificates"):
            loader.ignore(f"tls.{field_name}", entry, "several certificates")
        else:
            raise loader.abort(entry, f'error parsing tls config, unknown field "{field_name}"')
    if insecure_ciphers and not allow_insecure:
        raise loader.abort(
            node,
            "insecure cipher suites configured without 'allow_insecure_cipher_suites' option "
            "set: " + ", ".join(insecure_ciphers),
        )
    opts.tls = True
    opts.tls_cert, opts.tls_key, opts.tls_ca_cert = cert, key, ca
    opts.tls_verify, opts.tls_map = verify, tls_map
    opts.tls_timeout = timeout or TLS_TIMEOUT
    opts.tls_min_version = min_version
    opts.tls_ciphers = ciphers
    opts.tls_pinned_certs = pinned
    opts.tls_rate_limit = rate_limit
    opts.tls_handshake_first, opts.tls_handshake_first_fallback = first, fallback
    # nats-server builds the TLS configuration (and reads the files) while loading.
    try:
        server_context(opts)
    except TLSConfigError as e:
        raise loader.abort(node, str(e)) from None


def _tls_timeout(loader: _Loader, node: Node) -> float:
    value = node.value
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise loader.abort(node, "error parsing tls config, 'timeout' wrong type")
    if isinstance(value, str):
        try:
            return parse_go_duration(value) / _NANOS
        except ValueError as e:
            raise loader.abort(node, f"error parsing tls config, 'timeout' {e}") from None
    return float(value)


def _handshake_first(loader: _Loader, name: str, node: Node) -> tuple[bool, float]:
    value = node.value
    if isinstance(value, bool):
        return value, 0.0
    if not isinstance(value, str):
        raise loader.abort(
            node, f'field "{name}" should be a boolean or a string, got {go_type(value)}'
        )
    lowered = value.lower()
    if lowered in ("true", "on"):
        return True, 0.0
    if lowered in ("false", "off"):
        return False, 0.0
    if lowered in ("auto", "auto_fallback"):
        return True, TLS_HANDSHAKE_FIRST_FALLBACK_DELAY
    try:
        return True, parse_go_duration(value) / _NANOS
    except ValueError:
        raise loader.abort(node, f'field "{name}"\'s value "{value}" is invalid') from None


@_key("allow_non_tls")
def _apply_allow_non_tls(loader: _Loader, name: str, node: Node) -> None:
    loader.opts.allow_non_tls = _want_bool(loader, node)


def apply_tls_flags(opts: Options, flags: Mapping[str, Any]) -> None:
    """The `--tls`, `--tlscert`, `--tlskey`, `--tlscacert` and `--tlsverify` flags (as parsed by
    `pynatsd.cli.parse_flags`: `tls`, `tls_cert`, `tls_key`, `tls_ca_cert`, `tls_verify`) on
    top of the file's options, as nats-server's ConfigureOptions/overrideTLS do: any TLS flag
    replaces the file's certificate settings and then needs both a certificate and a key;
    `--tls=false` turns TLS off. Raises ConfigError with nats-server's message."""
    names = ("tls", "tls_ca_cert", "tls_cert", "tls_key", "tls_verify")  # Go visits A-Z
    override = disabled = False
    for dest in names:
        if dest not in flags:
            continue
        if dest == "tls" and not flags["tls"]:
            disabled, override = True, False
            opts.tls = False
            continue
        if not disabled:
            override = True
    if not override:
        return
    cert, key = str(flags.get("tls_cert") or ""), str(flags.get("tls_key") or "")
    if not cert:
        raise ConfigError("TLS Server certificate must be present and valid")
    if not key:
        raise ConfigError("TLS Server private key must be present and valid")
    opts.tls = True
    opts.tls_cert, opts.tls_key = cert, key
    opts.tls_ca_cert = str(flags.get("tls_ca_cert") or "")
    opts.tls_verify = bool(flags.get("tls_verify"))
    opts.tls_ciphers = []
    opts.tls_min_version = ""
    try:
        server_context(opts)
    except TLSConfigError as e:
        raise ConfigError(str(e)) from None
    if not opts.auth_timeout_set:
        opts.auth_timeout = (opts.tls_timeout or TLS_TIMEOUT) + 1.0


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
    problems.extend(_operator_problems(opts))
    if opts.no_auth_user:
        if opts.operator_jwts:
            problems.append("no_auth_user not compatible with Trusted Operator")
        elif not opts.users:
            problems.append(
                f'no_auth_user: "{opts.no_auth_user}" present, but users/nkeys are not defined'
            )
        elif not any(opts.no_auth_user in (u.username, u.nkey) for u in opts.users):
            problems.append(
                f'no_auth_user: "{opts.no_auth_user}" not present as user or nkey in '
                "authorization block or account configuration"
            )
    system = opts.system_account
    if (
        system
        and not opts.operator_jwts
        and not opts.trusted_keys
        and system != SYSTEM_ACCOUNT
        and system not in opts.accounts
    ):
        problems.append("error resolving system account: account missing")
    return problems


def _operator_problems(opts: Options) -> list[str]:
    """validateTrustedOperators: what operator mode does not combine with."""
    if not opts.operator_jwts:
        if opts.default_sentinel:
            return ["default sentinel requires operators and accounts"]
        return []
    operators = []
    for token in opts.operator_jwts:
        try:
            operators.append(decode_operator(token))
        except JwtError as e:
            return [f"error parsing operator JWT: {e}"]
    if opts.default_sentinel:
        try:
            sentinel = decode_user(opts.default_sentinel)
        except JwtError:
            return ["default sentinel JWT not valid"]
        scoped = sentinel.issuer_account and sentinel.has_empty_permissions()
        if not sentinel.bearer_token and not scoped:
            return ["default sentinel must be a bearer token"]
    if not opts.resolver:
        return ["operators require an account resolver to be configured"]
    if opts.accounts:
        return ["operators do not allow Accounts to be configured directly"]
    if opts.users:
        return ["operators do not allow users to be configured directly"]
    if opts.trusted_keys:
        return ["conflicting options for 'TrustedKeys' and 'TrustedOperators'"]
    if opts.system_account:
        named = [op.system_account for op in operators if op.system_account]
        if named and opts.system_account not in named:
            return ["system_account in config and operator JWT must be identical"]
    elif not operators[0].system_account and opts.resolver in ("FULL", "CACHE"):
        return [
            "using nats based account resolver - the system account needs to be specified in "
            "configuration or the operator jwt"
        ]
    for key in opts.resolver_pinned_accounts:
        if not is_valid_public_key(key, PREFIX_ACCOUNT):
            return [f'pinned account key "{key}" is not a valid public account nkey']
    if opts.resolver == "URL":
        # nats-server would fetch account JWTs over HTTP; pynatsd does not (yet).
        return [
            f"URL account resolver ({opts.resolver_url}) is not supported by pynatsd; use "
            "resolver: MEMORY with resolver_preload, or a directory resolver"
        ]
    return []
