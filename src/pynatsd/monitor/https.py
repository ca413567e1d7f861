"""The HTTPS monitoring listener: TLS in front of the same HTTP handler.

nats-server's `startMonitoring(secure)` (server.go) listens with `tls.Listen` and serves with Go's
`net/http`, which answers a client that speaks plain HTTP to it with a fixed 400 response
instead of a TLS alert. Each connection's first five bytes are looked at (without reading them)
to do the same; anything else goes through the TLS handshake to the handler.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import ssl
from collections.abc import Awaitable, Callable

Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]

# Go's net/http (server.go), for a TLS record header that reads as an HTTP request.
PLAIN_HTTP_ANSWER = (
    b"HTTP/1.0 400 Bad Request\r\n\r\nClient sent an HTTP request to an HTTPS server.\n"
)
_HTTP_STARTS = (b"GET /", b"HEAD ", b"POST ", b"PUT /", b"OPTIO")  # tlsRecordHeaderLooksLikeHTTP
_RECORD_HEADER = 5
_FIRST_BYTES_TIMEOUT = 5.0  # Go's ReadHeaderTimeout for the monitoring server
_HANDSHAKE_TIMEOUT = 5.0


class HttpsListener:
    """Accepts on `sock` until closed; each connection is served by `handle` over TLS."""

    def __init__(self, sock: socket.socket, context: ssl.SSLContext, handle: Handler) -> None:
        self._sock = sock
        self._context = context
        self._handle = handle
        self._accepting: asyncio.Task[None] | None = None
        self._connections: set[asyncio.Task[None]] = set()

    @property
    def port(self) -> int:
        return int(self._sock.getsockname()[1])

    def start(self) -> None:
        self._sock.setblocking(False)
        self._accepting = asyncio.get_running_loop().create_task(self._accept())

    def close(self) -> None:
        """Stops accepting; connections being served finish on their own (as asyncio's
        `Server.close` leaves them)."""
        if self._accepting is not None:
            self._accepting.cancel()
            self._accepting = None
        self._sock.close()

    async def _accept(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            conn, _ = await loop.sock_accept(self._sock)
            conn.setblocking(False)
            task = loop.create_task(self._serve(conn))
            self._connections.add(task)
            task.add_done_callback(self._connections.discard)

    async def _serve(self, conn: socket.socket) -> None:
        loop = asyncio.get_running_loop()
        try:
            first = await asyncio.wait_for(_peek_record_header(conn), _FIRST_BYTES_TIMEOUT)
            if not first:
                conn.close()
                return
            if first.startswith(_HTTP_STARTS):
                await loop.sock_sendall(conn, PLAIN_HTTP_ANSWER)
                conn.close()
                return
            reader = asyncio.StreamReader()
            protocol = asyncio.StreamReaderProtocol(reader)
            transport, _ = await loop.connect_accepted_socket(
                lambda: protocol, conn, ssl=self._context, ssl_handshake_timeout=_HANDSHAKE_TIMEOUT
            )
        except (OSError, TimeoutError, ssl.SSLError):
            conn.close()
            return
        writer = asyncio.StreamWriter(transport, protocol, reader, loop)
        await self._handle(reader, writer)


async def _peek_record_header(conn: socket.socket) -> bytes:
    """The connection's first five bytes (fewer if it ends sooner), left unread for TLS."""
    loop = asyncio.get_running_loop()
    while True:
        readable: asyncio.Future[None] = loop.create_future()
        loop.add_reader(conn.fileno(), _set_once, readable)
        try:
            await readable
        finally:
            loop.remove_reader(conn.fileno())
        with contextlib.suppress(BlockingIOError):
            data = conn.recv(_RECORD_HEADER, socket.MSG_PEEK)
            if len(data) == _RECORD_HEADER or not data:
                return data
            # A header split across packets: wait for the rest without spinning on it.
            await asyncio.sleep(0.01)


def _set_once(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)
