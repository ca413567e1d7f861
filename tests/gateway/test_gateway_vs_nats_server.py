"""Two clusters joined by a gateway, one of them pynatsd, side by side with the same topology of
nats-server only: the same scenario, the same observations. Both dialling orders (pynatsd's
gateway block names nats-server's cluster, or the reverse, the other side dialling back
implicitly), both configured, pynatsd to pynatsd, and two-server clusters (pynatsd only, and
mixed) behind the gateway.

What the clients observe: pub/sub across (with headers), nothing for a subject nobody
subscribes to, a queue group served by a local member first and by the other cluster's once
the local one leaves, request/reply across in both directions (the responder sees the
requester's own inbox, not the `_GR_.` routing), no responders across, and each server's
`/gatewayz` outline.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import nats
import nats.errors
import pytest
from nats.aio.client import Client

from cluster.nodes import eventually
from support.cluster import GO, PY, wait_interest
from support.natsserver import nats_server_binary
from support.supercluster import SuperCluster

pytestmark = pytest.mark.skipif(nats_server_binary() is None, reason="nats-server not found")


async def _connect(url: str) -> Client:
    return await nats.connect(url, allow_reconnect=False)


async def _interest_both_ways(a: Client, b: Client) -> None:
    await wait_interest(a, [b])
    await wait_interest(b, [a])


async def _pubsub(a: Client, b: Client) -> dict[str, Any]:
    got: dict[str, list[Any]] = {"a": [], "b": []}

    async def on_a(msg: Any) -> None:
        got["a"].append((msg.subject, msg.data.decode(), dict(msg.headers or {})))

    async def on_b(msg: Any) -> None:
        got["b"].append((msg.subject, msg.data.decode(), dict(msg.headers or {})))

    sub_a = await a.subscribe("to.a.>", cb=on_a)
    sub_b = await b.subscribe("to.b.>", cb=on_b)
    await _interest_both_ways(a, b)
    for i in range(3):
        await b.publish(f"to.a.{i}", f"from-b-{i}".encode())
        await a.publish(f"to.b.{i}", f"from-a-{i}".encode())
    await b.publish("to.a.h", b"with-headers", headers={"X-K": "v"})
    await a.publish("nobody.listens", b"x")
    await a.flush()
    await b.flush()
    await eventually(lambda: len(got["a"]) == 4 and len(got["b"]) == 3)
    # A late duplicate would show up here.
    await asyncio.sleep(0.2)
    await sub_a.unsubscribe()
    await sub_b.unsubscribe()
    return {"a": sorted(got["a"]), "b": sorted(got["b"])}


async def _queues(a: Client, b: Client) -> dict[str, Any]:
    counts = {"a": 0, "b": 0}

    def member(side: str) -> Any:
        async def on_msg(msg: Any) -> None:
            counts[side] += 1

        return on_msg

    qa = await a.subscribe("work", queue="workers", cb=member("a"))
    qb = await b.subscribe("work", queue="workers", cb=member("b"))
    await _interest_both_ways(a, b)
    seen: dict[str, Any] = {}
    for label, publisher in (("from_a", a), ("from_b", b)):
        before = dict(counts)
        for _ in range(20):
            await publisher.publish("work", b"job")
        await publisher.flush()
        await eventually(lambda before=before: sum(counts.values()) - sum(before.values()) == 20)
        seen[label] = {k: counts[k] - before[k] for k in counts}
    # The local member leaves: the other cluster's member takes the group's messages.
    await qa.unsubscribe()
    await _interest_both_ways(a, b)
    before = dict(counts)
    for _ in range(20):
        await a.publish("work", b"job")
    await a.flush()
    await eventually(lambda: sum(counts.values()) - sum(before.values()) == 20)
    await asyncio.sleep(0.2)
    seen["from_a_after_leave"] = {k: counts[k] - before[k] for k in counts}
    await qb.unsubscribe()
    return seen


async def _requests(a: Client, b: Client) -> dict[str, Any]:
    async def service(msg: Any) -> None:
        # What the responder sees as the reply: the requester's inbox, never `_GR_.`.
        await msg.respond(f"{msg.data.decode()}|{msg.reply.split('.')[0]}".encode())

    services = [await a.subscribe("svc.a", cb=service), await b.subscribe("svc.b", cb=service)]
    await _interest_both_ways(a, b)
    seen: dict[str, Any] = {}
    # Fresh requesters: their inbox subscription is made with the first request, so the reply
    # may race the inbox's interest across (what `_GR_.` reply mapping is for).
    for label, url, subject in (
        ("a_to_b", a.connected_url, "svc.b"),
        ("b_to_a", b.connected_url, "svc.a"),
    ):
        assert url is not None
        nc = await _connect(f"nats://{url.netloc}")
        try:
            answers = [
                (await nc.request(subject, f"q{i}".encode(), timeout=5)).data.decode()
                for i in range(3)
            ]
        finally:
            await nc.close()
        seen[label] = answers
    try:
        await a.request("svc.nobody", b"q", timeout=2)
        seen["no_responders"] = "answered"
    except nats.errors.NoRespondersError:
        seen["no_responders"] = "no responders"
    except nats.errors.TimeoutError:
        seen["no_responders"] = "timeout"
    for sub in services:
        await sub.unsubscribe()
    return seen


def _gatewayz_outline(node: Any) -> dict[str, Any]:
    gatewayz = node.http("/gatewayz?accs=1")
    outbound = gatewayz["outbound_gateways"]
    inbound = gatewayz["inbound_gateways"]
    return {
        "name": gatewayz.get("name"),
        "outbound": {
            name: {
                "configured": gw["configured"],
                "kind": gw["connection"]["kind"],
                "modes": sorted(
                    {a["interest_mode"] for a in gw.get("accounts", []) if a["name"] == "$G"}
                ),
            }
            for name, gw in outbound.items()
        },
        "inbound": {name: [gw["configured"] for gw in gws] for name, gws in inbound.items()},
    }


def _gatewayz(sc: SuperCluster) -> dict[str, Any]:
    """Each server's outline; inbound connections summed per cluster (a remote dials one of
    the cluster's URLs at random)."""
    outlines = {n.name: _gatewayz_outline(n) for n in sc.nodes}
    inbound: dict[str, list[bool]] = {}
    for node in sc.nodes:
        for name, flags in outlines[node.name].pop("inbound").items():
            inbound.setdefault(f"{name}->{node.cluster}", []).extend(flags)
    return {"servers": outlines, "inbound": {k: sorted(v) for k, v in inbound.items()}}


