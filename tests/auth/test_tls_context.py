"""pynatsd.tls.server_context: contexts from options, real handshakes, nats-server's errors."""

from __future__ import annotations

import asyncio
import ssl
from pathlib import Path

import pytest
from cryptography.x509.oid import NameOID

from pynatsd.config import ConfigError
from pynatsd.config.loader import apply_tls_flags
from pynatsd.options import Options
from pynatsd.tls import TLSConfigError, cipher_names, pinned_cert_ok, server_context
from support.certs import Cert, make_ca, make_cert

CN = NameOID.COMMON_NAME


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> dict[str, object]:
    directory = tmp_path_factory.mktemp("pki")
    ca = make_ca()
    server = make_cert(ca, [(CN, "localhost")], dns=("localhost",), ips=("127.0.0.1",))
    client = make_cert(ca, [(CN, "client")], emails=("c@example.com",))
    stranger = make_cert(make_ca("other CA"), [(CN, "stranger")])
    return {
        "dir": directory,
        "ca": ca.write(directory, "ca")[0],
        "server": server.write(directory, "server"),
        "client": client.write(directory, "client"),
        "client_cert": client,
        "stranger": stranger.write(directory, "stranger"),
    }


def _options(pki: dict[str, object], **kw: object) -> Options:
    cert, key = pki["server"]  # type: ignore[misc]
    return Options(tls=True, tls_cert=cert, tls_key=key, **kw)  # type: ignore[arg-type]


async def _handshake(
    server_ctx: ssl.SSLContext, ca: str, client: tuple[str, str] | None
) -> tuple[bool, bytes | None]:
    """TLS handshake over loopback: (client side succeeded, peer cert the server saw)."""
    seen: list[bytes | None] = []

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        ssl_object = writer.get_extra_info("ssl_object")
        seen.append(ssl_object.getpeercert(binary_form=True) if ssl_object else None)
        writer.write(b"ok\n")
        await writer.drain()
        writer.close()

    srv = await asyncio.start_server(handle, "127.0.0.1", 0, ssl=server_ctx)
    port = srv.sockets[0].getsockname()[1]
    ctx = ssl.create_default_context(cafile=ca)
    if client:
        ctx.load_cert_chain(*client)
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", port, ssl=ctx)
        line = await asyncio.wait_for(reader.readline(), 5)
        writer.close()
        ok = line == b"ok\n"
    except (ssl.SSLError, ConnectionError, asyncio.IncompleteReadError):
        ok = False
    finally:
        srv.close()
        await srv.wait_closed()
    return ok, (seen[0] if seen else None)


def test_no_tls_no_context() -> None:
    assert server_context(Options()) is None


async def test_tls_without_client_certificates(pki: dict[str, object]) -> None:
    ctx = server_context(_options(pki))
    assert ctx is not None and ctx.verify_mode == ssl.CERT_NONE
    assert ctx.minimum_version == ssl.TLSVersion.TLSv1_2
    ok, peer = await _handshake(ctx, str(pki["ca"]), None)
    assert ok and peer is None


async def test_verify_requires_a_trusted_client_certificate(pki: dict[str, object]) -> None:
    ctx = server_context(_options(pki, tls_verify=True, tls_ca_cert=pki["ca"]))
    assert ctx is not None and ctx.verify_mode == ssl.CERT_REQUIRED
    ok, peer = await _handshake(ctx, str(pki["ca"]), pki["client"])  # type: ignore[arg-type]
    assert ok and peer == pki["client_cert"].der  # type: ignore[attr-defined]
    assert not (await _handshake(ctx, str(pki["ca"]), None))[0]
    assert not (await _handshake(ctx, str(pki["ca"]), pki["stranger"]))[0]  # type: ignore[arg-type]


def test_ca_file_alone_does_not_ask_for_certificates(pki: dict[str, object]) -> None:
    ctx = server_context(_options(pki, tls_ca_cert=pki["ca"]))
    assert ctx is not None and ctx.verify_mode == ssl.CERT_NONE


def test_verify_and_map_verifies(pki: dict[str, object]) -> None:
    ctx = server_context(_options(pki, tls_map=True, tls_ca_cert=pki["ca"]))
    assert ctx is not None and ctx.verify_mode == ssl.CERT_REQUIRED


