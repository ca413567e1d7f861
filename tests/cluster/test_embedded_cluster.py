"""Embedded clusters: `pynatsd.Cluster` in the test's loop, `pynatsd.ThreadedCluster` in a
thread, and the `nats_cluster` pytest fixture."""

from __future__ import annotations

from pathlib import Path

import nats
import pytest
from nats.aio.client import Client

import pynatsd
from pynatsd.cluster import cluster_of
from pynatsd.jetstream import jetstream_of
from pynatsd.options import ClusterOptions, Options
from support.cluster import wait_interest


async def _connect_all(urls: list[str]) -> list[Client]:
    return [await nats.connect(url, allow_reconnect=False) for url in urls]


async def _close_all(ncs: list[Client]) -> None:
    for nc in ncs:
        await nc.close()


async def test_cluster_of_three_in_the_callers_loop() -> None:
    async with pynatsd.Cluster(size=3) as cluster:
        assert len(cluster.servers) == 3
        assert len(set(cluster.client_urls)) == 3
        assert all(url.startswith("nats://127.0.0.1:") for url in cluster.client_urls)
        assert [s.options.server_name for s in cluster.servers] == [
            "pynatsd-1",
            "pynatsd-2",
            "pynatsd-3",
        ]
        for server in cluster.servers:
            part = cluster_of(server)
            assert part is not None and len(part.routes) == 2
        ncs = await _connect_all(cluster.client_urls)
        try:
            # Every server tells its clients about all three.
            addresses = sorted(url.removeprefix("nats://") for url in cluster.client_urls)
            for nc in ncs:
                assert sorted(nc._server_info["connect_urls"]) == addresses
            sub = await ncs[2].subscribe("embedded.x")
            queue = [await nc.subscribe("embedded.q", queue="w") for nc in ncs]
            for nc in ncs:
                await wait_interest(nc, ncs)
            await ncs[0].publish("embedded.x", b"from the first server")
            for k in range(30):
                await ncs[1].publish("embedded.q", str(k).encode())
            await ncs[0].flush()
            await ncs[1].flush()
            assert (await sub.next_msg(timeout=2)).data == b"from the first server"
            got = []
            for q in queue:
                while True:
                    try:
                        got.append(int((await q.next_msg(timeout=0.2)).data))
                    except nats.errors.TimeoutError:
                        break
            assert sorted(got) == list(range(30))
        finally:
            await _close_all(ncs)
    assert not any(s.running for s in cluster.servers)


async def test_cluster_options_apply_to_every_server() -> None:
    opts = Options(port=0, host="127.0.0.1", cluster=ClusterOptions(name="mine"))
    async with pynatsd.Cluster(size=2, options=opts, max_payload=4096) as cluster:
        for server in cluster.servers:
            assert server.options.max_payload == 4096
            assert server.cluster_name == "mine"
        ncs = await _connect_all(cluster.client_urls)
        try:
            assert [nc.max_payload for nc in ncs] == [4096, 4096]
            assert {nc._server_info["cluster"] for nc in ncs} == {"mine"}
        finally:
            await _close_all(ncs)
    # The caller's options are not changed.
    assert opts.cluster is not None and opts.cluster.routes == []


async def test_threaded_cluster() -> None:
    with pynatsd.ThreadedCluster(size=2) as cluster:
        ncs = await _connect_all(cluster.client_urls)
        try:
            sub = await ncs[1].subscribe("threaded")
            await wait_interest(ncs[1], ncs)
            await ncs[0].publish("threaded", b"across")
            assert (await sub.next_msg(timeout=2)).data == b"across"
        finally:
            await _close_all(ncs)
    assert not any(s.running for s in cluster.servers)


async def test_cluster_with_jetstream_on_the_first_server(tmp_path: Path) -> None:
    """`jetstream=True` gives the first server JetStream; the others' clients use it."""
    async with pynatsd.Cluster(size=3, jetstream=True, store_dir=str(tmp_path)) as cluster:
        assert [jetstream_of(s) is not None for s in cluster.servers] == [True, False, False]
        ncs = await _connect_all(cluster.client_urls)
        try:
            js3 = ncs[2].jetstream(timeout=5)
            await js3.add_stream(name="EMB", subjects=["emb.>"])
            ack = await js3.publish("emb.a", b"stored")
            js2 = ncs[1].jetstream(timeout=5)
            await js2.stream_info("EMB")  # its node has the stream's interest once answered
            await js2.publish("emb.b", b"too")
            sub = await js2.pull_subscribe("emb.>", "d")
            got = [(m.subject, m.data) for m in await sub.fetch(2, timeout=5)]
        finally:
            await _close_all(ncs)
    assert ack.seq == 1
    assert got == [("emb.a", b"stored"), ("emb.b", b"too")]


def test_cluster_size_must_be_positive() -> None:
    with pytest.raises(ValueError, match="at least one server"):
        pynatsd.Cluster(size=0)


async def test_nats_cluster_fixture(nats_cluster: pynatsd.ThreadedCluster) -> None:
    assert len(nats_cluster.client_urls) == 3
    ncs = await _connect_all(nats_cluster.client_urls)
    try:
        sub = await ncs[0].subscribe("fixture.cluster")
        await wait_interest(ncs[0], ncs)
        await ncs[2].publish("fixture.cluster", b"from the third")
        assert (await sub.next_msg(timeout=2)).data == b"from the third"
    finally:
        await _close_all(ncs)


@pytest.mark.nats_cluster(size=2, max_payload=2048)
async def test_nats_cluster_fixture_marker(nats_cluster: pynatsd.ThreadedCluster) -> None:
    assert len(nats_cluster.servers) == 2
    assert {s.options.max_payload for s in nats_cluster.servers} == {2048}
