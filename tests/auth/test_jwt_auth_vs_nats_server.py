"""Operator-mode (JWT) authentication side by side with the real nats-server.

One operator, accounts preloaded into a memory resolver, users whose JWTs are made here; every
scenario connects to the real server and goes through our Authenticator, built by our loader from
the same file. Both must let the same users in.
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest

from pynatsd.auth import Authenticator, PermissionChecker, new_nonce
from pynatsd.config import load_config
from support.jwts import (
    Key,
    account_jwt,
    account_key,
    encode_jwt,
    make_operator,
    operator_key,
    user_jwt,
    user_key,
)
from support.lineclient import LineClient
from support.natsserver import NATS_SERVER
from support.processes import run_nats_server

pytestmark = pytest.mark.skipif(not NATS_SERVER.exists(), reason="nats-server binary not found")

NOW = int(time.time())
OP = make_operator()
ACC, SIGNER, SCOPED = account_key(), account_key(), account_key()
REVOKED_USER = user_key()
ACC_REV, ACC_EXP, ACC_UNTRUSTED, ACC_BY_OP, ACC_NOBEARER = (account_key() for _ in range(5))
ACC_MISSING = account_key()
OTHER_OP = operator_key()

SCOPE = {
    "kind": "user_scope",
    "key": SCOPED.public,
    "role": "r",
    "template": {
        "pub": {"allow": ["{{name()}}.>", "_INBOX.>"]},
        "sub": {"allow": ["{{name()}}.>", "_INBOX.>"], "deny": ["{{name()}}.secret"]},
        "subs": -1,
        "data": -1,
        "payload": -1,
    },
}
ACCOUNTS = {
    ACC.public: account_jwt(
        OP.signing,
        ACC,
        signing_keys=[SIGNER.public, SCOPE],
        default_permissions={"pub": {"allow": ["dflt.>"]}, "sub": {"deny": ["nope.>"]}},
    ),
    ACC_REV.public: account_jwt(OP.signing, ACC_REV, revocations={REVOKED_USER.public: NOW + 10}),
    ACC_EXP.public: encode_jwt(
        OP.signing, ACC_EXP.public, "account", {"limits": {"conn": -1}}, exp=NOW - 100
    ),
    ACC_UNTRUSTED.public: account_jwt(OTHER_OP, ACC_UNTRUSTED),
    ACC_BY_OP.public: account_jwt(OP.key, ACC_BY_OP),
    ACC_NOBEARER.public: account_jwt(
        OP.signing, ACC_NOBEARER, limits={"conn": -1, "subs": -1, "disallow_bearer": True}
    ),
    OP.system.public: OP.system_jwt,
}


def _conf() -> str:
    preload = "\n".join(f"  {k}: {v}" for k, v in ACCOUNTS.items())
    return f"operator: {OP.jwt}\nresolver: MEMORY\nresolver_preload {{\n{preload}\n}}\n"


@dataclass
class Scenario:
    name: str
    # (nonce) -> CONNECT fields
    connect: Callable[[str], dict[str, Any]]
    allowed: bool


def _jwt_user(
    signer: Key, user: Key | None = None, sign: bool = True, urlsafe: bool = True, **kw: Any
) -> Callable[[str], dict[str, Any]]:
    user = user or user_key()
    token = user_jwt(signer, user, **kw)

    def make(nonce: str) -> dict[str, Any]:
        fields: dict[str, Any] = {"jwt": token}
        if sign:
            fields["sig"] = user.sign_nonce(nonce, urlsafe)
        return fields

    return make


def _scoped(nats: dict[str, Any]) -> Callable[[str], dict[str, Any]]:
    user = user_key()
    token = encode_jwt(SCOPED, user.public, "user", {"issuer_account": ACC.public, **nats})
    return lambda nonce: {"jwt": token, "sig": user.sign_nonce(nonce)}


def _raw(fields: dict[str, Any]) -> Callable[[str], dict[str, Any]]:
    return lambda nonce: fields


def _wrong_nonce() -> Callable[[str], dict[str, Any]]:
    user = user_key()
    token = user_jwt(ACC, user)
    return lambda nonce: {"jwt": token, "sig": user.sign_nonce(nonce + "x")}


def _tampered() -> Callable[[str], dict[str, Any]]:
    user = user_key()
    head, _, sig = user_jwt(ACC, user).split(".")
    other = user_jwt(ACC, user, pub={"allow": [">"]}).split(".")[1]
    return lambda nonce: {"jwt": f"{head}.{other}.{sig}", "sig": user.sign_nonce(nonce)}


def _other_user_sig() -> Callable[[str], dict[str, Any]]:
    token = user_jwt(ACC, user_key())
    other = user_key()
    return lambda nonce: {"jwt": token, "sig": other.sign_nonce(nonce)}


SCENARIOS = [
    Scenario("signed by the account", _jwt_user(ACC), True),
    Scenario("standard base64 signature", _jwt_user(ACC, urlsafe=False), True),
    Scenario("signed by a signing key", _jwt_user(SIGNER, issuer_account=ACC.public), True),
    Scenario("signing key without issuer_account", _jwt_user(SIGNER), False),
    Scenario("unknown signing key", _jwt_user(account_key(), issuer_account=ACC.public), False),
    Scenario("scoped signing key", _scoped({}), True),
    # nsc writes "no limits" as -1; a scoped user must leave limits out altogether.
    Scenario("scoped user with limits", _jwt_user(SCOPED, issuer_account=ACC.public), False),
    Scenario(
        "scoped user with permissions",
        _jwt_user(SCOPED, issuer_account=ACC.public, pub={"allow": [">"]}),
        False,
    ),
    Scenario("expired", _jwt_user(ACC, exp=NOW - 5), False),
    # A day ahead: NOW is taken at import, which a long parallel run may leave minutes behind.
    Scenario("not yet valid", _jwt_user(ACC, nbf=NOW + 86400), False),
    Scenario("valid window", _jwt_user(ACC, nbf=NOW - 5, exp=NOW + 3600), True),
    Scenario("no signature", _jwt_user(ACC, sign=False), False),
    Scenario("signature of another nonce", _wrong_nonce(), False),
    Scenario("signature by another key", _other_user_sig(), False),
    Scenario("tampered payload", _tampered(), False),
    Scenario("garbage jwt", _raw({"jwt": "eyJ.not.ajwt", "sig": "AAAA"}), False),
    Scenario("no jwt", _raw({"user": "x", "pass": "y"}), False),
    Scenario("nothing", _raw({}), False),
    Scenario("bearer token", _jwt_user(ACC, sign=False, bearer_token=True), True),
    Scenario("bearer refused by account", _jwt_user(ACC_NOBEARER, bearer_token=True), False),
    Scenario("account not preloaded", _jwt_user(ACC_MISSING), False),
    Scenario("account signed by the operator key", _jwt_user(ACC_BY_OP), True),
    Scenario("account of another operator", _jwt_user(ACC_UNTRUSTED), False),
    Scenario("expired account", _jwt_user(ACC_EXP), False),
    Scenario("revoked user", _jwt_user(ACC_REV, REVOKED_USER, iat=NOW - 60), False),
    Scenario("issued after revocation", _jwt_user(ACC_REV, REVOKED_USER, iat=NOW + 60), True),
    Scenario("source allowed", _jwt_user(ACC, src=["127.0.0.0/8"]), True),
    Scenario("source refused", _jwt_user(ACC, src=["10.0.0.0/8"]), False),
    Scenario(
        "connection type allowed", _jwt_user(ACC, allowed_connection_types=["STANDARD"]), True
    ),
    Scenario(
        "connection type refused", _jwt_user(ACC, allowed_connection_types=["WEBSOCKET"]), False
    ),
    Scenario("unknown connection type only", _jwt_user(ACC, allowed_connection_types=["X"]), False),
    Scenario(
        "outside connect times",
        _jwt_user(ACC, times=[{"start": "00:00:00", "end": "00:00:01"}], times_location="UTC"),
        False,
    ),
    Scenario(
        "inside connect times",
        _jwt_user(ACC, times=[{"start": "00:00:00", "end": "23:59:59"}], times_location="UTC"),
        True,
    ),
]


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    directory = tmp_path_factory.mktemp("jwt")
    conf = _conf()
    (directory / "ours.conf").write_text(conf)
    options = load_config(directory / "ours.conf").options
    with run_nats_server(conf, directory) as port:
        yield port, Authenticator(options)


@pytest.mark.parametrize("scenario", SCENARIOS, ids=[s.name for s in SCENARIOS])
def test_agrees_with_nats_server(setup, scenario: Scenario) -> None:  # type: ignore[no-untyped-def]
    port, auth = setup
    conn = LineClient(port)
    real = conn.connect(**scenario.connect(conn.info["nonce"]))
    conn.close()
    assert (real == "PONG") is scenario.allowed, real
    nonce = new_nonce()
    ours = auth.check(scenario.connect(nonce), nonce, client_host="127.0.0.1")
    assert (ours is not None) is scenario.allowed
    if ours is not None:
        assert ours.method == "jwt"
        assert ours.account in ACCOUNTS


@pytest.mark.parametrize(
    ("signer", "claims", "subjects"),
    [
        # The account's default permissions, for a user JWT without any.
        (ACC, {}, ["dflt.x", "nope.x", "other"]),
        # The user's own permissions.
        (ACC, {"pub": {"deny": ["a.>"]}, "sub": {"allow": ["a.*"]}}, ["a.b", "a.b.c", "c"]),
        # A scope template, expanded with the user's name.
        (SCOPED, {"issuer_account": ACC.public}, ["bob.x", "bob.secret", "alice.x"]),
    ],
    ids=["account defaults", "user permissions", "scope template"],
)
def test_permissions_agree(setup, signer: Key, claims: dict[str, Any], subjects: list[str]) -> None:  # type: ignore[no-untyped-def]
    port, auth = setup
    user = user_key()
    nats = {"subs": -1, "data": -1, "payload": -1, **claims}
    if signer is SCOPED:
        nats = {"issuer_account": ACC.public}
    token = encode_jwt(signer, user.public, "user", nats, name="bob")
    real = []
    probe = LineClient(port)
    assert probe.connect(jwt=token, sig=user.sign_nonce(probe.info["nonce"])) == "PONG"
    for i, s in enumerate(subjects):
        real.append(probe.exchange(f"SUB {s} {i}\r\n") == "PONG")
    for s in subjects:
        real.append(probe.exchange(f"PUB {s} 0\r\n\r\n") == "PONG")
    probe.close()
    nonce = new_nonce()
    result = auth.check({"jwt": token, "sig": user.sign_nonce(nonce)}, nonce)
    assert result is not None
    checker = PermissionChecker(result.permissions)
    ours = [checker.can_subscribe(s) for s in subjects] + [checker.can_publish(s) for s in subjects]
    assert ours == real


def test_user_jwt_without_limits_may_not_subscribe(setup) -> None:  # type: ignore[no-untyped-def]
    """A v2 user JWT without `subs` allows 0 subscriptions: nats-server finds the client at its
    limit as it registers (applyAccountLimits), sends -ERR 'maximum subscriptions exceeded'
    from another goroutine (before or after the PONG of the CONNECT's PING) and closes the
    connection 20 ms later. So: the error comes, the connection ends, whatever the order."""
    port, auth = setup
    user = user_key()
    token = encode_jwt(ACC, user.public, "user", {})
    probe = LineClient(port)
    opts = {"verbose": False, "pedantic": False, "protocol": 1, "headers": True}
    opts |= {"jwt": token, "sig": user.sign_nonce(probe.info["nonce"])}
    probe.send(f"CONNECT {json.dumps(opts)}\r\nPING\r\n")
    lines = []
    with contextlib.suppress(ConnectionError, OSError):
        while True:
            lines.append(probe.read_line())
    probe.close()
    errors = [line for line in lines if line.startswith("-ERR")]
    assert errors == ["-ERR 'maximum subscriptions exceeded'"], lines
    nonce = new_nonce()
    result = auth.check({"jwt": token, "sig": user.sign_nonce(nonce)}, nonce)
    assert result is not None and result.max_subscriptions == 0 and result.max_payload == 0


def test_nonce_in_info(setup) -> None:  # type: ignore[no-untyped-def]
    port, auth = setup
    conn = LineClient(port)
    assert conn.info["auth_required"] and len(conn.info["nonce"]) == len(new_nonce())
    conn.close()
    assert auth.auth_required and auth.nonce_required


def test_expiry_is_reported(setup) -> None:  # type: ignore[no-untyped-def]
    _, auth = setup
    user = user_key()
    nonce = new_nonce()
    # From the test's own clock: NOW is taken when the module is imported, which a long run
    # may leave minutes behind.
    expires = int(time.time()) + 100
    result = auth.check(
        {"jwt": user_jwt(ACC, user, exp=expires), "sig": user.sign_nonce(nonce)}, nonce
    )
    assert result is not None and result.expires_at == expires
    assert result.account_config is not None and result.account_config.name == ACC.public
    assert result.log_label == f"jwt:{user.public}"
    assert auth.lookup_account(ACC.public) is not None
    assert auth.lookup_account(ACC_MISSING.public) is None
