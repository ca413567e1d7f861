"""Routes under faults: a peer killed with SIGKILL and restarted (its interest replayed, traffic
flows again), a pynatsd node restarted, and simultaneous start-up without duplicate routes."""

from __future__ import annotations

import asyncio

from cluster.nodes import Node, connect, eventually, plan_nodes, wait_all_routed, wait_routed


def _cluster(node: Node):  # type: ignore[no-untyped-def]
    assert node.server is not None
    return node.server.parts["cluster"]


async def test_simultaneous_start_leaves_one_route_per_peer() -> None:
    nodes = plan_nodes("ppp", full_mesh=True)
    try:
        await asyncio.gather(*(node.start() for node in nodes))

        def settled() -> bool:
            # Two peers each, reached as nats-server reaches them: a pool of three
            # connections and one pinned to $SYS.
            return all(
                len(_cluster(n).peers) == 2
                and len(_cluster(n).connections()) == 8
                and len(_cluster(n).connecting) == 8
                for n in nodes
            )

        await eventually(settled, timeout=10)
        await asyncio.sleep(1.5)  # a retry round: still one connection per peer
        assert settled()
        clients = [await connect(n) for n in nodes]
        await wait_all_routed(clients)
        for c in clients:
            await c.close()
    finally:
        for node in nodes:
            await node.stop()


async def test_go_peer_killed_and_restarted() -> None:
    py, go = plan_nodes("pg", full_mesh=True)
    try:
        await py.start()
        await go.start()
        cp, cg = await connect(py), await connect(go)
        await wait_routed(cp, cg)
        await wait_routed(cg, cp)
        await cg.close()

        go.kill()
        await eventually(lambda: not _cluster(py).routes, timeout=5)

        await go.start()  # same ports: the explicit route is dialed again
        cg = await connect(go)
        await wait_routed(cp, cg, timeout=15)
        await wait_routed(cg, cp, timeout=15)
        # The restarted node's interest was replayed to us, ours to it.
        got: list[bytes] = []

        async def on_msg(msg) -> None:  # type: ignore[no-untyped-def]
            got.append(msg.data)

        await cg.subscribe("after.restart", cb=on_msg)
        await cg.flush()
        await eventually(lambda: _has_interest(py, "after.restart"))
        await cp.publish("after.restart", b"again")
        await cp.flush()
        await eventually(lambda: got == [b"again"])
        await cp.close()
        await cg.close()
    finally:
        await go.stop()
        await py.stop()


async def test_pynatsd_node_restarted() -> None:
    a, b = plan_nodes("pp", full_mesh=True)
    try:
        await a.start()
        await b.start()
        ca = await connect(a)
        sub = await ca.subscribe("svc")
        await ca.flush()
        await b.stop()
        await eventually(lambda: not _cluster(a).routes, timeout=5)
        await b.start()
        cb = await connect(b)
        await eventually(lambda: _has_interest(b, "svc"), timeout=10)
        await cb.publish("svc", b"x")
        await cb.flush()
        msg = await sub.next_msg(timeout=5)
        assert msg.data == b"x"
        await ca.close()
        await cb.close()
    finally:
        await b.stop()
        await a.stop()


def _has_interest(node: Node, subject: str) -> bool:
    assert node.server is not None
    result = node.server.global_account.sublist.match(subject)
    return any(sub.remote for sub in result.psubs)


async def test_simultaneous_start_with_nats_server() -> None:
    """pynatsd and two nats-server nodes dialing each other at once: one route per pair of
    pynatsd and Go node (Go's own pool between the Go nodes), traffic between every pair."""
    nodes = plan_nodes("pgg", full_mesh=True)
    try:
        await asyncio.gather(*(node.start() for node in nodes))
        py = nodes[0]
        await eventually(lambda: len(_cluster(py).connections()) == 8, timeout=10)
        await asyncio.sleep(1.5)
        assert len(_cluster(py).peers) == 2
        assert len(_cluster(py).connections()) == 8  # a pool of 3 and $SYS, per Go peer
        assert len(_cluster(py).connecting) == 8
        clients = [await connect(n) for n in nodes]
        await wait_all_routed(clients)
        for c in clients:
            await c.close()
    finally:
        for node in nodes:
            await node.stop()


async def test_without_a_pool_go_keeps_one_connection() -> None:
    """`pool_size: -1`: no route_pool_size in INFO, one connection per peer carrying every
    account; nats-server adapts (and refuses its own $SYS-pinned dial itself)."""
    py, go1, go2 = plan_nodes("pgg", full_mesh=True)
    py.pool_size = -1
    try:
        for node in (py, go1, go2):
            await node.start()
        await eventually(lambda: len(_cluster(py).connections()) == 2, timeout=10)
        await asyncio.sleep(1.5)
        assert len(_cluster(py).connections()) == 2
        clients = [await connect(n) for n in (py, go1, go2)]
        await wait_all_routed(clients)
        for c in clients:
            await c.close()
    finally:
        for node in (go2, go1, py):
            await node.stop()
