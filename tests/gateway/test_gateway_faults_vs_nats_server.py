"""A gateway survives the remote cluster's server going away, side by side with nats-server:
B's server is restarted, the link comes back (dialed again by whichever side names the other),
the interest is announced again and messages cross both ways as before."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import nats
import pytest

from cluster.nodes import eventually
from support.cluster import GO, PY, wait_interest
from support.natsserver import nats_server_binary
from support.supercluster import SuperCluster

pytestmark = pytest.mark.skipif(nats_server_binary() is None, reason="nats-server not found")


async def _across(a_url: str, b_url: str) -> list[str]:
    a = await nats.connect(a_url, allow_reconnect=False)
    b = await nats.connect(b_url, allow_reconnect=False)
    got: list[str] = []
    try:

        async def on_msg(msg: Any) -> None:
            got.append(f"{msg.subject}:{msg.data.decode()}")

        await a.subscribe("to.a", cb=on_msg)
        await b.subscribe("to.b", cb=on_msg)
        await wait_interest(a, [b])
        await wait_interest(b, [a])
        await a.publish("to.b", b"x")
        await b.publish("to.a", b"y")
        await eventually(lambda: len(got) == 2)
    finally:
        await a.close()
        await b.close()
    return sorted(got)


async def _restart(tmp_path: Path, kinds: dict[str, list[str]], dials: dict[str, list[str]]) -> Any:
    directory = tmp_path / ("-".join(k for ks in kinds.values() for k in ks) + str(dials))
    directory.mkdir()
    with SuperCluster(directory, kinds, dials=dials) as sc:
        await asyncio.to_thread(sc.start)
        a, b = sc.cluster("A")[0], sc.cluster("B")[0]
        before = await _across(a.url, b.url)
        await asyncio.to_thread(sc.restart, b)
        await asyncio.to_thread(sc.wait_up)
        after = await _across(a.url, b.url)
    return before, after


@pytest.mark.parametrize("dials", [{"A": ["B"]}, {"B": ["A"]}], ids=["A dials", "B dials"])
async def test_remote_server_restarts(tmp_path: Path, dials: dict[str, list[str]]) -> None:
    expected = await _restart(tmp_path, {"A": [GO], "B": [GO]}, dials)
    assert await _restart(tmp_path, {"A": [PY], "B": [GO]}, dials) == expected
    assert expected[0] == expected[1] == ["to.a:y", "to.b:x"]
