"""TLS `verify_and_map`: the names in a client certificate that may name a user.

nats-server (auth.go checkClientTLSCertSubject) tries, in order: the e-mail addresses, DNS names
and URIs of the subjectAltName extension; the certificate subject as a distinguished name
(compared with each user name parsed as a DN, exactly or with the RDNs reordered); the subject as
Go prints it with any domain components (DC) appended; and the subject as Go prints it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

from cryptography import x509
from cryptography.x509.oid import NameOID

__all__ = ["DN", "cert_identities", "load_certificate", "parse_dn"]

# OID -> short name, for the DN comparison (nats-server internal/ldap attributeTypeNames).
_LDAP_NAMES = {
    "2.5.4.3": "CN",
    "2.5.4.5": "SERIALNUMBER",
    "2.5.4.6": "C",
    "2.5.4.7": "L",
    "2.5.4.8": "ST",
    "2.5.4.9": "STREET",
    "2.5.4.10": "O",
    "2.5.4.11": "OU",
    "2.5.4.17": "POSTALCODE",
    "0.9.2342.19200300.100.1.25": "DC",
}
# Go's pkix.Name.ToRDNSequence: the standard attributes, in this order, each a single RDN.
_GO_RDN_ORDER = (
    (NameOID.COUNTRY_NAME, "C"),
    (NameOID.STATE_OR_PROVINCE_NAME, "ST"),
    (NameOID.LOCALITY_NAME, "L"),
    (NameOID.STREET_ADDRESS, "STREET"),
    (NameOID.POSTAL_CODE, "POSTALCODE"),
    (NameOID.ORGANIZATION_NAME, "O"),
    (NameOID.ORGANIZATIONAL_UNIT_NAME, "OU"),
)

# A DN: RDNs, each a tuple of (type, value) pairs.
DN = tuple[tuple[tuple[str, str], ...], ...]


def load_certificate(cert: x509.Certificate | bytes) -> x509.Certificate:
    """A certificate from DER bytes (what `SSLObject.getpeercert(binary_form=True)` gives)."""
    if isinstance(cert, x509.Certificate):
        return cert
    return x509.load_der_x509_certificate(cert)


def _text(value: str | bytes) -> str | None:
    return value if isinstance(value, str) else None


def _escape(value: str) -> str:
    # Go's RDNSequence.String escaping (RFC 2253 subset).
    out = []
    last = len(value) - 1
    for i, c in enumerate(value):
        if c in ',+"\\<>;' or (c == " " and (i == 0 or i == last)) or (c == "#" and i == 0):
            out.append("\\")
        out.append(c)
    return "".join(out)


def go_subject_string(name: x509.Name) -> str:
    """`cert.Subject.ToRDNSequence().String()` as Go prints it: standard attributes only, in
    Go's fixed order, printed last first."""
    rdns: list[list[tuple[str, str]]] = []
    for oid, short in _GO_RDN_ORDER:
        values = [v for a in name.get_attributes_for_oid(oid) if (v := _text(a.value))]
        if values:
            rdns.append([(short, v) for v in values])
    # Go keeps only the last CommonName and SerialNumber, one RDN each.
    for oid, short in ((NameOID.COMMON_NAME, "CN"), (NameOID.SERIAL_NUMBER, "SERIALNUMBER")):
        values = [v for a in name.get_attributes_for_oid(oid) if (v := _text(a.value))]
        if values:
            rdns.append([(short, values[-1])])
    return ",".join("+".join(f"{t}={_escape(v)}" for t, v in rdn) for rdn in reversed(rdns))


def _domain_components(name: x509.Name) -> str:
    return ",".join(
        f"DC={v}"
        for rdn in name.rdns
        for a in rdn
        if a.oid == NameOID.DOMAIN_COMPONENT and (v := _text(a.value)) is not None
    )


def dn_from_name(name: x509.Name) -> DN | None:
    """ldap.FromRawCertSubject: the subject RDNs last first, or None if an attribute is of a
    type it does not know (then the DN comparison is skipped)."""
    rdns = []
    for rdn in reversed(name.rdns):
        attrs = []
        for attr in reversed(list(rdn)):
            short = _LDAP_NAMES.get(attr.oid.dotted_string)
            value = _text(attr.value)
            if short is None or value is None:
                return None
            attrs.append((short, value))
        if attrs:
            rdns.append(tuple(attrs))
    return tuple(rdns)


