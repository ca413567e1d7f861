"""Spark tests: one SparkSession at a time (local[2], then one attached to a standalone cluster
for the acceptance tests marked `standalone`), a JetStream server and a pynatsd
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
from typing import Any

import pytest

import pynatsd
from support.processes import ServerProcess
from support.spark import start_js_server
from support.spark_standalone import StandaloneCluster, pynatsd_archive

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


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "standalone: the test also runs with the driver attached to a Spark standalone cluster",
    )


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Every test using `spark` runs in local mode; the acceptance tests (marked `standalone`)
    run again on the standalone cluster. The mode is session-scoped, so pytest runs all the
    local tests, stops that session, then runs the standalone ones: one SparkSession at a time."""
    if "spark" not in metafunc.fixturenames:
        return
    modes = ["local"]
    if metafunc.definition.get_closest_marker("standalone") is not None:
        modes.append("standalone")
    metafunc.parametrize("spark_mode", modes, indirect=True, scope="session")


@pytest.fixture(scope="session")
def spark_mode(request: pytest.FixtureRequest) -> str:
    mode: str = request.param
    return mode


@pytest.fixture(scope="session")
def standalone_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StandaloneCluster]:
    """A master and two workers of 1 core and 1 GiB, for the whole run (started on first use)."""
    cluster = StandaloneCluster(tmp_path_factory.mktemp("spark-standalone"))
    cluster.start()
    try:
        yield cluster
    finally:
        cluster.stop()


def _builder(request: pytest.FixtureRequest, mode: str) -> Any:
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.appName(f"pynatsd-spark-tests-{mode}")
    if mode == "local":
        return builder.master("local[2]")
    cluster: StandaloneCluster = request.getfixturevalue("standalone_cluster")
    return (
        builder.master(cluster.url)
        .config("spark.cores.max", "2")
        .config("spark.executor.cores", "1")
        .config("spark.executor.memory", "512m")
        # The executors' Python (with pyarrow); our code is shipped once the session exists.
        .config("spark.pyspark.python", sys.executable)
        # A failed task is retried once on a cluster (4 by default): the tests' injected
        # failures stay quick.
        .config("spark.task.maxFailures", "2")
    )


@pytest.fixture(scope="session")
def spark(request: pytest.FixtureRequest, spark_mode: str) -> Iterator[Any]:
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        pytest.skip("Java is not installed (Spark needs it)")
    session = (
        _builder(request, spark_mode)
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
    if spark_mode == "standalone":
        # As docs/spark.md says: the package as a zip, shipped to every executor.
        tmp = request.getfixturevalue("tmp_path_factory")
        session.sparkContext.addPyFile(str(pynatsd_archive(tmp.mktemp("ship"))))
    # Before any test can call register(): `nats` must resolve through the `pyspark_nats`
    # module alone (load() only plans: the schema comes from the options, no server needed).
    probe = session.read.format("nats").option("stream", "S").load()
    assert probe.columns == ["subject", "data", "stream", "seq", "timestamp"]
    try:
        yield session
    finally:
        session.stop()
