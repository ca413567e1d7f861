"""`pynatsd spark archive`: land a stream in Parquet, partitioned by date, exactly once.

The query's checkpoint (default `<to>/_checkpoint`; Spark and Parquet readers skip `_` folders)
records every sequence range before it is read and the file sink commits each micro-batch
atomically in `<to>/_spark_metadata`, so a crash or a restart neither loses nor repeats rows.
`--once` archives what is stored now (Trigger.AvailableNow) and exits; without it the query runs
until interrupted, a micro-batch every `trigger_seconds`."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

from pyspark.sql import SparkSession
from pyspark.sql import functions as F


@dataclass(frozen=True)
class ArchiveResult:
    rows: int
    batches: int


def archive(
    spark: SparkSession,
    *,
    servers: str,
    stream: str,
    to: str,
    once: bool,
    checkpoint: str = "",
    subject: str = "",
    trigger_seconds: float = 10.0,
    max_records_per_trigger: int | None = None,
    options: Mapping[str, str] | None = None,
    timeout: float | None = None,
) -> ArchiveResult:
    reader = (
        spark.readStream.format("nats")
        .option("servers", servers)
        .option("stream", stream)
        .option("includeHeaders", "true")
    )
    if subject:
        reader = reader.option("subject", subject)
    if max_records_per_trigger:
        reader = reader.option("maxRecordsPerTrigger", str(max_records_per_trigger))
    for key, value in (options or {}).items():
        reader = reader.option(key, value)
    rows = reader.load().withColumn("date", F.to_date("timestamp"))
    writer = (
        rows.writeStream.format("parquet")
        .partitionBy("date")
        .option("path", to)
        .option("checkpointLocation", checkpoint or os.path.join(to, "_checkpoint"))
    )
    if once:
        writer = writer.trigger(availableNow=True)
    else:
        writer = writer.trigger(processingTime=f"{trigger_seconds} seconds")
    query = writer.start()
    try:
        query.awaitTermination(max(1, round(timeout))) if timeout else query.awaitTermination()
    except KeyboardInterrupt:
        pass  # stop cleanly: the checkpoint keeps what was committed
    finally:
        query.stop()
    error = query.exception()
    if error is not None:
        raise error
    progress = [p for p in query.recentProgress if p["numInputRows"]]
    return ArchiveResult(rows=sum(int(p["numInputRows"]) for p in progress), batches=len(progress))
