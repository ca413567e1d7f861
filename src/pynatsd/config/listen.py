"""Top-level keys of the client listener and the process: host and port, limits, pings, write
deadlines, lame duck mode, logging and the other operational keys.

The counterpart is the plain part of nats-server's `processConfigFileLine` (server/opts.go): keys
that set one option each, most of them rows of one table below, and the start-up checks of
`validateOptions` that concern them.
"""

from __future__ import annotations

from pynatsd.config.parser import Node
from pynatsd.config.registry import Loader, config_key, setters, unsupported
from pynatsd.config.values import INT32_MAX, NANOS, go_atoi, go_type, split_host_port
from pynatsd.gofmt import go_duration_ns
from pynatsd.options import DEFAULT_HOST, Options

_MIN_LAME_DUCK_DURATION = 30 * NANOS

# (key and its aliases, Options attribute, Loader accessor)
setters(
    (
        (("client_advertise",), "client_advertise", "string"),
        (("host", "net"), "host", "string"),
        (("port",), "port", "integer"),
        (("debug",), "debug", "boolean"),
        (("trace",), "trace", "boolean"),
        (("logtime",), "logtime", "boolean"),
        (("logtime_utc",), "logtime_utc", "boolean"),
        (("disable_sublist_cache", "no_sublist_cache"), "disable_sublist_cache", "boolean"),
        (("http_port", "monitor_port"), "http_port", "integer"),
        (("https_port",), "https_port", "integer"),
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
        (("no_header_support",), "no_header_support", "boolean"),
        (("connect_error_reports",), "connect_error_reports", "integer"),
        (("reconnect_error_reports",), "reconnect_error_reports", "integer"),
        (("no_fast_producer_stall",), "no_fast_producer_stall", "boolean"),
        (("max_closed_clients",), "max_closed_clients", "integer"),
    )
)

unsupported("profiling", "prof_port", "prof_block_rate")
unsupported("proxies", "proxies", "proxy_protocol")
unsupported("feature flags", "feature_flags")


def _listen(loader: Loader, name: str, node: Node) -> tuple[str, int]:
    value = node.value
    if isinstance(value, int) and not isinstance(value, bool):
        return "", value
    if not isinstance(value, str):
        raise loader.abort(node, f"expected port or host:port, got {go_type(value)}")
    try:
        host, port = split_host_port(value)
    except ValueError:
        raise loader.abort(node, f'could not parse address string "{value}"') from None
    try:
        return host, go_atoi(port)
    except ValueError:
        raise loader.abort(node, f'could not parse port "{port}"') from None


@config_key("listen")
def _apply_listen(loader: Loader, name: str, node: Node) -> None:
    host, loader.opts.port = _listen(loader, name, node)
    loader.opts.host = host or DEFAULT_HOST


@config_key("http")
def _apply_http(loader: Loader, name: str, node: Node) -> None:
    loader.opts.http_host, loader.opts.http_port = _listen(loader, name, node)


@config_key("https")
def _apply_https(loader: Loader, name: str, node: Node) -> None:
    loader.opts.http_host, loader.opts.https_port = _listen(loader, name, node)


@config_key("server_name")
def _apply_server_name(loader: Loader, name: str, node: Node) -> None:
    server_name = loader.string(name, node)
    if " " in server_name:
        raise loader.abort(node, "server name cannot contain spaces")
    loader.opts.server_name = server_name


@config_key("trace_verbose")
def _apply_trace_verbose(loader: Loader, name: str, node: Node) -> None:
    loader.opts.trace_verbose = loader.opts.trace = loader.boolean(name, node)


@config_key("trace_headers")
def _apply_trace_headers(loader: Loader, name: str, node: Node) -> None:
    loader.opts.trace_headers = loader.opts.trace = loader.boolean(name, node)


@config_key("max_control_line", "max_payload")
def _apply_int32_limit(loader: Loader, name: str, node: Node) -> None:
    value = loader.integer(name, node)
    if value > INT32_MAX:
        raise loader.abort(node, f"{name} value is too big")
    setattr(loader.opts, name.lower(), value)


@config_key("max_connections", "max_conn")
def _apply_max_connections(loader: Loader, name: str, node: Node) -> None:
    # 0 in a file means "no clients at all", which the server spells -1.
    loader.opts.max_connections = loader.integer(name, node) or -1


@config_key("max_sub_tokens", "max_subscription_tokens")
def _apply_max_sub_tokens(loader: Loader, name: str, node: Node) -> None:
    value = loader.integer(name, node)
    if value > 255:
        raise loader.abort(node, f"{name} value is too big")
    if value <= 0:
        raise loader.abort(node, f"{name} value can not be negative")
    loader.opts.max_sub_tokens = value


@config_key("ping_interval")
def _apply_ping_interval(loader: Loader, name: str, node: Node) -> None:
    loader.opts.ping_interval = loader.duration("ping_interval", node, allow_seconds=True) / NANOS


@config_key("write_deadline")
def _apply_write_deadline(loader: Loader, name: str, node: Node) -> None:
    nanos = loader.duration("write_deadline", node, allow_seconds=True)
    loader.opts.write_deadline = nanos / NANOS


@config_key("write_timeout")
def _apply_write_timeout(loader: Loader, name: str, node: Node) -> None:
    policy = loader.string(name, node)
    if policy not in ("default", "close", "retry"):
        raise loader.abort(node, "write_timeout must be 'default', 'close' or 'retry'")
    loader.opts.write_timeout = policy


@config_key("lame_duck_duration")
def _apply_lame_duck_duration(loader: Loader, name: str, node: Node) -> None:
    nanos = loader.duration("lame_duck_duration", node, allow_seconds=False)
    if nanos < _MIN_LAME_DUCK_DURATION:
        raise loader.abort(
            node,
            f"invalid lame_duck_duration of {go_duration_ns(nanos)}, minimum is 30 seconds",
        )
    loader.opts.lame_duck_duration = nanos / NANOS


@config_key("lame_duck_grace_period")
def _apply_lame_duck_grace_period(loader: Loader, name: str, node: Node) -> None:
    nanos = loader.duration("lame_duck_grace_period", node, allow_seconds=False)
    if nanos < 0:
        raise loader.abort(node, "invalid lame_duck_grace_period, needs to be positive")
    loader.opts.lame_duck_grace_period = nanos / NANOS


@config_key("server_tags")
def _apply_server_tags(loader: Loader, name: str, node: Node) -> None:
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


@config_key("server_metadata")
def _apply_server_metadata(loader: Loader, name: str, node: Node) -> None:
    if not isinstance(node.value, dict):
        raise loader.abort(node, f"error parsing metadata: unsupported type {go_type(node.value)}")
    for key_name, entry in node.value.items():
        loader.opts.server_metadata[key_name] = loader.string(key_name, entry)


def startup_problems(opts: Options) -> list[str]:
    """validateOptions' checks of these keys: limits that contradict each other."""
    problems = []
    if opts.lame_duck_duration > 0 and opts.lame_duck_grace_period >= opts.lame_duck_duration:
        problems.append(
            "lame duck grace period "
            f"({go_duration_ns(round(opts.lame_duck_grace_period * NANOS))}) should be "
            "strictly lower than lame duck duration "
            f"({go_duration_ns(round(opts.lame_duck_duration * NANOS))})"
        )
    if opts.max_payload > opts.max_pending:
        problems.append(
            f"max_payload ({opts.max_payload}) cannot be higher than max_pending "
            f"({opts.max_pending})"
        )
    return problems
