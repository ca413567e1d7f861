"""`allow_non_tls: true` side by side with nats-server: TLS offered, not required.

nats-server's INFO then says `"tls_available":true` and leaves `tls_required` out; it looks at
the client's first byte: a TLS handshake upgrades the connection, anything else goes on in plain
text. So a client without TLS connects, and a client that starts TLS after INFO (as nats.go does
when told to use TLS) gets TLS. nats-py starts TLS only when INFO says `tls_required`, so with a
TLS context and a `tls://` URL it connects in plain text, on both servers alike. With
`handshake_first` TLS comes first whatever `allow_non_tls` says.
"""

from __future__ import annotations

import asyncio
import socket
import ssl
import subprocess
from collections.abc import Iterator
from pathlib import Path

import nats
import pytest
from cryptography.x509.oid import NameOID

from support.certs import make_ca, make_cert
from support.natsserver import require_nats_server
from support.normalise import normalise
from support.ports import free_port, wait_listening
from support.processes import PYNATSD, ServerProcess, start_server


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str, str, str]:
    directory = tmp_path_factory.mktemp("allow-non-tls")
    ca = make_ca()
    server = make_cert(
        ca, [(NameOID.COMMON_NAME, "localhost")], dns=("localhost",), ips=("127.0.0.1",)
    )
    ca_path, _ = ca.write(directory, "ca")
    cert, key = server.write(directory, "server")
    return directory, ca_path, cert, key


def _servers(certs: tuple[Path, str, str, str], extra: str) -> Iterator[ServerProcess]:
    directory, _, cert, key = certs
    conf = directory / "server.conf"
    conf.write_text(
        f'tls {{ cert_file: "{cert}", key_file: "{key}" {extra} }}\nallow_non_tls: true\n'
    )
    for cmd in ([require_nats_server()], list(PYNATSD)):
        server = start_server(cmd, ["-c", str(conf)])
        try:
            yield server
        finally:
            server.stop()


def _read_line(sock: socket.socket) -> bytes:
    data = b""
    while not data.endswith(b"\n"):
        chunk = sock.recv(1)
        if not chunk:
            break
        data += chunk
    return data


def _read_until(sock: socket.socket, marker: bytes) -> bytes:
    data = b""
    while marker not in data:
        chunk = sock.recv(4096)
        if not chunk:
            break
        data += chunk
    return data


def _observe(server: ServerProcess, ca: str) -> dict[str, object]:
    seen: dict[str, object] = {}
    # A client without TLS: INFO, CONNECT, PING, in plain text.
    with socket.create_connection((server.host, server.port), timeout=5) as plain:
        seen["greeting"] = normalise(_read_line(plain))
        plain.sendall(b'CONNECT {"verbose":false,"protocol":1}\r\nPING\r\n')
        seen["plain"] = normalise(_read_until(plain, b"} \r\n"))
    # A client that wants TLS: reads INFO, then starts the handshake (nats.go's way).
    ctx = ssl.create_default_context(cafile=ca)
    with socket.create_connection((server.host, server.port), timeout=5) as raw:
        _read_line(raw)
        with ctx.wrap_socket(raw, server_hostname="localhost") as tls:
            tls.sendall(b'CONNECT {"verbose":false}\r\nPING\r\n')
            seen["upgraded"] = (_read_until(tls, b"PONG\r\n"), tls.version() is not None)
    seen["nats-py"] = asyncio.run(_natspy(server, ctx))
    return seen


async def _natspy(server: ServerProcess, ctx: ssl.SSLContext) -> list[bytes]:
    got = []
    for url, tls in (
        (f"nats://{server.host}:{server.port}", None),
        (f"tls://localhost:{server.port}", ctx),
    ):
        nc = await nats.connect(url, tls=tls, allow_reconnect=False, connect_timeout=5)
        sub = await nc.subscribe("t")
        await nc.publish("t", url.split(":")[0].encode())
        got.append((await sub.next_msg(timeout=5)).data)
        await nc.close()
    return got


def test_allow_non_tls_matches_nats_server(certs: tuple[Path, str, str, str]) -> None:
    ca = certs[1]
    ref, cand = (_observe(server, ca) for server in _servers(certs, ""))
    assert b'"tls_available":true' in ref["greeting"]  # type: ignore[operator]
    assert b"tls_required" not in ref["greeting"]  # type: ignore[operator]
    assert ref["upgraded"] == (b"PONG\r\n", True)
    assert ref["nats-py"] == [b"nats", b"tls"]
    assert cand == ref


def test_handshake_first_overrides_allow_non_tls(certs: tuple[Path, str, str, str]) -> None:
    """TLS first: the INFO (sent over TLS) says both tls_required and tls_available."""
    directory, ca, cert, key = certs
    conf = directory / "first.conf"
    conf.write_text(
        f'tls {{ cert_file: "{cert}", key_file: "{key}", handshake_first: true }}\n'
        "allow_non_tls: true\n"
    )
    ctx = ssl.create_default_context(cafile=ca)
    greetings = []
    for cmd in ([require_nats_server()], list(PYNATSD)):
        port = free_port()
        # Not start_server: its readiness probe waits for a plain-text INFO.
        proc = subprocess.Popen(
            [*cmd, "-c", str(conf), "-p", str(port), "-a", "127.0.0.1"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            if not wait_listening(port, 15):
                raise TimeoutError(f"nothing listens on {port}")
            with (
                socket.create_connection(("127.0.0.1", port), timeout=5) as raw,
                ctx.wrap_socket(raw, server_hostname="localhost") as tls,
            ):
                greetings.append(normalise(_read_line(tls)))
        finally:
            proc.terminate()
            proc.wait(timeout=10)
    ref, cand = greetings
    assert b'"tls_required":true' in ref and b'"tls_available":true' in ref
    assert cand == ref
