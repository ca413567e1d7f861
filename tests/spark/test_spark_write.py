"""Writes: core publishes (to pynatsd, and in bulk to both servers) and JetStream publishes
deduplicated on retry."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from support.natsserver import require_nats_server
from support.processes import PYNATSD, ServerProcess, start_server
from support.spark import (
    core_collect,
    create_stream,
    publish,
    stream_messages,
    stream_state,
    unique,
)

pytestmark = [pytest.mark.timeout(240), pytest.mark.standalone]


def _writer(df: Any, url: str, **options: str) -> Any:
    writer = df.write.format("nats").option("servers", url).mode("append")
    for key, value in options.items():
        writer = writer.option(key, value)
    return writer


def test_core_write_to_pynatsd(spark: Any, core_server: Any) -> None:
    url = core_server.client_url
    df = spark.createDataFrame(
        [(f"core.{i % 2}", f"row-{i}") for i in range(200)], "subject string, data string"
    )
    got = core_collect(url, "core.>", 200, 60, lambda: _writer(df, url).save())
    assert sorted(d for _, d, _ in got) == sorted(f"row-{i}".encode() for i in range(200))
    assert {s for s, d, _ in got if d == b"row-3"} == {"core.1"}

    # `value` is accepted for `data`, the `subject` option overrides the column, headers travel.
    df2 = spark.createDataFrame(
        [("ignored", b"v", {"K": ["a", "b"]})],
        "subject string, value binary, headers map<string,array<string>>",
    )
    got = core_collect(url, "fixed", 1, 60, lambda: _writer(df2, url, subject="fixed").save())
    assert got[0][0] == "fixed" and got[0][1] == b"v"
    assert got[0][2] is not None and got[0][2]["K"] in ("a", "b")  # nats-py keeps one value


@pytest.fixture(params=["pynatsd", "nats-server"])
def core_process(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[ServerProcess]:
    """A server without JetStream, in its own process: pynatsd, then nats-server."""
    cmd = list(PYNATSD) if request.param == "pynatsd" else [require_nats_server()]
    server = start_server(cmd, store=str(tmp_path))
    try:
        yield server
    finally:
        server.stop()


def test_core_write_delivers_every_row(spark: Any, core_process: ServerProcess) -> None:
    """A bulk core write from two tasks (the bulk framing path, `publishMode=core`): a
    subscriber gets every row once, on its row's subject, with its data."""
    url, n = core_process.url, 20_000
    df = spark.range(0, n, 1, 2).selectExpr(
        "concat('bulk.', cast(id % 4 as string)) as subject", "cast(id as string) as data"
    )
    got = core_collect(url, "bulk.>", n, 60, lambda: _writer(df, url, publishMode="core").save())
    assert sorted(int(d) for _, d, _ in got) == list(range(n))
    assert all(s == f"bulk.{int(d) % 4}" and h is None for s, d, h in got)


def test_jetstream_write_is_deduplicated_on_retry(spark: Any, js_server: Any) -> None:
    url = js_server.url
    name = unique("WRITE")
    create_stream(url, name, [f"{name}.>"])
    df = spark.createDataFrame(
        [(f"id-{i}", f"{name}.{i % 3}", f"row-{i}".encode()) for i in range(1000)],
        "id string, subject string, data binary",
    )
    _writer(df, url, stream=name, msgIdColumn="id").save()
    assert stream_state(url, name) == (1000, 1, 1000)
    _writer(df, url, stream=name, msgIdColumn="id").save()  # the retry: all duplicates
    assert stream_state(url, name) == (1000, 1, 1000)
    stored = stream_messages(url, name)
    assert sorted(d for _, _, d, _ in stored) == sorted(f"row-{i}".encode() for i in range(1000))
    assert all(h is not None and h["Nats-Msg-Id"] == f"id-{int(d[4:])}" for _, _, d, h in stored)


def test_stream_to_stream_copy_uses_source_sequences_as_ids(spark: Any, js_server: Any) -> None:
    url = js_server.url
    src, dst = unique("SRC"), unique("DST")
    create_stream(url, src, [f"{src}.>"])
    create_stream(url, dst, [f"{dst}.>"])
    publish(url, 500, lambda i: f"{src}.{i % 2}")
    df = (
        spark.read.format("nats")
        .option("servers", url)
        .option("stream", src)
        .load()
        .selectExpr(f"concat('{dst}.', subject) as subject", "data", "stream", "seq")
    )
    _writer(df, url, stream=dst).save()
    _writer(df, url, stream=dst).save()
    assert stream_state(url, dst) == (500, 1, 500)
    stored = stream_messages(url, dst)
    assert {h["Nats-Msg-Id"] for _, _, _, h in stored if h} == {f"{src}:{i}" for i in range(1, 501)}


def test_streaming_write_failure_mid_batch_is_deduplicated_on_restart(
    spark: Any, js_server: Any, tmp_path: Path
) -> None:
    from pyspark.sql.functions import col, udf

    url = js_server.url
    src, dst = unique("SSRC"), unique("SDST")
    create_stream(url, src, [f"{src}.>"])
    create_stream(url, dst, [f"{dst}.>"])
    publish(url, 400, f"{src}.x")
    marker = tmp_path / "fail-now"
    marker.touch()
    marker_path = str(marker)

    @udf("long")
    def fail_at_350(seq):  # no hints: PySpark 4.3 would try to infer an Arrow UDF
        if seq == 350 and os.path.exists(marker_path):
            time.sleep(2)  # let the other task finish publishing its half first
            raise RuntimeError("injected failure")
        return seq

    # No `stream`/`seq` columns reach the writer: ids come from query, batch, partition and row.
    df = (
        spark.readStream.format("nats")
        .option("servers", url)
        .option("stream", src)
        .option("minPartitions", "2")
        .option("minRowsPerPartition", "100")
        .load()
        .where(fail_at_350(col("seq")) > 0)  # a filter, so the optimizer keeps the UDF
        .selectExpr(f"'{dst}.copy' as subject", "data")
    )

    def run() -> None:
        query = (
            df.writeStream.format("nats")
            .option("servers", url)
            .option("stream", dst)
            .option("checkpointLocation", str(tmp_path / "checkpoint"))
            .trigger(availableNow=True)
            .start()
        )
        try:
            query.awaitTermination(120)
        finally:
            query.stop()
        if query.exception() is not None:
            raise query.exception()

    with pytest.raises(Exception, match="injected failure"):
        run()
    first = stream_state(url, dst)[0]
    assert 0 < first < 400  # the first task's 200 rows were published before the failure
    marker.unlink()
    run()
    assert stream_state(url, dst) == (400, 1, 400)  # the 200 again were duplicates
    stored = stream_messages(url, dst)
    assert sorted(d for _, _, d, _ in stored) == sorted(f"msg-{i}".encode() for i in range(400))
