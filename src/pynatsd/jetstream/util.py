"""Small helpers shared by the JetStream modules: time formats and JSON as Go writes it."""

from __future__ import annotations

import hashlib
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


_DIGITS = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"


def go_hash(name: str, size: int = 8) -> str:
    """nats-server's getHash: the first `size` bytes of SHA-256, each as a base-62 digit."""
    digest = hashlib.sha256(name.encode()).digest()
    return "".join(_DIGITS[b % 62] for b in digest[:size])


def go_duration(ns: int) -> str:
    """Go's time.Duration.String: 1.5s, 1m0s, 2h3m4s, 250ms, 1.5µs, 0s."""
    if ns == 0:
        return "0s"
    sign = "-" if ns < 0 else ""
    ns = abs(ns)
    if ns < 1_000:
        return f"{sign}{ns}ns"
    if ns < 1_000_000:
        return f"{sign}{_trim(ns, 1_000)}µs"
    if ns < 1_000_000_000:
        return f"{sign}{_trim(ns, 1_000_000)}ms"
    secs, frac = divmod(ns, 1_000_000_000)
    h, rem = divmod(secs, 3600)
    m, sec = divmod(rem, 60)
    sec_text = _trim(sec * 1_000_000_000 + frac, 1_000_000_000) + "s"
    if h:
        return f"{sign}{h}h{m}m{sec_text}"
    if m:
        return f"{sign}{m}m{sec_text}"
    return sign + sec_text


def parse_go_duration(text: str) -> int | None:
    """Go's time.ParseDuration for the units it knows; None when `text` is not a duration."""
    rest = text.strip()
    if not rest or not _DURATION.fullmatch(rest):
        return None
    total = 0.0
    for number, unit in _DURATION_PART.findall(rest):
        total += float(number) * _DURATION_UNITS[unit]
    return int(total)


_DURATION_UNITS = {
    "ns": 1,
    "us": 1_000,
    "µs": 1_000,
    "ms": 1_000_000,
    "s": 1_000_000_000,
    "m": 60_000_000_000,
    "h": 3_600_000_000_000,
}
_DURATION_PART = re.compile(r"([0-9.]+)(ns|us|µs|ms|s|m|h)")
_DURATION = re.compile(r"([0-9.]+(ns|us|µs|ms|s|m|h))+")


def _trim(value: int, unit: int) -> str:
    whole, frac = divmod(value, unit)
    if not frac:
        return str(whole)
    digits = len(str(unit)) - 1
    return f"{whole}.{frac:0{digits}d}".rstrip("0")


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


def go_json_syntax_error(text: str, e: ValueError) -> str:
    """The text of the error Go's JSON decoder gives for malformed input, as nats-server puts
    it after "invalid JSON: " (Python's decoder finds the same position; the words differ)."""
    pos = getattr(e, "pos", None)
    msg = str(e)
    if not isinstance(pos, int):
        return msg
    stripped_end = len(text.rstrip())
    if pos >= stripped_end and "Extra data" not in msg:
        return "unexpected EOF"
    ch = text[pos]
    if "Expecting value" in msg and ch in "tfn":
        literal = {"t": "true", "f": "false", "n": "null"}[ch]
        for i, want in enumerate(literal):
            j = pos + i
            if j >= len(text):
                return "unexpected EOF"
            if text[j] != want:
                return (
                    f"invalid character {_go_char(text[j])} in literal {literal} "
                    f"(expecting {_go_char(want)}) at offset {j + 1}"
                )
    if "Extra data" in msg or "Expecting value" in msg:
        context = "looking for beginning of value"
    elif "Expecting property name" in msg:
        context = "looking for beginning of object key string"
    elif "Expecting ':' delimiter" in msg:
        context = "after object key"
    elif "Expecting ',' delimiter" in msg:
        context = _after_element(text, pos)
    else:
        return msg
    return f"invalid character {_go_char(ch)} {context} at offset {pos + 1}"


def _after_element(text: str, pos: int) -> str:
    """Inside an object or an array? (what Go's error names after a missing comma)"""
    depth: list[str] = []
    in_str = esc = False
    for ch in text[:pos]:
        if in_str:
            if esc:
                esc = False
            elif ch == "\\":
                esc = True
            elif ch == '"':
                in_str = False
        elif ch == '"':
            in_str = True
        elif ch in "[{":
            depth.append(ch)
        elif ch in "]}" and depth:
            depth.pop()
    if depth and depth[-1] == "[":
        return "after array element"
    return "after object key:value pair"


def _go_char(ch: str) -> str:
    """Go's quoteChar: 'x', with \' and \" escaped as Go writes them."""
    if ch == "'":
        return "'\\''"
    if ch == '"':
        return "'\"'"
    return f"'{ch}'"


go_json = go_json_bytes
