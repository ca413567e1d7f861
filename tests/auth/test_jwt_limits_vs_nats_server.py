"""Operator-mode accounts over a connection's life, side by side with the real nats-server:
credentials that expire while connected (the user's JWT, the account's JWT), JetStream enabled
by an account JWT's `tiered_limits`, and `subs: 0` in a user or account JWT.

Both servers run as processes from the same configuration file (one operator, accounts in a
memory resolver); every scenario runs against both, and what the clients see must agree.
"""

from __future__ import annotations

import json
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from support.jwts import (
    NO_ACCOUNT_LIMITS,
    Key,
    account_jwt,
    account_key,
    encode_jwt,
    make_operator,
    user_jwt,
    user_key,
)
from support.lineclient import LineClient
from support.natsserver import NATS_SERVER
from support.ports import free_port
from support.processes import PYNATSD, ServerProcess, start_server

pytestmark = pytest.mark.skipif(not NATS_SERVER.exists(), reason="nats-server binary not found")

OP = make_operator()
PLAIN, EXPIRING, TIERED, R3_ONLY, NO_SUBS = (account_key() for _ in range(5))
# The account JWT's lifetime, counted from when the servers are configured: long enough for
# both servers to start and every client to connect first.
ACCOUNT_LIFETIME = 10
R1 = {"mem_storage": 1 << 20, "disk_storage": -1, "streams": 2, "consumer": -1}


def _accounts(now: int) -> dict[str, str]:
    tiered = {**NO_ACCOUNT_LIMITS, "tiered_limits": {"R1": R1, "R3": {"disk_storage": 1 << 30}}}
    return {
        PLAIN.public: account_jwt(OP.signing, PLAIN),
        EXPIRING.public: encode_jwt(
            OP.signing,
            EXPIRING.public,
            "account",
            {"limits": dict(NO_ACCOUNT_LIMITS)},
            name="expiring",
            exp=now + ACCOUNT_LIFETIME,
        ),
        TIERED.public: account_jwt(OP.signing, TIERED, limits=tiered),
        R3_ONLY.public: account_jwt(
            OP.signing,
            R3_ONLY,
            limits={**NO_ACCOUNT_LIMITS, "tiered_limits": {"R3": {"disk_storage": 1 << 30}}},
        ),
        NO_SUBS.public: account_jwt(OP.signing, NO_SUBS, limits={**NO_ACCOUNT_LIMITS, "subs": 0}),
        OP.system.public: OP.system_jwt,
    }


@dataclass
class Servers:
    # name ("nats-server", "pynatsd") -> (client port, monitoring port)
    ports: dict[str, tuple[int, int]]
    account_expires: int


def _conf(directory: Path, accounts: dict[str, str]) -> str:
    preload = "\n".join(f"  {k}: {v}" for k, v in accounts.items())
    return (
        f"operator: {OP.jwt}\nresolver: MEMORY\nresolver_preload {{\n{preload}\n}}\n"
        f"jetstream {{ store_dir: {json.dumps(str(directory))} }}\n"
    )


@pytest.fixture(scope="module")
def servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Servers]:
    now = int(time.time())
    procs: list[ServerProcess] = []
    ports: dict[str, tuple[int, int]] = {}
    try:
        for name, cmd in (("nats-server", [str(NATS_SERVER)]), ("pynatsd", list(PYNATSD))):
            directory = tmp_path_factory.mktemp(name)
            path = directory / "server.conf"
            path.write_text(_conf(directory / "js", _accounts(now)))
            http = free_port()
            procs.append(start_server(cmd, ["-c", str(path), "-m", str(http)]))
            ports[name] = (procs[-1].port, http)
        yield Servers(ports, now + ACCOUNT_LIFETIME)
    finally:
        for proc in procs:
            proc.stop()


def _login(port: int, signer: Key, **claims: Any) -> tuple[LineClient, str]:
    user = user_key()
    token = user_jwt(signer, user, **claims)
    conn = LineClient(port)
    return conn, conn.connect(jwt=token, sig=user.sign_nonce(conn.info["nonce"]))


