"""CONNECT: decoding a client's options.

Corresponds to the decoding half of `processConnect` in nats-server's `server/client.go`. No
sockets here; the limits a user and account impose are `server/limits.py`.
"""

from __future__ import annotations

import json
from typing import Any

# CONNECT fields and the JSON types nats-server's decoder accepts for them; a wrong type makes
# the decode fail, which closes the connection.
_CONNECT_BOOLS = ("verbose", "pedantic", "tls_required", "echo", "headers", "no_responders")
_CONNECT_STRS = ("auth_token", "user", "pass", "nkey", "sig", "jwt", "name", "lang", "version")
_CONNECT_FIELDS = frozenset(
    (*_CONNECT_BOOLS, *_CONNECT_STRS, "protocol", "account", "new_account", "proxy_sig")
)
# Before any CONNECT nats-server treats a connection as verbose and pedantic, echoing.
PRE_CONNECT_OPTIONS: dict[str, Any] = {"verbose": True, "pedantic": True, "echo": True}
_SECRETS = ("pass", "auth_token", "sig", "nkey", "jwt")


def merge_connect_options(current: dict[str, Any], sent: dict[str, Any]) -> dict[str, Any] | None:
    """The options a CONNECT leaves in force (it is decoded on top of the current ones), or None
    when a field has a type nats-server's decoder refuses."""
    opts = dict(current)
    for key, value in sent.items():
        # Go's JSON decoder matches field names case-insensitively; the last one wins.
        folded = key.lower()
        opts[folded if folded in _CONNECT_FIELDS else key] = value
    return opts if _types_ok(opts) else None


def _types_ok(opts: dict[str, Any]) -> bool:
    for key in _CONNECT_BOOLS:
        value = opts.get(key)
        if value is not None and not isinstance(value, bool):
            return False
    for key in _CONNECT_STRS:
        value = opts.get(key)
        if value is not None and not isinstance(value, str):
            return False
    proto = opts.get("protocol")
    return proto is None or (isinstance(proto, int) and not isinstance(proto, bool))


def connection_label(base: str, opts: dict[str, Any]) -> str:
    """nats-server's log prefix after CONNECT: `host:port - cid:N - "v2.9.0:python:name"`."""
    parts = []
    if opts.get("version"):
        parts.append(f"v{opts['version']}")
    if opts.get("lang"):
        parts.append(str(opts["lang"]))
    if opts.get("name"):
        parts.append(str(opts["name"]))
    return f'{base} - "{":".join(parts)}"' if parts else base


def redacted(raw: bytes) -> str:
    """The CONNECT argument as nats-server traces it: secrets replaced by `[REDACTED]`."""
    try:
        opts = json.loads(raw)
    except ValueError:
        return "[REDACTED]"
    for key in _SECRETS:
        if key in opts:
            opts[key] = "[REDACTED]"
    return json.dumps(opts, separators=(",", ":"))
