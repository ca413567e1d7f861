"""nkeys and NATS JWTs (operator, account, user), made per test run, never committed.

The claims follow what nsc writes (jwt v2), so nats-server and pynatsd read the same tokens.
"""

from __future__ import annotations

import base64
import json
import os
import time
from dataclasses import dataclass
from typing import Any

import nkeys


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
