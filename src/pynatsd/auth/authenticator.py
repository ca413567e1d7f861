"""Who may connect: nats-server's client authentication (auth.go processClientOrLeafAuthentication).

An `Authenticator` is built once per (re)load from `Options` and checks one CONNECT at a time.
Methods, in the order nats-server tries them:

1. operator mode (trusted operators): a user JWT signed by an account (or one of its signing
   keys) whose account JWT is signed by a trusted operator (or its signing keys), and the
   server's nonce signed with the user's key (unless it is a bearer token);
2. nkey users: the nonce signed with the user's Ed25519 key;
3. users lists: with `verify_and_map`, the user named by the client certificate; otherwise the
   user name and its password (bcrypt hashes too);
4. a token (`authorization { token }`, `--auth`; bcrypt hashes too);
5. a single user (`--user`/`--pass`).

`no_auth_user` stands in for a client that sends no credentials. A failure answers None and logs
the reason at debug level on the `pynatsd.auth` logger, never a credential.
"""

from __future__ import annotations

import dataclasses
import hashlib
import hmac
import ipaddress
import logging
import re
import secrets
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta, tzinfo
from pathlib import Path
from typing import TYPE_CHECKING, Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import bcrypt

from pynatsd.auth.jwt import (
    AccountClaims,
    JwtError,
    OperatorClaims,
    UserClaims,
    decode_account,
    decode_operator,
    decode_user,
    permissions_from_jwt,
    user_claims_from,
)
from pynatsd.auth.keys import decode_signature, is_valid_public_key, verify_signature
from pynatsd.options import NO_LIMIT, AccountConfig, Options, Permissions, User
from pynatsd.subjects import is_valid_subject

if TYPE_CHECKING:
    # Certificates are read only for `verify_and_map`: cryptography's x509 takes a tenth of a
    # second to import, which every start-up would otherwise pay.
    from cryptography import x509

    from pynatsd.auth import certs

__all__ = ["CONNECTION_TYPES", "AuthResult", "Authenticator", "is_bcrypt"]

log = logging.getLogger("pynatsd.auth")

GLOBAL_ACCOUNT = "$G"
CONNECTION_TYPES = frozenset(
    {"STANDARD", "WEBSOCKET", "LEAFNODE", "LEAFNODE_WS", "MQTT", "MQTT_WS", "IN_PROCESS"}
)
_BCRYPT = re.compile(r"^\$2[abxy]\$\d{2}\$.*", re.DOTALL)
_BCRYPT_MAX_PASSWORD = 72  # Go's bcrypt only ever reads this many bytes of a password
_BCRYPT_CACHE_SIZE = 1024
_TIME_OF_DAY = re.compile(r"^(\d{2}):(\d{2}):(\d{2})$")


def is_bcrypt(password: str) -> bool:
    """A password or token that nats-server checks with bcrypt rather than as plain text."""
    return password.startswith("$") and _BCRYPT.match(password) is not None


@dataclass(frozen=True, slots=True)
class AuthResult:
    """A client that passed authentication.

    `user_label` is what /connz reports as `authorized_user` (user name, nkey, JWT user key, or
    "[REDACTED]" for a token); `account` the account to bind to (a name, or an account public
    key in operator mode); `expires_at` the wall-clock time (time.time()) at which the
    credential expires and the connection must close with "User Authentication Expired"."""

    user_label: str
    account: str
    permissions: Permissions | None
    expires_at: float | None
    # Not in repr: a User holds its password.
    user: User | None = dataclasses.field(repr=False)
    # How the client got in: "none" (no auth required), "token", "user", "nkey", "jwt", "tls"
    # (verify_and_map) or "no_auth_user".
    method: str = "none"
    # Operator mode: the account's limits, imports and exports from its JWT (None otherwise;
    # look configured accounts up in Options.accounts).
    account_config: AccountConfig | None = None
    # Operator mode: when the account JWT expires ("Account Authentication Expired").
    account_expires_at: float | None = None
    # User JWT limits (-1: none): the server takes the lower of these and the account's.
    max_subscriptions: int = -1
    max_payload: int = -1
    allowed_connection_types: frozenset[str] | None = None
    # A user JWT's `name` (nats-server's nameTag), "" otherwise.
    name_tag: str = ""

    @property
    def log_label(self) -> str:
        """nats-server's user part of a connection's log label ("user:alice", "nkey:U...",
        "jwt:U...", "token"); "" when there is none."""
        if self.method in ("nkey",) or (self.user is not None and self.user.nkey):
            return f"nkey:{self.user_label}"
        if self.method == "jwt":
            return f"jwt:{self.user_label}"
        if self.method == "token":
            return "token"
        return f"user:{self.user_label}" if self.user_label else ""


