"""A connection to another server on a part with `tls {}` (a route, a gateway): the TLS
handshake before anything else, then the link's own protocol inside it.

Corresponds to nats-server's `doTLSHandshake` (`server/client.go`) as `createRoute`
(`server/route.go`) and `createGateway` (`server/gateway.go`) use it: both sides start with the
handshake, the dialing side as the TLS client (verifying the peer against the CA file and a
server name), the accepting side as the TLS server (always asking for and verifying the peer's
certificate), within the block's `timeout`; then the pinned certificates are checked, and only
then does the link's protocol begin. A peer that is not TLS, a bad certificate or a slow
handshake closes the connection with an [ERR] line naming the cause ("TLS route handshake
error: ...", "TLS gateway handshake error: ...", "TLS handshake timeout").

`TLSLink` is a mixin placed before the link class (`class TLSRoute(TLSLink, Route)`): that class
gives `_opened` (the connection is there: keep it or not) and `_begin` (its protocol starts),
this one what TLS needs (`tls_setup`, `tls_pins`). Plain links pay nothing for it.
"""

from __future__ import annotations

import asyncio
import ipaddress
import logging
import ssl
from collections.abc import Iterable
from typing import TYPE_CHECKING, cast

from pynatsd.cluster.link import Link
from pynatsd.logger import log
from pynatsd.protocol import errors
from pynatsd.protocol.errors import CloseReason
from pynatsd.protocol.frames import err_frame
from pynatsd.server.tls_session import NotTLS, TLSSession, TLSTransport
from pynatsd.tls import go_handshake_error, go_tls_names, pin_matches

# nats-server's ErrCertNotPinned.
CERT_NOT_PINNED = "certificate not pinned"


def is_ip(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


def first_host_name(hosts: Iterable[str]) -> str:
    """The first of `hosts` that is a name, not an IP ("" if none): what a dialed TLS link
    verifies when its URL names an IP (nats-server's routeTLSName, a gateway's tlsName)."""
    return next((host for host in hosts if not is_ip(host)), "")


def server_name(host: str, tls_name: str) -> str:
    """The name a dialed TLS link checks the peer's certificate against: the URL's `host`, or
    for an IP `tls_name`, if any (doTLSHandshake's ServerName)."""
    return tls_name if tls_name and is_ip(host) else host


class TLSLink(Link):
    """A link whose bytes are TLS records from the first one."""

    tls_kind = "link"  # "route", "gateway": nats-server's word in its TLS log lines

    # Per connection, set as the handshake goes (class defaults until then).
    _tls: TLSTransport | None = None
    _handshaking = True  # the link's protocol has not started yet
    _timer: asyncio.TimerHandle | None = None  # the handshake's deadline

    if TYPE_CHECKING:
        # Given by the link class after this one.
        solicited: bool

        def _opened(self, base: asyncio.BaseTransport) -> bool: ...

        def _begin(self) -> None: ...

    def tls_setup(self) -> tuple[ssl.SSLContext, str | None, float]:
        """The context, the server name to verify (None: the accepting side) and the
        handshake's timeout."""
        raise NotImplementedError

    def tls_pins(self) -> list[str]:
        """The pinned certificates the peer's must be one of (none: any)."""
        raise NotImplementedError

    def connection_made(self, base: asyncio.BaseTransport) -> None:
        raw = cast(asyncio.Transport, base)
        context, server_name, timeout = self.tls_setup()
        session = TLSSession(context, server_name)
        tls = self._tls = TLSTransport(raw, session)
        if not self._opened(tls):
            return
        if log.isEnabledFor(logging.DEBUG):
            side = "client" if self.solicited else "server"
            log.debug("%s - Starting TLS %s %s handshake", self.label, self.tls_kind, side)
        self._timer = self.server.loop.call_later(timeout, self._timed_out)
        if server_name is not None:
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
            super().data_received(plain)
        if tls.session.peer_closed and not self.closed:
            self.close(CloseReason.CLIENT_CLOSED)

    def _tls_failed(self, error: Exception) -> None:
        if not self._handshaking:
            # A broken record on an established link: a read error, as in crypto/tls.
            reason = error.reason if isinstance(error, ssl.SSLError) else None
            log.error("%s - Error reading from %s: %s", self.label, self.tls_kind, reason or error)
            self.close(CloseReason.READ_ERROR)
            return
        text = go_handshake_error(error) if isinstance(error, ssl.SSLError) else str(error)
        self._handshake_error(text)

    def _handshake_error(self, text: str) -> None:
        # Always an error between servers: their ports are not for load balancers' probes.
        log.error("%s - TLS %s handshake error: %s", self.label, self.tls_kind, text)
        self.close(CloseReason.TLS_HANDSHAKE_ERROR)

    def _handshake_done(self) -> bool:
        """Check a pinned certificate, then start the link's protocol; False when the
        connection was closed instead."""
        self._handshaking = False
        self._cancel_timer()
        tls = self._tls
        assert tls is not None
        if not pin_matches(self.tls_pins(), tls.session.peer_cert()):
            self._handshake_error(CERT_NOT_PINNED)
            return False
        if log.isEnabledFor(logging.DEBUG):
            version, cipher = go_tls_names(tls.session.ssl_object)
            log.debug("%s - TLS handshake complete", self.label)
            log.debug("%s - TLS version %s, cipher suite %s", self.label, version, cipher)
        self._begin()
        return not self.closed

    def matches_pins(self, pins: list[str]) -> bool:
        """The peer's certificate is one of `pins` (any when there are none): nats-server's
        matchesPinnedCert, asked again when a reload changes them."""
        tls = self._tls
        return tls is None or pin_matches(pins, tls.session.peer_cert())

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
