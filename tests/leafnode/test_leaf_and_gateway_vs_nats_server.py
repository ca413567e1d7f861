"""A leaf node and a gateway on the same server: cluster A (one server, the leaf's hub) is
gatewayed to cluster B (nats-server), and a leaf (nats-server or pynatsd) dials A's leaf port.
Run with A and the leaf as nats-server (the reference) and every other pairing; each setup
must observe what the reference observes, which the test states as its expectation.

What the clients observe: a message from the leaf reaches a subscriber in B and one from B the
leaf (with headers), requests cross both hops in both directions, and a queue group with
members on the leaf and in B is served by the leaf's member for a publisher on A (a leaf's
member comes before another cluster's) and by B's once the leaf's leaves.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import nats
import nats.errors
import pytest
from nats.aio.client import Client

from leafnode.topology import Node, collect, leaf_conf, remote, wait_leafs
from support.cluster import GO, PY, wait_interest
from support.natsserver import nats_server_binary
from support.ports import LOOPBACK, free_port
from support.supercluster import SuperCluster

pytestmark = pytest.mark.skipif(nats_server_binary() is None, reason="nats-server not found")

# nats-server wants a system account named when a server has both a leaf port and a gateway.
SYSTEM = "accounts { SYS: {} }\nsystem_account: SYS\n"
QUEUE_MSGS = 10


@pytest.fixture(
    params=[(GO, "go"), (GO, "py"), (PY, "go"), (PY, "py")],
    ids=["go-hub-go-leaf", "go-hub-py-leaf", "py-hub-go-leaf", "py-hub-py-leaf"],
)
async def world(
    request: pytest.FixtureRequest, tmp_path: Path
) -> AsyncIterator[tuple[Client, Client, Client]]:
    """Clients on the hub (cluster A), on cluster B and on the leaf."""
    hub_kind, leaf_kind = request.param
    leaf_port = free_port()
    listener = f'leafnodes {{ listen: "{LOOPBACK}:{leaf_port}" }}\n'
    with SuperCluster(
        tmp_path,
        {"A": [hub_kind], "B": [GO]},
        dials={"A": ["B"]},
        extra=SYSTEM,
        cluster_extra={"A": listener},
    ) as sc:
        await asyncio.to_thread(sc.start)
        leaf = Node(
            leaf_kind, "LEAF", leaf_conf(remote(f"nats-leaf://{LOOPBACK}:{leaf_port}")), tmp_path
        )
        await leaf.start()
        clients: list[Client] = []
        try:
            await wait_leafs(leaf, 1)
            for url in (sc.cluster("A")[0].url, sc.cluster("B")[0].url, leaf.url):
                clients.append(await nats.connect(url, allow_reconnect=False))
            yield clients[0], clients[1], clients[2]
        finally:
            for client in clients:
                await client.close()
            await leaf.stop()


async def test_leaf_to_other_cluster_and_back(world: tuple[Client, Client, Client]) -> None:
    _, cb, cl = world

    def answer(prefix: bytes, client: Client) -> Any:
        async def respond(msg: Any) -> None:
            await client.publish(msg.reply, prefix + msg.data)

        return respond

    on_b = await cb.subscribe("gw.tob.>")
    on_leaf = await cl.subscribe("gw.toleaf.>")
    await cb.subscribe("svc.b", cb=answer(b"b:", cb))
    await cl.subscribe("svc.leaf", cb=answer(b"leaf:", cl))
    await wait_interest(cb, [cl])
    await wait_interest(cl, [cb])
    await cl.publish("gw.tob.1", b"from-leaf")
    await cl.publish("gw.tob.2", b"with-headers", headers={"X-K": "v"})
    await cb.publish("gw.toleaf.1", b"from-b")
    await cl.flush()
    await cb.flush()
    assert await collect(on_b) == ["gw.tob.1:from-leaf:", "gw.tob.2:with-headers:X-K=v"]
    assert await collect(on_leaf) == ["gw.toleaf.1:from-b:"]
    assert (await cl.request("svc.b", b"x", timeout=5)).data == b"b:x"
    assert (await cb.request("svc.leaf", b"y", timeout=5)).data == b"leaf:y"


async def test_queue_group_prefers_the_leaf_to_the_other_cluster(
    world: tuple[Client, Client, Client],
) -> None:
    ca, cb, cl = world
    counts: Counter[str] = Counter()

    def member(side: str) -> Any:
        async def on_msg(msg: Any) -> None:
            counts[side] += 1

        return on_msg

    on_leaf = await cl.subscribe("work", queue="q", cb=member("leaf"))
    await cb.subscribe("work", queue="q", cb=member("b"))
    await wait_interest(cl, [ca])
    await wait_interest(cb, [ca])
    for _ in range(QUEUE_MSGS):
        await ca.publish("work", b"w")
    await ca.flush()
    await _wait_total(counts, QUEUE_MSGS)
    assert counts == {"leaf": QUEUE_MSGS}
    await on_leaf.unsubscribe()
    await wait_interest(cl, [ca])
    for _ in range(QUEUE_MSGS):
        await ca.publish("work", b"w")
    await ca.flush()
    await _wait_total(counts, 2 * QUEUE_MSGS)
    assert counts == {"leaf": QUEUE_MSGS, "b": QUEUE_MSGS}


async def _wait_total(counts: Counter[str], total: int, quiet: float = 0.3) -> None:
    """Until `total` messages arrived, then `quiet` seconds more (a late duplicate shows)."""
    deadline = asyncio.get_running_loop().time() + 10
    while sum(counts.values()) < total:
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"only {dict(counts)} of {total}")
        await asyncio.sleep(0.05)
    await asyncio.sleep(quiet)
