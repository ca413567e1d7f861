"""Subject mappings side by side with nats-server: weighted and random destinations in the
same proportions, the mappings /accountz shows, and mappings changed by a reload.

(Deterministic mappings, byte for byte, are differential cases in
tests/integration/test_differential.py; configuration errors in
tests/config/test_mappings_vs_nats_server.py.)
"""

from __future__ import annotations

import json
import signal
import socket
import sys
import time
import urllib.request
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from support.jwts import Key, account_jwt, account_key, make_operator, user_jwt, user_key
from support.natsserver import nats_server_binary
from support.ports import LOOPBACK, free_port
from support.processes import ServerProcess, start_server

NATS_SERVER = nats_server_binary()
pytestmark = pytest.mark.skipif(NATS_SERVER is None, reason="nats-server binary not found")
SRC = Path(__file__).resolve().parents[2] / "src"
N = 2000

WEIGHTED = """
mappings {
  w: [{destination: w.a, weight: 60%}, {destination: w.b, weight: 30%}]
  "r.*": "r.{{random(4)}}.$1"
  "lossy": [{destination: lossy.kept, weight: 50%}, {destination: lossy, weight: 0%}]
}
no_auth_user: g
authorization { users = [{user: g, password: p}] }
accounts {
  A {
    users = [{user: a, password: p}]
    mappings { "in.*": [{destination: "x.$1", weight: 25}, {destination: "y.$1", weight: 75}] }
  }
}
"""


@contextmanager
def servers(conf: str, tmp: Path, monitor: bool = False) -> Iterator[dict[str, ServerProcess]]:
    """The same configuration on nats-server and on pynatsd."""
    path = tmp / "mappings.conf"
    path.write_text(conf)
    started: dict[str, ServerProcess] = {}
    try:
        for name, cmd in (("nats-server", [str(NATS_SERVER)]), ("pynatsd", _pynatsd())):
            args = ["-c", str(path)]
            if monitor:
                args += ["-m", str(free_port())]
            started[name] = start_server(cmd, args, env=_env())
        yield started
    finally:
        for server in started.values():
            server.stop()


def _pynatsd() -> list[str]:
    return [sys.executable, "-m", "pynatsd"]


def _env() -> dict[str, str]:
    import os

    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(SRC), env.get("PYTHONPATH")) if p)
    return env


class Client:
    def __init__(
        self, port: int, jwt_user: tuple[str, Key] | None = None, **connect: object
    ) -> None:
        """A client subscribed to `>`; `jwt_user`: a user JWT and its key, for operator mode."""
        self.sock = socket.create_connection((LOOPBACK, port), timeout=10)
        self.buf = b""
        info = self._line()
        assert info.startswith(b"INFO ")
        opts = {"verbose": False, "pedantic": False, "headers": True, **connect}
        if jwt_user is not None:
            nonce = json.loads(info[5:])["nonce"]
            opts.update(jwt=jwt_user[0], sig=jwt_user[1].sign_nonce(nonce))
        self.sock.sendall(f"CONNECT {json.dumps(opts)}\r\nSUB > 1\r\nPING\r\n".encode())
        assert self.until_pong() == Counter()

    def _line(self) -> bytes:
        while b"\r\n" not in self.buf:
            chunk = self.sock.recv(1 << 16)
            if not chunk:
                raise ConnectionError("closed")
            self.buf += chunk
        line, self.buf = self.buf.split(b"\r\n", 1)
        return line

    def until_pong(self) -> Counter[str]:
        seen: Counter[str] = Counter()
        while (line := self._line()) != b"PONG":
            if line.startswith(b"MSG "):
                seen[line.split()[1].decode()] += 1
                self._line()
            else:
                seen[line.decode()] += 1
        return seen

    def publish(self, subjects: list[str]) -> Counter[str]:
        """Publish one message on each subject (the same PUB line many times over), then
        what came back."""
        data = b"".join(b"PUB %s 1\r\nx\r\n" % s.encode() for s in subjects)
        self.sock.sendall(data + b"PING\r\n")
        return self.until_pong()

    def close(self) -> None:
        self.sock.close()


def _shares(counts: Counter[str], total: int) -> dict[str, float]:
    return {k: v / total for k, v in counts.items()}


def _close_enough(a: dict[str, float], b: dict[str, float], tolerance: float) -> bool:
    return set(a) == set(b) and all(abs(a[k] - b[k]) <= tolerance for k in a)


def test_weighted_mappings_split_alike(tmp_path: Path) -> None:
    observed: dict[str, dict[str, dict[str, float]]] = {}
    with servers(WEIGHTED, tmp_path) as started:
        for name, server in started.items():
            c = Client(server.port)
            a = Client(server.port, **{"user": "a", "pass": "p"})
            observed[name] = {
                "w": _shares(c.publish(["w"] * N), N),
                "random": _shares(c.publish(["r.k"] * N), N),
                "lossy": _shares(c.publish(["lossy"] * N), N),
                "account": _shares(a.publish(["in.z"] * N), N),
            }
            c.close()
            a.close()
    expected = {
        "w": {"w.a": 0.6, "w.b": 0.3, "w": 0.1},
        "random": {f"r.{i}.k": 0.25 for i in range(4)},
        "lossy": {"lossy.kept": 0.5},
        "account": {"x.z": 0.25, "y.z": 0.75},
    }
    for name, shares in observed.items():
        for what, want in expected.items():
            # Binomial spread over 2,000 draws: 0.05 is over four standard deviations.
            assert _close_enough(shares[what], want, 0.05), (name, what, shares[what])
    for what in expected:
        assert _close_enough(observed["pynatsd"][what], observed["nats-server"][what], 0.07)


