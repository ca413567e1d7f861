"""The `pynatsd` command line: nats-server's flags, with Go `flag` package semantics.

Go's flag parser treats `-x` and `--x` alike, accepts `-flag=value` and `-flag value`, and bool
flags take no separate value (`-D`, `-D=false`). The same flag set as `nats-server --help`.
"""

from __future__ import annotations

import glob
import os
import signal
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pynatsd import native
from pynatsd.flags import apply_flags
from pynatsd.options import Options
from pynatsd.version import __version__

USAGE = """
Usage: pynatsd [options]

Server Options:
    -a, --addr, --net <host>         Bind to host address (default: 0.0.0.0)
    -p, --port <port>                Use port for clients (default: 4222)
    -n, --name
        --server_name <server_name>  Server name (default: auto)
    -P, --pid <file>                 File to store PID
    -m, --http_port <port>           Use port for http monitoring
    -ms,--https_port <port>          Use port for https monitoring
    -c, --config <file>              Configuration file
    -t                               Test configuration and exit
    -sl,--signal <signal>[=<pid>]    Send signal to pynatsd process (ldm, stop, quit, term, reopen, reload)
                                     <pid> can be either a PID (e.g. 1) or the path to a PID file (e.g. /var/run/pynatsd.pid)
        --client_advertise <string>  Client URL to advertise to other servers
        --ports_file_dir <dir>       Creates a ports file in the specified directory (<executable_name>_<pid>.ports).

Logging Options:
    -l, --log <file>                 File to redirect log output
    -T, --logtime                    Timestamp log entries (default: true)
        --logtime_utc                Timestamps in UTC instead of local timezone (default: false)
    -s, --syslog                     Log to syslog or windows event log
    -r, --remote_syslog <addr>       Syslog server addr (udp://localhost:514)
    -D, --debug                      Enable debugging output
    -V, --trace                      Trace the raw protocol
    -VV                              Verbose trace (traces system account as well)
    -DV                              Debug and trace
    -DVV                             Debug and verbose trace (traces system account as well)
        --log_size_limit <limit>     Logfile size limit (default: auto)
        --max_traced_msg_len <len>   Maximum printable length for traced messages (default: unlimited)

JetStream Options:
    -js, --jetstream                 Enable JetStream functionality
    -sd, --store_dir <dir>           Set the storage directory

Authorization Options:
        --user <user>                User required for connections
        --pass <password>            Password required for connections
        --auth <token>               Authorization token required for connections

TLS Options:
        --tls                        Enable TLS, do not verify clients (default: false)
        --tlscert <file>             Server certificate file
        --tlskey <file>              Private key for server certificate
        --tlsverify                  Enable TLS, verify client certificates
        --tlscacert <file>           Client certificate CA for verification

Cluster Options:
        --routes <rurl-1, rurl-2>    Routes to solicit and connect
        --cluster <cluster-url>      Cluster URL for solicited routes
        --cluster_name <string>      Cluster Name, if not set one will be dynamically generated
        --no_advertise <bool>        Do not advertise known cluster information to clients
        --cluster_advertise <string> Cluster URL to advertise to other servers
        --connect_retries <number>   For implicit routes, number of connect retries
        --cluster_listen <url>       Cluster url from which members can solicit routes

Profiling Options:
        --profile <port>             Profiling HTTP port

Common Options:
    -h, --help                       Show this message
    -v, --version                    Show version
        --help_tls                   TLS help
"""


class UsageError(Exception):
    """A bad command line: printed with a pointer to --help, exit status 1."""


@dataclass(frozen=True)
class Flag:
    dest: str
    kind: str  # "bool", "str" or "int"


_FLAGS: dict[str, Flag] = {}


def _define(names: Sequence[str], dest: str, kind: str) -> None:
    for name in names:
        _FLAGS[name] = Flag(dest, kind)


