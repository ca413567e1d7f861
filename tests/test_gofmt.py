"""Go-compatible text (pynatsd.gofmt) against what Go and nats-server v2.15.1 really write.

Where each expected value comes from is said above its table:
- "nats-server": printed by the real binary (v2.15.1, go1.27.2), captured on 2026-11-25;
  durations from its config errors (`invalid lame_duck_duration of <d>, minimum is 30 seconds`
  for values under 30s, `lame duck grace period (<d>) should be strictly lower than lame duck
  duration (<d>)` above), sizes from its JetStream start-up lines (`Max Memory: <size>`),
  times and JSON from its INFO line, /varz, /connz and JetStream API replies.
- "Go": the examples of Go's own tests (`time/time_test.go` durationTests and
  parseDurationTests) or the rule written in Go's source (`encoding/json/encode.go`).
The last test runs the binary itself when it is installed, so the first table stays honest.
"""

from __future__ import annotations

import subprocess
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest

from pynatsd.gofmt import (
    GO_ZERO_TIME,
    format_go_time,
    friendly_bytes,
    go_duration,
    go_duration_ns,
    go_float,
    go_json,
    go_json_bytes,
    go_json_indent,
    go_uptime,
    parse_go_duration,
    parse_go_time,
    rfc3339,
    rfc3339_ns,
)
from support.natsserver import nats_server_binary

S = 1_000_000_000

# Go: time/time_test.go durationTests (each positive one is also checked negated there).
GO_DURATION_EXAMPLES = [
    (0, "0s"),
    (1, "1ns"),
    (1_100, "1.1µs"),
    (2_200_000, "2.2ms"),
    (3_300_000_000, "3.3s"),
    (4 * 60 * S + 5 * S, "4m5s"),
    (4 * 60 * S + 5_001_000_000, "4m5.001s"),
    (5 * 3600 * S + 6 * 60 * S + 7_001_000_000, "5h6m7.001s"),
    (8 * 60 * S + 1, "8m0.000000001s"),
    ((1 << 63) - 1, "2562047h47m16.854775807s"),
    (-(1 << 63), "-2562047h47m16.854775808s"),
]

# nats-server: its config errors print time.Duration.String() of the parsed value; the config
# text given was the left column's Go spelling (`1us`, `3600.5s`, `61m`, ...).
NATS_SERVER_DURATIONS = [
    (0, "0s"),
    (999, "999ns"),
    (1_000, "1µs"),
    (1_500, "1.5µs"),
    (1_000_001, "1.000001ms"),
    (250_000_000, "250ms"),
    (1_500_000_000, "1.5s"),
    (10 * S, "10s"),
    (30 * S - 1, "29.999999999s"),
    (-1_500_000_000, "-1.5s"),
    (30 * S, "30s"),
    (90 * S, "1m30s"),
    (7200 * S, "2h0m0s"),
    (3600 * S + S // 2, "1h0m0.5s"),
    (100 * 3600 * S, "100h0m0s"),
    (61 * 60 * S, "1h1m0s"),
    (3600 * S - 1, "59m59.999999999s"),
]


@pytest.mark.parametrize(("ns", "text"), GO_DURATION_EXAMPLES + NATS_SERVER_DURATIONS)
def test_go_duration_ns(ns: int, text: str) -> None:
    assert go_duration_ns(ns) == text
    if ns > 0:
        assert go_duration_ns(-ns) == "-" + text


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        # The same values kept as float seconds, as Options holds them (nats-server above).
        (0.0, "0s"),
        (1.5, "1.5s"),
        (0.25, "250ms"),
        (90.0, "1m30s"),
        (3600.0, "1h0m0s"),
        (3600.5, "1h0m0.5s"),
        (1e-6, "1µs"),
        (1.1, "1.1s"),  # 1.1 * 1e9 is 1100000000.0000002 in floats: rounded, not truncated
        (-29.0, "-29s"),
    ],
)
def test_go_duration_of_seconds(seconds: float, text: str) -> None:
    assert go_duration(seconds) == text


