"""A minimal Server-Sent Events reader over a raw socket, for the dashboard's update stream.

It reads what a browser's EventSource would: the response head, then `data:` events, each a
JSON update. Blocking and bounded by a timeout, so tests and benchmarks can use it from any
thread.
"""

from __future__ import annotations

import json
import socket
import ssl
from typing import Any

from support.ports import LOOPBACK


class EventStream:
    """`GET path` on host:port, kept open; `next_update()` returns the next event's JSON."""

    def __init__(
        self,
        port: int,
        path: str = "/dashboard/events",
        host: str = LOOPBACK,
        tls: ssl.SSLContext | None = None,
    ) -> None:
        self.sock = socket.create_connection((host, port), timeout=5)
        if tls is not None:
            self.sock = tls.wrap_socket(self.sock, server_hostname=host)
        self.sock.sendall(f"GET {path} HTTP/1.1\r\nHost: {host}:{port}\r\n\r\n".encode())
        self._buf = b""
        head = self._read_until(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        self.status = int(lines[0].split(" ")[1])
        self.headers = {
            k.strip().lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:])
        }
        self.updates = 0

    def _read_until(self, sep: bytes) -> bytes:
        while sep not in self._buf:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise ConnectionError("event stream closed")
            self._buf += chunk
        item, self._buf = self._buf.split(sep, 1)
        return item

    def next_update(self) -> Any:
        """The next `data:` event's JSON (the `retry:` field and comments are skipped)."""
        while True:
            event = self._read_until(b"\n\n").decode()
            data = [line[6:] for line in event.split("\n") if line.startswith("data: ")]
            if data:
                self.updates += 1
                return json.loads("\n".join(data))

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> EventStream:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
