"""A client connection on a TLS port: the handshake, its timeout, and records around the protocol.

Corresponds to the TLS steps of nats-server's `createClient` (`server/server.go`): INFO in plain
text and then the server-side handshake (`doTLSServerHandshake`), or with `handshake_first` the
handshake and then INFO, or with a `handshake_first` fallback delay INFO in plain text to a
client that stays silent that long; with `allow_non_tls`, TLS or plain text as the client's
first byte says (`sniffTLS`); `tlsTimeout`; `connection_rate_limit` (`rate_counter.go`); and
`matchesPinnedCert` (`server/auth.go`).

Every byte the client sends goes through the connection's own `TLSSession` from the first one
(server/tls_session.py), so a ClientHello that arrives early is TLS input like any other: there
is no moment at which the event loop hands TLS bytes to the NATS parser or plain text to TLS.
The authentication and first PING timers start once the handshake is done, as in nats-server.
"""

from __future__ import annotations

import asyncio
import enum
import logging
import ssl
import time
from typing import TYPE_CHECKING, cast

from pynatsd.logger import log
from pynatsd.protocol import errors
from pynatsd.protocol.errors import CloseReason
from pynatsd.protocol.frames import err_frame
from pynatsd.server.client import Client
from pynatsd.server.tls_session import NotTLS, TLSSession, TLSTransport
from pynatsd.tls import go_tls_names, pinned_cert_ok

if TYPE_CHECKING:
    from pynatsd.server.server import Server


class Stage(enum.Enum):
    """Where a TLS port's connection is before its bytes are protocol."""

    WAIT_FOR_CLIENT = enum.auto()  # handshake_first with a fallback: does the client speak?
    SNIFF = enum.auto()  # allow_non_tls: is the client's first byte a TLS record?
    HANDSHAKE = enum.auto()
    TLS = enum.auto()  # the handshake is done: records in, records out
    PLAIN = enum.auto()  # allow_non_tls and the client chose plain text


_TLS_STAGE = Stage.TLS  # read on every read of a TLS connection
# nats-server reads this much, or waits the TLS timeout, to tell TLS from plain text.
_SNIFF_BYTES = 6
_TLS_HANDSHAKE_RECORD = 0x16


