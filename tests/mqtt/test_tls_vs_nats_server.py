"""MQTT over TLS side by side: the `mqtt { tls { verify | verify_and_map } }` listener, with
paho-mqtt clients showing a certificate or none, on nats-server and pynatsd.

`verify` asks every client for a certificate the CA signed; `verify_and_map` also takes the
user from it (an e-mail, DNS or URI name, or the subject), the MQTT listener's own setting
(the client listener's `verify_and_map` does not apply to MQTT), with that user's
permissions.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import re
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat
from cryptography.x509.oid import NameOID

from support.certs import make_ca, make_cert
from support.mqtt import Client, MQTTServer, TLSFiles, mqtt_servers
from support.natsserver import require_nats_server
from support.processes import wait_for_log_line

pytestmark = pytest.mark.timeout(120)

_ids = itertools.count()
# paho-mqtt 2 reports a 3.1.1 CONNACK's 5 (not authorized) as MQTT 5's 0x87.
NOT_AUTHORIZED = 0x87
USERS = """authorization { users = [
  { user: "alice@example.com", permissions: { subscribe: "a.>" } }
  { user: bob, password: pw }
] }"""
# Who connects: the certificate shown (None: none) and the user name and password sent.
ATTEMPTS = {
    "no certificate": (None, None),
    "alice's certificate": ("alice", None),
    "an unknown certificate": ("mallory", None),
    "no certificate, bob": (None, ("bob", "pw")),
    "an unknown certificate, bob": ("mallory", ("bob", "pw")),
    "alice's certificate, bob": ("alice", ("bob", "pw")),
}


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """A CA, the servers' certificate, and two clients': alice (her e-mail as a name) and
    mallory (no user has her name)."""
    directory = tmp_path_factory.mktemp("mqtt-tls-certs")
    ca = make_ca()
    out = {"ca": ca.write(directory, "ca")[0]}
    server = make_cert(
        ca, [(NameOID.COMMON_NAME, "localhost")], ips=("127.0.0.1",), dns=("localhost",)
    )
    out["server"], out["server-key"] = server.write(directory, "server")
    alice = make_cert(ca, [(NameOID.COMMON_NAME, "alice")], emails=("alice@example.com",))
    out["alice"], out["alice-key"] = alice.write(directory, "alice")
    mallory = make_cert(ca, [(NameOID.COMMON_NAME, "mallory")])
    out["mallory"], out["mallory-key"] = mallory.write(directory, "mallory")
    return out


def tls_servers(directory: Path, files: dict[str, str], flag: str) -> Iterator[list[MQTTServer]]:
    require_nats_server()
    block = (
        f'tls {{ cert_file: "{files["server"]}", key_file: "{files["server-key"]}", '
        f'ca_file: "{files["ca"]}", {flag} }}'
    )
    extra = USERS + "\nhttp: 127.0.0.1:{free_port}"
    with mqtt_servers(directory, extra=extra, mqtt_extra=block) as pair:
        yield pair


@pytest.fixture(scope="module")
def verify(
    tmp_path_factory: pytest.TempPathFactory, files: dict[str, str]
) -> Iterator[list[MQTTServer]]:
    yield from tls_servers(tmp_path_factory.mktemp("mqtt-verify"), files, "verify: true")


@pytest.fixture(scope="module")
def mapped(
    tmp_path_factory: pytest.TempPathFactory, files: dict[str, str]
) -> Iterator[list[MQTTServer]]:
    yield from tls_servers(tmp_path_factory.mktemp("mqtt-map"), files, "verify_and_map: true")


def attempt(
    server: MQTTServer, files: dict[str, str], who: str | None, creds: tuple[str, str] | None
) -> object:
    """The CONNACK (session present, return code), or "closed" when the connection ends
    before one (the TLS handshake refused the client)."""
    tls = TLSFiles(files["ca"], files[who], files[f"{who}-key"]) if who else TLSFiles(files["ca"])
    user, password = creds if creds else (None, None)
    try:
        client = Client(
            server.mqtt_port, f"c{next(_ids)}", tls=tls, username=user, password=password
        )
    except OSError:
        return "closed"
    try:
        return client.connack if client.connack is not None else "closed"
    finally:
        client.disconnect()


def outcomes(servers: list[MQTTServer], files: dict[str, str]) -> dict[str, object]:
    results = {
        s.name: {name: attempt(s, files, *how) for name, how in ATTEMPTS.items()} for s in servers
    }
    assert results["pynatsd"] == results["nats-server"], results
    return results["pynatsd"]


def test_verify_needs_a_certificate(verify: list[MQTTServer], files: dict[str, str]) -> None:
    """`verify`: no certificate, no connection; with one, the user name and password decide
    as without TLS (a certificate alone names nobody)."""
    assert outcomes(verify, files) == {
        "no certificate": "closed",
        "alice's certificate": (False, NOT_AUTHORIZED),
        "an unknown certificate": (False, NOT_AUTHORIZED),
        "no certificate, bob": "closed",
        "an unknown certificate, bob": (False, 0),
        "alice's certificate, bob": (False, 0),
    }


def test_verify_and_map_takes_the_user_from_the_certificate(
    mapped: list[MQTTServer], files: dict[str, str]
) -> None:
    """`verify_and_map`: the certificate names the user; a user name and password sent beside
    it do not replace it (and alice has no password, so they fail)."""
    assert outcomes(mapped, files) == {
        "no certificate": "closed",
        "alice's certificate": (False, 0),
        "an unknown certificate": (False, NOT_AUTHORIZED),
        "no certificate, bob": "closed",
        "an unknown certificate, bob": (False, NOT_AUTHORIZED),
        "alice's certificate, bob": (False, NOT_AUTHORIZED),
    }


def test_mapped_user_has_its_permissions(mapped: list[MQTTServer], files: dict[str, str]) -> None:
    """The mapped user's permissions hold: alice may subscribe to `a.>` only."""

    def scenario(server: MQTTServer) -> object:
        tls = TLSFiles(files["ca"], files["alice"], files["alice-key"])
        client = Client(server.mqtt_port, f"m{next(_ids)}", tls=tls)
        try:
            return client.subscribe(("a/x", 1), ("b/x", 1))
        finally:
            client.disconnect()

    results = {s.name: scenario(s) for s in mapped}
    assert results["pynatsd"] == results["nats-server"], results
    assert results["pynatsd"] == [1, 0x80]


