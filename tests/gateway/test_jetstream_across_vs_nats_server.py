"""JetStream deliveries across a gateway, side by side with nats-server: cluster A runs
JetStream, a client of cluster B pulls from and subscribes to its consumers. Each delivery
crosses on the inbox or deliver subject with the stream's subject after its ack reply's `@`
(as across routes and leafs), so the client of B sees the stream's subjects, and its acks go
back.

There is no all-nats-server reference: nats-server runs JetStream beside a gateway only when
clustered ("JetStream cluster requires configured routes or solicited leafnode for the system
account"). pynatsd's JetStream serves cluster A; cluster B is nats-server (its gateway takes
pynatsd's deliveries as nats-server's) or pynatsd."""

from __future__ import annotations

import asyncio
from pathlib import Path

import nats
import pytest

from gateway.test_gateway_faults_vs_nats_server import _across
from support.cluster import GO, PY, wait_interest
from support.natsserver import nats_server_binary
from support.supercluster import SuperCluster

pytestmark = pytest.mark.skipif(nats_server_binary() is None, reason="nats-server not found")


async def _consume(a_url: str, b_url: str) -> list[tuple[str, bytes, int]]:
    a = await nats.connect(a_url, allow_reconnect=False)
    b = await nats.connect(b_url, allow_reconnect=False)
    try:
        await wait_interest(b, [a])
        ajs, bjs = a.jetstream(), b.jetstream()
        await ajs.add_stream(name="ORDERS", subjects=["orders.>"])
        for n in range(3):
            await ajs.publish(f"orders.{n}", f"o{n}".encode())
        got = []
        puller = await bjs.pull_subscribe("orders.>", durable="PULL")
        for msg in await puller.fetch(3, timeout=5):
            await msg.ack_sync()
            got.append((msg.subject, msg.data, msg.metadata.sequence.stream))
        info = await ajs.consumer_info("ORDERS", "PULL")
        assert (info.ack_floor.stream_seq, info.num_ack_pending) == (3, 0)
        pushed = await bjs.subscribe("orders.>", durable="PUSH", manual_ack=True)
        for _ in range(3):
            msg = await pushed.next_msg(timeout=5)
            await msg.ack()
            got.append((msg.subject, msg.data, msg.metadata.sequence.stream))
        return got
    finally:
        await a.close()
        await b.close()


@pytest.mark.parametrize("kinds", [(PY, GO), (PY, PY)], ids=["py-go", "py-py"])
async def test_consumers_deliver_across_a_gateway(tmp_path: Path, kinds: tuple[str, str]) -> None:
    jetstream = f'jetstream {{ store_dir: "{tmp_path / "js"}" }}\n'
    with SuperCluster(
        tmp_path,
        {"A": [kinds[0]], "B": [kinds[1]]},
        dials={"A": ["B"]},
        cluster_extra={"A": jetstream},
    ) as sc:
        await asyncio.to_thread(sc.start)
        a, b = sc.cluster("A")[0], sc.cluster("B")[0]
        assert await _across(a.url, b.url) == ["to.a:y", "to.b:x"]
        got = await _consume(a.url, b.url)
    expected = [(f"orders.{n}", f"o{n}".encode(), n + 1) for n in range(3)]
    assert got == expected + expected
