"""Values written as nats-server (Go) writes them: durations, uptimes, times, JSON, byte sizes.

The one home for Go-compatible text. Counterparts: Go's `time.Duration.String` and
`time.ParseDuration` (`time/time.go`, `time/format.go`), `time.Time` in JSON (RFC 3339 with
nanoseconds), `encoding/json` (`Marshal`, `MarshalIndent`), and nats-server's `myUptime`
(`server/monitor.go`) and `friendlyBytes` (`server/jetstream.go`).

Imports nothing else from pynatsd, so every part of the server may use it.
"""

from __future__ import annotations

import json
import math
import re
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

NANOS_PER_SECOND = 1_000_000_000
GO_ZERO_TIME = "0001-01-01T00:00:00Z"
"""How Go writes the zero `time.Time`: nats-server's way of saying "never" or "not set"."""

# --- durations ------------------------------------------------------------------------------------

_MAX_DURATION = (1 << 63) - 1  # Go's Duration is an int64 of nanoseconds


def go_duration_ns(ns: int) -> str:
    """Go's `time.Duration.String()` of `ns` nanoseconds: `0s`, `1.5µs`, `250ms`, `1m30s`,
    `2h0m0s`; units below a second for durations under one, otherwise hours, minutes and
    seconds with up to nine fraction digits, trailing zeros dropped."""
    if ns == 0:
        return "0s"
    sign = "-" if ns < 0 else ""
    u = -ns if ns < 0 else ns
    if u < NANOS_PER_SECOND:
        if u < 1_000:
            return f"{sign}{u}ns"
        if u < 1_000_000:
            return f"{sign}{u // 1_000}{_fraction(u % 1_000, 3)}µs"
        return f"{sign}{u // 1_000_000}{_fraction(u % 1_000_000, 6)}ms"
    seconds, fraction = divmod(u, NANOS_PER_SECOND)
    minutes, seconds = divmod(seconds, 60)
    text = f"{seconds}{_fraction(fraction, 9)}s"
    if minutes:
        hours, minutes = divmod(minutes, 60)
        text = f"{minutes}m{text}"
        if hours:
            text = f"{hours}h{text}"
    return sign + text


def go_duration(seconds: float) -> str:
    """`go_duration_ns` for a duration kept as float seconds (rounded to the nanosecond, which
    gives back the exact value of anything parsed from a Go duration string)."""
    return go_duration_ns(round(seconds * NANOS_PER_SECOND))


def _fraction(value: int, digits: int) -> str:
    """`.5` for value 500 of 3 digits: Go's fmtFrac, trailing zeros and a bare point dropped."""
    if not value:
        return ""
    return "." + f"{value:0{digits}d}".rstrip("0")


_DURATION_UNITS = {
    "ns": 1,
    "us": 1_000,
    "\u00b5s": 1_000,  # micro sign
    "\u03bcs": 1_000,  # Greek small letter mu
    "ms": 1_000_000,
    "s": NANOS_PER_SECOND,
    "m": 60 * NANOS_PER_SECOND,
    "h": 3600 * NANOS_PER_SECOND,
}
# One `<number><unit>` part of a duration: digits, an optional fraction, then the unit (every
# character up to the next digit or point). Matches any text, possibly empty.
_DURATION_PART = re.compile(r"([0-9]*)(?:\.([0-9]*))?([^0-9.]*)")


def parse_go_duration(text: str) -> int:
    """Go's `time.ParseDuration`, in nanoseconds: `1h30m`, `1.5s`, `-2m`, `300ms`, `0`.
    Raises ValueError with Go's own message (`time: invalid duration "x"` and friends)."""
    invalid = ValueError(f"time: invalid duration {_go_quote(text)}")
    rest, negative = text, False
    if rest[:1] in ("-", "+"):
        negative, rest = rest[0] == "-", rest[1:]
    if rest == "0":
        return 0
    if not rest:
        raise invalid
    total = 0
    while rest:
        part = _DURATION_PART.match(rest)
        if part is None or not (part.group(1) or part.group(2)):
            raise invalid  # no digit before the unit: `s`, `.s`, `1s.`
        whole, fraction, unit_text = part.groups()
        rest = rest[part.end() :]
        if not unit_text:
            raise ValueError(f"time: missing unit in duration {_go_quote(text)}")
        unit = _DURATION_UNITS.get(unit_text)
        if unit is None:
            raise ValueError(
                f"time: unknown unit {_go_quote(unit_text)} in duration {_go_quote(text)}"
            )
        value = _leading_int(whole, invalid)
        if value > (1 << 63) // unit:
            raise invalid
        value *= unit
        if fraction:
            value += _fraction_value(fraction, unit)
            if value > 1 << 63:
                raise invalid
        total += value
        if total > 1 << 63:
            raise invalid
    if negative:
        return -total
    if total > _MAX_DURATION:
        raise invalid
    return total


def _leading_int(digits: str, invalid: ValueError) -> int:
    """Go's leadingInt: the digits as an integer, an error past 1<<63."""
    value = int(digits) if digits else 0
    if value > 1 << 63:
        raise invalid
    return value


