"""One client connection: the thin asyncio layer around the protocol session.

Corresponds to the connection half of nats-server's `server/client.go` (`createClient`,
`readLoop`, `closeConnection`, the ping and auth timers); a connection on a TLS port is a
`TLSClient` (server/tls_client.py).
Bytes from the socket go to the sans-IO parser and its events to `ClientSession`; frames leave
through the session's `Outbound` queue, written once per read (`Server.flush_dirty`).
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from typing import TYPE_CHECKING, Any, cast

from pynatsd.auth import AuthResult, new_nonce
from pynatsd.logger import log
from pynatsd.protocol import errors
from pynatsd.protocol.errors import CloseReason
from pynatsd.protocol.frames import PING_FRAME, err_frame, info_frame
from pynatsd.server.events import client_disconnected, conns_changed
from pynatsd.server.listen import join_host_port, peer_address
from pynatsd.server.outbound import Outbound
from pynatsd.server.session import ClientSession

if TYPE_CHECKING:
    from pynatsd.server.server import Server

# Longest pause of a fast producer's reads while one of its receivers is congested (seconds);
# nats-server allows a producer 10 ms of stalls per read.
_STALL_MAX = 0.01


class Client(ClientSession, asyncio.Protocol):
    """A client connection over TCP, TLS or WebSocket."""

    __slots__ = (
        "_auth_timer",
        "_expiry_timer",
        "_ping_timer",
        "_stall_timer",
        "last_activity",
        "last_in",
        "transport",
        "websocket",
    )

    def __init__(self, server: Server) -> None:
        super().__init__(server)
        self.transport: asyncio.Transport | None = None
        self.last_activity = self.start
        self.last_in = time.monotonic()
        self._ping_timer: asyncio.TimerHandle | None = None
        self._auth_timer: asyncio.TimerHandle | None = None
        self._stall_timer: asyncio.TimerHandle | None = None
        self._expiry_timer: asyncio.TimerHandle | None = None
        self.websocket = False  # set by the WebSocket listener

    # -- asyncio.Protocol ------------------------------------------------------------------------

    def connection_made(self, base: asyncio.BaseTransport) -> None:
        # uvloop's transports do not subclass asyncio.Transport; they implement its methods.
        transport = cast(asyncio.Transport, base)
        if self.admit(transport):
            transport.write(self.greeting())
            self.start_timers()

    def greeting(self) -> bytes:
        """What a new connection gets first, in plain text: the INFO."""
        return info_frame(self.server.client_info(self))

    def admit(self, transport: asyncio.Transport) -> bool:
        """Take the connection on, or refuse it (lame duck, maximum connections): nats-server's
        `createClient` up to the INFO. True when the connection is registered."""
        self.transport = transport
        self.outbound.attach(transport)
        peer = peer_address(transport)
        if peer is not None:
            self.host, self.port = peer
        self.label = f"{join_host_port(self.host, self.port)} - cid:{self.cid}"
        server = self.server
        if server.lame_duck or not server.accepting:
            transport.close()
            self.closed = True
            return False
        max_conns = server.options.max_connections
        if max_conns < 0 or len(server.clients) >= max_conns:
            # nats-server sends the INFO first, then the error (createClient/maxConnExceeded).
            transport.write(self.greeting() + err_frame(errors.MAXIMUM_CONNECTIONS_EXCEEDED))
            transport.close()
            self.closed = True
            self.close_reason = CloseReason.MAX_CONNECTIONS_EXCEEDED
            log.error("%s - maximum connections exceeded", self.label)
            return False
        server.add_client(self)
        self.account.num_clients += 1
        if server.authenticator.nonce_required:
            self.nonce = new_nonce()
        if log.isEnabledFor(logging.DEBUG):
            log.debug("%s - Client connection created", self.label)
        return True

    def start_timers(self) -> None:
        """The authentication timeout and the first PING; with TLS, once the handshake is done
        (nats-server starts them after it, so the timer never writes into a handshake)."""
        if self.parser.expect_connect:
            self._auth_timer = self.server.loop.call_later(
                self.server.options.auth_timeout, self._auth_timeout
            )
        self._set_first_ping_timer()

    def data_received(self, data: bytes) -> None:
        if self.closed:
            return
        self.last_in = time.monotonic()
        self.handle_events(self.parser.feed(data))
        self._write_touched()

    def _write_touched(self) -> None:
        """End of a read: every receiver it touched is written once; this client is the
        producer to stall if one of them is congested."""
        server = self.server
        server.producer = self
        server.flush_dirty()
        server.producer = None

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.closed:
            self.close(CloseReason.CLIENT_CLOSED if exc is None else CloseReason.READ_ERROR)

    def pause_writing(self) -> None:
        self.outbound.pause_writing(self.server.loop)

    def resume_writing(self) -> None:
        self.outbound.resume_writing()

    # -- fast producer stall (server.outbound.Producer) ------------------------------------------

    def stall(self, receiver: Outbound) -> None:
        """Stop reading from this (producing) client for a moment because `receiver` cannot keep
        up, as nats-server stalls fast producers: the producer's own socket then pushes back.
        Bounded in time, so a dead receiver slows a producer down but never blocks it."""
        if self._stall_timer is not None or self.closed or self.transport is None:
            return
        self.transport.pause_reading()
        receiver.stalled_producers.append(self)
        self.server.stalled_clients += 1
        self._stall_timer = self.server.loop.call_later(_STALL_MAX, self.unstall)

    def unstall(self) -> None:
        timer = self._stall_timer
        if timer is None:
            return
        timer.cancel()
        self._stall_timer = None
        if not self.closed and self.transport is not None:
            self.transport.resume_reading()

    # -- outbound outside a read -----------------------------------------------------------------

    def send_now(self, frame: bytes) -> None:
        """Queue a frame and write at once (for timers and other events outside a read)."""
        if self.closed:
            return
        self.outbound.push(frame)
        self.outbound.flush()

    def flush(self) -> None:
        if not self.closed:
            self.outbound.flush()

    # -- closing ---------------------------------------------------------------------------------

    def close(self, reason: str = CloseReason.SERVER_SHUTDOWN, abort: bool = False) -> None:
        if self.closed:
            return
        self.closed = True
        self.close_reason = reason
        self.stop = time.time()
        self.unstall()
        self.account.num_clients -= 1
        for timer in (self._ping_timer, self._auth_timer, self._expiry_timer):
            if timer is not None:
                timer.cancel()
        self._ping_timer = self._auth_timer = self._expiry_timer = None
        self.outbound.close(abort)
        subs = list(self.subs.values())
        for sub in subs:
            sub.closed = True
        if subs:
            self.account.sublist.remove_batch(subs)
        self.server.remove_client(self)
        if self.label_set:
            conns_changed(self.server, self.account)
            if self.account is not self.server.system_account:
                client_disconnected(self.server, self)
        if log.isEnabledFor(logging.DEBUG):
            log.debug("%s - Client connection closed: %s", self.label, reason)

    # -- timers ----------------------------------------------------------------------------------

    def _set_first_ping_timer(self) -> None:
        opts = self.server.options
        delay = min(opts.ping_interval, 2.0)
        if delay <= 0:
            return
        # nats-server adds up to 20% jitter so that many clients do not PING in lockstep.
        delay += random.random() * delay * 0.2
        self._ping_timer = self.server.loop.call_later(delay, self._ping_timer_fired)

    def _ping_timer_fired(self) -> None:
        self._ping_timer = None
        if self.closed:
            return
        opts = self.server.options
        interval = opts.ping_interval
        need_rtt = self.rtt == 0 or time.monotonic() - self.rtt_start > 3600
        if time.monotonic() - self.last_in < interval and not need_rtt:
            log.debug("%s - Delaying PING due to remote client data or ping", self.label)
        else:
            if self.pings_out + 1 > opts.ping_max:
                log.debug("%s - Stale Client Connection - Closing", self.label)
                self.server.stats_stale_connection()
                self.outbound.push(err_frame(errors.STALE_CONNECTION))
                self.close(CloseReason.STALE_CONNECTION)
                return
            self.pings_out += 1
            self.rtt_start = time.monotonic()
            self.send_now(PING_FRAME)
        if interval > 0 and not self.closed:
            self._ping_timer = self.server.loop.call_later(interval, self._ping_timer_fired)

    def _auth_timeout(self) -> None:
        self._auth_timer = None
        if self.closed or self.connected:
            return
        log.error("%s - Authentication Timeout", self.label)
        self.close_with_error(errors.AUTHENTICATION_TIMEOUT, CloseReason.AUTHENTICATION_TIMEOUT)

    def connect_started(self) -> None:
        if self._auth_timer is not None:
            self._auth_timer.cancel()
            self._auth_timer = None

    def expire_at(self, when: float, error: str) -> None:
        if self._expiry_timer is not None:
            self._expiry_timer.cancel()
        delay = max(when - time.time(), 0.0)
        self._expiry_timer = self.server.loop.call_later(delay, self._credentials_expired, error)

    def _credentials_expired(self, error: str) -> None:
        self._expiry_timer = None
        if not self.closed:
            # sendErrAndDebug, with the account and user nats-server adds to the line.
            config = self.account.config
            account = self.account.name
            if config is not None and config.name_tag:
                account = f"{account}/{config.name_tag}"
            user = f" - {self.log_user}" if self.log_user else ""
            log.debug("%s - %s - Account:%s%s", self.label, error, account, user)
            self.close_with_error(error, CloseReason.AUTHENTICATION_EXPIRED)

    # -- slow credential checks ------------------------------------------------------------------

    def authenticate_off_loop(self, opts: dict[str, Any]) -> None:
        """bcrypt takes 50-300 ms: check in a worker thread so other clients are not held up,
        and stop reading this client until the answer is in."""
        if self.transport is not None:
            self.transport.pause_reading()
        future = self.server.loop.run_in_executor(None, self.authenticate, opts)

        def done(fut: asyncio.Future[AuthResult | None]) -> None:
            self._auth_waiting = False
            if self.closed:
                return
            try:
                result = fut.result()
            except Exception:  # a failing check is a failed authentication
                log.exception("%s - authentication check failed", self.label)
                result = None
            self.finish_connect(opts, result)
            stashed, self._stashed = self._stashed, []
            if not self.closed:
                self.handle_events(stashed)
                if self.transport is not None and not self._auth_waiting:
                    self.transport.resume_reading()
            self._write_touched()

        future.add_done_callback(done)