class ConnectionRate:
    """`tls { connection_rate_limit }`: at most `limit` TLS handshakes started per second, as
    nats-server's rateCounter (a one-second window opens with the first connection after the
    previous window ended; refused ones count too); refusals are logged once a second."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._count = 0
        self._window_end = 0.0
        self._blocked = 0

    def allow(self, loop: asyncio.AbstractEventLoop) -> bool:
        now = time.monotonic()
        if now > self._window_end:
            self._count = 0
            self._window_end = now + 1.0
        else:
            self._count += 1
        if self._count < self.limit:
            return True
        if self._blocked == 0:
            loop.call_later(1.0, self._report)
        self._blocked += 1
        return False

    def _report(self) -> None:
        blocked, self._blocked = self._blocked, 0
        log.warning("Rejected %d connections due to TLS rate limiting", blocked)


class TLSClient(Client):
    """A client connection on the client port with `tls {}`."""

    __slots__ = ("_info_after_handshake", "_sniffed", "_stage", "_timer", "_tls")

    _tls: TLSTransport  # set in connection_made

    def __init__(self, server: Server) -> None:
        super().__init__(server)
        self._stage = Stage.HANDSHAKE
        self._timer: asyncio.TimerHandle | None = None  # the stage's deadline
        self._info_after_handshake = False
        self._sniffed = b""  # allow_non_tls: the first bytes, until TLS or plain is decided

    def connection_made(self, base: asyncio.BaseTransport) -> None:
        raw = cast(asyncio.Transport, base)
        context = self.server.tls_context
        assert context is not None
        tls = self._tls = TLSTransport(raw, TLSSession(context))
        if not self.admit(raw):  # refusals go out in plain text, as nats-server's do
            return
        self.transport = tls
        self.outbound.transport = tls
        opts = self.server.options
        if not opts.tls_handshake_first:
            raw.write(self.greeting())
            self._after_plain_info()
            return
        self._info_after_handshake = True
        if opts.tls_handshake_first_fallback > 0:
            # Wait that long for the client to speak first (a ClientHello); silence means a
            # client that expects INFO first.
            self._enter(Stage.WAIT_FOR_CLIENT, opts.tls_handshake_first_fallback)
        else:
            self._start_handshake()

    def greeting(self) -> bytes:
        # With handshake_first nothing leaves in plain text before the handshake (a refusal's
        # -ERR aside); the INFO follows it.
        if self.server.options.tls_handshake_first:
            return b""
        return super().greeting()

    def _enter(self, stage: Stage, deadline: float) -> None:
        if self._timer is not None:
            self._timer.cancel()
        self._stage = stage
        self._timer = self.server.loop.call_later(deadline, self._deadline)

    def _after_plain_info(self) -> None:
        if self.server.options.allow_non_tls:
            self._enter(Stage.SNIFF, self.server.options.tls_timeout)
        else:
            self._start_handshake()

    def _start_handshake(self) -> bool:
        """The handshake starts (its timeout runs), unless the TLS connection rate is over its
        limit: then the client is told in plain text and the connection closes (False)."""
        server = self.server
        rate = server.tls_rate
        if rate is not None and not rate.allow(server.loop):
            self._tls.raw.write(err_frame(errors.CONNECTION_THROTTLING))
            self.close(CloseReason.MAX_CONNECTIONS_EXCEEDED)
            return False
        if log.isEnabledFor(logging.DEBUG):
            log.debug("%s - Starting TLS client connection handshake", self.label)
        self._enter(Stage.HANDSHAKE, server.options.tls_timeout)
        return True

    def _deadline(self) -> None:
        self._timer = None
        if self.closed:
            return
        stage = self._stage
        if stage is Stage.HANDSHAKE:
            # What the client sees is the close: nats-server's "-ERR 'Secure Connection - TLS
            # Required'" goes to the TLS connection that never came up, so it never leaves.
            log.debug("%s - TLS handshake timeout", self.label)
            self.close(CloseReason.TLS_HANDSHAKE_ERROR)
        elif stage is Stage.WAIT_FOR_CLIENT:
            self._info_after_handshake = False
            self._tls.raw.write(Client.greeting(self))
            self._after_plain_info()
        elif stage is Stage.SNIFF:
            self._sniff_decided()

    # -- bytes from the client -------------------------------------------------------------------

    def data_received(self, data: bytes) -> None:
        if self.closed:
            return
        stage = self._stage
        if stage is _TLS_STAGE:
            tls = self._tls
            try:
                plain = tls.receive(data)
            except ssl.SSLError as e:  # a broken record: a read error, as in crypto/tls
                log.error("%s - Error reading from client: %s", self.label, e.reason or e)
                self.close(CloseReason.READ_ERROR)
                return
            if plain:
                Client.data_received(self, plain)
            if tls.session.peer_closed and not self.closed:
                self.close(CloseReason.CLIENT_CLOSED)
        elif stage is Stage.PLAIN:
            Client.data_received(self, data)
        elif stage is Stage.HANDSHAKE:
            self._handshake_data(data)
        elif stage is Stage.WAIT_FOR_CLIENT:  # the client spoke first: handshake first
            if self._start_handshake():
                self._handshake_data(data)
        else:
            self._sniffed += data
            if len(self._sniffed) >= _SNIFF_BYTES:
                self._sniff_decided()

    def _handshake_data(self, data: bytes) -> None:
        tls = self._tls
        try:
            plain = tls.receive(data)
        except NotTLS as e:
            # Go logs a non-TLS client (a probe, a load balancer) at debug level only.
            log.debug("%s - TLS handshake error: %s", self.label, e)
            self.close(CloseReason.TLS_HANDSHAKE_ERROR)
            return
        except ssl.SSLError as e:
            log.error("%s - TLS handshake error: %s", self.label, e.reason or e)
            self.close(CloseReason.TLS_HANDSHAKE_ERROR)
            return
        if not tls.session.established or not self._handshake_done():
            return
        if plain:
            Client.data_received(self, plain)
        if tls.session.peer_closed and not self.closed:
            self.close(CloseReason.CLIENT_CLOSED)

    def _sniff_decided(self) -> None:
        """allow_non_tls: a first byte that opens a TLS handshake record means TLS; anything
        else, or silence for the TLS timeout, means plain text (nats-server's sniffTLS)."""
        sniffed, self._sniffed = self._sniffed, b""
        if sniffed[:1] == bytes([_TLS_HANDSHAKE_RECORD]):
            if self._start_handshake():
                self._handshake_data(sniffed)
            return
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._stage = Stage.PLAIN
        self.transport = self.outbound.transport = self._tls.raw
        self.start_timers()
        if sniffed:
            Client.data_received(self, sniffed)

    def _handshake_done(self) -> bool:
        """The handshake just completed: check a pinned certificate, keep the client's
        certificate for authentication, send a delayed INFO, start the timers. False when the
        connection was closed instead."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._stage = Stage.TLS
        session = self._tls.session
        peer_cert = session.peer_cert()
        opts = self.server.options
        if opts.tls_pinned_certs and not pinned_cert_ok(opts, peer_cert):
            log.error("%s - TLS handshake error: certificate not pinned", self.label)
            self.close(CloseReason.TLS_HANDSHAKE_ERROR)
            return False
        self.peer_cert = peer_cert
        if self._info_after_handshake:
            self._tls.write(Client.greeting(self))
        self.start_timers()
        if log.isEnabledFor(logging.DEBUG):
            version, cipher = go_tls_names(session.ssl_object)
            log.debug("%s - TLS handshake complete", self.label)
            log.debug("%s - TLS version %s, cipher suite %s", self.label, version, cipher)
        return True

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.closed and self._stage in (Stage.HANDSHAKE, Stage.WAIT_FOR_CLIENT):
            log.error("%s - TLS handshake error: EOF", self.label)
            self.close(CloseReason.TLS_HANDSHAKE_ERROR)
            return
        super().connection_lost(exc)

    def close(self, reason: str = CloseReason.SERVER_SHUTDOWN, abort: bool = False) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        super().close(reason, abort)
