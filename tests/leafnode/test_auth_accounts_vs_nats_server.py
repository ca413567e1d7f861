"""Leaf node authorization and accounts, pynatsd against nats-server: two local accounts over two
remotes bound to two hub accounts, user/password and nkey remote auth, wrong credentials refused
with nats-server's error (the same bytes from either hub), and a leaf's interest crossing the
hub's routes."""

from __future__ import annotations

import asyncio
import json
import socket
from pathlib import Path

import pytest

from leafnode.topology import (
    Node,
    connect,
    hub_conf,
    leaf_conf,
    remote,
    running,
    wait_leafs,
)
from support.cluster import wait_interest
from support.jwts import account_jwt, account_key, make_operator, user_jwt, user_key
from support.ports import LOOPBACK, free_port

HUB_ACCOUNTS = """
accounts {
  A: { users: [ {user: ca, password: pa} ] }
  B: { users: [ {user: cb, password: pb} ] }
}
"""
LEAF_ACCOUNTS = """
accounts {
  LA: { users: [ {user: la, password: pa} ] }
  LB: { users: [ {user: lb, password: pb} ] }
}
"""


async def test_two_accounts_over_two_remotes(tmp_path: Path, setup: tuple[str, str]) -> None:
    hub_kind, leaf_kind = setup
    port = free_port()
    users = "authorization { users: [ {user: ra, password: xa, account: A}, "
    users += "{user: rb, password: xb, account: B} ] }"
    hub = Node(hub_kind, "HUB", hub_conf(port, HUB_ACCOUNTS, users), tmp_path)
    remotes = "\n".join(
        (
            remote(f"nats-leaf://ra:xa@{LOOPBACK}:{port}", ", account: LA"),
            remote(f"nats-leaf://rb:xb@{LOOPBACK}:{port}", ", account: LB"),
        )
    )
    leaf = Node(leaf_kind, "LEAF", leaf_conf(remotes, LEAF_ACCOUNTS), tmp_path)
    async with running(hub, leaf):
        await wait_leafs(hub, 2)
        leafz = await hub.leafz()
        assert sorted(entry["account"] for entry in leafz["leafs"]) == ["A", "B"]
        hub_a = await connect(hub, user="ca", password="pa")
        hub_b = await connect(hub, user="cb", password="pb")
        leaf_a = await connect(leaf, user="la", password="pa")
        leaf_b = await connect(leaf, user="lb", password="pb")
        clients = (hub_a, hub_b, leaf_a, leaf_b)
        try:
            subs = [await c.subscribe("acc.x") for c in clients]
            await wait_interest(leaf_a, [hub_a])
            await wait_interest(leaf_b, [hub_b])
            await wait_interest(hub_a, [leaf_a])
            await wait_interest(hub_b, [leaf_b])
            await hub_a.publish("acc.x", b"from hub A")
            await leaf_b.publish("acc.x", b"from leaf B")
            for c in clients:
                await c.flush()
            await wait_interest(leaf_a, [hub_a])
            await wait_interest(hub_b, [leaf_b])
            seen = []
            for sub in subs:
                got = []
                while sub.pending_msgs:
                    got.append((await sub.next_msg(timeout=1)).data.decode())
                seen.append(got)
            # A reaches LA only, LB reaches B only.
            assert seen == [["from hub A"], ["from leaf B"], ["from hub A"], ["from leaf B"]]
        finally:
            for c in clients:
                await c.close()


async def test_nkey_remote_auth(tmp_path: Path, setup: tuple[str, str]) -> None:
    hub_kind, leaf_kind = setup
    key = user_key()
    port = free_port()
    hub = Node(
        hub_kind, "HUB", hub_conf(port, "", f"authorization {{ nkey: {key.public} }}"), tmp_path
    )
    seed = key.kp.seed.decode()
    fields = f', nkey: "{seed}"'
    leaf = Node(
        leaf_kind, "LEAF", leaf_conf(remote(f"nats-leaf://{LOOPBACK}:{port}", fields)), tmp_path
    )
    async with running(hub, leaf):
        await wait_leafs(hub, 1)
        await wait_leafs(leaf, 1)


def _raw_leaf_connect(port: int, connect: dict[str, object], sign_with: object = None) -> bytes:
    """Dial a hub's leaf port as a leaf would, send CONNECT (with `sign_with`'s signature of the
    hub's nonce), and return the first line the hub answers with."""
    with socket.create_connection((LOOPBACK, port), timeout=5) as sock:
        reader = sock.makefile("rb")
        info = json.loads(reader.readline()[5:])
        body = dict(connect)
        if sign_with is not None:
            body["sig"] = sign_with.sign_nonce(info["nonce"])  # type: ignore[attr-defined]
        sock.sendall(b"CONNECT " + json.dumps(body).encode() + b"\r\nPING\r\n")
        line = reader.readline()
        while line.startswith(b"INFO ") and b'"connect_info"' not in line:
            line = reader.readline()
        return line


