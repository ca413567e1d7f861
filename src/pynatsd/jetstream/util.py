"""Small helpers shared by the JetStream modules: time formats and JSON as Go writes it."""

from __future__ import annotations

import re
import time
from datetime import UTC, datetime, timedelta

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


def parse_go_time(text: str) -> tuple[int, int]:
    """An RFC 3339 time as Go's `time.Time` JSON decoder reads it: (ns since the epoch, UTC
    offset in seconds). ValueError if it is not RFC 3339."""
    m = _RFC3339.match(text)
    if m is None:
        raise ValueError(text)
    year, month, day, hour, minute, second, frac, zone = m.groups()
    offset = 0
    if zone not in ("Z", "z"):
        sign = -1 if zone[0] == "-" else 1
        offset = sign * (int(zone[1:3]) * 3600 + int(zone[4:6]) * 60)
    dt = datetime(int(year), int(month), int(day), int(hour), int(minute), int(second), tzinfo=UTC)
    frac_ns = int((frac[1:] + "000000000")[:9]) if frac else 0
    secs = int(dt.timestamp()) - offset
    return secs * 1_000_000_000 + frac_ns, offset


def format_go_time(ns: int, offset: int = 0) -> str:
    """Go's RFC3339Nano for a time with a fixed UTC offset (0 is written `Z`)."""
    if offset == 0:
        return rfc3339_ns(ns) if ns > 0 else _zero_or_before(ns)
    secs, frac = divmod(ns, 1_000_000_000)
    base = datetime.fromtimestamp(secs + offset, UTC).strftime("%Y-%m-%dT%H:%M:%S")
    if frac:
        base = f"{base}.{frac:09d}".rstrip("0")
    sign = "-" if offset < 0 else "+"
    hh, mm = divmod(abs(offset) // 60, 60)
    return f"{base}{sign}{hh:02d}:{mm:02d}"


def _zero_or_before(ns: int) -> str:
    if ns == 0:
        return "1970-01-01T00:00:00Z"
    secs, frac = divmod(ns, 1_000_000_000)
    base = datetime.fromtimestamp(0, UTC) + timedelta(seconds=secs)
    text = base.strftime("%Y-%m-%dT%H:%M:%S")
    if frac:
        text = f"{text}.{frac:09d}".rstrip("0")
    return text + "Z"


_RFC3339 = re.compile(
    r"^(\d{4})-(\d{2})-(\d{2})[Tt](\d{2}):(\d{2}):(\d{2})(\.\d+)?([Zz]|[+-]\d{2}:\d{2})$"
)

go_json = go_json_bytes
