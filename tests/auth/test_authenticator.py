"""Authenticator unit tests: results, labels, bad JWTs and signatures, resolvers, fuzzing."""

from __future__ import annotations

import base64
import json
import logging
import time
from pathlib import Path
from typing import Any

import bcrypt
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pynatsd.auth import Authenticator, new_nonce
from pynatsd.auth.authenticator import _times_allowed
from pynatsd.auth.jwt import JwtError, decode, decode_user, parse_decorated_jwt
from pynatsd.auth.keys import decode_signature, is_valid_public_key, verify_signature
from pynatsd.options import (
    AccountConfig,
    Options,
    Permissions,
    SubjectPermission,
    User,
)
from support.jwts import (
    account_jwt,
    account_key,
    encode_jwt,
    make_operator,
    operator_key,
    user_jwt,
    user_key,
)

HASH = bcrypt.hashpw(b"pw", bcrypt.gensalt(4)).decode()
PERMS = Permissions(publish=SubjectPermission(allow=["a.>"]))


def test_no_auth_required() -> None:
    auth = Authenticator(Options())
    assert not auth.auth_required and not auth.nonce_required
    result = auth.check({"user": "bob", "pass": "x"}, "")
    assert result is not None and result.account == "$G" and result.method == "none"
    assert result.user_label == "bob" and result.permissions is None


def test_user_result_carries_account_permissions_and_types() -> None:
    user = User(
        username="a",
        password="p",
        account="ACC",
        permissions=PERMS,
        allowed_connection_types={"STANDARD", "WEBSOCKET"},
    )
    auth = Authenticator(Options(users=[user], accounts={"ACC": AccountConfig("ACC")}))
    result = auth.check({"user": "a", "pass": "p"}, "")
    assert result is not None
    assert (result.account, result.permissions, result.user) == ("ACC", PERMS, user)
    assert result.log_label == "user:a" and result.method == "user"
    assert result.allowed_connection_types == {"STANDARD", "WEBSOCKET"}
    assert auth.check({"user": "a", "pass": "p"}, "", conn_type="MQTT") is None
    assert auth.check({"user": "a", "pass": "p"}, "", conn_type="WEBSOCKET") is not None
    assert auth.lookup_account("ACC") == AccountConfig("ACC")
    assert auth.lookup_account("nope") is None


def test_credentials_stay_out_of_results_and_logs(caplog: pytest.LogCaptureFixture) -> None:
    auth = Authenticator(Options(users=[User(username="a", password="hunter2")]))
    result = auth.check({"user": "a", "pass": "hunter2"}, "")
    assert result is not None and "hunter2" not in repr(result)
    with caplog.at_level(logging.DEBUG, logger="pynatsd.auth"):
        assert auth.check({"user": "a", "pass": "hunter3"}, "") is None
        assert auth.check({"auth_token": "tok3n"}, "") is None
    assert "hunter" not in caplog.text and "tok3n" not in caplog.text
    assert "Authentication failed" in caplog.text


def test_token_label_is_redacted() -> None:
    auth = Authenticator(Options(authorization="t"))
    result = auth.check({"auth_token": "t"}, "")
    assert result is not None and result.user_label == "[REDACTED]"
    assert result.log_label == "token" and result.method == "token"


@pytest.mark.parametrize(
    ("options", "warned"),
    [
        (Options(username="u", password="p"), True),
        (Options(username="u", password=HASH), False),
        (Options(users=[User(username="u", password=HASH)]), False),
        (Options(users=[User(username="u", password="p")]), True),
        (Options(users=[User(username="CN=x")], tls_map=True), False),
        (Options(authorization="t"), False),
    ],
)
def test_startup_warnings(options: Options, warned: bool) -> None:
    warnings = Authenticator(options).startup_warnings()
    assert warnings == (["Plaintext passwords detected, use nkeys or bcrypt"] if warned else [])