@pytest.mark.parametrize(
    ("text", "ns"),
    [
        # Go: time/time_test.go parseDurationTests.
        ("0", 0),
        ("5s", 5 * S),
        ("30s", 30 * S),
        ("1478s", 1478 * S),
        ("-5s", -5 * S),
        ("+5s", 5 * S),
        ("-0", 0),
        ("+0", 0),
        ("5.0s", 5 * S),
        ("5.6s", 5_600_000_000),
        ("5.s", 5 * S),
        (".5s", 500_000_000),
        ("1.0s", S),
        ("1.00s", S),
        ("1.004s", 1_004_000_000),
        ("100.00100s", 100_001_000_000),
        ("10ns", 10),
        ("11us", 11_000),
        ("12µs", 12_000),  # U+00B5 micro sign
        ("12μs", 12_000),  # U+03BC Greek mu
        ("13ms", 13_000_000),
        ("14s", 14 * S),
        ("15m", 15 * 60 * S),
        ("16h", 16 * 3600 * S),
        ("3h30m", (3 * 3600 + 30 * 60) * S),
        ("10.5s4m", 4 * 60 * S + 10_500_000_000),
        ("-2m3.4s", -(2 * 60 * S + 3_400_000_000)),
        ("1h2m3s4ms5us6ns", 3600 * S + 2 * 60 * S + 3 * S + 4_000_000 + 5_000 + 6),
        ("39h9m14.425s", (39 * 3600 + 9 * 60 + 14) * S + 425_000_000),
        ("52763797000ns", 52_763_797_000),
        ("0.3333333333333333333h", 20 * 60 * S),
        ("9007199254740993ns", (1 << 53) + 1),
        ("9223372036854775807ns", (1 << 63) - 1),
        ("9223372036854775.807us", (1 << 63) - 1),
        ("9223372036s854ms775us807ns", (1 << 63) - 1),
        ("-9223372036854775808ns", -(1 << 63)),
        ("-9223372036854775.808us", -(1 << 63)),
        ("-9223372036s854ms775us808ns", -(1 << 63)),
        ("0.100000000000000000000h", 6 * 60 * S),
        ("0.830103483285477580700h", 49 * 60 * S + 48_372_539_827),
        # nats-server: what it printed back for these config values (see go_duration_ns).
        ("1.000000001h", 3600 * S + 3_600),
        ("1.1111111111h", 3999_999_999_960),
        ("0.7777777777777h", 2799_999_999_999),
        ("33.3333333333333333s", 33_333_333_333),
        ("1.999999999999m", 119_999_999_999),
    ],
)
def test_parse_go_duration(text: str, ns: int) -> None:
    assert parse_go_duration(text) == ns


@pytest.mark.parametrize(
    ("text", "message"),
    [
        # nats-server: `error parsing lame_duck_duration: <message>` for these config values.
        ("1µ", 'time: unknown unit "\\xc2\\xb5" in duration "1\\xc2\\xb5"'),
        ("1x", 'time: unknown unit "x" in duration "1x"'),
        ("1", 'time: missing unit in duration "1"'),
        (".s", 'time: invalid duration ".s"'),
        ("1s2", 'time: missing unit in duration "1s2"'),
        ("3000000h", 'time: invalid duration "3000000h"'),
        ("9223372036.854775808s", 'time: invalid duration "9223372036.854775808s"'),
        # Go: time/time_test.go parseDurationErrorTests.
        ("", 'time: invalid duration ""'),
        ("3", 'time: missing unit in duration "3"'),
        ("-", 'time: invalid duration "-"'),
        ("s", 'time: invalid duration "s"'),
        (".", 'time: invalid duration "."'),
        ("-.", 'time: invalid duration "-."'),
        ("-.s", 'time: invalid duration "-.s"'),
        ("+.s", 'time: invalid duration "+.s"'),
        ("1d", 'time: unknown unit "d" in duration "1d"'),
        ("\udc85\udc85", 'time: invalid duration "\\x85\\x85"'),  # two bytes, not UTF-8
        ("\ufffd", 'time: invalid duration "\\xef\\xbf\\xbd"'),
        ('"\\', 'time: invalid duration "\\"\\\\"'),
        ("9223372036854775810ns", 'time: invalid duration "9223372036854775810ns"'),
        ("9223372036854775808ns", 'time: invalid duration "9223372036854775808ns"'),
        ("-9223372036854775809ns", 'time: invalid duration "-9223372036854775809ns"'),
        ("9223372036854776us", 'time: invalid duration "9223372036854776us"'),
        ("3000000h", 'time: invalid duration "3000000h"'),
        ("9223372036854775.808us", 'time: invalid duration "9223372036854775.808us"'),
        ("9223372036854ms775us808ns", 'time: invalid duration "9223372036854ms775us808ns"'),
    ],
)
def test_parse_go_duration_errors(text: str, message: str) -> None:
    with pytest.raises(ValueError) as info:
        parse_go_duration(text)
    assert str(info.value) == message


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        # nats-server: /varz uptime and /connz uptime/idle of a fresh server and client.
        (0.0, "0s"),
        (1.2, "1s"),
        (2.9, "2s"),
        # Go: server/monitor.go myUptime, whole seconds, leading zero units left out.
        (59.0, "59s"),
        (60.0, "1m0s"),
        (3599.0, "59m59s"),
        (3600.0, "1h0m0s"),
        (86_400.0, "1d0h0m0s"),
        (86_400 + 2 * 3600 + 3 * 60 + 4.0, "1d2h3m4s"),
        (365 * 86_400.0, "1y0d0h0m0s"),
        (2 * 365 * 86_400 + 86_400 + 3661.0, "2y1d1h1m1s"),
        (-5.0, "-5s"),  # a clock stepped back: only the seconds form is left
        (-65.0, "-65s"),
    ],
)
def test_go_uptime(seconds: float, text: str) -> None:
    assert go_uptime(seconds) == text


