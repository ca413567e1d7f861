"""Shared fixtures: a pynatsd server on a random loopback port, in the test's own event loop."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from hypothesis import HealthCheck, settings

import pynatsd

# Property tests share the machine with servers and Spark (and, under xdist, another worker): a
# slow example is the machine's load, not a finding. Explicit @settings still override the rest.
settings.register_profile("pynatsd", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("pynatsd")


@pytest.fixture
async def server() -> AsyncIterator[pynatsd.Server]:
    async with pynatsd.Server(port=0) as srv:
        yield srv


def pytest_report_header() -> str:
    # Which hot path this run tests: the suite runs on both (./test), so say which one this is.
    return f"pynatsd hot path: {pynatsd.native.describe()}"


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Under pytest-xdist (`./test` runs `--dist loadgroup`), keep each test file on one worker,
    so its module-scoped servers start once, and every Spark test on one worker, so the run has
    one SparkSession and one standalone cluster at a time (tests/spark/conftest.py)."""
    for item in items:
        path = item.nodeid.split("::", 1)[0]
        group = "spark" if path.startswith("tests/spark/") else path
        item.add_marker(pytest.mark.xdist_group(group))
