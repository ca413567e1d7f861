"""`nats`, a PySpark data source for NATS streams and subjects (Spark's Python Data Source API).

After `pip install pynatsd[spark]`, `spark.read.format("nats")` works without registration (the
top-level module `pyspark_nats` exposes `DefaultSource`, which Spark discovers); `register(spark)`
does it explicitly (Spark Connect, or when the package is not importable as installed)::

    from pynatsd.spark import register
    register(spark)
    df = spark.read.format("nats").option("servers", url).option("stream", "ORDERS").load()
    df.write.format("nats").option("servers", url).option("subject", "copy").mode("append").save()
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pynatsd.spark.source import NatsDataSource

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["NatsDataSource", "register"]


def register(spark: SparkSession) -> None:
    """Register the `nats` format in this session."""
    spark.dataSource.register(NatsDataSource)