async def _observe(sc: SuperCluster) -> dict[str, Any]:
    a = await _connect(sc.cluster("A")[0].url)
    b = await _connect(sc.cluster("B")[-1].url)
    # With a cluster behind the gateway, also from its other server: its own outbound
    # gateway, and interest and replies that cross a route too.
    a2 = await _connect(sc.cluster("A")[-1].url)
    try:
        seen = {
            "pubsub": await _pubsub(a, b),
            "queues": await _queues(a, b),
            "requests": await _requests(a, b),
        }
        if len(sc.cluster("A")) > 1:
            seen["second"] = {
                "pubsub": await _pubsub(a2, b),
                "requests": await _requests(a2, b),
                "queues": await _queues(a2, b),
            }
    finally:
        for nc in (a, b, a2):
            await nc.close()
    seen["gatewayz"] = _gatewayz(sc)
    return seen


async def _run(
    tmp_path: Path, clusters: dict[str, list[str]], dials: dict[str, list[str]]
) -> dict[str, Any]:
    directory = tmp_path / "-".join(k for kinds in clusters.values() for k in kinds)
    directory.mkdir(exist_ok=True)
    with SuperCluster(directory, clusters, dials=dials) as sc:
        await asyncio.to_thread(sc.start)
        return await _observe(sc)


async def _side_by_side(
    tmp_path: Path, kinds: dict[str, list[str]], dials: dict[str, list[str]]
) -> None:
    expected = await _run(tmp_path, {name: [GO] * len(k) for name, k in kinds.items()}, dials)
    got = await _run(tmp_path, kinds, dials)
    assert got == expected
    # The scenario itself, as nats-server behaves.
    assert expected["queues"]["from_a"] == {"a": 20, "b": 0}
    assert expected["queues"]["from_a_after_leave"] == {"a": 0, "b": 20}
    assert expected["requests"]["a_to_b"] == ["q0|_INBOX", "q1|_INBOX", "q2|_INBOX"]


async def test_pynatsd_dials_nats_server(tmp_path: Path) -> None:
    await _side_by_side(tmp_path, {"A": [PY], "B": [GO]}, {"A": ["B"]})


async def test_nats_server_dials_pynatsd(tmp_path: Path) -> None:
    await _side_by_side(tmp_path, {"A": [PY], "B": [GO]}, {"B": ["A"]})


async def test_both_configured(tmp_path: Path) -> None:
    await _side_by_side(tmp_path, {"A": [GO], "B": [PY]}, {"A": ["B"], "B": ["A"]})


async def test_pynatsd_to_pynatsd(tmp_path: Path) -> None:
    await _side_by_side(tmp_path, {"A": [PY], "B": [PY]}, {"A": ["B"]})


async def test_pynatsd_cluster_dials_nats_server(tmp_path: Path) -> None:
    await _side_by_side(tmp_path, {"A": [PY, PY], "B": [GO]}, {"A": ["B"]})


async def test_nats_server_dials_a_mixed_cluster(tmp_path: Path) -> None:
    await _side_by_side(tmp_path, {"A": [GO, PY], "B": [GO]}, {"B": ["A"]})


async def _three_clusters(tmp_path: Path, kinds: dict[str, list[str]]) -> dict[str, Any]:
    """A and C each name only B: B gossips each to the other, so A and C dial each other
    (implicit gateways) and a message from A reaches C directly."""
    directory = tmp_path / "-".join(k for ks in kinds.values() for k in ks)
    directory.mkdir()
    with SuperCluster(directory, kinds, dials={"A": ["B"], "C": ["B"]}) as sc:
        await asyncio.to_thread(sc.start)  # every server has a gateway to both others
        a = await _connect(sc.cluster("A")[0].url)
        c = await _connect(sc.cluster("C")[0].url)
        try:
            got: list[str] = []

            async def on_msg(msg: Any) -> None:
                got.append(msg.data.decode())

            await c.subscribe("to.c", cb=on_msg)
            await wait_interest(c, [a])
            await a.publish("to.c", b"from-a")
            await a.flush()
            await eventually(lambda: got == ["from-a"])
            answer = {"got": list(got)}
        finally:
            await a.close()
            await c.close()
        answer["gatewayz"] = _gatewayz(sc)
    return answer


async def test_three_clusters_mesh_by_gossip(tmp_path: Path) -> None:
    expected = await _three_clusters(tmp_path, {"A": [GO], "B": [GO], "C": [GO]})
    assert await _three_clusters(tmp_path, {"A": [PY], "B": [GO], "C": [PY]}) == expected
