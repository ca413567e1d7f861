"""asyncio raw-protocol clients for server tests: bytes in, bytes out, no client library between.

- `RawClient`: send bytes, read up to a marker or until the server goes quiet or closes.
- `RawRequester`: requests with exact header bytes on the wire, one at a time, JSON replies
  (the JetStream API over the bare protocol).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from typing import Any

from support.ports import LOOPBACK


class RawClient:
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer
        self.info = b""

    @classmethod
    async def connect(cls, port: int, read_info: bool = True) -> RawClient:
        reader, writer = await asyncio.open_connection(LOOPBACK, port)
        client = cls(reader, writer)
        if read_info:
            client.info = await asyncio.wait_for(reader.readline(), 5)
        return client

    async def send(self, data: bytes) -> None:
        self.writer.write(data)
        await self.writer.drain()

    async def read_until(self, marker: bytes, timeout: float = 5) -> bytes:
        """Everything up to and including `marker` (raises on EOF before it)."""
        return await asyncio.wait_for(self.reader.readuntil(marker), timeout)

    async def read_all(self, quiet: float = 0.2, limit: float = 5) -> tuple[bytes, bool]:
        """Everything until `quiet` seconds pass with no data; and whether the server closed."""
        out = b""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + limit
        while loop.time() < deadline:
            try:
                chunk = await asyncio.wait_for(self.reader.read(65536), quiet)
            except TimeoutError:
                return out, False
            if not chunk:
                return out, True
            out += chunk
        return out, False

    async def close(self) -> None:
        self.writer.close()
        with contextlib.suppress(ConnectionError, OSError):
            await self.writer.wait_closed()


class RawRequester:
    """A minimal NATS requester: exact header bytes on the wire, one request at a time, replies
    on `_R.<n>` parsed as JSON."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer
        self.n = 0

    @classmethod
    async def connect(cls, port: int) -> RawRequester:
        reader, writer = await asyncio.open_connection(LOOPBACK, port)
        await reader.readline()
        writer.write(b'CONNECT {"verbose":false,"headers":true}\r\nSUB _R.* 1\r\nPING\r\n')
        while (await reader.readline()).strip() != b"PONG":
            pass
        return cls(reader, writer)

    async def request(self, subject: str, data: bytes, header: bytes = b"") -> dict[str, Any]:
        self.n += 1
        reply = f"_R.{self.n}"
        if header:
            self.writer.write(
                b"HPUB %s %s %d %d\r\n%s%s\r\n"
                % (
                    subject.encode(),
                    reply.encode(),
                    len(header),
                    len(header) + len(data),
                    header,
                    data,
                )
            )
        else:
            self.writer.write(
                b"PUB %s %s %d\r\n%s\r\n" % (subject.encode(), reply.encode(), len(data), data)
            )
        while True:
            line = await asyncio.wait_for(self.reader.readline(), 5)
            if line.startswith(b"MSG"):
                size = int(line.split()[-1])
                body = await self.reader.readexactly(size + 2)
                result: dict[str, Any] = json.loads(body[:-2])
                return result

    async def api(self, subject: str, body: dict[str, Any] | None = None) -> dict[str, Any]:
        return await self.request(subject, json.dumps(body or {}).encode())

    def close(self) -> None:
        self.writer.close()
