"""Message schedules (ADR-51) side by side with nats-server -js: the publish checks and their
errors, and the messages the schedules produce (`@at`, `@every`, cron, `Nats-Schedule-Source`,
`Nats-Schedule-TTL`, stopping a schedule), compared after normalising the times."""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from support.jspair import Step, assert_same, side_by_side_at_once
from support.natsserver import nats_server_binary

pytestmark = pytest.mark.skipif(nats_server_binary() is None, reason="nats-server not installed")

API = "$JS.API"
_TIME = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)")


def stream(name: str, **cfg: Any) -> Step:
    return ("req", f"{API}.STREAM.CREATE.{name}", {"name": name, **cfg})


def at(seconds: float) -> str:
    when = datetime.now(UTC) + timedelta(seconds=seconds)
    return "@at " + when.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _normalise(value: Any) -> Any:
    if isinstance(value, str):
        return _TIME.sub("<time>", value)
    if isinstance(value, dict):
        return {k: _normalise(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(_normalise(v) for v in value)
    return value


async def both(
    tmp_path: Path, steps: Callable[[], list[Step]], norm: Callable[[Any], Any] = lambda v: v
) -> None:
    expected, got = await side_by_side_at_once(tmp_path, steps)
    assert_same(norm(_normalise(expected)), norm(_normalise(got)))


SCHED = {"subjects": ["sched.>", "orders.>", "src.>"], "allow_msg_schedules": True}


def errors() -> list[Step]:
    target = {"Nats-Schedule-Target": "orders.new"}
    return [
        stream("PLAIN", subjects=["plain.>"]),
        ("pub", "plain.a", "x", {"Nats-Schedule": "@hourly", **target}),
        ("pub", "plain.a", "x", {"Nats-Schedule": "bad"}),
        ("pub", "plain.a", "x", {"Nats-Schedule-Next": "purge", "Nats-Scheduler": "plain.b"}),
        ("pub", "plain.a", "x", {"Nats-Scheduler": "plain.b"}),
        ("pub", "plain.a", "x", {"Nats-Schedule-TTL": "5s"}),
        stream("DN", subjects=["dn.>"], allow_msg_schedules=True, discard="new"),
        stream("M", mirror={"name": "PLAIN"}, allow_msg_schedules=True),
        stream("SRC", sources=[{"name": "PLAIN"}], allow_msg_schedules=True),
        stream("S", **SCHED),
        ("req", f"{API}.STREAM.UPDATE.S", {"name": "S", "subjects": SCHED["subjects"]}),
        ("pub", "sched.a", "x", {"Nats-Schedule": "@every 500ms", **target}),
        ("pub", "sched.a", "x", {"Nats-Schedule": "@every x", **target}),
        ("pub", "sched.a", "x", {"Nats-Schedule": "@at 2020-13-01T00:00:00Z", **target}),
        ("pub", "sched.a", "x", {"Nats-Schedule": "* * * * *", **target}),
        ("pub", "sched.a", "x", {"Nats-Schedule": "61 * * * * *", **target}),
        ("pub", "sched.a", "x", {"Nats-Schedule": "*/0 * * * * *", **target}),
        ("pub", "sched.a", "x", {"Nats-Schedule": "@hourly"}),
        ("pub", "sched.a", "x", {"Nats-Schedule": "@hourly", "Nats-Schedule-Target": "sched.a"}),
        ("pub", "sched.a", "x", {"Nats-Schedule": "@hourly", "Nats-Schedule-Target": "elsewhere"}),
        ("pub", "sched.a", "x", {"Nats-Schedule": "@hourly", "Nats-Schedule-Target": "o.*"}),
        ("pub", "sched.a", "x", {"Nats-Schedule": "@hourly", "Nats-Schedule-TTL": "1ms", **target}),
        ("pub", "sched.a", "x", {"Nats-Schedule": "@hourly", "Nats-Schedule-TTL": "5s", **target}),
        (
            "pub",
            "sched.a",
            "x",
            {"Nats-Schedule": "@hourly", "Nats-Schedule-Rollup": "all", **target},
        ),
        ("pub", "sched.a", "x", {"Nats-Schedule": "@hourly", "Nats-Rollup": "all", **target}),
        (
            "pub",
            "sched.a",
            "x",
            {"Nats-Schedule": "@hourly", "Nats-Schedule-Source": "orders.new", **target},
        ),
        (
            "pub",
            "sched.a",
            "x",
            {"Nats-Schedule": "@hourly", "Nats-Schedule-Source": "sched.a", **target},
        ),
        (
            "pub",
            "sched.a",
            "x",
            {"Nats-Schedule": "@hourly", "Nats-Schedule-Source": "nope", **target},
        ),
        (
            "pub",
            "sched.a",
            "x",
            {"Nats-Schedule": "@hourly", "Nats-Schedule-Time-Zone": "", **target},
        ),
        (
            "pub",
            "sched.a",
            "x",
            {"Nats-Schedule": "@hourly", "Nats-Schedule-Time-Zone": "Mars/Base", **target},
        ),
        (
            "pub",
            "sched.a",
            "x",
            {"Nats-Schedule": "@every 1h", "Nats-Schedule-Time-Zone": "UTC", **target},
        ),
        ("pub", "sched.a", "x", {"Nats-Schedule-Next": "tomorrow", "Nats-Scheduler": "sched.b"}),
        ("pub", "sched.a", "x", {"Nats-Schedule-Next": "purge"}),
        ("pub", "sched.a", "x", {"Nats-Schedule-Next": "purge", "Nats-Scheduler": "sched.a"}),
        ("pub", "sched.a", "x", {"Nats-Schedule-Next": "purge", "Nats-Scheduler": "orders.x"}),
        ("pub", "orders.x", "plain"),
        ("pub", "sched.a", "x", {"Nats-Schedule-Next": "purge", "Nats-Scheduler": "orders.x"}),
        ("pub", "sched.a", "x", {"Nats-Scheduler": "sched.b"}),
        # Valid ones: stored with the rollup nats-server adds.
        ("pub", "sched.b", "x", {"Nats-Schedule": "0 0 0 1 1 *", "H": "1", **target}),
        (
            "pub",
            "sched.c",
            "x",
            {"Nats-Schedule": "@weekly", "Nats-Schedule-Time-Zone": "Europe/Amsterdam", **target},
        ),
        ("pub", "sched.b", "y", {"Nats-Schedule": "@yearly", "Nats-Rollup": "sub", **target}),
        ("req", f"{API}.STREAM.MSG.GET.S", {"last_by_subj": "sched.b"}),
        ("req", f"{API}.STREAM.INFO.S", {"subjects_filter": ">"}),
        (
            "req",
            f"{API}.STREAM.UPDATE.S",
            {"name": "S", "subjects": SCHED["subjects"], "allow_msg_schedules": False},
        ),
        # allow_msg_schedules on an existing stream.
        (
            "req",
            f"{API}.STREAM.UPDATE.PLAIN",
            {"name": "PLAIN", "subjects": ["plain.>"], "allow_msg_schedules": True},
        ),
    ]


def consumer(name: str, filter_subject: str, **cfg: Any) -> Step:
    config = {"durable_name": name, "filter_subject": filter_subject, "ack_policy": "none"}
    return (
        "req",
        f"{API}.CONSUMER.CREATE.S.{name}",
        {"stream_name": "S", "config": {**config, **cfg}},
    )


def fetch(name: str, batch: int, seconds: float) -> Step:
    body = {"batch": batch, "expires": int(seconds * 1e9)}
    return ("fetch", f"{API}.CONSUMER.MSG.NEXT.S.{name}", body, seconds + 0.2)


def delayed() -> list[Step]:
    return [
        stream("S", **SCHED, allow_msg_ttl=True),
        consumer("C", "orders.>"),
        (
            "pub",
            "sched.once",
            "hello",
            {
                "Nats-Schedule": at(1),
                "Nats-Schedule-Target": "orders.once",
                "Nats-Schedule-TTL": "5s",
                "Nats-Msg-Id": "m1",
                "Nats-Expected-Stream": "S",
                "Custom": "kept",
            },
        ),
        (
            "pub",
            "sched.past",
            "late",
            {"Nats-Schedule": "@at 2020-01-01T00:00:00Z", "Nats-Schedule-Target": "orders.past"},
        ),
        fetch("C", 1, 0.6),
        fetch("C", 1, 1.5),
        ("req", f"{API}.STREAM.INFO.S", {"subjects_filter": ">"}),
        ("req", f"{API}.STREAM.MSG.GET.S", {"last_by_subj": "orders.once"}),
    ]


_TARGETS = ("every", "cron", "sample", "nosrc")


def repeating() -> list[Step]:
    steps: list[Step] = [
        stream("S", **SCHED),
        *(consumer(t, f"orders.{t}") for t in _TARGETS),
        ("pub", "src.temp", "21", {"Unit": "C"}),
        (
            "pub",
            "sched.every",
            "tick",
            {"Nats-Schedule": "@every 1s", "Nats-Schedule-Target": "orders.every"},
        ),
        (
            "pub",
            "sched.cron",
            "cron",
            {"Nats-Schedule": "* * * * * *", "Nats-Schedule-Target": "orders.cron"},
        ),
        (
            "pub",
            "sched.sample",
            "fallback",
            {
                "Nats-Schedule": "@every 1s",
                "Nats-Schedule-Source": "src.temp",
                "Nats-Schedule-Target": "orders.sample",
            },
        ),
        (
            "pub",
            "sched.nosrc",
            "fallback",
            {
                "Nats-Schedule": "@every 1s",
                "Nats-Schedule-Source": "src.none",
                "Nats-Schedule-Target": "orders.nosrc",
            },
        ),
        *(fetch(t, 2, 2.5) for t in _TARGETS),
        # Stop them: a purge message, a plain message on the schedule's subject, purges.
        ("pub", "sched.stop", "", {"Nats-Schedule-Next": "purge", "Nats-Scheduler": "sched.every"}),
        ("pub", "sched.cron", "not a schedule"),
        ("req", f"{API}.STREAM.PURGE.S", {"filter": "sched.sample"}),
        ("req", f"{API}.STREAM.PURGE.S", {"filter": "sched.nosrc"}),
        *(consumer(f"after-{t}", f"orders.{t}", deliver_policy="new") for t in _TARGETS),
        ("sleep", 1.5),
        *(fetch(f"after-{t}", 1, 0.1) for t in _TARGETS),
        *(
            ("req", f"{API}.STREAM.MSG.GET.S", {"last_by_subj": f"sched.{t}"})
            for t in (*_TARGETS, "stop")
        ),
    ]
    return steps


_SEQ_KEYS = ("seq", "num_pending", "stream_seq", "consumer_seq")


def _no_seqs(value: Any) -> Any:
    """How the four schedules interleave in the stream is a matter of milliseconds."""
    if isinstance(value, dict):
        return {k: "<seq>" if k in _SEQ_KEYS else _no_seqs(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(_no_seqs(v) for v in value)
    if isinstance(value, str) and value.startswith("$JS.ACK."):
        return "<ack>"
    return value


async def test_schedule_errors_as_nats_server(tmp_path: Path) -> None:
    await both(tmp_path, errors)


async def test_delayed_message_as_nats_server(tmp_path: Path) -> None:
    await both(tmp_path, delayed)


async def test_repeating_schedules_as_nats_server(tmp_path: Path) -> None:
    await both(tmp_path, repeating, _no_seqs)
