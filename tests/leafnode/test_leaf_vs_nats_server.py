"""A hub and a leaf, each either pynatsd or nats-server: what clients on both sides observe is
the same in the all-nats-server setup and in the mixed ones (pynatsd leaf of a nats-server hub,
nats-server leaf of a pynatsd hub).

One scenario per test, run for each setup of `SETUPS`; every setup must observe what the
reference (nats-server on both sides) observes, which the test states as its expectation.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import AsyncIterator
from pathlib import Path

import nats
import nats.errors
import pytest

from leafnode.topology import (
    Node,
    collect,
    connect,
    eventually,
    exchange,
    hub_conf,
    leaf_conf,
    remote,
    running,
    wait_leafs,
)
from support.cluster import wait_interest
from support.ports import LOOPBACK, free_port

QUEUE_MSGS = 20


@pytest.fixture
async def pair(setup: tuple[str, str], tmp_path: Path) -> AsyncIterator[tuple[Node, Node]]:
    """A hub and its leaf, the leaf's remote bound to the global account."""
    hub_kind, leaf_kind = setup
    directory = tmp_path
    leaf_port = free_port()
    hub = Node(hub_kind, "HUB", hub_conf(leaf_port), directory)
    leaf = Node(
        leaf_kind,
        "LEAF",
        leaf_conf(remote(f"nats-leaf://{LOOPBACK}:{leaf_port}")),
        directory,
    )
    async with running(hub, leaf):
        await wait_leafs(hub, 1)
        await wait_leafs(leaf, 1)
        yield hub, leaf


async def test_pub_sub_and_headers_both_ways(pair: tuple[Node, Node]) -> None:
    on_leaf, on_hub = await exchange(*pair, "ps")
    assert on_leaf == ["ps.toleaf.1:a:", "ps.toleaf.2:b:X-K=v"]
    assert on_hub == ["ps.tohub.1:c:", "ps.tohub.2:d:X-K=w"]


async def test_request_reply_both_ways_and_no_responders(pair: tuple[Node, Node]) -> None:
    hub, leaf = pair
    ch, cl = await connect(hub), await connect(leaf)
    try:

        async def answer(msg: nats.aio.msg.Msg) -> None:
            await msg.respond(b"re:" + msg.data)

        svc_hub = await ch.subscribe("rr.hub", cb=answer)
        svc_leaf = await cl.subscribe("rr.leaf", cb=answer)
        await wait_interest(ch, [cl])
        await wait_interest(cl, [ch])
        assert (await cl.request("rr.hub", b"1", timeout=5)).data == b"re:1"
        assert (await ch.request("rr.leaf", b"2", timeout=5)).data == b"re:2"
        # UNSUB crosses too: with the responders gone, a request finds no one.
        await svc_hub.unsubscribe()
        await svc_leaf.unsubscribe()
        await wait_interest(ch, [cl])
        await wait_interest(cl, [ch])
        with pytest.raises(nats.errors.NoRespondersError):
            await cl.request("rr.hub", b"3", timeout=5)
        with pytest.raises(nats.errors.NoRespondersError):
            await ch.request("rr.leaf", b"4", timeout=5)
    finally:
        await ch.close()
        await cl.close()


async def test_unsub_crosses(pair: tuple[Node, Node]) -> None:
    hub, leaf = pair
    ch, cl = await connect(hub), await connect(leaf)
    try:
        sub = await cl.subscribe("us.x")
        await wait_interest(cl, [ch])
        await ch.publish("us.x", b"before")
        await ch.flush()
        assert await collect(sub) == ["us.x:before:"]
        watcher = await cl.subscribe("us.watch")  # stays: proves the leaf still gets traffic
        await sub.unsubscribe()
        await wait_interest(cl, [ch])
        await ch.publish("us.x", b"after")
        await ch.publish("us.watch", b"still")
        await ch.flush()
        assert await collect(watcher) == ["us.watch:still:"]
        # The hub sends nothing for the withdrawn subject: the leaf's counters show one message.
        leafz = await hub.leafz("?subs=1")
        assert "us.x" not in leafz["leafs"][0]["subscriptions_list"]
    finally:
        await ch.close()
        await cl.close()


async def test_queue_group_across_prefers_local_members(pair: tuple[Node, Node]) -> None:
    hub, leaf = pair
    ch, cl = await connect(hub), await connect(leaf)
    try:
        got: Counter[str] = Counter()

        async def member(side: str) -> nats.aio.subscription.Subscription:
            client = ch if side == "hub" else cl

            async def cb(msg: nats.aio.msg.Msg) -> None:
                got[f"{side}<-{msg.data.decode()}"] += 1

            return await client.subscribe("qg.work", queue="workers", cb=cb)

        hub_member = await member("hub")
        await member("leaf")
        await wait_interest(ch, [cl])
        await wait_interest(cl, [ch])
        for _ in range(QUEUE_MSGS):
            await ch.publish("qg.work", b"hub")
            await cl.publish("qg.work", b"leaf")
        await ch.flush()
        await cl.flush()
        await wait_interest(ch, [cl])
        await wait_interest(cl, [ch])
        # Each side's own member takes every message published on its side.
        assert dict(got) == {"hub<-hub": QUEUE_MSGS, "leaf<-leaf": QUEUE_MSGS}
        got.clear()
        await hub_member.unsubscribe()
        await wait_interest(ch, [cl])
        for _ in range(QUEUE_MSGS):
            await ch.publish("qg.work", b"hub")
        await ch.flush()
        await wait_interest(cl, [ch])
        await wait_interest(ch, [cl])
        # With no member on the hub, the leaf's member takes them.
        assert dict(got) == {"leaf<-hub": QUEUE_MSGS}
    finally:
        await ch.close()
        await cl.close()


