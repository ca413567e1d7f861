"""Push consumers, key-value buckets, object stores, TTLs, mirrors and sources with nats-py's
JetStream client against pynatsd."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import nats
import pytest
from nats.aio.client import Client as NATS
from nats.js.api import ConsumerConfig, StreamSource, SubjectTransform
from nats.js.errors import KeyNotFoundError

import pynatsd


@pytest.fixture
async def nc(tmp_path: Path) -> AsyncIterator[NATS]:
    async with pynatsd.Server(port=0, jetstream=True, store_dir=str(tmp_path)) as srv:
        client = await nats.connect(srv.client_url)
        yield client
        await client.close()


async def wait_for(check: Any, timeout: float = 3.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not check():
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError("condition not reached")
        await asyncio.sleep(0.02)


async def test_push_consumer_waits_for_interest_then_delivers(nc: NATS) -> None:
    js = nc.jetstream()
    await js.add_stream(name="P", subjects=["p.*"])
    for i in range(5):
        await js.publish(f"p.{i}", str(i).encode())
    await js.add_consumer("P", ConsumerConfig(durable_name="d", deliver_subject="dlv"))
    assert not (await js.consumer_info("P", "d")).push_bound
    got: list[bytes] = []

    async def cb(msg: Any) -> None:
        got.append(msg.data)
        await msg.ack()

    await nc.subscribe("dlv", cb=cb)
    await wait_for(lambda: len(got) == 5)
    info = await js.consumer_info("P", "d")
    assert info.push_bound and info.num_pending == 0
    assert got == [b"0", b"1", b"2", b"3", b"4"]


async def test_deliver_group_spreads_messages(nc: NATS) -> None:
    js = nc.jetstream()
    await js.add_stream(name="Q", subjects=["q"])
    counts = [0, 0]

    def make_cb(i: int) -> Any:
        async def cb(msg: Any) -> None:
            counts[i] += 1

        return cb

    await js.subscribe("q", "workers", cb=make_cb(0))
    await js.subscribe("q", "workers", cb=make_cb(1))
    for i in range(60):
        await js.publish("q", str(i).encode())
    await wait_for(lambda: sum(counts) == 60)
    assert min(counts) > 5


async def test_ordered_consumer_recovers_from_a_lost_message(nc: NATS) -> None:
    js = nc.jetstream()
    await js.add_stream(name="O", subjects=["o"], storage="memory")
    for i in range(200):
        await js.publish("o", str(i).encode())
    dropped = False
    original = nc._build_message

    def lossy(*args: Any) -> Any:
        nonlocal dropped
        msg = original(*args)
        if not dropped and msg is not None and msg.data == b"50":
            dropped = True
            return None
        return msg

    nc._build_message = lossy  # type: ignore[method-assign]
    got: list[bytes] = []

    async def cb(msg: Any) -> None:
        got.append(msg.data)

    await js.subscribe("o", cb=cb, ordered_consumer=True, idle_heartbeat=0.2)
    await wait_for(lambda: len(got) >= 200, timeout=5)
    assert dropped
    assert got[:200] == [str(i).encode() for i in range(200)]


async def test_flow_control_window_stalls_until_answered(nc: NATS) -> None:
    js = nc.jetstream()
    await js.add_stream(name="F", subjects=["f"])
    for _ in range(40):
        await js.publish("f", b"x" * 100_000)
    got = 0

    async def cb(msg: Any) -> None:
        nonlocal got
        got += 1

    await js.subscribe("f", cb=cb, flow_control=True, idle_heartbeat=0.5)
    # nats-py answers flow-control requests itself: everything arrives.
    await wait_for(lambda: got == 40)


async def test_key_value_bucket(nc: NATS) -> None:
    js = nc.jetstream()
    kv = await js.create_key_value(bucket="B", history=3)
    assert await kv.put("a", b"1") == 1
    assert await kv.put("b", b"2") == 2
    assert await kv.update("a", b"3", last=1) == 3
    assert (await kv.get("a")).value == b"3"
    await kv.delete("b")
    with pytest.raises(KeyNotFoundError):
        await kv.get("b")
    assert sorted(await kv.keys()) == ["a"]
    history = await kv.history("a")
    assert [e.value for e in history] == [b"1", b"3"]
    watcher = await kv.watchall()
    first = await watcher.updates(timeout=2)
    deleted = await watcher.updates(timeout=2)
    assert first is not None and first.key == "a"
    assert deleted is not None and (deleted.key, deleted.operation) == ("b", "DEL")
    assert await watcher.updates(timeout=2) is None
    await kv.put("c", b"4")
    update = await watcher.updates(timeout=2)
    assert update is not None and (update.key, update.value) == ("c", b"4")
    await watcher.stop()
    await kv.purge("a")
    with pytest.raises(KeyNotFoundError):
        await kv.get("a")


async def test_kv_message_ttl_places_a_marker(nc: NATS) -> None:
    js = nc.jetstream()
    kv = await js.create_key_value(bucket="T", limit_marker_ttl=2.0)
    await kv.create("k", b"v", msg_ttl=1.0)
    watcher = await kv.watch("k", include_history=True)
    assert (await watcher.updates(timeout=2)).value == b"v"
    assert await watcher.updates(timeout=2) is None
    marker = await watcher.updates(timeout=3)
    assert marker is not None and marker.operation == "PURGE"
    stored = await js.get_msg("KV_T", subject="$KV.T.k")
    assert stored.headers is not None
    assert (stored.headers["Nats-Marker-Reason"], stored.headers["Nats-TTL"]) == ("MaxAge", "2s")
    info = await js.stream_info("KV_T")
    assert info.state.messages == 1  # the marker replaced the expired value
    await watcher.stop()


async def test_object_store_round_trip(nc: NATS) -> None:
    js = nc.jetstream()
    obs = await js.create_object_store("OBJ")
    blob = bytes(range(256)) * 2000
    await obs.put("file", blob)
    result = await obs.get("file")
    assert result.data == blob
    assert [o.name for o in await obs.list()] == ["file"]
    await obs.delete("file")


async def test_first_seq_transform_mirror_and_sources(nc: NATS) -> None:
    js = nc.jetstream()
    await js.add_stream(name="ORIGIN", subjects=["orig.*"], first_seq=100)
    for i in range(3):
        ack = await js.publish(f"orig.{i}", str(i).encode())
    assert ack.seq == 102
    await js.add_stream(name="MIR", mirror=StreamSource(name="ORIGIN"))
    await js.add_stream(
        name="SRC",
        sources=[
            StreamSource(
                name="ORIGIN",
                subject_transforms=[SubjectTransform(src="orig.*", dest="copy.{{wildcard(1)}}")],
            )
        ],
    )

    async def counts() -> tuple[int, int]:
        mir = await js.stream_info("MIR")
        src = await js.stream_info("SRC")
        return mir.state.messages, src.state.messages

    for _ in range(100):
        if await counts() == (3, 3):
            break
        await asyncio.sleep(0.02)
    assert await counts() == (3, 3)
    mirrored = await js.get_msg("MIR", seq=101)
    assert (mirrored.subject, mirrored.data) == ("orig.1", b"1")
    sourced = await js.get_msg("SRC", seq=2)
    assert (sourced.subject, sourced.data) == ("copy.1", b"1")
    await js.publish("orig.9", b"late")
    await asyncio.sleep(0.1)
    assert await counts() == (4, 4)
    # Promoting the mirror: drop its mirror configuration, keep the messages.
    info = await js.stream_info("MIR")
    promoted = await js.update_stream(config=info.config.evolve(mirror=None))
    assert promoted.config.mirror is None and promoted.state.messages == 4


async def test_state_survives_restart(tmp_path: Path) -> None:
    async with pynatsd.Server(port=0, jetstream=True, store_dir=str(tmp_path)) as srv:
        nc = await nats.connect(srv.client_url)
        js = nc.jetstream()
        await js.add_stream(name="R", subjects=["r"], allow_msg_ttl=True)
        for i in range(10):
            await js.publish("r", str(i).encode())
        psub = await js.pull_subscribe("r", durable="w")
        msgs = await psub.fetch(4)
        for m in msgs[:3]:
            await m.ack()
        await nc.flush()
        await asyncio.sleep(0.05)
        await nc.close()
    async with pynatsd.Server(port=0, jetstream=True, store_dir=str(tmp_path)) as srv:
        nc = await nats.connect(srv.client_url)
        js = nc.jetstream()
        info = await js.consumer_info("R", "w")
        assert (info.ack_floor.stream_seq, info.num_ack_pending, info.num_pending) == (3, 1, 6)
        psub = await js.pull_subscribe("r", durable="w")
        # As nats-server: the message pending at shutdown waits for its ack wait (30 s) before
        # it is redelivered; the next one comes first.
        msgs = await psub.fetch(1)
        assert msgs[0].data == b"4" and msgs[0].metadata.num_delivered == 1
        await nc.close()
