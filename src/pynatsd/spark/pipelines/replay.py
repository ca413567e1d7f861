"""`pynatsd spark replay`: publish archived rows back to NATS, deduplicated.

Each row is published with `Nats-Msg-Id: <stream>:<seq>` of the message it was archived from, so
replaying the same archive twice (or resuming a replay that failed half-way) stores nothing twice
within the target stream's duplicate window. `subject` sends every row to one subject; `stream`
sends each row to its original subject, expecting that stream to store it. Rows go out in their
original order (one task) unless `ordered` is false."""

from __future__ import annotations

from collections.abc import Mapping

from pyspark.sql import SparkSession
from pyspark.sql import functions as F


def replay(
    spark: SparkSession,
    *,
    servers: str,
    source: str,
    subject: str = "",
    stream: str = "",
    ordered: bool = True,
    options: Mapping[str, str] | None = None,
) -> int:
    """Returns the number of rows replayed."""
    rows = spark.read.parquet(source)
    columns = ["subject", "data", "stream", "seq"]
    if "headers" in rows.columns:
        # Drop the publish-control headers of the original message (its own Nats-Msg-Id,
        # Nats-Expected-*): the replay sets its own.
        rows = rows.withColumn(
            "headers", F.map_filter("headers", lambda k, v: ~k.startswith("Nats-"))
        )
        columns.append("headers")
    rows = rows.select(*columns)
    if ordered:
        rows = rows.repartition(1).sortWithinPartitions("stream", "seq")
    writer = rows.write.format("nats").option("servers", servers).mode("append")
    if subject:
        writer = writer.option("subject", subject)
    if stream:
        writer = writer.option("stream", stream).option("publishMode", "jetstream")
    for key, value in (options or {}).items():
        writer = writer.option(key, value)
    writer.save()
    return int(spark.read.parquet(source).count())
