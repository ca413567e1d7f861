"""Embedded use: the async context manager, the threaded runner and the pytest fixture."""

from __future__ import annotations

import nats
import pytest

import pynatsd


async def test_async_context_manager_random_port() -> None:
    async with pynatsd.Server(port=0) as server:
        assert server.port > 0
        assert server.client_url == f"nats://127.0.0.1:{server.port}"
        nc = await nats.connect(server.client_url)
        assert nc.is_connected
        await nc.close()
    assert not server.running


def test_unknown_option_is_a_clear_error() -> None:
    with pytest.raises(TypeError, match="unknown server option 'max_payloadd'"):
        pynatsd.Server(max_payloadd=1)


async def test_pytest_fixture(nats_server: pynatsd.ThreadedServer) -> None:
    nc = await nats.connect(nats_server.client_url)
    sub = await nc.subscribe("fixture")
    await nc.publish("fixture", b"works")
    assert (await sub.next_msg(timeout=2)).data == b"works"
    await nc.close()


@pytest.mark.nats_server(max_payload=512)
async def test_pytest_fixture_options(nats_server: pynatsd.ThreadedServer) -> None:
    nc = await nats.connect(nats_server.client_url)
    assert nc.max_payload == 512
    await nc.close()
