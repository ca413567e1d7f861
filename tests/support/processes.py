"""A NATS server (the real nats-server or pynatsd, same flags) as a subprocess on a loopback port.

A server counts as started once a connection gets its INFO line, so a test never races the
listener. Its output goes to an anonymous temporary file, not a pipe (nobody reads a pipe while
tests run, and a full one would block the server); the tail of it goes into the error when the
server exits or never greets.
"""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import IO

from support.natsserver import NATS_SERVER
from support.ports import LOOPBACK, free_port

# pynatsd run the way users run it; takes the same flags as nats-server.
PYNATSD = (sys.executable, "-m", "pynatsd")
STARTUP_TIMEOUT = 15.0


class ServerStartError(RuntimeError):
    """The server process exited or never sent its INFO line."""


class ServerProcess:
    """One server subprocess: `argv` must already make it listen on `host`:`port`."""

    def __init__(
        self,
        argv: Sequence[str],
        port: int,
        store: str = "",
        *,
        host: str = LOOPBACK,
        cwd: str | None = None,
        env: dict[str, str] | None = None,
        ready: Callable[[str, int], bool] | None = None,
    ) -> None:
        self.argv = list(argv)
        self.port = port
        self.host = host
        self.store = store  # the JetStream store directory, where the caller gave one
        self.url = f"nats://{host}:{port}"
        self._cwd = cwd
        self._env = env
        # How to tell it is up; by default, a connection gets an INFO line (a server with
        # `tls { handshake_first }` sends none in plain text: pass a TLS probe).
        self._ready = ready
        self._proc: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None

    @property
    def proc(self) -> subprocess.Popen[bytes]:
        if self._proc is None:
            raise RuntimeError(f"{self.argv} was not started")
        return self._proc

    def start(self, timeout: float = STARTUP_TIMEOUT) -> None:
        """Start the process and wait until it greets a connection with INFO."""
        # Anonymous, so nothing is left behind; it lives as long as the server (closed by stop),
        # and is only ever read with pread, which leaves the offset the server writes at alone.
        self._log = tempfile.TemporaryFile(prefix="support-server-", suffix=".log")  # noqa: SIM115
        self._proc = subprocess.Popen(
            self.argv,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            cwd=self._cwd,
            env=self._env,
        )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self._proc.poll() is not None:
                text = self.log_text()
                raise ServerStartError(
                    f"{self.argv} exited with {self._proc.returncode}:\n{text[-2000:]}"
                )
            if self._ready is not None:
                if self._ready(self.host, self.port):
                    return
            else:
                line = _read_info_line(self.host, self.port, timeout=1.0)
                if line is not None and line.startswith(b"INFO "):
                    return
            time.sleep(0.05)
        text = self.log_text()
        self.stop()
        raise ServerStartError(f"{self.argv} sent no INFO within {timeout}s:\n{text[-2000:]}")

    def log_text(self) -> str:
        """Everything the server wrote to stdout and stderr so far."""
        if self._log is None:
            return ""
        fd = self._log.fileno()
        return os.pread(fd, os.fstat(fd).st_size, 0).decode(errors="replace")

    def alive(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def stop(self) -> None:
        if self._proc is not None and self._proc.poll() is None:
            self._proc.terminate()
            try:
                self._proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait(timeout=10)
        if self._log is not None:
            self._log.close()
            self._log = None


def _read_info_line(host: str, port: int, timeout: float) -> bytes | None:
    try:
        with socket.create_connection((host, port), timeout=timeout) as s:
            s.settimeout(timeout)
            data = b""
            # Bounded: an INFO line is far below 64 KiB.
            while b"\n" not in data and len(data) < 65536:
                chunk = s.recv(4096)
                if not chunk:
                    return None
                data += chunk
            return data.split(b"\n", 1)[0] + b"\n"
    except OSError:
        return None


def start_server(
    cmd: Sequence[str],
    extra_args: Sequence[str] = (),
    *,
    port: int | None = None,
    host: str = LOOPBACK,
    store: str = "",
    startup_timeout: float = STARTUP_TIMEOUT,
    cwd: str | None = None,
    env: dict[str, str] | None = None,
    ready: Callable[[str, int], bool] | None = None,
) -> ServerProcess:
    """Start `cmd -p PORT -a HOST *extra_args` (a free port unless one is given) and wait until
    it sends an INFO line."""
    port = free_port(host) if port is None else port
    argv = [*cmd, "-p", str(port), "-a", host, *extra_args]
    server = ServerProcess(argv, port, store, host=host, cwd=cwd, env=env, ready=ready)
    try:
        server.start(startup_timeout)
    except ServerStartError:
        server.stop()
        raise
    return server


@contextmanager
def run_nats_server(conf: str, directory: Path) -> Iterator[int]:
    """Run the real nats-server with the configuration text `conf` on a free port; yields the
    port. The file is written into `directory`."""
    port = free_port()
    path = directory / f"real-{port}.conf"
    path.write_text(conf)
    server = start_server([str(NATS_SERVER)], ["-c", str(path)], port=port)
    try:
        yield port
    finally:
        server.stop()


def wait_for_log_line(
    log_text: Callable[[], str], pattern: str, timeout: float = 15.0, context: str = ""
) -> str:
    """The first line of a server's log (`log_text`) matching `pattern`, once there, as
    "[LEVEL] text": without its prefix and connection label, so that nats-server's and
    pynatsd's lines compare."""
    deadline = time.monotonic() + timeout
    while True:
        for line in log_text().splitlines():
            if re.search(pattern, line):
                # "[pid] date time [ERR] 127.0.0.1:port - rid:N - text" -> "[ERR] text"
                level = re.search(r"\[(ERR|WRN|INF|DBG)\]", line)
                return f"[{level.group(1) if level else '?'}] {line.rsplit(' - ', 1)[-1]}"
        if time.monotonic() > deadline:
            raise AssertionError(f"no log line {pattern!r}{context}")
        time.sleep(0.1)
