"""A raw NATS client over TLS that controls when its TLS bytes leave (ssl.MemoryBIO over asyncio
streams), for the TLS connect tests.

Three ways to start, as `connect(..., start=...)`:
- "info-first": read INFO in plain text, then the handshake (what nats.py does);
- "eager": send the ClientHello at once, before INFO has arrived, then read INFO and finish
  the handshake (a fast client; it is what a slow server sees from every client);
- "handshake-first": TLS from the first byte, INFO over TLS (`handshake_first`).
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
from typing import Literal

Start = Literal["info-first", "eager", "handshake-first"]
READ = 65536


class TLSClient:
    """One connection: plain-text bytes before TLS, then TLS records through an SSLObject."""

    def __init__(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        ctx: ssl.SSLContext,
        server_hostname: str = "localhost",
    ) -> None:
        self.reader, self.writer = reader, writer
        self._in, self._out = ssl.MemoryBIO(), ssl.MemoryBIO()
        self.tls = ctx.wrap_bio(self._in, self._out, server_hostname=server_hostname)
        self._plain = bytearray()  # decrypted, not yet read

    def _flush(self) -> None:
        out = self._out.read()
        if out:
            self.writer.write(out)

    async def _more(self) -> None:
        data = await self.reader.read(READ)
        if not data:
            raise ConnectionError("connection closed by the server")
        self._in.write(data)

    def send_client_hello(self) -> None:
        with contextlib.suppress(ssl.SSLWantReadError):
            self.tls.do_handshake()
        self._flush()

    async def handshake(self) -> None:
        while True:
            try:
                self.tls.do_handshake()
                self._flush()
                return
            except ssl.SSLWantReadError:
                self._flush()
            await self._more()

    async def read_plain_line(self) -> bytes:
        """A line before TLS (the INFO of an INFO-first server); what follows it is TLS."""
        buf = bytearray()
        while b"\r\n" not in buf:
            data = await self.reader.read(READ)
            if not data:
                raise ConnectionError(f"connection closed after {bytes(buf)!r}")
            buf += data
        end = buf.index(b"\r\n") + 2
        self._in.write(bytes(buf[end:]))
        return bytes(buf[:end])

    def send(self, data: bytes) -> None:
        self.tls.write(data)
        self._flush()

    async def read_line(self) -> bytes:
        while b"\r\n" not in self._plain:
            try:
                chunk = self.tls.read(READ)
            except ssl.SSLWantReadError:
                await self._more()
                continue
            if not chunk:
                raise ConnectionError("close_notify from the server")
            self._plain += chunk
        end = self._plain.index(b"\r\n") + 2
        line = bytes(self._plain[:end])
        del self._plain[:end]
        return line

    async def read_rest(self) -> tuple[bytes, str]:
        """Everything until the connection ends, and how it ended: "close_notify" or "eof"
        (the TCP connection closed without one)."""
        data = bytes(self._plain)
        self._plain.clear()
        while True:
            try:
                chunk = self.tls.read(READ)
            except ssl.SSLWantReadError:
                more = await self.reader.read(READ)
                if not more:
                    return data, "eof"
                self._in.write(more)
                continue
            except ssl.SSLZeroReturnError:
                return data, "close_notify"
            if not chunk:
                return data, "close_notify"
            data += chunk

    def close_notify(self) -> None:
        with contextlib.suppress(ssl.SSLWantReadError):
            self.tls.unwrap()
        self._flush()

    def close(self) -> None:
        self.writer.close()


async def connect(
    host: str, port: int, ctx: ssl.SSLContext, start: Start
) -> tuple[TLSClient, bytes]:
    """Open a connection and complete the handshake the given way; returns it and the INFO line."""
    reader, writer = await asyncio.open_connection(host, port)
    client = TLSClient(reader, writer, ctx)
    try:
        if start == "handshake-first":
            await client.handshake()
            info = await client.read_line()
        else:
            if start == "eager":
                client.send_client_hello()
            info = await client.read_plain_line()
            await client.handshake()
    except BaseException:
        writer.close()
        raise
    return client, info


async def connect_and_ping(
    host: str,
    port: int,
    ctx: ssl.SSLContext,
    start: Start,
    connect_line: bytes = b'CONNECT {"verbose":false}',
) -> TLSClient:
    """A complete connect: handshake, INFO, CONNECT and PING, PONG read back."""
    client, info = await connect(host, port, ctx, start)
    try:
        if not info.startswith(b"INFO "):
            raise ConnectionError(f"expected INFO, got {info[:60]!r}")
        client.send(connect_line + b"\r\nPING\r\n")
        line = await client.read_line()
        if line != b"PONG\r\n":
            raise ConnectionError(f"expected PONG, got {line[:80]!r}")
    except BaseException:
        client.close()
        raise
    return client
