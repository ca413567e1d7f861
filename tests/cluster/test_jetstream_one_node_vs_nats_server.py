"""JetStream on one node of a cluster, reached through the routes by clients of the other nodes.

pynatsd has no clustered JetStream (RAFT); JetStream may run on one node and every other node
reaches it as it reaches any service (docs/clustering.md). The reference is what nats-py
clients observe of one nats-server with JetStream: the same scenario, with its clients on
nodes 2 and 3 of a cluster whose node 1 runs JetStream, must observe exactly the same. (A
cluster of nats-server nodes with JetStream on one of them is no reference: that node runs
clustered JetStream and waits for a meta leader that never comes.)

Topologies: three pynatsd nodes, and a pynatsd JetStream node with two nats-server nodes (which
must understand how a JetStream delivery crosses a route: its routing subject, and the
subject it shows after the `@` of its ack reply). Two configurations: the global account with
no accounts configured (how most users run it), and an account with JetStream enabled beside
the system account, whose `$SYS` requests also cross the routes.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from contextlib import AsyncExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import nats
import nats.errors
import nats.js.errors
import pytest
from nats.aio.client import Client

from support.cluster import GO, PY, ProcessCluster, wait_interest
from support.natsserver import require_nats_server
from support.processes import start_server

REFERENCE = "1nats"
TOPOLOGIES = [
    pytest.param(REFERENCE, id=REFERENCE),
    pytest.param((PY, PY, PY), id="3py"),
    pytest.param((PY, GO, GO), id="1py2nats"),
]
ACCOUNTS = """
accounts {
  A { jetstream: enabled, users: [{user: a, password: a}] }
  SYS { users: [{user: sys, password: sys}] }
}
system_account: SYS
no_auth_user: a
"""
TIMEOUT = 5.0
# Observations of the reference, by scenario, for the clusters to match.
_reference: dict[str, Any] = {}


@dataclass
class Deployment:
    """Where the clients connect: the JetStream node first, then the two others (for the
    reference, the one server three times)."""

    urls: list[str]
    server_ids: list[str]


@contextmanager
def _start(topology: Any, directory: Path, config: str) -> Iterator[Deployment]:
    if topology == REFERENCE:
        conf = directory / "js.conf"
        conf.write_text(f'jetstream {{ store_dir: "{directory / "js"}" }}\n{config}')
        server = start_server([require_nats_server()], ["-c", str(conf)])
        try:
            yield Deployment([server.url] * 3, [""] * 3)
        finally:
            server.stop()
        return
    require_nats_server()
    js = f'jetstream {{ store_dir: "{directory / "js"}" }}\n'
    with ProcessCluster(topology, directory, extra_config=config, node_config={0: js}) as cluster:
        cluster.start()
        ids = [node.server_id for node in cluster.nodes]
        yield Deployment([node.url for node in cluster.nodes], ids)


@pytest.fixture(scope="module", params=TOPOLOGIES)
def global_account(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[Any, Deployment]]:
    with _start(request.param, tmp_path_factory.mktemp("g"), "") as deployment:
        yield request.param, deployment


@pytest.fixture(scope="module", params=TOPOLOGIES)
def with_accounts(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[Any, Deployment]]:
    with _start(request.param, tmp_path_factory.mktemp("a"), ACCOUNTS) as deployment:
        yield request.param, deployment


def check(name: str, topology: Any, observed: Any, expected: Any) -> None:
    """`observed` must be `expected`, and what the reference observed (when it ran first)."""
    if topology == REFERENCE:
        _reference[name] = observed
    elif name in _reference:
        assert observed == _reference[name], f"{name}: differs from one nats-server"
    assert observed == expected


@pytest.fixture
async def stack() -> AsyncIterator[AsyncExitStack]:
    async with AsyncExitStack() as s:
        yield s


async def connect(stack: AsyncExitStack, url: str, **options: Any) -> Client:
    nc = await nats.connect(url, allow_reconnect=False, **options)
    stack.push_async_callback(nc.close)
    return nc


async def next_json(sub: Any) -> Any:
    msg = await sub.next_msg(timeout=TIMEOUT)
    return json.loads(msg.data)


async def captured(js: Any, stream: str) -> None:
    """Return once the server of `js`'s client knows the subjects `stream` captures.

    A stream made through one node subscribes its subjects on the JetStream node, whose `RS+`
    reaches the other nodes asynchronously (as any subscription in a cluster). The JetStream
    node answers a request after the `RS+` it sent before, on the same route connection, so
    once a request from this client is answered, its node has the interest.
    """
    await js.stream_info(stream)


# -- the scenario ----------------------------------------------------------------------------


async def streams_and_consumers(js1: Client, c2: Client, c3: Client) -> dict[str, Any]:
    """A stream made from node 2, messages published with acks from nodes 2 and 3, a pull
    consumer fetched and acked on node 3, a push consumer on node 2, the created advisory seen
    on node 3."""
    out: dict[str, Any] = {}
    advisories = await c3.subscribe("$JS.EVENT.ADVISORY.STREAM.CREATED.>")
    audits = await c3.subscribe("$JS.EVENT.ADVISORY.API")
    await wait_interest(c3, [js1])
    j2, j3 = c2.jetstream(timeout=TIMEOUT), c3.jetstream(timeout=TIMEOUT)
    info = await j2.add_stream(name="ORDERS", subjects=["orders.>"])
    out["stream"] = (info.config.name, info.config.subjects, info.state.messages)
    await captured(j3, "ORDERS")
    out["advisory"] = (await next_json(advisories))["stream"]
    # The audit of the create (nats-server may send the one of the next request first).
    for _ in range(5):
        audit = await next_json(audits)
        if audit["subject"] == "$JS.API.STREAM.CREATE.ORDERS":
            break
    await audits.unsubscribe()
    out["audit"] = (audit["type"], audit["subject"])
    acks = [await j2.publish(f"orders.{i}", f"o{i}".encode()) for i in range(3)]
    acks += [await j3.publish(f"orders.{i}", f"o{i}".encode(), headers={"K": "v"}) for i in (3, 4)]
    out["acks"] = [(a.stream, a.seq, a.duplicate) for a in acks]
    dup = await j3.publish("orders.9", b"x", headers={"Nats-Msg-Id": "m1"})
    again = await j2.publish("orders.9", b"x", headers={"Nats-Msg-Id": "m1"})
    out["dedup"] = [(dup.seq, dup.duplicate), (again.seq, again.duplicate)]

    pull = await j3.pull_subscribe("orders.>", "pull")
    fetched = await pull.fetch(6, timeout=TIMEOUT)
    out["fetched"] = [
        (m.subject, m.data, dict(m.headers or {}), m.metadata.sequence.stream) for m in fetched
    ]
    for m in fetched:
        await m.ack_sync(timeout=TIMEOUT)
    ci = await j3.consumer_info("ORDERS", "pull")
    out["pull_state"] = (ci.delivered.consumer_seq, ci.ack_floor.stream_seq, ci.num_ack_pending)

    push = await j2.subscribe("orders.>", durable="push", manual_ack=True)
    got = []
    for _ in range(6):
        m = await push.next_msg(timeout=TIMEOUT)
        got.append((m.subject, m.data, m.metadata.num_delivered))
        await m.ack()
    out["pushed"] = got
    await c2.flush()
    ci = await j2.consumer_info("ORDERS", "push")
    out["push_pending"] = ci.num_pending
    await push.unsubscribe()

    msg = await j3.get_msg("ORDERS", seq=2)
    out["get"] = (msg.subject, msg.data)
    account = await j3.account_info()
    out["account"] = (account.streams, account.consumers)
    return out


STREAMS_EXPECTED = {
    "stream": ("ORDERS", ["orders.>"], 0),
    "advisory": "ORDERS",
    "audit": ("io.nats.jetstream.advisory.v1.api_audit", "$JS.API.STREAM.CREATE.ORDERS"),
    "acks": [("ORDERS", seq, None) for seq in range(1, 6)],
    "dedup": [(6, None), (6, True)],
    "fetched": [
        *((f"orders.{i}", f"o{i}".encode(), {}, i + 1) for i in range(3)),
        *((f"orders.{i}", f"o{i}".encode(), {"K": "v"}, i + 1) for i in (3, 4)),
        ("orders.9", b"x", {"Nats-Msg-Id": "m1"}, 6),
    ],
    "pull_state": (6, 6, 0),
    "pushed": [
        *((f"orders.{i}", f"o{i}".encode(), 1) for i in range(5)),
        ("orders.9", b"x", 1),
    ],
    "push_pending": 0,
    "get": ("orders.1", b"o1"),
    "account": (1, 2),
}


async def key_value(c2: Client, c3: Client) -> dict[str, Any]:
    """A bucket made on node 2, watched from node 3 (an ordered push consumer with flow
    control and heartbeats), written from both, read with direct gets."""
    out: dict[str, Any] = {}
    j2, j3 = c2.jetstream(timeout=TIMEOUT), c3.jetstream(timeout=TIMEOUT)
    kv2 = await j2.create_key_value(bucket="cfg", history=5)
    kv3 = await j3.key_value("cfg")
    watcher = await kv3.watch("k.*")
    first = await watcher.updates(timeout=TIMEOUT)
    out["watch_start"] = first
    await kv2.put("k.a", b"1")
    await kv3.put("k.b", b"2")
    await kv2.put("k.a", b"3")
    await kv3.delete("k.b")
    seen = []
    for _ in range(4):
        e = await watcher.updates(timeout=TIMEOUT)
        seen.append((e.key, e.value, e.operation, e.revision))
    await watcher.stop()
    out["watched"] = seen
    entry = await kv3.get("k.a")
    out["get"] = (entry.key, entry.value, entry.revision)
    try:
        await kv2.get("k.b")
        out["deleted"] = "found"
    except nats.js.errors.KeyNotFoundError as e:
        out["deleted"] = (type(e).__name__, e.op)
    history = await kv2.history("k.a")
    out["history"] = [(e.value, e.revision) for e in history]
    out["keys"] = sorted(await kv3.keys())
    return out


KV_EXPECTED = {
    "watch_start": None,
    "watched": [
        ("k.a", b"1", None, 1),
        ("k.b", b"2", None, 2),
        ("k.a", b"3", None, 3),
        ("k.b", b"", "DEL", 4),
    ],
    "get": ("k.a", b"3", 3),
    "deleted": ("KeyNotFoundError", "DEL"),
    "history": [(b"1", 1), (b"3", 3)],
    "keys": ["k.a"],
}
BLOB = bytes(range(256)) * 1200  # 300 KiB: three chunks


async def object_store(c2: Client, c3: Client) -> dict[str, Any]:
    """An object put from node 2 in chunks, read back on node 3."""
    j2, j3 = c2.jetstream(timeout=TIMEOUT), c3.jetstream(timeout=TIMEOUT)
    store2 = await j2.create_object_store("files")
    info = await store2.put("blob", BLOB)
    store3 = await j3.object_store("files")
    got = await store3.get("blob")
    listed = await store3.list()
    return {
        "put": (info.name, info.size, info.chunks, info.digest),
        "get": (got.info.size, got.data == BLOB),
        "list": [o.name for o in listed],
    }


OBJ_EXPECTED = {
    "put": ("blob", len(BLOB), 3, None),
    "get": (len(BLOB), True),
    "list": ["blob"],
}


# -- the tests -------------------------------------------------------------------------------


async def test_global_account(
    global_account: tuple[Any, Deployment], stack: AsyncExitStack
) -> None:
    topology, deployment = global_account
    js1, c2, c3 = [await connect(stack, url) for url in deployment.urls]
    observed = await streams_and_consumers(js1, c2, c3)
    check("streams", topology, observed, STREAMS_EXPECTED)
    observed = await key_value(c2, c3)
    check("kv", topology, observed, KV_EXPECTED)
    observed = await object_store(c2, c3)
    # The digest is the same where it is computed: compare it between servers, not literally.
    digest = observed["put"][3]
    observed["put"] = (*observed["put"][:3], None)
    check("obj", topology, observed, OBJ_EXPECTED)
    assert digest and digest.startswith("SHA-256=")


async def test_account_and_system_account(
    with_accounts: tuple[Any, Deployment], stack: AsyncExitStack
) -> None:
    """Account A has JetStream: its clients on nodes 2 and 3 use it through the routes. The
    system account's requests to the JetStream node (its JSZ) cross too."""
    topology, deployment = with_accounts
    c2, c3 = [await connect(stack, url, user="a", password="a") for url in deployment.urls[1:]]
    j2, j3 = c2.jetstream(timeout=TIMEOUT), c3.jetstream(timeout=TIMEOUT)
    await j2.add_stream(name="EVENTS", subjects=["ev.>"])
    await captured(j3, "EVENTS")
    acks = [(await j3.publish(f"ev.{i}", b"e")).seq for i in range(3)]
    pull = await j2.pull_subscribe("ev.>", "d")
    fetched = [(m.subject, m.metadata.sequence.stream) for m in await pull.fetch(3, TIMEOUT)]
    kv = await j3.create_key_value(bucket="acc")
    await kv.put("x", b"1")
    value = (await (await j2.key_value("acc")).get("x")).value
    check(
        "account",
        topology,
        (acks, fetched, value),
        ([1, 2, 3], [("ev.0", 1), ("ev.1", 2), ("ev.2", 3)], b"1"),
    )

    # $SYS: a system user on node 3 asks the JetStream node for its JSZ, by id (the
    # reference asks its one server).
    sys3 = await connect(stack, deployment.urls[2], user="sys", password="sys")
    target = deployment.server_ids[0]
    if not target:
        info = await sys3.request("$SYS.REQ.SERVER.PING.VARZ", b"", timeout=TIMEOUT)
        target = json.loads(info.data)["server"]["id"]
    reply = await sys3.request(f"$SYS.REQ.SERVER.{target}.JSZ", b"", timeout=TIMEOUT)
    data = json.loads(reply.data)["data"]
    observed = (data["streams"], data["consumers"], data["messages"] >= 4)
    check("sys", topology, observed, (2, 1, True))
