"""connect_backoff: the wait between failed dials of a route doubles from 1 s up to 30 s, as
nats-server's connectToRoute does it; without it, every wait is 1 s. The waits are read from
the dial loop itself (its sleeps recorded and made instant), not timed."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace
from typing import Any

import pytest

import pynatsd
import pynatsd.cluster.cluster as cluster_module
from cluster.nodes import CLUSTER, eventually
from pynatsd.cluster.cluster import RetryDelays
from pynatsd.options import ClusterOptions
from support.ports import LOOPBACK, free_port

REAL_SLEEP = asyncio.sleep


def test_retry_delays() -> None:
    backoff = RetryDelays(backoff=True)
    assert [backoff.next() for _ in range(7)] == [1, 2, 4, 8, 16, 30, 30]
    backoff.reset()
    assert backoff.next() == 1
    fixed = RetryDelays(backoff=False)
    assert [fixed.next() for _ in range(3)] == [1, 1, 1]


@pytest.mark.parametrize(("backoff", "waits"), [(True, [1, 2, 4, 8, 16, 30]), (False, [1] * 6)])
async def test_explicit_route_to_a_dead_peer(
    monkeypatch: pytest.MonkeyPatch, backoff: bool, waits: list[float]
) -> None:
    slept: list[float] = []

    async def sleep(delay: float, *args: Any) -> None:
        slept.append(delay)
        await REAL_SLEEP(0.01)

    # The cluster module's asyncio, with its sleeps recorded (everything else is asyncio's).
    shim = SimpleNamespace(**{name: getattr(asyncio, name) for name in dir(asyncio)})
    shim.sleep = sleep
    monkeypatch.setattr(cluster_module, "asyncio", shim)
    dead = f"nats-route://{LOOPBACK}:{free_port()}"
    opts = ClusterOptions(
        name=CLUSTER, host=LOOPBACK, port=-1, routes=[dead], connect_backoff=backoff
    )
    async with pynatsd.Server(port=0, host=LOOPBACK, cluster=opts):
        await eventually(lambda: len(slept) >= len(waits))
    assert slept[: len(waits)] == waits