def test_varz_mqtt_block(mapped: list[MQTTServer]) -> None:
    """`/varz` shows the MQTT listener's `tls_map` (its port aside, the blocks are equal)."""
    blocks = {}
    for server in mapped:
        found = re.search(r"http: 127\.0\.0\.1:(\d+)", server.conf.read_text())
        assert found is not None
        url = f"http://127.0.0.1:{found.group(1)}/varz"
        with urllib.request.urlopen(url, timeout=10) as answer:
            block = json.load(answer)["mqtt"]
        block.pop("port")
        blocks[server.name] = block
    assert blocks["pynatsd"] == blocks["nats-server"]
    assert blocks["pynatsd"]["tls_map"] is True


def test_mapped_users_need_no_password_warning(tmp_path: Path, files: dict[str, str]) -> None:
    """A user without a password whom the MQTT listener's `verify_and_map` can select is a
    certificate identity: no "Plaintext passwords detected" warning at start-up."""
    block = (
        f'tls {{ cert_file: "{files["server"]}", key_file: "{files["server-key"]}", '
        f'ca_file: "{files["ca"]}", verify_and_map: true }}'
    )
    users = 'authorization { users = [ { user: "alice@example.com" } ] }'
    with mqtt_servers(tmp_path, extra=users, mqtt_extra=block) as servers:
        warned = {s.name: "Plaintext passwords" in s.process.log_text() for s in servers}
    assert warned == {"nats-server": False, "pynatsd": False}


def test_handshake_error_is_logged(verify: list[MQTTServer], files: dict[str, str]) -> None:
    """A client without a certificate: the failed handshake is logged in crypto/tls's words.
    (nats-server logs some of them as `EOF`, when the client's close wins the race.)"""
    lines = {}
    for server in verify:
        assert attempt(server, files, None, None) == "closed"
        pattern = "TLS handshake error: tls"
        lines[server.name] = wait_for_log_line(server.process.log_text, pattern)
    assert lines["pynatsd"] == lines["nats-server"]
    assert lines["pynatsd"] == "[ERR] TLS handshake error: tls: client didn't provide a certificate"


def test_pinned_certs(tmp_path: Path, files: dict[str, str]) -> None:
    """`pinned_certs`: a verified certificate that is not pinned is refused."""
    key = x509.load_pem_x509_certificate(Path(files["alice"]).read_bytes()).public_key()
    spki = key.public_bytes(Encoding.DER, PublicFormat.SubjectPublicKeyInfo)
    block = (
        f'tls {{ cert_file: "{files["server"]}", key_file: "{files["server-key"]}", '
        f'ca_file: "{files["ca"]}", verify: true, '
        f'pinned_certs: ["{hashlib.sha256(spki).hexdigest()}"] }}'
    )
    with mqtt_servers(tmp_path, mqtt_extra=block) as servers:
        results = {
            s.name: [attempt(s, files, who, None) for who in ("alice", "mallory")] for s in servers
        }
    assert results["pynatsd"] == results["nats-server"], results
    assert results["pynatsd"] == [(False, 0), "closed"]
