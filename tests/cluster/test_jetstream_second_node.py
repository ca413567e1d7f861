"""A second JetStream-enabled server in a cluster: from then on JetStream is clustered
(jetstream/cluster/): both servers are members of the meta group `_meta_`, both serve, and
each API request is still answered exactly once (by the meta leader, or by the stream's
leader). A stream created on a server while it was the only JetStream server stops when the
cluster forms (its files stay), as it is in no assignment of the cluster.

With a nats-server node as the other JetStream server the two form one meta group: nats-server
gets the quorum it needs for a meta leader, and both report JetStream healthy.
"""

from __future__ import annotations

import json
import logging
import time
import urllib.error
import urllib.request
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import nats
import nats.errors
import nats.js.errors
import pytest
from nats.aio.client import Client

import pynatsd
from cluster.nodes import eventually
from pynatsd.cluster import cluster_of
from pynatsd.jetstream import jetstream_of
from pynatsd.options import ClusterOptions
from support.cluster import GO, PY, ProcessCluster
from support.natsserver import require_nats_server
from support.ports import LOOPBACK

TIMEOUT = 5.0
STOPPED_ALONE = "was created on this server alone and is not in the cluster's assignments"


def http(port: int, path: str) -> tuple[int, dict[str, Any]]:
    """The status and JSON body of a monitoring endpoint (a 503 is an answer, not an error)."""
    try:
        with urllib.request.urlopen(f"http://{LOOPBACK}:{port}{path}", timeout=5) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def js_config(directory: Path, name: str) -> str:
    return f'jetstream {{ store_dir: "{directory / name}" }}\n'


def wait_for(check: Any, what: str, timeout: float = 15.0) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {timeout}s: {what}")
        time.sleep(0.1)


@pytest.fixture(scope="module")
def two_js(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ProcessCluster]:
    """Three pynatsd nodes started together, JetStream on n1 and n2."""
    directory = tmp_path_factory.mktemp("twojs")
    config = {0: js_config(directory, "n1"), 1: js_config(directory, "n2")}
    with ProcessCluster((PY, PY, PY), directory, node_config=config) as cluster:
        cluster.start()
        yield cluster


@pytest.fixture
async def clients(two_js: ProcessCluster) -> AsyncIterator[list[Client]]:
    ncs = [await nats.connect(n.url, allow_reconnect=False) for n in two_js.nodes]
    try:
        yield ncs
    finally:
        for nc in ncs:
            await nc.close()


def test_reported(two_js: ProcessCluster) -> None:
    """Both JetStream servers name the same meta leader in a group of two; every /healthz is
    fine; the server without JetStream says so."""
    n1, n2, n3 = two_js.nodes

    def leaders() -> set[str]:
        return {str(http(n.http_port, "/jsz")[1]["meta_cluster"].get("leader")) for n in (n1, n2)}

    leader = wait_for(lambda: len(found := leaders()) == 1 and "None" not in found and found, "")
    assert leader <= {"n1", "n2"}
    for node in (n1, n2):
        meta = http(node.http_port, "/jsz")[1]["meta_cluster"]
        assert (meta["cluster_size"], meta["quorum_needed"]) == (2, 2)
        assert "JetStream cluster mode" in node.log_text()
    for node in (n1, n2, n3):
        assert http(node.http_port, "/healthz") == (200, {"status": "ok"})
    _, jsz3 = http(n3.http_port, "/jsz")
    assert jsz3["disabled"] is True and "error" not in jsz3


def test_both_have_api_interest(two_js: ProcessCluster) -> None:
    """What the routes carry: `$JS.API` interest from both JetStream servers (each decides
    whether it answers), as n3 sees it in /routez."""

    def api_interest() -> set[str]:
        routes = two_js.routez(2, "?subs=1")["routes"]
        return {
            r["remote_name"]
            for r in routes
            for sub in r.get("subscriptions_list") or []
            if sub.startswith("$JS.API.")
        }

    wait_for(lambda: api_interest() == {"n1", "n2"}, "n3 sees JetStream API interest of both")


async def answers(nc: Client, subject: str, payload: bytes, quiet: float = 0.5) -> list[bytes]:
    """Every answer to one request on a private inbox, until `quiet` seconds pass without
    one (the first must come; a second one, if any, from another server)."""
    inbox = nc.new_inbox()
    sub = await nc.subscribe(inbox)
    await nc.publish(subject, payload, reply=inbox)
    got = [(await sub.next_msg(timeout=TIMEOUT)).data]
    while True:
        try:
            got.append((await sub.next_msg(timeout=quiet)).data)
        except nats.errors.TimeoutError:
            break
    await sub.unsubscribe()
    return got


