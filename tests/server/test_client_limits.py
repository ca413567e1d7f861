"""Limits and liveness: max_payload, max_connections, max_subscriptions, ping/stale, auth."""

from __future__ import annotations

import asyncio
import json

import nats
import pytest

import pynatsd
from support.rawclient import RawClient

# protocol 0: no async INFO after the first PONG, so replies are exactly what a test expects.
CONNECT = b'CONNECT {"verbose":false,"pedantic":false,"protocol":0}\r\n'


async def test_max_payload_checked_on_pub_line() -> None:
    async with pynatsd.Server(port=0, max_payload=16) as server:
        c = await RawClient.connect(server.port)
        assert json.loads(c.info[5:])["max_payload"] == 16
        # Only the control line: the error comes before any payload byte is sent.
        await c.send(CONNECT + b"PUB foo 17\r\n")
        out, closed = await c.read_all()
        assert out == b"-ERR 'Maximum Payload Violation'\r\n"
        assert closed


async def test_max_connections() -> None:
    async with pynatsd.Server(port=0, max_connections=1) as server:
        first = await RawClient.connect(server.port)
        await first.send(CONNECT + b"PING\r\n")
        await first.read_until(b"PONG\r\n")
        second = await RawClient.connect(server.port)
        out, closed = await second.read_all()
        assert out == b"-ERR 'maximum connections exceeded'\r\n"
        assert closed
        await first.close()


async def test_max_subscriptions_keeps_connection() -> None:
    async with pynatsd.Server(port=0, max_subscriptions=2) as server:
        c = await RawClient.connect(server.port)
        await c.send(CONNECT + b"SUB a 1\r\nSUB b 2\r\nSUB c 3\r\nPING\r\n")
        out = await c.read_until(b"PONG\r\n")
        assert out == b"-ERR 'maximum subscriptions exceeded'\r\nPONG\r\n"
        await c.send(b"PUB b 2\r\nhi\r\nPING\r\n")
        assert await c.read_until(b"PONG\r\n") == b"MSG b 2 2\r\nhi\r\nPONG\r\n"
        await c.close()


async def test_stale_connection_after_unanswered_pings() -> None:
    async with pynatsd.Server(port=0, ping_interval=0.1, ping_max=2) as server:
        c = await RawClient.connect(server.port)
        await c.send(CONNECT)
        out, closed = await c.read_all(quiet=2, limit=5)
        assert out == b"PING\r\nPING\r\n-ERR 'Stale Connection'\r\n"
        assert closed
        assert server.stale_connections == 1


async def test_answered_pings_keep_connection() -> None:
    async with pynatsd.Server(port=0, ping_interval=0.1, ping_max=1) as server:
        nc = await nats.connect(server.client_url)
        await asyncio.sleep(0.6)
        assert nc.is_connected
        assert server.stale_connections == 0
        await nc.close()


@pytest.mark.parametrize(
    ("options", "connect", "ok"),
    [
        ({"username": "u", "password": "p"}, {"user": "u", "pass": "p"}, True),
        ({"username": "u", "password": "p"}, {"user": "u", "pass": "x"}, False),
        ({"username": "u", "password": "p"}, {}, False),
        ({"authorization": "s3cr3t"}, {"auth_token": "s3cr3t"}, True),
        ({"authorization": "s3cr3t"}, {"auth_token": "nope"}, False),
    ],
)
async def test_simple_auth(options: dict[str, str], connect: dict[str, str], ok: bool) -> None:
    async with pynatsd.Server(port=0, **options) as server:
        c = await RawClient.connect(server.port)
        assert json.loads(c.info[5:])["auth_required"] is True
        body = json.dumps({"verbose": False, "pedantic": False, **connect}).encode()
        await c.send(b"CONNECT " + body + b"\r\nPING\r\n")
        out, closed = await c.read_all()
        if ok:
            assert out.startswith(b"PONG\r\n")
            assert not closed
        else:
            assert out == b"-ERR 'Authorization Violation'\r\n"
            assert closed
        await c.close()


async def test_auth_requires_connect_first() -> None:
    async with pynatsd.Server(port=0, authorization="t") as server:
        c = await RawClient.connect(server.port)
        await c.send(b"PING\r\n")
        out, closed = await c.read_all()
        assert (out, closed) == (b"-ERR 'Authorization Violation'\r\n", True)


async def test_authentication_timeout() -> None:
    async with pynatsd.Server(port=0, authorization="t", auth_timeout=0.2) as server:
        c = await RawClient.connect(server.port)
        out, closed = await c.read_all(quiet=1)
        assert (out, closed) == (b"-ERR 'Authentication Timeout'\r\n", True)


async def test_natspy_with_user_and_token() -> None:
    async with pynatsd.Server(port=0, username="alice", password="pw") as server:
        nc = await nats.connect(server.client_url, user="alice", password="pw")
        sub = await nc.subscribe("x")
        await nc.publish("x", b"1")
        assert (await sub.next_msg(timeout=2)).data == b"1"
        await nc.close()
        with pytest.raises(nats.errors.Error, match="Authorization Violation"):
            await nats.connect(
                server.client_url,
                user="alice",
                password="bad",
                allow_reconnect=False,
                max_reconnect_attempts=0,
                connect_timeout=1,
            )


async def test_lame_duck_mode_informs_and_closes() -> None:
    async with pynatsd.Server(port=0, lame_duck_grace_period=0.1, lame_duck_duration=0.3) as server:
        c = await RawClient.connect(server.port)
        await c.send(CONNECT.replace(b'"protocol":0', b'"protocol":1') + b"PING\r\n")
        await c.read_until(b"PONG\r\n")
        await c.read_until(b"\r\n")  # the async INFO (connect_info) protocol-1 clients get
        await asyncio.wait_for(server.lame_duck_mode(), 5)
        out, closed = await c.read_all(quiet=1)
        assert out.startswith(b"INFO ")
        assert json.loads(out[5:].split(b"\r\n")[0])["ldm"] is True
        assert closed
        assert not server.running
