"""What a gateway refuses, side by side with nats-server, byte for byte on the wire: on the
gateway port, a client's CONNECT, a first op other than CONNECT, wrong credentials, an unknown
cluster under `reject_unknown_cluster`; and, dialing out, a remote that says it is another
gateway than the one configured, or a URL that leads to a port that is not a gateway's."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from support.cluster import GO, PY
from support.natsserver import nats_server_binary
from support.ports import LOOPBACK, free_port
from support.rawclient import RawClient
from support.supercluster import SuperCluster

pytestmark = pytest.mark.skipif(nats_server_binary() is None, reason="nats-server not found")

AUTH = "authorization { user: gwu, password: gwp }\n"
REJECT = "reject_unknown_cluster: true\ngateways: [{name: B, url: 'nats://127.0.0.1:1'}]\n"

# (what the peer sends after the INFO, the lines inside the gateway block)
ACCEPTED = {
    "client connect": (b'CONNECT {"verbose":false,"pedantic":false}\r\nPING\r\n', ""),
    "ping first": (b"PING\r\n", ""),
    "wrong credentials": (b'CONNECT {"gateway":"B","user":"gwu","pass":"no"}\r\nPING\r\n', AUTH),
    "unknown cluster": (b'CONNECT {"gateway":"X","name":"NX"}\r\nPING\r\n', REJECT),
}

# The INFO fields whose meaning a peer depends on.
INFO_KEYS = ("gateway", "gateway_nrp", "gateway_iom", "headers", "auth_required", "max_payload")


async def _accepted(tmp_path: Path, kind: str, name: str) -> tuple[dict[str, object], bytes, bool]:
    data, extra = ACCEPTED[name]
    directory = tmp_path / kind
    directory.mkdir()
    with SuperCluster(directory, {"A": [kind]}, dials={}, gateway_extra={"A": extra}) as sc:
        await asyncio.to_thread(sc.start)
        node = sc.cluster("A")[0]
        raw = await RawClient.connect(node.gateway_port)
        info = json.loads(raw.info[5:])
        await raw.send(data)
        out, closed = await raw.read_all(quiet=1.0)
        await raw.close()
    return {k: info.get(k) for k in INFO_KEYS}, out, closed


@pytest.mark.parametrize("name", sorted(ACCEPTED))
async def test_refused_on_the_gateway_port(tmp_path: Path, name: str) -> None:
    expected = await _accepted(tmp_path, GO, name)
    assert await _accepted(tmp_path, PY, name) == expected
    assert expected[1].startswith(b"-ERR ") and expected[2]


# What a fake remote says first to the server dialing it: its INFO.
DIALED = {
    "another gateway": {"server_id": "NFAKE", "gateway": "OTHER", "gateway_nrp": True},
    "not a gateway port": {"server_id": "NFAKE", "server_name": "x", "max_payload": 1},
}


async def _dialed(tmp_path: Path, kind: str, name: str) -> bytes:
    """A server configured to dial gateway "B" at a fake remote, which answers with INFO and
    records what the server sends back until it closes."""
    received = bytearray()
    done = asyncio.Event()

    async def remote(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(b"INFO " + json.dumps(DIALED[name]).encode() + b"\r\n")
        await writer.drain()
        try:
            while chunk := await reader.read(65536):
                received.extend(chunk)
        finally:
            writer.close()
            done.set()

    port = free_port()
    listener = await asyncio.start_server(remote, LOOPBACK, port)
    directory = tmp_path / kind
    directory.mkdir()
    extra = f"gateways: [{{name: B, url: 'nats://{LOOPBACK}:{port}'}}]\n"
    try:
        with SuperCluster(directory, {"A": [kind]}, dials={}, gateway_extra={"A": extra}) as sc:
            await asyncio.to_thread(sc.start)
            await asyncio.wait_for(done.wait(), 15)
    finally:
        listener.close()
    return bytes(received)


@pytest.mark.parametrize("name", sorted(DIALED))
async def test_refused_when_dialing(tmp_path: Path, name: str) -> None:
    expected = await _dialed(tmp_path, GO, name)
    assert await _dialed(tmp_path, PY, name) == expected
    assert expected.startswith(b"-ERR ")
