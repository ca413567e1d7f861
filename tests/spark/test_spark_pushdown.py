"""Filter pushdown (`spark.sql.python.filterPushdown.enabled`): filters on `subject`, `seq` and
`timestamp` narrow the read's consumer, so the server sends only what they select. What the
source fetched is counted on the server: the messages it sent to clients (`/varz` out_msgs)."""

from __future__ import annotations

import json
import shutil
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest

from support.ports import free_port
from support.processes import ServerProcess
from support.spark import create_stream, publish, start_js_server, unique

pytestmark = pytest.mark.timeout(240)

COUNT = 5000
KEYS = 100  # subject k<i % KEYS>: each subject holds 1% of the stream


class Monitored:
    def __init__(self, server: ServerProcess, http_port: int) -> None:
        self.server = server
        self.url = server.url
        self.http_port = http_port

    def out_msgs(self) -> int:
        with urllib.request.urlopen(f"http://127.0.0.1:{self.http_port}/varz", timeout=5) as r:
            return int(json.load(r)["out_msgs"])


@pytest.fixture(scope="module")
def monitored() -> Iterator[Monitored]:
    store = tempfile.mkdtemp(prefix="spark-push-")
    http_port = free_port()
    server = start_js_server(store, ["-m", str(http_port)])
    try:
        yield Monitored(server, http_port)
    finally:
        server.stop()
        shutil.rmtree(store, ignore_errors=True)


