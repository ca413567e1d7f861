"""Spark's discovery hook: PySpark imports every top-level `pyspark_*` module and registers its
`DefaultSource` under `DefaultSource.name()` ("nats"). Nothing else belongs here."""

from pynatsd.spark.source import NatsDataSource as DefaultSource

__all__ = ["DefaultSource"]