# nats-server: times from /varz ("start", "now"), stream info ("created", "first_ts") and
# STREAM.MSG.GET ("time"); all in UTC with up to nine digits, trailing zeros dropped.
@pytest.mark.parametrize(
    ("ns", "text"),
    [
        (1_795_595_407_785_831_353, "2026-11-25T08:30:07.785831353Z"),
        (1_795_595_407_786_465_340, "2026-11-25T08:30:07.78646534Z"),
        (1_795_595_406_000_000_000, "2026-11-25T08:30:06Z"),
        (1_795_595_406_500_000_000, "2026-11-25T08:30:06.5Z"),
        (1, "1970-01-01T00:00:00.000000001Z"),
        # nats-server: an unset time (e.g. first_ts of an empty stream) is Go's zero time.
        (0, GO_ZERO_TIME),
        (-1, GO_ZERO_TIME),
    ],
)
def test_rfc3339_ns(ns: int, text: str) -> None:
    assert rfc3339_ns(ns) == text


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (1_795_595_406.78226, "2026-11-25T08:30:06.78226Z"),
        (1_795_595_406.0, "2026-11-25T08:30:06Z"),
        (1_795_595_406.1234567, "2026-11-25T08:30:06.123457Z"),  # to the microsecond
        (0.0, GO_ZERO_TIME),
    ],
)
def test_rfc3339_of_float_seconds(seconds: float, text: str) -> None:
    assert rfc3339(seconds) == text


@pytest.mark.parametrize(
    ("text", "ns", "offset"),
    [
        # nats-server: the consumer's opt_start_time / pause_until are echoed back at the
        # offset the client gave (Go keeps the zone of a parsed time.Time).
        ("2099-01-01T00:00:00Z", 4_070_908_800 * S, 0),
        ("2026-11-25T09:30:07.5+01:00", 1_795_595_407_500_000_000, 3600),
        ("2026-11-25T03:00:07.000000001-05:30", 1_795_595_407_000_000_001, -19_800),
        ("1970-01-01T00:00:00Z", 0, 0),
        ("1969-12-31T23:59:59.999999999Z", -1, 0),
    ],
)
def test_go_time_round_trip(text: str, ns: int, offset: int) -> None:
    assert parse_go_time(text) == (ns, offset)
    assert format_go_time(ns, offset) == text


@pytest.mark.parametrize(
    "text", ["2026-11-25", "2026-11-25T08:30:07", "2026-13-01T00:00:00Z", "2026-11-25 08:30:07Z"]
)
def test_parse_go_time_refuses(text: str) -> None:
    with pytest.raises(ValueError):
        parse_go_time(text)


@pytest.mark.parametrize(
    ("size", "text"),
    [
        # nats-server: "Max Memory:" / "Max Storage:" at start-up for these max_mem values.
        (1, "1 B"),
        (1023, "1023 B"),
        (1024, "1.00 KB"),
        (1536, "1.50 KB"),
        (1_048_575, "1024.00 KB"),
        (1_048_576, "1.00 MB"),
        (5_000_000, "4.77 MB"),
        (123_456_789, "117.74 MB"),
        (1 << 30, "1.00 GB"),
        (10_000_000_000, "9.31 GB"),
        (1 << 40, "1.00 TB"),
        (1 << 50, "1.00 PB"),
        (1 << 60, "1.00 EB"),
    ],
)
def test_friendly_bytes(size: int, text: str) -> None:
    assert friendly_bytes(size) == text