@pytest.mark.parametrize("hub_kind", ["go", "py"])
async def test_wrong_credentials_refused(tmp_path: Path, hub_kind: str) -> None:
    port = free_port()
    key, other = user_key(), user_key()
    auth = "authorization { users: [ {user: ru, password: rp, account: A} ] }"
    hub = Node(hub_kind, "HUB", hub_conf(port, HUB_ACCOUNTS, auth), tmp_path / "u")
    (tmp_path / "u").mkdir()
    nkey_port = free_port()
    nkey_hub = Node(
        hub_kind,
        "NKHUB",
        hub_conf(nkey_port, "", f"authorization {{ nkey: {key.public} }}"),
        tmp_path,
    )
    async with running(hub, nkey_hub):
        leaf = {"name": "RAW", "headers": True}
        answers = await asyncio.gather(
            asyncio.to_thread(_raw_leaf_connect, port, {**leaf, "user": "ru", "pass": "bad"}),
            asyncio.to_thread(_raw_leaf_connect, port, {**leaf, "user": "nobody", "pass": "rp"}),
            asyncio.to_thread(_raw_leaf_connect, nkey_port, {**leaf, "nkey": key.public}, other),
            asyncio.to_thread(
                _raw_leaf_connect, port, {**leaf, "user": "ru", "pass": "rp", "lang": "py"}
            ),
        )
        assert answers == [
            b"-ERR 'Authorization Violation'\r\n",
            b"-ERR 'Authorization Violation'\r\n",
            b"-ERR 'Authorization Violation'\r\n",
            b"-ERR 'attempted to connect to leaf node port'\r\n",
        ]
        good = await asyncio.to_thread(
            _raw_leaf_connect, port, {**leaf, "user": "ru", "pass": "rp"}
        )
        assert json.loads(good[5:])["remote_account"] == "A"
        signed = await asyncio.to_thread(
            _raw_leaf_connect, nkey_port, {**leaf, "nkey": key.public}, key
        )
        assert json.loads(signed[5:])["connect_info"] is True


@pytest.mark.parametrize("hub_kind", ["go", "py"])
async def test_leaf_interest_crosses_the_hubs_routes(tmp_path: Path, hub_kind: str) -> None:
    """A nats-server leaf of a hub clustered with a nats-server node: traffic between the leaf
    and the other node crosses the hub, both ways."""
    leaf_port, hub_route, other_route = free_port(), free_port(), free_port()

    def cluster(own: int, peer: int) -> str:
        return (
            f"cluster {{ name: C, listen: {LOOPBACK}:{own}, "
            f"routes: [nats-route://{LOOPBACK}:{peer}] }}\n"
        )

    hub = Node(hub_kind, "HUB", hub_conf(leaf_port, cluster(hub_route, other_route)), tmp_path)
    other = Node("go", "OTHER", cluster(other_route, hub_route), tmp_path)
    url = f"nats-leaf://{LOOPBACK}:{leaf_port}"
    leaf = Node("go", "LEAF", leaf_conf(remote(url)), tmp_path)
    async with running(hub, other, leaf):
        await wait_leafs(hub, 1)
        c_other, c_leaf = await connect(other), await connect(leaf)
        try:
            on_leaf = await c_leaf.subscribe("xr.leaf")
            on_other = await c_other.subscribe("xr.other")
            await wait_interest(c_leaf, [c_other])
            await wait_interest(c_other, [c_leaf])
            await c_other.publish("xr.leaf", b"1")
            await c_leaf.publish("xr.other", b"2")
            await c_other.flush()
            await c_leaf.flush()
            assert (await on_leaf.next_msg(timeout=5)).data == b"1"
            assert (await on_other.next_msg(timeout=5)).data == b"2"
        finally:
            await c_other.close()
            await c_leaf.close()


async def test_credentials_remote_auth_to_an_operator_mode_hub(
    tmp_path: Path, setup: tuple[str, str]
) -> None:
    """A remote with a .creds file (user JWT and seed) joins a hub in operator mode, bound to
    the user's account; traffic of that account crosses."""
    hub_kind, leaf_kind = setup
    op = make_operator()
    account, user = account_key(), user_key()
    accounts = {account.public: account_jwt(op.signing, account), op.system.public: op.system_jwt}
    preload = "\n".join(f"  {k}: {v}" for k, v in accounts.items())
    operator = f"operator: {op.jwt}\nresolver: MEMORY\nresolver_preload {{\n{preload}\n}}\n"
    token = user_jwt(account, user)
    creds = tmp_path / "leaf.creds"
    creds.write_text(
        f"-----BEGIN NATS USER JWT-----\n{token}\n------END NATS USER JWT------\n\n"
        f"-----BEGIN USER NKEY SEED-----\n{user.kp.seed.decode()}\n"
        "------END USER NKEY SEED------\n"
    )
    port = free_port()
    hub = Node(hub_kind, "HUB", hub_conf(port, operator), tmp_path)
    fields = f', credentials: "{creds}"'
    leaf = Node(
        leaf_kind, "LEAF", leaf_conf(remote(f"nats-leaf://{LOOPBACK}:{port}", fields)), tmp_path
    )
    async with running(hub, leaf):
        await wait_leafs(hub, 1)
        (entry,) = (await hub.leafz())["leafs"]
        assert entry["account"] == account.public
        ch = await connect(hub, user_credentials=str(creds))
        cl = await connect(leaf)
        try:
            sub = await ch.subscribe("creds.x")
            await wait_interest(ch, [cl])
            await cl.publish("creds.x", b"signed in")
            await cl.flush()
            assert (await sub.next_msg(timeout=5)).data == b"signed in"
        finally:
            await ch.close()
            await cl.close()
