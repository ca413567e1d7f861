"""A KV bucket of the hub mirrored into a KV of its leaf across the link, by the hub's JetStream
domain, as nats.go's `CreateKeyValue(Mirror: {Name, Domain: "hub"})` sets it up: the leaf's
stream `KV_<bucket>` mirrors the hub's through `external.api = $JS.hub.API`, and its server
creates the mirror's consumer by a request on that prefix and takes the deliveries over the
link. Each scenario runs for nats-server on both sides (the reference), a pynatsd leaf of a
nats-server hub, a nats-server leaf of a pynatsd hub, and pynatsd on both sides; compared:
what a leaf client reads from its own KV."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import nats
import nats.js.errors
import pytest
from nats.js.api import ExternalStream, StreamConfig, StreamSource
from nats.js.kv import KeyValue

from leafnode.topology import (
    Node,
    connect,
    eventually,
    hub_conf,
    leaf_conf,
    remote,
    running,
    wait_leafs,
)
from support.ports import LOOPBACK, free_port

SETUPS = [("go", "go"), ("go", "py"), ("py", "go"), ("py", "py")]
SETUP_IDS = ["go-hub-go-leaf", "go-hub-py-leaf", "py-hub-go-leaf", "py-hub-py-leaf"]
BUCKET = "CONFIG"


@pytest.fixture(params=SETUPS, ids=SETUP_IDS)
def pair(request: pytest.FixtureRequest) -> tuple[str, str]:
    return tuple(request.param)  # type: ignore[return-value]


def _nodes(tmp_path: Path, pair: tuple[str, str]) -> tuple[Node, Node]:
    hub_kind, leaf_kind = pair
    port = free_port()
    hub_js = f'jetstream {{ domain: hub, store_dir: "{tmp_path / "hub-js"}" }}\n'
    leaf_js = f'jetstream {{ domain: leaf, store_dir: "{tmp_path / "leaf-js"}" }}\n'
    hub = Node(hub_kind, "HUB", hub_conf(port, hub_js), tmp_path)
    url = f"nats-leaf://{LOOPBACK}:{port}"
    leaf = Node(leaf_kind, "LEAF", leaf_conf(remote(url), leaf_js), tmp_path)
    return hub, leaf


def _mirror_config(history: int) -> StreamConfig:
    """The leaf's bucket as nats.go creates a KV mirror of another domain's bucket."""
    return StreamConfig(
        name=f"KV_{BUCKET}",
        mirror=StreamSource(name=f"KV_{BUCKET}", external=ExternalStream(api="$JS.hub.API")),
        mirror_direct=True,
        allow_direct=True,
        allow_rollup_hdrs=True,
        deny_delete=True,
        discard=nats.js.api.DiscardPolicy.NEW,
        max_msgs_per_subject=history,
        max_msgs=-1,
        max_consumers=-1,
    )


async def _hub_bucket(hub: Node) -> tuple[nats.NATS, KeyValue]:
    nc = await connect(hub)
    kv = await nc.jetstream().create_key_value(bucket=BUCKET, history=5)
    return nc, kv


async def _leaf_reads(leaf: Node, expected: dict[str, bytes], timeout: float = 30.0) -> None:
    """Until a client of the leaf reads `expected` from the leaf's own copy of the bucket."""
    nc = await connect(leaf)
    try:
        kv = await nc.jetstream().key_value(BUCKET)

        async def check() -> bool:
            for key, value in expected.items():
                try:
                    entry = await kv.get(key)
                except (nats.js.errors.KeyNotFoundError, nats.errors.TimeoutError):
                    return False
                if entry.value != value:
                    return False
            return True

        await eventually(check, timeout)
    finally:
        await nc.close()


