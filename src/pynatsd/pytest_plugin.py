"""pytest plugin (entry point `pytest11`): a `nats_server` fixture running pynatsd on a random
loopback port in a background thread, so sync and async tests alike can connect to
`nats_server.client_url`. Override options per test with
`@pytest.mark.nats_server(max_payload=...)`.

`nats_cluster` does the same for a cluster (three servers routed over loopback, a
`ThreadedCluster`): connect to any of `nats_cluster.client_urls`. Choose the size and the
servers' options with `@pytest.mark.nats_cluster(size=2, max_payload=...)`.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from pynatsd.embedded import ThreadedCluster, ThreadedServer


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "nats_server(**options): options for the pynatsd `nats_server` fixture"
    )
    config.addinivalue_line(
        "markers",
        "nats_cluster(size=3, **options): size and server options for the `nats_cluster` fixture",
    )


@pytest.fixture
def nats_server(request: pytest.FixtureRequest) -> Iterator[ThreadedServer]:
    marker = request.node.get_closest_marker("nats_server")
    overrides: dict[str, Any] = dict(marker.kwargs) if marker else {}
    with ThreadedServer(**overrides) as server:
        yield server


@pytest.fixture
def nats_cluster(request: pytest.FixtureRequest) -> Iterator[ThreadedCluster]:
    marker = request.node.get_closest_marker("nats_cluster")
    overrides: dict[str, Any] = dict(marker.kwargs) if marker else {}
    size = int(overrides.pop("size", 3))
    with ThreadedCluster(size, **overrides) as cluster:
        yield cluster
