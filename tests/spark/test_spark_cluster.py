"""Reads through a 3-node NATS cluster: `servers` lists every node, tasks connect to any
reachable one, and a stream is read whichever node holds it, also after a node was stopped.

nats-server: clustered JetStream on every node (an R3 stream, and an R1 stream read only
through the nodes that do not hold it). pynatsd: JetStream on one node, read through its peers
(pynatsd does not replicate streams)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import nats
import pytest

from support.cluster import GO, PY
from support.natsserver import require_nats_server
from support.spark import JetStreamCluster, create_stream, publish, retry_until, unique

pytestmark = pytest.mark.timeout(240)

# A cluster elects its JetStream meta leader, and a stream its leader, a few seconds after
# start-up or after losing a node.
ELECTION_TIMEOUT = 30.0


def _read(spark: Any, servers: list[str], stream: str, timeout: str = "5") -> list[int]:
    df = (
        spark.read.format("nats")
        .option("servers", ",".join(servers))
        .option("requestTimeout", timeout)
        .option("stream", stream)
        .option("minPartitions", "2")
        .option("minRowsPerPartition", "100")
        .load()
    )
    return sorted(r.seq for r in df.select("seq").collect())


def _wait_readable(urls: list[str], stream: str, count: int) -> None:
    """Until every node serves the whole stream: a new cluster (or one that lost a node) moves
    its stream and consumer leaders for a few seconds, and a pull caught in a move is lost."""
    from pynatsd.spark import client
    from pynatsd.spark.options import ConnectOptions, parse_servers
    from pynatsd.spark.wire import Connection

    def read_all(url: str) -> None:
        options = ConnectOptions(servers=parse_servers(url), request_timeout=2.0)
        with Connection.open(options) as conn:
            chunks = client.read_range(
                conn,
                stream,
                1,
                count + 1,
                (),
                batch_size=1000,
                chunk_rows=count,
                with_headers=False,
                fail_on_data_loss=True,
            )
            assert sum(len(c) for c in chunks) == count

    for url in urls:
        retry_until(lambda u=url: read_all(u), ELECTION_TIMEOUT, f"reading {stream} via {url}")


def _leader(url: str, stream: str) -> str:
    async def go() -> str:
        nc = await nats.connect(url)
        try:
            info = await nc.jetstream().stream_info(stream)
            assert info.cluster is not None and info.cluster.leader
            return info.cluster.leader
        finally:
            await nc.close()

    return asyncio.run(go())


@pytest.fixture(scope="module")
def go_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[JetStreamCluster]:
    require_nats_server()
    with JetStreamCluster([GO, GO, GO], tmp_path_factory.mktemp("go-js"), [0, 1, 2]) as cluster:
        cluster.start()
        yield cluster


@pytest.fixture(scope="module")
def py_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[JetStreamCluster]:
    with JetStreamCluster([PY, PY, PY], tmp_path_factory.mktemp("py-js"), [2]) as cluster:
        cluster.start()
        yield cluster


def test_nats_server_cluster_read_with_a_node_stopped(spark: Any, go_cluster: Any) -> None:
    urls = [n.url for n in go_cluster.nodes]
    r3, r1 = unique("R3"), unique("R1")
    retry_until(
        lambda: create_stream(urls[0], r3, [f"{r3}.>"], num_replicas=3),
        ELECTION_TIMEOUT,
        "creating an R3 stream",
    )
    create_stream(urls[0], r1, [f"{r1}.>"], num_replicas=1)
    publish(urls[1], 300, lambda i: f"{r3}.{i % 3}")
    publish(urls[1], 200, f"{r1}.x")
    _wait_readable(urls, r3, 300)
    assert _read(spark, urls, r3) == list(range(1, 301))

    # The R1 stream through the two nodes that do not hold it: the JetStream API and the
    # pulled messages cross the routes.
    holder = _leader(urls[0], r1)
    others = [n.url for n in go_cluster.nodes if n.name != holder]
    assert _read(spark, others, r1) == list(range(1, 201))

    # Stop a node that does not hold the R1 stream (node 0 if it can): the R3 stream elects a
    # leader among the two left if it was there; every task skips the stopped node.
    stopped = next(n for n in go_cluster.nodes if n.name != holder)
    go_cluster.kill(stopped.index)
    live = [n.url for n in go_cluster.nodes if n.running]
    publish_more = lambda: publish(live[0], 100, f"{r3}.new", start=300)  # noqa: E731
    retry_until(publish_more, ELECTION_TIMEOUT, "publishing after a node stopped")
    _wait_readable(live, r3, 400)
    # Right after the kill a consumer create can still go unanswered while the stream's
    # group settles: the read is retried as a user's job would be, then checked.
    rows = retry_until(
        lambda: _read(spark, urls, r3), ELECTION_TIMEOUT, "reading after a node stopped"
    )
    assert rows == list(range(1, 401))
    assert _read(spark, urls, r1) == list(range(1, 201))


def test_pynatsd_cluster_read_through_the_jetstream_nodes_peers(
    spark: Any, py_cluster: Any
) -> None:
    nodes = py_cluster.nodes
    js_url, peers = nodes[2].url, [nodes[0].url, nodes[1].url]
    name = unique("PYC")
    create_stream(js_url, name, [f"{name}.>"])
    publish(js_url, 300, lambda i: f"{name}.{i % 2}")
    assert _read(spark, peers, name, "1") == list(range(1, 301))
    py_cluster.kill(0)
    publish(peers[1], 100, f"{name}.x", start=300)
    assert _read(spark, peers, name, "1") == list(range(1, 401))


def test_tasks_fail_over_to_a_reachable_server(spark: Any, js_server: Any, tmp_path: Path) -> None:
    """Half the listed servers are down: every task (and the planner) connects anyway."""
    from support.ports import free_port

    name = unique("FAILOVER")
    create_stream(js_server.url, name, [f"{name}.>"])
    publish(js_server.url, 400, f"{name}.x")
    dead = [f"nats://127.0.0.1:{free_port()}" for _ in range(3)]
    assert _read(spark, [*dead, js_server.url], name) == list(range(1, 401))
