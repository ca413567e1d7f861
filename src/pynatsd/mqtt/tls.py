"""An MQTT connection on a TLS MQTT port: the server-side handshake, then MQTT in TLS records.

Corresponds to the TLS steps of nats-server's `createMQTTClient` (`doTLSServerHandshake` with
the MQTT block's TLS configuration, timeout and pinned certificates). The TLS itself is the
client listener's sans-IO `TLSSession` (server/tls_session.py), so a failed handshake is
logged in crypto/tls's words, as nats-server logs it, which asyncio's TLS would not do.
"""

from __future__ import annotations

import asyncio
import logging
import ssl
from typing import TYPE_CHECKING, cast

from pynatsd.logger import log
from pynatsd.mqtt.session import MQTTSession
from pynatsd.options import TLS_TIMEOUT
from pynatsd.protocol.errors import CloseReason
from pynatsd.server.client import Client
from pynatsd.server.tls_session import NotTLS, TLSSession, TLSTransport
from pynatsd.tls import go_handshake_error, pin_matches

if TYPE_CHECKING:
    from pynatsd.mqtt.part import MQTT
    from pynatsd.server.server import Server


class TLSMQTTSession(MQTTSession):
    """An MQTT session whose bytes go through its own TLS session."""

    __slots__ = ("_handshake_timer", "_tls", "context")

    def __init__(self, server: Server, mqtt: MQTT, context: ssl.SSLContext) -> None:
        super().__init__(server, mqtt)
        self.context = context
        self._tls: TLSTransport | None = None
        self._handshake_timer: asyncio.TimerHandle | None = None

    def connection_made(self, base: asyncio.BaseTransport) -> None:
        raw = cast(asyncio.Transport, base)
        self._tls = TLSTransport(raw, TLSSession(self.context))
        if Client.admit(self, self._tls):
            timeout = self.mqtt.options.tls_timeout or TLS_TIMEOUT
            self._handshake_timer = self.server.loop.call_later(timeout, self._handshake_timeout)
            self.start_timers()

    def _handshake_timeout(self) -> None:
        self._handshake_timer = None
        if not self.closed:
            log.debug("%s - TLS handshake timeout", self.label)
            self.close(CloseReason.TLS_HANDSHAKE_ERROR)

    def data_received(self, data: bytes) -> None:
        tls = self._tls
        if self.closed or tls is None:
            return
        handshaking = not tls.session.established
        try:
            plain = tls.receive(data)
        except (NotTLS, ssl.SSLError) as e:
            self._tls_failed(e, handshaking)
            return
        if handshaking and tls.session.established and not self._handshake_done():
            return
        if plain:
            super().data_received(plain)
        if tls.session.peer_closed and not self.closed:
            self.close(CloseReason.CLIENT_CLOSED)

    def _tls_failed(self, error: Exception, handshaking: bool) -> None:
        """TLS broke: logged as nats-server logs it, and the connection closed."""
        if isinstance(error, NotTLS):
            # Go logs a client that does not speak TLS (a probe) at debug level only.
            log.debug("%s - TLS handshake error: %s", self.label, error)
            reason = CloseReason.TLS_HANDSHAKE_ERROR
        elif handshaking and isinstance(error, ssl.SSLError):
            log.error("%s - TLS handshake error: %s", self.label, go_handshake_error(error))
            reason = CloseReason.TLS_HANDSHAKE_ERROR
        else:  # a broken record once up: a read error, as in crypto/tls
            text = error.reason if isinstance(error, ssl.SSLError) and error.reason else error
            log.error("%s - Error reading from client: %s", self.label, text)
            reason = CloseReason.READ_ERROR
        self.close(reason)

    def _handshake_done(self) -> bool:
        """Check a pinned certificate and keep the client's for verify_and_map; False when
        the connection was closed instead."""
        if self._handshake_timer is not None:
            self._handshake_timer.cancel()
            self._handshake_timer = None
        assert self._tls is not None
        self.peer_cert = self._tls.session.peer_cert()
        pins = self.mqtt.options.tls_pinned_certs
        if pins and not pin_matches(pins, self.peer_cert):
            log.error("%s - TLS handshake error: certificate not pinned", self.label)
            self.close(CloseReason.TLS_HANDSHAKE_ERROR)
            return False
        if log.isEnabledFor(logging.DEBUG):
            log.debug("%s - TLS handshake complete", self.label)
        return True

    def close(self, reason: str = CloseReason.SERVER_SHUTDOWN, abort: bool = False) -> None:
        if self._handshake_timer is not None:
            self._handshake_timer.cancel()
            self._handshake_timer = None
        super().close(reason, abort)
