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
