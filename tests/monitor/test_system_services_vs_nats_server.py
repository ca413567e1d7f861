"""System account services ($SYS.REQ.SERVER.*, $SYS.REQ.ACCOUNT.*, $SYS.REQ.USER.INFO) side by
side with the real nats-server.

Both servers run as processes from one configuration (a system account, an account with
JetStream and permissions); the same requests go to both, and the replies must agree: the same
envelope, the same keys, the same values where they do not depend on the run (ids, times,
sizes and subscription counts are normalised away).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import nats
import pytest

from support.lineclient import LineClient
from support.natsserver import NATS_SERVER
from support.processes import PYNATSD, ServerProcess, start_server

pytestmark = pytest.mark.skipif(not NATS_SERVER.exists(), reason="nats-server binary not found")

CONF = """
accounts {
  SYS: { users: [{user: sys, password: sys}] }
  A: {
    users: [
      {user: a, password: a, permissions: {publish: {deny: "x.>"}, subscribe: {allow: ">"}}}
      {
        user: r, password: r
        permissions: {
          publish: "$SYS.REQ.USER.INFO", subscribe: "_INBOX.>"
          allow_responses: {max: 3, expires: "5s"}
        }
      }
    ]
    jetstream: enabled
  }
}
system_account: SYS
jetstream { store_dir: %s }
"""
# Run-dependent values: ids, times, sizes, ports, and counts of the servers' own subscriptions
# (nats-server's JetStream and system imports are not pynatsd's).
VOLATILE = {
    "id",
    "cid",
    "name",
    "server_id",
    "server_name",
    "seq",
    "time",
    "now",
    "timestamp",
    "start",
    "last_activity",
    "uptime",
    "idle",
    "rtt",
    "port",
    "bytes",
    "out_bytes",
    "mem",
    "cpu",
    "num_subscriptions",
    "subscriptions",
    "update_time",
    "sublist_stats",
    "max_memory",
    "max_storage",
}
SERVER_SERVICES = [
    "STATSZ",
    "VARZ",
    "CONNZ",
    "SUBSZ",
    "JSZ",
    "HEALTHZ",
    "ACCOUNTZ",
    "ROUTEZ",
    "GATEWAYZ",
    "LEAFZ",
    "RAFTZ",
    "PROFILEZ",
]
ACCOUNT_SERVICES = ["SUBSZ", "CONNZ", "LEAFZ", "JSZ", "INFO", "STATZ", "CONNS"]
# Keys nats-server has that pynatsd leaves out, by request: /varz details of Go's runtime and
# listeners pynatsd does not have, the account's import list (pynatsd's /accountz has none).
KNOWN_MISSING = {"INFO": {"imports"}}


@pytest.fixture(scope="module")
def servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, ServerProcess]]:
    procs: dict[str, ServerProcess] = {}
    try:
        for name, cmd in (("nats-server", [str(NATS_SERVER)]), ("pynatsd", list(PYNATSD))):
            directory: Path = tmp_path_factory.mktemp(name)
            path = directory / "server.conf"
            path.write_text(CONF % json.dumps(str(directory / "js")))
            procs[name] = start_server(cmd, ["-c", str(path)])
        yield procs
    finally:
        for proc in procs.values():
            proc.stop()


def _normalised(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: "*" if k in VOLATILE else _normalised(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_normalised(v) for v in value]
    return value


def _keys(value: Any) -> Any:
    return sorted(value) if isinstance(value, dict) else type(value).__name__


async def _request(nc: nats.NATS, subject: str, body: bytes = b"") -> Any:
    try:
        msg = await nc.request(subject, body, timeout=0.5)
    except nats.errors.TimeoutError:
        return "no reply"
    return json.loads(msg.data)


async def _exchange(port: int) -> dict[str, Any]:
    """Every request, from the system user and from a user of account A."""
    system = await nats.connect(f"nats://sys:sys@127.0.0.1:{port}")
    user = await nats.connect(f"nats://a:a@127.0.0.1:{port}", name="alpha")
    await user.subscribe("foo.>")
    await user.flush()
    out: dict[str, Any] = {}
    out["user info (account)"] = await _request(user, "$SYS.REQ.USER.INFO")
    out["user info (system)"] = await _request(system, "$SYS.REQ.USER.INFO")
    responder = await nats.connect(f"nats://r:r@127.0.0.1:{port}")
    out["user info (allow_responses)"] = await _request(responder, "$SYS.REQ.USER.INFO")
    await responder.close()
    idz = await _request(system, "$SYS.REQ.SERVER.PING.IDZ")
    out["IDZ"] = idz
    for name in SERVER_SERVICES:
        out[f"PING.{name}"] = await _request(system, f"$SYS.REQ.SERVER.PING.{name}")
        out[f"<id>.{name}"] = await _request(system, f"$SYS.REQ.SERVER.{idz['id']}.{name}")
    out["PING"] = await _request(system, "$SYS.REQ.SERVER.PING")
    out["unknown profile"] = await _request(
        system, "$SYS.REQ.SERVER.PING.PROFILEZ", b'{"name":"nothing"}'
    )
    out["bad json"] = await _request(system, "$SYS.REQ.SERVER.PING.VARZ", b"{bad")
    out["truncated json"] = await _request(system, "$SYS.REQ.SERVER.PING.CONNZ", b'{"a":1')
    out["other server"] = await _request(
        system, "$SYS.REQ.SERVER.PING.VARZ", b'{"server_name":"elsewhere"}'
    )
    for name in ACCOUNT_SERVICES:
        out[f"ACCOUNT.A.{name}"] = await _request(system, f"$SYS.REQ.ACCOUNT.A.{name}")
    out["unknown account INFO"] = await _request(system, "$SYS.REQ.ACCOUNT.NOPE.INFO")
    out["unknown account CONNZ"] = await _request(system, "$SYS.REQ.ACCOUNT.NOPE.CONNZ")
    for subject in (
        "$SYS.REQ.ACCOUNT.PING.STATZ",
        "$SYS.REQ.ACCOUNT.PING.CONNZ",
        "$SYS.REQ.SERVER.PING.CONNZ",
    ):
        out[f"account: {subject}"] = await _request(user, subject)
        out[f"system: {subject}"] = await _request(system, subject)
    await user.close()
    await system.close()
    return out


@pytest.fixture(scope="module")
def replies(servers: dict[str, ServerProcess]) -> dict[str, dict[str, Any]]:
    return {name: asyncio.run(_exchange(proc.port)) for name, proc in servers.items()}


def test_same_requests_answered(replies: dict[str, dict[str, Any]]) -> None:
    """Both servers answer (or leave unanswered) the same requests."""
    answered = {
        name: sorted(k for k, v in r.items() if v != "no reply") for name, r in replies.items()
    }
    assert answered["pynatsd"] == answered["nats-server"]
    assert replies["nats-server"]["other server"] == "no reply"


def test_envelopes_and_keys_agree(replies: dict[str, dict[str, Any]]) -> None:
    real, ours = replies["nats-server"], replies["pynatsd"]
    for request, reply in real.items():
        if not isinstance(reply, dict):
            continue
        mine = ours[request]
        assert _keys(mine) == _keys(reply), request
        server = reply.get("server")
        if server is not None:
            assert _normalised(mine["server"]) == _normalised(server), request
        for part in ("data", "statsz"):
            if isinstance(reply.get(part), dict):
                missing = KNOWN_MISSING.get(request.rsplit(".", 1)[-1], set())
                expected = sorted(set(reply[part]) - missing)
                assert _keys(mine[part]) == expected, (request, part)


@pytest.mark.parametrize(
    "request_name",
    [
        "user info (account)",
        "user info (system)",
        "user info (allow_responses)",
        "bad json",
        "truncated json",
        "PING.HEALTHZ",
        "PING.RAFTZ",
        "PING.PROFILEZ",
        "unknown profile",
        "PING.ROUTEZ",
        "PING.LEAFZ",
        "ACCOUNT.A.STATZ",
        "ACCOUNT.A.CONNS",
        "ACCOUNT.A.JSZ",
        "ACCOUNT.A.LEAFZ",
        "unknown account INFO",
        "unknown account CONNZ",
        "account: $SYS.REQ.ACCOUNT.PING.STATZ",
        "account: $SYS.REQ.ACCOUNT.PING.CONNZ",
        "account: $SYS.REQ.SERVER.PING.CONNZ",
        "system: $SYS.REQ.ACCOUNT.PING.CONNZ",
    ],
)
def test_values_agree(replies: dict[str, dict[str, Any]], request_name: str) -> None:
    """Replies whose content does not depend on the run are the same once normalised."""
    real = _normalised(replies["nats-server"][request_name])
    ours = _normalised(replies["pynatsd"][request_name])
    assert ours == real


def test_user_info(replies: dict[str, dict[str, Any]]) -> None:
    data = replies["nats-server"]["user info (account)"]["data"]
    assert data == {
        "user": "a",
        "account": "A",
        "account_name": "A",
        "permissions": {"publish": {"deny": ["x.>"]}, "subscribe": {"allow": [">"]}},
    }


async def _kick_and_ldm(port: int) -> dict[str, Any]:
    """$SYS.REQ.SERVER.<id>.LDM and .KICK on a client found through CONNZ."""
    system = await nats.connect(f"nats://sys:sys@127.0.0.1:{port}")
    victim = await asyncio.to_thread(LineClient, port)
    login = {"user": "a", "pass": "a", "name": "victim"}
    assert await asyncio.to_thread(lambda: victim.connect(**login)) == "PONG"
    server_id = (await _request(system, "$SYS.REQ.SERVER.PING.IDZ"))["id"]
    connz = await _request(system, "$SYS.REQ.SERVER.PING.CONNZ")
    cid = next(c["cid"] for c in connz["data"]["connections"] if c.get("name") == "victim")
    out: dict[str, Any] = {}
    for command in ("LDM", "KICK"):
        subject = f"$SYS.REQ.SERVER.{server_id}.{command}"
        out[f"{command} without body"] = await _request(system, subject)
        out[f"{command} unknown"] = await _request(system, subject, b'{"cid": 999999}')
        out[command] = await _request(system, subject, json.dumps({"cid": cid}).encode())
        if command == "LDM":
            # In accounts mode an INFO may come first (sent after CONNECT); the LDM one follows.
            for _ in range(3):
                info = json.loads((await asyncio.to_thread(victim.read_line))[5:])
                if "ldm" in info:
                    out["LDM info"] = list(info)
                    break
    # Lines after the LDM INFO: the INFO lines' keys (their values are the servers' own).
    rest = await asyncio.to_thread(_read_rest, victim)
    out["victim after KICK"] = [
        sorted(json.loads(line[5:])) if line.startswith("INFO ") else line for line in rest
    ]
    closed = await _request(system, "$SYS.REQ.SERVER.PING.CONNZ", b'{"state": 1}')
    out["closed reason"] = [
        c["reason"] for c in closed["data"]["connections"] if c.get("name") == "victim"
    ]
    await system.close()
    return out


def _read_rest(conn: LineClient) -> list[str]:
    lines = []
    try:
        while True:
            lines.append(conn.read_line(2))
    except (ConnectionError, OSError):
        return lines


def test_kick_and_ldm(servers: dict[str, ServerProcess]) -> None:
    seen = {name: asyncio.run(_kick_and_ldm(proc.port)) for name, proc in servers.items()}
    real, ours = seen["nats-server"], seen["pynatsd"]
    assert _normalised(ours) == _normalised(real)
    assert "ldm" in real["LDM info"]
    assert real["KICK without body"] == "no reply"
    assert real["closed reason"] == ["Kicked"]
