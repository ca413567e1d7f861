"""The SparkSession the pipelines run in: the active one if there is one (a notebook, a test),
else a new one with settings for a small local job."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager

from pyspark.sql import SparkSession


@contextmanager
def spark_session(master: str, app_name: str) -> Iterator[SparkSession]:
    active = SparkSession.getActiveSession()
    if active is not None:
        yield active  # not ours to configure or stop
        return
    # Spark's Python workers must run this interpreter, which has pynatsd installed.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    spark = (
        SparkSession.builder.master(master)
        .appName(app_name)
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "8")
        # Archive partitions are dates in UTC, whatever the machine's zone.
        .config("spark.sql.session.timeZone", "UTC")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("WARN")
    try:
        yield spark
    finally:
        spark.stop()