def test_min_version_and_ciphers(pki: dict[str, object]) -> None:
    ctx = server_context(_options(pki, tls_min_version="1.3"))
    assert ctx is not None and ctx.minimum_version == ssl.TLSVersion.TLSv1_3
    names = ["TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256", "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384"]
    assert server_context(_options(pki, tls_ciphers=names)) is not None
    assert cipher_names(names) == "ECDHE-RSA-AES128-GCM-SHA256:ECDHE-ECDSA-AES256-GCM-SHA384"
    with pytest.raises(TLSConfigError, match="unrecognized cipher nope"):
        cipher_names(["nope"])


@pytest.mark.parametrize(
    ("kw", "message"),
    [
        ({"tls_cert": "x.pem", "tls_key": ""}, "missing 'key_file' in TLS configuration"),
        ({"tls_cert": "", "tls_key": "x.pem"}, "missing 'cert_file' in TLS configuration"),
        (
            {"tls_cert": "/nonexistent.pem", "tls_key": "/nonexistent-key.pem"},
            "error parsing X509 certificate/key pair: open /nonexistent.pem: no such file",
        ),
    ],
)
def test_errors(kw: dict[str, str], message: str) -> None:
    with pytest.raises(TLSConfigError, match=message):
        server_context(Options(tls=True, **kw))  # type: ignore[arg-type]


def test_bad_ca_file(pki: dict[str, object], tmp_path: Path) -> None:
    bad = tmp_path / "bad.pem"
    bad.write_text("not a certificate")
    with pytest.raises(TLSConfigError, match="failed to parse root ca certificate"):
        server_context(_options(pki, tls_ca_cert=str(bad)))
    with pytest.raises(TLSConfigError, match="no such file"):
        server_context(_options(pki, tls_ca_cert=str(tmp_path / "none.pem")))


def test_pinned_certs(pki: dict[str, object]) -> None:
    import hashlib

    from cryptography.hazmat.primitives import serialization

    client: Cert = pki["client_cert"]  # type: ignore[assignment]
    spki = client.cert.public_key().public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    pin = hashlib.sha256(spki).hexdigest()
    assert pinned_cert_ok(Options(), None)
    assert pinned_cert_ok(Options(tls_pinned_certs=[pin.upper()]), client.der)
    assert not pinned_cert_ok(Options(tls_pinned_certs=["0" * 64]), client.der)
    assert not pinned_cert_ok(Options(tls_pinned_certs=[pin]), None)


FLAGS = [
    # (flags, error, tls on)
    ({"tls": True}, "TLS Server certificate must be present and valid", None),
    (
        {"tls_verify": True, "tls_cert": "c"},
        "TLS Server private key must be present and valid",
        None,
    ),
    ({"tls": False, "tls_cert": "c"}, "", False),
    ({}, "", None),
]


@pytest.mark.parametrize(("flags", "error", "tls"), FLAGS)
def test_tls_flags(flags: dict[str, object], error: str, tls: bool | None) -> None:
    opts = Options(tls=True)
    if error:
        with pytest.raises(ConfigError, match=error):
            apply_tls_flags(opts, flags)
        return
    apply_tls_flags(opts, flags)
    assert opts.tls is (True if tls is None else tls)


def test_tls_flags_build_the_context(pki: dict[str, object]) -> None:
    cert, key = pki["server"]  # type: ignore[misc]
    opts = Options()
    apply_tls_flags(
        opts, {"tls_cert": cert, "tls_key": key, "tls_verify": True, "tls_ca_cert": pki["ca"]}
    )
    assert opts.tls and opts.tls_verify and opts.tls_ca_cert == pki["ca"]
    assert opts.auth_timeout == opts.tls_timeout + 1  # 3 s, as nats-server
    ctx = server_context(opts)
    assert ctx is not None and ctx.verify_mode == ssl.CERT_REQUIRED
    with pytest.raises(ConfigError, match="no such file"):
        apply_tls_flags(Options(), {"tls_cert": "/none.pem", "tls_key": "/none-key.pem"})
