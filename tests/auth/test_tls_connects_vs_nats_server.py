"""TLS connects, side by side with nats-server: many at once, and what a client sees when the
handshake goes wrong (plain text, silence, no or an unknown certificate, close_notify).

pynatsd runs as a process (on uvloop, as users run it): the TLS race this guards against
(issue 13, item 9: a ClientHello reaching the NATS parser before the upgrade) only showed there.
The "eager" client sends its ClientHello before INFO has arrived, as any client looks to a
server that is slow to start TLS.
"""

from __future__ import annotations

import asyncio
import collections
import hashlib
import json
import socket
import ssl
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.x509.oid import NameOID

from support.certs import Cert, make_ca, make_cert
from support.natsserver import NATS_SERVER
from support.ports import LOOPBACK
from support.processes import PYNATSD, start_server
from support.tlsclient import Start, TLSClient, connect, connect_and_ping

pytestmark = pytest.mark.skipif(not NATS_SERVER.exists(), reason="nats-server binary not found")

SERVERS = {"nats-server": (str(NATS_SERVER),), "pynatsd": PYNATSD}
# Short, so that the timeout cases take well under a second.
TLS_TIMEOUT = 0.5
FALLBACK = 0.3


@dataclass
class Certs:
    ca: str
    cert: str
    key: str
    client: Cert  # signed by the CA, CN=client
    ca_cert: Cert

    def client_context(self, tmp: Path, cert: Cert | None = None) -> ssl.SSLContext:
        ctx = ssl.create_default_context(cafile=self.ca)
        if cert is not None:
            ctx.load_cert_chain(*cert.write(tmp, f"client-{id(cert)}"))
        return ctx


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Certs:
    tmp = tmp_path_factory.mktemp("tls-certs")
    ca = make_ca()
    server = make_cert(
        ca, [(NameOID.COMMON_NAME, "localhost")], dns=("localhost",), ips=("127.0.0.1",)
    )
    client = make_cert(ca, [(NameOID.COMMON_NAME, "client")])
    ca_path, _ = ca.write(tmp, "ca")
    cert, key = server.write(tmp, "server")
    return Certs(ca_path, cert, key, client, ca)


def _listening(host: str, port: int) -> bool:
    # A server with handshake_first greets nobody in plain text: a TCP connect is the probe.
    try:
        with socket.create_connection((host, port), timeout=1.0):
            return True
    except OSError:
        return False


@pytest.fixture
def run(tmp_path: Path) -> Iterator[Callable[..., int]]:
    """run(kind, tls_block, extra_conf="") -> port: the server `kind` with that `tls {}`."""
    started = []

    def start(kind: str, tls_block: str, extra: str = "") -> int:
        conf = tmp_path / f"{kind}-{len(started)}.conf"
        conf.write_text(f"tls {{ {tls_block} }}\n{extra}\n")
        server = start_server(SERVERS[kind], ["-c", str(conf)], ready=_listening)
        started.append(server)
        return server.port

    yield start
    for server in started:
        server.stop()


def _tls_block(certs: Certs, extra: str = "") -> str:
    return f'cert_file: "{certs.cert}", key_file: "{certs.key}", {extra}'


# -- many connects at once -----------------------------------------------------------------------

CONNECTS = 300
WAVE = 20
# In an INFO-first run every other client is eager (ClientHello before INFO).
STARTS: dict[str, tuple[Start, ...]] = {
    "info-first": ("info-first", "eager"),
    "handshake-first": ("handshake-first",),
}


async def _connect_waves(port: int, ctx: ssl.SSLContext, starts: tuple[Start, ...]) -> list[str]:
    """CONNECTS complete connects in waves of WAVE, all kept open to the end; the failures."""
    failures: list[str] = []
    opened: list[TLSClient] = []
    for first in range(0, CONNECTS, WAVE):
        outcomes = await asyncio.gather(
            *(
                asyncio.wait_for(
                    connect_and_ping(LOOPBACK, port, ctx, starts[(first + i) % len(starts)]), 20
                )
                for i in range(WAVE)
            ),
            return_exceptions=True,
        )
        for outcome in outcomes:
            if isinstance(outcome, BaseException):
                failures.append(repr(outcome))
            else:
                opened.append(outcome)
    for client in opened:
        client.close()
    return failures


