"""The official nats-py client against pynatsd: the core features a user relies on."""

from __future__ import annotations

import asyncio

import nats
import pytest
from nats.errors import MaxPayloadError, NoRespondersError, TimeoutError

import pynatsd


async def test_pub_sub(server: pynatsd.Server) -> None:
    nc = await nats.connect(server.client_url)
    sub = await nc.subscribe("greet.*")
    await nc.publish("greet.joe", b"hello")
    msg = await sub.next_msg(timeout=2)
    assert (msg.subject, msg.data) == ("greet.joe", b"hello")
    await nc.close()


async def test_wildcards(server: pynatsd.Server) -> None:
    nc = await nats.connect(server.client_url)
    full = await nc.subscribe("a.>")
    one = await nc.subscribe("a.*")
    await nc.publish("a.b", b"1")
    await nc.publish("a.b.c", b"2")
    await nc.flush()
    got_full = [(await full.next_msg(timeout=2)).subject for _ in range(2)]
    got_one = [(await one.next_msg(timeout=2)).subject]
    assert got_full == ["a.b", "a.b.c"]
    assert got_one == ["a.b"]
    with pytest.raises(TimeoutError):
        await one.next_msg(timeout=0.2)
    await nc.close()


async def test_queue_group_delivers_once(server: pynatsd.Server) -> None:
    nc = await nats.connect(server.client_url)
    received: list[str] = []

    async def handler(msg: nats.aio.msg.Msg) -> None:
        received.append(msg.subject)

    for _ in range(4):
        await nc.subscribe("jobs", queue="workers", cb=handler)
    for _ in range(20):
        await nc.publish("jobs", b"x")
    await nc.flush()
    await asyncio.sleep(0.2)
    assert len(received) == 20
    await nc.close()


async def test_request_reply(server: pynatsd.Server) -> None:
    nc = await nats.connect(server.client_url)

    async def echo(msg: nats.aio.msg.Msg) -> None:
        await msg.respond(msg.data.upper())

    await nc.subscribe("svc.echo", cb=echo)
    reply = await nc.request("svc.echo", b"ping", timeout=2)
    assert reply.data == b"PING"
    await nc.close()


async def test_no_responders(server: pynatsd.Server) -> None:
    nc = await nats.connect(server.client_url)
    with pytest.raises(NoRespondersError):
        await nc.request("nobody.home", b"?", timeout=2)
    await nc.close()


async def test_headers(server: pynatsd.Server) -> None:
    nc = await nats.connect(server.client_url)
    sub = await nc.subscribe("h")
    await nc.publish("h", b"body", headers={"Trace-Id": "abc", "X": "1"})
    msg = await sub.next_msg(timeout=2)
    assert msg.data == b"body"
    assert msg.headers == {"Trace-Id": "abc", "X": "1"}
    await nc.close()


async def test_auto_unsubscribe(server: pynatsd.Server) -> None:
    nc = await nats.connect(server.client_url)
    sub = await nc.subscribe("limited", max_msgs=2)
    for i in range(5):
        await nc.publish("limited", str(i).encode())
    await nc.flush()
    assert (await sub.next_msg(timeout=2)).data == b"0"
    assert (await sub.next_msg(timeout=2)).data == b"1"
    await asyncio.sleep(0.1)
    assert sub.pending_msgs == 0
    await nc.close()


async def test_drain(server: pynatsd.Server) -> None:
    nc = await nats.connect(server.client_url)
    got: list[bytes] = []

    async def slow(msg: nats.aio.msg.Msg) -> None:
        await asyncio.sleep(0.01)
        got.append(msg.data)

    await nc.subscribe("d", cb=slow)
    for i in range(10):
        await nc.publish("d", str(i).encode())
    await nc.flush()
    await nc.drain()
    assert got == [str(i).encode() for i in range(10)]


async def test_max_payload_is_announced_and_enforced(server: pynatsd.Server) -> None:
    nc = await nats.connect(server.client_url)
    assert nc.max_payload == 1024 * 1024
    with pytest.raises(MaxPayloadError):
        await nc.publish("big", b"x" * (1024 * 1024 + 1))
    await nc.close()


async def test_reconnect_after_restart() -> None:
    async with pynatsd.Server(port=0) as first:
        port = first.port
        reconnected = asyncio.Event()

        async def on_reconnect() -> None:
            reconnected.set()

        nc = await nats.connect(
            first.client_url, reconnected_cb=on_reconnect, reconnect_time_wait=0.1
        )
        sub = await nc.subscribe("after")
        await first.shutdown()
        async with pynatsd.Server(port=port):
            await asyncio.wait_for(reconnected.wait(), 10)
            await nc.publish("after", b"back")
            msg = await sub.next_msg(timeout=2)
            assert msg.data == b"back"
            await nc.close()
