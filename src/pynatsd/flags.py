"""Command-line flags over the configuration file: the flags given at start keep overriding the
file, at start-up and on every reload.

Corresponds to nats-server's `server.MergeOptions` (opts.go) with the flag set of `main.go`.
Parsing the command line itself is `pynatsd.cli`; this module only applies the parsed flags,
so that the reload path (`pynatsd.reload`) can use it without importing the command line.
"""

from __future__ import annotations

from typing import Any

from pynatsd.options import MQTTOptions, Options

# Flags whose value is an option of the same name.
_OPTION_FLAGS = (
    "host",
    "port",
    "server_name",
    "pid_file",
    "http_port",
    "https_port",
    "client_advertise",
    "ports_file_dir",
    "log_file",
    "logtime",
    "logtime_utc",
    "syslog",
    "remote_syslog",
    "debug",
    "trace",
    "trace_verbose",
    "log_size_limit",
    "max_traced_msg_len",
    "jetstream",
    "store_dir",
    "username",
    "password",
    "authorization",
)


def apply_flags(opts: Options, flags: dict[str, Any]) -> Options:
    """Command-line flags ({dest: value}, from `cli.parse_flags`) override the configuration
    file."""
    for dest in _OPTION_FLAGS:
        if dest in flags and hasattr(opts, dest):
            setattr(opts, dest, flags[dest])
    # Imported here: `pynatsd --help` and `--version` need no configuration machinery.
    from pynatsd.config.loader import apply_tls_flags

    apply_tls_flags(opts, flags)
    from pynatsd.config.cluster import apply_cluster_flags

    apply_cluster_flags(opts, flags)
    if "mqtt_port" in flags:
        opts.mqtt = opts.mqtt or MQTTOptions()
        opts.mqtt.port = flags["mqtt_port"]
    if flags.get("debug_trace") or flags.get("debug_trace_verbose"):
        opts.debug = opts.trace = True
    if flags.get("trace_verbose") or flags.get("debug_trace_verbose"):
        opts.trace = opts.trace_verbose = True
    return opts
