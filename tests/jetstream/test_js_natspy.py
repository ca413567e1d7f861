"""nats-py's JetStream client against pynatsd: streams, publish acks, get, pull consumers."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import nats
import pytest
from nats.js.errors import BadRequestError, NoStreamResponseError, NotFoundError

import pynatsd


@pytest.fixture
async def js_server(tmp_path: Path) -> AsyncIterator[pynatsd.Server]:
    async with pynatsd.Server(port=0, jetstream=True, store_dir=str(tmp_path)) as srv:
        yield srv


async def test_stream_publish_ack_and_dedupe(js_server: pynatsd.Server) -> None:
    nc = await nats.connect(js_server.client_url)
    js = nc.jetstream()
    info = await js.add_stream(name="ORDERS", subjects=["orders.>"])
    assert info.config.duplicate_window == 120.0
    acks = [
        await js.publish(f"orders.{i}", b"x", headers={"Nats-Msg-Id": f"m{i}"}) for i in range(3)
    ]
    assert [a.seq for a in acks] == [1, 2, 3]
    dup = await js.publish("orders.0", b"again", headers={"Nats-Msg-Id": "m0"})
    assert (dup.seq, dup.duplicate) == (1, True)
    state = (await js.stream_info("ORDERS")).state
    assert (state.messages, state.first_seq, state.last_seq) == (3, 1, 3)
    with pytest.raises(NoStreamResponseError):
        await js.publish("not.captured", b"x")
    await nc.close()


async def test_expected_last_sequence(js_server: pynatsd.Server) -> None:
    nc = await nats.connect(js_server.client_url)
    js = nc.jetstream()
    await js.add_stream(name="S", subjects=["s"])
    await js.publish("s", b"1")
    with pytest.raises(BadRequestError, match="wrong last sequence: 1"):
        await js.publish("s", b"2", headers={"Nats-Expected-Last-Sequence": "5"})
    ack = await js.publish("s", b"2", headers={"Nats-Expected-Last-Sequence": "1"})
    assert ack.seq == 2
    await nc.close()


async def test_get_msg_and_direct_get(js_server: pynatsd.Server) -> None:
    nc = await nats.connect(js_server.client_url)
    js = nc.jetstream()
    await js.add_stream(name="KV", subjects=["kv.>"], allow_direct=True)
    await js.publish("kv.a", b"1", headers={"H": "v"})
    await js.publish("kv.b", b"2")
    await js.publish("kv.a", b"3")
    msg = await js.get_msg("KV", seq=1)
    assert (msg.subject, msg.data, msg.headers) == ("kv.a", b"1", {"H": "v"})
    last = await js.get_last_msg("KV", "kv.a")
    assert (last.seq, last.data) == (3, b"3")
    direct = await js.get_msg("KV", seq=2, direct=True)
    assert (direct.subject, direct.data) == ("kv.b", b"2")
    with pytest.raises(NotFoundError):
        await js.get_msg("KV", seq=99)
    await nc.close()


async def test_pull_consumer_fetch_ack_nak(js_server: pynatsd.Server) -> None:
    nc = await nats.connect(js_server.client_url)
    js = nc.jetstream()
    await js.add_stream(name="Q", subjects=["q.*"])
    for i in range(5):
        await js.publish(f"q.{i}", str(i).encode())
    psub = await js.pull_subscribe("q.*", durable="worker", stream="Q")
    first = await psub.fetch(3, timeout=2)
    assert [m.data for m in first] == [b"0", b"1", b"2"]
    for m in first:
        await m.ack()
    rest = await psub.fetch(10, timeout=2)
    assert [m.data for m in rest] == [b"3", b"4"]
    await rest[0].nak()
    await rest[1].ack()
    again = await psub.fetch(1, timeout=2)
    assert again[0].data == b"3"
    assert again[0].metadata.num_delivered == 2
    await again[0].ack()
    info = await js.consumer_info("Q", "worker")
    assert (info.num_ack_pending, info.num_pending, info.ack_floor.stream_seq) == (0, 0, 5)
    with pytest.raises(nats.errors.TimeoutError):
        await psub.fetch(1, timeout=0.3)
    await nc.close()


async def test_purge_and_delete(js_server: pynatsd.Server) -> None:
    nc = await nats.connect(js_server.client_url)
    js = nc.jetstream()
    await js.add_stream(name="P", subjects=["p.>"])
    for i in range(4):
        await js.publish(f"p.{i % 2}", b"x")
    assert await js.purge_stream("P", subject="p.0")
    assert (await js.stream_info("P")).state.messages == 2
    assert await js.delete_stream("P")
    with pytest.raises(NotFoundError):
        await js.stream_info("P")
    await nc.close()


async def test_streams_survive_restart(tmp_path: Path) -> None:
    async with pynatsd.Server(port=0, jetstream=True, store_dir=str(tmp_path)) as srv:
        nc = await nats.connect(srv.client_url)
        js = nc.jetstream()
        await js.add_stream(name="D", subjects=["d"])
        for i in range(10):
            await js.publish("d", str(i).encode())
        psub = await js.pull_subscribe("d", durable="c", stream="D")
        for m in await psub.fetch(4, timeout=2):
            await m.ack()
        await asyncio.sleep(0.1)
        await nc.close()
    async with pynatsd.Server(port=0, jetstream=True, store_dir=str(tmp_path)) as srv:
        nc = await nats.connect(srv.client_url)
        js = nc.jetstream()
        assert (await js.stream_info("D")).state.messages == 10
        info = await js.consumer_info("D", "c")
        assert info.ack_floor.stream_seq == 4
        psub = await js.pull_subscribe("d", durable="c", stream="D")
        msgs = await psub.fetch(6, timeout=2)
        assert [m.data for m in msgs] == [str(i).encode() for i in range(4, 10)]
        await nc.close()


async def test_max_age_expires_without_new_messages(js_server: pynatsd.Server) -> None:
    nc = await nats.connect(js_server.client_url)
    js = nc.jetstream()
    await js.add_stream(name="TTL", subjects=["ttl"], max_age=0.3)
    await js.publish("ttl", b"short-lived")
    assert (await js.stream_info("TTL")).state.messages == 1
    for _ in range(40):  # bounded wait: up to 2 s for a 0.3 s max_age
        await asyncio.sleep(0.05)
        if (await js.stream_info("TTL")).state.messages == 0:
            break
    assert (await js.stream_info("TTL")).state.messages == 0
    await nc.close()