class _Reject(Exception):
    """Authentication failed; the message is the logged reason (never a credential)."""


def _str(connect: Mapping[str, Any], key: str) -> str:
    value = connect.get(key)
    return value if isinstance(value, str) else ""


class Authenticator:
    """Authentication for one server configuration. Cheap to call per CONNECT; bcrypt checks
    are the one slow path (see `is_slow`)."""

    def __init__(self, options: Options, clock: Callable[[], float] = time.time) -> None:
        self.options = options
        self._clock = clock
        self._token = options.authorization
        self._username = options.username
        self._password = options.password
        self._no_auth_user = options.no_auth_user
        self._tls_map = options.tls_map
        self._users: dict[str, User] = {}
        self._nkeys: dict[str, User] = {}
        for user in options.users:
            if user.nkey:
                self._nkeys[user.nkey] = user
            elif user.username:
                self._users[user.username] = user
        self._user_dns: list[tuple[str, certs.DN]] = []
        if self._tls_map or (options.mqtt is not None and options.mqtt.tls_map):
            from pynatsd.auth import certs

            for name in self._users:
                dn = certs.parse_dn(name)
                if dn is not None:
                    self._user_dns.append((name, dn))
        # Operator mode.
        self.operators: list[OperatorClaims] = []
        trusted: list[str] = list(options.trusted_keys)
        for token in options.operator_jwts:
            try:
                operator = decode_operator(token)
            except JwtError as e:
                log.error("Operator JWT not valid: %s", e)
                continue
            self.operators.append(operator)
            trusted.extend(operator.trusted_keys())
        self._trusted_keys = frozenset(trusted)
        self._operator_mode = bool(options.operator_jwts or options.trusted_keys)
        self._preload = dict(options.resolver_preload)
        self._resolver_dir = Path(options.resolver_dir) if options.resolver_dir else None
        self._pinned = frozenset(options.resolver_pinned_accounts)
        self._accounts: dict[str, AccountClaims] = {}
        # Successful bcrypt checks, keyed by (hash, HMAC of the password under a key that never
        # leaves this process): a reconnect storm then costs one bcrypt per user, not per
        # connection. Failures are never cached, so guessing stays slow.
        self._bcrypt_key = secrets.token_bytes(32)
        self._bcrypt_ok: OrderedDict[tuple[str, bytes], None] = OrderedDict()
        # `check` may run in worker threads (see `is_slow`); the cache is shared.
        self._bcrypt_lock = threading.Lock()
        self.auth_required = bool(
            self._operator_mode or self._users or self._nkeys or self._username or self._token
        )
        self.nonce_required = bool(self._operator_mode or self._nkeys)

    # -- public API ------------------------------------------------------------------------

    def startup_warnings(self) -> list[str]:
        """What nats-server warns about at start (checkAuthforWarnings)."""
        warn = bool(self._password) and not is_bcrypt(self._password)
        mqtt = self.options.mqtt
        mqtt_map = mqtt is not None and mqtt.tls_map and mqtt.port != 0
        for user in self._users.values():
            if not user.password and (
                (self._tls_map and _type_allowed(user, "STANDARD"))
                or (mqtt_map and _type_allowed(user, "MQTT"))
            ):
                continue  # a certificate identity (nats-server's canTLSMap)
            if not is_bcrypt(user.password):
                warn = True
                break
        return ["Plaintext passwords detected, use nkeys or bcrypt"] if warn else []

    def is_slow(self, connect: Mapping[str, Any]) -> bool:
        """True if checking this CONNECT may run bcrypt (~50-300 ms of CPU): the caller may want
        to run `check` in a worker thread rather than on the event loop."""
        if self._token and is_bcrypt(self._token):
            return True
        if self._password and is_bcrypt(self._password):
            return True
        user = self._users.get(_str(connect, "user") or self._no_auth_user)
        return user is not None and is_bcrypt(user.password)

    def configured_user(self, nkey: str, username: str) -> User | None:
        """The `users` entry with this nkey (looked up when given) or else this user name; None
        when there is none. A single user (`authorization { user }`, `--user`) is not an entry,
        as in nats-server's users map."""
        if nkey:
            return self._nkeys.get(nkey)
        return self._users.get(username) if username else None

    def lookup_account(self, name: str) -> AccountConfig | None:
        """A configured account (`accounts {}`), or in operator mode the account whose public key
        is `name`, from its JWT (resolver_preload or the resolver directory)."""
        configured = self.options.accounts.get(name)
        if configured is not None:
            return configured
        if self._operator_mode:
            try:
                return self._account_claims(name).to_account_config()
            except _Reject:
                return None
        return None

    def check(
        self,
        connect: Mapping[str, Any],
        nonce: str,
        client_cert: x509.Certificate | bytes | None = None,
        conn_type: str = "STANDARD",
        client_host: str = "",
        tls_map: bool | None = None,
    ) -> AuthResult | None:
        """Authenticate one CONNECT (its decoded JSON) against this configuration. `nonce` is
        the one sent in INFO ("" if none); `client_cert` the verified peer certificate of a TLS
        connection; `tls_map` replaces the client listener's verify_and_map (the MQTT listener
        has its own, as nats-server's). Never raises; None means "Authorization Violation"."""
        try:
            if not isinstance(connect, Mapping):
                raise _Reject("CONNECT is not an object")
            tls_map = self._tls_map if tls_map is None else tls_map
            return self._check(connect, nonce, client_cert, conn_type, client_host, tls_map)
        except _Reject as e:
            log.debug("Authentication failed: %s", e)
            return None
        except Exception:
            # A bug here must cost the client its connection, not the server its loop.
            log.exception("Authentication error")
            return None

    # -- the checks ------------------------------------------------------------------------

    def _check(
        self,
        connect: Mapping[str, Any],
        nonce: str,
        client_cert: x509.Certificate | bytes | None,
        conn_type: str,
        client_host: str,
        tls_map: bool,
    ) -> AuthResult:
        c_user = _str(connect, "user")
        c_pass = _str(connect, "pass")
        c_token = _str(connect, "auth_token")
        c_nkey = _str(connect, "nkey")
        if not self.auth_required:
            return AuthResult(_raw_auth_user(connect), GLOBAL_ACCOUNT, None, None, None)
        no_auth = self._no_auth_user
        user_jwt: UserClaims | None = None
        if self._operator_mode:
            user_jwt = self._user_jwt(connect)
        nkey_user: User | None = None
        if self._nkeys:
            if no_auth and not (c_user or c_pass or c_token or c_nkey) and no_auth in self._nkeys:
                c_nkey = no_auth
            if c_nkey:
                nkey_user = self._nkeys.get(c_nkey)
                if nkey_user is None:
                    raise _Reject("unknown nkey")
                if not _type_allowed(nkey_user, conn_type):
                    raise _Reject("connection type not allowed")
        user: User | None = None
        by_cert = False
        if self._users and nkey_user is None:
            if tls_map:
                user = self._user_from_cert(client_cert, conn_type)
                by_cert = True
                c_user = user.username
            else:
                if no_auth and not (c_user or c_pass or c_token) and no_auth in self._users:
                    c_user, c_pass = no_auth, self._users[no_auth].password
                if c_user:
                    user = self._users.get(c_user)
                    if user is None:
                        raise _Reject("unknown user")
                    if not _type_allowed(user, conn_type):
                        raise _Reject("connection type not allowed")
        if user_jwt is not None:
            return self._check_jwt(user_jwt, connect, nonce, conn_type, client_host)
        if nkey_user is not None:
            if nkey_user.nkey != no_auth:
                self._verify_nonce(nkey_user.nkey, _str(connect, "sig"), nonce)
            method = "nkey" if nkey_user.nkey != no_auth else "no_auth_user"
            return self._result(nkey_user.nkey, nkey_user, method)
        if user is not None:
            if not self._passwords_match(user.password, c_pass):
                raise _Reject("bad password")
            method = "tls" if by_cert else "user"
            if not by_cert and user.username == no_auth and not _str(connect, "user"):
                method = "no_auth_user"
            return self._result(user.username, user, method)
        if self._token:
            if not self._passwords_match(self._token, c_token):
                raise _Reject("bad token")
            label = "[REDACTED]" if c_token else _raw_auth_user(connect)
            return AuthResult(label, GLOBAL_ACCOUNT, None, None, None, method="token")
        if self._username:
            if c_user != self._username or not self._passwords_match(self._password, c_pass):
                raise _Reject("bad user or password")
            return AuthResult(c_user, GLOBAL_ACCOUNT, None, None, None, method="user")
        raise _Reject("no credentials match")

    def _result(self, label: str, user: User, method: str) -> AuthResult:
        types = frozenset(user.allowed_connection_types) if user.allowed_connection_types else None
        return AuthResult(
            label,
            user.account or GLOBAL_ACCOUNT,
            user.permissions,
            None,
            user,
            method=method,
            allowed_connection_types=types,
        )

    def _user_from_cert(self, cert: x509.Certificate | bytes | None, conn_type: str) -> User:
        if cert is None:
            raise _Reject("user required in certificate, no peer certificate")
        from pynatsd.auth import certs

        try:
            certificate = certs.load_certificate(cert)
        except ValueError:
            raise _Reject("peer certificate not readable") from None

        def usable(name: str) -> bool:
            user = self._users.get(name)
            return user is not None and _type_allowed(user, conn_type)

        dns = [(n, dn) for n, dn in self._user_dns if usable(n)]
        name = certs.map_certificate(certificate, usable, dns)
        if name is None:
            raise _Reject("no user found for the certificate")
        return self._users[name]

    def _passwords_match(self, expected: str, given: str) -> bool:
        """nats-server comparePasswords: bcrypt for a bcrypt hash, else constant time."""
        if is_bcrypt(expected):
            return self._bcrypt_matches(expected, given)
        return hmac.compare_digest(expected.encode(), given.encode())

    def _bcrypt_matches(self, hashed: str, given: str) -> bool:
        digest = hmac.new(self._bcrypt_key, given.encode(), hashlib.sha256).digest()
        key = (hashed, digest)
        with self._bcrypt_lock:
            if key in self._bcrypt_ok:
                self._bcrypt_ok.move_to_end(key)
                return True
        try:
            ok = bcrypt.checkpw(given.encode()[:_BCRYPT_MAX_PASSWORD], hashed.encode())
        except ValueError:
            return False
        if ok:
            with self._bcrypt_lock:
                self._bcrypt_ok[key] = None
                if len(self._bcrypt_ok) > _BCRYPT_CACHE_SIZE:
                    self._bcrypt_ok.popitem(last=False)
        return ok

    def _verify_nonce(self, public_key: str, sig: str, nonce: str) -> None:
        if not sig:
            raise _Reject("signature missing")
        raw = decode_signature(sig)
        if raw is None:
            raise _Reject("signature not valid base64")
        if not is_valid_public_key(public_key):
            raise _Reject("user nkey not valid")
        if not verify_signature(public_key, nonce.encode(), raw):
            raise _Reject("signature not verified")

    # -- operator mode ---------------------------------------------------------------------

    def _user_jwt(self, connect: Mapping[str, Any]) -> UserClaims:
        token = _str(connect, "jwt")
        claims: UserClaims | None = None
        if token:
            try:
                claims = decode_user(token)
            except JwtError as e:
                log.debug("User JWT not valid: %s", e)
        if claims is None and self.options.default_sentinel:
            try:
                claims = decode_user(self.options.default_sentinel)
            except JwtError as e:
                raise _Reject(f"default sentinel JWT not valid: {e}") from None
        if claims is None:
            raise _Reject("authentication requires a user JWT")
        problem = claims.claims.time_problem(self._clock())
        if problem:
            raise _Reject(f"user JWT no longer valid: {problem}")
        return claims

    def _account_claims(self, name: str) -> AccountClaims:
        cached = self._accounts.get(name)
        if cached is None:
            token = self._preload.get(name)
            if token is None and self._resolver_dir is not None and is_valid_public_key(name):
                try:
                    token = (self._resolver_dir / f"{name}.jwt").read_text().strip()
                except OSError:
                    token = None
            if token is None:
                raise _Reject(f"account JWT lookup error: account {name} not found")
            try:
                cached = decode_account(token)
            except JwtError as e:
                raise _Reject(f"account JWT lookup error: {e}") from None
            if cached.subject != name:
                raise _Reject("account JWT lookup error: account validation failed")
            if cached.claims.issuer not in self._trusted_keys:
                raise _Reject("account JWT not signed by trusted operator")
            self._accounts[name] = cached
        problem = cached.claims.time_problem(self._clock())
        if problem:
            raise _Reject(f"account JWT lookup error: {problem}")
        return cached

    def _check_jwt(
        self,
        juc: UserClaims,
        connect: Mapping[str, Any],
        nonce: str,
        conn_type: str,
        client_host: str,
    ) -> AuthResult:
        issuer = juc.account
        if self._pinned and issuer not in self._pinned:
            raise _Reject(f"account {issuer} not listed as operator pinned account")
        account = self._account_claims(issuer)
        if not account.has_issuer(juc.claims.issuer):
            raise _Reject("user JWT issuer is not known")
        permissions = juc.permissions
        max_subs, max_payload = juc.max_subscriptions, juc.max_payload
        types = juc.allowed_connection_types
        scope = account.scopes.get(juc.claims.issuer)
        if scope is not None:
            if not juc.has_empty_permissions():
                raise _Reject(
                    "user JWT is not valid: scoped users require no permissions or limits"
                )
            # The scope's template replaces the user's permissions and limits.
            nats = _expand_template(scope.template, juc, account)
            template = user_claims_from(dataclasses.replace(juc.claims, nats=nats), NO_LIMIT)
            permissions, types = template.permissions, template.allowed_connection_types
            max_subs, max_payload = template.max_subscriptions, template.max_payload
            src, times, location = template.src, template.times, template.times_location
            bearer = template.bearer_token
        else:
            src, times, location, bearer = juc.src, juc.times, juc.times_location, juc.bearer_token
        if bearer and account.disallow_bearer:
            raise _Reject("account does not allow bearer tokens")
        allowed = _connection_types(types)
        if allowed is not None and conn_type not in allowed:
            raise _Reject("connection type not allowed")
        if not bearer:
            self._verify_nonce(juc.subject, _str(connect, "sig"), nonce)
        if account.is_revoked(juc.subject, juc.claims.issued_at):
            raise _Reject("user authentication revoked")
        if not _source_allowed(src, client_host):
            raise _Reject(f"bad src IP {client_host}")
        now = self._clock()
        allowed_now, valid_for = _times_allowed(times, location, now)
        if not allowed_now:
            raise _Reject("outside connect times")
        expires_at: float | None = None
        if juc.claims.expires:
            expires_at = float(max(juc.claims.expires, int(now)))
        if valid_for is not None and (expires_at is None or now + valid_for < expires_at):
            expires_at = now + valid_for
        if permissions is None:
            permissions = permissions_from_jwt(account.claims.nats.get("default_permissions") or {})
        return AuthResult(
            juc.subject,
            issuer,
            permissions,
            expires_at,
            None,
            method="jwt",
            account_config=account.to_account_config(),
            account_expires_at=float(account.claims.expires) if account.claims.expires else None,
            max_subscriptions=max_subs,
            max_payload=max_payload,
            allowed_connection_types=allowed,
            name_tag=juc.claims.name,
        )


