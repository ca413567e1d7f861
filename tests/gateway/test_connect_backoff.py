"""connect_backoff on a gateway: the wait between failed dials of a remote doubles from 1 s up
to 30 s, as a route's does (cluster/link.py's RetryDelays); without it, every wait is 1 s. The
waits are read from the dial loop itself (its sleeps recorded and made instant), not timed."""

from __future__ import annotations

import asyncio

import pytest

import pynatsd
import pynatsd.gateway.gateway as gateway_module
from pynatsd.options import GatewayOptions, RemoteGatewayOptions
from support.ports import LOOPBACK, free_port
from support.sleeps import REAL_SLEEP, record_sleeps


@pytest.mark.parametrize(("backoff", "waits"), [(True, [1, 2, 4, 8, 16, 30]), (False, [1] * 6)])
async def test_dials_to_a_dead_remote(
    monkeypatch: pytest.MonkeyPatch, backoff: bool, waits: list[float]
) -> None:
    slept = record_sleeps(monkeypatch, gateway_module)
    dead = RemoteGatewayOptions(name="B", urls=[f"nats://{LOOPBACK}:{free_port()}"])
    opts = GatewayOptions(
        name="A", host=LOOPBACK, port=-1, gateways=[dead], connect_backoff=backoff
    )
    async with pynatsd.Server(port=0, host=LOOPBACK, gateway=opts):
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 15
        while len(slept) < len(waits) + 1 and loop.time() < deadline:
            await REAL_SLEEP(0.05)
    # The first sleep is the delay before the first dial (SOLICIT_DELAY).
    assert slept[1 : len(waits) + 1] == waits
