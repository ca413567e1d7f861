"""Security wired into the running server, through the official nats-py client."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path

import bcrypt
import nats
import nkeys
import pytest

import pynatsd
from support.configured import server_from_config


@pytest.fixture
async def accounts_server(tmp_path: Path) -> AsyncIterator[pynatsd.Server]:
    conf = """
    accounts {
      A: {
        users: [{user: a, password: a}]
        exports: [{stream: "pub.>"}, {service: "help"}]
      }
      B: {
        users: [{user: b, password: b}]
        imports: [
          {stream: {account: A, subject: "pub.>"}, prefix: "froma"}
          {service: {account: A, subject: "help"}, to: "ahelp"}
        ]
      }
      C: { users: [{user: c, password: c}] }
    }
    """
    server = server_from_config(tmp_path, conf)
    async with server:
        yield server


async def test_accounts_are_isolated(accounts_server: pynatsd.Server) -> None:
    url = accounts_server.client_url
    a = await nats.connect(url, user="a", password="a")
    c = await nats.connect(url, user="c", password="c")
    sub_c = await c.subscribe("foo")
    sub_a = await a.subscribe("foo")
    await a.publish("foo", b"only A")
    await a.flush()
    assert (await sub_a.next_msg(timeout=2)).data == b"only A"
    with pytest.raises(nats.errors.TimeoutError):
        await sub_c.next_msg(timeout=0.3)
    await a.close()
    await c.close()


async def test_stream_import_with_prefix(accounts_server: pynatsd.Server) -> None:
    url = accounts_server.client_url
    a = await nats.connect(url, user="a", password="a")
    b = await nats.connect(url, user="b", password="b")
    sub = await b.subscribe("froma.pub.>")
    await b.flush()
    await a.publish("pub.x", b"exported")
    msg = await sub.next_msg(timeout=2)
    assert (msg.subject, msg.data) == ("froma.pub.x", b"exported")
    await a.close()
    await b.close()


async def test_service_import_request_reply(accounts_server: pynatsd.Server) -> None:
    url = accounts_server.client_url
    a = await nats.connect(url, user="a", password="a")
    b = await nats.connect(url, user="b", password="b")

    async def helper(msg: nats.aio.msg.Msg) -> None:
        await msg.respond(b"help from A: " + msg.data)

    await a.subscribe("help", cb=helper)
    await a.flush()
    reply = await b.request("ahelp", b"please", timeout=2)
    assert reply.data == b"help from A: please"
    await a.close()
    await b.close()


async def test_permissions_enforced(tmp_path: Path) -> None:
    conf = """
    authorization {
      users: [
        {user: p, password: p, permissions: {
          publish: {allow: ["ok.>"]}
          subscribe: {allow: ["ok.>"], deny: ["ok.secret"]}
        }}
        {user: admin, password: admin}
      ]
    }
    """
    server = server_from_config(tmp_path, conf)
    errors: list[str] = []

    async def on_error(e: Exception) -> None:
        errors.append(str(e))

    async with server:
        nc = await nats.connect(server.client_url, user="p", password="p", error_cb=on_error)
        admin = await nats.connect(server.client_url, user="admin", password="admin")
        wide = await nc.subscribe("ok.>")
        await nc.subscribe("not.ok")
        await nc.publish("not.allowed", b"x")
        await nc.flush()
        await admin.publish("ok.secret", b"hidden")
        await admin.publish("ok.open", b"visible")
        await admin.flush()
        msg = await wide.next_msg(timeout=2)
        assert (msg.subject, msg.data) == ("ok.open", b"visible")
        with pytest.raises(nats.errors.TimeoutError):
            await wide.next_msg(timeout=0.3)
        for _ in range(20):
            if len(errors) >= 2:
                break
            await asyncio.sleep(0.05)
        # nats-py reports the server's -ERR text lower-cased.
        assert 'permissions violation for subscription to "not.ok"' in [e[6:] for e in errors]
        assert 'permissions violation for publish to "not.allowed"' in [e[6:] for e in errors]
        assert nc.is_connected
        await nc.close()
        await admin.close()


async def test_bcrypt_user(tmp_path: Path) -> None:
    hashed = bcrypt.hashpw(b"s3cret", bcrypt.gensalt(rounds=4)).decode()
    server = server_from_config(tmp_path, f"authorization {{ user: bob, password: '{hashed}' }}\n")
    async with server:
        nc = await nats.connect(server.client_url, user="bob", password="s3cret")
        assert nc.is_connected
        await nc.close()
        with pytest.raises(nats.errors.Error, match="Authorization Violation"):
            await nats.connect(
                server.client_url,
                user="bob",
                password="wrong",
                allow_reconnect=False,
                max_reconnect_attempts=0,
            )


async def test_nkey_user(tmp_path: Path) -> None:
    seed = nkeys.encode_seed(bytes(range(32)), nkeys.PREFIX_BYTE_USER)
    public = nkeys.from_seed(bytearray(seed)).public_key.decode()
    seed_file = tmp_path / "user.nk"
    seed_file.write_bytes(seed)
    server = server_from_config(tmp_path, f"authorization {{ users: [{{nkey: {public}}}] }}\n")
    async with server:
        nc = await nats.connect(server.client_url, nkeys_seed=str(seed_file))
        sub = await nc.subscribe("n")
        await nc.publish("n", b"signed in")
        assert (await sub.next_msg(timeout=2)).data == b"signed in"
        await nc.close()


async def test_account_connection_limit(tmp_path: Path) -> None:
    conf = """
    accounts { L: { users: [{user: l, password: l}], limits: {max_connections: 1} } }
    """
    server = server_from_config(tmp_path, conf)
    async with server:
        first = await nats.connect(server.client_url, user="l", password="l")
        with pytest.raises(nats.errors.Error, match="maximum account active connections exceeded"):
            await nats.connect(
                server.client_url,
                user="l",
                password="l",
                allow_reconnect=False,
                max_reconnect_attempts=0,
            )
        await first.close()


async def test_system_account_connect_and_disconnect_events(tmp_path: Path) -> None:
    conf = """
    accounts {
      SYS: { users: [{user: sys, password: sys}] }
      APP: { users: [{user: app, password: app}] }
    }
    system_account: SYS
    """
    server = server_from_config(tmp_path, conf)
    async with server:
        sys_nc = await nats.connect(server.client_url, user="sys", password="sys")
        # CONNECT and DISCONNECT (the account's counts, `.SERVER.CONNS`, come as well).
        events = await sys_nc.subscribe("$SYS.ACCOUNT.*.*")
        await sys_nc.flush()
        app = await nats.connect(server.client_url, user="app", password="app", name="worker")
        await app.publish("x", b"12345")
        await app.flush()
        await app.close()
        connect = json.loads((await events.next_msg(timeout=2)).data)
        assert connect["type"] == "io.nats.server.advisory.v1.client_connect"
        assert (connect["client"]["acc"], connect["client"]["name"]) == ("APP", "worker")
        assert connect["client"]["user"] == "app"
        gone = await events.next_msg(timeout=2)
        assert gone.subject == "$SYS.ACCOUNT.APP.DISCONNECT"
        body = json.loads(gone.data)
        assert body["received"] == {"msgs": 1, "bytes": 5}
        assert body["reason"] == "Client Closed"
        await sys_nc.close()