def _raw_auth_user(connect: Mapping[str, Any]) -> str:
    """nats-server getRawAuthUser, for a connection that was not authenticated."""
    nkey, user = _str(connect, "nkey"), _str(connect, "user")
    if nkey or user:
        return nkey or user
    return "[REDACTED]" if _str(connect, "auth_token") else ""


def _type_allowed(user: User, conn_type: str) -> bool:
    types = user.allowed_connection_types
    return not types or conn_type in types


def _connection_types(types: tuple[str, ...]) -> frozenset[str] | None:
    """convertAllowedConnectionTypes: unknown types are dropped, but a list with none known
    allows nothing (its intent was to restrict)."""
    if not types:
        return None
    return frozenset(t.upper() for t in types if t.upper() in CONNECTION_TYPES)


def _source_allowed(src: tuple[str, ...], host: str) -> bool:
    """validateSrc: with a `src` list, the client's IP must be in one of its CIDR blocks."""
    if not src:
        return True
    try:
        ip = ipaddress.ip_address(host)
    except ValueError:
        return False
    for cidr in src:
        if "/" not in cidr:
            return False  # Go's ParseCIDR refuses a bare address
        try:
            if ip in ipaddress.ip_network(cidr, strict=False):
                return True
        except ValueError:
            return False
    return False


