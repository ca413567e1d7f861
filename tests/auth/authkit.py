"""Test helpers for security tests: nkeys, NATS JWTs, X.509 certificates and the real nats-server.

Keys and certificates are generated per test run, never committed.
"""

from __future__ import annotations

import base64
import datetime
import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import nkeys
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

NATS_SERVER = Path(sys.executable).parent / "nats-server"


# -- nkeys and JWTs ------------------------------------------------------------------------


@dataclass
class Key:
    kp: Any

    @property
    def public(self) -> str:
        return str(self.kp.public_key.decode())

    def sign(self, data: bytes) -> bytes:
        return bytes(self.kp.sign(data))

    def sign_nonce(self, nonce: str, urlsafe: bool = True) -> str:
        raw = self.sign(nonce.encode())
        if urlsafe:
            return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()
        return base64.b64encode(raw).decode()


def new_key(prefix: int) -> Key:
    return Key(nkeys.from_seed(nkeys.encode_seed(os.urandom(32), prefix)))


def operator_key() -> Key:
    return new_key(nkeys.PREFIX_BYTE_OPERATOR)


def account_key() -> Key:
    return new_key(nkeys.PREFIX_BYTE_ACCOUNT)


def user_key() -> Key:
    return new_key(nkeys.PREFIX_BYTE_USER)


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def encode_jwt(
    signer: Key,
    subject: str,
    kind: str,
    nats: dict[str, Any] | None = None,
    *,
    name: str = "",
    exp: int = 0,
    nbf: int = 0,
    iat: int | None = None,
    alg: str = "ed25519-nkey",
) -> str:
    header = _b64(json.dumps({"typ": "JWT", "alg": alg}).encode())
    claims: dict[str, Any] = {
        "jti": _b64(os.urandom(16)),
        "iat": int(time.time()) if iat is None else iat,
        "iss": signer.public,
        "name": name or kind,
        "sub": subject,
        "nats": {**(nats or {}), "type": kind, "version": 2},
    }
    if exp:
        claims["exp"] = exp
    if nbf:
        claims["nbf"] = nbf
    payload = _b64(json.dumps(claims).encode())
    signature = _b64(signer.sign(f"{header}.{payload}".encode()))
    return f"{header}.{payload}.{signature}"


# nsc writes these limits; without them the real server would allow 0 subscriptions.
NO_USER_LIMITS = {"subs": -1, "data": -1, "payload": -1}
NO_ACCOUNT_LIMITS = {
    "subs": -1,
    "data": -1,
    "payload": -1,
    "imports": -1,
    "exports": -1,
    "wildcards": True,
    "conn": -1,
    "leaf": -1,
}


@dataclass
class Operator:
    key: Key
    signing: Key
    jwt: str
    system: Key
    system_jwt: str


def make_operator(strict: bool = False) -> Operator:
    op, signing, system = operator_key(), operator_key(), account_key()
    token = encode_jwt(
        op,
        op.public,
        "operator",
        {
            "signing_keys": [signing.public],
            "system_account": system.public,
            "strict_signing_key_usage": strict,
        },
    )
    system_jwt = encode_jwt(signing, system.public, "account", {"limits": NO_ACCOUNT_LIMITS})
    return Operator(op, signing, token, system, system_jwt)


def account_jwt(signer: Key, account: Key, **nats: Any) -> str:
    claims: dict[str, Any] = {"limits": dict(NO_ACCOUNT_LIMITS)}
    claims.update(nats)
    return encode_jwt(signer, account.public, "account", claims)


def user_jwt(signer: Key, user: Key, issuer_account: str = "", **kw: Any) -> str:
    nats: dict[str, Any] = dict(NO_USER_LIMITS)
    exp, nbf = kw.pop("exp", 0), kw.pop("nbf", 0)
    iat = kw.pop("iat", None)
    nats.update(kw)
    if issuer_account:
        nats["issuer_account"] = issuer_account
    return encode_jwt(signer, user.public, "user", nats, exp=exp, nbf=nbf, iat=iat)


# -- certificates ----------------------------------------------------------------------------


