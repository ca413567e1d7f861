"""NKeys: public key decoding and Ed25519 signature checks (nats-io/nkeys semantics).

The `nkeys` package signs with seeds but cannot verify from a public key alone, so the public key is
decoded here (base32, role prefix byte, CRC16 checked with `nkeys.crc16`) and the signature is
checked with PyNaCl's `VerifyKey`, the same primitive `nkeys.KeyPair.verify` uses.
"""

from __future__ import annotations

import base64
import binascii
import re
import secrets
from functools import lru_cache

import nacl.exceptions
import nacl.signing
import nkeys

__all__ = [
    "PREFIX_ACCOUNT",
    "PREFIX_OPERATOR",
    "PREFIX_SERVER",
    "PREFIX_USER",
    "decode_public_key",
    "decode_signature",
    "is_valid_public_key",
    "new_nonce",
    "verify_signature",
]

PREFIX_OPERATOR: int = nkeys.PREFIX_BYTE_OPERATOR
PREFIX_ACCOUNT: int = nkeys.PREFIX_BYTE_ACCOUNT
PREFIX_USER: int = nkeys.PREFIX_BYTE_USER
PREFIX_SERVER: int = nkeys.PREFIX_BYTE_SERVER
_PUBLIC_PREFIXES = frozenset(
    {PREFIX_OPERATOR, PREFIX_ACCOUNT, PREFIX_USER, PREFIX_SERVER, nkeys.PREFIX_BYTE_CLUSTER}
)
_PUBLIC_KEY_LEN = 56  # base32 of 1 prefix byte + 32 key bytes + 2 CRC bytes, unpadded
_RAW_URL = re.compile(r"[A-Za-z0-9_-]*")
# nats-server's nonce: 11 random bytes, raw-URL base64 (nonceRawLen / nonceLen in server.go).
_NONCE_RAW_LEN = 11


def new_nonce() -> str:
    """A fresh nonce for INFO, shaped as nats-server's (15 characters of raw-URL base64)."""
    return base64.urlsafe_b64encode(secrets.token_bytes(_NONCE_RAW_LEN)).rstrip(b"=").decode()


@lru_cache(maxsize=4096)
def decode_public_key(key: str) -> tuple[int, bytes] | None:
    """(role prefix byte, 32 raw key bytes) of a public nkey, or None if it is not one.

    Cached: the same few account and user keys are checked on every connect."""
    if len(key) != _PUBLIC_KEY_LEN or not key.isascii():
        return None
    try:
        raw = base64.b32decode(key)
    except (binascii.Error, ValueError):
        return None
    if len(raw) != 35:
        return None
    body, crc = raw[:-2], int.from_bytes(raw[-2:], "little")
    if nkeys.crc16(bytearray(body)) != crc:
        return None
    prefix = body[0]
    if prefix not in _PUBLIC_PREFIXES:
        return None
    return prefix, bytes(body[1:])


def is_valid_public_key(key: str, prefix: int | None = None) -> bool:
    """nkeys.IsValidPublic{User,Account,Operator}Key: any public key, or one of `prefix`'s role."""
    decoded = decode_public_key(key) if isinstance(key, str) else None
    return decoded is not None and (prefix is None or decoded[0] == prefix)


@lru_cache(maxsize=4096)
def _verify_key(raw: bytes) -> nacl.signing.VerifyKey:
    return nacl.signing.VerifyKey(raw)


def verify_signature(public_key: str, data: bytes, signature: bytes) -> bool:
    """True if `signature` is `public_key`'s Ed25519 signature of `data`. Never raises."""
    decoded = decode_public_key(public_key)
    if decoded is None or len(signature) != 64:
        return False
    try:
        _verify_key(decoded[1]).verify(data, signature)
    except (nacl.exceptions.BadSignatureError, nacl.exceptions.CryptoError, ValueError):
        return False
    return True


def decode_signature(sig: str) -> bytes | None:
    """The CONNECT `sig`: raw-URL base64 (what nats-server expects), else standard base64 with
    padding (what nats.py sends). Go's decoders skip CR and LF, so these are dropped too."""
    text = sig.replace("\r", "").replace("\n", "")
    if not text.isascii():
        return None
    if _RAW_URL.fullmatch(text) and len(text) % 4 != 1:
        try:
            return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
        except (binascii.Error, ValueError):
            pass
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        return None
