"""Optimistic mode, side by side with nats-server: a server dials gateway "B", played by a fake
remote that does not announce `gateway_iom` (a nats-server before 2.9). The server sends it every
message until told otherwise: RS- for a subject, A- for the account, A+ to take that back, and
the switch to interest-only mode (INFO gateway_cmd 2, RS+, gateway_cmd 3). What the remote
receives after each step must be what nats-server sends it."""

from __future__ import annotations

import asyncio
import base64
import json
from pathlib import Path

import nats
import pytest

from support.cluster import GO, PY
from support.natsserver import nats_server_binary
from support.ports import LOOPBACK, free_port
from support.supercluster import SuperCluster

pytestmark = pytest.mark.skipif(nats_server_binary() is None, reason="nats-server not found")

G = base64.b64encode(b"$G").decode()


def _cmd(cmd: int) -> bytes:
    info = {"server_id": "NFAKE", "gateway": "B", "gateway_cmd": cmd, "gateway_cmd_payload": G}
    return b"INFO " + json.dumps(info).encode() + b"\r\n"


# (what the remote says, then the subjects a client publishes)
STEPS: list[tuple[bytes, list[str]]] = [
    (b"", ["foo.1", "bar.1"]),
    (b"RS- $G foo.1\r\n", ["foo.1", "bar.1"]),
    (b"RS+ $G foo.*\r\n", ["foo.1"]),
    (b"A- $G\r\n", ["foo.1", "bar.1"]),
    (b"A+ $G\r\n", ["bar.1"]),
    (_cmd(2) + b"RS+ $G baz\r\nRS+ $G end\r\n" + _cmd(3), ["bar.1", "baz", "end"]),
]


class FakeRemote:
    """Gateway "B": answers the dial with an INFO without `gateway_iom`, then records every
    message subject the server sends it."""

    def __init__(self) -> None:
        self.port = free_port()
        self.connected = asyncio.Event()
        self.subjects: list[str] = []
        self.pongs = 0
        self.writer: asyncio.StreamWriter | None = None
        self._server: asyncio.Server | None = None

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._serve, LOOPBACK, self.port)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        info = {"server_id": "NFAKE", "server_name": "fake", "gateway": "B", "headers": True}
        info["gateway_nrp"] = True
        writer.write(b"INFO " + json.dumps(info).encode() + b"\r\n")
        await writer.drain()
        self.writer = writer
        while line := await reader.readline():
            if line.startswith(b"CONNECT"):
                self.connected.set()
            elif line.startswith(b"PONG"):
                self.pongs += 1
            elif line.startswith(b"PING"):
                writer.write(b"PONG\r\n")
            elif line.startswith((b"RMSG", b"HMSG")):
                parts = line.split()
                self.subjects.append(parts[2].decode())
                await reader.readexactly(int(parts[-1]) + 2)

    async def say(self, data: bytes) -> None:
        """Send `data` and wait until the server has processed it (its PONG)."""
        assert self.writer is not None
        before = self.pongs
        self.writer.write(data + b"PING\r\n")
        await self.writer.drain()
        for _ in range(500):
            if self.pongs > before:
                return
            await asyncio.sleep(0.01)
        raise AssertionError("no PONG from the server")

    def close(self) -> None:
        if self._server is not None:
            self._server.close()


async def _observe(tmp_path: Path, kind: str) -> list[list[str]]:
    remote = FakeRemote()
    await remote.start()
    directory = tmp_path / kind
    directory.mkdir()
    extra = f"gateways: [{{name: B, url: 'nats://{LOOPBACK}:{remote.port}'}}]\n"
    seen: list[list[str]] = []
    try:
        with SuperCluster(directory, {"A": [kind]}, dials={}, gateway_extra={"A": extra}) as sc:
            await asyncio.to_thread(sc.start)
            await asyncio.wait_for(remote.connected.wait(), 15)
            nc = await nats.connect(sc.cluster("A")[0].url)
            try:
                for said, published in STEPS:
                    await remote.say(said)
                    before = len(remote.subjects)
                    for subject in published:
                        await nc.publish(subject, b"x")
                    await nc.flush()
                    # The server forwards in order: a PING round trip on the link after the
                    # publishes were processed finds them all sent.
                    await remote.say(b"")
                    seen.append(remote.subjects[before:])
            finally:
                await nc.close()
    finally:
        remote.close()
    return seen


async def test_optimistic_sends(tmp_path: Path) -> None:
    expected = await _observe(tmp_path, GO)
    assert await _observe(tmp_path, PY) == expected
    assert expected[0] == ["foo.1", "bar.1"] and expected[-1] == ["baz", "end"]
