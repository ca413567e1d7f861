"""On the standalone cluster, tasks run in executor JVMs launched by the workers: nothing of the
driver's environment reaches them, and the `nats` source's code comes from the archive the
application ships (`addPyFile`), as docs/spark.md tells users to do."""

from __future__ import annotations

import os
from typing import Any

import pytest

pytestmark = pytest.mark.standalone


def test_executors_get_a_clean_environment_and_the_shipped_package(
    spark: Any, spark_mode: str, request: pytest.FixtureRequest
) -> None:
    if spark_mode != "standalone":
        pytest.skip("checks the standalone cluster's executors")
    cluster = request.getfixturevalue("standalone_cluster")
    os.environ["PYNATSD_DRIVER_ONLY"] = "1"  # set after the cluster started: must not leak

    def probe(_: Any) -> list[tuple[str, str, str, bool]]:
        import os

        import pynatsd.spark

        return [
            (
                pynatsd.spark.__file__,
                os.environ.get("PYTHONPATH", ""),
                os.getcwd(),
                "PYNATSD_DRIVER_ONLY" in os.environ,
            )
        ]

    got = spark.sparkContext.parallelize([0, 1], 2).mapPartitions(probe).collect()
    assert len(got) == 2
    for module, pythonpath, cwd, leaked in got:
        assert "pynatsd.zip" in module  # not /work/.../src: the shipped archive
        assert "src" not in pythonpath.split(os.pathsep)
        assert cwd.startswith(str(cluster.directory))  # the worker's directory for the app
        assert not leaked