def _times_allowed(
    times: tuple[tuple[str, str], ...], location: str, now: float
) -> tuple[bool, float | None]:
    """validateTimes: inside one of the daily `times` ranges, and for how long (seconds)."""
    if not times:
        return True, None
    zone: tzinfo | None = None
    if location:
        try:
            zone = ZoneInfo(location)
        except (ZoneInfoNotFoundError, ValueError):
            return False, None
    current = datetime.fromtimestamp(now, zone) if zone else datetime.fromtimestamp(now)
    best: float | None = None
    for start_text, end_text in times:
        start, end = _clock_time(start_text, current), _clock_time(end_text, current)
        if start is None or end is None:
            return False, None
        remaining: float | None = None
        if start < current < end:
            remaining = (end - current).total_seconds()
        elif start > end:
            # The range crosses midnight.
            if end > current:
                remaining = (end - current).total_seconds()
            else:
                end += timedelta(days=1)
                if start < current < end:
                    remaining = (end - current).total_seconds()
        if remaining is not None and (best is None or remaining > best):
            best = remaining
    return (best is not None), best


def _clock_time(text: str, day: datetime) -> datetime | None:
    m = _TIME_OF_DAY.match(text)
    if m is None:
        return None
    hour, minute, second = (int(g) for g in m.groups())
    if hour > 23 or minute > 59 or second > 59:
        return None
    return day.replace(hour=hour, minute=minute, second=second, microsecond=0)


