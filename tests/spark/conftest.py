"""Spark tests: ONE SparkSession (local[2]) for the whole run, a JetStream server and a pynatsd
core server, all on loopback.

JetStream: stream tests run against `python -m pynatsd -js` by default;
`PYNATSD_SPARK_JS_SERVER=nats-server` runs the same tests against the real nats-server, which is
how the data source is checked to work with both.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from collections.abc import Iterator

import pytest

import pynatsd
from support.processes import ServerProcess
from support.spark import start_js_server

# The Python workers Spark starts must use this interpreter (and so find pynatsd and pyarrow).
os.environ["PYSPARK_PYTHON"] = sys.executable
os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")


@pytest.fixture(scope="session")
def js_server() -> Iterator[ServerProcess]:
    """A JetStream-enabled server (pynatsd by default) for the whole session."""
    store = tempfile.mkdtemp(prefix="spark-js-")
    server = start_js_server(store)
    try:
        yield server
    finally:
        server.stop()
        shutil.rmtree(store, ignore_errors=True)


@pytest.fixture(scope="session")
def core_server() -> Iterator[pynatsd.ThreadedServer]:
    """pynatsd itself, for core subject reads and writes."""
    with pynatsd.ThreadedServer(port=0) as server:
        yield server


@pytest.fixture(scope="session")
def spark() -> Iterator[object]:
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        pytest.skip("Java is not installed (Spark needs it)")
    from pyspark.sql import SparkSession

    session = (
        SparkSession.builder.master("local[2]")
        .appName("pynatsd-spark-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.default.parallelism", "2")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.sql.streaming.noDataMicroBatches.enabled", "false")
        .config("spark.sql.adaptive.enabled", "false")
        .config("spark.python.worker.reuse", "true")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    # Before any test can call register(): `nats` must resolve through the `pyspark_nats`
    # module alone (load() only plans: the schema comes from the options, no server needed).
    probe = session.read.format("nats").option("stream", "S").load()
    assert probe.columns == ["subject", "data", "stream", "seq", "timestamp"]
    try:
        yield session
    finally:
        session.stop()
