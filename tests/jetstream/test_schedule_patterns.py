"""Schedule patterns as nats-server's parseMsgSchedule reads them: `@at`, `@every` (anchored
on the previous fire time rounded to the second, at least 1 s, never behind now), six-field
cron with names, ranges, steps and the day-of-month/day-of-week rule, the predefined ones,
and time zones."""

from __future__ import annotations

import time
import zoneinfo
from datetime import UTC, datetime, timedelta

import pytest

from pynatsd.jetstream.cron import CronError, next_cron
from pynatsd.jetstream.schedules import _Invalid, parse_msg_schedule

NS = 1_000_000_000


def ns(text: str) -> int:
    return int(datetime.fromisoformat(text).timestamp()) * NS


def iso(value: int) -> str:
    return datetime.fromtimestamp(value // NS, UTC).isoformat()


def test_at_is_once_and_keeps_its_offset() -> None:
    assert parse_msg_schedule("@at 2030-01-02T03:04:05.5+02:00", None, 0) == (
        ns("2030-01-02T01:04:05+00:00") + NS // 2,
        7200,
        False,
    )
    with pytest.raises(_Invalid):
        parse_msg_schedule("@at 2030-01-02", None, 0)
    with pytest.raises(_Invalid):
        parse_msg_schedule("@at 2030-01-02T03:04:05Z", UTC, 0)


def test_every_anchors_on_the_rounded_previous_time() -> None:
    now = time.time_ns() // NS * NS + NS
    assert parse_msg_schedule("@every 5s", None, now) == (now + 5 * NS, 0, True)
    anchor = now + 600_000_000  # rounds up
    assert parse_msg_schedule("@every 1500ms", None, anchor)[0] == now + NS + 1_500_000_000
    # Long idle: once, from now, not once per missed interval.
    assert parse_msg_schedule("@every 5s", None, 0)[0] >= time.time_ns() + 4 * NS
    for bad in ("@every 999ms", "@every x", "@every "):
        with pytest.raises(_Invalid):
            parse_msg_schedule(bad, None, 0)


@pytest.mark.parametrize(
    ("pattern", "after", "fires"),
    [
        ("* * * * * *", "2030-01-01T00:00:00", "2030-01-01T00:00:01"),
        ("0 0 * * * *", "2030-01-01T00:30:00", "2030-01-01T01:00:00"),
        ("*/15 * * * * *", "2030-01-01T00:00:07", "2030-01-01T00:00:15"),
        ("10/20 * * * * *", "2030-01-01T00:00:31", "2030-01-01T00:00:50"),
        ("0 0 8-11 * * *", "2030-01-01T11:00:00", "2030-01-02T08:00:00"),
        ("0 0 0 * * mon,wed", "2030-01-01T00:00:00", "2030-01-02T00:00:00"),  # a Tuesday
        ("0 0 0 1 jan-mar *", "2030-04-01T00:00:00", "2031-01-01T00:00:00"),
        # Both day fields restricted: either matches (the 15th, or a Friday).
        ("0 30 4 1,15 * 5", "2030-01-02T00:00:00", "2030-01-04T04:30:00"),
        ("0 0 0 13 * 5", "2030-01-05T00:00:00", "2030-01-11T00:00:00"),
        # One of them a star (not a stepped one): both must match.
        ("0 0 0 * * 5", "2030-01-05T00:00:00", "2030-01-11T00:00:00"),
        ("0 0 0 */1 * 5", "2030-01-05T00:00:00", "2030-01-11T00:00:00"),
        ("0 0 0 */2 * 5", "2030-01-05T00:00:00", "2030-01-07T00:00:00"),
        ("0 0 0 29 2 *", "2030-03-01T00:00:00", "2032-02-29T00:00:00"),
    ],
)
def test_cron(pattern: str, after: str, fires: str) -> None:
    assert iso(next_cron(pattern, ns(after + "+00:00"))) == fires + "+00:00"


def test_cron_fires_on_the_next_whole_second() -> None:
    ts = ns("2030-01-01T00:00:00+00:00") + NS - 1
    assert next_cron("* * * * * *", ts) == ns("2030-01-01T00:00:01+00:00")


@pytest.mark.parametrize(
    ("pattern", "delta"),
    [
        ("@yearly", timedelta(days=366)),  # from 1 January of a leap year
        ("@annually", timedelta(days=366)),
        ("@monthly", timedelta(days=31)),
        ("@daily", timedelta(days=1)),
        ("@midnight", timedelta(days=1)),
        ("@hourly", timedelta(hours=1)),
    ],
)
def test_predefined(pattern: str, delta: timedelta) -> None:
    start = datetime(2032, 1, 1, tzinfo=UTC)
    nxt, _, repeat = parse_msg_schedule(pattern, None, int(start.timestamp()) * NS)
    assert repeat and nxt == int((start + delta).timestamp()) * NS


def test_weekly_is_sunday_midnight() -> None:
    start = datetime(2032, 1, 4, tzinfo=UTC)  # a Sunday
    nxt = parse_msg_schedule("@weekly", None, int(start.timestamp()) * NS)[0]
    assert nxt == int((start + timedelta(days=7)).timestamp()) * NS


def test_cron_in_a_time_zone() -> None:
    amsterdam = zoneinfo.ZoneInfo("Europe/Amsterdam")
    nxt, offset, _ = parse_msg_schedule("0 0 5 * * *", amsterdam, ns("2030-07-01T00:00:00+00:00"))
    assert (iso(nxt), offset) == ("2030-07-01T03:00:00+00:00", 7200)
    nxt, offset, _ = parse_msg_schedule("0 0 5 * * *", amsterdam, ns("2030-01-01T00:00:00+00:00"))
    assert (iso(nxt), offset) == ("2030-01-01T04:00:00+00:00", 3600)


@pytest.mark.parametrize(
    "pattern",
    [
        "* * * * *",
        "60 * * * * *",
        "* * 24 * * *",
        "* * * 0 * *",
        "*/0 * * * * *",
        "a * * * * *",
        "1-2-3 * * * * *",
        "5-1 * * * * *",
        "1/2/3 * * * * *",
        "-1 * * * * *",
    ],
)
def test_invalid_cron(pattern: str) -> None:
    with pytest.raises(CronError):
        next_cron(pattern, 0)
