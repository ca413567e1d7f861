"""TLS for client connections: an `ssl.SSLContext` from the options, as nats-server's GenTLSConfig.

Options come from `--tls`, `--tlscert`, `--tlskey`, `--tlscacert`, `--tlsverify` or the `tls {}`
block (`cert_file`, `key_file`, `ca_file`, `verify`, `verify_and_map`, `timeout`,
`handshake_first`, `min_version`, `cipher_suites`, `pinned_certs`). The handshake itself, its
timeout and `handshake_first` belong to each connection (`server/tls_client.py`); this module
only builds the context and checks pinned certificates.
"""

from __future__ import annotations

import hashlib
import logging
import ssl
from dataclasses import dataclass

from pynatsd.options import Options, TLSBlock

log = logging.getLogger("pynatsd.tls")

__all__ = [
    "CIPHER_SUITES",
    "PeerTLS",
    "TLSConfigError",
    "cipher_names",
    "go_handshake_error",
    "go_tls_names",
    "peer_contexts",
    "pin_matches",
    "pinned_cert_ok",
    "server_context",
]


class TLSConfigError(ValueError):
    """The TLS options cannot make a context; the message is nats-server's."""


# Go cipher suite names (nats-server cipherMap) -> OpenSSL names. TLS 1.3 suites are not
# configurable in Go either.
CIPHER_SUITES: dict[str, str] = {
    "TLS_RSA_WITH_RC4_128_SHA": "RC4-SHA",
    "TLS_RSA_WITH_3DES_EDE_CBC_SHA": "DES-CBC3-SHA",
    "TLS_RSA_WITH_AES_128_CBC_SHA": "AES128-SHA",
    "TLS_RSA_WITH_AES_256_CBC_SHA": "AES256-SHA",
    "TLS_RSA_WITH_AES_128_CBC_SHA256": "AES128-SHA256",
    "TLS_RSA_WITH_AES_128_GCM_SHA256": "AES128-GCM-SHA256",
    "TLS_RSA_WITH_AES_256_GCM_SHA384": "AES256-GCM-SHA384",
    "TLS_ECDHE_ECDSA_WITH_RC4_128_SHA": "ECDHE-ECDSA-RC4-SHA",
    "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA": "ECDHE-ECDSA-AES128-SHA",
    "TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA": "ECDHE-ECDSA-AES256-SHA",
    "TLS_ECDHE_RSA_WITH_RC4_128_SHA": "ECDHE-RSA-RC4-SHA",
    "TLS_ECDHE_RSA_WITH_3DES_EDE_CBC_SHA": "ECDHE-RSA-DES-CBC3-SHA",
    "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA": "ECDHE-RSA-AES128-SHA",
    "TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA": "ECDHE-RSA-AES256-SHA",
    "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA256": "ECDHE-ECDSA-AES128-SHA256",
    "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA256": "ECDHE-RSA-AES128-SHA256",
    "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256": "ECDHE-RSA-AES128-GCM-SHA256",
    "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256": "ECDHE-ECDSA-AES128-GCM-SHA256",
    "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384": "ECDHE-RSA-AES256-GCM-SHA384",
    "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384": "ECDHE-ECDSA-AES256-GCM-SHA384",
    "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256": "ECDHE-RSA-CHACHA20-POLY1305",
    "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256": "ECDHE-ECDSA-CHACHA20-POLY1305",
    "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305": "ECDHE-RSA-CHACHA20-POLY1305",
    "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305": "ECDHE-ECDSA-CHACHA20-POLY1305",
}
# Suites Go marks insecure: configuring them needs allow_insecure_cipher_suites.
INSECURE_CIPHER_SUITES = frozenset(
    {
        "TLS_RSA_WITH_RC4_128_SHA",
        "TLS_RSA_WITH_3DES_EDE_CBC_SHA",
        "TLS_RSA_WITH_AES_128_CBC_SHA256",
        "TLS_ECDHE_ECDSA_WITH_RC4_128_SHA",
        "TLS_ECDHE_RSA_WITH_RC4_128_SHA",
        "TLS_ECDHE_RSA_WITH_3DES_EDE_CBC_SHA",
        "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA256",
        "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA256",
    }
)
# nats-server's defaultCipherSuites for TLS 1.2: forward secret AEAD suites only.
_DEFAULT_CIPHERS = (
    "ECDHE-ECDSA-AES256-GCM-SHA384:ECDHE-RSA-AES256-GCM-SHA384:"
    "ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-RSA-AES128-GCM-SHA256:"
    "ECDHE-ECDSA-CHACHA20-POLY1305:ECDHE-RSA-CHACHA20-POLY1305"
)
# OpenSSL's TLS 1.2 suite names -> Go's, for the debug line after a handshake (TLS 1.3 suites
# have the same name in both).
_GO_CIPHER_NAMES = {openssl: go for go, openssl in CIPHER_SUITES.items()}
_GO_TLS_VERSIONS = {"TLSv1.2": "1.2", "TLSv1.3": "1.3"}
_MIN_VERSIONS = {"1.2": ssl.TLSVersion.TLSv1_2, "1.3": ssl.TLSVersion.TLSv1_3}