@dataclass
class Cert:
    cert: x509.Certificate
    key: ec.EllipticCurvePrivateKey

    @property
    def der(self) -> bytes:
        return self.cert.public_bytes(serialization.Encoding.DER)

    def write(self, directory: Path, name: str) -> tuple[str, str]:
        cert_path, key_path = directory / f"{name}.pem", directory / f"{name}-key.pem"
        cert_path.write_bytes(self.cert.public_bytes(serialization.Encoding.PEM))
        key_path.write_bytes(
            self.key.private_bytes(
                serialization.Encoding.PEM,
                serialization.PrivateFormat.PKCS8,
                serialization.NoEncryption(),
            )
        )
        return str(cert_path), str(key_path)


def _name(attrs: list[tuple[x509.ObjectIdentifier, str]]) -> x509.Name:
    return x509.Name([x509.NameAttribute(oid, value) for oid, value in attrs])


def make_ca(common_name: str = "pynatsd test CA") -> Cert:
    key = ec.generate_private_key(ec.SECP256R1())
    name = _name([(NameOID.COMMON_NAME, common_name)])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .sign(key, hashes.SHA256())
    )
    return Cert(cert, key)


def make_cert(
    ca: Cert,
    subject: list[tuple[x509.ObjectIdentifier, str]] | x509.Name,
    *,
    dns: tuple[str, ...] = (),
    emails: tuple[str, ...] = (),
    uris: tuple[str, ...] = (),
    ips: tuple[str, ...] = (),
) -> Cert:
    import ipaddress

    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.UTC)
    name = subject if isinstance(subject, x509.Name) else _name(subject)
    builder = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(ca.cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(
            x509.ExtendedKeyUsage(
                [x509.ExtendedKeyUsageOID.SERVER_AUTH, x509.ExtendedKeyUsageOID.CLIENT_AUTH]
            ),
            critical=False,
        )
    )
    alt: list[x509.GeneralName] = [x509.DNSName(d) for d in dns]
    alt += [x509.RFC822Name(e) for e in emails]
    alt += [x509.UniformResourceIdentifier(u) for u in uris]
    alt += [x509.IPAddress(ipaddress.ip_address(i)) for i in ips]
    if alt:
        builder = builder.add_extension(x509.SubjectAlternativeName(alt), critical=False)
    return Cert(builder.sign(ca.key, hashes.SHA256()), key)


# -- the real nats-server ----------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def nats_server(conf: str, directory: Path) -> Iterator[int]:
    """Run the real nats-server with `conf` (plus a free port) and yield the port."""
    port = free_port()
    path = directory / f"real-{port}.conf"
    path.write_text(f"{conf}\nport: {port}\nhost: 127.0.0.1\n")
    proc = subprocess.Popen(
        [str(NATS_SERVER), "-c", str(path)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 10
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    err = proc.stderr.read().decode() if proc.stderr else ""
                    raise RuntimeError(f"nats-server did not start: {err}") from None
                time.sleep(0.02)
        yield port
    finally:
        proc.terminate()
        proc.wait(timeout=10)


class RawConn:
    """A line-level client for the real server: send protocol lines, read what comes back."""

    def __init__(self, port: int) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=5)
        self.buf = b""
        info = self.read_line()
        assert info.startswith("INFO "), info
        self.info: dict[str, Any] = json.loads(info[5:])

    def read_line(self, timeout: float = 5.0) -> str:
        self.sock.settimeout(timeout)
        while b"\r\n" not in self.buf:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise ConnectionError("closed")
            self.buf += chunk
        line, self.buf = self.buf.split(b"\r\n", 1)
        return line.decode()

    def send(self, data: str) -> None:
        self.sock.sendall(data.encode())

    def connect(self, **fields: Any) -> str:
        """CONNECT (verbose off) and PING; the answer: "PONG" or the -ERR line."""
        opts = {"verbose": False, "pedantic": False, "protocol": 1, "headers": True, **fields}
        self.send(f"CONNECT {json.dumps(opts)}\r\nPING\r\n")
        return self.read_until_pong()

    def read_until_pong(self) -> str:
        """Lines up to PONG: the first -ERR if one came, else "PONG"; MSG lines are kept."""
        err = ""
        self.msgs: list[str] = []
        while True:
            try:
                line = self.read_line()
            except (ConnectionError, OSError):
                return err or "CLOSED"
            if line == "PONG":
                return err or "PONG"
            if line.startswith("-ERR") and not err:
                err = line
            elif line.startswith("MSG "):
                self.msgs.append(line.split()[1])
                self.read_line()  # payload

    def exchange(self, lines: str) -> str:
        self.send(lines + "PING\r\n")
        return self.read_until_pong()

    def close(self) -> None:
        self.sock.close()
