"""Listeners side by side with nats-server: what a port that cannot be used does to the process,
dual-stack listening on the wildcard host, and signals in lame duck mode.

- A listener that cannot be opened (a port out of range, a port taken, an address not on the
  machine, a host that does not resolve) makes nats-server log one [FTL] line and exit with
  status 1; the same configuration must give pynatsd's process the same line and status.
  Embedded, `Server.start()` raises `pynatsd.ListenError` and leaves nothing listening.
- With the default host (0.0.0.0) the client, monitoring and WebSocket listeners take IPv6
  clients too (`[::1]`), and an IPv4 client is still reported as `127.0.0.1`.
- SIGTERM in lame duck mode is ignored (the shutdown in progress goes on); SIGINT ends it.
"""

from __future__ import annotations

import json
import re
import signal
import socket
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from websockets.sync.client import connect as ws_connect

import pynatsd
from support.natsserver import require_nats_server
from support.normalise import normalise
from support.ports import free_port
from support.processes import PYNATSD, ServerProcess, start_server

# "[pid] 2026/11/25 08:56:27.437742 [FTL] text" -> "[FTL] text"
_LOG_PREFIX = re.compile(rb"^\[\d+\] \S+ \S+ ", re.MULTILINE)
# TEST-NET-1 (RFC 5737): never an address of this machine.
_NOT_LOCAL = "192.0.2.1"


