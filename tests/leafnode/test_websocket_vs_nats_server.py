"""A leaf dialing its hub's websocket listener (`ws://` and `wss://` remote URLs), pynatsd
against nats-server: a hub with `websocket { no_tls: true }` (or TLS) and a leaf, each of either
kind; messages and headers cross both ways, and /leafz shows the connection on both sides."""

from __future__ import annotations

from pathlib import Path

import pytest
from cryptography.x509.oid import NameOID

from leafnode.topology import (
    SETUP_IDS,
    SETUPS,
    Node,
    exchange,
    hub_conf,
    leaf_conf,
    remote,
    running,
    wait_leafs,
)
from support.certs import make_ca, make_cert
from support.ports import LOOPBACK, free_port


@pytest.mark.parametrize(
    ("hub_kind", "leaf_kind"), [*SETUPS, ("py", "py")], ids=[*SETUP_IDS, "py-hub-py-leaf"]
)
async def test_pub_sub_over_a_websocket_remote(
    tmp_path: Path, hub_kind: str, leaf_kind: str
) -> None:
    ws_port = free_port()
    websocket = f"websocket {{ listen: {LOOPBACK}:{ws_port}, no_tls: true }}\n"
    hub = Node(hub_kind, "HUB", hub_conf(free_port(), websocket), tmp_path)
    leaf = Node(leaf_kind, "LEAF", leaf_conf(remote(f"ws://{LOOPBACK}:{ws_port}")), tmp_path)
    async with running(hub, leaf):
        await wait_leafs(hub, 1)
        await wait_leafs(leaf, 1)
        on_leaf, on_hub = await exchange(hub, leaf, "ws", big=70000)
        assert on_leaf == ["ws.toleaf.1:a:", "ws.toleaf.2:b:X-K=v"]
        assert on_hub == [f"ws.tohub.1:{'c' * 70000}:", "ws.tohub.2:d:X-K=w"]
        hub_view = (await hub.leafz())["leafs"][0]
        leaf_view = (await leaf.leafz())["leafs"][0]
        assert (hub_view["name"], hub_view["is_spoke"]) == ("LEAF", False)
        assert (leaf_view["name"], leaf_view["is_spoke"]) == ("HUB", True)


@pytest.mark.parametrize(
    ("hub_kind", "leaf_kind"), [*SETUPS, ("py", "py")], ids=[*SETUP_IDS, "py-hub-py-leaf"]
)
async def test_pub_sub_over_a_secure_websocket_remote(
    tmp_path: Path, hub_kind: str, leaf_kind: str
) -> None:
    ca = make_ca()
    ca_file, _ = ca.write(tmp_path, "ca")
    hub_cert = make_cert(ca, [(NameOID.COMMON_NAME, "hub")], ips=(LOOPBACK,))
    cert_file, key_file = hub_cert.write(tmp_path, "hub")
    ws_port = free_port()
    tls = f'tls {{ cert_file: "{cert_file}", key_file: "{key_file}" }}'
    websocket = f"websocket {{ listen: {LOOPBACK}:{ws_port}, {tls} }}\n"
    hub = Node(hub_kind, "HUB", hub_conf(free_port(), websocket), tmp_path)
    fields = f', tls {{ ca_file: "{ca_file}" }}'
    leaf_remote = remote(f"wss://{LOOPBACK}:{ws_port}", fields)
    leaf = Node(leaf_kind, "LEAF", leaf_conf(leaf_remote), tmp_path)
    async with running(hub, leaf):
        await wait_leafs(hub, 1)
        await wait_leafs(leaf, 1)
        on_leaf, on_hub = await exchange(hub, leaf, "wss")
        assert on_leaf == ["wss.toleaf.1:a:", "wss.toleaf.2:b:X-K=v"]
        assert on_hub == ["wss.tohub.1:c:", "wss.tohub.2:d:X-K=w"]


@pytest.mark.parametrize("leaf_kind", ["go", "py"], ids=["go-leaf", "py-leaf"])
async def test_a_refused_upgrade_moves_on_to_the_next_url(tmp_path: Path, leaf_kind: str) -> None:
    """The first URL is the hub's client port, which answers the upgrade with its INFO: the
    leaf gives that up and joins through the second, the websocket listener."""
    ws_port = free_port()
    websocket = f"websocket {{ listen: {LOOPBACK}:{ws_port}, no_tls: true }}\n"
    hub = Node("go", "HUB", hub_conf(free_port(), websocket), tmp_path)
    urls = f'["ws://{LOOPBACK}:{hub.port}", "ws://{LOOPBACK}:{ws_port}"]'
    leaf_remote = f"    {{ urls: {urls}, dont_randomize: true }}"
    leaf = Node(leaf_kind, "LEAF", leaf_conf(leaf_remote), tmp_path)
    async with running(hub, leaf):
        await wait_leafs(hub, 1)
        on_leaf, on_hub = await exchange(hub, leaf, "next")
        assert on_leaf == ["next.toleaf.1:a:", "next.toleaf.2:b:X-K=v"]
        assert on_hub == ["next.tohub.1:c:", "next.tohub.2:d:X-K=w"]
