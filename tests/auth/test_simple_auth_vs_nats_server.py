"""Tokens, users, passwords (bcrypt too), nkeys and no_auth_user, side by side with nats-server."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import bcrypt
import pytest

from pynatsd.auth import Authenticator, new_nonce
from pynatsd.config import load_config
from support.jwts import user_key
from support.lineclient import LineClient
from support.natsserver import NATS_SERVER
from support.processes import run_nats_server

pytestmark = pytest.mark.skipif(not NATS_SERVER.exists(), reason="nats-server binary not found")


def _hash(password: str) -> str:
    # Cost 4 (the minimum) keeps the tests fast; the server reads the cost from the hash.
    return bcrypt.hashpw(password.encode(), bcrypt.gensalt(4)).decode()


NKEY, OTHER = user_key(), user_key()
TOKEN_HASH, PASS_HASH, B_HASH = _hash("s3cr3t"), _hash("p"), _hash("pb")

Connect = Callable[[str], dict[str, Any]]


def fields(**kw: Any) -> Connect:
    return lambda nonce: kw


def nkey(key: Any = NKEY, signer: Any = None, urlsafe: bool = True, sig: bool = True) -> Connect:
    def make(nonce: str) -> dict[str, Any]:
        out: dict[str, Any] = {"nkey": key.public}
        if sig:
            out["sig"] = (signer or key).sign_nonce(nonce, urlsafe)
        return out

    return make


CASES: list[tuple[str, str, list[tuple[str, Connect, bool]]]] = [
    (
        "token",
        "authorization { token: s3cr3t }",
        [
            ("right", fields(auth_token="s3cr3t"), True),
            ("wrong", fields(auth_token="nope"), False),
            ("missing", fields(), False),
            ("as password", fields(user="x", **{"pass": "s3cr3t"}), False),
            ("with a user too", fields(user="x", auth_token="s3cr3t"), True),
        ],
    ),
    (
        "bcrypt token",
        f'authorization {{ token: "{TOKEN_HASH}" }}',
        [
            ("right", fields(auth_token="s3cr3t"), True),
            ("the hash itself", fields(auth_token=TOKEN_HASH), False),
            ("wrong", fields(auth_token="s3cr3"), False),
        ],
    ),
    (
        "single user",
        "authorization { user: u, password: p }",
        [
            ("right", fields(user="u", **{"pass": "p"}), True),
            ("wrong password", fields(user="u", **{"pass": "q"}), False),
            ("wrong user", fields(user="v", **{"pass": "p"}), False),
            ("no password", fields(user="u"), False),
            ("token", fields(auth_token="p"), False),
        ],
    ),
    (
        "single user bcrypt",
        f'authorization {{ user: u, password: "{PASS_HASH}" }}',
        [
            ("right", fields(user="u", **{"pass": "p"}), True),
            ("wrong", fields(user="u", **{"pass": "P"}), False),
        ],
    ),
    (
        "users",
        f"""authorization {{ users: [
              {{user: a, password: pa}}
              {{user: b, password: "{B_HASH}"}}
              {{user: w, password: pw, allowed_connection_types: ["WEBSOCKET"]}}
              {{user: s, password: ps, allowed_connection_types: ["STANDARD", "MQTT"]}}
              {{nkey: {NKEY.public}}}
            ] }}
            no_auth_user: a""",
        [
            ("plain", fields(user="a", **{"pass": "pa"}), True),
            ("plain wrong", fields(user="a", **{"pass": "pb"}), False),
            ("bcrypt", fields(user="b", **{"pass": "pb"}), True),
            ("bcrypt wrong", fields(user="b", **{"pass": "pa"}), False),
            ("unknown user", fields(user="z", **{"pass": "pa"}), False),
            ("websocket only", fields(user="w", **{"pass": "pw"}), False),
            ("standard allowed", fields(user="s", **{"pass": "ps"}), True),
            ("no credentials: no_auth_user", fields(), True),
            ("only a password", fields(**{"pass": "pa"}), False),
            ("nkey raw url sig", nkey(), True),
            ("nkey std sig", nkey(urlsafe=False), True),
            ("nkey missing sig", nkey(sig=False), False),
            ("nkey other signer", nkey(signer=OTHER), False),
            ("unknown nkey", nkey(OTHER), False),
            ("nkey garbage sig", lambda n: {"nkey": NKEY.public, "sig": "!!"}, False),
            ("nkey not a key", lambda n: {"nkey": "UABC", "sig": "AAAA"}, False),
        ],
    ),
    (
        "no_auth_user with a bcrypt password",
        f"""authorization {{ users: [{{user: b, password: "{B_HASH}"}}] }}
            no_auth_user: b""",
        [
            ("no credentials", fields(), False),
            ("explicit", fields(user="b", **{"pass": "pb"}), True),
        ],
    ),
    (
        "nkey no_auth_user",
        f"""authorization {{ users: [{{nkey: {NKEY.public}}}, {{user: a, password: pa}}] }}
            no_auth_user: {NKEY.public}""",
        [
            ("no credentials", fields(), True),
            ("user", fields(user="a", **{"pass": "pa"}), True),
            ("bad user", fields(user="a", **{"pass": "x"}), False),
        ],
    ),
    (
        "account users",
        """accounts {
             A: { users: [{user: a, password: pa}] }
             B: { users: [{user: b, password: pb}] }
           }
           no_auth_user: b""",
        [
            ("a", fields(user="a", **{"pass": "pa"}), True),
            ("none", fields(), True),
            ("wrong", fields(user="b", **{"pass": "pa"}), False),
        ],
    ),
]

PARAMS = [pytest.param(conf, rows, id=name) for name, conf, rows in CASES]


@pytest.mark.parametrize(("conf", "rows"), PARAMS)
def test_agrees_with_nats_server(
    conf: str, rows: list[tuple[str, Connect, bool]], tmp_path: Path
) -> None:
    (tmp_path / "ours.conf").write_text(conf)
    auth = Authenticator(load_config(tmp_path / "ours.conf").options)
    mismatches = []
    with run_nats_server(conf, tmp_path) as port:
        for name, make, allowed in rows:
            conn = LineClient(port)
            real = conn.connect(**make(conn.info.get("nonce", ""))) == "PONG"
            conn.close()
            nonce = new_nonce()
            ours = auth.check(make(nonce), nonce) is not None
            if not real == ours == allowed:
                mismatches.append((name, real, ours, allowed))
    assert mismatches == []
