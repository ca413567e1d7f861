"""Mixed clusters: pynatsd and nats-server nodes in one cluster, as nats-py clients see it.

Every scenario runs on four topologies of three nodes: three nats-server nodes (the reference),
three pynatsd nodes, one pynatsd with two nats-server, and two pynatsd with one nats-server.
Each scenario reduces what its clients observe to plain data (node names, not ports) and
asserts it equals the expectation written in the test; the reference topology runs first and
its observation is kept, and every other topology must observe exactly the same.

The topologies share one cluster each (module scope, started all at once, full-mesh routes);
the scenarios use their own subjects so they do not see each other's traffic. The SIGKILL
scenario runs last on that cluster. Simultaneous start-up with every node listing every node
(itself included) and a single-seed cluster formed by gossip get clusters of their own.

Interest is never waited for with sleeps: `wait_interest` sends a probe through the routes,
which arrives only after every earlier SUB/UNSUB of the same server.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import nats
import nats.errors
import pytest
from nats.aio.client import Client

from support.cluster import (
    GO,
    GO_ROUTES_PER_PEER,
    PY,
    ROUTEZ_KINDS,
    ProcessCluster,
    wait_interest,
)
from support.natsserver import require_nats_server

REFERENCE = (GO, GO, GO)
TOPOLOGIES = [
    pytest.param(REFERENCE, id="3nats"),
    pytest.param((PY, PY, PY), id="3py"),
    pytest.param((PY, GO, GO), id="1py2nats"),
    pytest.param((PY, PY, GO), id="2py1nats"),
]
# Observations of the reference topology, by scenario, for the other topologies to match.
_reference: dict[str, Any] = {}


def check(name: str, kinds: tuple[str, ...], observed: Any, expected: Any) -> None:
    """`observed` must be `expected`; on the reference it is also kept, and on the other
    topologies it must equal what the reference observed."""
    if kinds == REFERENCE:
        _reference[name] = observed
    elif name in _reference:
        assert observed == _reference[name], f"{name}: differs from three nats-server nodes"
    assert observed == expected


@pytest.fixture(scope="module", params=TOPOLOGIES)
def cluster(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ProcessCluster]:
    require_nats_server()
    kinds: tuple[str, ...] = request.param
    with ProcessCluster(kinds, tmp_path_factory.mktemp("cluster")) as c:
        c.start()
        yield c


class Clients:
    """nats-py connections to the nodes of a cluster, closed at the end of the test."""

    def __init__(self, cluster: ProcessCluster) -> None:
        self.cluster = cluster
        self.opened: list[Client] = []

    async def connect(self, index: int, **options: Any) -> Client:
        options.setdefault("allow_reconnect", False)
        nc = await nats.connect(self.cluster.nodes[index].url, **options)
        self.opened.append(nc)
        return nc

    async def one_per_node(self) -> list[Client]:
        return [await self.connect(i) for i in range(len(self.cluster.nodes))]

    async def close(self) -> None:
        for nc in self.opened:
            if not nc.is_closed:
                await nc.close()


@pytest.fixture
async def clients(cluster: ProcessCluster) -> AsyncIterator[Clients]:
    c = Clients(cluster)
    try:
        yield c
    finally:
        await c.close()


def kinds_of(cluster: ProcessCluster) -> tuple[str, ...]:
    return tuple(n.kind for n in cluster.nodes)


async def drain(sub: Any, quiet: float = 0.3) -> list[Any]:
    """Every message `sub` receives until `quiet` seconds pass without one."""
    out = []
    while True:
        try:
            out.append(await sub.next_msg(timeout=quiet))
        except nats.errors.TimeoutError:
            return out


# -- scenarios on the shared cluster ---------------------------------------------------------------


async def test_pubsub_between_every_pair(cluster: ProcessCluster, clients: Clients) -> None:
    ncs = await clients.one_per_node()
    names = [n.name for n in cluster.nodes]
    subs = [await nc.subscribe(f"pair.to.{names[j]}") for j, nc in enumerate(ncs)]
    for sub_nc in ncs:
        await wait_interest(sub_nc, ncs)
    for i, nc in enumerate(ncs):
        for j in range(len(ncs)):
            await nc.publish(f"pair.to.{names[j]}", f"from {names[i]}".encode())
            await nc.publish(
                f"pair.to.{names[j]}", b"h", headers={"From": names[i], "X-Multi": "a b"}
            )
        await nc.flush()
    observed = {}
    for j, sub in enumerate(subs):
        msgs = await drain(sub)
        observed[names[j]] = sorted(
            (m.data.decode(), sorted((m.headers or {}).items())) for m in msgs
        )
    expected = {
        to: sorted(
            [(f"from {frm}", []) for frm in names]
            + [("h", [("From", frm), ("X-Multi", "a b")]) for frm in names]
        )
        for to in names
    }
    check("pubsub", kinds_of(cluster), observed, expected)


async def test_wildcards(cluster: ProcessCluster, clients: Clients) -> None:
    ncs = await clients.one_per_node()
    patterns = {1: ["wc.*.b", "wc.>"], 2: ["wc.a.*", "wc.*.*.c"], 0: ["wc.a.>"]}
    subs = {(i, p): await ncs[i].subscribe(p) for i, ps in patterns.items() for p in ps}
    for i in patterns:
        await wait_interest(ncs[i], ncs)
    published = ["wc.a.b", "wc.x.b", "wc.a.c", "wc.a.b.c", "wc.z"]
    for nc in ncs:
        for subject in published:
            await nc.publish(subject, b"")
        await nc.flush()
    observed = {
        f"n{i + 1} {p}": sorted(Counter(m.subject for m in await drain(sub)).items())
        for (i, p), sub in subs.items()
    }
    # Every node published each subject once: three copies of each match.
    expected = {
        "n2 wc.*.b": [("wc.a.b", 3), ("wc.x.b", 3)],
        "n2 wc.>": [(s, 3) for s in sorted(published)],
        "n3 wc.a.*": [("wc.a.b", 3), ("wc.a.c", 3)],
        "n3 wc.*.*.c": [("wc.a.b.c", 3)],
        "n1 wc.a.>": [("wc.a.b", 3), ("wc.a.b.c", 3), ("wc.a.c", 3)],
    }
    check("wildcards", kinds_of(cluster), observed, expected)


async def test_queue_group_once_cluster_wide(cluster: ProcessCluster, clients: Clients) -> None:
    ncs = await clients.one_per_node()
    members = [
        (i, await ncs[i].subscribe("q.work", queue="workers")) for i in range(3) for _ in range(2)
    ]
    plain = await ncs[2].subscribe("q.work")
    # A second group with members on n3 only: messages from n1 must all cross to them.
    far = [await ncs[2].subscribe("q.far", queue="far") for _ in range(2)]
    for nc in ncs:
        await wait_interest(nc, ncs)
    count = 300
    for k in range(count):
        await ncs[0].publish("q.work", str(k).encode())
        await ncs[1].publish("q.far", str(k).encode())
    await ncs[0].flush()
    await ncs[1].flush()
    got: list[int] = []
    per_node: Counter[int] = Counter()
    for i, sub in members:
        msgs = await drain(sub, 0.2)
        got += [int(m.data) for m in msgs]
        per_node[i] += len(msgs)
    far_got = [int(m.data) for sub in far for m in await drain(sub, 0.2)]
    observed = {
        "group: each message once": sorted(got) == list(range(count)),
        # The pick is random over every member in the cluster (a route's interest counts its
        # weight): each node's two members get about a third.
        "group: every node's members used": all(per_node[i] > 0 for i in range(3)),
        "plain subscriber": len(await drain(plain, 0.2)),
        "members on one remote node: each message once": sorted(far_got) == list(range(count)),
    }
    expected = {
        "group: each message once": True,
        "group: every node's members used": True,
        "plain subscriber": count,
        "members on one remote node: each message once": True,
    }
    check("queue", kinds_of(cluster), observed, expected)


async def test_request_reply(cluster: ProcessCluster, clients: Clients) -> None:
    ncs = await clients.one_per_node()

    async def echo(msg: Any) -> None:
        await msg.respond(b"echo " + msg.data)

    await ncs[1].subscribe("svc.echo", cb=echo)
    # A queue-group service spread over n2 and n3, each answering with its node.
    for i in (1, 2):
        name = cluster.nodes[i].name

        async def who(msg: Any, name: str = name) -> None:
            await msg.respond(name.encode())

        await ncs[i].subscribe("svc.who", queue="svc", cb=who)
    for i in (1, 2):
        await wait_interest(ncs[i], ncs)
    observed: dict[str, Any] = {}
    for i, nc in enumerate(ncs):
        reply = await nc.request("svc.echo", f"{i}".encode(), timeout=2)
        observed[f"echo from n{i + 1}"] = reply.data.decode()
    answers = [(await ncs[0].request("svc.who", b"", timeout=2)).data.decode() for _ in range(40)]
    observed["queue service answers from"] = sorted(set(answers))
    try:
        await ncs[0].request("svc.nobody", b"", timeout=2)
        observed["no responders"] = "answered"
    except nats.errors.NoRespondersError:
        observed["no responders"] = "NoRespondersError"
    except nats.errors.TimeoutError:
        observed["no responders"] = "TimeoutError"
    expected = {
        "echo from n1": "echo 0",
        "echo from n2": "echo 1",
        "echo from n3": "echo 2",
        "queue service answers from": ["n2", "n3"],
        "no responders": "NoRespondersError",
    }
    check("reqrep", kinds_of(cluster), observed, expected)


async def _responders(nc: Client, subject: str) -> str:
    try:
        await nc.request(subject, b"", timeout=2)
        return "answered"
    except nats.errors.NoRespondersError:
        return "no responders"
    except nats.errors.TimeoutError:
        return "timeout"


async def test_unsub_withdraws_interest(cluster: ProcessCluster, clients: Clients) -> None:
    """A requester on n1 gets "no responders" only when no node has interest: the client-side
    view of an RS- having crossed the route."""
    ncs = await clients.one_per_node()

    async def ok(msg: Any) -> None:
        await msg.respond(b"ok")

    observed: dict[str, Any] = {}
    plain = await ncs[1].subscribe("un.plain", cb=ok)
    q1 = await ncs[2].subscribe("un.q", queue="g", cb=ok)
    q2 = await ncs[2].subscribe("un.q", queue="g", cb=ok)
    auto = await ncs[1].subscribe("un.auto")
    await auto.unsubscribe(limit=2)
    for i in (1, 2):
        await wait_interest(ncs[i], ncs)
    observed["plain before"] = await _responders(ncs[0], "un.plain")
    observed["queue before"] = await _responders(ncs[0], "un.q")
    await plain.unsubscribe()
    await q1.unsubscribe()
    for i in (1, 2):
        await wait_interest(ncs[i], ncs)
    observed["plain after unsub"] = await _responders(ncs[0], "un.plain")
    # One member of two left: the group's weight drops, its interest stays.
    observed["queue after one unsub"] = await _responders(ncs[0], "un.q")
    await q2.unsubscribe()
    await wait_interest(ncs[2], ncs)
    observed["queue after both"] = await _responders(ncs[0], "un.q")
    for k in range(5):
        await ncs[0].publish("un.auto", str(k).encode())
    await ncs[0].flush()
    observed["auto-unsubscribe after 2"] = [m.data.decode() for m in await drain(auto)]
    await wait_interest(ncs[1], ncs)
    observed["auto after its limit"] = await _responders(ncs[0], "un.auto")
    expected = {
        "plain before": "answered",
        "queue before": "answered",
        "plain after unsub": "no responders",
        "queue after one unsub": "answered",
        "queue after both": "no responders",
        "auto-unsubscribe after 2": ["0", "1"],
        "auto after its limit": "no responders",
    }
    check("unsub", kinds_of(cluster), observed, expected)


async def test_connect_urls(cluster: ProcessCluster, clients: Clients) -> None:
    by_address = {n.client_address: n.name for n in cluster.nodes}
    observed = {}
    for i, node in enumerate(cluster.nodes):
        nc = await clients.connect(i)
        urls = nc._server_info.get("connect_urls") or []
        observed[node.name] = {
            "connect_urls": sorted(by_address.get(u, u) for u in urls),
            "servers": len(nc.servers),
            "discovered": len(nc.discovered_servers),
        }
    names = sorted(n.name for n in cluster.nodes)
    expected = {n: {"connect_urls": names, "servers": 3, "discovered": 2} for n in names}
    check("connect_urls", kinds_of(cluster), observed, expected)


async def test_monitoring_shows_the_routes(cluster: ProcessCluster) -> None:
    """Every node's /routez lists its peers (the whole Go pool between two nats-server nodes)
    and no route to itself; /varz counts them."""
    observed = {}
    ids = {n.server_id: n.name for n in cluster.nodes}
    for node in cluster.nodes:
        peers = cluster.routes_by_peer(node.index)
        varz = cluster.varz(node.index)
        observed[node.name] = {
            "peers": sorted(ids.get(p, p) for p in peers),
            "num_routes matches": cluster.routez(node.index)["num_routes"] == sum(peers.values()),
            "varz routes": varz.get("routes") == sum(peers.values()),
            "varz remotes": varz.get("remotes"),
            "cluster name": (varz.get("cluster") or {}).get("name"),
        }
    expected = {
        n.name: {
            "peers": sorted(m.name for m in cluster.nodes if m is not n),
            "num_routes matches": True,
            "varz routes": True,
            "varz remotes": 2,
            "cluster name": cluster.cluster_name,
        }
        for n in cluster.nodes
    }
    check("monitoring", kinds_of(cluster), observed, expected)


async def test_sigkill_and_restart_while_traffic_flows(
    cluster: ProcessCluster, clients: Clients
) -> None:
    """n1 is SIGKILLed while n2 publishes a steady stream that n3 receives; n1 comes back on
    its ports, its clients reconnect, and the interest on both sides is replayed."""
    victim, pub_node, sub_node = 0, 1, 2
    publisher = await clients.connect(pub_node)
    steady_nc = await clients.connect(sub_node)
    steady = await steady_nc.subscribe("flow.x")
    reconnected = asyncio.Event()

    async def on_reconnect() -> None:
        reconnected.set()

    # A client of the victim that follows the cluster (it learnt the others from connect_urls).
    roaming = await clients.connect(
        victim, allow_reconnect=True, reconnected_cb=on_reconnect, reconnect_time_wait=0.1
    )
    roaming_sub = await roaming.subscribe("flow.x")
    for nc in (steady_nc, roaming):
        await wait_interest(nc, [publisher])

    sent = 0
    stop = asyncio.Event()

    async def publish() -> None:
        nonlocal sent
        while not stop.is_set():
            await publisher.publish("flow.x", str(sent).encode())
            sent += 1
            if sent % 20 == 0:
                await publisher.flush()
            await asyncio.sleep(0.002)

    task = asyncio.create_task(publish())
    await asyncio.sleep(0.3)
    cluster.kill(victim)
    await asyncio.sleep(0.5)
    await asyncio.to_thread(cluster.restart, victim)
    await asyncio.wait_for(reconnected.wait(), 10)

    # The restarted node: a new subscriber there must get n2's stream (n1's interest reaches
    # n2 again) and a subscriber on n3 must get what n1's clients publish (n3's interest
    # was replayed to the new n1).
    fresh = await clients.connect(victim)
    fresh_sub = await fresh.subscribe("flow.x")
    back = await steady_nc.subscribe("flow.back")
    await wait_interest(fresh, [publisher])
    await wait_interest(steady_nc, [fresh])
    roaming_mark = sent
    await wait_interest(roaming, [publisher])
    await asyncio.sleep(0.2)
    await fresh.publish("flow.back", b"from the restarted node")
    await fresh.flush()
    stop.set()
    await task
    await publisher.flush()

    steady_got = [int(m.data) for m in await drain(steady)]
    fresh_got = [int(m.data) for m in await drain(fresh_sub)]
    roaming_got = [int(m.data) for m in await drain(roaming_sub)]
    observed = {
        # n2 -> n3 never went through n1: not one message lost or reordered.
        "steady subscriber got every message in order": steady_got == list(range(sent)),
        "restarted node's subscriber gets the stream": len(fresh_got) > 0
        and fresh_got == list(range(fresh_got[0], sent)),
        "roaming client resubscribed": any(k >= roaming_mark for k in roaming_got),
        "restarted node's publish reaches n3": [m.data for m in await drain(back)],
    }
    expected = {
        "steady subscriber got every message in order": True,
        "restarted node's subscriber gets the stream": True,
        "roaming client resubscribed": True,
        "restarted node's publish reaches n3": [b"from the restarted node"],
    }
    check("sigkill", kinds_of(cluster), observed, expected)


# -- clusters of their own ------------------------------------------------------------------------


@pytest.mark.parametrize("kinds", TOPOLOGIES)
async def test_simultaneous_start_without_duplicate_routes(
    kinds: tuple[str, ...], tmp_path: Path
) -> None:
    """All three start at once, each told to route to all three (itself included, the nats.py
    tests' configuration). Once settled, every node's /routez shows one set of
    connections per peer (the Go pool between nats-server nodes, the same count from both
    ends) and no route to themselves; and clients get each message once, as a duplicate
    route would deliver it twice."""
    require_nats_server()
    with ProcessCluster(kinds, tmp_path, routes="all") as c:
        await asyncio.to_thread(c.start)
        # Duplicates from simultaneous dials are closed right after their INFO; retries of
        # failed dials come 1 s later: look after both.
        await asyncio.sleep(1.5)
        await asyncio.to_thread(c.wait_routes)
        ids = {n.server_id for n in c.nodes}
        problems = []
        for node in c.nodes:
            if node.kind not in ROUTEZ_KINDS:
                continue
            peers = c.routes_by_peer(node.index)
            problems += [f"{node.name} routes to unknown {p}" for p in peers if p not in ids]
            for other in c.nodes:
                count = peers.get(other.server_id, 0)
                if other is node:
                    if count:
                        problems.append(f"{node.name} has {count} routes to itself")
                elif count not in allowed(node.kind, other.kind):
                    problems.append(f"{node.name}->{other.name}: {count} routes")
                elif other.kind in ROUTEZ_KINDS:
                    mirror = c.routes_by_peer(other.index)[node.server_id]
                    if mirror != count:
                        problems.append(f"{node.name}->{other.name}: {count}, back {mirror}")
        agent = Clients(c)
        try:
            ncs = await agent.one_per_node()
            subs = [await nc.subscribe("dup.x") for nc in ncs]
            for nc in ncs:
                await wait_interest(nc, ncs)
            for i, nc in enumerate(ncs):
                await nc.publish("dup.x", f"n{i + 1}".encode())
                await nc.flush()
            received = {
                f"n{j + 1}": sorted(m.data.decode() for m in await drain(sub))
                for j, sub in enumerate(subs)
            }
        finally:
            await agent.close()
    observed = {"seen on /routez": problems, "received": received}
    every = ["n1", "n2", "n3"]
    expected = {"seen on /routez": [], "received": {n: every for n in every}}
    check("no duplicate routes", kinds, observed, expected)


def allowed(a: str, b: str) -> set[int]:
    """How many connections one node may keep to another: nats-server's pool of 3 plus the
    `$SYS` pinned connection between two nats-server nodes; with a pynatsd node, that or one
    connection (a peer that announces no `route_pool_size` gets one: nats-cluster-facts §0)."""
    return {GO_ROUTES_PER_PEER} if a == b == GO else {1, GO_ROUTES_PER_PEER}


@pytest.mark.parametrize("kinds", TOPOLOGIES)
async def test_single_seed_gossip_forms_the_mesh(kinds: tuple[str, ...], tmp_path: Path) -> None:
    """n2 and n3 know only n1 (`--routes` to the seed, set by flags this time): they learn of
    each other through n1's gossip and route directly, so n2 -> n3 traffic and n3's
    `connect_urls` cover the whole cluster (routes are one hop: n1 never relays n2's
    messages to n3)."""
    require_nats_server()
    with ProcessCluster(kinds, tmp_path, routes="seed", via="flags") as c:
        await asyncio.to_thread(c.start)
        observed: dict[str, Any] = {}
        agent = Clients(c)
        try:
            n2, n3 = await agent.connect(1), await agent.connect(2)
            sub = await n3.subscribe("gossip.x")
            await wait_interest(n3, [n2])
            await n2.publish("gossip.x", b"via the gossiped route")
            await n2.flush()
            observed["n2 -> n3"] = [m.data for m in await drain(sub)]
            by_address = {n.client_address: n.name for n in c.nodes}
            urls = n3._server_info.get("connect_urls") or []
            observed["n3 connect_urls"] = sorted(by_address.get(u, u) for u in urls)
        finally:
            await agent.close()
    expected = {
        "n2 -> n3": [b"via the gossiped route"],
        "n3 connect_urls": ["n1", "n2", "n3"],
    }
    check("seed gossip", kinds, observed, expected)