def test_bcrypt_is_slow_and_cached(monkeypatch: pytest.MonkeyPatch) -> None:
    auth = Authenticator(Options(users=[User(username="u", password=HASH)], no_auth_user="u"))
    assert auth.is_slow({"user": "u"}) and auth.is_slow({})
    assert not Authenticator(Options(users=[User(username="u", password="p")])).is_slow({})
    calls = []
    real = bcrypt.checkpw
    monkeypatch.setattr(bcrypt, "checkpw", lambda p, h: calls.append(p) or real(p, h))
    for _ in range(3):
        assert auth.check({"user": "u", "pass": "pw"}, "") is not None
    for _ in range(2):
        assert auth.check({"user": "u", "pass": "bad"}, "") is None
    assert calls == [b"pw", b"bad", b"bad"]  # successes cached, failures never


def test_bcrypt_reads_72_bytes_like_go() -> None:
    long = "x" * 72
    hashed = bcrypt.hashpw(long.encode(), bcrypt.gensalt(4)).decode()
    auth = Authenticator(Options(authorization=hashed))
    assert auth.check({"auth_token": long + "ignored"}, "") is not None


# -- JWTs --------------------------------------------------------------------------------------

OP = make_operator()
ACC = account_key()
ACC_JWT = account_jwt(OP.signing, ACC)


def _operator_options(**kw: Any) -> Options:
    preload = {ACC.public: ACC_JWT, OP.system.public: OP.system_jwt}
    return Options(operator_jwts=[OP.jwt], resolver="MEMORY", resolver_preload=preload, **kw)


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _malformed() -> list[tuple[str, str]]:
    user = user_key()
    good = user_jwt(ACC, user)
    head, body, sig = good.split(".")

    def signed(header: dict[str, Any], payload: dict[str, Any]) -> str:
        h, p = _b64(json.dumps(header).encode()), _b64(json.dumps(payload).encode())
        return f"{h}.{p}.{_b64(ACC.sign(f'{h}.{p}'.encode()))}"

    claims = json.loads(base64.urlsafe_b64decode(body + "=="))
    return [
        ("two chunks", f"{head}.{body}"),
        ("four chunks", f"{good}.x"),
        ("padded base64", f"{head}.{body}=.{sig}"),
        ("not base64", f"{head}.{body}.***"),
        ("not json", f"{_b64(b'{')}.{body}.{sig}"),
        ("json array", f"{_b64(b'[]')}.{body}.{sig}"),
        ("wrong typ", signed({"typ": "JWS", "alg": "ed25519-nkey"}, claims)),
        ("wrong alg", signed({"typ": "JWT", "alg": "HS256"}, claims)),
        (
            "newer version",
            signed(
                {"typ": "JWT", "alg": "ed25519-nkey"},
                {**claims, "nats": {**claims["nats"], "version": 3}},
            ),
        ),
        ("account claim", account_jwt(OP.signing, ACC)),
        (
            "subject not a user",
            signed({"typ": "JWT", "alg": "ed25519-nkey"}, {**claims, "sub": ACC.public}),
        ),
        ("issuer not an account", encode_jwt(user, user.public, "user", {})),
        ("empty", ""),
        ("huge", "a" * (1024 * 1024 + 1)),
        ("signature truncated", f"{head}.{body}.{sig[:-4]}"),
    ]


@pytest.mark.parametrize(("name", "token"), _malformed(), ids=lambda x: x if len(x) < 30 else "")
def test_malformed_jwts_are_refused(name: str, token: str) -> None:
    with pytest.raises(JwtError):
        decode_user(token)
    auth = Authenticator(_operator_options())
    nonce = new_nonce()
    assert auth.check({"jwt": token, "sig": user_key().sign_nonce(nonce)}, nonce) is None


def test_v1_jwts_sign_the_payload_only() -> None:
    user = user_key()
    header = _b64(json.dumps({"typ": "jwt", "alg": "ed25519"}).encode())
    payload = _b64(
        json.dumps(
            {"iss": ACC.public, "sub": user.public, "type": "user", "nats": {"pub": {}}}
        ).encode()
    )
    token = f"{header}.{payload}.{_b64(ACC.sign(payload.encode()))}"
    claims = decode_user(token)
    assert claims.claims.version == 1 and claims.max_subscriptions == -1
    with pytest.raises(JwtError):
        bad = f"{header}.{payload}.{_b64(ACC.sign(f'{header}.{payload}'.encode()))}"
        decode(bad)


