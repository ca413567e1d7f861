"""Small helpers shared by the JetStream modules: time formats and JSON as Go writes it."""

from __future__ import annotations

import time
from datetime import UTC, datetime

from pynatsd.protocol.frames import go_json_bytes

ZERO_TIME = "0001-01-01T00:00:00Z"


def now_ns() -> int:
    return time.time_ns()


def rfc3339_ns(ns: int) -> str:
    """Go's RFC3339Nano in UTC: trailing zeros of the fraction trimmed, zero time for 0."""
    if ns <= 0:
        return ZERO_TIME
    secs, frac = divmod(ns, 1_000_000_000)
    base = datetime.fromtimestamp(secs, UTC).strftime("%Y-%m-%dT%H:%M:%S")
    if frac:
        return f"{base}.{frac:09d}".rstrip("0") + "Z"
    return base + "Z"


def parse_rfc3339_ns(text: str) -> int:
    """The inverse of `rfc3339_ns` (any offset), in ns since the epoch; ValueError if bad."""
    if text == ZERO_TIME:
        return 0
    main, _, rest = text.partition(".")
    frac_ns = 0
    tz = ""
    if rest:
        digits = ""
        for i, ch in enumerate(rest):
            if not ch.isdigit():
                tz = rest[i:]
                break
            digits += ch
        frac_ns = int((digits + "000000000")[:9]) if digits else 0
    else:
        for marker in ("Z", "+", "-"):
            idx = main.find(marker, 10)
            if idx > 0:
                main, tz = main[:idx], main[idx:]
                break
    tz = "+00:00" if tz in ("Z", "z", "") else tz
    dt = datetime.fromisoformat(main + tz)
    return int(dt.timestamp()) * 1_000_000_000 + frac_ns


go_json = go_json_bytes
