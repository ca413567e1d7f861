"""Reloading the cluster block, side by side with nats-server: both servers start with the same
file, get the rewritten file and SIGHUP, and must log the same outcome: `Reloaded: cluster`,
`Reloaded: cluster routes`, or the same `Failed to reload` reason (nats-server's
validateClusterOpts: the route listener's host and port cannot change, and a new advertise
address must parse)."""

from __future__ import annotations

import dataclasses
import re
import signal
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from pynatsd.options import ClusterOptions
from pynatsd.reload import reload_cluster
from support.natsserver import nats_server_binary
from support.ports import free_port
from support.processes import PYNATSD, start_server

NATS_SERVER = nats_server_binary()
pytestmark = pytest.mark.skipif(NATS_SERVER is None, reason="nats-server binary not found")

BASE = "cluster {{ name: C, port: {cport} }}\n"
# (file before, file after); {cport} and {other} are free ports, {route} a port nobody serves.
CASES = {
    "routes added": (
        BASE,
        'cluster {{ name: C, port: {cport}, routes: ["nats://127.0.0.1:{route}"] }}\n',
    ),
    "routes removed": (
        'cluster {{ name: C, port: {cport}, routes: ["nats://127.0.0.1:{route}"] }}\n',
        BASE,
    ),
    "port changed": (BASE, "cluster {{ name: C, port: {other} }}\n"),
    "host changed": (BASE, "cluster {{ name: C, host: 127.0.0.1, port: {cport} }}\n"),
    "clustering turned on": ("port: 4222\n", BASE),
    "clustering turned off": (BASE, "port: 4222\n"),
    "name changed": (BASE, "cluster {{ name: D, port: {cport} }}\n"),
    "bad advertise": (BASE, 'cluster {{ name: C, port: {cport}, advertise: "x:y" }}\n'),
    "advertise with too many colons": (
        BASE,
        'cluster {{ name: C, port: {cport}, advertise: "a:b:1" }}\n',
    ),
    "pool size and no_advertise": (
        BASE,
        "cluster {{ name: C, port: {cport}, pool_size: 5, no_advertise: true }}\n",
    ),
    "unchanged": (BASE, BASE),
}
OUTCOME = re.compile(
    r"\[(?:INF|ERR)\] (Reloaded: cluster.*|Failed to reload server configuration.*)"
)
DONE = ("Reloaded server configuration", "Failed to reload server configuration")


def _outcome(command: list[str], before: str, after: str, directory: Path) -> list[str]:
    conf, log = directory / "c.conf", directory / "c.log"
    conf.write_text(before)
    server = start_server(command, ["-c", str(conf), "-l", str(log)])
    try:
        conf.write_text(after)
        server.proc.send_signal(signal.SIGHUP)
        deadline = time.monotonic() + 10
        while not any(d in log.read_text() for d in DONE):
            assert time.monotonic() < deadline, log.read_text()
            time.sleep(0.02)
        return [m.group(1) for m in OUTCOME.finditer(log.read_text())]
    finally:
        server.stop()


@pytest.mark.parametrize("name", sorted(CASES))
def test_cluster_reload_agrees(name: str, tmp_path: Path) -> None:
    assert NATS_SERVER is not None
    ports = {"cport": free_port(), "other": free_port(), "route": free_port()}
    before, after = (text.format(**ports) for text in CASES[name])
    outcomes = []
    for label, command in (("real", [NATS_SERVER]), ("ours", list(PYNATSD))):
        directory = tmp_path / label
        directory.mkdir()
        outcomes.append(_outcome(command, before, after, directory))
    assert outcomes[0] or name == "unchanged"
    assert outcomes[1] == outcomes[0]


class _Part:
    def __init__(self) -> None:
        self.routes: list[list[str]] = []
        self.options: list[ClusterOptions] = []

    def reload_routes(self, routes: list[str]) -> None:
        self.routes.append(routes)

    def reload_options(self, cluster: ClusterOptions) -> None:
        self.options.append(cluster)


def test_the_cluster_part_hears_of_changed_routes_and_settings() -> None:
    part = _Part()
    server = SimpleNamespace(parts={"cluster": part})
    old = ClusterOptions(name="C", port=6222, routes=["nats://a:1"])
    new = dataclasses.replace(old, routes=["nats://a:1", "nats://b:2"])
    reload_cluster(server, old, new)  # type: ignore[arg-type]
    assert part.routes == [["nats://a:1", "nats://b:2"]] and part.options == []
    newer = dataclasses.replace(new, no_advertise=True)
    reload_cluster(server, new, newer)  # type: ignore[arg-type]
    assert part.routes == [["nats://a:1", "nats://b:2"]] and part.options == [newer]
    # A server without the part (or a part without the hooks) only logs.
    reload_cluster(SimpleNamespace(parts={}), old, newer)  # type: ignore[arg-type]