@pytest.mark.parametrize(
    ("exp", "nbf", "ok"),
    [(0, 0, True), (-10, 0, False), (100, 0, True), (0, 100, False), (100, -100, True)],
)
def test_jwt_times(exp: int, nbf: int, ok: bool) -> None:
    now = int(time.time())
    user = user_key()
    token = user_jwt(ACC, user, exp=now + exp if exp else 0, nbf=now + nbf if nbf else 0)
    nonce = new_nonce()
    result = Authenticator(_operator_options()).check(
        {"jwt": token, "sig": user.sign_nonce(nonce)}, nonce
    )
    assert (result is not None) is ok
    if result is not None:
        assert result.expires_at == (now + exp if exp else None)


def test_clock_drives_expiry_checks() -> None:
    user = user_key()
    token = user_jwt(ACC, user, exp=2_000_000_000)
    nonce = new_nonce()
    connect = {"jwt": token, "sig": user.sign_nonce(nonce)}
    assert Authenticator(_operator_options(), clock=lambda: 1_999_999_999).check(connect, nonce)
    assert not Authenticator(_operator_options(), clock=lambda: 2_000_000_001).check(connect, nonce)


def test_directory_resolver(tmp_path: Path) -> None:
    (tmp_path / f"{ACC.public}.jwt").write_text(ACC_JWT + "\n")
    options = Options(operator_jwts=[OP.jwt], resolver="FULL", resolver_dir=str(tmp_path))
    auth = Authenticator(options)
    user = user_key()
    nonce = new_nonce()
    result = auth.check({"jwt": user_jwt(ACC, user), "sig": user.sign_nonce(nonce)}, nonce)
    assert result is not None and result.account == ACC.public
    assert auth.lookup_account(ACC.public) is not None
    assert auth.lookup_account(account_key().public) is None


def test_pinned_accounts() -> None:
    user = user_key()
    nonce = new_nonce()
    connect = {"jwt": user_jwt(ACC, user), "sig": user.sign_nonce(nonce)}
    pinned = _operator_options(resolver_pinned_accounts=[account_key().public])
    assert Authenticator(pinned).check(connect, nonce) is None
    pinned.resolver_pinned_accounts.append(ACC.public)
    assert Authenticator(pinned).check(connect, nonce) is not None


def test_default_sentinel() -> None:
    sentinel = user_jwt(ACC, user_key(), bearer_token=True)
    auth = Authenticator(_operator_options(default_sentinel=sentinel))
    result = auth.check({"user": "whoever"}, new_nonce())
    assert result is not None and result.method == "jwt"


def test_account_expiry_is_reported() -> None:
    exp = int(time.time()) + 500
    acc = account_key()
    token = encode_jwt(OP.signing, acc.public, "account", {"limits": {"conn": -1}}, exp=exp)
    options = _operator_options()
    options.resolver_preload[acc.public] = token
    user = user_key()
    nonce = new_nonce()
    result = Authenticator(options).check(
        {"jwt": user_jwt(acc, user), "sig": user.sign_nonce(nonce)}, nonce
    )
    assert result is not None and result.account_expires_at == exp


def test_strict_operator_trusts_signing_keys_only() -> None:
    op = make_operator(strict=True)
    acc = account_key()
    options = Options(
        operator_jwts=[op.jwt],
        resolver="MEMORY",
        resolver_preload={acc.public: account_jwt(op.key, acc)},
    )
    user = user_key()
    nonce = new_nonce()
    connect = {"jwt": user_jwt(acc, user), "sig": user.sign_nonce(nonce)}
    assert Authenticator(options).check(connect, nonce) is None


def test_operator_with_trusted_keys_only() -> None:
    signer = operator_key()
    options = Options(
        trusted_keys=[signer.public],
        resolver="MEMORY",
        resolver_preload={ACC.public: account_jwt(signer, ACC)},
    )
    user = user_key()
    nonce = new_nonce()
    auth = Authenticator(options)
    assert auth.auth_required and auth.nonce_required
    assert auth.check({"jwt": user_jwt(ACC, user), "sig": user.sign_nonce(nonce)}, nonce)


