"""Configuration reload (SIGHUP or `--signal reload`): re-read the file, apply what may change
while running, refuse the rest.

Corresponds to nats-server's `server/reload.go`. A change to an option that cannot change at run
time is refused with the real server's text, `config reload not supported for <Field>: old=...,
new=...`, and the whole old configuration stays in force. Command-line flags keep overriding the
file, as at start-up.
"""

from __future__ import annotations

import dataclasses
import time
from typing import TYPE_CHECKING, Any

from pynatsd.config import ConfigError, load_config, startup_errors
from pynatsd.gofmt import go_duration
from pynatsd.logger import log
from pynatsd.options import Options
from pynatsd.protocol import errors
from pynatsd.protocol.errors import CloseReason

if TYPE_CHECKING:
    from pynatsd.server.server import Server

# Options that cannot change while running, with nats-server's Go field names (for the error).
NOT_RELOADABLE: dict[str, str] = {
    "host": "Host",
    "port": "Port",
    "server_name": "ServerName",
    "http_host": "HTTPHost",
    "http_port": "HTTPPort",
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
# Fields that are bookkeeping rather than configuration.
IGNORED = ("config_file",)


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


def reload(server: Server) -> bool:
    """Reload the configuration file; True when the new configuration is in force."""
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
    from pynatsd.cli import apply_flags

    apply_flags(new, server.cli_flags)
    problems = startup_errors(new)
    if problems:
        log.error("Failed to reload server configuration: %s", problems[0])
        return False
    changes = changed_fields(old, new)
    for name in changes:
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
        if name in AUTH_FIELDS or name == "users":
            continue
        log.info("Reloaded: %s = %s", name, _go_value(getattr(new, name)))
    if any(name in AUTH_FIELDS for name in changes):
        log.info("Reloaded: authorization users")
    log.info("Reloaded: accounts")
    server.config_load_time = time.time()
    server.config_digest = loaded.digest
    log.info("Reloaded server configuration (%s)", loaded.digest)
    return True


def apply_changes(server: Server, old: Options, new: Options, changes: list[str]) -> None:
    """Make the running server follow the new options."""
    if {"debug", "trace", "trace_verbose", "logtime", "logtime_utc", "log_file"} & set(changes):
        from pynatsd.runner import configure_logging

        configure_logging(new)
    auth_changed = any(name in AUTH_FIELDS for name in changes)
    if auth_changed:
        server.reload_auth()
    server.rebuild_info()
    for client in list(server.clients.values()):
        client.parser.max_payload = new.max_payload
        client.parser.max_control_line = new.max_control_line
    if "max_payload" in changes:
        # Clients learn the new limit from an INFO, as nats-server pushes one.
        for client in list(server.clients.values()):
            if client.protocol >= 1 and client.connected:
                client.send_now(_info(server, client))
    if auth_changed:
        for client in list(server.clients.values()):
            if client.connected and not client.recheck_auth():
                client.close_with_error(
                    errors.AUTHORIZATION_VIOLATION, CloseReason.AUTHENTICATION_VIOLATION
                )
                client.flush()


def _info(server: Server, client: Any) -> bytes:
    from pynatsd.protocol.frames import info_frame

    return info_frame(server.client_info(client))
