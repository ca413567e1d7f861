"""Another cluster's stream of RMSGs with the same line on an inbound gateway connection (taken
as runs by the receiving server, then sent by delivery plan) reaches local subscribers whole
and in wire order, side by side with nats-server: other lines, a message with headers and a
PING in between, runs split across reads, requests whose reply is routed back (`_GR_.`,
never planned), a subscriber that comes between two runs of a line (the plan is made again);
/gatewayz counts the messages as nats-server's does."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from support.cluster import GO, PY
from support.linkruns import COUNT, deliveries
from support.natsserver import nats_server_binary
from support.rawclient import RawClient
from support.supercluster import SuperCluster

pytestmark = pytest.mark.skipif(nats_server_binary() is None, reason="nats-server not found")

PEER_ID = "NRAWGWRAWGWRAWGWRAWGWRAWGWRAWGWRAWGWRAWGWRAWGWRAWGWRAWG"


async def _raw_gateway(port: int) -> RawClient:
    """An inbound gateway connection from a server of cluster B, as nats-server makes one."""
    gateway = await RawClient.connect(port)
    connect = {"gateway": "B", "name": PEER_ID, "headers": True, "tls_required": False}
    info = {"server_id": PEER_ID, "server_name": "b1", "gateway": "B", "headers": True}
    await gateway.send(
        b"CONNECT %s\r\nINFO %s\r\nPING\r\n"
        % (json.dumps(connect).encode(), json.dumps(info).encode())
    )
    await gateway.read_until(b"PONG\r\n")
    return gateway


async def _run(kind: str, directory: Path) -> tuple[object, ...]:
    directory.mkdir()
    with SuperCluster(directory, {"A": [kind]}, dials={}) as sc:
        await asyncio.to_thread(sc.start)
        node = sc.cluster("A")[0]
        gateway = await _raw_gateway(node.gateway_port)
        got = await deliveries(node.port, gateway, b"RMSG $G ")
        gatewayz = await asyncio.to_thread(node.http, "/gatewayz")
        await gateway.close()
    inbound = gatewayz["inbound_gateways"]["B"][0]["connection"]
    return *got, (inbound["in_msgs"], inbound["in_bytes"])


async def test_runs_reach_subscribers_as_from_nats_server(tmp_path: Path) -> None:
    expected = await _run(GO, tmp_path / "go")
    first, second, _ = expected
    assert len(first) > COUNT and len(second) > 90  # the runs were delivered at all
    assert await _run(PY, tmp_path / "py") == expected