def _fraction_value(digits: str, unit: int) -> int:
    """Go's leadingFraction times the unit: digits past int64 precision are dropped, and the
    product is taken in float64 (Go's own comment: needed to be nanosecond accurate for
    fractions of hours), then truncated."""
    value, scale = 0, 1.0
    for ch in digits:
        if value > _MAX_DURATION // 10:
            break
        candidate = value * 10 + int(ch)
        if candidate > 1 << 63:
            break
        value, scale = candidate, scale * 10
    return int(float(value) * (float(unit) / scale))


def _go_quote(text: str) -> str:
    """The time package's quote: double quotes, `\\` and `"` escaped, every byte of a
    non-ASCII or control character written as `\\xNN`."""
    out = ['"']
    for ch in text:
        if ch < " " or ch >= "\x80":
            out.extend(f"\\x{b:02x}" for b in ch.encode("utf-8", "surrogateescape"))
        elif ch in '"\\':
            out.append("\\" + ch)
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)


def go_uptime(seconds: float) -> str:
    """nats-server's `myUptime`: whole seconds as `1y2d3h4m5s`, leading zero units left out
    (`0s`, `59s`, `1m0s`, `1d0h0m0s`); a year is 365 days."""
    total = int(seconds)  # Go's d / time.Second truncates toward zero
    if total <= 0:
        return f"{total}s"  # none of myUptime's larger units is positive then
    minutes, secs = divmod(total, 60)
    hours, mins = divmod(minutes, 60)
    days, hrs = divmod(hours, 24)
    years, dys = divmod(days, 365)
    if years:
        return f"{years}y{dys}d{hrs}h{mins}m{secs}s"
    if days:
        return f"{days}d{hrs}h{mins}m{secs}s"
    if hours:
        return f"{hours}h{mins}m{secs}s"
    if minutes:
        return f"{minutes}m{secs}s"
    return f"{secs}s"


# --- times ----------------------------------------------------------------------------------------

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def rfc3339_ns(ns: int) -> str:
    """A `time.Time` in UTC as Go's JSON writes it (RFC3339Nano): `2026-01-02T03:04:05.5Z`, up
    to nine fraction digits with trailing zeros dropped. 0 (or less) stands for an unset time
    here and is written as Go's zero time."""
    if ns <= 0:
        return GO_ZERO_TIME
    return format_go_time(ns)


def rfc3339(seconds: float) -> str:
    """`rfc3339_ns` for a wall-clock time kept as float seconds (`time.time()`): rounded to
    the microsecond, the precision such a float holds today."""
    return rfc3339_ns(round(seconds * 1_000_000) * 1_000)