@pytest.mark.parametrize("mode", ["info-first", "handshake-first"])
async def test_concurrent_connects_all_complete(
    run: Callable[..., int], certs: Certs, tmp_path: Path, mode: str
) -> None:
    first = "true" if mode == "handshake-first" else "false"
    ctx = certs.client_context(tmp_path)
    failures = {}
    for kind in SERVERS:
        port = run(kind, _tls_block(certs, f"timeout: 5, handshake_first: {first}"))
        failures[kind] = collections.Counter(await _connect_waves(port, ctx, STARTS[mode]))
    assert failures == {"nats-server": {}, "pynatsd": {}}


# -- what a client sees when the handshake does not happen ----------------------------------------


async def _raw_exchange(port: int, send: bytes, expect_info: bool) -> tuple[bytes, bytes, float]:
    """Connect in plain text; read the INFO line (if one is expected), send `send`, then read
    until the server closes. Returns (INFO line, the rest, seconds until the close)."""
    reader, writer = await asyncio.open_connection(LOOPBACK, port)
    start = time.monotonic()
    info = await asyncio.wait_for(reader.readline(), 5) if expect_info else b""
    if send:
        writer.write(send)
    try:
        rest = await asyncio.wait_for(reader.read(), 5)
    except ConnectionResetError:
        rest = b"<reset>"
    elapsed = time.monotonic() - start
    writer.close()
    return info, rest, elapsed


def _when(elapsed: float, timeout: float) -> str:
    # The server's timer starts at its accept, ours when the connect returns: on a loaded box
    # that can be a tenth of a second later, so "at once" is well under the timeout.
    if elapsed < timeout * 0.5:
        return "at once"
    return "after the TLS timeout" if elapsed < timeout + 1.0 else "late"


@pytest.mark.parametrize(
    ("send", "what"),
    [
        (b"CONNECT {}\r\nPING\r\n", "plain protocol"),
        (b"PING\r\n", "ping"),
        (b"", "nothing"),
        (b"CO", "less than a record header"),
        (b"GET / HTTP/1.1\r\nHost: x\r\n\r\n", "http"),
    ],
)
async def test_plain_text_client_on_tls_port(
    run: Callable[..., int], certs: Certs, send: bytes, what: str
) -> None:
    seen = {}
    for kind in SERVERS:
        port = run(kind, _tls_block(certs, f"timeout: {TLS_TIMEOUT}"))
        info, rest, elapsed = await _raw_exchange(port, send, expect_info=True)
        seen[kind] = (json.loads(info[5:])["tls_required"], rest, _when(elapsed, TLS_TIMEOUT))
    assert seen["pynatsd"] == seen["nats-server"], what
    assert seen["pynatsd"][1] == b""  # never a protocol error in plain text


async def test_handshake_first_silent_client(run: Callable[..., int], certs: Certs) -> None:
    seen = {}
    for kind in SERVERS:
        port = run(kind, _tls_block(certs, f"timeout: {TLS_TIMEOUT}, handshake_first: true"))
        _, rest, elapsed = await _raw_exchange(port, b"", expect_info=False)
        seen[kind] = (rest, _when(elapsed, TLS_TIMEOUT))
    assert seen["pynatsd"] == seen["nats-server"] == (b"", "after the TLS timeout")


async def test_handshake_first_fallback(
    run: Callable[..., int], certs: Certs, tmp_path: Path
) -> None:
    """`handshake_first: 300ms`: a client that says nothing that long gets INFO in plain text
    and upgrades after it; one that starts TLS at once gets INFO over TLS."""
    ctx = certs.client_context(tmp_path)
    seen = {}
    for kind in SERVERS:
        port = run(kind, _tls_block(certs, f'handshake_first: "{int(FALLBACK * 1000)}ms"'))
        start = time.monotonic()
        late, info = await connect(LOOPBACK, port, ctx, "info-first")
        waited = time.monotonic() - start
        late.send(b'CONNECT {"verbose":false}\r\nPING\r\n')
        pong = await late.read_line()
        late.close()
        first = await connect_and_ping(LOOPBACK, port, ctx, "handshake-first")
        first.close()
        seen[kind] = (json.loads(info[5:])["tls_required"], waited >= FALLBACK * 0.9, pong)
    assert seen["pynatsd"] == seen["nats-server"] == (True, True, b"PONG\r\n")


