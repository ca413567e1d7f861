"""TLS verify_and_map: which user a client certificate names, side by side with nats-server."""

from __future__ import annotations

import json
import socket
import ssl
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.x509.oid import NameOID

from pynatsd.auth import Authenticator, new_nonce
from pynatsd.config import load_config
from support.certs import Cert, make_ca, make_cert
from support.natsserver import NATS_SERVER
from support.processes import run_nats_server

pytestmark = pytest.mark.skipif(not NATS_SERVER.exists(), reason="nats-server binary not found")

CN, ORG, OU, C, DC = (
    NameOID.COMMON_NAME,
    NameOID.ORGANIZATION_NAME,
    NameOID.ORGANIZATIONAL_UNIT_NAME,
    NameOID.COUNTRY_NAME,
    NameOID.DOMAIN_COMPONENT,
)
USERS = [
    "alice@example.com",
    "svc.example.com",
    "spiffe://example.org/ns/a",
    "CN=dn-user,OU=eng,O=Acme,C=US",
    "O=Reordered,CN=reorder-user",
    "CN=dc-user,DC=example,DC=com",
    "CN=with\\, comma,O=Acme",
]


def _clients(ca: Cert) -> list[tuple[str, Cert]]:
    return [
        ("email", make_cert(ca, [(CN, "x")], emails=("alice@example.com",))),
        ("dns", make_cert(ca, [(CN, "x")], dns=("nope.example.com", "svc.example.com"))),
        ("uri", make_cert(ca, [(CN, "x")], uris=("spiffe://example.org/ns/a",))),
        ("dn", make_cert(ca, [(C, "US"), (ORG, "Acme"), (OU, "eng"), (CN, "dn-user")])),
        ("dn order", make_cert(ca, [(ORG, "Acme"), (C, "US"), (OU, "eng"), (CN, "dn-user")])),
        ("reordered", make_cert(ca, [(ORG, "Reordered"), (CN, "reorder-user")])),
        ("domain components", make_cert(ca, [(DC, "com"), (DC, "example"), (CN, "dc-user")])),
        ("escaped", make_cert(ca, [(ORG, "Acme"), (CN, "with, comma")])),
        ("unknown", make_cert(ca, [(CN, "mallory")])),
        ("unknown with san", make_cert(ca, [(CN, "mallory")], dns=("evil.example.com",))),
        (
            "email attribute in subject",
            make_cert(
                ca,
                x509.Name(
                    [
                        x509.NameAttribute(CN, "dn-user"),
                        x509.NameAttribute(NameOID.EMAIL_ADDRESS, "a@b.c"),
                    ]
                ),
            ),
        ),
    ]


def _conf(server: tuple[str, str], ca_file: str) -> str:
    users = "\n".join(f"    {{user: {json.dumps(u)}}}" for u in USERS)
    return f"""
tls {{
  cert_file: "{server[0]}"
  key_file: "{server[1]}"
  ca_file: "{ca_file}"
  verify_and_map: true
}}
authorization {{
  users = [
{users}
  ]
}}
"""


def _tls_connect(port: int, client: tuple[str, str], ca_file: str) -> str:
    raw = socket.create_connection(("127.0.0.1", port), timeout=5)
    try:
        info = b""
        while not info.endswith(b"\r\n"):
            info += raw.recv(4096)
        ctx = ssl.create_default_context(cafile=ca_file)
        ctx.check_hostname = False
        ctx.load_cert_chain(*client)
        sock = ctx.wrap_socket(raw)
        sock.sendall(b'CONNECT {"verbose":false,"pedantic":false}\r\nPING\r\n')
        data = b""
        while b"\r\n" not in data:
            chunk = sock.recv(4096)
            if not chunk:
                break
            data += chunk
        return data.split(b"\r\n")[0].decode() or "CLOSED"
    except (ssl.SSLError, OSError) as e:
        return f"CLOSED {e}"
    finally:
        raw.close()


def test_agrees_with_nats_server(tmp_path: Path) -> None:
    ca = make_ca()
    ca_file = ca.write(tmp_path, "ca")[0]
    server = make_cert(ca, [(CN, "localhost")], dns=("localhost",), ips=("127.0.0.1",))
    conf = _conf(server.write(tmp_path, "server"), ca_file)
    (tmp_path / "ours.conf").write_text(conf)
    options = load_config(tmp_path / "ours.conf").options
    assert options.tls and options.tls_map and options.tls_verify
    auth = Authenticator(options)
    results = []
    with run_nats_server(conf, tmp_path) as port:
        for name, cert in _clients(ca):
            real = _tls_connect(port, cert.write(tmp_path, name.replace(" ", "_")), ca_file)
            nonce = new_nonce()
            ours = auth.check({}, nonce, client_cert=cert.der)
            results.append((name, real == "PONG", ours is not None))
            if ours is not None:
                assert ours.method == "tls" and ours.user_label in USERS
    assert [r for r in results if r[1] != r[2]] == []
    allowed = {name for name, real, _ in results if real}
    assert allowed == {
        "email",
        "dns",
        "uri",
        "dn",
        "dn order",
        "reordered",
        "domain components",
        "escaped",
    }


def test_certificate_required(tmp_path: Path) -> None:
    conf = "tls { verify_and_map: true }\nauthorization { users: [{user: a}] }\n"
    path = tmp_path / "t.conf"
    path.write_text(conf)
    auth = Authenticator(load_config(path).options)
    assert auth.check({"user": "a"}, "n") is None
    assert auth.check({}, "n", client_cert=b"not a certificate") is None