def _lines_until_closed(conn: LineClient, timeout: float) -> list[str]:
    """Every line the server sends until it closes the connection (INFO and PING left out)."""
    lines: list[str] = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            line = conn.read_line(max(deadline - time.monotonic(), 0.01))
        except (ConnectionError, OSError):
            return lines
        if not line.startswith(("INFO ", "PING")):
            lines.append(line)
    raise AssertionError(f"still open after {timeout}s: {lines}")


def _closed_reasons(http: int) -> list[str]:
    url = f"http://127.0.0.1:{http}/connz?state=closed"
    with urllib.request.urlopen(url, timeout=5) as resp:
        connz = json.loads(resp.read())
    return [c.get("reason", "") for c in connz["connections"]]


def _request(conn: LineClient, subject: str, body: dict[str, Any] | None = None) -> Any:
    data = json.dumps(body).encode() if body is not None else b""
    conn.send(f"SUB _INBOX.r 99\r\nPUB {subject} _INBOX.r {len(data)}\r\n")
    conn.sock.sendall(data + b"\r\n")
    while True:
        line = conn.read_line()
        if line.startswith("MSG _INBOX.r"):
            payload = conn.read_line()
            conn.send("UNSUB 99\r\n")
            return json.loads(payload)


# -- expiry while connected -------------------------------------------------------------------


def test_user_and_account_expiry(servers: Servers) -> None:
    """A user JWT that expires first: "User Authentication Expired"; an account JWT that
    expires first (its users' JWTs later or never): "Account Authentication Expired" to every
    client of the account. Both close with the reason "Authentication Expired"."""
    seen: dict[str, dict[str, Any]] = {}
    user_exp = int(time.time()) + 2
    clients = {}
    for name, (port, _) in servers.ports.items():
        clients[name] = {
            "user": _login(port, PLAIN, exp=user_exp),
            "account": _login(port, EXPIRING),
            "account before user": _login(port, EXPIRING, exp=servers.account_expires + 60),
        }
    for name, conns in clients.items():
        seen[name] = {}
        for label, (_conn, answer) in conns.items():
            assert answer == "PONG", (name, label, answer)
        for label, (conn, _) in conns.items():
            timeout = max(servers.account_expires - time.time(), 0) + 4
            # Each closes by its expiry (whole seconds), give or take a few.
            seen[name][label] = _lines_until_closed(conn, timeout)
            conn.close()
        seen[name]["closed"] = sorted(_closed_reasons(servers.ports[name][1]))
    assert seen["pynatsd"] == seen["nats-server"]
    assert seen["nats-server"]["user"] == ["-ERR 'User Authentication Expired'"]
    assert seen["nats-server"]["account"] == ["-ERR 'Account Authentication Expired'"]
    assert seen["nats-server"]["closed"].count("Authentication Expired") == 3


# -- JetStream by tiered limits ----------------------------------------------------------------


def test_tiered_limits_enable_jetstream(servers: Servers) -> None:
    """`tiered_limits` with storage in a tier enables JetStream; $JS.API.INFO shows zeros at
    the top level and each tier with its limits and usage."""
    seen: dict[str, list[Any]] = {}
    for name, (port, _) in servers.ports.items():
        conn, answer = _login(port, TIERED)
        assert answer == "PONG"
        before = _request(conn, "$JS.API.INFO")
        created = _request(
            conn, "$JS.API.STREAM.CREATE.S", {"name": "S", "subjects": ["s"], "storage": "memory"}
        )
        stored = _request(conn, "s", {"hello": 1})  # waits for the PubAck
        after = _request(conn, "$JS.API.INFO")
        conn.close()
        r3, answer = _login(port, R3_ONLY)
        assert answer == "PONG"
        refused = _request(r3, "$JS.API.STREAM.CREATE.T", {"name": "T", "subjects": ["t"]})
        r3.close()
        for reply in (before, after):
            reply["api"].pop("total", None)
        seen[name] = [before, created.get("error", "ok"), stored, after, refused]
    assert seen["pynatsd"] == seen["nats-server"]
    tiers = seen["nats-server"][3]["tiers"]
    assert tiers["R1"]["streams"] == 1 and tiers["R1"]["limits"]["max_streams"] == 2


