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


@pytest.mark.parametrize(
    ("hub_kind", "leaf_kind"), [*SETUPS, ("py", "py")], ids=[*SETUP_IDS, "py-hub-py-leaf"]
)
async def test_leaf_link_over_tls(tmp_path: Path, hub_kind: str, leaf_kind: str) -> None:
    ca = make_ca()
    ca_file, _ = ca.write(tmp_path, "ca")
    cert_file, key_file = make_cert(ca, [(NameOID.COMMON_NAME, "hub")], ips=(LOOPBACK,)).write(
        tmp_path, "hub"
    )
    port = free_port()
    tls = f'tls {{ cert_file: "{cert_file}", key_file: "{key_file}" }}'
    hub = Node(hub_kind, "HUB", hub_conf(port, "", tls), tmp_path)
    fields = f', tls {{ ca_file: "{ca_file}" }}'
    leaf = Node(
        leaf_kind, "LEAF", leaf_conf(remote(f"nats-leaf://{LOOPBACK}:{port}", fields)), tmp_path
    )
    async with running(hub, leaf):
        await wait_leafs(hub, 1)
        await wait_leafs(leaf, 1)
        assert (await hub.varz())["leaf"]["tls_required"] is True
        ch, cl = await connect(hub), await connect(leaf)
        try:
            sub = await cl.subscribe("tls.x")
            await wait_interest(cl, [ch])
            await ch.publish("tls.x", b"secret")
            await ch.flush()
            assert (await sub.next_msg(timeout=5)).data == b"secret"
        finally:
            await ch.close()
            await cl.close()