def test_decorated_jwt() -> None:
    creds = f"-----BEGIN NATS USER JWT-----\n{ACC_JWT}\n------END NATS USER JWT------\n"
    assert parse_decorated_jwt(creds) == ACC_JWT
    assert parse_decorated_jwt(f"  {ACC_JWT}\n") == ACC_JWT


@pytest.mark.parametrize(
    ("times", "hour", "ok"),
    [
        ([("09:00:00", "17:00:00")], 12, True),
        ([("09:00:00", "17:00:00")], 18, False),
        ([("22:00:00", "06:00:00")], 23, True),  # across midnight
        ([("22:00:00", "06:00:00")], 3, True),
        ([("22:00:00", "06:00:00")], 12, False),
        ([("bad", "06:00:00")], 3, False),
        ([("01:00:00", "02:00:00"), ("10:00:00", "14:00:00")], 12, True),
    ],
)
def test_connect_times(times: list[tuple[str, str]], hour: int, ok: bool) -> None:
    import datetime

    now = datetime.datetime(2030, 1, 1, hour, 0, tzinfo=datetime.UTC).timestamp()
    allowed, valid_for = _times_allowed(tuple(times), "UTC", now)
    assert allowed is ok
    assert (valid_for is not None and valid_for > 0) is ok


# -- keys ----------------------------------------------------------------------------------------


def test_keys_and_signatures() -> None:
    user = user_key()
    sig = user.sign(b"nonce")
    assert verify_signature(user.public, b"nonce", sig)
    assert not verify_signature(user.public, b"other", sig)
    assert not verify_signature(user.public, b"nonce", sig[:-1])
    assert not verify_signature("UNOTAKEY", b"nonce", sig)
    assert is_valid_public_key(user.public) and not is_valid_public_key(user.public.lower())
    corrupt = user.public[:-1] + ("A" if user.public[-1] != "A" else "B")
    assert not is_valid_public_key(corrupt)
    raw = base64.urlsafe_b64encode(sig).rstrip(b"=").decode()
    assert decode_signature(raw) == sig
    assert decode_signature(base64.b64encode(sig).decode()) == sig
    assert decode_signature("é") is None and decode_signature("a") is None


# -- fuzz ----------------------------------------------------------------------------------------

_VALUES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(allow_nan=True),
    st.text(max_size=40),
    st.lists(st.text(max_size=5), max_size=3),
    st.dictionaries(st.text(max_size=5), st.text(max_size=5), max_size=3),
)
_KEYS = st.sampled_from(["user", "pass", "auth_token", "nkey", "sig", "jwt", "name", "x"])
_CONNECTS = st.dictionaries(_KEYS, _VALUES, max_size=6)
_USER = user_key()
_AUTHENTICATORS = [
    Authenticator(Options()),
    Authenticator(Options(authorization="t")),
    Authenticator(Options(username="u", password="p")),
    Authenticator(
        Options(
            users=[User(username="u", password="p"), User(nkey=_USER.public)],
            no_auth_user="u",
        )
    ),
    Authenticator(Options(users=[User(username="CN=x")], tls_map=True)),
    Authenticator(_operator_options()),
]


@settings(max_examples=300, deadline=None)
@given(connect=_CONNECTS, which=st.integers(0, len(_AUTHENTICATORS) - 1), nonce=st.text())
def test_fuzz_never_raises(connect: dict[str, Any], which: int, nonce: str) -> None:
    result = _AUTHENTICATORS[which].check(connect, nonce)
    assert result is None or result.account


@settings(max_examples=100, deadline=None)
@given(token=st.text(alphabet="abcdefghijklmnopqrstuvwxyzAB01._-=", max_size=300))
def test_fuzz_jwt_strings(token: str) -> None:
    nonce = new_nonce()
    assert _AUTHENTICATORS[-1].check({"jwt": "eyJ" + token, "sig": "AAAA"}, nonce) is None


def test_non_mapping_connect() -> None:
    assert Authenticator(Options(authorization="t")).check(None, "") is None  # type: ignore[arg-type]
