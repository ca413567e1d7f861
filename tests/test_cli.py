"""The command line: nats-server's flags and their meanings, run as a real process."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest

from pynatsd.cli import UsageError, apply_flags, parse_flags
from pynatsd.options import Options
from support.ports import free_port
from support.processes import PYNATSD, start_server


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["-p", "4333"], {"port": 4333}),
        (["--port", "4333"], {"port": 4333}),
        (["-port=4333"], {"port": 4333}),
        (["--port=4333"], {"port": 4333}),
        (["-p", "-1"], {"port": -1}),
        (["-a", "127.0.0.1"], {"host": "127.0.0.1"}),
        (["--addr", "::1"], {"host": "::1"}),
        (["-net", "10.0.0.1"], {"host": "10.0.0.1"}),
        (["-n", "srv"], {"server_name": "srv"}),
        (["--server_name", "srv"], {"server_name": "srv"}),
        (["-m", "8222"], {"http_port": 8222}),
        (["-ms", "8443"], {"https_port": 8443}),
        (["--user", "u", "--pass", "p"], {"username": "u", "password": "p"}),
        (["--auth", "tok"], {"authorization": "tok"}),
        (["-D"], {"debug": True}),
        (["-V"], {"trace": True}),
        (["-DV"], {"debug_trace": True}),
        (["-D=false"], {"debug": False}),
        (["-l", "/tmp/x.log"], {"log_file": "/tmp/x.log"}),
        (["-P", "/tmp/x.pid"], {"pid_file": "/tmp/x.pid"}),
        (["--ports_file_dir", "/tmp"], {"ports_file_dir": "/tmp"}),
        (["-js", "-sd=/tmp/js"], {"jetstream": True, "store_dir": "/tmp/js"}),
    ],
)
def test_parse_flags(argv: list[str], expected: dict[str, object]) -> None:
    assert parse_flags(argv) == expected


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--bogus"], "flag provided but not defined: -bogus"),
        (["-p", "abc"], 'invalid value "abc" for flag -p: parse error'),
        (["-p"], "flag needs an argument: -p"),
        (["-D=maybe"], 'invalid boolean value "maybe" for -D'),
    ],
)
def test_bad_flags(argv: list[str], message: str) -> None:
    with pytest.raises(UsageError, match=message):
        parse_flags(argv)


def test_debug_trace_sets_both() -> None:
    opts = apply_flags(Options(), parse_flags(["-DV"]))
    assert opts.debug and opts.trace


def _run(*args: str, timeout: float = 20) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*PYNATSD, *args], capture_output=True, text=True, timeout=timeout)


def test_unknown_flag_exits_1() -> None:
    proc = _run("--bogus")
    assert proc.returncode == 1
    assert "flag provided but not defined: -bogus" in proc.stderr


def test_version_and_help() -> None:
    assert _run("-v").stdout.startswith("pynatsd: v")
    helped = _run("--help")
    assert helped.returncode == 0
    assert "--ports_file_dir <dir>" in helped.stdout


def _wait_for(predicate: object, timeout: float = 10) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():  # type: ignore[operator]
            return
        time.sleep(0.05)
    raise AssertionError("condition not met in time")


def test_process_pid_ports_file_monitor_and_sigterm(tmp_path: Path) -> None:
    port, http_port = free_port(), free_port()
    pid_file = tmp_path / "pynatsd.pid"
    proc = subprocess.Popen(
        [
            *PYNATSD,
            "-a",
            "127.0.0.1",
            "-p",
            str(port),
            "-m",
            str(http_port),
            "-P",
            str(pid_file),
            "--ports_file_dir",
            str(tmp_path),
        ],
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        ports_file = tmp_path / f"__main__.py_{proc.pid}.ports"
        _wait_for(lambda: any(tmp_path.glob("*.ports")))
        ports_file = next(tmp_path.glob("*.ports"))
        assert json.loads(ports_file.read_text()) == {
            "nats": [f"nats://127.0.0.1:{port}"],
            "monitoring": [f"http://127.0.0.1:{http_port}"],
        }
        assert pid_file.read_text() == str(proc.pid)
        with urllib.request.urlopen(f"http://127.0.0.1:{http_port}/varz", timeout=5) as r:
            varz = json.load(r)
        assert varz["port"] == port
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(10) == 0
        assert not ports_file.exists()
        assert not pid_file.exists()
        assert proc.stderr is not None
        log = proc.stderr.read()
        assert "Server is ready" in log
        assert "Server Exiting.." in log
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_restart_on_same_port_after_sigkill() -> None:
    """The nats.py suite SIGKILLs servers and restarts them on the same port at once."""
    port = free_port()
    for _ in range(2):
        server = start_server(PYNATSD, port=port, startup_timeout=10)
        os.kill(server.proc.pid, signal.SIGKILL)
        server.proc.wait()
        server.stop()


def test_signal_command_reaches_the_server(tmp_path: Path) -> None:
    port = free_port()
    pid_file = tmp_path / "srv.pid"
    conf = tmp_path / "srv.conf"
    conf.write_text("max_payload: 4096\n")
    log = tmp_path / "srv.log"
    proc = subprocess.Popen(
        [
            *PYNATSD,
            "-c",
            str(conf),
            "-a",
            "127.0.0.1",
            "-p",
            str(port),
            "-P",
            str(pid_file),
            "-l",
            str(log),
        ],
    )
    try:
        _wait_for(
            lambda: pid_file.exists() and log.exists() and "Server is ready" in log.read_text()
        )
        assert _run("--signal", f"reload={pid_file}").returncode == 0
        _wait_for(lambda: "Reloaded server configuration" in log.read_text())
        assert _run("--signal", f"quit={proc.pid}").returncode == 0
        assert proc.wait(10) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_signal_with_unknown_command_fails() -> None:
    proc = _run("--signal", "explode=1")
    assert proc.returncode == 1
    assert "unknown signal" in proc.stderr
