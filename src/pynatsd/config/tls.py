"""The `tls` block of the client listener and `allow_non_tls`, as nats-server's `parseTLS` and
`GenTLSConfig` (server/opts.go) read them, and the `--tls*` command line flags on top of a file
(`overrideTLS`). The TLS context itself is built by `pynatsd.tls`.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from pynatsd.config.parser import ConfigError, Node
from pynatsd.config.registry import (
    Loader,
    config_key,
    unsupported,
    want_bool,
    want_list,
    want_map,
    want_str,
)
from pynatsd.config.values import NANOS, go_type
from pynatsd.gofmt import parse_go_duration
from pynatsd.options import TLS_HANDSHAKE_FIRST_FALLBACK_DELAY, TLS_TIMEOUT, Options
from pynatsd.tls import CIPHER_SUITES, INSECURE_CIPHER_SUITES, TLSConfigError, server_context

_GO_CURVES = frozenset(
    {
        "CurveP256",
        "CurveP384",
        "CurveP521",
        "X25519",
        "X25519MLKEM768",
        "SecP256r1MLKEM768",
        "SecP384r1MLKEM1024",
    }
)
_PINNED_CERT = re.compile(r"^[A-Fa-f0-9]{64}$")

unsupported("TLS", "ocsp", "ocsp_cache")


@config_key("allow_non_tls")
def _apply_allow_non_tls(loader: Loader, name: str, node: Node) -> None:
    loader.opts.allow_non_tls = want_bool(loader, node)


@dataclass(slots=True)
class TlsDraft:
    """A `tls` block while its fields are read; it reaches `Options` only when all are valid."""

    cert: str = ""
    key: str = ""
    ca: str = ""
    verify: bool = False
    tls_map: bool = False  # verify_and_map: the certificate names the user
    timeout: float = 0.0  # seconds; 0 is the default
    min_version: str = ""
    ciphers: list[str] = field(default_factory=list)
    insecure_ciphers: list[str] = field(default_factory=list)
    allow_insecure: bool = False
    insecure: bool = False  # do not verify the servers this one dials
    pinned: list[str] = field(default_factory=list)
    rate_limit: int = 0
    first: bool = False  # handshake_first
    fallback: float = 0.0  # seconds handshake_first waits for a client that speaks first


def read_tls_block(loader: Loader, node: Node) -> TlsDraft:
    """Every field of a `tls` block (nats-server's parseTLS), checked; the caller builds its
    context from the draft."""
    draft = TlsDraft()
    for field_name, entry in want_map(loader, node).items():
        read = _TLS_FIELDS.get(field_name.lower())
        if read is None:
            raise loader.abort(entry, f'error parsing tls config, unknown field "{field_name}"')
        read(loader, draft, field_name, entry)
    if draft.insecure_ciphers and not draft.allow_insecure:
        raise loader.abort(
            node,
            "insecure cipher suites configured without 'allow_insecure_cipher_suites' option "
            "set: " + ", ".join(draft.insecure_ciphers),
        )
    return draft


@config_key("tls")
def _apply_tls(loader: Loader, name: str, node: Node) -> None:
    draft = read_tls_block(loader, node)
    if draft.insecure:
        loader.ignore("tls.insecure", node, "insecure TLS for outgoing connections")
    opts = loader.opts
    opts.tls = True
    opts.tls_cert, opts.tls_key, opts.tls_ca_cert = draft.cert, draft.key, draft.ca
    opts.tls_verify, opts.tls_map = draft.verify, draft.tls_map
    opts.tls_timeout = draft.timeout or TLS_TIMEOUT
    opts.tls_min_version = draft.min_version
    opts.tls_ciphers = draft.ciphers
    opts.tls_pinned_certs = draft.pinned
    opts.tls_rate_limit = draft.rate_limit
    opts.tls_handshake_first = draft.first
    opts.tls_handshake_first_fallback = draft.fallback
    # nats-server builds the TLS configuration (and reads the files) while loading.
    try:
        server_context(opts)
    except TLSConfigError as e:
        raise loader.abort(node, str(e)) from None


def _tls_file(loader: Loader, draft: TlsDraft, name: str, entry: Node) -> None:
    lowered = name.lower()
    if not isinstance(entry.value, str):
        raise loader.abort(entry, f"error parsing tls config, expected '{lowered}' to be filename")
    if lowered == "cert_file":
        draft.cert = entry.value
    elif lowered == "key_file":
        draft.key = entry.value
    else:
        draft.ca = entry.value


def _tls_flag(loader: Loader, draft: TlsDraft, name: str, entry: Node) -> None:
    lowered, value = name.lower(), entry.value
    if not isinstance(value, bool):
        raise loader.abort(entry, f"error parsing tls config, expected '{lowered}' to be a boolean")
    if lowered == "verify":
        draft.verify = value
    elif lowered == "verify_and_map":
        draft.verify = draft.verify or value
        draft.tls_map = value
    elif lowered == "verify_cert_and_check_known_urls" and value:
        raise loader.abort(entry, "verify_cert_and_check_known_urls not supported in this context")
    elif lowered == "allow_insecure_cipher_suites":
        draft.allow_insecure = value
    elif lowered == "insecure":
        draft.insecure = value


def _tls_cipher_suites(loader: Loader, draft: TlsDraft, name: str, entry: Node) -> None:
    entries = want_list(loader, entry)
    if not entries:
        raise loader.abort(entry, "error parsing tls config, 'cipher_suites' cannot be empty")
    for element in entries:
        suite = want_str(loader, element)
        if suite not in CIPHER_SUITES:
            raise loader.abort(element, f"unrecognized cipher {suite}")
        draft.ciphers.append(suite)
        if suite in INSECURE_CIPHER_SUITES:
            draft.insecure_ciphers.append(suite)


def _tls_curve_preferences(loader: Loader, draft: TlsDraft, name: str, entry: Node) -> None:
    entries = want_list(loader, entry)
    if not entries:
        raise loader.abort(entry, "error parsing tls config, 'curve_preferences' cannot be empty")
    for element in entries:
        curve = want_str(loader, element)
        if curve not in _GO_CURVES:
            raise loader.abort(element, f"unrecognized curve preference {curve}")
    loader.ignore("tls.curve_preferences", entry, "TLS curve preferences")


def _tls_timeout(loader: Loader, draft: TlsDraft, name: str, entry: Node) -> None:
    value = entry.value
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise loader.abort(entry, "error parsing tls config, 'timeout' wrong type")
    if isinstance(value, str):
        try:
            draft.timeout = parse_go_duration(value) / NANOS
        except ValueError as e:
            raise loader.abort(entry, f"error parsing tls config, 'timeout' {e}") from None
    else:
        draft.timeout = float(value)


def _tls_rate_limit(loader: Loader, draft: TlsDraft, name: str, entry: Node) -> None:
    value = entry.value
    if isinstance(value, bool) or not isinstance(value, int):
        raise loader.abort(entry, "error parsing tls config, 'connection_rate_limit' wrong type")
    draft.rate_limit = value


def _tls_pinned_certs(loader: Loader, draft: TlsDraft, name: str, entry: Node) -> None:
    if not isinstance(entry.value, list):
        raise loader.abort(
            entry,
            "error parsing tls config, expected 'pinned_certs' to be a list of "
            "hex-encoded sha256 of DER encoded SubjectPublicKeyInfo",
        )
    for element in entry.value:
        pin = want_str(loader, element).lower()
        if not _PINNED_CERT.match(pin):
            raise loader.abort(
                element,
                f"error parsing tls config, 'pinned_certs' key {pin} does not look "
                "like hex-encoded sha256 of DER encoded SubjectPublicKeyInfo",
            )
        draft.pinned.append(pin)


def _tls_handshake_first(loader: Loader, draft: TlsDraft, name: str, entry: Node) -> None:
    """true/on, false/off, auto (the default fallback delay) or a fallback duration."""
    value = entry.value
    if isinstance(value, bool):
        draft.first, draft.fallback = value, 0.0
        return
    if not isinstance(value, str):
        raise loader.abort(
            entry, f'field "{name}" should be a boolean or a string, got {go_type(value)}'
        )
    lowered = value.lower()
    if lowered in ("true", "on"):
        draft.first, draft.fallback = True, 0.0
    elif lowered in ("false", "off"):
        draft.first, draft.fallback = False, 0.0
    elif lowered in ("auto", "auto_fallback"):
        draft.first, draft.fallback = True, TLS_HANDSHAKE_FIRST_FALLBACK_DELAY
    else:
        try:
            draft.first, draft.fallback = True, parse_go_duration(value) / NANOS
        except ValueError:
            raise loader.abort(entry, f'field "{name}"\'s value "{value}" is invalid') from None


def _tls_min_version(loader: Loader, draft: TlsDraft, name: str, entry: Node) -> None:
    value = entry.value
    if not isinstance(value, str):
        raise loader.abort(entry, f"error parsing tls config: 'min_version' wrong type: {value}")
    if value not in ("1.0", "1.1", "1.2", "1.3"):
        raise loader.abort(entry, f"error parsing tls config: unknown version: {value}")
    if value in ("1.0", "1.1"):
        raise loader.abort(entry, f"error parsing tls config: unsupported TLS version: TLS {value}")
    draft.min_version = value


def _tls_certificate_store(loader: Loader, draft: TlsDraft, name: str, entry: Node) -> None:
    loader.ignore(f"tls.{name}", entry, "Windows certificate store and OCSP")


def _tls_certificates(loader: Loader, draft: TlsDraft, name: str, entry: Node) -> None:
    loader.ignore(f"tls.{name}", entry, "several certificates")


_TlsField = Callable[[Loader, TlsDraft, str, Node], None]

# Lower-cased field of a `tls` block -> how it is read; any other field is an error.
_TLS_FIELDS: dict[str, _TlsField] = {
    "cert_file": _tls_file,
    "key_file": _tls_file,
    "ca_file": _tls_file,
    "insecure": _tls_flag,
    "verify": _tls_flag,
    "verify_and_map": _tls_flag,
    "verify_cert_and_check_known_urls": _tls_flag,
    "allow_insecure_cipher_suites": _tls_flag,
    "cipher_suites": _tls_cipher_suites,
    "curve_preferences": _tls_curve_preferences,
    "timeout": _tls_timeout,
    "connection_rate_limit": _tls_rate_limit,
    "pinned_certs": _tls_pinned_certs,
    "handshake_first": _tls_handshake_first,
    "first": _tls_handshake_first,
    "immediate": _tls_handshake_first,
    "min_version": _tls_min_version,
    "cert_store": _tls_certificate_store,
    "cert_match_by": _tls_certificate_store,
    "cert_match": _tls_certificate_store,
    "ca_certs_match": _tls_certificate_store,
    "cert_match_skip_invalid": _tls_certificate_store,
    "ocsp_peer": _tls_certificate_store,
    "certs": _tls_certificates,
    "certificates": _tls_certificates,
}


def apply_tls_flags(opts: Options, flags: Mapping[str, Any]) -> None:
    """The `--tls`, `--tlscert`, `--tlskey`, `--tlscacert` and `--tlsverify` flags (as parsed by
    `pynatsd.cli.parse_flags`: `tls`, `tls_cert`, `tls_key`, `tls_ca_cert`, `tls_verify`) on
    top of the file's options, as nats-server's ConfigureOptions/overrideTLS do: any TLS flag
    replaces the file's certificate settings and then needs both a certificate and a key;
    `--tls=false` turns TLS off. Raises ConfigError with nats-server's message."""
    names = ("tls", "tls_ca_cert", "tls_cert", "tls_key", "tls_verify")  # Go visits A-Z
    override = disabled = False
    for dest in names:
        if dest not in flags:
            continue
        if dest == "tls" and not flags["tls"]:
            disabled, override = True, False
            opts.tls = False
            continue
        if not disabled:
            override = True
    if not override:
        return
    cert, key = str(flags.get("tls_cert") or ""), str(flags.get("tls_key") or "")
    if not cert:
        raise ConfigError("TLS Server certificate must be present and valid")
    if not key:
        raise ConfigError("TLS Server private key must be present and valid")
    opts.tls = True
    opts.tls_cert, opts.tls_key = cert, key
    opts.tls_ca_cert = str(flags.get("tls_ca_cert") or "")
    opts.tls_verify = bool(flags.get("tls_verify"))
    opts.tls_ciphers = []
    opts.tls_min_version = ""
    try:
        server_context(opts)
    except TLSConfigError as e:
        raise ConfigError(str(e)) from None
    if not opts.auth_timeout_set:
        opts.auth_timeout = (opts.tls_timeout or TLS_TIMEOUT) + 1.0