def parse_dn(text: str) -> DN | None:
    """ldap.ParseDN: an RFC 4514 string ("CN=a,O=b", `+` joining multi-valued RDNs, backslash
    escapes and \\hex pairs), or None if it is not one."""
    rdns: list[tuple[tuple[str, str], ...]] = []
    rdn: list[tuple[str, str]] = []
    buf = bytearray()
    attr_type = ""
    escaping = False
    trailing = 0
    data = text.encode()

    def take() -> str:
        nonlocal trailing
        raw = bytes(buf[: len(buf) - trailing] if trailing else buf)
        buf.clear()
        trailing = 0
        return raw.decode(errors="replace")

    i = 0
    while i < len(data):
        c = data[i]
        ch = chr(c)
        if escaping:
            trailing = 0
            escaping = False
            if ch in ' "#+,;<=>\\':
                buf.append(c)
                i += 1
                continue
            if i + 1 >= len(data):
                return None
            try:
                buf.append(int(data[i : i + 2].decode(), 16))
            except ValueError:
                return None
            i += 2
            continue
        if ch == "\\":
            trailing = 0
            escaping = True
        elif ch == "=":
            attr_type = take()
            if i + 1 < len(data) and data[i + 1] == ord("#"):
                return None
        elif ch in ",+":
            if not attr_type:
                return None
            rdn.append((attr_type, take()))
            attr_type = ""
            if ch == ",":
                rdns.append(tuple(rdn))
                rdn = []
        elif ch == " " and not buf:
            pass
        else:
            trailing = trailing + 1 if ch == " " else 0
            buf.append(c)
        i += 1
    if buf:
        if not attr_type:
            return None
        rdn.append((attr_type, take()))
        rdns.append(tuple(rdn))
    return tuple(rdns)


def _rdn_equal(a: tuple[tuple[str, str], ...], b: tuple[tuple[str, str], ...]) -> bool:
    def has_all(x: tuple[tuple[str, str], ...], y: tuple[tuple[str, str], ...]) -> bool:
        return all(any(t.lower() == u.lower() and v == w for u, w in x) for t, v in y)

    return len(a) == len(b) and has_all(a, b) and has_all(b, a)


def dn_equal(a: DN, b: DN) -> bool:
    return len(a) == len(b) and all(_rdn_equal(x, y) for x, y in zip(a, b, strict=True))


def dn_rdns_match(a: DN, b: DN) -> bool:
    """The same RDNs in any order."""
    if len(a) != len(b):
        return False
    used = [False] * len(b)
    for x in a:
        for j, y in enumerate(b):
            if not used[j] and _rdn_equal(x, y):
                used[j] = True
                break
        else:
            return False
    return True


@dataclass(frozen=True, slots=True)
class CertIdentities:
    emails: tuple[str, ...]
    dns_names: tuple[str, ...]
    uris: tuple[str, ...]
    dn: DN | None
    subject_with_dcs: str  # "" when the subject has no domain components
    subject: str


def cert_identities(cert: x509.Certificate) -> CertIdentities:
    try:
        san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
        emails = tuple(san.get_values_for_type(x509.RFC822Name))
        dns_names = tuple(san.get_values_for_type(x509.DNSName))
        uris = tuple(san.get_values_for_type(x509.UniformResourceIdentifier))
    except (x509.ExtensionNotFound, ValueError):
        emails = dns_names = uris = ()
    subject = go_subject_string(cert.subject)
    dcs = _domain_components(cert.subject)
    return CertIdentities(
        emails=emails,
        dns_names=dns_names,
        uris=uris,
        dn=dn_from_name(cert.subject),
        subject_with_dcs=f"{subject},{dcs}" if dcs else "",
        subject=subject,
    )


def candidate_names(ids: CertIdentities) -> Iterator[str]:
    """The names to look up as user names, in nats-server's order (the DN step aside)."""
    yield from ids.emails
    yield from ids.dns_names
    yield from ids.uris


def map_certificate(
    cert: x509.Certificate, lookup: Callable[[str], bool], dns: list[tuple[str, DN]]
) -> str | None:
    """The user name the certificate maps to: `lookup(name)` says whether a user of that name
    may be used; `dns` lists (user name, parsed DN) for the DN comparison."""
    ids = cert_identities(cert)
    if not (ids.emails or ids.dns_names or ids.uris or cert.subject.rfc4514_string()):
        return None
    for name in candidate_names(ids):
        if lookup(name):
            return name
    if ids.dn is not None:
        for name, dn in dns:
            if dn_equal(dn, ids.dn):
                return name
        for name, dn in dns:
            if dn_rdns_match(dn, ids.dn):
                return name
    if ids.subject_with_dcs and lookup(ids.subject_with_dcs):
        return ids.subject_with_dcs
    if lookup(ids.subject):
        return ids.subject
    return None