@pytest.mark.parametrize(
    ("value", "text"),
    [
        # nats-server: INFO and /varz with server_name "a<b>&c\u2028d".
        ({"server_name": "a<b>&c\u2028d"}, '{"server_name":"a\\u003cb\\u003e\\u0026c\\u2028d"}'),
        # nats-server: stream info, subjects ["s.>"].
        ({"subjects": ["s.>"]}, '{"subjects":["s.\\u003e"]}'),
        ({"a": "\u2029é"}, '{"a":"\\u2029é"}'),  # other non-ASCII is written as UTF-8
        ({"c": '\x01\n\t"\\'}, '{"c":"\\u0001\\n\\t\\"\\\\"}'),
        ({"consumer_limits": {}, "list": []}, '{"consumer_limits":{},"list":[]}'),
        # nats-server: /varz "auth_timeout": 2 (a float64 of 2 seconds), "cpu": 1.
        ({"auth_timeout": 2.0, "cpu": 17.47}, '{"auth_timeout":2,"cpu":17.47}'),
        # Go: encoding/json floatEncoder: plain within [1e-6, 1e21), else exponent with
        # e-07 cleaned up to e-7.
        ([1e-6, 1e-7, 1.5e-10, 1e20, 1e21, 0.00001, -0.0, 100.0], None),
        # Float-looking text inside strings stays as it is.
        ({"v": "2.0", "note": "x: 1.5, y", "t": "08:30:16.50Z"}, None),
        (2.0, "2"),
        # nats-server: /connz?subs=1 for a SUB on `a<0xff>b.c` lists "a\ufffdb.c" with the
        # replacement character as UTF-8, not escaped (a surrogate escape stands for the byte).
        ({"s": "a\udcffb.c"}, '{"s":"a\ufffdb.c"}'),
        # Go: time.Time fields, RFC3339Nano at the value's own offset.
        ({"t": datetime(2016, 5, 4, 18, 53, 41)}, '{"t":"2016-05-04T18:53:41Z"}'),
        (
            {"t": datetime(2016, 5, 4, 18, 53, 41, 500, tzinfo=timezone(timedelta(hours=2)))},
            '{"t":"2016-05-04T18:53:41.0005+02:00"}',
        ),
    ],
)
def test_go_json(value: Any, text: str | None) -> None:
    if text is None:
        text = {
            list: "[0.000001,1e-7,1.5e-10,100000000000000000000,1e+21,0.00001,-0,100]",
            dict: '{"v":"2.0","note":"x: 1.5, y","t":"08:30:16.50Z"}',
        }[type(value)]
    assert go_json(value) == text.encode()
    assert go_json_bytes(value) == text.encode()


def test_go_json_indent() -> None:
    # nats-server: /varz is json.MarshalIndent(v, "", "  ").
    value = {"server_name": "a<b>", "auth_timeout": 2.0, "cpu": 0.5, "tags": [], "x": [1.0, 2]}
    assert go_json_indent(value) == (
        b"{\n"
        b'  "server_name": "a\\u003cb\\u003e",\n'
        b'  "auth_timeout": 2,\n'
        b'  "cpu": 0.5,\n'
        b'  "tags": [],\n'
        b'  "x": [\n'
        b"    1,\n"
        b"    2\n"
        b"  ]\n"
        b"}"
    )


@pytest.mark.parametrize(
    ("x", "text"),
    [(1.0, "1"), (0.1, "0.1"), (1 / 3, "0.3333333333333333"), (123456789.125, "123456789.125")],
)
def test_go_float(x: float, text: str) -> None:
    assert go_float(x) == text


def test_utc_datetime_default() -> None:
    stamp = datetime(2026, 11, 25, 8, 30, 7, 785831, tzinfo=UTC)
    assert go_json({"t": stamp}) == b'{"t":"2026-11-25T08:30:07.785831Z"}'


@pytest.mark.parametrize(
    ("duration", "grace"),
    [("10s", None), ("1.5us", None), ("-1.5s", None), ("1h0m0.5s", "1h0m0.5s"), ("61m", "61m")],
)
def test_durations_match_the_real_nats_server(
    tmp_path: Path, duration: str, grace: str | None
) -> None:
    """The durations nats-server prints in its configuration errors, side by side."""
    binary = nats_server_binary()
    if binary is None:
        pytest.skip("nats-server binary not installed")
    conf = tmp_path / "ld.conf"
    text = f'port: -1\nlame_duck_duration: "{duration}"\n'
    if grace is not None:
        text += f'lame_duck_grace_period: "{grace}"\n'
    conf.write_text(text)
    args = [binary, "-c", str(conf)] + ([] if grace is not None else ["-t"])
    done = subprocess.run(args, capture_output=True, text=True, timeout=10, check=False)
    shown = go_duration_ns(parse_go_duration(duration))
    if grace is None:
        assert f"invalid lame_duck_duration of {shown}, minimum is 30 seconds" in done.stderr
    else:
        assert f"lame duck grace period ({shown}) should be strictly lower" in done.stderr
