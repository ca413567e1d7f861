"""The gateway parts of monitoring, side by side with nats-server: `/varz` `gateway` and
`cluster` sections of a server with a gateway block, and `/gatewayz` before any connection (the
connected forms are compared in tests/gateway/test_gateway_vs_nats_server.py)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from support.cluster import GO, PY
from support.natsserver import nats_server_binary
from support.supercluster import SuperCluster

pytestmark = pytest.mark.skipif(nats_server_binary() is None, reason="nats-server not found")

GATEWAY = """
connect_retries: 2
reject_unknown_cluster: true
gateways: [
  {name: B, urls: ["nats://127.0.0.1:1", "nats://u:p@127.0.0.1:2"]}
  {name: A, url: "nats://127.0.0.1:3"}
]
"""


async def _monitor(tmp_path: Path, kind: str) -> dict[str, Any]:
    directory = tmp_path / kind
    directory.mkdir()
    with SuperCluster(directory, {"A": [kind]}, dials={}, gateway_extra={"A": GATEWAY}) as sc:
        await asyncio.to_thread(sc.start)
        node = sc.cluster("A")[0]
        varz = node.http("/varz")
        gatewayz = node.http("/gatewayz")
    gateway = dict(varz["gateway"])
    assert gateway.pop("port") == node.gateway_port
    gateway["gateways"] = [
        {**g, "urls": sorted(g.get("urls", []))} for g in gateway.get("gateways", [])
    ]
    assert gatewayz.pop("port") == node.gateway_port
    gatewayz.pop("server_id")
    gatewayz.pop("now")
    return {"gateway": gateway, "cluster": varz["cluster"], "gatewayz": gatewayz}


async def test_varz_and_gatewayz(tmp_path: Path) -> None:
    expected = await _monitor(tmp_path, GO)
    assert await _monitor(tmp_path, PY) == expected
    assert expected["cluster"] == {"name": "A"}
