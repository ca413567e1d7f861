"""TLS for one client connection over memory buffers: ciphertext in, plaintext out, and back.

Corresponds to the `crypto/tls` server connection nats-server wraps around a client's socket
(`tls.Server(conn, config)` in `client.go`'s `doTLSHandshake`, then its `Read`, `Write` and
`Close`). `TLSSession` is sans-IO (an `ssl.SSLObject` between two `ssl.MemoryBIO`s): it owns no
socket, so every byte the peer sends after INFO is TLS input, whenever and however the event
loop delivers it. `TLSTransport` is what a TLS client's `Outbound` writes to: it encrypts a
whole flush at once and hands the records to the TCP transport.
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
from typing import Any

# Plaintext taken per SSLObject.read call; OpenSSL returns at most one record (16 KiB) per call.
_READ_SIZE = 256 * 1024
# TLS record content types a client may open a connection with (crypto/tls accepts these two).
_ALERT, _HANDSHAKE = 0x15, 0x16
_RECORD_HEADER = 5


class NotTLS(Exception):
    """The first record does not look like TLS: a plain-text client on a TLS port.

    crypto/tls answers it with nothing (no alert) and nats-server closes the connection."""

    def __init__(self) -> None:
        super().__init__("tls: first record does not look like a TLS handshake")


class TLSSession:
    """One TLS connection (the server side unless told a server hostname), driven by
    `receive` and `encrypt`."""

    __slots__ = ("_head", "_incoming", "_outgoing", "_ssl", "established", "peer_closed")

    def __init__(self, context: ssl.SSLContext, server_hostname: str | None = None) -> None:
        self._incoming = ssl.MemoryBIO()
        self._outgoing = ssl.MemoryBIO()
        # With `server_hostname`, the client side (a leaf node dialing its hub), which
        # verifies the server's certificate for that name and speaks first (`start`).
        client = server_hostname is not None
        self._ssl = context.wrap_bio(
            self._incoming, self._outgoing, server_side=not client, server_hostname=server_hostname
        )
        # The first bytes, kept until a whole record header can be checked; None afterwards.
        self._head: bytearray | None = None if client else bytearray()
        self.established = False  # the handshake completed
        self.peer_closed = False  # the peer sent close_notify

    def start(self) -> None:
        """The client side's first flight (its ClientHello waits in `data_to_send`)."""
        with contextlib.suppress(ssl.SSLWantReadError):
            self._ssl.do_handshake()

    @property
    def ssl_object(self) -> ssl.SSLObject:
        return self._ssl

    def receive(self, data: bytes) -> bytes:
        """Take bytes from the peer; return the plaintext they complete (b"" for none yet).

        Raises NotTLS for a plain-text client and ssl.SSLError when the peer breaks TLS. Records
        to send back (handshake, alerts, session tickets) wait in `data_to_send`."""
        if self._head is not None:
            data = self._check_first_record(data)
            if not data:
                return b""
        self._incoming.write(data)
        if not self.established:
            try:
                self._ssl.do_handshake()
            except ssl.SSLWantReadError:
                return b""
            self.established = True
        return self._read_plaintext()

    def _check_first_record(self, data: bytes) -> bytes:
        """crypto/tls's check of the first record header: a handshake (or alert) record with
        a version below 0x1000, or the client is not speaking TLS."""
        head = self._head
        assert head is not None
        head += data
        if len(head) < _RECORD_HEADER:
            return b""
        self._head = None
        version = head[1] << 8 | head[2]
        if head[0] not in (_HANDSHAKE, _ALERT) or version >= 0x1000:
            raise NotTLS
        return bytes(head)

    def _read_plaintext(self) -> bytes:
        read = self._ssl.read
        chunks = []
        try:
            while True:
                chunk = read(_READ_SIZE)
                if not chunk:  # close_notify: the peer will send nothing more
                    self.peer_closed = True
                    break
                chunks.append(chunk)
        except ssl.SSLWantReadError:
            pass
        except ssl.SSLZeroReturnError:
            self.peer_closed = True
        if len(chunks) == 1:
            return chunks[0]
        return b"".join(chunks)

    @property
    def received_any(self) -> bool:
        """The peer has sent something (the server side; a client speaks first)."""
        return self._head is None or bool(self._head)

    def data_to_send(self) -> bytes:
        """TLS records waiting for the peer."""
        return self._outgoing.read()

    def encrypt(self, data: bytes | bytearray | memoryview) -> bytes:
        """The records carrying `data` (call only once `established`)."""
        write = self._ssl.write
        view = memoryview(data)
        while view:
            view = view[write(view) :]
        return self._outgoing.read()

    def close_notify(self) -> bytes:
        """The close_notify alert (crypto/tls sends one on Close once the handshake is done);
        the peer's own close_notify is not awaited."""
        # SSLWantReadError: the peer's close_notify has not arrived (and is not waited for).
        with contextlib.suppress(ssl.SSLError):
            self._ssl.unwrap()
        return self._outgoing.read()

    def peer_cert(self) -> bytes | None:
        """The client certificate (DER) the handshake verified, or None."""
        return self._ssl.getpeercert(binary_form=True)


class TLSTransport(asyncio.Transport):
    """What a TLS client writes to: plaintext in, TLS records out to the TCP transport.

    Writes made before the handshake completes wait and leave, encrypted, right after it;
    a connection closed before then sends none of them (nothing leaves in plain text)."""

    def __init__(self, raw: asyncio.Transport, session: TLSSession) -> None:
        super().__init__()
        self.raw = raw
        self.session = session
        self._early: list[bytes] = []
        self._early_size = 0

    def receive(self, data: bytes) -> bytes:
        """Bytes from the peer in, plaintext out; the session's replies go out at once."""
        session = self.session
        try:
            return session.receive(data)
        finally:
            out = session.data_to_send()
            if out:
                self.raw.write(out)
            if self._early and session.established:
                self._write_early()

    def _write_early(self) -> None:
        early = b"".join(self._early)
        self._early.clear()
        self._early_size = 0
        self.raw.write(self.session.encrypt(early))

    def write(self, data: bytes | bytearray | memoryview) -> None:
        session = self.session
        if session.established:
            self.raw.write(session.encrypt(data))
        else:
            self._early.append(bytes(data))
            self._early_size += len(data)

    def close(self) -> None:
        if self.session.established and not self.raw.is_closing():
            self.raw.write(self.session.close_notify())
        self.raw.close()

    def abort(self) -> None:
        self.raw.abort()

    def is_closing(self) -> bool:
        return self.raw.is_closing()

    def get_write_buffer_size(self) -> int:
        # Encryption happens in `write`, so what waits is the TCP transport's buffer plus
        # plaintext written before the handshake completed.
        return self.raw.get_write_buffer_size() + self._early_size

    def get_write_buffer_limits(self) -> tuple[int, int]:
        return self.raw.get_write_buffer_limits()

    def set_write_buffer_limits(self, high: int | None = None, low: int | None = None) -> None:
        self.raw.set_write_buffer_limits(high, low)

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        if name == "ssl_object":
            return self.session.ssl_object
        if name == "peercert":
            return self.session.ssl_object.getpeercert()
        if name == "cipher":
            return self.session.ssl_object.cipher()
        return self.raw.get_extra_info(name, default)

    def is_reading(self) -> bool:
        return self.raw.is_reading()

    def pause_reading(self) -> None:
        self.raw.pause_reading()

    def resume_reading(self) -> None:
        self.raw.resume_reading()

    def can_write_eof(self) -> bool:
        return False
