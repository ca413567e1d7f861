"""NATS JWTs (nats-io/jwt v2): decoding, signature and time checks, and the claims the server uses.

A NATS JWT is `header.payload.signature`, each part raw-URL base64. The header names the type `JWT`
and the algorithm `ed25519-nkey` (v2; the signature covers `header.payload`) or `ed25519` (v1; it
covers the payload only). The payload's `iss` is the public nkey that signed it, `sub` the key it
describes, and `nats` holds the claim type (`operator`, `account`, `user`) and its fields.
"""

from __future__ import annotations

import base64
import binascii
import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pynatsd.auth.keys import (
    PREFIX_ACCOUNT,
    PREFIX_OPERATOR,
    PREFIX_USER,
    is_valid_public_key,
    verify_signature,
)
from pynatsd.mappings import MappingError, build_mapping
from pynatsd.options import (
    NO_LIMIT,
    AccountConfig,
    AccountLimits,
    JetStreamAccountLimits,
    MapDest,
    Permissions,
    ResponsePermission,
    ServiceExport,
    ServiceImport,
    StreamExport,
    StreamImport,
    SubjectMapping,
    SubjectPermission,
)
from pynatsd.subjects import is_valid_publish_subject

__all__ = [
    "MAX_TOKEN_SIZE",
    "AccountClaims",
    "Claims",
    "JwtError",
    "OperatorClaims",
    "UserClaims",
    "decode",
    "decode_account",
    "decode_operator",
    "decode_user",
    "parse_decorated_jwt",
    "permissions_from_jwt",
    "read_operator_jwt",
]

MAX_TOKEN_SIZE = 1024 * 1024
_NANOS = 1_000_000_000
_JWT_PREFIX = "eyJ"
_EXPECTED_ISSUERS = {
    "operator": (PREFIX_OPERATOR,),
    "account": (PREFIX_ACCOUNT, PREFIX_OPERATOR),
    "user": (PREFIX_ACCOUNT,),
}


class JwtError(ValueError):
    """A JWT that cannot be decoded or whose signature does not verify; the message says why and
    never contains the token itself."""


def _b64(part: str) -> bytes:
    # Raw URL encoding only, as the jwt library's decodeString.
    if "=" in part or not part.isascii():
        raise JwtError("illegal base64 data")
    try:
        return base64.urlsafe_b64decode(part + "=" * (-len(part) % 4))
    except (binascii.Error, ValueError):
        raise JwtError("illegal base64 data") from None