# -- subs: 0 -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("label", "account", "claims"),
    [
        ("user subs 0", PLAIN, {"subs": 0}),
        ("account subs 0", NO_SUBS, {}),
    ],
)
def test_zero_subscriptions_ends_the_connection(
    servers: Servers, label: str, account: Key, claims: dict[str, Any]
) -> None:
    """A limit of 0 (not -1, "unlimited") leaves the client at its limit as it registers:
    nats-server sends -ERR 'maximum subscriptions exceeded' and closes it (the -ERR may come
    before or after the PONG of the CONNECT's PING: it is sent from another goroutine)."""
    seen = {}
    for name, (port, _) in servers.ports.items():
        user = user_key()
        token = user_jwt(account, user, **claims)
        conn = LineClient(port)
        opts = {"verbose": False, "pedantic": False, "protocol": 1, "headers": True}
        opts |= {"jwt": token, "sig": user.sign_nonce(conn.info["nonce"])}
        conn.send(f"CONNECT {json.dumps(opts)}\r\nPING\r\n")
        lines = [line for line in _lines_until_closed(conn, 5) if line != "PONG"]
        conn.close()
        seen[name] = lines
    assert seen["pynatsd"] == seen["nats-server"] == ["-ERR 'maximum subscriptions exceeded'"]


# -- $SYS.REQ.USER.INFO for a JWT user ----------------------------------------------------------


def test_user_info_of_a_jwt_user(servers: Servers) -> None:
    """The user's key and name, the account's key and name, the permissions the user JWT
    gives, and the time left before the JWT expires (nanoseconds, whole seconds)."""
    seen = {}
    for name, (port, _) in servers.ports.items():
        user = user_key()
        exp = int(time.time()) + 120
        claims = {"pub": {"allow": ["$SYS.REQ.USER.INFO"]}, "sub": {"deny": ["b"]}}
        token = encode_jwt(PLAIN, user.public, "user", {**claims, "subs": -1}, name="bob", exp=exp)
        conn = LineClient(port)
        assert conn.connect(jwt=token, sig=user.sign_nonce(conn.info["nonce"])) == "PONG"
        data = _request(conn, "$SYS.REQ.USER.INFO")["data"]
        conn.close()
        assert data.pop("user") == user.public
        left = data.pop("expires")
        assert left % 1_000_000_000 == 0 and 115e9 <= left <= 120e9, left
        seen[name] = data
    assert seen["pynatsd"] == seen["nats-server"]
    assert seen["nats-server"] == {
        "account": PLAIN.public,
        "account_name": "account",  # the JWT name support.jwts gives accounts
        "user_name": "bob",
        "permissions": {"publish": {"allow": ["$SYS.REQ.USER.INFO"]}, "subscribe": {"deny": ["b"]}},
    }


def test_operator_system_account_serves_requests(servers: Servers) -> None:
    """In operator mode the operator's system account is the one the server's services
    (and events) live in: its users reach $SYS.REQ.SERVER.*; other accounts do not."""
    seen = {}
    for name, (port, _) in servers.ports.items():
        system, answer = _login(port, OP.system)
        assert answer == "PONG"
        idz = _request(system, "$SYS.REQ.SERVER.PING.IDZ")
        accountz = _request(system, "$SYS.REQ.SERVER.PING.ACCOUNTZ")["data"]
        system.close()
        other, _ = _login(port, PLAIN)
        other.send("SUB _INBOX.r 1\r\nPUB $SYS.REQ.SERVER.PING.IDZ _INBOX.r 0\r\n\r\nPING\r\n")
        lines = []
        while (line := other.read_line()) != "PONG":
            lines.append(line)
        other.close()
        seen[name] = (sorted(idz), accountz["system_account"], [x for x in lines if "MSG" in x])
    assert seen["pynatsd"] == seen["nats-server"] == (["host", "id", "name"], OP.system.public, [])