async def test_leafz_and_varz_shapes(pair: tuple[Node, Node]) -> None:
    hub, leaf = pair
    hub_view = await hub.leafz("?subs=1")
    leaf_view = await leaf.leafz("?subs=1")
    assert list(hub_view) == ["server_id", "now", "leafnodes", "leafs"]
    assert hub_view["leafnodes"] == leaf_view["leafnodes"] == 1
    (at_hub,), (at_leaf,) = hub_view["leafs"], leaf_view["leafs"]
    expected = [
        "id",
        "name",
        "is_spoke",
        "account",
        "ip",
        "port",
        "rtt",
        "in_msgs",
        "out_msgs",
        "in_bytes",
        "out_bytes",
        "subscriptions",
        "subscriptions_list",
        "compression",
    ]
    assert [k for k in at_hub if k in expected] == expected
    assert [k for k in at_leaf if k in expected] == expected
    assert (at_hub["name"], at_hub["is_spoke"], at_hub["account"]) == ("LEAF", False, "$G")
    assert (at_leaf["name"], at_leaf["is_spoke"], at_leaf["account"]) == ("HUB", True, "$G")
    # Each side's loop detection subject, and only its own: the hub's interest is never
    # reflected back to it (nats-server would take it for a loop).
    hub_lds = [s for s in at_hub["subscriptions_list"] if s.startswith("$LDS.")]
    leaf_lds = [s for s in at_leaf["subscriptions_list"] if s.startswith("$LDS.")]
    assert len(hub_lds) == len(leaf_lds) == 1
    assert hub_lds != leaf_lds
    hub_varz, leaf_varz = await hub.varz(), await leaf.varz()
    assert hub_varz["leafnodes"] == leaf_varz["leafnodes"] == 1
    assert list(hub_varz["leaf"]) == ["host", "port", "auth_timeout", "tls_timeout"]
    assert leaf_varz["leaf"]["remotes"][0]["local_account"] == "$G"
    assert leaf_varz["leaf"]["remotes"][0]["urls"] == [f"{LOOPBACK}:{hub_varz['leaf']['port']}"]


async def test_hub_restarted_leaf_relinks_and_replays_interest(
    tmp_path: Path, setup: tuple[str, str]
) -> None:
    hub_kind, leaf_kind = setup
    leaf_port = free_port()
    hub = Node(hub_kind, "HUB", hub_conf(leaf_port), tmp_path)
    leaf = Node(
        leaf_kind, "LEAF", leaf_conf(remote(f"nats-leaf://{LOOPBACK}:{leaf_port}")), tmp_path
    )
    await hub.start()
    await leaf.start()
    cl = await nats.connect(leaf.url)
    try:
        sub = await cl.subscribe("restart.x")
        await wait_leafs(hub, 1)
        await hub.stop()
        await wait_leafs(leaf, 0)
        await hub.start()
        await wait_leafs(hub, 1)
        ch = await connect(hub)
        try:
            await wait_interest(cl, [ch])
            await ch.publish("restart.x", b"again")
            await ch.flush()
            assert await collect(sub) == ["restart.x:again:"]
        finally:
            await ch.close()
    finally:
        await cl.close()
        await leaf.stop()
        await hub.stop()


async def test_loop_detected_without_duplicates(
    tmp_path: Path, setup: tuple[str, str], caplog: pytest.LogCaptureFixture
) -> None:
    """Two servers, each a leaf of the other: the loop is found ($LDS, "Loop detected" in a
    log) and a message never arrives twice."""
    a_kind, b_kind = setup
    a_port, b_port = free_port(), free_port()
    url_a, url_b = f"nats-leaf://{LOOPBACK}:{a_port}", f"nats-leaf://{LOOPBACK}:{b_port}"
    a = Node(a_kind, "A", _both_roles(a_port, url_b), tmp_path)
    b = Node(b_kind, "B", _both_roles(b_port, url_a), tmp_path)
    async with running(a, b):

        async def detected() -> bool:
            logs = a.log_text() + b.log_text() + caplog.text
            return "Loop detected for leafnode account" in logs

        await eventually(detected)
        ca, cb = await connect(a), await connect(b)
        try:
            sub = await ca.subscribe("loop.x")
            await ca.flush()
            await cb.publish("loop.x", b"once")
            await cb.flush()
            # Either link may be the one refused (both, for 30 s, when each side finds its own
            # subject back at once): whatever crosses, crosses once.
            assert await collect(sub, quiet=1.0) in ([], ["loop.x:once:"])
        finally:
            await ca.close()
            await cb.close()


def _both_roles(listen_port: int, remote_url: str) -> str:
    return (
        f"leafnodes {{\n  listen: {LOOPBACK}:{listen_port}\n  reconnect: 1s\n"
        f"  remotes: [\n{remote(remote_url)}\n  ]\n}}\n"
    )
