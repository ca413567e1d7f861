"""The data source's connection against nats-server with a token, nkeys and TLS (pynatsd's own
auth and TLS are tested in their own suites; these check our client side of each)."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import nkeys
import pytest

from pynatsd.spark.errors import ConnectError
from pynatsd.spark.options import ConnectOptions, parse_read_options, parse_servers
from pynatsd.spark.wire import Connection, _read_creds
from support.natsserver import require_nats_server as nats_server_binary
from support.ports import free_port
from support.processes import ServerProcess


def _server(tmp_path: Path, *args: str) -> ServerProcess:
    port = free_port()
    argv = [nats_server_binary(), "-p", str(port), "-a", "127.0.0.1", *args]
    server = ServerProcess(argv, port, str(tmp_path))
    server.start()
    return server


@pytest.fixture
def token_server(tmp_path: Path) -> Iterator[ServerProcess]:
    server = _server(tmp_path, "--auth", "s3cret")
    yield server
    server.stop()


def _connect(url: str, **kw: str) -> None:
    with Connection.open(ConnectOptions(servers=parse_servers(url), **kw)) as conn:  # type: ignore[arg-type]
        conn.flush(5)


def test_token(token_server: ServerProcess) -> None:
    _connect(token_server.url, token="s3cret")
    with pytest.raises(ConnectError, match="Authorization Violation"):
        _connect(token_server.url, token="wrong")


def _user_seed() -> bytes:
    seed: bytes = nkeys.encode_seed(os.urandom(32), nkeys.PREFIX_BYTE_USER)
    return seed


def test_nkey(tmp_path: Path) -> None:
    seed = _user_seed()
    public = nkeys.from_seed(bytearray(seed)).public_key.decode()
    conf = tmp_path / "nkey.conf"
    conf.write_text(f'authorization {{ users = [ {{ nkey: "{public}" }} ] }}\n')
    seed_file = tmp_path / "user.nk"
    seed_file.write_bytes(seed + b"\n")
    server = _server(tmp_path, "-c", str(conf))
    try:
        _connect(server.url, nkey_seed=str(seed_file))  # a seed file
        _connect(server.url, nkey_seed=seed.decode())  # the seed itself
        with pytest.raises(ConnectError, match="Authorization Violation"):
            _connect(server.url, nkey_seed=_user_seed().decode())
    finally:
        server.stop()


def test_tls(tmp_path: Path) -> None:
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
         "-subj", "/CN=localhost", "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost",
         "-keyout", str(key), "-out", str(cert)],
        check=True, capture_output=True,
    )  # fmt: skip
    server = _server(tmp_path, "--tls", "--tlscert", str(cert), "--tlskey", str(key))
    try:
        url = f"tls://127.0.0.1:{server.port}"
        _connect(url, tls_ca=str(cert))
        # The server asks for TLS: a nats:// URL with a CA upgrades too.
        _connect(server.url, tls_ca=str(cert))
        with pytest.raises(ConnectError, match=r"TLS handshake .* failed"):
            _connect(url)  # the system CAs do not know our certificate
    finally:
        server.stop()


def test_connect_options_from_source_options(tmp_path: Path) -> None:
    ca = tmp_path / "ca.pem"
    ca.write_text("x")
    opts = parse_read_options(
        {
            "stream": "S",
            "servers": "tls://u:p%40ss@h1:4333,h2",
            "nats.token": "t",
            "tls.ca": str(ca),
            "nats.connect_timeout": "500ms",
        },
        "batch",
    )
    c = opts.connect
    assert [str(s) for s in c.servers] == ["tls://h1:4333", "nats://h2:4222"]
    assert (c.servers[0].user, c.servers[0].password) == ("u", "p@ss")
    assert c.token == "t" and c.tls_ca == str(ca) and c.connect_timeout == 0.5 and c.wants_tls


def test_creds_file_parsing(tmp_path: Path) -> None:
    creds = tmp_path / "user.creds"
    creds.write_text(
        "-----BEGIN NATS USER JWT-----\neyJhbGciOi.payload.sig\n"
        "------END NATS USER JWT------\n\n"
        "************************* IMPORTANT *************************\n"
        "-----BEGIN USER NKEY SEED-----\n"
        "SUAIBDPBAUTWCWBKIO6XHQNINK5FWJW4OHLXC3HQ2KFE4PEJUA44CNHTC4\n"
        "------END USER NKEY SEED------\n"
    )
    jwt, seed = _read_creds(str(creds))
    assert jwt == b"eyJhbGciOi.payload.sig"
    assert seed.startswith(b"SUAIB")
