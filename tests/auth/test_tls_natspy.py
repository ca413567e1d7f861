"""TLS on the client port: nats-py over TLS, client certificates, plain clients refused."""

from __future__ import annotations

import asyncio
import json
import ssl
from pathlib import Path

import nats
import pytest
from cryptography.x509.oid import NameOID

import pynatsd
from support.certs import make_ca, make_cert
from support.tlsclient import connect_and_ping


def _certs(tmp_path: Path) -> tuple[str, str, str, str, str]:
    ca = make_ca()
    server = make_cert(
        ca, [(NameOID.COMMON_NAME, "localhost")], dns=("localhost",), ips=("127.0.0.1",)
    )
    client = make_cert(ca, [(NameOID.COMMON_NAME, "client")])
    ca_path, _ = ca.write(tmp_path, "ca")
    cert, key = server.write(tmp_path, "server")
    ccert, ckey = client.write(tmp_path, "client")
    return ca_path, cert, key, ccert, ckey


async def test_natspy_over_tls(tmp_path: Path) -> None:
    ca, cert, key, _, _ = _certs(tmp_path)
    async with pynatsd.Server(port=0, tls=True, tls_cert=cert, tls_key=key) as server:
        ctx = ssl.create_default_context(cafile=ca)
        nc = await nats.connect(f"tls://127.0.0.1:{server.port}", tls=ctx)
        sub = await nc.subscribe("secure")
        await nc.publish("secure", b"encrypted")
        assert (await sub.next_msg(timeout=2)).data == b"encrypted"
        await nc.close()


async def test_plain_client_refused(tmp_path: Path) -> None:
    _, cert, key, _, _ = _certs(tmp_path)
    async with pynatsd.Server(port=0, tls=True, tls_cert=cert, tls_key=key) as server:
        reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
        info = json.loads((await reader.readline())[5:])
        assert info["tls_required"] is True
        writer.write(b"CONNECT {}\r\nPING\r\n")
        await writer.drain()
        # As nats-server: the plain text is not TLS, so the connection closes with nothing more
        # (tests/auth/test_tls_connects_vs_nats_server.py compares the two).
        rest = await asyncio.wait_for(reader.read(), 5)
        assert rest == b""
        writer.close()


async def test_client_certificate_verified(tmp_path: Path) -> None:
    ca, cert, key, ccert, ckey = _certs(tmp_path)
    async with pynatsd.Server(
        port=0, tls=True, tls_cert=cert, tls_key=key, tls_ca_cert=ca, tls_verify=True
    ) as server:
        good = ssl.create_default_context(cafile=ca)
        good.load_cert_chain(ccert, ckey)
        nc = await nats.connect(f"tls://127.0.0.1:{server.port}", tls=good)
        assert nc.is_connected
        await nc.close()
        no_cert = ssl.create_default_context(cafile=ca)
        with pytest.raises((nats.errors.NoServersError, nats.errors.Error, OSError)):
            await nats.connect(
                f"tls://127.0.0.1:{server.port}",
                tls=no_cert,
                allow_reconnect=False,
                max_reconnect_attempts=0,
                connect_timeout=2,
            )


async def test_handshake_first(tmp_path: Path) -> None:
    ca, cert, key, _, _ = _certs(tmp_path)
    async with pynatsd.Server(
        port=0, tls=True, tls_cert=cert, tls_key=key, tls_handshake_first=True
    ) as server:
        ctx = ssl.create_default_context(cafile=ca)
        nc = await nats.connect(f"tls://127.0.0.1:{server.port}", tls=ctx, tls_handshake_first=True)
        assert nc.is_connected
        await nc.close()


async def test_large_messages_over_tls(tmp_path: Path) -> None:
    """Payloads of many TLS records each way, read and written in pieces of any size."""
    ca, cert, key, _, _ = _certs(tmp_path)
    async with pynatsd.Server(port=0, tls=True, tls_cert=cert, tls_key=key) as server:
        ctx = ssl.create_default_context(cafile=ca)
        nc = await nats.connect(f"tls://127.0.0.1:{server.port}", tls=ctx)
        sub = await nc.subscribe("big")
        payloads = [bytes([i]) * (1_000_000 - i * 7919) for i in range(8)]
        for payload in payloads:
            await nc.publish("big", payload)
        for payload in payloads:
            assert (await sub.next_msg(timeout=5)).data == payload
        await nc.close()


async def test_slow_consumer_over_tls(tmp_path: Path) -> None:
    """Encrypted bytes waiting for a subscriber that does not read count as pending: it is
    closed as a slow consumer and the publisher goes on."""
    ca, cert, key, _, _ = _certs(tmp_path)
    async with pynatsd.Server(
        port=0, tls=True, tls_cert=cert, tls_key=key, max_pending=256 * 1024
    ) as server:
        ctx = ssl.create_default_context(cafile=ca)
        slow = await connect_and_ping("127.0.0.1", server.port, ctx, "info-first")
        slow.send(b"SUB firehose 1\r\nPING\r\n")
        assert await slow.read_line() == b"PONG\r\n"
        (slow_cid,) = server.clients
        publisher = await nats.connect(f"tls://127.0.0.1:{server.port}", tls=ctx)
        payload = b"x" * 1024
        for _ in range(30_000):
            await publisher.publish("firehose", payload)
        await asyncio.wait_for(publisher.flush(), 30)
        assert server.slow_consumers == 1
        assert slow_cid not in server.clients
        assert publisher.is_connected
        slow.close()
        await publisher.close()