def format_go_time(ns: int, offset: int = 0) -> str:
    """Go's RFC3339Nano for the instant `ns` (nanoseconds since the epoch, any sign) shown at a
    fixed UTC offset in seconds, as Go writes back a time it parsed: `Z` for offset 0,
    otherwise `+hh:mm`/`-hh:mm`."""
    secs, fraction = divmod(ns, NANOS_PER_SECOND)
    local = _EPOCH + timedelta(seconds=secs + offset)
    text = (
        f"{local.year:04d}-{local.month:02d}-{local.day:02d}"
        f"T{local.hour:02d}:{local.minute:02d}:{local.second:02d}{_fraction(fraction, 9)}"
    )
    if offset == 0:
        return text + "Z"
    sign = "-" if offset < 0 else "+"
    hours, minutes = divmod(abs(offset) // 60, 60)
    return f"{text}{sign}{hours:02d}:{minutes:02d}"


_RFC3339 = re.compile(
    r"^(\d{4})-(\d{2})-(\d{2})[Tt](\d{2}):(\d{2}):(\d{2})(\.\d+)?([Zz]|[+-]\d{2}:\d{2})$"
)


def parse_go_time(text: str) -> tuple[int, int]:
    """An RFC 3339 time as Go's `time.Time` JSON decoder reads it: (nanoseconds since the
    epoch, UTC offset in seconds), the inverse of `format_go_time`. ValueError if it is not
    RFC 3339 or names no real date."""
    m = _RFC3339.match(text)
    if m is None:
        raise ValueError(text)
    year, month, day, hour, minute, second, fraction, zone = m.groups()
    offset = 0
    if zone not in ("Z", "z"):
        sign = -1 if zone[0] == "-" else 1
        offset = sign * (int(zone[1:3]) * 3600 + int(zone[4:6]) * 60)
    wall = datetime(
        int(year), int(month), int(day), int(hour), int(minute), int(second), tzinfo=UTC
    )
    secs = (wall - _EPOCH) // timedelta(seconds=1) - offset
    fraction_ns = int((fraction[1:] + "000000000")[:9]) if fraction else 0
    return secs * NANOS_PER_SECOND + fraction_ns, offset


# --- JSON -----------------------------------------------------------------------------------------


def go_json_bytes(value: Any, indent: int | None = None) -> bytes:
    """JSON as Go's encoding/json writes it: `Marshal` (compact), or `MarshalIndent` with
    `indent` spaces as the monitor uses it. Dicts keep their order (a Go struct's field order;
    sort a Go map's keys before passing it). UTF-8 as is; `<>&` and U+2028/U+2029 escaped;
    floats in Go's shortest form (`2`, `0.5`, `1e-7`, `1e+21`); datetimes as `time.Time`;
    each byte that was not UTF-8 (a surrogate escape) as U+FFFD, the replacement character
    itself (nats-server v2.15.1 writes it unescaped)."""
    if isinstance(value, float):
        return go_float(value).encode()
    text = (_COMPACT if indent is None else _indented(indent)).encode(value)
    # Only text that may hold a float pays for the rewrite: a PubAck has no point at all.
    if ("." in text or "e-" in text or "e+" in text) and _FLOAT_HINT.search(text):
        text = _UP_TO_FLOAT.sub(_go_floats, text)
    for raw, escaped in _GO_ESCAPES:
        if raw in text:
            text = text.replace(raw, escaped)
    try:
        return text.encode()
    except UnicodeEncodeError:
        return _NOT_UTF8.sub("\ufffd", text).encode()


def go_json(value: Any) -> bytes:
    """Go's `json.Marshal`: compact JSON (INFO, JetStream API replies, advisories)."""
    return go_json_bytes(value)


def go_json_indent(value: Any) -> bytes:
    """Go's `json.MarshalIndent(v, "", "  ")`, as nats-server's monitoring endpoints answer."""
    return go_json_bytes(value, indent=2)


_GO_ESCAPES = (
    ("<", "\\u003c"),
    (">", "\\u003e"),
    ("&", "\\u0026"),
    ("\u2028", "\\u2028"),
    ("\u2029", "\\u2029"),
)
_NOT_UTF8 = re.compile("[\udc80-\udcff]")
# A Python float as json.dumps writes it always has a point or an exponent; this finds one
# where a value can stand, so that only output that holds floats pays for the rewrite below.
_FLOAT = r"-?[0-9]+(?:\.[0-9]+(?:e[-+][0-9]+)?|e[-+][0-9]+)"
# json.dumps writes a float with a point or an exponent, after `:`, `[`, `,` or a blank.
# Inside strings this may also find text (a time's seconds); the exact pass then sorts it out.
_FLOAT_HINT = re.compile(r"[:\[, ][-0-9][0-9]*[.e]")
# The exact pass: each match is a run of whole strings, other characters and integers, then
# at most one float. Possessive quantifiers keep it linear: nothing is ever scanned twice.
_UP_TO_FLOAT = re.compile(
    r'((?:"[^"\\]*+(?:\\.[^"\\]*+)*+"|[^"0-9-]++|-?[0-9]++(?![.e]))*+)(' + _FLOAT + ")?"
)


def _go_floats(m: re.Match[str]) -> str:
    number = m.group(2)
    if number is None:
        return m.group(0)
    return m.group(1) + go_float(float(number))


def go_float(x: float) -> str:
    """A float64 as encoding/json writes it: the shortest digits that read back the same,
    in plain notation within [1e-6, 1e21) and exponent notation outside it (`1e-7`)."""
    if x != 0 and not 1e-6 <= abs(x) < 1e21:
        mantissa, _, exponent = repr(x).partition("e")
        if exponent.startswith("-0"):
            exponent = "-" + exponent[2:]  # Go cleans e-07 up to e-7
        return f"{mantissa}e{exponent}"
    return format(Decimal(repr(x)).normalize(), "f")


def _go_default(value: Any) -> Any:
    if isinstance(value, datetime):
        # A time.Time: RFC3339Nano at its own offset (a naive datetime is taken as UTC).
        offset = value.utcoffset()
        seconds = int(offset.total_seconds()) if offset is not None else 0
        aware = value if offset is not None else value.replace(tzinfo=UTC)
        ns = (aware - _EPOCH) // timedelta(microseconds=1) * 1_000
        return format_go_time(ns, seconds)
    raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")


# Built once: json.dumps with options would build a new encoder on every call.
_COMPACT = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, default=_go_default)
_INDENTED: dict[int, json.JSONEncoder] = {}


def _indented(indent: int) -> json.JSONEncoder:
    encoder = _INDENTED.get(indent)
    if encoder is None:
        encoder = json.JSONEncoder(indent=indent, ensure_ascii=False, default=_go_default)
        _INDENTED[indent] = encoder
    return encoder


# --- sizes ----------------------------------------------------------------------------------------

_SIZE_PREFIXES = ("K", "M", "G", "T", "P", "E")


def friendly_bytes(size: int) -> str:
    """nats-server's `friendlyBytes`, as its log lines show sizes: `512 B`, `1.00 KB`,
    `117.74 MB` (powers of 1024, two decimals)."""
    if size < 1024:
        return f"{size} B"
    exponent = int(math.log(size) / math.log(1024))
    return f"{size / 1024**exponent:.2f} {_SIZE_PREFIXES[exponent - 1]}B"
