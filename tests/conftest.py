"""Shared fixtures: a pynatsd server on a random loopback port, in the test's own event loop."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

import pynatsd


@pytest.fixture
async def server() -> AsyncIterator[pynatsd.Server]:
    async with pynatsd.Server(port=0) as srv:
        yield srv


def pytest_report_header() -> str:
    # Which hot path this run tests: the suite runs on both (./test), so say which one this is.
    return f"pynatsd hot path: {pynatsd.native.describe()}"