async def test_answered_once(two_js: ProcessCluster, clients: list[Client]) -> None:
    await wait_routed_api(clients[0])  # a meta leader elected: it answers
    for nc in clients:
        got = await answers(nc, "$JS.API.INFO", b"")
        assert len(got) == 1
        assert json.loads(got[0])["type"] == "io.nats.jetstream.api.v1.account_info_response"
    c2, c3 = clients[1:]
    await c2.jetstream(timeout=TIMEOUT).add_stream(name="ONE", subjects=["one.>"])
    for nc in clients:
        acks = await answers(nc, "one.x", b"m")
        assert [json.loads(a)["stream"] for a in acks] == ["ONE"]
    info = await c3.jetstream(timeout=TIMEOUT).stream_info("ONE")
    assert info.state.messages == 3


def test_nats_server_peer(tmp_path: Path) -> None:
    """A nats-server node with JetStream (n1) and a pynatsd node with JetStream (n2): one meta
    group of two, and both servers report JetStream healthy."""
    require_nats_server()
    config = {0: js_config(tmp_path, "n1"), 1: js_config(tmp_path, "n2")}
    with ProcessCluster((GO, PY), tmp_path, node_config=config) as cluster:
        cluster.start()
        go, py = cluster.nodes
        wait_for(
            lambda: http(go.http_port, "/healthz") == (200, {"status": "ok"}),
            "nats-server's JetStream available (a meta leader with pynatsd's vote)",
        )
        _, jsz = http(go.http_port, "/jsz")
        assert jsz["meta_cluster"]["cluster_size"] == 2
        assert [r["name"] for r in jsz["meta_cluster"]["replicas"]] == ["n2"]
        assert http(py.http_port, "/healthz") == (200, {"status": "ok"})
        _, pyjsz = http(py.http_port, "/jsz")
        assert pyjsz["meta_cluster"]["leader"] == jsz["meta_cluster"]["leader"]


async def test_a_stream_made_alone_stops_when_the_cluster_forms(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """n2 serves JetStream alone (a stream and a message); n1 joins with JetStream of its own:
    the cluster forms, n2's stream is in no assignment of it, so it stops: neither answered
    nor captured any more, and its store is left as it was."""
    caplog.set_level(logging.ERROR, logger="pynatsd")
    n2 = pynatsd.Server(
        server_name="n2",
        jetstream=True,
        store_dir=str(tmp_path / "n2"),
        cluster=ClusterOptions(name="C1", host=LOOPBACK, port=-1),
    )
    await n2.start()
    n1: pynatsd.Server | None = None
    nc = await nats.connect(n2.client_url, allow_reconnect=False)
    try:
        js = nc.jetstream(timeout=TIMEOUT)
        await js.add_stream(name="EARLY", subjects=["early.>"])
        assert (await js.publish("early.a", b"kept")).seq == 1
        route = cluster_of(n2)
        assert route is not None
        n1 = pynatsd.Server(
            server_name="n1",
            jetstream=True,
            store_dir=str(tmp_path / "n1"),
            cluster=ClusterOptions(
                name="C1", host=LOOPBACK, port=-1, routes=[f"nats://{LOOPBACK}:{route.port}"]
            ),
        )
        await n1.start()
        clustered = jetstream_of(n2)
        assert clustered is not None and clustered.clustered is not None
        await eventually(lambda: clustered.clustered is not None and clustered.clustered.active)
        assert any(STOPPED_ALONE in r.getMessage() for r in caplog.records)
        # The meta leader answers for the cluster now: no such stream, and nobody captures it.
        await wait_routed_api(nc)
        with pytest.raises(nats.js.errors.NotFoundError):
            await js.stream_info("EARLY")
        with pytest.raises(nats.js.errors.NoStreamResponseError):
            await js.publish("early.b", b"lost")
        assert (tmp_path / "n2" / "jetstream" / "$G" / "streams" / "EARLY").is_dir()
    finally:
        await nc.close()
        if n1 is not None:
            await n1.shutdown()
        await n2.shutdown()


async def wait_routed_api(nc: Client) -> None:
    """Until a JetStream API request from `nc` is answered (by the serving node, through the
    route, once its interest has arrived)."""

    async def answered() -> bool:
        try:
            await nc.request("$JS.API.INFO", b"", timeout=0.5)
        except (nats.errors.NoRespondersError, nats.errors.TimeoutError):
            return False
        return True

    await eventually(answered)
