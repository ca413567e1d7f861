"""Logging in nats-server's format: levels, client prefixes, tracing, files and rotation."""

from __future__ import annotations

import re
import subprocess
import time
from pathlib import Path

import nats
import pytest

import pynatsd
from pynatsd import logger
from support.processes import PYNATSD

LINE = re.compile(
    r"^\[\d+\] \d{4}/\d{2}/\d{2} \d{2}:\d{2}:\d{2}\.\d{6} \[(INF|DBG|TRC|WRN|ERR|FTL)\] "
)


@pytest.fixture
def log_file(tmp_path: Path) -> Path:
    path = tmp_path / "pynatsd.log"
    yield path
    logger.configure()  # back to stderr, INFO, for the next tests


async def test_debug_and_trace_lines(log_file: Path) -> None:
    logger.configure(debug=True, trace=True, log_file=str(log_file))
    async with pynatsd.Server(port=0) as server:
        nc = await nats.connect(server.client_url, name="tracer")
        sub = await nc.subscribe("greet")
        await nc.publish("greet", b"hello")
        await sub.next_msg(timeout=2)
        await nc.close()
    text = log_file.read_text()
    lines = text.splitlines()
    assert lines and all(LINE.match(line) for line in lines), lines[:3]
    assert re.search(r"\[DBG\] 127\.0\.0\.1:\d+ - cid:\d+ - Client connection created", text)
    assert re.search(
        r'\[TRC\] 127\.0\.0\.1:\d+ - cid:\d+ - "v[\d.]+:python3:tracer" - <<- \[SUB greet 1\]', text
    )
    assert "<<- [PUB greet 5]" in text
    assert "<<- MSG_PAYLOAD: ['hello']" in text
    assert "->> [MSG greet 1 5]" in text


async def test_credentials_never_logged(log_file: Path) -> None:
    logger.configure(trace=True, log_file=str(log_file))
    async with pynatsd.Server(port=0, username="alice", password="hunter2") as server:
        nc = await nats.connect(server.client_url, user="alice", password="hunter2")
        await nc.close()
    text = log_file.read_text()
    assert "hunter2" not in text
    assert '"pass":"[REDACTED]"' in text


def test_logtime_off_and_levels(log_file: Path) -> None:
    logger.configure(logtime=False, log_file=str(log_file))
    logger.log.warning("careful")
    logger.log.debug("hidden at INFO level")
    assert re.fullmatch(r"\[\d+\] \[WRN\] careful\n", log_file.read_text())


def test_size_limited_rotation(log_file: Path) -> None:
    logger.configure(log_file=str(log_file), size_limit=200, max_num=2)
    for i in range(40):
        logger.log.info("line %d with some padding to fill the file", i)
    rotated = sorted(p.name for p in log_file.parent.glob("pynatsd.log.*"))
    assert len(rotated) == 2
    assert all(re.fullmatch(r"pynatsd\.log\.\d{4}(\.\d{2}){5}\.\d{6}", n) for n in rotated)
    assert "line 39" in log_file.read_text()


def test_banner_from_the_command_line(tmp_path: Path) -> None:
    proc = subprocess.Popen(
        [*PYNATSD, "-a", "127.0.0.1", "-p", "-1", "-n", "banner-test"],
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stderr is not None
        seen = []
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            line = proc.stderr.readline()
            seen.append(line)
            if "Server is ready" in line:
                break
        text = "".join(seen)
        assert "[INF] Starting nats-server" in text
        assert "[INF]   Version:  2.15.1" in text
        assert "[INF]   Name:     banner-test" in text
        assert re.search(r"Listening for client connections on 127\.0\.0\.1:\d+", text)
    finally:
        proc.kill()
        proc.wait()


def test_sigusr1_reopens_the_log_file(tmp_path: Path) -> None:
    import signal

    log_path = tmp_path / "server.log"
    proc = subprocess.Popen(
        [*PYNATSD, "-a", "127.0.0.1", "-p", "-1", "-l", str(log_path)],
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            if log_path.exists() and "Server is ready" in log_path.read_text():
                break
            time.sleep(0.05)
        rotated = tmp_path / "server.log.1"
        log_path.rename(rotated)  # what logrotate does before signalling
        proc.send_signal(signal.SIGUSR1)
        while time.monotonic() < deadline:
            if log_path.exists() and "File log re-opened" in log_path.read_text():
                break
            time.sleep(0.05)
        assert "File log re-opened" in log_path.read_text()
        assert "Server is ready" in rotated.read_text()
    finally:
        proc.kill()
        proc.wait()
