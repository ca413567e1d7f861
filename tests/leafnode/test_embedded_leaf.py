"""pynatsd embedded as a leaf of a nats-server hub, the README's example: local clients talk to
the local server, and traffic crosses to the hub both ways."""

from __future__ import annotations

from pathlib import Path

import nats

import pynatsd
from leafnode.topology import Node, hub_conf, running, wait_leafs
from support.cluster import wait_interest
from support.ports import LOOPBACK, free_port


async def test_embedded_server_as_a_leaf_of_a_nats_server_hub(tmp_path: Path) -> None:
    port = free_port()
    auth = "authorization { users: [ {user: edge, password: s3cret, account: APP} ] }"
    hub = Node(
        "go",
        "HUB",
        hub_conf(port, "accounts { APP: { users: [ {user: app, password: pw} ] } }", auth),
        tmp_path,
    )
    async with running(hub):
        url = f"nats-leaf://edge:s3cret@{LOOPBACK}:{port}"
        async with pynatsd.Server.leaf_of(url) as leaf:
            await leaf.wait_leafnodes()
            await wait_leafs(hub, 1)
            local = await nats.connect(leaf.client_url)
            remote = await nats.connect(hub.url, user="app", password="pw")
            try:

                async def answer(msg: nats.aio.msg.Msg) -> None:
                    await msg.respond(b"edge says " + msg.data)

                await local.subscribe("edge.svc", cb=answer)
                await wait_interest(local, [remote])
                reply = await remote.request("edge.svc", b"hi", timeout=5)
                assert reply.data == b"edge says hi"
            finally:
                await local.close()
                await remote.close()