async def test_hub_bucket_mirrored_on_the_leaf(tmp_path: Path, pair: tuple[str, str]) -> None:
    hub, leaf = _nodes(tmp_path, pair)
    async with running(hub, leaf):
        await wait_leafs(hub, 1)
        ch, kv = await _hub_bucket(hub)
        cl = await connect(leaf)
        try:
            await kv.put("color", b"blue")
            await kv.put("size", b"10")
            info = await cl.jetstream().add_stream(_mirror_config(5))
            assert info.config.mirror is not None
            await _leaf_reads(leaf, {"color": b"blue", "size": b"10"})
            # Values put on the hub afterwards follow, updates included.
            await kv.put("color", b"green")
            await kv.put("shape", b"round")
            await _leaf_reads(leaf, {"color": b"green", "shape": b"round", "size": b"10"})
            # The mirror keeps the origin's sequences, and says where it copies from.
            mirror = await cl.jetstream().stream_info(f"KV_{BUCKET}")
            assert mirror.state.last_seq == 4
            assert mirror.mirror is not None and mirror.mirror.name == f"KV_{BUCKET}"
            assert mirror.config.mirror is not None and mirror.config.mirror.external is not None
            assert mirror.config.mirror.external.api == "$JS.hub.API"
            # On the hub, the mirror's consumer is a direct one: neither listed nor counted.
            origin = await ch.jetstream().stream_info(f"KV_{BUCKET}")
            assert origin.state.consumer_count == 0
            assert await ch.jetstream().consumers_info(f"KV_{BUCKET}") == []
        finally:
            await ch.close()
            await cl.close()


async def test_mirror_survives_a_leaf_restart(tmp_path: Path, pair: tuple[str, str]) -> None:
    """The leaf goes down; what it copied stays, and what the hub took meanwhile follows."""
    hub, leaf = _nodes(tmp_path, pair)
    async with running(hub, leaf):
        await wait_leafs(hub, 1)
        ch, kv = await _hub_bucket(hub)
        try:
            await kv.put("a", b"1")
            cl = await connect(leaf)
            await cl.jetstream().add_stream(_mirror_config(5))
            await cl.close()
            await _leaf_reads(leaf, {"a": b"1"})
            await leaf.stop()
            await kv.put("a", b"2")
            await kv.put("b", b"3")
            await leaf.start()
            await wait_leafs(hub, 1)
            await _leaf_reads(leaf, {"a": b"2", "b": b"3"})
            cl = await connect(leaf)
            state = (await cl.jetstream().stream_info(f"KV_{BUCKET}")).state
            await cl.close()
            assert (state.first_seq, state.last_seq, state.messages) == (1, 3, 3)
        finally:
            await ch.close()


async def test_mirror_catches_up_after_the_link_was_down(
    tmp_path: Path, pair: tuple[str, str]
) -> None:
    """The hub restarts (its bucket on disk): the leaf's mirror finds the new link, asks
    again for what follows its last copy, and catches up."""
    hub, leaf = _nodes(tmp_path, pair)
    async with running(hub, leaf):
        await wait_leafs(hub, 1)
        ch, kv = await _hub_bucket(hub)
        await kv.put("a", b"1")
        cl = await connect(leaf)
        await cl.jetstream().add_stream(_mirror_config(5))
        await cl.close()
        await _leaf_reads(leaf, {"a": b"1"})
        await ch.close()
        await hub.stop()
        await asyncio.sleep(1.0)
        await hub.start()
        await wait_leafs(hub, 1)
        ch = await connect(hub)
        try:
            kv = await ch.jetstream().key_value(BUCKET)
            await kv.put("a", b"4")
            await kv.put("c", b"5")
            await _leaf_reads(leaf, {"a": b"4", "c": b"5"}, timeout=60.0)
        finally:
            await ch.close()


@asynccontextmanager
async def _linked(pair: tuple[str, str], tmp_path: Path) -> AsyncIterator[tuple[Any, Any]]:
    """The hub and its leaf running (in a new `tmp_path`), and a JetStream context of a
    client of each: (hub's, leaf's)."""
    tmp_path.mkdir()
    hub, leaf = _nodes(tmp_path, pair)
    async with running(hub, leaf):
        await wait_leafs(hub, 1)
        ch, cl = await connect(hub), await connect(leaf)
        try:
            yield ch.jetstream(), cl.jetstream()
        finally:
            await ch.close()
            await cl.close()


