"""Forwarding rules between pynatsd nodes: one RMSG per peer however many of its subscriptions
match, one hop, queue groups picked cluster-wide by weight, header messages."""

from __future__ import annotations

import asyncio
from typing import Any

import nats

from cluster.nodes import Node, connect, eventually, plan_nodes, wait_routed


def _route_to(node: Node, peer: Node):  # type: ignore[no-untyped-def]
    assert node.server is not None and peer.server is not None
    return node.server.parts["cluster"].routes[peer.server.server_id]


async def _interest(node: Node, subject: str, count: int) -> None:
    assert node.server is not None
    sublist = node.server.global_account.sublist

    def enough() -> bool:
        return sum(1 for s in sublist.match(subject).psubs if s.remote) >= count

    await eventually(enough)


async def test_one_message_per_peer_and_one_hop() -> None:
    a, b, c = plan_nodes("ppp", full_mesh=True)
    try:
        for n in (a, b, c):
            await n.start()
        ca, cb, cc = await connect(a), await connect(b), await connect(c)
        await wait_routed(ca, cb)
        await wait_routed(ca, cc)
        got: list[str] = []

        async def on_msg(msg: Any) -> None:
            got.append(msg.subject)

        for subject in ("foo.*", "foo.bar", ">"):
            await cb.subscribe(subject, cb=on_msg)
        await cb.flush()
        await _interest(a, "foo.bar", 2)
        before = _route_to(a, b).stats.out_msgs
        for _ in range(3):  # planned after the first
            await ca.publish("foo.bar", b"x")
        await ca.flush()
        await eventually(lambda: len(got) == 9)
        await asyncio.sleep(0.2)
        assert len(got) == 9  # every subscription of b's client, three times
        assert _route_to(a, b).stats.out_msgs - before == 3  # one RMSG per message
        # One hop: b never passes a's messages on to c.
        assert _route_to(b, c).stats.out_msgs == 0
        for client in (ca, cb, cc):
            await client.close()
    finally:
        for n in (c, b, a):
            await n.stop()


async def test_queue_groups_weighted_cluster_wide() -> None:
    a, b = plan_nodes("pp", full_mesh=True)
    try:
        await a.start()
        await b.start()
        ca, cb = await connect(a), await connect(b)
        await wait_routed(ca, cb)
        counts = {"a": 0, "b": 0}

        def counter(name: str) -> Any:
            async def on_msg(msg: Any) -> None:
                counts[name] += 1

            return on_msg

        await ca.subscribe("jobs", queue="w", cb=counter("a"))
        for _ in range(3):
            await cb.subscribe("jobs", queue="w", cb=counter("b"))
        await ca.flush()
        await cb.flush()
        assert a.server is not None

        def weighted() -> bool:
            group = a.server.global_account.sublist.match("jobs").qsubs  # type: ignore[union-attr]
            return any(s.remote and s.weight == 3 for g in group for s in g)

        await eventually(weighted)
        for _ in range(400):
            await ca.publish("jobs", b"j")
        await ca.flush()
        await eventually(lambda: counts["a"] + counts["b"] == 400)
        await asyncio.sleep(0.2)
        assert counts["a"] + counts["b"] == 400  # once cluster-wide
        # Each member about equally likely: b holds three of four (about 300).
        assert 230 < counts["b"] < 370
        for client in (ca, cb):
            await client.close()
    finally:
        await b.stop()
        await a.stop()


async def test_headers_cross_the_route() -> None:
    a, b = plan_nodes("pp", full_mesh=True)
    try:
        await a.start()
        await b.start()
        ca, cb = await connect(a), await connect(b)
        await wait_routed(ca, cb)
        sub = await cb.subscribe("h.subject")
        await cb.flush()
        await _interest(a, "h.subject", 1)
        await ca.publish("h.subject", b"body", headers={"K": "v"})
        await ca.flush()
        msg = await sub.next_msg(timeout=5)
        assert msg.data == b"body"
        assert msg.headers == {"K": "v"}
        # A requester with no responders anywhere gets the 503 from its own node.
        try:
            await ca.request("nobody.home", b"", timeout=2)
        except nats.errors.NoRespondersError:
            pass
        else:
            raise AssertionError("expected no responders")
        for client in (ca, cb):
            await client.close()
    finally:
        await b.stop()
        await a.stop()
