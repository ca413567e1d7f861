"""A configuration reload that changes the explicit routes: added routes are dialed, removed
ones closed and not dialed again (nats-server's routesOption.Apply; the reload rules and log
lines are compared with nats-server in tests/config/test_cluster_reload_vs_nats_server.py)."""

from __future__ import annotations

import asyncio

from cluster.nodes import Node, connect, eventually, plan_nodes, wait_routed


def _cluster(node: Node):  # type: ignore[no-untyped-def]
    assert node.server is not None
    return node.server.parts["cluster"]


async def test_routes_added_and_removed_by_reload() -> None:
    first, second = plan_nodes("pp")
    first.routes, second.routes = [], []
    try:
        await asyncio.gather(first.start(), second.start())
        assert not _cluster(first).peers and not _cluster(second).peers

        _cluster(first).reload_routes([f"nats://127.0.0.1:{second.cluster_port}"])
        await eventually(lambda: len(_cluster(second).peers) == 1, timeout=10)
        a, b = await connect(first), await connect(second)
        await wait_routed(a, b)

        _cluster(first).reload_routes([])
        await eventually(
            lambda: not _cluster(first).peers and not _cluster(second).peers, timeout=10
        )
        await asyncio.sleep(1.5)  # past the retry delay: the removed route stays down
        assert not _cluster(first).peers and not _cluster(second).peers
        await a.close()
        await b.close()
    finally:
        await asyncio.gather(first.stop(), second.stop())
