"""Replicated streams in clusters of nats-server and pynatsd nodes: the same stream groups,
the same entries. A nats-server meta leader places an R3 stream on a pynatsd node as on any
peer (its STATSZ says it has JetStream), the pynatsd replica stores every message the Go
leader commits, and when the Go leader dies the group goes on."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import nats
import nats.errors
import nats.js.errors
import pytest
from nats.js.api import StreamConfig

from support.cluster import GO, PY, ProcessCluster, _http_json
from support.eventually import eventually, eventually_async

FAILOVER = 40.0


def local_stream(cluster: ProcessCluster, index: int, name: str) -> dict[str, Any] | None:
    """The stream as one node's own replica holds it (/jsz, its account details)."""
    jsz = _http_json(cluster.nodes[index].http_port, "/jsz?streams=true")
    for account in jsz.get("account_details") or []:
        for stream in account.get("stream_detail") or []:
            if stream["name"] == name:
                return dict(stream)
    return None


async def test_nats_server_places_an_r3_stream_on_pynatsd(tmp_path: Path) -> None:
    stores = {i: f'jetstream {{ store_dir: "{tmp_path}/js{i}" }}\n' for i in range(3)}
    with ProcessCluster([GO, GO, PY], tmp_path, node_config=stores) as cluster:
        cluster.start()
        nc = await nats.connect(cluster.nodes[0].url)
        try:

            async def created() -> object:
                try:
                    return await nc.jetstream(timeout=5).add_stream(
                        StreamConfig(name="MIXED", subjects=["mixed.>"], num_replicas=3)
                    )
                except (nats.errors.TimeoutError, nats.js.errors.APIError):
                    return None  # no meta leader yet, or pynatsd's STATSZ not seen yet

            info = await eventually_async(created, 30, "an R3 stream on all three")
            names = {info.cluster.leader, *(r.name for r in info.cluster.replicas or [])}
            assert names == {"n1", "n2", "n3"}
            js = nc.jetstream(timeout=10)
            for i in range(25):
                ack = await js.publish(f"mixed.{i % 3}", b"m%d" % i)
                assert ack.seq == i + 1
            held = eventually(
                lambda: (
                    (s := local_stream(cluster, 2, "MIXED")) and s["state"]["messages"] == 25 and s
                ),
                15,
                "pynatsd's replica has every message",
            )
            assert held["state"]["last_seq"] == 25
        finally:
            await nc.close()


@pytest.mark.parametrize("kinds", [[GO, GO, PY], [GO, PY, PY]], ids=["2go-1py", "1go-2py"])
async def test_mixed_r3_stream_through_a_leader_failover(tmp_path: Path, kinds: list[str]) -> None:
    """Whoever leads the meta group and the stream, clients on every node create, publish and
    read; the stream leader is killed; the survivors (of both kinds) go on with it, and every
    replica ends with every acknowledged message."""
    stores = {i: f'jetstream {{ store_dir: "{tmp_path}/js{i}" }}\n' for i in range(3)}
    with ProcessCluster(kinds, tmp_path, node_config=stores) as cluster:
        cluster.start()
        clients = [await nats.connect(n.url, allow_reconnect=False) for n in cluster.nodes]
        try:

            async def created() -> object:
                try:
                    return (
                        await clients[2]
                        .jetstream(timeout=5)
                        .add_stream(StreamConfig(name="FAIL", subjects=["fail.>"], num_replicas=3))
                    )
                except (nats.errors.TimeoutError, nats.js.errors.APIError):
                    return None

            info = await eventually_async(created, 30, "an R3 stream")

            async def capturing_everywhere() -> bool:
                # The new leader's interest in the subjects crosses the routes just after its
                # answer: until then a publish elsewhere finds no responders (both servers).
                for nc in clients:
                    try:
                        await nc.request("fail.probe", b"", timeout=1)
                    except (nats.errors.NoRespondersError, nats.errors.TimeoutError):
                        return False
                return True

            await eventually_async(capturing_everywhere, 10, "the subjects captured")
            for i in range(30):
                ack = await clients[i % 3].jetstream(timeout=10).publish("fail.a", b"f%d" % i)
                assert ack.seq == i + 1 + 3  # after the three probes
            for nc in clients:
                seen = await nc.jetstream(timeout=10).stream_info("FAIL")
                assert seen.state.messages == 33
            leader = info.cluster.leader
            dead = next(n.index for n in cluster.nodes if n.name == leader)
            cluster.kill(dead)
            alive = [i for i in range(3) if i != dead]

            async def publish_again() -> int:
                try:
                    js = clients[alive[0]].jetstream(timeout=3)
                    return (await js.publish("fail.b", b"after")).seq
                except (nats.errors.TimeoutError, nats.errors.NoRespondersError):
                    return 0
                except nats.js.errors.APIError:
                    return 0

            seq = await eventually_async(publish_again, FAILOVER, "an acked publish after")
            assert seq == 34
            for i in alive:
                seen = await clients[i].jetstream(timeout=10).stream_info("FAIL")
                assert seen.state.messages == 34 and seen.cluster.leader != leader
            cluster.restart(dead)
            # Every replica, of either kind, holds all 34 (nats-server's /jsz shows its own).
            for i in range(3):
                held = eventually(
                    lambda i=i: (
                        (s := local_stream(cluster, i, "FAIL")) is not None
                        and s["state"]["messages"] == 34
                        and s
                    ),
                    FAILOVER,
                    f"node {i} caught up",
                )
                assert held["state"]["last_seq"] == 34
        finally:
            for nc in clients:
                if nc.is_connected:
                    await nc.close()
