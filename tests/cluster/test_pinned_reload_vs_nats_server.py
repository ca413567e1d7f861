"""Pinned accounts added and removed by a configuration reload, side by side with nats-server:
two nodes get `cluster { accounts: [A] }` by SIGHUP, one after the other, and each then keeps a
connection of account A's own to the other (/routez `account: "A"`) while A's clients still
reach each other across; the list emptied by another reload closes those connections and A's
messages go back to the pool."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import nats
import pytest

from support.cluster import GO, PY, ProcessCluster, reaches

ACCOUNTS = """accounts {
  A: { users: [{ user: a, password: a }] }
  B: { users: [{ user: b, password: b }] }
}
no_auth_user: b
"""
PIN_A = "  accounts: [A]\n"
RELOAD_TIMEOUT = 15.0


def _reload(cluster: ProcessCluster, cluster_config: str) -> None:
    """Every node's cluster block gets `cluster_config`, one node after the other."""
    for index in range(len(cluster.nodes)):
        cluster.reload(index, cluster_config)


def _pinned(cluster: ProcessCluster) -> list[int]:
    """Per node, its connections pinned to account A."""
    return [
        sum(1 for r in cluster.routez(i)["routes"] if r.get("account") == "A")
        for i in range(len(cluster.nodes))
    ]


def _wait_pinned(cluster: ProcessCluster, want: int) -> list[int]:
    deadline = time.monotonic() + RELOAD_TIMEOUT
    while (seen := _pinned(cluster)) != [want] * len(cluster.nodes):
        assert time.monotonic() < deadline, f"{seen}{cluster.describe()}"
        time.sleep(0.1)
    return seen


async def _a_crosses(cluster: ProcessCluster) -> bool:
    """A client of account A on each node reaches one on the other, both ways."""
    clients = [await nats.connect(n.url, user="a", password="a") for n in cluster.nodes]
    try:
        return await reaches(clients[0], clients[1], "a.cross") and await reaches(
            clients[1], clients[0], "a.cross"
        )
    finally:
        for client in clients:
            await client.close()


def _observe(tmp_path: Path, kinds: tuple[str, str]) -> list[object]:
    directory = tmp_path / "-".join(kinds)
    directory.mkdir()
    seen: list[object] = []
    with ProcessCluster(kinds, directory, extra_config=ACCOUNTS) as cluster:
        cluster.start()
        seen.append(_pinned(cluster))
        _reload(cluster, PIN_A)
        seen.append(_wait_pinned(cluster, 1))
        seen.append(asyncio.run(_a_crosses(cluster)))
        _reload(cluster, "")
        seen.append(_wait_pinned(cluster, 0))
        seen.append(asyncio.run(_a_crosses(cluster)))
    return seen


@pytest.mark.parametrize("kinds", [(PY, GO), (GO, PY), (PY, PY)], ids=["py-go", "go-py", "py-py"])
def test_pinned_accounts_follow_the_reload(tmp_path: Path, kinds: tuple[str, str]) -> None:
    go = _observe(tmp_path, (GO, GO))
    assert go == [[0, 0], [1, 1], True, [0, 0], True]
    assert _observe(tmp_path, kinds) == go