@contextmanager
def _taken_port() -> Iterator[int]:
    """A port with a listener on it (on every interface, as the servers would want it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("0.0.0.0", 0))
        s.listen()
        yield int(s.getsockname()[1])


def _fatal_run(cmd: list[str], conf: Path) -> tuple[int, list[bytes]]:
    """Run a server that must fail: its exit status and its [FTL] lines."""
    proc = subprocess.run([*cmd, "-c", str(conf)], capture_output=True, timeout=20, check=False)
    lines = _LOG_PREFIX.sub(b"", proc.stdout + proc.stderr).splitlines()
    return proc.returncode, [line for line in lines if line.startswith(b"[FTL]")]


def _cases(taken: int) -> dict[str, str]:
    port = free_port()
    return {
        "client_port_out_of_range": "port: 70000",
        "client_port_negative": "port: -5",
        "client_port_taken": f"port: {taken}",
        "client_address_not_local": f"host: {_NOT_LOCAL}\nport: {port}",
        "client_host_not_a_name": f"host: 999.1.1.1\nport: {port}",
        "client_ipv6_in_brackets": f"host: '[::1]'\nport: {port}",
        "monitor_port_taken": f"port: {port}\nhttp_port: {taken}",
        "monitor_before_client": "port: 70000\nhttp_port: 70000",
        "monitor_address_not_local": f"port: {port}\nhttp: '{_NOT_LOCAL}:{free_port()}'",
        "websocket_port_taken": f"port: {port}\nwebsocket {{ port: {taken}, no_tls: true }}",
        "websocket_port_out_of_range": f"port: {port}\nwebsocket {{ port: 70000, no_tls: true }}",
    }


CASE_NAMES = list(_cases(0))


@pytest.mark.parametrize("case", CASE_NAMES)
def test_listen_error_ends_the_process(case: str, tmp_path: Path) -> None:
    binary = require_nats_server()
    with _taken_port() as taken:
        conf = tmp_path / "server.conf"
        conf.write_text(_cases(taken)[case] + "\n")
        ref = _fatal_run([binary], conf)
        cand = _fatal_run(list(PYNATSD), conf)
    assert ref[0] == 1 and len(ref[1]) == 1, ref
    assert cand == ref


async def test_embedded_listen_error_is_raised_and_nothing_stays_open() -> None:
    http_port = free_port()
    with _taken_port() as taken:
        server = pynatsd.Server(port=taken, http_port=http_port)
        with pytest.raises(pynatsd.ListenError) as info:
            await server.start()
    assert str(info.value) == (
        f"Error listening on port: 127.0.0.1:{taken}, "
        f'"listen tcp 127.0.0.1:{taken}: bind: address already in use"'
    )
    assert not server.running
    # The monitor had started before the client port failed: it is closed again.
    with socket.socket() as s:
        s.bind(("127.0.0.1", http_port))

    with pytest.raises(pynatsd.ListenError, match="invalid port"):
        pynatsd.ThreadedServer(port=70000).start()


# -- dual stack ----------------------------------------------------------------------------------


def _has_ipv6_loopback() -> bool:
    try:
        with socket.socket(socket.AF_INET6, socket.SOCK_STREAM) as s:
            s.bind(("::1", 0))
        return True
    except OSError:
        return False


def _greeting(host: str, port: int) -> bytes:
    with socket.create_connection((host, port), timeout=5) as s:
        data = b""
        while not data.endswith(b"\n"):
            chunk = s.recv(4096)
            if not chunk:
                break
            data += chunk
        return normalise(data)


def _observe(server: ServerProcess, http_port: int, ws_port: int) -> dict[str, object]:
    with urllib.request.urlopen(f"http://[::1]:{http_port}/varz", timeout=5) as resp:
        varz_status = resp.status
        varz_host = json.loads(resp.read())["host"]
    with ws_connect(f"ws://[::1]:{ws_port}", open_timeout=5) as ws:
        ws_info = ws.recv(timeout=5)
    ws_bytes = ws_info if isinstance(ws_info, bytes) else ws_info.encode()
    return {
        "ipv6 client": _greeting("::1", server.port),
        "ipv4 client": _greeting("127.0.0.1", server.port),
        "monitor over ipv6": (varz_status, varz_host),
        "websocket over ipv6": normalise(ws_bytes).replace(str(ws_port).encode(), b"<ws>"),
    }


@pytest.mark.skipif(not _has_ipv6_loopback(), reason="no IPv6 loopback on this machine")
def test_wildcard_host_takes_ipv6_clients(tmp_path: Path) -> None:
    binary = require_nats_server()
    results = []
    for cmd in ([binary], list(PYNATSD)):
        http_port, ws_port = free_port(), free_port()
        conf = tmp_path / "server.conf"
        conf.write_text(f"http_port: {http_port}\nwebsocket {{ port: {ws_port}, no_tls: true }}\n")
        server = start_server(cmd, ["-c", str(conf)], host="0.0.0.0")
        try:
            results.append(_observe(server, http_port, ws_port))
        finally:
            server.stop()
    ref, cand = results
    assert b'"client_ip":"::1"' in ref["ipv6 client"]  # type: ignore[operator]
    assert b'"client_ip":"127.0.0.1"' in ref["ipv4 client"]  # type: ignore[operator]
    assert cand == ref


# -- lame duck mode and signals ------------------------------------------------------------------


def _lame_duck_server(cmd_name: str, tmp_path: Path) -> ServerProcess:
    cmd = [require_nats_server()] if cmd_name == "nats-server" else list(PYNATSD)
    conf = tmp_path / "server.conf"
    conf.write_text("lame_duck_grace_period: 10s\nlame_duck_duration: 30s\n")
    server = start_server(cmd, ["-c", str(conf)])
    time.sleep(0.5)  # the readiness probe's connection is gone
    return server


@pytest.mark.parametrize("cmd_name", ["nats-server", "pynatsd"])
def test_sigterm_leaves_lame_duck_mode_to_finish(cmd_name: str, tmp_path: Path) -> None:
    server = _lame_duck_server(cmd_name, tmp_path)
    try:
        with socket.create_connection((server.host, server.port), timeout=5) as client:
            # A PONG means the server counts the client (nats-server's INFO comes earlier).
            client.sendall(b"PING\r\n")
            received = b""
            while b"PONG\r\n" not in received:
                received += client.recv(4096)
            server.proc.send_signal(signal.SIGUSR2)
            time.sleep(0.3)
            server.proc.send_signal(signal.SIGTERM)
            time.sleep(0.5)
            assert server.alive(), "SIGTERM ended a lame duck shutdown"
            server.proc.send_signal(signal.SIGINT)
            assert server.proc.wait(timeout=10) == 0
    finally:
        server.proc.kill()
        server.stop()


@pytest.mark.parametrize("cmd_name", ["nats-server", "pynatsd"])
def test_lame_duck_mode_without_clients_ends_at_once(cmd_name: str, tmp_path: Path) -> None:
    server = _lame_duck_server(cmd_name, tmp_path)
    try:
        server.proc.send_signal(signal.SIGUSR2)
        assert server.proc.wait(timeout=3) == 0
    finally:
        server.proc.kill()
        server.stop()