_MUSTACHE = re.compile(r"\{\{([^}]+)\}\}")


def _expand_template(
    template: dict[str, Any], juc: UserClaims, account: AccountClaims
) -> dict[str, Any]:
    """processUserPermissionsTemplate for the common templates: {{name()}}, {{subject()}},
    {{account-name()}}, {{account-subject()}}, {{tag(x)}} and {{account-tag(x)}}. A subject
    that does not expand to a valid one is dropped from an allow list; in a deny list the
    whole user is refused, as nats-server does."""
    result = dict(template)
    for direction in ("pub", "sub"):
        perm = template.get(direction)
        if not isinstance(perm, dict):
            continue
        expanded = dict(perm)
        for kind, strict in (("allow", False), ("deny", True)):
            entries = perm.get(kind)
            if not isinstance(entries, list):
                continue
            out: list[str] = []
            for entry in entries:
                if isinstance(entry, str):
                    out.extend(_expand_entry(entry, juc, account, strict))
            if kind == "allow" and entries and not out:
                # nats-server turns an allow list emptied by templates into "deny >".
                expanded["deny"] = [*(expanded.get("deny") or []), ">"]
            expanded[kind] = out
        result[direction] = expanded
    return result


def _expand_entry(entry: str, juc: UserClaims, account: AccountClaims, strict: bool) -> list[str]:
    values: list[list[str]] = []
    sources = _MUSTACHE.findall(entry)
    if not sources:
        return [entry]
    for op in (s.strip() for s in sources):
        lowered = op.lower()
        tag = re.fullmatch(r"(account-)?tag\((.*)\)", op, re.IGNORECASE)
        if lowered == "name()":
            values.append([juc.claims.name])
        elif lowered == "subject()":
            values.append([juc.subject])
        elif lowered == "account-name()":
            values.append([account.claims.name])
        elif lowered == "account-subject()":
            values.append([juc.issuer_account])
        elif tag is not None:
            source = account.claims.nats if tag.group(1) else juc.claims.nats
            prefix = tag.group(2).lower() + ":"
            tags = [t for t in source.get("tags") or [] if isinstance(t, str)]
            found = [t[len(prefix) :] for t in tags if t.startswith(prefix)]
            if not found:
                if strict:
                    raise _Reject("user JWT generated invalid permissions")
                found = [" "]
            values.append(found)
        else:
            raise _Reject("user JWT generated invalid permissions")
    results = [entry]
    for source, options in zip(sources, values, strict=True):
        results = [r.replace("{{" + source + "}}", v) for r in results for v in options]
    valid = [r for r in results if is_valid_subject(r)]
    if strict and len(valid) != len(results):
        raise _Reject("user JWT generated invalid permissions")
    return valid
