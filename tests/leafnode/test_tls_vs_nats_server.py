"""TLS on the leaf link, pynatsd against nats-server: the hub's `leafnodes { tls {} }` asks for
it in the INFO, the leaf's remote `tls { ca_file }` verifies the hub, and traffic crosses."""

from __future__ import annotations

from pathlib import Path

import pytest
from cryptography.x509.oid import NameOID

from leafnode.topology import (
    SETUP_IDS,
    SETUPS,
    Node,
    connect,
    hub_conf,
    leaf_conf,
    remote,
    running,
    wait_leafs,
)
from support.certs import make_ca, make_cert
from support.cluster import wait_interest
from support.ports import LOOPBACK, free_port

PAIRS = [*SETUPS, ("py", "py")]
PAIR_IDS = [*SETUP_IDS, "py-hub-py-leaf"]


def _tls_nodes(
    tmp_path: Path, hub_kind: str, leaf_kind: str, hub_tls: str, leaf_tls: str
) -> tuple[Node, Node]:
    """A hub with a TLS leaf listener and a leaf dialing it, each TLS block with `hub_tls`
    and `leaf_tls` added."""
    ca = make_ca()
    ca_file, _ = ca.write(tmp_path, "ca")
    cert_file, key_file = make_cert(ca, [(NameOID.COMMON_NAME, "hub")], ips=(LOOPBACK,)).write(
        tmp_path, "hub"
    )
    port = free_port()
    tls = f'tls {{ cert_file: "{cert_file}", key_file: "{key_file}"\n {hub_tls} }}'
    hub = Node(hub_kind, "HUB", hub_conf(port, "", tls), tmp_path)
    fields = f', tls {{ ca_file: "{ca_file}"\n {leaf_tls} }}'
    url = f"nats-leaf://{LOOPBACK}:{port}"
    return hub, Node(leaf_kind, "LEAF", leaf_conf(remote(url, fields)), tmp_path)


async def _crosses(hub: Node, leaf: Node) -> bytes:
    ch, cl = await connect(hub), await connect(leaf)
    try:
        sub = await cl.subscribe("tls.first")
        await wait_interest(cl, [ch])
        await ch.publish("tls.first", b"secret")
        await ch.flush()
        return (await sub.next_msg(timeout=5)).data
    finally:
        await ch.close()
        await cl.close()


@pytest.mark.parametrize(("hub_kind", "leaf_kind"), PAIRS, ids=PAIR_IDS)
async def test_leaf_link_over_tls(tmp_path: Path, hub_kind: str, leaf_kind: str) -> None:
    hub, leaf = _tls_nodes(tmp_path, hub_kind, leaf_kind, "", "")
    async with running(hub, leaf):
        await wait_leafs(hub, 1)
        await wait_leafs(leaf, 1)
        assert (await hub.varz())["leaf"]["tls_required"] is True
        assert await _crosses(hub, leaf) == b"secret"


@pytest.mark.parametrize(("hub_kind", "leaf_kind"), PAIRS, ids=PAIR_IDS)
@pytest.mark.parametrize("hub_first", ["handshake_first: true", 'handshake_first: "300ms"'])
async def test_handshake_first(
    tmp_path: Path, hub_kind: str, leaf_kind: str, hub_first: str
) -> None:
    """`handshake_first` on both sides: the leaf starts TLS as soon as it is connected and the
    hub sends its INFO only over TLS (with a fallback delay too, which a leaf that starts TLS
    at once never waits for)."""
    hub, leaf = _tls_nodes(tmp_path, hub_kind, leaf_kind, hub_first, "handshake_first: true")
    async with running(hub, leaf):
        await wait_leafs(hub, 1)
        await wait_leafs(leaf, 1)
        assert await _crosses(hub, leaf) == b"secret"


@pytest.mark.parametrize(("hub_kind", "leaf_kind"), PAIRS, ids=PAIR_IDS)
async def test_handshake_first_fallback_takes_a_leaf_that_waits(
    tmp_path: Path, hub_kind: str, leaf_kind: str
) -> None:
    """A hub whose `handshake_first` has a fallback delay sends its INFO in plain text to a
    leaf that says nothing meanwhile (one that upgrades after the INFO), and the link works."""
    hub, leaf = _tls_nodes(tmp_path, hub_kind, leaf_kind, 'handshake_first: "300ms"', "")
    async with running(hub, leaf):
        await wait_leafs(hub, 1)
        await wait_leafs(leaf, 1)
        assert await _crosses(hub, leaf) == b"secret"
