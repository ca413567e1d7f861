"""A raw protocol client for server tests: bytes in, bytes out, no client library in between."""

from __future__ import annotations

import asyncio
import contextlib


class RawClient:
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer
        self.info = b""

    @classmethod
    async def connect(cls, port: int, read_info: bool = True) -> RawClient:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
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