@pytest.mark.parametrize("first", ["false", "true"])
async def test_refused_connection_is_told_in_plain_text(
    run: Callable[..., int], certs: Certs, first: str
) -> None:
    """Maximum connections: the refusal comes before any TLS (after INFO unless
    handshake_first, where no INFO goes out in plain text)."""
    seen = {}
    for kind in SERVERS:
        port = run(kind, _tls_block(certs, f"handshake_first: {first}"), "max_connections: -1")
        info, rest, _ = await _raw_exchange(port, b"", expect_info=first == "false")
        seen[kind] = (info[:5], rest)
    assert seen["pynatsd"] == seen["nats-server"]
    assert seen["pynatsd"][1] == b"-ERR 'maximum connections exceeded'\r\n"


async def _plain_connect(port: int, wait: float) -> bytes:
    """A client without TLS: INFO, `wait` seconds of silence, CONNECT+PING; the reply line."""
    reader, writer = await asyncio.open_connection(LOOPBACK, port)
    try:
        await asyncio.wait_for(reader.readline(), 5)
        await asyncio.sleep(wait)
        writer.write(b'CONNECT {"verbose":false}\r\nPING\r\n')
        return await asyncio.wait_for(reader.readline(), 5)
    except (ConnectionError, TimeoutError) as e:
        return type(e).__name__.encode()
    finally:
        writer.close()


@pytest.mark.parametrize("first", ["false", f'"{int(FALLBACK * 1000)}ms"'])
async def test_allow_non_tls(
    run: Callable[..., int], certs: Certs, tmp_path: Path, first: str
) -> None:
    """allow_non_tls: the client's first byte chooses TLS or plain text; a client silent for
    the TLS timeout is taken as plain text. (With a handshake_first fallback, after the INFO
    the silence brings.) The INFO's TLS fields are item 6's and not compared here."""
    ctx = certs.client_context(tmp_path)
    seen = {}
    for kind in SERVERS:
        block = _tls_block(certs, f"timeout: {TLS_TIMEOUT}, handshake_first: {first}")
        port = run(kind, block, "allow_non_tls: true")
        outcomes = []
        # With the fallback, a client that speaks first gets the handshake first.
        starts: tuple[Start, Start] = (
            ("info-first", "eager") if first == "false" else ("info-first", "handshake-first")
        )
        for start in starts:
            client = await connect_and_ping(LOOPBACK, port, ctx, start)
            client.close()
            outcomes.append(f"{start}: PONG")
        outcomes.append((await _plain_connect(port, 0)).decode())
        outcomes.append((await _plain_connect(port, TLS_TIMEOUT * 1.5)).decode())
        seen[kind] = outcomes
    assert seen["pynatsd"] == seen["nats-server"]
    assert seen["pynatsd"][2:] == ["PONG\r\n", "PONG\r\n"]


async def _connect_outcome(port: int, ctx: ssl.SSLContext, start: Start) -> str:
    try:
        client = await asyncio.wait_for(connect_and_ping(LOOPBACK, port, ctx, start), 5)
    except ConnectionError as e:
        return str(e)
    except ssl.SSLError as e:
        return f"TLS error: {e.reason}"
    client.close()
    return "PONG"