async def _sourced(pair: tuple[str, str], tmp_path: Path) -> list[Any]:
    """A stream of the leaf sourcing the European orders of a stream of the hub: what it holds
    as (subject, body, its `Nats-Stream-Source` without the origin's identity), then its
    source info (without `active`)."""
    async with _linked(pair, tmp_path) as (hjs, ljs):
        await hjs.add_stream(name="ORDERS", subjects=["orders.>"])
        for region, n in (("eu", 1), ("us", 2), ("eu", 3)):
            await hjs.publish(f"orders.{region}.{n}", f"order {n}".encode())
        external = ExternalStream(api="$JS.hub.API")
        source = StreamSource(name="ORDERS", filter_subject="orders.eu.>", external=external)
        await ljs.add_stream(name="EU", sources=[source])
        await hjs.publish("orders.eu.4", b"order 4")

        async def copied() -> bool:
            return (await ljs.stream_info("EU")).state.messages == 3

        await eventually(copied, 30.0)
        held = []
        for seq in (1, 2, 3):
            msg = await ljs.get_msg("EU", seq)
            origin = (msg.headers or {}).get("Nats-Stream-Source", "")
            held.append((msg.subject or "", msg.data or b"", origin.rsplit(" ", 1)[0]))
        reply = await ljs._nc.request("$JS.API.STREAM.INFO.EU", b"", timeout=5)
        sources = json.loads(reply.data)["sources"]
        return [*held, [{k: v for k, v in si.items() if k != "active"} for si in sources]]


async def test_hub_stream_sourced_by_the_leaf(tmp_path: Path, pair: tuple[str, str]) -> None:
    """A source with a filter, across the link: the same messages and source headers as
    between two nats-servers (the external API prefix's hash in the origin's name)."""
    got = await _sourced(pair, tmp_path / "run")
    if pair == ("go", "go"):
        assert [(s, d) for s, d, _ in got[:3]] == [
            ("orders.eu.1", b"order 1"),
            ("orders.eu.3", b"order 3"),
            ("orders.eu.4", b"order 4"),
        ]
        return
    assert got == await _sourced(("go", "go"), tmp_path / "reference")


async def _recreated(pair: tuple[str, str], tmp_path: Path) -> list[tuple[str, bytes]]:
    """A stream of the leaf sourcing one of the hub that is deleted and created again: what
    the source holds once the new one's messages came (the source notices the origin's new
    identity when it sets up its consumer again, and copies the new stream from its start)."""
    async with _linked(pair, tmp_path) as (hjs, ljs):
        await hjs.add_stream(name="EVENTS", subjects=["events.>"])
        await hjs.publish("events.old", b"before")
        external = ExternalStream(api="$JS.hub.API")
        await ljs.add_stream(name="ALL", sources=[StreamSource(name="EVENTS", external=external)])

        async def holds(count: int) -> bool:
            return (await ljs.stream_info("ALL")).state.messages == count

        await eventually(lambda: holds(1), 30.0)
        await hjs.delete_stream("EVENTS")
        await hjs.add_stream(name="EVENTS", subjects=["events.>"])
        await hjs.publish("events.new", b"after")
        await eventually(lambda: holds(2), 60.0)
        held = []
        for seq in (1, 2):
            msg = await ljs.get_msg("ALL", seq)
            held.append((msg.subject or "", msg.data or b""))
        return held


async def test_source_follows_a_recreated_origin(tmp_path: Path, pair: tuple[str, str]) -> None:
    got = await _recreated(pair, tmp_path / "run")
    assert got == [("events.old", b"before"), ("events.new", b"after")]


async def _cleaned_up(pair: tuple[str, str], tmp_path: Path) -> list[Any]:
    """A stream of the leaf sourcing an interest-retention stream of the hub, then deleted:
    the hub's consumer names while the source runs (a durable that acks by flow control,
    so that nothing leaves the origin before it was copied) and after the deletion."""
    async with _linked(pair, tmp_path) as (hjs, ljs):
        await hjs.add_stream(name="JOBS", subjects=["jobs.>"], retention="interest")
        external = ExternalStream(api="$JS.hub.API")
        await ljs.add_stream(name="COPY", sources=[StreamSource(name="JOBS", external=external)])

        async def following() -> bool:
            return bool(await hjs.consumers_info("JOBS"))

        # An interest stream keeps a message only for the consumers there when it comes.
        await eventually(following, 30.0)
        await hjs.publish("jobs.1", b"one")

        async def copied() -> bool:
            return (await ljs.stream_info("COPY")).state.messages == 1

        await eventually(copied, 30.0)
        during = [c.config.ack_policy for c in await hjs.consumers_info("JOBS")]
        await ljs.delete_stream("COPY")

        async def gone() -> bool:
            return not await hjs.consumers_info("JOBS")

        await eventually(gone, 15.0)
        return [during, (await hjs.stream_info("JOBS")).state.messages]


async def test_deleted_source_removes_its_consumer(tmp_path: Path, pair: tuple[str, str]) -> None:
    got = await _cleaned_up(pair, tmp_path / "run")
    assert got == [["flow_control"], 0]
