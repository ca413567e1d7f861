"""A blocking client that records every byte a server sends, for differential tests.

It reads the INFO, sends bytes (whole, or in pieces with an optional delay so the server sees
split reads), and records everything it receives plus whether the server closed the connection.
`drain` collects from several clients at once until all of them have been quiet for a while.
"""

from __future__ import annotations

import select
import socket
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field


@dataclass
class RecordingClient:
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


def drain(clients: Iterable[RecordingClient], quiet: float = 0.15, limit: float = 3.0) -> None:
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
