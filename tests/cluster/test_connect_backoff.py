"""connect_backoff: the wait between failed dials of a route doubles from 1 s up to 30 s, as
nats-server's connectToRoute does it; without it, every wait is 1 s. The waits are read from
the dial loop itself (its sleeps recorded and made instant), not timed."""

from __future__ import annotations

import pytest

import pynatsd
import pynatsd.cluster.cluster as cluster_module
from cluster.nodes import CLUSTER, eventually
from pynatsd.cluster.link import RetryDelays
from pynatsd.options import ClusterOptions
from support.ports import LOOPBACK, free_port
from support.sleeps import record_sleeps


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
    slept = record_sleeps(monkeypatch, cluster_module)
    dead = f"nats-route://{LOOPBACK}:{free_port()}"
    opts = ClusterOptions(
        name=CLUSTER, host=LOOPBACK, port=-1, routes=[dead], connect_backoff=backoff
    )
    async with pynatsd.Server(port=0, host=LOOPBACK, cluster=opts):
        await eventually(lambda: len(slept) >= len(waits))
    assert slept[: len(waits)] == waits