def cipher_names(names: list[str]) -> str:
    """The OpenSSL cipher string for Go cipher suite names; TLSConfigError for an unknown one."""
    out = []
    for name in names:
        openssl = CIPHER_SUITES.get(name)
        if openssl is None:
            raise TLSConfigError(f"unrecognized cipher {name}")
        out.append(openssl)
    return ":".join(out)


def server_context(options: Options) -> ssl.SSLContext | None:
    """The server-side TLS context for client connections, or None when TLS is off.

    Raises TLSConfigError with nats-server's message when the files cannot be used."""
    if not options.tls:
        return None
    context = _context(
        ssl.PROTOCOL_TLS_SERVER,
        options.tls_cert,
        options.tls_key,
        options.tls_ca_cert,
        options.tls_min_version,
        options.tls_ciphers,
    )
    if options.tls_verify or options.tls_map:
        # Go's RequireAndVerifyClientCert; without a CA file, the system roots verify.
        context.verify_mode = ssl.CERT_REQUIRED
        if not options.tls_ca_cert:
            context.load_default_certs(ssl.Purpose.CLIENT_AUTH)
    else:
        # A CA file alone does not make the server ask for client certificates (as in Go).
        context.verify_mode = ssl.CERT_NONE
    return context


@dataclass(frozen=True, slots=True)
class PeerTLS:
    """The two contexts of TLS between servers (nats-server's getTLSConfig for routes): a
    connection we accept asks for and verifies the peer's certificate whatever `verify` says,
    and the CA file verifies the servers we dial too (RootCAs = ClientCAs)."""

    accept: ssl.SSLContext
    dial: ssl.SSLContext
    block: TLSBlock


def peer_contexts(block: TLSBlock) -> PeerTLS:
    """Both contexts for a `tls {}` block between servers; TLSConfigError as server_context."""
    contexts = []
    for protocol in (ssl.PROTOCOL_TLS_SERVER, ssl.PROTOCOL_TLS_CLIENT):
        context = _context(
            protocol,
            block.cert_file,
            block.key_file,
            block.ca_file,
            block.min_version,
            block.ciphers,
        )
        if not block.ca_file:
            purpose = (
                ssl.Purpose.CLIENT_AUTH
                if protocol == ssl.PROTOCOL_TLS_SERVER
                else ssl.Purpose.SERVER_AUTH
            )
            context.load_default_certs(purpose)
        context.verify_mode = ssl.CERT_REQUIRED
        contexts.append(context)
    accept, dial = contexts
    if block.insecure:
        dial.check_hostname = False
        dial.verify_mode = ssl.CERT_NONE
    return PeerTLS(accept, dial, block)


def _context(
    protocol: ssl._SSLMethod,
    cert: str,
    key: str,
    ca: str,
    min_version: str,
    ciphers: list[str],
) -> ssl.SSLContext:
    """A context with nats-server's GenTLSConfig settings: the key pair, the CA file, the
    minimum version and the cipher suites."""
    if cert and not key:
        raise TLSConfigError("missing 'key_file' in TLS configuration")
    if key and not cert:
        raise TLSConfigError("missing 'cert_file' in TLS configuration")
    context = ssl.SSLContext(protocol)
    version = min_version or "1.2"
    if version not in _MIN_VERSIONS:
        raise TLSConfigError(f"unsupported minimum TLS version: TLS {version}")
    context.minimum_version = _MIN_VERSIONS[version]
    # Compression and renegotiation are off in Go's crypto/tls; keep OpenSSL in line.
    context.options |= ssl.OP_NO_COMPRESSION | ssl.OP_NO_RENEGOTIATION
    _set_ciphers(context, ciphers)
    if cert:
        try:
            context.load_cert_chain(cert, key)
        except FileNotFoundError as e:
            missing = e.filename or cert
            raise TLSConfigError(
                "error parsing X509 certificate/key pair: "
                f"open {missing}: no such file or directory"
            ) from None
        except (OSError, ssl.SSLError) as e:
            raise TLSConfigError(f"error parsing X509 certificate/key pair: {e}") from None
    if ca:
        try:
            context.load_verify_locations(cafile=ca)
        except FileNotFoundError:
            raise TLSConfigError(f"open {ca}: no such file or directory") from None
        except (OSError, ssl.SSLError):
            raise TLSConfigError("failed to parse root ca certificate") from None
    return context


