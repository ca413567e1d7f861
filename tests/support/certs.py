"""X.509 certificates for TLS tests: a CA and the certificates it signs, made per test run."""

from __future__ import annotations

import datetime
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID


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


def _valid_for_a_day(
    subject: x509.Name, issuer: x509.Name, key: ec.EllipticCurvePrivateKey
) -> x509.CertificateBuilder:
    """The fields every test certificate shares: valid from five minutes ago for a day (a
    little slack for clock skew between the test and the servers)."""
    now = datetime.datetime.now(datetime.UTC)
    return (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
    )


def make_ca(common_name: str = "pynatsd test CA") -> Cert:
    key = ec.generate_private_key(ec.SECP256R1())
    name = _name([(NameOID.COMMON_NAME, common_name)])
    cert = (
        _valid_for_a_day(name, name, key)
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
    key = ec.generate_private_key(ec.SECP256R1())
    name = subject if isinstance(subject, x509.Name) else _name(subject)
    builder = (
        _valid_for_a_day(name, ca.cert.subject, key)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(
            x509.ExtendedKeyUsage(
                [ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]
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


def loopback_server_files(directory: Path) -> tuple[str, str, str]:
    """(certificate, key, CA) files for a server on 127.0.0.1 and localhost, signed by a new
    CA."""
    ca = make_ca()
    ca_file, _ = ca.write(directory, "ca")
    server = make_cert(
        ca, [(NameOID.COMMON_NAME, "localhost")], ips=("127.0.0.1",), dns=("localhost",)
    )
    cert, key = server.write(directory, "server")
    return cert, key, ca_file


def server_tls_block(directory: Path, name: str = "server", ca_name: str = "ca") -> str:
    """A `tls {}` block for a cluster or gateway block: a fresh CA (`ca_name`) and a
    certificate it signs for 127.0.0.1 and localhost, their files in `directory`."""
    ca = make_ca(f"{ca_name} CA")
    ca_path, _ = ca.write(directory, ca_name)
    cert = make_cert(ca, [(NameOID.COMMON_NAME, name)], ips=("127.0.0.1",), dns=("localhost",))
    cert_path, key_path = cert.write(directory, f"{name}-{ca_name}")
    return (
        "  tls {\n"
        f'    cert_file: "{cert_path}"\n    key_file: "{key_path}"\n    ca_file: "{ca_path}"\n'
        "    timeout: 3\n  }\n"
    )