@pytest.fixture(scope="module")
def filled(monitored: Monitored) -> tuple[str, int]:
    """A stream of COUNT messages on KEYS subjects, and the time (epoch ms) after the first half."""
    name = unique("PUSH")
    create_stream(monitored.url, name, [f"{name}.>"])
    publish(monitored.url, COUNT // 2, lambda i: f"{name}.k{i % KEYS}")
    time.sleep(0.01)
    cut_ms = int(time.time() * 1000)
    time.sleep(0.01)
    publish(monitored.url, COUNT // 2, lambda i: f"{name}.k{i % KEYS}", start=COUNT // 2)
    return name, cut_ms


@pytest.fixture
def pushdown(spark: Any) -> Iterator[Any]:
    spark.conf.set("spark.sql.python.filterPushdown.enabled", "true")
    try:
        yield spark
    finally:
        spark.conf.unset("spark.sql.python.filterPushdown.enabled")


# --- the mapping alone: (filter, option subjects) -> pushed or left to Spark ---------------------

PUSH_ROWS = [
    ("EqualTo", ("subject",), "a.b", (), {"subjects": ("a.b",)}),
    ("EqualTo", ("subject",), "a.*", (), None),  # a wildcard is a literal to Spark
    ("EqualTo", ("subject",), "a b", (), None),
    ("In", ("subject",), ("a.b", "a.c", "a.b"), (), {"subjects": ("a.b", "a.c")}),
    ("StringStartsWith", ("subject",), "a.b.", (), {"subjects": ("a.b.>",)}),
    ("StringStartsWith", ("subject",), "a.b", (), None),  # would also match a.bc
    ("EqualTo", ("subject",), "a.b", ("a.>",), {"subjects": ("a.b",)}),
    ("EqualTo", ("subject",), "x.b", ("a.>",), None),  # outside the `subject` option
    ("GreaterThan", ("seq",), 10, (), {"seq_start": 11}),
    ("LessThanOrEqual", ("seq",), 10, (), {"seq_end": 11}),
    ("EqualTo", ("seq",), 7, (), {"seq_start": 7, "seq_end": 8}),
    ("EqualTo", ("data",), b"x", (), None),
]


@pytest.mark.parametrize(("kind", "column", "value", "option", "expected"), PUSH_ROWS)
def test_push_filters(
    kind: str, column: tuple[str, ...], value: Any, option: tuple[str, ...], expected: Any
) -> None:
    from pyspark.sql import datasource

    from pynatsd.spark.pushdown import Pushed, push_filters

    f = getattr(datasource, kind)(column, value)
    pushed, remaining = push_filters([f], option)
    if expected is None:
        assert remaining == [f] and pushed == Pushed()
    else:
        assert remaining == []
        for key, want in expected.items():
            assert getattr(pushed, key) == want


def test_timestamp_filters_narrow_but_stay_with_spark() -> None:
    from datetime import UTC, datetime

    from pyspark.sql.datasource import GreaterThan, LessThanOrEqual

    from pynatsd.spark.pushdown import push_filters

    t = datetime(2026, 1, 1, tzinfo=UTC)
    filters = [GreaterThan(("timestamp",), t), LessThanOrEqual(("timestamp",), t)]
    pushed, remaining = push_filters(filters, ())
    assert remaining == filters
    us = int(t.timestamp()) * 1_000_000
    assert (pushed.time_start_ns, pushed.time_end_ns) == ((us + 1) * 1000, (us + 1) * 1000)
    assert pushed.empty


# --- through Spark ---------------------------------------------------------------------------


def _df(spark: Any, url: str, name: str, **options: str) -> Any:
    reader = spark.read.format("nats").option("servers", url).option("stream", name)
    for key, value in options.items():
        reader = reader.option(key, value)
    return reader.load()


def _fetched(monitored: Monitored, df: Any) -> tuple[list[Any], int]:
    """The rows, and how many messages the server sent to clients meanwhile (the rows, plus a
    few API replies and end-of-batch statuses)."""
    before = monitored.out_msgs()
    rows = df.collect()
    return rows, monitored.out_msgs() - before


def _plan(df: Any) -> str:
    """What `df.explain("formatted")` prints."""
    jvm = df.sparkSession._jvm
    return str(jvm.PythonSQLUtils.explainString(df._jdf.queryExecution(), "formatted"))


def test_subject_filters_read_one_percent(pushdown: Any, monitored: Any, filled: Any) -> None:
    name, _ = filled
    df = _df(pushdown, monitored.url, name).where(f"subject = '{name}.k7'")
    assert f"EqualTo(subject,{name}.k7)" in _plan(df).replace(" ", "")
    rows, fetched = _fetched(monitored, df)
    assert sorted(r.seq for r in rows) == list(range(8, COUNT + 1, KEYS))
    assert fetched < 2 * len(rows)  # ~1% of the stream, not all of it

    df = _df(pushdown, monitored.url, name).where(f"subject IN ('{name}.k1', '{name}.k2')")
    rows, fetched = _fetched(monitored, df)
    assert len(rows) == 2 * COUNT // KEYS and {r.subject for r in rows} == {
        f"{name}.k1",
        f"{name}.k2",
    }
    assert fetched < 2 * len(rows)

    # LIKE 'a.b.%' is the filter a.b.>; a subject the stream cannot hold reads nothing.
    df = _df(pushdown, monitored.url, name).where(f"subject LIKE '{name}.%'")
    assert len(df.collect()) == COUNT
    assert _df(pushdown, monitored.url, name).where("subject = 'elsewhere'").count() == 0
    # A filter that is not pushed is applied by Spark, after a full read.
    df = _df(pushdown, monitored.url, name).where("subject LIKE '%.k7'")
    rows, fetched = _fetched(monitored, df)
    assert len(rows) == COUNT // KEYS and fetched >= COUNT


def test_seq_and_timestamp_ranges(pushdown: Any, monitored: Any, filled: Any) -> None:
    name, cut_ms = filled
    df = _df(pushdown, monitored.url, name).where("seq >= 101 AND seq < 151")
    plan = _plan(df).replace(" ", "")
    assert "GreaterThanOrEqual(seq,101)" in plan and "LessThan(seq,151)" in plan
    rows, fetched = _fetched(monitored, df)
    assert sorted(r.seq for r in rows) == list(range(101, 151))
    assert fetched < 2 * len(rows)

    df = _df(pushdown, monitored.url, name).where(
        f"timestamp >= timestamp_millis({cut_ms}) AND subject = '{name}.k3'"
    )
    rows, fetched = _fetched(monitored, df)
    assert sorted(r.seq for r in rows) == list(range(COUNT // 2 + 4, COUNT + 1, KEYS))
    assert fetched < 2 * len(rows) + 10

    # Combined with the options: the narrower of the two wins.
    df = _df(pushdown, monitored.url, name, startingOffsets="4001", subject=f"{name}.k9").where(
        "seq < 4500"
    )
    assert sorted(r.seq for r in df.collect()) == list(range(4010, 4500, KEYS))
