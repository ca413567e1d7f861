"""Go-compatible reading and writing of configuration values, as nats-server's messages show them.

The counterparts are Go's own: `time.ParseDuration` and `Duration.String()`, `net.SplitHostPort`,
`strconv.Atoi`, the `%T` and `%q` verbs of `fmt`, and nats-server's `getStorageSize` (opts.go).
Every section of the configuration reads its values through these, so a duration, a size or a
host:port is accepted, refused and described the same way everywhere.
"""

from __future__ import annotations

import json
import re
from datetime import datetime
from typing import Any

NANOS = 1_000_000_000  # nanoseconds in a second: Go durations are counted in nanoseconds
INT32_MAX = (1 << 31) - 1

# -- durations -----------------------------------------------------------------------------------


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


def shown(value: Any) -> str:
    """A short rendering of a scalar for an error message (containers are left out)."""
    if isinstance(value, bool):
        return " (true)" if value else " (false)"
    if isinstance(value, str):
        return f' ("{value}")'
    if isinstance(value, dict | list):
        return ""
    return f" ({value})"


def go_quote(value: Any) -> str:
    """Go's %q of a string or integer, for messages that quote a value."""
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value < 0x110000:
        return "'" + json.dumps(chr(value))[1:-1].replace("\\u00", "\\x") + "'"
    return f"%!q({go_type(value)}={value})"


# -- numbers, addresses and sizes ----------------------------------------------------------------


def split_host_port(address: str) -> tuple[str, str]:
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


def go_atoi(text: str) -> int:
    """Go's strconv.Atoi on a 64-bit platform; ValueError when it would fail."""
    if re.fullmatch(r"[+-]?[0-9]+", text, re.ASCII) is None:
        raise ValueError(text)
    number = int(text)
    if not -(1 << 63) <= number < 1 << 63:
        raise ValueError(text)
    return number


_STORAGE_SUFFIXES = {"K": 10, "M": 20, "G": 30, "T": 40}


def storage_size(value: Any) -> int:
    """nats-server's getStorageSize: an integer, or a string such as "1G" (upper-case suffix)."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if not isinstance(value, str):
        raise ValueError("must be int64 or string")
    if value == "":
        return 0
    try:
        number = go_atoi(value[:-1])
    except ValueError:
        raise ValueError(f'strconv.ParseInt: parsing "{value[:-1]}": invalid syntax') from None
    shift = _STORAGE_SUFFIXES.get(value[-1])
    if shift is None:
        raise ValueError("sizes defined as strings must end in K, M, G, T")
    return number << shift
