"""Streaming reads of a stream: checkpoints, restarts, admission control, injected failures."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from support.spark import create_stream, publish, unique

pytestmark = [pytest.mark.timeout(240), pytest.mark.standalone]


def _stream(spark: Any, url: str, name: str, **options: str) -> Any:
    reader = spark.readStream.format("nats").option("servers", url).option("stream", name)
    for key, value in options.items():
        reader = reader.option(key, value)
    return reader.load()


def _run_available_now(df: Any, out: Path, checkpoint: Path) -> list[int]:
    """Run to the end of what is stored; the rows per micro-batch."""
    query = (
        df.writeStream.format("parquet")
        .option("path", str(out))
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )
    try:
        assert query.awaitTermination(120), "the query did not finish"
    finally:
        query.stop()
    if query.exception() is not None:
        raise query.exception()
    return [p["numInputRows"] for p in query.recentProgress if p["numInputRows"]]


def _seqs(spark: Any, out: Path) -> list[int]:
    return sorted(r.seq for r in spark.read.parquet(str(out)).select("seq").collect())


def test_restart_from_checkpoint_reads_exactly_the_new_messages(
    spark: Any, js_server: Any, tmp_path: Path
) -> None:
    name = unique("RESTART")
    create_stream(js_server.url, name, [f"{name}.>"])
    publish(js_server.url, 300, f"{name}.x")
    out, checkpoint = tmp_path / "out", tmp_path / "checkpoint"
    df = _stream(spark, js_server.url, name, maxRecordsPerTrigger="120")
    assert _run_available_now(df, out, checkpoint) == [120, 120, 60]
    assert _seqs(spark, out) == list(range(1, 301))

    publish(js_server.url, 200, f"{name}.x", start=300)
    assert _run_available_now(df, out, checkpoint) == [120, 80]
    assert _seqs(spark, out) == list(range(1, 501))
    rows = spark.read.parquet(str(out)).where("seq > 495").collect()
    assert sorted(bytes(r.data) for r in rows) == [f"msg-{i}".encode() for i in range(495, 500)]

    # Nothing new: a restart reads nothing.
    assert _run_available_now(df, out, checkpoint) == []


def test_injected_task_failure_mid_batch_loses_and_duplicates_nothing(
    spark: Any, js_server: Any, tmp_path: Path
) -> None:
    from pyspark.sql.functions import col, udf

    name = unique("FAIL")
    create_stream(js_server.url, name, [f"{name}.>"])
    publish(js_server.url, 600, lambda i: f"{name}.{i % 2}")
    marker = tmp_path / "fail-now"
    marker.touch()
    marker_path = str(marker)

    @udf("long")
    def fail_at_400(seq):  # no hints: PySpark 4.3 would try to infer an Arrow UDF
        # Runs inside the task, after the rows before 400 of this range were read and passed on.
        if seq == 400 and os.path.exists(marker_path):
            raise RuntimeError("injected failure")
        return seq

    df = _stream(
        spark,
        js_server.url,
        name,
        maxRecordsPerTrigger="250",
        minPartitions="2",
        minRowsPerPartition="50",
    ).withColumn("seq", fail_at_400(col("seq")))
    out, checkpoint = tmp_path / "out", tmp_path / "checkpoint"
    with pytest.raises(Exception, match="injected failure"):
        _run_available_now(df, out, checkpoint)
    assert _seqs(spark, out) == list(range(1, 251))  # batch 0 committed, batch 1 failed

    marker.unlink()
    # The restart re-runs the logged batch [251, 501) exactly, then reads the rest.
    assert _run_available_now(df, out, checkpoint) == [250, 100]
    assert _seqs(spark, out) == list(range(1, 601))