def client_context(
    ca_file: str = "", cert: str = "", key: str = "", insecure: bool = False
) -> ssl.SSLContext:
    """The context this server dials another with (a leaf node remote): the server verified
    against `ca_file` (else the system roots) unless `insecure`, our certificate if given.

    Raises TLSConfigError when the files cannot be used."""
    try:
        context = ssl.create_default_context(cafile=ca_file or None)
        if cert:
            context.load_cert_chain(cert, key or None)
    except (OSError, ssl.SSLError) as e:
        raise TLSConfigError(f"error loading TLS configuration: {e}") from None
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    if insecure:
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    return context


def listener_context(cert: str, key: str, ca_cert: str = "") -> ssl.SSLContext:
    """A plain server-side context from certificate files: the WebSocket and MQTT listeners'
    `tls {}` blocks (cert_file, key_file, ca_file)."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    if ca_cert:
        context.load_verify_locations(ca_cert)
    return context


def _set_ciphers(context: ssl.SSLContext, names: list[str]) -> None:
    if not names:
        context.set_ciphers(_DEFAULT_CIPHERS)
        return
    # Go knows suites this OpenSSL may have dropped (RC4, 3DES): keep the ones it has, and if
    # none is left use the secure defaults rather than refuse to start.
    usable = []
    for suite in cipher_names(names).split(":"):
        try:
            context.set_ciphers(suite)
        except ssl.SSLError:
            log.warning("TLS cipher suite %s is not available in this OpenSSL", suite)
            continue
        usable.append(suite)
    context.set_ciphers(":".join(usable) if usable else _DEFAULT_CIPHERS)


def pinned_cert_ok(options: Options, peer_cert_der: bytes | None) -> bool:
    """`tls { pinned_certs }`: the client certificate's SubjectPublicKeyInfo, hashed with
    SHA-256, must be listed. True when no pins are configured."""
    return pin_matches(options.tls_pinned_certs, peer_cert_der)


def pin_matches(pins: list[str], peer_cert_der: bytes | None) -> bool:
    """The peer certificate's SubjectPublicKeyInfo, hashed with SHA-256, is one of `pins`
    (nats-server's matchesPinnedCert); True when there are none."""
    if not pins:
        return True
    if not peer_cert_der:
        return False
    from cryptography import x509
    from cryptography.hazmat.primitives import serialization

    cert = x509.load_der_x509_certificate(peer_cert_der)
    spki = cert.public_key().public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    digest = hashlib.sha256(spki).hexdigest()
    return digest in {p.lower() for p in pins}


# OpenSSL's reason for a failed handshake -> the error crypto/tls reports for it.
_GO_HANDSHAKE_ERRORS = {
    "PEER_DID_NOT_RETURN_A_CERTIFICATE": "tls: client didn't provide a certificate",
    "TLSV13_ALERT_CERTIFICATE_REQUIRED": "remote error: tls: certificate required",
    "TLSV1_ALERT_UNKNOWN_CA": "remote error: tls: unknown certificate authority",
    "SSLV3_ALERT_BAD_CERTIFICATE": "remote error: tls: bad certificate",
    "SSLV3_ALERT_HANDSHAKE_FAILURE": "remote error: tls: handshake failure",
    "WRONG_VERSION_NUMBER": "tls: first record does not look like a TLS handshake",
}
# X509_V_ERR_* codes -> crypto/x509's words for them.
_GO_VERIFY_ERRORS = {
    2: "x509: certificate signed by unknown authority",  # unable to get issuer certificate
    18: "x509: certificate signed by unknown authority",  # self-signed leaf
    19: "x509: certificate signed by unknown authority",  # self-signed in chain
    20: "x509: certificate signed by unknown authority",  # unable to get local issuer
    10: "x509: certificate has expired or is not yet valid",
    9: "x509: certificate has expired or is not yet valid",
}


def go_handshake_error(error: ssl.SSLError) -> str:
    """A failed handshake in crypto/tls's words, as nats-server logs it."""
    reason = error.reason or ""
    if isinstance(error, ssl.SSLCertVerificationError):
        code = error.verify_code
        text = _GO_VERIFY_ERRORS.get(code)
        if text is None:
            text = f"x509: {error.verify_message}"
        return f"tls: failed to verify certificate: {text}"
    return _GO_HANDSHAKE_ERRORS.get(reason, reason.lower().replace("_", " ") or str(error))


def go_tls_names(ssl_object: ssl.SSLObject) -> tuple[str, str]:
    """The TLS version and cipher suite of an established connection, named as Go names them."""
    cipher = ssl_object.cipher()
    name = cipher[0] if cipher else ""
    version = ssl_object.version() or ""
    return _GO_TLS_VERSIONS.get(version, version), _GO_CIPHER_NAMES.get(name, name)
