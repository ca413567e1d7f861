"""What one dashboard update holds: a section for each part the server has, from its endpoint."""

from __future__ import annotations

import asyncio
from typing import Any

import nats
import pytest

import pynatsd
from pynatsd.monitor import endpoints
from pynatsd.monitor.dashboard import snapshot as snapshot_module
from pynatsd.monitor.dashboard.snapshot import MAX_CLOSED, snapshot


def handler(name: str) -> Any:
    return lambda query: (200, {"endpoint": name})


HANDLERS = {path: handler(path) for path in ("/routez", "/leafz", "/gatewayz")}


async def test_sections_follow_the_parts_varz_reports(
    server: pynatsd.Server, monitor_of_varz: Any
) -> None:
    assert {"routez", "leafz", "gatewayz", "mqtt"}.isdisjoint(snapshot(server, HANDLERS))
    # Leaf nodes, gateways and MQTT light up once their part fills its /varz section.
    monitor_of_varz(leaf={"port": 7422}, gateway={"name": "east"}, mqtt={"port": 1883})
    nc = await nats.connect(server.client_url)
    update = snapshot(server, HANDLERS)
    await nc.close()
    assert update["leafz"] == {"endpoint": "/leafz"}
    assert update["gatewayz"] == {"endpoint": "/gatewayz"}
    assert update["mqtt"] == {"config": {"port": 1883}, "clients": []}
    assert "routez" not in update


async def test_closed_connections_newest_first_and_bounded(server: pynatsd.Server) -> None:
    for i in range(MAX_CLOSED + 3):
        nc = await nats.connect(server.client_url, name=f"n{i}")
        await nc.close()
    deadline = asyncio.get_running_loop().time() + 5
    while len(server.closed_clients) < MAX_CLOSED + 3:
        assert asyncio.get_running_loop().time() < deadline
        await asyncio.sleep(0.01)
    closed = snapshot(server, {})["closed"]
    assert [c["name"] for c in closed] == [f"n{i}" for i in range(MAX_CLOSED + 2, 2, -1)]
    assert all(not key.startswith("_") for c in closed for key in c)


@pytest.fixture
def monitor_of_varz(monkeypatch: pytest.MonkeyPatch) -> Any:
    def set_sections(**sections: Any) -> None:
        real = endpoints.varz

        def varz(server: Any) -> dict[str, Any]:
            return {**real(server), **sections}

        monkeypatch.setattr(snapshot_module.endpoints, "varz", varz)

    return set_sections