@pytest.mark.parametrize("start", ["info-first", "handshake-first"])
async def test_connection_rate_limit(
    run: Callable[..., int], certs: Certs, tmp_path: Path, start: Start
) -> None:
    """connection_rate_limit: 3 per second; the others are told in plain text before TLS."""
    ctx = certs.client_context(tmp_path)
    first = "true" if start == "handshake-first" else "false"
    seen = {}
    for kind in SERVERS:
        port = run(kind, _tls_block(certs, f"connection_rate_limit: 3, handshake_first: {first}"))
        await asyncio.sleep(1.1)  # the readiness probe's connection counted in its own second
        outcomes = [await _connect_outcome(port, ctx, start) for _ in range(4)]
        # What the refused see, read in plain text.
        _, refusal, _ = await _raw_exchange(port, b"", expect_info=start == "info-first")
        seen[kind] = (collections.Counter(outcomes), refusal)
    assert seen["pynatsd"] == seen["nats-server"]
    assert seen["pynatsd"][0]["PONG"] == 3
    assert (
        seen["pynatsd"][1] == b"-ERR 'Connection throttling is active. Please try again later.'\r\n"
    )


# -- certificates ---------------------------------------------------------------------------------


async def _observe(port: int, ctx: ssl.SSLContext, start: Start) -> tuple[str, ...]:
    """What a client sees: the handshake's outcome, the reply to CONNECT+PING, and the end."""
    try:
        client, _ = await asyncio.wait_for(connect(LOOPBACK, port, ctx, start), 5)
    except ssl.SSLError as e:
        return ("handshake failed", str(e.reason))
    except (ConnectionError, asyncio.IncompleteReadError) as e:
        return ("handshake failed", type(e).__name__)
    try:
        client.send(b'CONNECT {"verbose":false}\r\nPING\r\n')
        first = await asyncio.wait_for(client.read_line(), 5)
    except ssl.SSLError as e:
        return ("alert after the handshake", str(e.reason))
    except ConnectionError as e:
        return ("closed after the handshake", str(e))
    if first == b"PONG\r\n":
        client.close_notify()
        rest, end = await asyncio.wait_for(client.read_rest(), 5)
        client.close()
        return (first.decode(), "closed by the client", rest.decode(), end)
    rest, end = await asyncio.wait_for(client.read_rest(), 5)
    client.close()
    return (first.decode(), rest.decode(), end)


def _spki_sha256(cert: Cert) -> str:
    spki = cert.cert.public_key().public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    return hashlib.sha256(spki).hexdigest()


@pytest.mark.parametrize("start", ["info-first", "handshake-first"])
async def test_client_certificates(
    run: Callable[..., int], certs: Certs, tmp_path: Path, start: Start
) -> None:
    """verify: with the CA's certificate a client connects, without one it gets the TLS alert;
    verify_and_map: the certificate names the user (before CONNECT is processed), an unknown
    one is an authorization violation; pinned_certs: a certificate not pinned is refused."""
    first = "true" if start == "handshake-first" else "false"
    stranger = make_cert(certs.ca_cert, [(NameOID.COMMON_NAME, "mallory")])
    with_cert = certs.client_context(tmp_path, certs.client)
    with_stranger = certs.client_context(tmp_path, stranger)
    without = certs.client_context(tmp_path)
    verify = _tls_block(certs, f'ca_file: "{certs.ca}", verify: true, handshake_first: {first}')
    mapped = _tls_block(
        certs, f'ca_file: "{certs.ca}", verify_and_map: true, handshake_first: {first}'
    )
    pinned = f'{verify}, pinned_certs: ["{_spki_sha256(certs.client)}"]'
    users = 'authorization { users: [{user: "CN=client"}] }'
    configs = [
        (verify, "", [("verify, certificate", with_cert), ("verify, none", without)]),
        (mapped, users, [("map, known", with_cert), ("map, unknown", with_stranger)]),
        (pinned, "", [("pinned", with_cert), ("not pinned", with_stranger)]),
    ]
    seen: dict[str, dict[str, tuple[str, ...]]] = {}
    for kind in SERVERS:
        for block, extra, cases in configs:
            port = run(kind, block, extra)
            for name, ctx in cases:
                seen.setdefault(name, {})[kind] = await _observe(port, ctx, start)
    for name, by_server in seen.items():
        assert by_server["pynatsd"] == by_server["nats-server"], name
    assert seen["verify, certificate"]["pynatsd"][0] == "PONG\r\n"
    assert seen["map, unknown"]["pynatsd"][0] == "-ERR 'Authorization Violation'\r\n"
