"""Batch reads of a stream: ranges, filters, headers, partitions."""

from __future__ import annotations

from typing import Any

import pytest

from support.spark import create_stream, publish, unique

pytestmark = pytest.mark.standalone


def _read(spark: Any, url: str, stream: str, **options: str) -> Any:
    reader = spark.read.format("nats").option("servers", url).option("stream", stream)
    for key, value in options.items():
        reader = reader.option(key, value)
    return reader.load()


def test_batch_read_of_a_range(spark: Any, js_server: Any) -> None:
    name = unique("READ")
    create_stream(js_server.url, name, [f"{name}.>"])
    publish(js_server.url, 500, lambda i: f"{name}.{i % 3}")
    df = _read(spark, js_server.url, name, startingOffsets="101", endingOffsets="201")
    assert df.columns == ["subject", "data", "stream", "seq", "timestamp"]
    rows = sorted(df.collect(), key=lambda r: r.seq)
    assert [r.seq for r in rows] == list(range(101, 201))
    assert all(bytes(r.data) == f"msg-{r.seq - 1}".encode() for r in rows)
    assert all(r.subject == f"{name}.{(r.seq - 1) % 3}" for r in rows)
    assert {r.stream for r in rows} == {name}
    assert all(r.timestamp is not None for r in rows)


def test_batch_read_defaults_to_the_whole_stream_split_into_contiguous_tasks(
    spark: Any, js_server: Any
) -> None:
    name = unique("WHOLE")
    create_stream(js_server.url, name, [f"{name}.>"])
    publish(js_server.url, 1000, f"{name}.x")
    df = _read(spark, js_server.url, name, minPartitions="3", minRowsPerPartition="300")
    assert df.rdd.getNumPartitions() == 3
    per_task = df.rdd.mapPartitions(lambda rows: [sorted(r.seq for r in rows)]).collect()
    assert [(p[0], p[-1], len(p)) for p in per_task] == [
        (1, 334, 334),
        (335, 668, 334),
        (669, 1000, 332),
    ]
    # Small ranges stay one task (the default minRowsPerPartition is 50000).
    assert _read(spark, js_server.url, name).rdd.getNumPartitions() == 1


def test_subject_filters_latest_and_empty_ranges(spark: Any, js_server: Any) -> None:
    name = unique("FILTER")
    create_stream(js_server.url, name, [f"{name}.>"])
    publish(js_server.url, 300, lambda i: f"{name}.{'a' if i % 3 == 0 else 'b'}.{i}")
    a = _read(spark, js_server.url, name, subject=f"{name}.a.>")
    assert sorted(r.seq for r in a.collect()) == list(range(1, 301, 3))
    both = _read(spark, js_server.url, name, subject=f"{name}.a.>,{name}.b.7")
    assert sorted(r.seq for r in both.collect()) == sorted([*range(1, 301, 3), 8])
    # A filtered range that ends before the stream does: stops at the range end.
    part = _read(spark, js_server.url, name, subject=f"{name}.a.>", endingOffsets="10")
    assert sorted(r.seq for r in part.collect()) == [1, 4, 7]
    assert _read(spark, js_server.url, name, startingOffsets="latest").count() == 0
    assert _read(spark, js_server.url, name, startingOffsets=f'{{"{name}": 299}}').count() == 2
    empty = unique("EMPTY")
    create_stream(js_server.url, empty, [f"{empty}.>"])
    assert _read(spark, js_server.url, empty).count() == 0


def test_headers_keep_repeated_keys(spark: Any, js_server: Any) -> None:
    from pynatsd.spark.options import ConnectOptions, parse_servers
    from pynatsd.spark.wire import Connection

    name = unique("HDR")
    create_stream(js_server.url, name, [f"{name}.>"])
    with Connection.open(ConnectOptions(servers=parse_servers(js_server.url))) as conn:
        header = b"NATS/1.0\r\nX-Tag: one\r\nX-Tag: two\r\nTrace: t1\r\n\r\n"
        conn.request(f"{name}.h", b"with", header=header)
        conn.request(f"{name}.p", b"plain")
    df = _read(spark, js_server.url, name, includeHeaders="true")
    assert df.columns == ["subject", "data", "headers", "stream", "seq", "timestamp"]
    rows = sorted(df.collect(), key=lambda r: r.seq)
    assert rows[0].headers == {"X-Tag": ["one", "two"], "Trace": ["t1"]}
    assert rows[1].headers is None


def test_starting_timestamp(spark: Any, js_server: Any) -> None:
    import time

    name = unique("TIME")
    create_stream(js_server.url, name, [f"{name}.>"])
    publish(js_server.url, 20, f"{name}.x")
    time.sleep(0.05)
    cut_ms = int(time.time() * 1000)
    time.sleep(0.05)
    publish(js_server.url, 5, f"{name}.x", start=20)
    df = _read(spark, js_server.url, name, startingTimestamp=str(cut_ms))
    assert sorted(r.seq for r in df.collect()) == [21, 22, 23, 24, 25]
    future = _read(spark, js_server.url, name, startingTimestamp="2200-01-01T00:00:00Z")
    assert future.count() == 0
