"""Three-node clusters of every mix (pynatsd and nats-server), the same scenarios as three
nats-server nodes, the same observations: pub/sub between every pair of nodes, wildcards, a
queue group served once cluster-wide, request/reply across nodes, UNSUB withdrawing interest
(no responders), and every node's client URL in `connect_urls`."""

from __future__ import annotations

import asyncio
from typing import Any

import nats
import pytest

from cluster.nodes import Node, connect, eventually, plan_nodes, wait_all_routed, wait_routed


async def _observe(nodes: list[Node], keep: bool = False) -> dict[str, Any]:
    clients = [await connect(node) for node in nodes]
    seen: dict[str, Any] = {}
    try:
        # Interest has crossed every pair (gossip completed the mesh).
        await wait_all_routed(clients, timeout=15)
        # A client connecting now is told every node's client URL, its own node's first.
        fresh = [await connect(node) for node in nodes]
        seen["connect_urls"] = [
            (c._server_info.get("connect_urls") or [None])[0] == n.url[7:]
            and sorted(c._server_info.get("connect_urls") or []) == sorted(m.url[7:] for m in nodes)
            for c, n in zip(fresh, nodes, strict=True)
        ]
        for c in fresh:
            await c.close()

        # Pub/sub between every pair, through a wildcard subscription.
        got: list[list[str]] = [[] for _ in clients]
        subs = []
        for i, c in enumerate(clients):

            async def on_msg(msg: Any, i: int = i) -> None:
                got[i].append(f"{msg.subject}:{msg.data.decode()}")

            subs.append(await c.subscribe(f"pair.{i}.>", cb=on_msg))
            await c.flush()
        await eventually(lambda: _probe(clients, got))
        for i, c in enumerate(clients):
            for j in range(len(clients)):
                await c.publish(f"pair.{j}.from.{i}", b"x")
            await c.flush()
        await eventually(lambda: _settled(got, len(clients)))
        seen["pairs"] = [sorted(m for m in g if "probe" not in m) for g in got]
        for sub in subs:
            await sub.unsubscribe()

        # A queue group with a member on every node: each message once, cluster-wide.
        counts = [0] * len(clients)
        qsubs = []
        for i, c in enumerate(clients):

            async def on_q(msg: Any, i: int = i) -> None:
                counts[i] += 1

            qsubs.append(await c.subscribe("work", queue="workers", cb=on_q))
            await c.flush()
        await asyncio.sleep(0.5)  # the RS+ with weights reach every node
        for _ in range(90):
            await clients[0].publish("work", b"job")
        await clients[0].flush()
        await eventually(lambda: _total(counts, 90), timeout=5)
        await asyncio.sleep(0.3)
        seen["queue_total"] = sum(counts)
        seen["queue_spread"] = all(n > 0 for n in counts)

        # Request/reply from every node to a service on the last one.
        async def service(msg: Any) -> None:
            await msg.respond(b"answer:" + msg.data)

        svc = await clients[-1].subscribe("svc.echo", cb=service)
        await clients[-1].flush()
        await asyncio.sleep(0.5)
        replies = []
        for c in clients:
            reply = await c.request("svc.echo", b"q", timeout=5)
            replies.append(reply.data.decode())
        seen["replies"] = replies

        # UNSUB withdraws the interest everywhere: requests find no responders.
        await svc.unsubscribe()
        await clients[-1].flush()

        async def gone() -> bool:
            try:
                await clients[0].request("svc.echo", b"q", timeout=1)
            except nats.errors.NoRespondersError:
                return True
            except nats.errors.TimeoutError:
                return False  # the RS- has not reached the requester's node yet
            return False

        await eventually(gone)
        seen["after_unsub"] = "no responders"
    finally:
        if not keep:
            for c in clients:
                await c.close()
    return seen


async def _probe(clients: list[nats.NATS], got: list[list[str]]) -> bool:
    """Probes from every node to every subscriber, until each has one from every node."""
    n = len(clients)
    for j, c in enumerate(clients):
        for i in range(n):
            await c.publish(f"pair.{i}.probe.{j}", b"p")
        await c.flush()
    await asyncio.sleep(0.1)
    return all(
        all(any(m.startswith(f"pair.{i}.probe.{j}:") for m in got[i]) for j in range(n))
        for i in range(n)
    )


def _settled(got: list[list[str]], n: int) -> bool:
    return all(len([m for m in g if "probe" not in m]) >= n for g in got)


def _total(counts: list[int], n: int) -> bool:
    return sum(counts) >= n


async def _run(kinds: str) -> dict[str, Any]:
    nodes = plan_nodes(kinds)
    try:
        for node in nodes:
            await node.start()
        return await _observe(nodes)
    finally:
        for node in reversed(nodes):
            await node.stop()


EXPECTED = None


@pytest.mark.parametrize("kinds", ["ggg", "ppp", "pgg", "ppg", "gpp"])
async def test_three_node_cluster(kinds: str) -> None:
    seen = await _run(kinds)
    assert seen["connect_urls"] == [True, True, True]
    assert seen["pairs"] == [sorted(f"pair.{j}.from.{i}:x" for i in range(3)) for j in range(3)]
    assert seen["queue_total"] == 90
    assert seen["queue_spread"]
    assert seen["replies"] == ["answer:q"] * 3
    assert seen["after_unsub"] == "no responders"


async def _auto_unsubscribe(kinds: str) -> tuple[int, str]:
    """A subscriber on the first node auto-unsubscribes after 2 messages; the second node
    publishes 5, then asks: the interest has gone everywhere."""
    nodes = plan_nodes(kinds, full_mesh=True)
    try:
        for node in nodes:
            await node.start()
        sub_client, pub_client = await connect(nodes[0]), await connect(nodes[1])
        await wait_routed(pub_client, sub_client)
        sub = await sub_client.subscribe("auto.unsub")
        await sub.unsubscribe(limit=2)  # UNSUB <sid> 2: the server unsubscribes after two
        await sub_client.flush()
        await asyncio.sleep(0.5)
        for _ in range(5):
            await pub_client.publish("auto.unsub", b"m")
        await pub_client.flush()
        await asyncio.sleep(0.5)
        received = sub.delivered

        await asyncio.sleep(0.5)
        try:
            await pub_client.request("auto.unsub", b"", timeout=2)
            outcome = "answered"
        except nats.errors.NoRespondersError:
            outcome = "no responders"
        except nats.errors.TimeoutError:
            outcome = "timeout"
        await sub_client.close()
        await pub_client.close()
        return received, outcome
    finally:
        for node in reversed(nodes):
            await node.stop()


async def test_auto_unsubscribe_across_nodes() -> None:
    go = await _auto_unsubscribe("gg")
    assert go == (2, "no responders")
    for kinds in ("pg", "gp", "pp"):
        assert await _auto_unsubscribe(kinds) == go
