"""Cron patterns for message schedules: six fields (seconds to day of week), as nats-server's
`server/cron.go` reads them (itself after robfig/cron), and the next time such a pattern fires.

Fields: seconds 0-59, minutes 0-59, hours 0-23, day of month 1-31, month 1-12 or `jan`..`dec`,
day of week 0-6 or `sun`..`sat`; each a comma list of `*`/`?`, `N`, `N-M`, with an optional
`/step` (`N/step` means `N-max/step`). When both day fields are restricted, either matching is
enough; when either holds a `*`, both must match.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, tzinfo

__all__ = ["CronError", "next_cron"]

_STAR_BIT = 1 << 63
_MONTHS = {
    name: i + 1
    for i, name in enumerate(
        ["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"]
    )
}
_DAYS = {name: i for i, name in enumerate(["sun", "mon", "tue", "wed", "thu", "fri", "sat"])}
# (min, max, names) of each field, in pattern order.
_BOUNDS: list[tuple[int, int, dict[str, int] | None]] = [
    (0, 59, None),
    (0, 59, None),
    (0, 23, None),
    (1, 31, None),
    (1, 12, _MONTHS),
    (0, 6, _DAYS),
]
_NS = 1_000_000_000


class CronError(ValueError):
    """The pattern is not one nats-server accepts (it answers "pattern is invalid")."""


def _int(expr: str) -> int:
    # Go's strconv.Atoi: an optional sign and decimal digits only.
    body = expr[1:] if expr[:1] in "+-" else expr
    if not body or not body.isascii() or not body.isdigit():
        raise CronError(f"failed to parse int from {expr}")
    num = int(expr)
    if num < 0:
        raise CronError(f"negative number ({num}) not allowed: {expr}")
    return num


def _int_or_name(expr: str, names: dict[str, int] | None) -> int:
    if names is not None and expr.lower() in names:
        return names[expr.lower()]
    return _int(expr)


def _range_bits(expr: str, lo: int, hi: int, names: dict[str, int] | None) -> int:
    range_and_step = expr.split("/")
    low_high = range_and_step[0].split("-")
    extra = 0
    if low_high[0] in ("*", "?"):
        start, end, extra = lo, hi, _STAR_BIT
    else:
        start = _int_or_name(low_high[0], names)
        if len(low_high) == 1:
            end = start
        elif len(low_high) == 2:
            end = _int_or_name(low_high[1], names)
        else:
            raise CronError(f"too many hyphens: {expr}")
    if len(range_and_step) == 1:
        step = 1
    elif len(range_and_step) == 2:
        step = _int(range_and_step[1])
        if len(low_high) == 1:
            end = hi
        if step > 1:
            extra = 0
    else:
        raise CronError(f"too many slashes: {expr}")
    if start < lo or end > hi or start > end or step == 0:
        raise CronError(f"invalid range: {expr}")
    bits = 0
    for i in range(start, end + 1, step):
        bits |= 1 << i
    return bits | extra


def _field_bits(field: str, bounds: tuple[int, int, dict[str, int] | None]) -> int:
    lo, hi, names = bounds
    bits = 0
    for expr in field.split(","):
        if expr:  # Go's FieldsFunc drops empty items
            bits |= _range_bits(expr, lo, hi, names)
    return bits


def _day_matches(dom: int, dow: int, t: datetime) -> bool:
    dom_match = bool(1 << t.day & dom)
    dow_match = bool(1 << ((t.weekday() + 1) % 7) & dow)  # Go's Sunday is 0
    if dom & _STAR_BIT or dow & _STAR_BIT:
        return dom_match and dow_match
    return dom_match or dow_match


def _at(y: int, mo: int, d: int, h: int, mi: int, s: int, loc: tzinfo) -> datetime:
    """Go's time.Date: out-of-range parts roll over into the next unit."""
    base = datetime(y + (mo - 1) // 12, (mo - 1) % 12 + 1, 1, tzinfo=loc)
    wall = base.replace(tzinfo=None) + timedelta(days=d - 1, hours=h, minutes=mi, seconds=s)
    return wall.replace(tzinfo=loc)


def _add(t: datetime, delta: timedelta) -> datetime:
    """Go's Time.Add: elapsed time, whatever the zone's clock changes do."""
    assert t.tzinfo is not None
    return (t.astimezone(UTC) + delta).astimezone(t.tzinfo)


def next_cron(pattern: str, ts: int, loc: tzinfo | None = None) -> int:
    """The first time after `ts` (ns since the epoch) that `pattern` fires, in ns; CronError
    for a pattern nats-server refuses or one that fires in none of the next five years."""
    fields = pattern.split()
    if len(fields) != 6:
        raise CronError(f"pattern requires 6 fields, got {len(fields)}")
    sec, minute, hour, dom, month, dow = (
        _field_bits(f, b) for f, b in zip(fields, _BOUNDS, strict=True)
    )
    zone = loc or UTC
    t = _add(datetime.fromtimestamp(ts // _NS, UTC), timedelta(seconds=1)).astimezone(zone)
    truncated = False
    year_limit = t.year + 5
    while True:
        if t.year > year_limit:
            raise CronError("pattern exceeds maximum range")
        wrapped = False
        while not (1 << t.month & month):
            if not truncated:
                truncated = True
                t = _at(t.year, t.month, 1, 0, 0, 0, zone)
            t = _at(t.year, t.month + 1, t.day, t.hour, t.minute, t.second, zone)
            if t.month == 1:
                wrapped = True
                break
        if wrapped:
            continue
        while not _day_matches(dom, dow, t):
            if not truncated:
                truncated = True
                t = _at(t.year, t.month, t.day, 0, 0, 0, zone)
            t = _at(t.year, t.month, t.day + 1, t.hour, t.minute, t.second, zone)
            if t.day == 1:
                wrapped = True
                break
        if wrapped:
            continue
        while not (1 << t.hour & hour):
            if not truncated:
                truncated = True
                t = _at(t.year, t.month, t.day, t.hour, 0, 0, zone)
            t = _add(t, timedelta(hours=1))
            if t.hour == 0:
                wrapped = True
                break
        if wrapped:
            continue
        while not (1 << t.minute & minute):
            if not truncated:
                truncated = True
                t = t.replace(second=0)
            t = _add(t, timedelta(minutes=1))
            if t.minute == 0:
                wrapped = True
                break
        if wrapped:
            continue
        while not (1 << t.second & sec):
            truncated = True
            t = _add(t, timedelta(seconds=1))
            if t.second == 0:
                wrapped = True
                break
        if wrapped:
            continue
        return int(t.timestamp()) * _NS
