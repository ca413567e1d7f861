"""Configuration reload with SIGHUP, on a real pynatsd process."""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from support.ports import free_port
from support.processes import PYNATSD


class Proc:
    def __init__(self, conf: Path, port: int, log: Path) -> None:
        self.conf, self.port, self.log = conf, port, log
        self.proc = subprocess.Popen(
            [
                *PYNATSD,
                "-c",
                str(conf),
                "-a",
                "127.0.0.1",
                "-p",
                str(port),
                "-l",
                str(log),
            ],
            stderr=subprocess.DEVNULL,
        )
        self.wait_log("Server is ready")

    def wait_log(self, text: str, timeout: float = 10) -> str:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            content = self.log.read_text() if self.log.exists() else ""
            if text in content:
                return content
            time.sleep(0.05)
        raise AssertionError(f"{text!r} not logged; log:\n{content}")

    def hup(self) -> None:
        self.proc.send_signal(signal.SIGHUP)

    def info(self) -> dict[str, object]:
        with socket.create_connection(("127.0.0.1", self.port), timeout=5) as s:
            line = s.makefile("rb").readline()
        return dict(json.loads(line[5:]))


@pytest.fixture
def server(tmp_path: Path) -> Iterator[Proc]:
    conf = tmp_path / "server.conf"
    conf.write_text("max_payload: 1024\n")
    proc = Proc(conf, free_port(), tmp_path / "server.log")
    yield proc
    proc.proc.kill()
    proc.proc.wait()


def test_reload_changes_a_limit(server: Proc) -> None:
    assert server.info()["max_payload"] == 1024
    server.conf.write_text("max_payload: 2048\n")
    server.hup()
    log = server.wait_log("Reloaded server configuration")
    assert 'Trapped "hangup" signal' in log
    assert "Reloaded: max_payload = 2048" in log
    assert server.info()["max_payload"] == 2048


def test_reload_refuses_what_cannot_change(server: Proc) -> None:
    server.conf.write_text("max_payload: 1024\nmax_subscriptions: 10\n")
    server.hup()
    log = server.wait_log("Failed to reload")
    assert "config reload not supported for MaxSubs: old=0, new=10" in log
    assert server.info()["max_payload"] == 1024


def test_reload_refuses_a_gateway_change(tmp_path: Path) -> None:
    conf = tmp_path / "gw.conf"
    conf.write_text("gateway { name: A, listen: 127.0.0.1:-1 }\n")
    proc = Proc(conf, free_port(), tmp_path / "gw.log")
    try:
        conf.write_text("gateway { name: B, listen: 127.0.0.1:-1 }\n")
        proc.hup()
        log = proc.wait_log("Failed to reload")
        assert "config reload not supported for Gateway: old=" in log
    finally:
        proc.proc.kill()
        proc.proc.wait()


def test_reload_with_a_bad_file_keeps_running(server: Proc) -> None:
    server.conf.write_text("max_payload: {\n")
    server.hup()
    server.wait_log("Failed to reload server configuration")
    assert server.info()["max_payload"] == 1024


def test_reload_adding_a_user_closes_anonymous_clients(server: Proc) -> None:
    anon = socket.create_connection(("127.0.0.1", server.port), timeout=5)
    reader = anon.makefile("rb")
    reader.readline()
    anon.sendall(b'CONNECT {"verbose":false}\r\nPING\r\n')
    assert reader.readline() == b"PONG\r\n"
    server.conf.write_text("max_payload: 1024\nauthorization { user: alice, password: s3cret }\n")
    server.hup()
    server.wait_log("Reloaded server configuration")
    assert reader.readline() == b"-ERR 'Authorization Violation'\r\n"
    assert reader.readline() == b""
    assert server.info()["auth_required"] is True
    anon.close()
