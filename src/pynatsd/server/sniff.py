"""Does a client start with a TLS handshake? For `allow_non_tls`, where TLS is offered, not
required.

Corresponds to the `sniffTLS` step of nats-server's `createClientEx` (server.go): with
`allow_non_tls`, the server sends INFO (`tls_available`), reads the client's first bytes (for at
most the TLS timeout) and starts TLS only if the first one opens a TLS record (0x16, a
handshake); any other byte, or none, and the connection goes on in plain text. Here the byte is
peeked, not read, so the TLS layer or the protocol parser still gets it.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket

# The first byte of a TLS record that carries a handshake (a ClientHello).
_TLS_HANDSHAKE = 0x16


async def client_starts_tls(
    loop: asyncio.AbstractEventLoop, transport: asyncio.BaseTransport, timeout: float
) -> bool:
    """Wait (at most `timeout` seconds) for the client's first byte without taking it from the
    socket: True if it opens a TLS handshake. The caller has paused the transport's reading."""
    raw = transport.get_extra_info("socket")
    if raw is None:
        return True  # not a socket we can look into: TLS, as without allow_non_tls
    try:
        # A descriptor of our own: the transport owns (and the loop watches) the original.
        peek = socket.socket(fileno=os.dup(raw.fileno()))
    except OSError:
        return True
    with peek:
        ready = loop.create_future()

        def readable() -> None:
            if not ready.done():
                ready.set_result(None)

        fd = peek.fileno()
        loop.add_reader(fd, readable)
        try:
            await asyncio.wait_for(ready, timeout)
        except TimeoutError:
            return False  # a client that says nothing is not starting TLS
        finally:
            loop.remove_reader(fd)
        peek.setblocking(False)
        first = b""
        with contextlib.suppress(OSError):
            first = peek.recv(1, socket.MSG_PEEK)
        return first[:1] == bytes([_TLS_HANDSHAKE])
