"""Two embedded pynatsd servers in the test's own event loop, each its own cluster, joined by a
gateway that only one of them names: interest crosses, messages and a request cross, and each
server's gateway part shows the other cluster."""

from __future__ import annotations

import nats

import pynatsd
from cluster.nodes import eventually
from pynatsd.gateway import gateway_of
from pynatsd.options import GatewayOptions, RemoteGatewayOptions
from support.cluster import wait_interest


async def test_two_embedded_servers_join_by_gateway() -> None:
    async with pynatsd.Server(gateway=GatewayOptions(name="A", host="127.0.0.1", port=-1)) as a:
        gw_a = gateway_of(a)
        assert gw_a is not None
        remote = RemoteGatewayOptions(name="A", urls=[f"nats://{gw_a.url}"])
        options = GatewayOptions(name="B", host="127.0.0.1", port=-1, gateways=[remote])
        async with pynatsd.Server(gateway=options) as b:
            gw_b = gateway_of(b)
            assert gw_b is not None
            await eventually(lambda: "A" in gw_b.outbound and "B" in gw_a.outbound, timeout=10)
            dialed_back = gw_a.outbound["B"].remote  # A dials back: an implicit gateway
            assert dialed_back is not None and dialed_back.implicit
            nca = await nats.connect(a.client_url)
            ncb = await nats.connect(b.client_url)
            try:
                got: list[bytes] = []

                async def on_msg(msg: object) -> None:
                    got.append(msg.data)  # type: ignore[attr-defined]

                async def service(msg: object) -> None:
                    await msg.respond(b"pong")  # type: ignore[attr-defined]

                await nca.subscribe("to.a", cb=on_msg)
                await nca.subscribe("svc", cb=service)
                await wait_interest(nca, [ncb])
                await ncb.publish("to.a", b"hello")
                reply = await ncb.request("svc", b"ping", timeout=5)
                await eventually(lambda: got == [b"hello"])
                assert reply.data == b"pong"
                assert a.cluster_name == "A" and b.cluster_name == "B"
            finally:
                await nca.close()
                await ncb.close()
