"""The HTTPS monitoring port (`https`, `https_port`, `-ms`) side by side with nats-server.

Both servers run the same configuration file: the monitoring port speaks TLS with the `tls`
block's certificate and asks for no client certificate (even with `verify: true`, which
applies to NATS clients only); plain HTTP sent to it gets Go's 400 answer; and the start-up
errors are the same [FTL] lines. The dashboard and its update stream are served over the same
TLS port.
"""

from __future__ import annotations

import contextlib
import json
import socket
import ssl
import subprocess
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from support.certs import loopback_server_files
from support.natsserver import require_nats_server
from support.ports import LOOPBACK, free_port
from support.processes import PYNATSD, start_server
from support.sse import EventStream

# The first five bytes of a plain HTTP request, all a TLS server reads before it answers; a
# longer request would be left unread at the close, and the reset could drop the answer.
PLAIN_HTTP = b"GET /"


@pytest.fixture
def tls_block(tmp_path: Path) -> tuple[str, ssl.SSLContext]:
    cert, key, ca_file = loopback_server_files(tmp_path)
    block = f'tls {{ cert_file: "{cert}", key_file: "{key}", ca_file: "{ca_file}", verify: true }}'
    return block, ssl.create_default_context(cafile=ca_file)


def servers() -> list[tuple[str, list[str]]]:
    return [("nats-server", [require_nats_server()]), ("pynatsd", list(PYNATSD))]


def plain_http_answer(port: int) -> bytes:
    with socket.create_connection((LOOPBACK, port), timeout=5) as sock:
        sock.sendall(PLAIN_HTTP)
        data = b""
        # nats-server resets the connection after its answer: the answer is what came first.
        with contextlib.suppress(ConnectionResetError):
            while chunk := sock.recv(4096):
                data += chunk
                if len(data) > 65536:
                    break
        return data


def observe(cmd: list[str], conf: Path, context: ssl.SSLContext, https_port: int) -> Any:
    server = start_server(cmd, ["-c", str(conf)])
    try:
        url = f"https://{LOOPBACK}:{https_port}/varz"
        with urllib.request.urlopen(url, context=context, timeout=5) as r:
            status, ctype, varz = r.status, r.headers["Content-Type"], json.load(r)
        (ports_file,) = conf.parent.glob("*.ports")
        return {
            "varz": (status, ctype, varz["http_port"], varz["https_port"] == https_port),
            "plain": plain_http_answer(https_port),
            "log": "Starting https monitor on" in server.log_text(),
            "ports": json.loads(ports_file.read_text())["monitoring"]
            == [f"https://{LOOPBACK}:{https_port}"],
        }
    finally:
        server.stop()


def test_https_monitoring_port_matches(
    tmp_path: Path, tls_block: tuple[str, ssl.SSLContext]
) -> None:
    block, context = tls_block
    seen = {}
    for name, cmd in servers():
        https_port = free_port()
        directory = tmp_path / name
        directory.mkdir()
        conf = directory / "main.conf"
        conf.write_text(f"https: {LOOPBACK}:{https_port}\nports_file_dir: {directory}\n{block}\n")
        seen[name] = observe(cmd, conf, context, https_port)
    assert seen["pynatsd"] == seen["nats-server"]
    assert seen["pynatsd"]["varz"] == (200, "application/json", 0, True)
    assert seen["pynatsd"]["ports"] and seen["pynatsd"]["log"]
    assert seen["pynatsd"]["plain"].startswith(b"HTTP/1.0 400 Bad Request\r\n")


def fatal_line(cmd: list[str], conf: Path) -> str:
    done = subprocess.run(
        [*cmd, "-c", str(conf)], capture_output=True, text=True, timeout=30, check=False
    )
    assert done.returncode != 0
    lines = [line for line in (done.stdout + done.stderr).splitlines() if "[FTL]" in line]
    assert lines, done.stdout + done.stderr
    return lines[0].split("[FTL] ", 1)[1]


@pytest.mark.parametrize(
    ("extra", "expected"),
    [
        (
            "http_port: 18222\nhttps_port: 18223",
            "can't specify both HTTP (18222) and HTTPs (18223)",
        ),
        ("https_port: 18223", "TLS cert and key required for HTTPS"),
    ],
)
def test_https_start_errors_match(tmp_path: Path, extra: str, expected: str) -> None:
    lines = {}
    for name, cmd in servers():
        conf = tmp_path / f"{name}.conf"
        conf.write_text(f"listen: {LOOPBACK}:{free_port()}\n{extra}\n")
        lines[name] = fatal_line(cmd, conf)
    assert lines["pynatsd"] == lines["nats-server"]
    assert expected in lines["pynatsd"]


def test_dashboard_and_its_stream_over_https(
    tmp_path: Path, tls_block: tuple[str, ssl.SSLContext]
) -> None:
    block, context = tls_block
    https_port = free_port()
    conf = tmp_path / "dash.conf"
    conf.write_text(f"https: {LOOPBACK}:{https_port}\n{block}\n")
    server = start_server(PYNATSD, ["-c", str(conf)])
    try:
        url = f"https://{LOOPBACK}:{https_port}/dashboard"
        with urllib.request.urlopen(url, context=context, timeout=5) as r:
            assert r.status == 200 and b"dashboard.js" in r.read()
        with EventStream(https_port, tls=context) as stream:
            assert stream.status == 200
            assert stream.next_update()["varz"]["https_port"] == https_port
        # Over plain HTTP the page and its stream get nothing but Go's 400 answer.
        assert plain_http_answer(https_port).startswith(b"HTTP/1.0 400 Bad Request")
    finally:
        server.stop()
