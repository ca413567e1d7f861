"""JetStream across a leaf, pynatsd against nats-server: the hub runs JetStream in a domain, and
a client of the leaf reaches it by that domain's API prefix (`$JS.<domain>.API`), as a leaf of a
bigger NATS system uses the hub's streams."""

from __future__ import annotations

from pathlib import Path

from leafnode.topology import Node, connect, hub_conf, leaf_conf, remote, running, wait_leafs
from support.cluster import wait_interest
from support.ports import LOOPBACK, free_port


def _hub_with_jetstream(tmp_path: Path, setup: tuple[str, str]) -> tuple[Node, Node]:
    """A hub with JetStream in domain `hub`, and its leaf without JetStream."""
    hub_kind, leaf_kind = setup
    port = free_port()
    jetstream = f'jetstream {{ domain: hub, store_dir: "{tmp_path / "js"}" }}\n'
    hub = Node(hub_kind, "HUB", hub_conf(port, jetstream), tmp_path)
    leaf = Node(leaf_kind, "LEAF", leaf_conf(remote(f"nats-leaf://{LOOPBACK}:{port}")), tmp_path)
    return hub, leaf


async def test_hub_jetstream_reached_from_the_leaf_by_domain(
    tmp_path: Path, setup: tuple[str, str]
) -> None:
    hub, leaf = _hub_with_jetstream(tmp_path, setup)
    async with running(hub, leaf):
        await wait_leafs(hub, 1)
        ch, cl = await connect(hub), await connect(leaf)
        try:
            await wait_interest(ch, [cl])
            js = cl.jetstream(domain="hub")
            info = await js.add_stream(name="EDGE", subjects=["edge.>"])
            assert info.config.name == "EDGE"
            ack = await js.publish("edge.1", b"reading")
            assert (ack.stream, ack.seq, ack.domain) == ("EDGE", 1, "hub")
            # The message is in the hub's stream, as the hub's own clients see it.
            msg = await ch.jetstream().get_msg("EDGE", 1)
            assert msg.data == b"reading"
        finally:
            await ch.close()
            await cl.close()


async def test_jetstream_on_both_sides_stays_apart(tmp_path: Path, setup: tuple[str, str]) -> None:
    """Hub and leaf each run JetStream in their own domain: `$JS.API` never crosses the link,
    so each side's clients see their own server's streams, and the hub's by its domain."""
    hub_kind, leaf_kind = setup
    port = free_port()
    hub_js = f'jetstream {{ domain: hub, store_dir: "{tmp_path / "hub-js"}" }}\n'
    leaf_js = f'jetstream {{ domain: edge, store_dir: "{tmp_path / "leaf-js"}" }}\n'
    hub = Node(hub_kind, "HUB", hub_conf(port, hub_js), tmp_path)
    url = f"nats-leaf://{LOOPBACK}:{port}"
    leaf = Node(leaf_kind, "LEAF", leaf_conf(remote(url), leaf_js), tmp_path)
    async with running(hub, leaf):
        await wait_leafs(hub, 1)
        ch, cl = await connect(hub), await connect(leaf)
        try:
            await wait_interest(ch, [cl])
            await wait_interest(cl, [ch])
            await cl.jetstream().add_stream(name="LOCAL", subjects=["local.>"])
            await cl.jetstream(domain="hub").add_stream(name="CENTRAL", subjects=["central.>"])
            by_domain = await ch.jetstream(domain="hub").streams_info()
            assert [s.config.name for s in by_domain] == ["CENTRAL"]
            assert [s.config.name for s in await ch.jetstream().streams_info()] == ["CENTRAL"]
            assert [s.config.name for s in await cl.jetstream().streams_info()] == ["LOCAL"]
        finally:
            await ch.close()
            await cl.close()


async def test_hub_consumers_deliver_across_the_leaf(
    tmp_path: Path, setup: tuple[str, str]
) -> None:
    """A client of the leaf consumes a stream of the hub by its domain, pulling and by push:
    each delivery crosses the link on the inbox or deliver subject with its own subject after
    the ack reply's `@`, so the client sees the stream's subject, and its acks go back."""
    hub, leaf = _hub_with_jetstream(tmp_path, setup)
    async with running(hub, leaf):
        await wait_leafs(hub, 1)
        ch, cl = await connect(hub), await connect(leaf)
        try:
            await wait_interest(ch, [cl])
            hjs, ljs = ch.jetstream(), cl.jetstream(domain="hub")
            await hjs.add_stream(name="READINGS", subjects=["readings.>"])
            for n in range(3):
                await hjs.publish(f"readings.{n}", f"r{n}".encode(), headers={"N": str(n)})
            puller = await ljs.pull_subscribe("readings.>", durable="PULL")
            pulled = await puller.fetch(3, timeout=5)
            for msg in pulled:
                await msg.ack_sync()
            assert [(m.subject, m.data, (m.headers or {}).get("N")) for m in pulled] == [
                ("readings.0", b"r0", "0"),
                ("readings.1", b"r1", "1"),
                ("readings.2", b"r2", "2"),
            ]
            info = await hjs.consumer_info("READINGS", "PULL")
            assert (info.ack_floor.stream_seq, info.num_ack_pending) == (3, 0)
            pushed = await ljs.subscribe("readings.>", durable="PUSH", manual_ack=True)
            got = []
            for _ in range(3):
                msg = await pushed.next_msg(timeout=5)
                await msg.ack()
                got.append((msg.subject, msg.metadata.sequence.stream))
            assert got == [("readings.0", 1), ("readings.1", 2), ("readings.2", 3)]
        finally:
            await ch.close()
            await cl.close()