_define(["a", "addr", "net"], "host", "str")
_define(["p", "port"], "port", "int")
_define(["n", "name", "server_name"], "server_name", "str")
_define(["P", "pid"], "pid_file", "str")
_define(["m", "http_port"], "http_port", "int")
_define(["ms", "https_port"], "https_port", "int")
_define(["c", "config"], "config_file", "str")
_define(["t"], "test_config", "bool")
_define(["sl", "signal"], "signal", "str")
_define(["client_advertise"], "client_advertise", "str")
_define(["ports_file_dir"], "ports_file_dir", "str")
_define(["l", "log"], "log_file", "str")
_define(["T", "logtime"], "logtime", "bool")
_define(["logtime_utc"], "logtime_utc", "bool")
_define(["s", "syslog"], "syslog", "bool")
_define(["r", "remote_syslog"], "remote_syslog", "str")
_define(["D", "debug"], "debug", "bool")
_define(["V", "trace"], "trace", "bool")
_define(["VV"], "trace_verbose", "bool")
_define(["DV"], "debug_trace", "bool")
_define(["DVV"], "debug_trace_verbose", "bool")
_define(["log_size_limit"], "log_size_limit", "int")
_define(["max_traced_msg_len"], "max_traced_msg_len", "int")
_define(["js", "jetstream"], "jetstream", "bool")
_define(["sd", "store_dir"], "store_dir", "str")
_define(["user"], "username", "str")
_define(["pass"], "password", "str")
_define(["auth"], "authorization", "str")
_define(["tls"], "tls", "bool")
_define(["tlscert"], "tls_cert", "str")
_define(["tlskey"], "tls_key", "str")
_define(["tlsverify"], "tls_verify", "bool")
_define(["tlscacert"], "tls_ca_cert", "str")
_define(["routes"], "routes", "str")
_define(["cluster_name"], "cluster_name", "str")
_define(["no_advertise"], "no_advertise", "bool")
_define(["cluster_advertise"], "cluster_advertise", "str")
_define(["connect_retries"], "connect_retries", "int")
# `--cluster` is an alias of `--cluster_listen`: the one given last wins, as in nats-server.
_define(["cluster", "cluster_listen"], "cluster_listen", "str")
_define(["mqtt_port"], "mqtt_port", "int")
_define(["profile"], "profile", "int")
_define(["h", "help"], "help", "bool")
_define(["v", "version"], "version", "bool")
_define(["help_tls"], "help_tls", "bool")

_TRUE = {"1", "t", "T", "true", "TRUE", "True"}
_FALSE = {"0", "f", "F", "false", "FALSE", "False"}


def parse_flags(argv: Sequence[str]) -> dict[str, Any]:
    """Parse argv (without the program name) into {dest: value} for the flags given."""
    values: dict[str, Any] = {}
    i = 0
    while i < len(argv):
        arg = argv[i]
        i += 1
        if arg == "--":
            break
        if not arg.startswith("-") or arg == "-":
            raise UsageError(f"unexpected argument: {arg}")
        name = arg[2:] if arg.startswith("--") else arg[1:]
        value: str | None = None
        if "=" in name:
            name, value = name.split("=", 1)
        flag = _FLAGS.get(name)
        if flag is None:
            raise UsageError(f"flag provided but not defined: -{name}")
        if flag.kind == "bool":
            if value is None or value in _TRUE:
                values[flag.dest] = True
            elif value in _FALSE:
                values[flag.dest] = False
            else:
                raise UsageError(f'invalid boolean value "{value}" for -{name}: parse error')
            continue
        if value is None:
            if i >= len(argv):
                raise UsageError(f"flag needs an argument: -{name}")
            value = argv[i]
            i += 1
        if flag.kind == "int":
            try:
                values[flag.dest] = int(value, 10)
            except ValueError:
                raise UsageError(f'invalid value "{value}" for flag -{name}: parse error') from None
        else:
            values[flag.dest] = value
    return values


