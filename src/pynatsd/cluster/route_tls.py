"""A route connection on a cluster with `tls {}`: the TLS handshake before anything else, then
the route protocol inside it.

Corresponds to the TLS step of nats-server's `createRoute` (`server/route.go`) and
`doTLSHandshake` (`server/client.go`): on a TLS cluster both sides start with the handshake,
the dialing side as the TLS client (verifying the peer against the CA file and the route URL's
host), the accepting side as the TLS server (always asking for and verifying the peer's
certificate), within the block's `timeout`; only then does the route protocol begin (INFO from
the accepting side, CONNECT from the dialing one, "Route connection created"). A peer that is
not TLS, a bad certificate or a slow handshake closes the connection with an [ERR] log line
naming the cause ("TLS route handshake error: ...", "TLS handshake timeout").

The plain `Route` pays nothing for this: the cluster makes `TLSRoute`s only when TLS is on.
"""

from __future__ import annotations

import asyncio
import logging
import ssl
from typing import cast

from pynatsd.cluster.route import Route
from pynatsd.logger import log
from pynatsd.protocol import errors
from pynatsd.protocol.errors import CloseReason
from pynatsd.protocol.frames import err_frame
from pynatsd.server.tls_session import NotTLS, TLSSession, TLSTransport
from pynatsd.tls import go_handshake_error, go_tls_names, pin_matches

# nats-server's ErrCertNotPinned.
CERT_NOT_PINNED = "certificate not pinned"


class TLSRoute(Route):
    """A route whose bytes are TLS records from the first one."""

    # Per connection, set as the handshake goes (class defaults until then).
    _tls: TLSTransport | None = None
    _handshaking = True  # the route protocol has not started yet
    _timer: asyncio.TimerHandle | None = None  # the handshake's deadline

    def connection_made(self, base: asyncio.BaseTransport) -> None:
        raw = cast(asyncio.Transport, base)
        peer_tls = self.cluster.tls
        assert peer_tls is not None
        if self.solicited:
            session = TLSSession(peer_tls.dial, self.cluster.tls_server_name(self.url))
        else:
            session = TLSSession(peer_tls.accept)
        tls = self._tls = TLSTransport(raw, session)
        if not self._opened(tls):
            return
        if log.isEnabledFor(logging.DEBUG):
            side = "client" if self.solicited else "server"
            log.debug("%s - Starting TLS route %s handshake", self.label, side)
        self._timer = self.server.loop.call_later(peer_tls.block.timeout, self._timed_out)
        if self.solicited:
            session.start()
            raw.write(session.data_to_send())

    def data_received(self, data: bytes) -> None:
        if self.closed:
            return
        tls = self._tls
        assert tls is not None
        try:
            plain = tls.receive(data)
        except (NotTLS, ssl.SSLError) as e:
            self._tls_failed(e)
            return
        if self._handshaking and (not tls.session.established or not self._handshake_done()):
            return
        if plain:
            Route.data_received(self, plain)
        if tls.session.peer_closed and not self.closed:
            self.close(CloseReason.CLIENT_CLOSED)

    def _tls_failed(self, error: Exception) -> None:
        if not self._handshaking:
            # A broken record on an established route: a read error, as in crypto/tls.
            reason = error.reason if isinstance(error, ssl.SSLError) else None
            log.error("%s - Error reading from route: %s", self.label, reason or error)
            self.close(CloseReason.READ_ERROR)
            return
        text = go_handshake_error(error) if isinstance(error, ssl.SSLError) else str(error)
        self._handshake_error(text)

    def _handshake_error(self, text: str) -> None:
        # Always an error for routes: their port is not for load balancers' probes.
        log.error("%s - TLS route handshake error: %s", self.label, text)
        self.close(CloseReason.TLS_HANDSHAKE_ERROR)

    def _handshake_done(self) -> bool:
        """Check a pinned certificate, then start the route protocol; False when the
        connection was closed instead."""
        self._handshaking = False
        self._cancel_timer()
        tls = self._tls
        assert tls is not None
        peer_tls = self.cluster.tls
        assert peer_tls is not None
        if not pin_matches(peer_tls.block.pinned_certs, tls.session.peer_cert()):
            self._handshake_error(CERT_NOT_PINNED)
            return False
        if log.isEnabledFor(logging.DEBUG):
            version, cipher = go_tls_names(tls.session.ssl_object)
            log.debug("%s - TLS handshake complete", self.label)
            log.debug("%s - TLS version %s, cipher suite %s", self.label, version, cipher)
        self._begin()
        return not self.closed

    def _timed_out(self) -> None:
        self._timer = None
        if self.closed or not self._handshaking:
            return
        log.error("%s - TLS handshake timeout", self.label)
        # Like nats-server's, this -ERR goes to a TLS connection that never came up: it never
        # leaves (the transport drops what waits for the handshake).
        self.outbound.push(err_frame(errors.SECURE_CONNECTION_TLS_REQUIRED))
        self.close(CloseReason.TLS_HANDSHAKE_ERROR)

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.closed and self._handshaking:
            self._handshake_error("EOF")
            return
        super().connection_lost(exc)

    def _cancel_timer(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def close(self, reason: str, abort: bool = False) -> None:
        self._cancel_timer()
        super().close(reason, abort)
