"""A blocking line-level client: send protocol lines, read what comes back, line by line.

Made for CONNECT/PING exchanges (authentication and permission decisions), where the answer is
PONG or the first -ERR line.
"""

from __future__ import annotations

import json
import socket
from typing import Any

from support.ports import LOOPBACK


class LineClient:
    """One connection; the INFO it was greeted with is parsed into `info`."""

    def __init__(self, port: int) -> None:
        self.sock = socket.create_connection((LOOPBACK, port), timeout=5)
        self.buf = b""
        info = self.read_line()
        assert info.startswith("INFO "), info
        self.info: dict[str, Any] = json.loads(info[5:])

    def read_line(self, timeout: float = 5.0) -> str:
        self.sock.settimeout(timeout)
        while b"\r\n" not in self.buf:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise ConnectionError("closed")
            self.buf += chunk
        line, self.buf = self.buf.split(b"\r\n", 1)
        return line.decode()

    def send(self, data: str) -> None:
        self.sock.sendall(data.encode())

    def connect(self, **fields: Any) -> str:
        """CONNECT (verbose off) and PING; the answer: "PONG" or the -ERR line."""
        opts = {"verbose": False, "pedantic": False, "protocol": 1, "headers": True, **fields}
        self.send(f"CONNECT {json.dumps(opts)}\r\nPING\r\n")
        return self.read_until_pong()

    def read_until_pong(self) -> str:
        """Lines up to PONG: the first -ERR if one came, else "PONG"; MSG lines are kept."""
        err = ""
        self.msgs: list[str] = []
        while True:
            try:
                line = self.read_line()
            except (ConnectionError, OSError):
                return err or "CLOSED"
            if line == "PONG":
                return err or "PONG"
            if line.startswith("-ERR") and not err:
                err = line
            elif line.startswith("MSG "):
                self.msgs.append(line.split()[1])
                self.read_line()  # payload

    def exchange(self, lines: str) -> str:
        self.send(lines + "PING\r\n")
        return self.read_until_pong()

    def close(self) -> None:
        self.sock.close()