def build_options(flags: dict[str, Any]) -> tuple[Options, list[str], str]:
    """Options from the config file (if any) with the flags applied; plus the config's warnings
    and digest."""
    config_file = flags.get("config_file", "")
    if not config_file:
        return apply_flags(Options(), flags), [], ""
    from pynatsd.config import load_config

    loaded = load_config(config_file)
    opts = loaded.options
    opts.config_file = config_file
    warnings = list(loaded.warnings)
    warnings.extend(f"{key} is not supported by pynatsd yet; ignored" for key in loaded.ignored)
    return apply_flags(opts, flags), warnings, loaded.digest


_SIGNALS = {
    "stop": signal.SIGKILL,
    "quit": signal.SIGINT,
    "term": signal.SIGTERM,
    "reopen": signal.SIGUSR1,
    "reload": signal.SIGHUP,
    "ldm": signal.SIGUSR2,
}


def _resolve_pids(target: str) -> list[int]:
    if not target:
        pids = []
        for status in glob.glob("/proc/[0-9]*/cmdline"):
            try:
                with open(status, "rb") as f:
                    cmd = f.read().split(b"\0")
            except OSError:
                continue
            pid = int(status.split("/")[2])
            is_server = any(b"pynatsd" in part for part in cmd[:3])
            is_signaller = b"--signal" in cmd or b"-sl" in cmd
            if pid != os.getpid() and is_server and not is_signaller:
                pids.append(pid)
        if not pids:
            raise UsageError("no pynatsd process running")
        if len(pids) > 1:
            raise UsageError("multiple pynatsd processes running:\n" + "\n".join(map(str, pids)))
        return pids
    if target.isdigit():
        return [int(target)]
    paths = glob.glob(target) or [target]
    pids = []
    for path in paths:
        try:
            with open(path) as f:
                pids.append(int(f.read().strip()))
        except (OSError, ValueError) as e:
            raise UsageError(f"could not read pid from {path}: {e}") from None
    return pids


def send_signal(spec: str) -> None:
    command, _, target = spec.partition("=")
    sig = _SIGNALS.get(command)
    if sig is None:
        raise UsageError(f"unknown signal {command!r}")
    for pid in _resolve_pids(target):
        os.kill(pid, sig)


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if args and args[0] == "spark":
        # `pynatsd spark archive|replay|stats ...`: the data pipelines (needs the spark extra).
        from pynatsd.spark.cli import main as spark_main

        return spark_main(args[1:])
    try:
        flags = parse_flags(args)
    except UsageError as e:
        print(f"pynatsd: {e}\n(see pynatsd --help)", file=sys.stderr)
        return 1
    if flags.get("help"):
        print(USAGE)
        return 0
    if flags.get("help_tls"):
        print("TLS is configured with --tls, --tlscert, --tlskey, --tlsverify and --tlscacert.")
        return 0
    if flags.get("version"):
        print(f"pynatsd: v{__version__} (nats-server v2.15.1 compatible)")
        print(f"hot path: {native.describe()}")
        return 0
    if flags.get("signal"):
        try:
            send_signal(flags["signal"])
        except (UsageError, OSError) as e:
            print(f"pynatsd: {e}", file=sys.stderr)
            return 1
        return 0
    from pynatsd.config import ConfigError, check_config

    if flags.get("test_config"):
        path = flags.get("config_file", "")
        if not path:
            print("pynatsd: -t needs a configuration file (-c FILE)", file=sys.stderr)
            return 1
        try:
            loaded = check_config(path)
        except ConfigError as e:
            print(f"pynatsd: {e}", file=sys.stderr)
            return 1
        print(f"pynatsd: configuration file {path} is valid ({loaded.digest})")
        return 0
    try:
        opts, warnings, digest = build_options(flags)
    except ConfigError as e:  # config errors are reported, never a traceback
        print(f"pynatsd: {e}", file=sys.stderr)
        return 1
    from pynatsd.runner import run

    return run(opts, warnings, flags, digest)


if __name__ == "__main__":
    sys.exit(main())
