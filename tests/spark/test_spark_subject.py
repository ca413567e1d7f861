"""Reads of core subjects (live, at-most-once), against pynatsd."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

from support.spark import core_publish, unique

pytestmark = pytest.mark.timeout(240)


def _live(spark: Any, url: str, subject: str, **options: str) -> Any:
    reader = spark.readStream.format("nats").option("servers", url).option("subject", subject)
    for key, value in options.items():
        reader = reader.option(key, value)
    return reader.load()


def _wait_until_subscribed(spark: Any, url: str, subject: str, table: str) -> None:
    """The subscription starts with the query's first trigger: probe until a probe arrives."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        core_publish(url, subject, 1)
        time.sleep(0.3)
        if spark.sql(f"select count(*) from {table} where subject = '{subject}'").first()[0]:
            return
    raise AssertionError("the live query never received a probe")


def test_live_subject_stream(spark: Any, core_server: Any) -> None:
    url = core_server.client_url
    base = unique("live")
    table = unique("live_table")
    query = (
        _live(spark, url, f"{base}.>", includeHeaders="true")
        .writeStream.format("memory")
        .queryName(table)
        .trigger(processingTime="500 milliseconds")
        .start()
    )
    try:
        _wait_until_subscribed(spark, url, f"{base}.probe", table)
        core_publish(url, f"{base}.data", 300)
        deadline = time.monotonic() + 60
        rows: list[Any] = []
        while time.monotonic() < deadline:
            rows = spark.sql(f"select * from {table} where subject = '{base}.data'").collect()
            if len(rows) >= 300:
                break
            time.sleep(0.3)
    finally:
        query.stop()
    assert sorted(bytes(r.data) for r in rows) == sorted(f"live-{i}".encode() for i in range(300))
    everything = spark.sql(f"select seq, stream, reply from {table}").collect()
    seqs = sorted(r.seq for r in everything)
    assert seqs == list(range(len(everything)))  # a per-query receive counter, no gaps
    assert all(r.stream is None and r.reply is None for r in everything)


def test_live_subject_buffer_overflow_fails_the_query(spark: Any, core_server: Any) -> None:
    url = core_server.client_url
    base = unique("flood")
    table = unique("flood_table")
    query = (
        _live(spark, url, f"{base}.>", bufferSize="20")
        .writeStream.format("memory")
        .queryName(table)
        .trigger(processingTime="2 seconds")
        .start()
    )
    try:
        _wait_until_subscribed(spark, url, f"{base}.probe", table)
        core_publish(url, f"{base}.data", 100)
        with pytest.raises(Exception, match="bufferSize"):
            query.awaitTermination(60)
            raise AssertionError("the query did not fail")
    finally:
        query.stop()


def test_batch_capture_of_a_subject(spark: Any, core_server: Any) -> None:
    url = core_server.client_url
    subject = unique("capture")
    stop = threading.Event()

    def keep_publishing() -> None:
        i = 0
        while not stop.is_set() and i < 2000:
            core_publish(url, subject, 1, start=i)
            i += 1
            time.sleep(0.01)

    publisher = threading.Thread(target=keep_publishing, daemon=True)
    publisher.start()
    try:
        df = (
            spark.read.format("nats")
            .option("servers", url)
            .option("subject", subject)
            .option("maxMessages", "50")
            .option("timeout", "60")
            .load()
        )
        rows = df.collect()
    finally:
        stop.set()
        publisher.join(10)
    assert df.columns == ["subject", "data", "reply", "stream", "seq", "timestamp"]
    assert len(rows) == 50
    numbers = [int(bytes(r.data).split(b"-")[1]) for r in sorted(rows, key=lambda r: r.seq)]
    assert numbers == list(range(numbers[0], numbers[0] + 50))  # consecutive: nothing lost

    started = time.monotonic()
    quiet = (
        spark.read.format("nats")
        .option("servers", url)
        .option("subject", "nobody.here")
        .option("timeout", "1")
        .load()
    )
    assert quiet.count() == 0
    assert time.monotonic() - started < 30


def test_live_subject_read_reconnects_after_a_server_restart(spark: Any) -> None:
    import pynatsd
    from support.ports import free_port

    port = free_port()
    url = f"nats://127.0.0.1:{port}"
    base = unique("again")
    table = unique("again_table")
    server = pynatsd.ThreadedServer(host="127.0.0.1", port=port)
    server.start()
    query = None
    try:
        query = (
            _live(spark, url, f"{base}.>")
            .writeStream.format("memory")
            .queryName(table)
            .trigger(processingTime="500 milliseconds")
            .start()
        )
        _wait_until_subscribed(spark, url, f"{base}.probe", table)
        server.stop()
        server = pynatsd.ThreadedServer(host="127.0.0.1", port=port)
        server.start()
        # Published once the subscription is back: received, and the query never failed.
        _wait_until_subscribed(spark, url, f"{base}.after", table)
        after = spark.sql(f"select * from {table} where subject = '{base}.after'").count()
        assert after >= 1 and query.isActive and query.exception() is None
    finally:
        if query is not None:
            query.stop()
        server.stop()