def _accountz(port: int, account: str) -> dict[str, object]:
    url = f"http://{LOOPBACK}:{port}/accountz?acc={account}"
    with urllib.request.urlopen(url, timeout=10) as response:
        detail: dict[str, object] = json.load(response)["account_detail"]
    return detail


def _http_port(server: ServerProcess) -> int:
    # The last `-m`: pynatsd runs as `python -m pynatsd`.
    return int(server.argv[len(server.argv) - server.argv[::-1].index("-m")])


def test_accountz_shows_mappings(tmp_path: Path) -> None:
    conf = WEIGHTED.replace(
        "mappings {\n  w:",
        'mappings {\n  "p.*.*": "p.$2.$1"\n'
        "  c: [{destination: c.east, weight: 100, cluster: east}]\n  w:",
        1,
    )
    with servers(conf, tmp_path, monitor=True) as started:
        shown = {
            name: {acc: _accountz(_http_port(s), acc).get("mappings") for acc in ("$G", "A")}
            for name, s in started.items()
        }
    assert shown["pynatsd"] == shown["nats-server"]
    assert shown["nats-server"]["$G"]


RELOAD_BEFORE = 'mappings { "m.*": "before.$1", gone: gone.mapped }\n'
RELOAD_AFTER = 'mappings { "m.*": "after.$1", "new.*": "new.mapped.$1" }\n'


def _reload(server: ServerProcess, path: Path, conf: str) -> None:
    done = server.log_text().count("Reloaded server configuration")
    path.write_text(conf)
    server.proc.send_signal(signal.SIGHUP)
    deadline = time.monotonic() + 10
    while server.log_text().count("Reloaded server configuration") <= done:
        assert time.monotonic() < deadline, server.log_text()
        time.sleep(0.02)


def test_mappings_follow_a_reload(tmp_path: Path) -> None:
    seen: dict[str, list[Counter[str]]] = {}
    with servers(RELOAD_BEFORE, tmp_path) as started:
        for name, server in started.items():
            c = Client(server.port)
            subjects = ["m.x", "m.x", "gone", "new.y"]
            before = c.publish(subjects)
            _reload(server, tmp_path / "mappings.conf", RELOAD_AFTER)
            # The same PUB lines again on the same connection: no plan may outlive the change.
            after = c.publish(subjects)
            fresh = Client(server.port)
            seen[name] = [before, after, fresh.publish(subjects)]
            c.close()
            fresh.close()
            (tmp_path / "mappings.conf").write_text(RELOAD_BEFORE)
    assert seen["pynatsd"] == seen["nats-server"]
    assert seen["nats-server"][1]["after.x"] == 2


def test_reload_removing_every_mapping(tmp_path: Path) -> None:
    """nats-server keeps the global account's mappings when a reload drops the `mappings`
    block; an empty block clears them."""
    seen: dict[str, list[Counter[str]]] = {}
    path = tmp_path / "mappings.conf"
    with servers(RELOAD_BEFORE, tmp_path) as started:
        for name, server in started.items():
            c = Client(server.port)
            seen[name] = [c.publish(["m.x"])]
            _reload(server, path, f"port: {server.port}\n")
            seen[name] += [c.publish(["m.x"]), Client(server.port).publish(["m.x"])]
            _reload(server, path, f"port: {server.port}\nmappings {{}}\n")
            seen[name] += [c.publish(["m.x"])]
            path.write_text(RELOAD_BEFORE)
    assert seen["pynatsd"] == seen["nats-server"]
    # (The last also holds the message the second client published before.)
    assert [c["before.x"] for c in seen["nats-server"][:3]] == [1, 1, 1]
    assert seen["nats-server"][3]["m.x"] == 1


def test_account_jwt_mappings(tmp_path: Path) -> None:
    """Operator mode: the mappings of an account JWT apply as configured ones do."""
    operator, account, user = make_operator(), account_key(), user_key()
    claims = {
        "fixed": [{"subject": "fixed.mapped"}],
        "w.*": [{"subject": "w.a.$1", "weight": 50}, {"subject": "w.b.$1", "weight": 50}],
    }
    preload = {
        account.public: account_jwt(operator.signing, account, mappings=claims),
        operator.system.public: operator.system_jwt,
    }
    conf = f"operator: {operator.jwt}\nresolver: MEMORY\nresolver_preload {{\n"
    conf += "\n".join(f"  {k}: {v}" for k, v in preload.items()) + "\n}\n"
    token = user_jwt(account, user)
    seen: dict[str, list[dict[str, float]]] = {}
    with servers(conf, tmp_path) as started:
        for name, server in started.items():
            c = Client(server.port, jwt_user=(token, user))
            seen[name] = [_shares(c.publish(["fixed"]), 1), _shares(c.publish(["w.x"] * N), N)]
            c.close()
    assert seen["nats-server"][0] == seen["pynatsd"][0] == {"fixed.mapped": 1.0}
    for name in seen:
        assert _close_enough(seen[name][1], {"w.a.x": 0.5, "w.b.x": 0.5}, 0.05), seen