def _int(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return 0
    return int(value)


def _str(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, list):
        return [v for v in value if isinstance(v, str)]
    return []


@dataclass(frozen=True, slots=True)
class Claims:
    """The fields every NATS JWT has, plus the raw `nats` object."""

    kind: str
    version: int
    subject: str
    issuer: str
    name: str
    issued_at: int
    expires: int
    not_before: int
    nats: dict[str, Any]
    token: str = field(repr=False)

    def time_problem(self, now: float | None = None) -> str:
        """Why the claim is not valid at `now` ("claim is expired", "claim is not yet valid"),
        or "" if it is."""
        current = int(time.time() if now is None else now)
        if self.expires > 0 and current > self.expires:
            return "claim is expired"
        if self.not_before > 0 and self.not_before > current:
            return "claim is not yet valid"
        return ""


@dataclass(frozen=True, slots=True)
class OperatorClaims:
    claims: Claims
    signing_keys: tuple[str, ...]
    system_account: str
    account_server_url: str
    strict_signing_key_usage: bool

    @property
    def subject(self) -> str:
        return self.claims.subject

    def trusted_keys(self) -> list[str]:
        """The keys this operator trusts to sign accounts (validateTrustedOperators)."""
        keys = [] if self.strict_signing_key_usage else [self.claims.subject]
        return keys + list(self.signing_keys)


@dataclass(frozen=True, slots=True)
class UserScope:
    """A scoped signing key of an account: users it signs get the `template` permissions."""

    key: str
    role: str
    template: dict[str, Any]


@dataclass(frozen=True, slots=True)
class AccountClaims:
    claims: Claims
    signing_keys: frozenset[str]
    scopes: dict[str, UserScope]
    revocations: dict[str, int]
    disallow_bearer: bool

    @property
    def subject(self) -> str:
        return self.claims.subject

    def has_issuer(self, key: str) -> bool:
        """Account.hasIssuer: the account itself or one of its signing keys."""
        return key == self.claims.subject or key in self.signing_keys

    def is_revoked(self, user: str, issued_at: int) -> bool:
        """A user JWT issued at or before a revocation of its key (or of "*") is revoked."""
        for key in (user, "*"):
            at = self.revocations.get(key)
            if at is not None and at >= issued_at:
                return True
        return False

    def to_account_config(self) -> AccountConfig:
        """The account's limits, exports, imports and default permissions as configuration,
        so that operator-mode accounts and `accounts {}` accounts are served the same way."""
        nats = self.claims.nats
        limits = _dict(nats.get("limits"))
        config = AccountConfig(name=self.claims.subject)
        config.limits = AccountLimits(
            max_connections=_int(limits.get("conn")),
            max_subscriptions=_int(limits.get("subs")),
            max_payload=_int(limits.get("payload")),
            max_leafnodes=_int(limits.get("leaf")),
        )
        config.name_tag = self.claims.name
        config.jetstream = _jetstream_limits(limits)
        config.default_permissions = permissions_from_jwt(_dict(nats.get("default_permissions")))
        trace = _dict(nats.get("trace"))
        trace_dest = _str(trace.get("dest"))
        if trace_dest and is_valid_publish_subject(trace_dest):
            # Where traces of messages with a sampled traceparent go (server/msgtrace.py).
            sampling = _int(trace.get("sampling"))
            config.trace_dest = trace_dest
            config.trace_sampling = sampling if 0 < sampling <= 100 else 100
        for export in nats.get("exports") or []:
            _add_export(config, _dict(export))
        for imp in nats.get("imports") or []:
            _add_import(config, _dict(imp))
        config.mappings = _mappings(_dict(nats.get("mappings")))
        return config


def _mappings(claim: dict[str, Any]) -> list[SubjectMapping]:
    """The claim's `mappings` (source -> [{subject, weight, cluster}]); nats-server adds each
    with AddWeightedMappings and ignores the ones it refuses. A weight of 0 (or none) is 100."""
    out = []
    for source, dests in claim.items():
        if not isinstance(dests, list):
            continue
        parsed = tuple(
            MapDest(_str(d.get("subject")), _int(d.get("weight")) or 100, _str(d.get("cluster")))
            for d in map(_dict, dests)
        )
        try:
            build_mapping(source, parsed)
        except MappingError:
            continue
        out.append(SubjectMapping(source, parsed))
    return out


def _enables_jetstream(limits: dict[str, Any]) -> bool:
    return _int(limits.get("mem_storage")) != 0 or _int(limits.get("disk_storage")) != 0


def _tier_limits(limits: dict[str, Any]) -> JetStreamAccountLimits:
    """One set of JetStream limits as nats-server takes them from a JWT: a stream-bytes or
    ack-pending limit of 0 means unlimited."""

    def unlimited(value: int) -> int:
        return value if value > 0 else NO_LIMIT

    return JetStreamAccountLimits(
        max_memory=_int(limits.get("mem_storage")),
        max_store=_int(limits.get("disk_storage")),
        max_streams=_int(limits.get("streams")),
        max_consumers=_int(limits.get("consumer")),
        max_ack_pending=unlimited(_int(limits.get("max_ack_pending"))),
        memory_max_stream_bytes=unlimited(_int(limits.get("mem_max_stream_bytes"))),
        store_max_stream_bytes=unlimited(_int(limits.get("disk_max_stream_bytes"))),
        max_bytes_required=limits.get("max_bytes_required") is True,
    )


def _jetstream_limits(limits: dict[str, Any]) -> JetStreamAccountLimits | None:
    """updateAccountClaims: JetStream is enabled by storage limits at the top level or in any
    tier of `tiered_limits` (which, when present, replace the top-level ones: jwt's
    loadAccount clears those); None when disabled."""
    tiers = {
        name: _dict(tier)
        for name, tier in _dict(limits.get("tiered_limits")).items()
        if isinstance(name, str)
    }
    if tiers:
        if not any(_enables_jetstream(tier) for tier in tiers.values()):
            return None
        zero = JetStreamAccountLimits(0, 0, 0, 0, 0, 0, 0)
        zero.tiers = {name: _tier_limits(tier) for name, tier in tiers.items()}
        return zero
    return _tier_limits(limits) if _enables_jetstream(limits) else None


def _add_export(config: AccountConfig, export: dict[str, Any]) -> None:
    subject = _str(export.get("subject"))
    if not subject:
        return
    # A token-required export is open to no account unless an activation token says so; those
    # are not supported, so it is exported to nobody.
    accounts: list[str] | None = [] if export.get("token_req") is True else None
    position = _int(export.get("account_token_position"))
    if export.get("type") == "service":
        latency = _dict(export.get("service_latency"))
        sampling = latency.get("sampling")
        config.service_exports.append(
            ServiceExport(
                subject=subject,
                accounts=accounts,
                response_type=_str(export.get("response_type")) or "Singleton",
                response_threshold=(_int(export.get("response_threshold")) / _NANOS)
                or ServiceExport(subject).response_threshold,
                latency_subject=_str(latency.get("results")),
                latency_sampling=_int(sampling) if not isinstance(sampling, str) else 0,
                account_token_position=position,
                allow_trace=export.get("allow_trace") is True,
            )
        )
    elif export.get("type") == "stream":
        config.stream_exports.append(StreamExport(subject, accounts, position))


def _add_import(config: AccountConfig, imp: dict[str, Any]) -> None:
    subject, account = _str(imp.get("subject")), _str(imp.get("account"))
    if not subject or not account:
        return
    local, to = _str(imp.get("local_subject")), _str(imp.get("to"))
    if imp.get("type") == "service":
        config.service_imports.append(
            ServiceImport(account, subject, local or to or subject, imp.get("share") is True)
        )
    elif imp.get("type") == "stream":
        if local:
            config.stream_imports.append(StreamImport(account, subject, to=local))
        else:
            # In a stream import `to` is a prefix (jwt Import.GetTo for streams).
            prefix = to.rstrip(".")
            target = f"{prefix}.{subject}" if prefix else subject
            config.stream_imports.append(StreamImport(account, subject, to=target, prefix=prefix))


@dataclass(frozen=True, slots=True)
class UserClaims:
    claims: Claims
    issuer_account: str
    bearer_token: bool
    allowed_connection_types: tuple[str, ...]
    src: tuple[str, ...]
    times: tuple[tuple[str, str], ...]
    times_location: str
    permissions: Permissions | None
    max_subscriptions: int
    max_payload: int
    max_data: int

    @property
    def subject(self) -> str:
        return self.claims.subject

    @property
    def account(self) -> str:
        """The account the user belongs to: issuer_account when signed by a signing key."""
        return self.issuer_account or self.claims.issuer

    def has_empty_permissions(self) -> bool:
        """UserClaims.HasEmptyPermissions: what a user signed by a scoped key must have."""
        nats = self.claims.nats
        for key in ("pub", "sub", "resp", "src", "times", "times_location"):
            if nats.get(key):
                return False
        if self.bearer_token or self.allowed_connection_types or nats.get("proxy_required"):
            return False
        return all(_int(nats.get(key)) == 0 for key in ("subs", "data", "payload"))


def _split(token: str) -> tuple[str, str, str]:
    if not isinstance(token, str):
        raise JwtError("not a string")
    if len(token) > MAX_TOKEN_SIZE:
        raise JwtError(f"token size {len(token)} exceeds maximum of {MAX_TOKEN_SIZE} bytes")
    chunks = token.split(".")
    if len(chunks) != 3:
        raise JwtError("expected 3 chunks")
    return chunks[0], chunks[1], chunks[2]


def _json(part: str) -> dict[str, Any]:
    try:
        value = json.loads(_b64(part))
    except (ValueError, RecursionError):
        raise JwtError("invalid JSON") from None
    if not isinstance(value, dict):
        raise JwtError("invalid JSON")
    return value


def decode(token: str) -> Claims:
    """Decode a JWT and verify its signature by its issuer (jwt.Decode). Times are not checked
    here; see `Claims.time_problem`. Raises JwtError."""
    head, body, sig_part = _split(token)
    header = _json(head)
    kind = _str(header.get("typ")).upper()
    alg = _str(header.get("alg")).lower()
    if kind != "JWT":
        raise JwtError(f"not supported type {header.get('typ')!r}")
    if alg not in ("ed25519", "ed25519-nkey"):
        raise JwtError(f"unexpected {header.get('alg')!r} algorithm")
    payload = _json(body)
    nats = _dict(payload.get("nats"))
    # v1 JWTs carry the type at the top level; v2 inside `nats` with a version.
    if isinstance(payload.get("type"), str) and payload.get("type"):
        claim_type, version = str(payload["type"]), 1
    else:
        claim_type, version = _str(nats.get("type")), _int(nats.get("version"))
    if version > 2:
        raise JwtError("JWT was generated by a newer version")
    signature = _b64(sig_part)
    issuer = _str(payload.get("iss"))
    signed = body if version <= 1 else f"{head}.{body}"
    if not verify_signature(issuer, signed.encode(), signature):
        raise JwtError(f"claim failed V{max(version, 1)} signature verification")
    expected = _EXPECTED_ISSUERS.get(claim_type)
    if expected is not None and not any(is_valid_public_key(issuer, p) for p in expected):
        raise JwtError("unable to validate expected prefixes")
    if version <= 1:
        # Fold the v1 layout into v2's: the v1 `nats` object lacks the moved fields.
        nats = {**nats, "type": claim_type}
        for key in ("issuer_account", "tags"):
            if key in payload:
                nats.setdefault(key, payload[key])
    return Claims(
        kind=claim_type,
        version=version,
        subject=_str(payload.get("sub")),
        issuer=issuer,
        name=_str(payload.get("name")),
        issued_at=_int(payload.get("iat")),
        expires=_int(payload.get("exp")),
        not_before=_int(payload.get("nbf")),
        nats=nats,
        token=token,
    )


def decode_operator(token: str) -> OperatorClaims:
    claims = decode(token)
    if claims.kind != "operator":
        raise JwtError("not an operator claim")
    nats = claims.nats
    return OperatorClaims(
        claims=claims,
        signing_keys=tuple(_strings(nats.get("signing_keys"))),
        system_account=_str(nats.get("system_account")),
        account_server_url=_str(nats.get("account_server_url")),
        strict_signing_key_usage=nats.get("strict_signing_key_usage") is True,
    )


def decode_account(token: str) -> AccountClaims:
    claims = decode(token)
    if claims.kind != "account":
        raise JwtError("not an account claim")
    if not is_valid_public_key(claims.subject, PREFIX_ACCOUNT):
        raise JwtError("subject is not an account public key")
    keys: set[str] = set()
    scopes: dict[str, UserScope] = {}
    for entry in claims.nats.get("signing_keys") or []:
        if isinstance(entry, str):
            keys.add(entry)
        elif isinstance(entry, dict) and entry.get("kind") == "user_scope":
            key = _str(entry.get("key"))
            keys.add(key)
            scopes[key] = UserScope(key, _str(entry.get("role")), _dict(entry.get("template")))
    revocations = {
        k: _int(v) for k, v in _dict(claims.nats.get("revocations")).items() if isinstance(k, str)
    }
    limits = _dict(claims.nats.get("limits"))
    return AccountClaims(
        claims=claims,
        signing_keys=frozenset(keys),
        scopes=scopes,
        revocations=revocations,
        disallow_bearer=limits.get("disallow_bearer") is True,
    )


def _subject_permission(value: Any) -> SubjectPermission | None:
    perm = _dict(value)
    allow, deny = _strings(perm.get("allow")), _strings(perm.get("deny"))
    if not allow and not deny:
        return None
    return SubjectPermission(allow=allow or None, deny=deny or None)


def permissions_from_jwt(nats: dict[str, Any]) -> Permissions | None:
    """buildPermissionsFromJwt: `pub`/`sub` allow and deny lists and `resp`, or None if the
    JWT sets none of them (the account's default permissions then apply)."""
    publish = _subject_permission(nats.get("pub"))
    subscribe = _subject_permission(nats.get("sub"))
    resp = nats.get("resp")
    response = None
    if isinstance(resp, dict):
        response = ResponsePermission()
        if _int(resp.get("max")) != 0:
            response.max_msgs = _int(resp.get("max"))
        if _int(resp.get("ttl")) != 0:
            response.expires = _int(resp.get("ttl")) / _NANOS
    if publish is None and subscribe is None and response is None:
        return None
    if response is not None:
        # validateResponsePermissions: responses turn off the blanket "publish anything".
        publish = publish or SubjectPermission()
        if publish.allow is None:
            publish.allow = []
    return Permissions(publish=publish, subscribe=subscribe, response=response)


def user_claims_from(claims: Claims, unset: int | None = None) -> UserClaims:
    """The user fields of decoded claims. A limit the JWT leaves out is 0 in a v2 JWT (so a
    hand-made JWT without `subs` may subscribe to nothing, as on nats-server) and unlimited in
    a v1 JWT or a scope template; `unset` overrides that default."""
    nats = claims.nats
    if unset is None:
        unset = NO_LIMIT if claims.version <= 1 else 0
    times = []
    for entry in nats.get("times") or []:
        if isinstance(entry, dict):
            times.append((_str(entry.get("start")), _str(entry.get("end"))))
    return UserClaims(
        claims=claims,
        issuer_account=_str(nats.get("issuer_account")),
        bearer_token=nats.get("bearer_token") is True,
        allowed_connection_types=tuple(_strings(nats.get("allowed_connection_types"))),
        src=tuple(_strings(nats.get("src"))),
        times=tuple(times),
        times_location=_str(nats.get("times_location")),
        permissions=permissions_from_jwt(nats),
        max_subscriptions=_int(nats.get("subs", unset)),
        max_payload=_int(nats.get("payload", unset)),
        max_data=_int(nats.get("data", unset)),
    )


def decode_user(token: str) -> UserClaims:
    claims = decode(token)
    if claims.kind != "user":
        raise JwtError("not user claim")
    if not is_valid_public_key(claims.subject, PREFIX_USER):
        raise JwtError("subject is not a user public key")
    user = user_claims_from(claims)
    if user.issuer_account and not is_valid_public_key(user.issuer_account, PREFIX_ACCOUNT):
        raise JwtError("account_id is not an account public key")
    return user


def parse_decorated_jwt(contents: str) -> str:
    """jwt.ParseDecoratedJWT: the JWT inside a `-----BEGIN NATS ... JWT-----` block (as in a
    .creds or nsc-written file), or the trimmed contents when there is no block."""
    lines = contents.splitlines()
    for i, line in enumerate(lines):
        if line.startswith("-----BEGIN") and "JWT" in line:
            for candidate in lines[i + 1 :]:
                candidate = candidate.strip()
                if candidate and not candidate.startswith("-----"):
                    return candidate
    return contents.strip()


def read_operator_jwt(source: str) -> OperatorClaims:
    """An operator JWT from a file, or inline when `source` itself is a JWT (readOperatorJWT).
    Raises JwtError, or OSError for a missing file."""
    try:
        contents = Path(source).read_text()
    except OSError:
        if not source.startswith(_JWT_PREFIX):
            raise
        contents = source
    return decode_operator(parse_decorated_jwt(contents))
