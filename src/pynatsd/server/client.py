"""One client connection: the thin asyncio layer around the sans-IO parser.

Corresponds to nats-server's `server/client.go`. Bytes from the socket go to the parser; each event
is handled here; outgoing frames are appended to the receivers' buffers and written once per read
(`Server.flush_dirty`), not once per message.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import random
import ssl
import time
from typing import TYPE_CHECKING, Any, cast

from pynatsd.auth import AuthResult, PermissionChecker, new_nonce
from pynatsd.logger import TRACE, log
from pynatsd.protocol import errors
from pynatsd.protocol.errors import CloseReason
from pynatsd.protocol.events import (
    Connect,
    Err,
    Event,
    Info,
    Ok,
    Ping,
    Pong,
    ProtocolError,
    Pub,
    Sub,
    Unsub,
)
from pynatsd.protocol.frames import (
    OK_FRAME,
    PING_FRAME,
    PONG_FRAME,
    err_frame,
    info_frame,
    no_responders_frame,
)
from pynatsd.protocol.parser import Parser
from pynatsd.server.events import client_connected, client_disconnected
from pynatsd.server.limits import connection_limits
from pynatsd.server.router import deliver, msg_head, queue_rr
from pynatsd.server.subscription import Subscription
from pynatsd.subjects import is_valid_literal_subject_bytes
from pynatsd.sublist import InvalidSubjectError, SubListResult

if TYPE_CHECKING:
    from pynatsd.options import User
    from pynatsd.server.accounts import Account
    from pynatsd.server.server import Server

# One receiver of a planned delivery: (client, subscription, ready MSG line).
Target = tuple["Client", Subscription, bytes]


class Plan:
    """The receivers of one PUB line under one SubList generation. Deliveries through it are
    counted here and added to the receivers' statistics once per read (`settle`), not once per
    message and receiver."""

    __slots__ = ("count", "genid", "groups", "nbytes", "targets")

    def __init__(
        self, genid: int, targets: tuple[Target, ...], groups: tuple[tuple[Target, ...], ...]
    ) -> None:
        self.genid = genid
        self.targets = targets
        self.groups = groups
        self.count = 0
        self.nbytes = 0

    def settle(self) -> None:
        count, nbytes = self.count, self.nbytes
        self.count = self.nbytes = 0
        for client, sub, _ in self.targets:
            sub.delivered += count
            client.out_msgs += count
            client.out_bytes += nbytes


# CONNECT fields and the JSON types nats-server's decoder accepts for them; a wrong type makes
# the decode fail, which closes the connection.
_CONNECT_BOOLS = ("verbose", "pedantic", "tls_required", "echo", "headers", "no_responders")
_CONNECT_STRS = ("auth_token", "user", "pass", "nkey", "sig", "jwt", "name", "lang", "version")
_CONNECT_FIELDS = frozenset(
    (*_CONNECT_BOOLS, *_CONNECT_STRS, "protocol", "account", "new_account", "proxy_sig")
)
# High-water mark of the transport buffer: above it asyncio pauses us and the write deadline runs.
_WRITE_HIGH_WATER = 1024 * 1024
# Distinct PUB lines with a cached delivery plan, per connection; cleared wholesale when full.
_PLAN_CACHE_SIZE = 1024
# Longest pause of a fast producer's reads while one of its receivers is congested (seconds);
# nats-server allows a producer 10 ms of stalls per read.
_STALL_MAX = 0.01


def _connect_types_ok(opts: dict[str, Any]) -> bool:
    for key in _CONNECT_BOOLS:
        value = opts.get(key)
        if value is not None and not isinstance(value, bool):
            return False
    for key in _CONNECT_STRS:
        value = opts.get(key)
        if value is not None and not isinstance(value, str):
            return False
    proto = opts.get("protocol")
    return proto is None or (isinstance(proto, int) and not isinstance(proto, bool))


class Client(asyncio.Protocol):
    """A client connection. Attributes named as in /connz where they are reported there."""

    # Slots: thousands of connections, each with dozens of fields, add up.
    __slots__ = (
        "_auth_timer",
        "_auth_waiting",
        "_careful_pub",
        "_expiry_timer",
        "_last_line",
        "_last_plan",
        "_ping_timer",
        "_plans",
        "_stall_timer",
        "_stashed",
        "_tls_task",
        "_touched",
        "_write_timer",
        "account",
        "auth_user",
        "cid",
        "close_reason",
        "closed",
        "config_user",
        "congested",
        "connect_opts",
        "connected",
        "dirty",
        "echo",
        "first_pong_sent",
        "headers",
        "host",
        "in_bytes",
        "in_msgs",
        "label",
        "label_set",
        "last_activity",
        "last_in",
        "max_pending",
        "max_subs",
        "no_responders",
        "nonce",
        "out",
        "out_bytes",
        "out_msgs",
        "parser",
        "pedantic",
        "peer_cert",
        "perms",
        "pings_out",
        "port",
        "protocol",
        "rtt",
        "rtt_start",
        "server",
        "stalled_producers",
        "start",
        "stop",
        "subs",
        "trace",
        "transport",
        "verbose",
        "websocket",
    )

    def __init__(self, server: Server) -> None:
        self.server = server
        opts = server.options
        self.cid = server.next_cid()
        self.account: Account = server.global_account
        self.parser = Parser(
            max_payload=opts.max_payload,
            max_control_line=opts.max_control_line,
            expect_connect=server.auth_required and not opts.no_auth_user,
            headers=False,
            headers_supported=not opts.no_header_support,
        )
        self.transport: asyncio.Transport | None = None
        self.host = ""
        self.port = 0
        self.subs: dict[bytes, Subscription] = {}
        # CONNECT options; nats-server decodes CONNECT on top of these defaults.
        self.connect_opts: dict[str, Any] = {"verbose": True, "pedantic": True, "echo": True}
        self.connected = False
        self.verbose = False
        self.pedantic = False
        self.echo = True
        self.headers = False
        self.no_responders = False
        self.protocol = 0
        self.first_pong_sent = False
        self.auth_user = ""
        # Outbound buffering: frames are queued here and written once per read.
        self.out: list[bytes] = []
        self.dirty = False
        self.closed = False
        self.close_reason = ""
        self.max_pending = opts.max_pending
        # Stats reported by /connz and /varz.
        self.in_msgs = 0
        self.in_bytes = 0
        self.out_msgs = 0
        self.out_bytes = 0
        self.start = time.time()
        self.stop = 0.0
        self.last_activity = self.start
        self.last_in = time.monotonic()
        self.rtt = 0.0
        self.rtt_start = 0.0
        self.pings_out = 0
        self.trace = log.isEnabledFor(TRACE)
        self._ping_timer: asyncio.TimerHandle | None = None
        self._auth_timer: asyncio.TimerHandle | None = None
        self._write_timer: asyncio.TimerHandle | None = None
        self._stall_timer: asyncio.TimerHandle | None = None
        self.congested = False  # asyncio paused writing to us: the transport buffer is full
        self.stalled_producers: list[Client] = []
        self.label = ""
        self.label_set = False
        self.nonce = ""
        self.peer_cert: bytes | None = None
        self.perms = PermissionChecker(None)
        # The `users` entry this connection authenticated as (None: token, single user, JWT,
        # no authentication); a reload closes the connection when the entry is gone.
        self.config_user: User | None = None
        self.max_subs = opts.max_subscriptions
        self._expiry_timer: asyncio.TimerHandle | None = None
        self._auth_waiting = False
        self._stashed: list[Event | Pub] = []
        self._tls_task: asyncio.Task[None] | None = None
        self.websocket = False  # set by the WebSocket listener: TLS is the WebSocket's own
        # Delivery plans keyed by PUB line: (SubList genid, plain targets, queue groups).
        self._plans: dict[bytes, Plan] = {}
        # The plan used last, by identity of its line: the parser hands out one bytes object
        # per distinct PUB line.
        self._last_line = b""
        self._last_plan: Plan | None = None
        # Plans used during the current read, whose delivery counts are still to be settled.
        self._touched: list[Plan] = []
        # True when a PUB needs more than a planned delivery (trace, pedantic, verbose).
        self._careful_pub = True

    # -- asyncio.Protocol ------------------------------------------------------------------------

    def connection_made(self, base: asyncio.BaseTransport) -> None:
        # uvloop's transports do not subclass asyncio.Transport; they implement its methods.
        transport = cast(asyncio.Transport, base)
        self.transport = transport
        transport.set_write_buffer_limits(high=_WRITE_HIGH_WATER)
        peer = transport.get_extra_info("peername")
        if isinstance(peer, tuple):
            self.host, self.port = str(peer[0]), int(peer[1])
        self.label = f"{self.host}:{self.port} - cid:{self.cid}"
        server = self.server
        opts = server.options
        if server.lame_duck or not server.accepting:
            transport.close()
            self.closed = True
            return
        max_conns = opts.max_connections
        if max_conns < 0 or len(server.clients) >= max_conns:
            # nats-server sends the INFO first, then the error (createClient/maxConnExceeded).
            transport.write(info_frame(server.client_info(self)))
            transport.write(err_frame(errors.MAXIMUM_CONNECTIONS_EXCEEDED))
            transport.close()
            self.closed = True
            self.close_reason = CloseReason.MAX_CONNECTIONS_EXCEEDED
            log.error("%s - maximum connections exceeded", self.label)
            return
        server.add_client(self)
        self.account.num_clients += 1
        if server.authenticator.nonce_required:
            self.nonce = new_nonce()
        if log.isEnabledFor(logging.DEBUG):
            log.debug("%s - Client connection created", self.label)
        transport.write(info_frame(server.client_info(self)))
        loop = server.loop
        if server.tls_context is not None and not self.websocket and not opts.tls_handshake_first:
            # INFO said tls_required: the client now starts the TLS handshake. Nothing is
            # read in plain text meanwhile.
            transport.pause_reading()
            self._tls_task = loop.create_task(self._upgrade_to_tls())
        elif server.tls_context is not None and not self.websocket:
            self._remember_peer_cert()
        if self.parser.expect_connect:
            self._auth_timer = loop.call_later(opts.auth_timeout, self._auth_timeout)
        self._set_first_ping_timer()

    async def _upgrade_to_tls(self) -> None:
        server = self.server
        raw = self.transport
        assert raw is not None and server.tls_context is not None
        # A plain-text client makes the handshake fail, and the TLS layer closes the socket
        # with it; a duplicate of the descriptor lets us still tell the client why.
        spare_fd = -1
        sock = raw.get_extra_info("socket")
        if sock is not None:
            try:
                spare_fd = os.dup(sock.fileno())
            except OSError:
                spare_fd = -1
        try:
            tls = await server.loop.start_tls(
                raw,
                self,
                server.tls_context,
                server_side=True,
                ssl_handshake_timeout=server.options.tls_timeout,
            )
        except (OSError, ssl.SSLError, TimeoutError, ConnectionError) as e:
            log.error("%s - TLS handshake error: %s", self.label, e)
            if spare_fd >= 0:
                with contextlib.suppress(OSError):
                    os.write(spare_fd, err_frame(errors.SECURE_CONNECTION_TLS_REQUIRED))
                os.close(spare_fd)
            self._close(CloseReason.TLS_HANDSHAKE_ERROR)
            return
        if spare_fd >= 0:
            os.close(spare_fd)
        if tls is None:
            return
        if self.closed:
            tls.close()
            return
        self.transport = tls
        self._remember_peer_cert()

    def _remember_peer_cert(self) -> None:
        assert self.transport is not None
        ssl_object = self.transport.get_extra_info("ssl_object")
        if ssl_object is not None:
            self.peer_cert = ssl_object.getpeercert(binary_form=True)

    def data_received(self, data: bytes) -> None:
        if self.closed:
            return
        self.last_in = time.monotonic()
        self._process_events(self.parser.feed(data))

    def _process_events(self, events: list[Event | Pub]) -> None:
        for ev in events:
            if type(ev) is Pub:
                self._process_pub(ev)
            else:
                self._process_event(cast(Event, ev))
                if self._auth_waiting:
                    # A slow credential check (bcrypt) runs off the loop; what followed the
                    # CONNECT in this read waits for it.
                    self._stashed = events[events.index(ev) + 1 :]
                    break
            if self.closed:
                break
        touched = self._touched
        if touched:
            for plan in touched:
                plan.settle()
            touched.clear()
        server = self.server
        server.producer = self
        server.flush_dirty()
        server.producer = None

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.closed:
            self._close(CloseReason.CLIENT_CLOSED if exc is None else CloseReason.READ_ERROR)

    def pause_writing(self) -> None:
        self.congested = True
        deadline = self.server.options.write_deadline
        if deadline > 0 and self._write_timer is None:
            self._write_timer = self.server.loop.call_later(deadline, self._write_deadline_hit)

    def resume_writing(self) -> None:
        self.congested = False
        if self._write_timer is not None:
            self._write_timer.cancel()
            self._write_timer = None
        self._release_producers()

    # -- fast producer stall ---------------------------------------------------------------------

    def stall(self, receiver: Client) -> None:
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

    def _release_producers(self) -> None:
        producers = self.stalled_producers
        if producers:
            self.stalled_producers = []
            for producer in producers:
                producer.unstall()

    # -- outbound --------------------------------------------------------------------------------

    def enqueue(self, frame: bytes) -> None:
        """Queue a frame; written at the end of the current read (or by `flush`), where the
        pending bytes are checked against max_pending: one read adds at most its own size
        (times the fan-out) before that check."""
        self.out.append(frame)
        if not self.dirty:
            self.dirty = True
            self.server.dirty.append(self)

    def send_now(self, frame: bytes) -> None:
        """Queue a frame and write at once (for timers and other events outside a read)."""
        if self.closed:
            return
        self.out.append(frame)
        self.flush()

    def flush(self) -> None:
        self.dirty = False
        if self.closed or not self.out:
            return
        out = self.out
        data = out[0] if len(out) == 1 else b"".join(out)
        out.clear()
        transport = self.transport
        assert transport is not None
        transport.write(data)
        if transport.get_write_buffer_size() > self.max_pending:
            self.slow_consumer_pending()
        elif self.congested:
            producer = self.server.producer
            if producer is not None and producer is not self and self.server.stall_producers:
                producer.stall(self)

    def trace_out(self, head: bytes) -> None:
        """`->> [MSG foo 1 5]`: the control line of a frame sent to this client."""
        line = head.rstrip(b"\r\n").decode("utf-8", "replace")
        log.log(TRACE, "%s - ->> [%s]", self.label, line)

    def send_err(self, text: str) -> None:
        if log.isEnabledFor(TRACE):
            log.log(TRACE, "%s - ->> [-ERR '%s']", self.label, text)
        self.enqueue(err_frame(text))

    # -- closing ---------------------------------------------------------------------------------

    def slow_consumer_pending(self) -> None:
        if self.closed:
            return
        log.info(
            "%s - Slow Consumer Detected: MaxPending of %d Exceeded", self.label, self.max_pending
        )
        self.server.stats_slow_consumer()
        self._close(CloseReason.SLOW_CONSUMER_PENDING_BYTES, abort=True)

    def _write_deadline_hit(self) -> None:
        self._write_timer = None
        if self.closed:
            return
        pending = self.transport.get_write_buffer_size() if self.transport else 0
        log.info(
            "%s - Slow Consumer Detected: WriteDeadline of %s exceeded with %d total bytes.",
            self.label,
            _go_duration(self.server.options.write_deadline),
            pending,
        )
        self.server.stats_slow_consumer()
        self._close(CloseReason.SLOW_CONSUMER_WRITE_DEADLINE, abort=True)

    def close_with_error(self, text: str, reason: str) -> None:
        self.enqueue(err_frame(text))
        self._close(reason)

    def _close(self, reason: str, abort: bool = False) -> None:
        if self.closed:
            return
        self.closed = True
        self.close_reason = reason
        self.stop = time.time()
        self.unstall()
        self._release_producers()
        self.account.num_clients -= 1
        for timer in (self._ping_timer, self._auth_timer, self._write_timer, self._expiry_timer):
            if timer is not None:
                timer.cancel()
        self._ping_timer = self._auth_timer = self._write_timer = self._expiry_timer = None
        transport = self.transport
        if transport is not None:
            if abort:
                self.out.clear()
                transport.abort()
            else:
                if self.out:
                    transport.write(b"".join(self.out))
                    self.out.clear()
                transport.close()
        subs = list(self.subs.values())
        for sub in subs:
            sub.closed = True
        if subs:
            self.account.sublist.remove_batch(subs)
        self.server.remove_client(self)
        if self.label_set and self.account is not self.server.system_account:
            client_disconnected(self.server, self)
        if log.isEnabledFor(logging.DEBUG):
            log.debug("%s - Client connection closed: %s", self.label, reason)

    def close(self, reason: str = CloseReason.SERVER_SHUTDOWN) -> None:
        self._close(reason)

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
                self.enqueue(err_frame(errors.STALE_CONNECTION))
                self._close(CloseReason.STALE_CONNECTION)
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

    # -- inbound ---------------------------------------------------------------------------------

    def _process_event(self, ev: Event) -> None:
        kind = type(ev)
        if kind is Sub:  # first: clients subscribe in bursts
            self._process_sub(ev)  # type: ignore[arg-type]
        elif kind is Ping:
            self._process_ping()
        elif kind is Pong:
            self.pings_out = 0
            if self.rtt_start:
                self.rtt = max(time.monotonic() - self.rtt_start, 1e-9)
        elif kind is Unsub:
            assert isinstance(ev, Unsub)
            self._process_unsub(ev)
        elif kind is Connect:
            assert isinstance(ev, Connect)
            self._process_connect(ev)
        elif kind is ProtocolError:
            assert isinstance(ev, ProtocolError)
            self._process_protocol_error(ev)
        elif kind is Err:
            assert isinstance(ev, Err)
            log.error("%s - Client Error %s", self.label, ev.text.decode(errors="replace"))
            self._close(CloseReason.PARSE_ERROR)
        elif kind is Info or kind is Ok:
            pass

    def _process_protocol_error(self, ev: ProtocolError) -> None:
        if ev.reply == errors.AUTHORIZATION_VIOLATION:
            log.error("%s - Authorization Error", self.label)
        elif ev.reply is None:
            log.error("%s - Client parser ERROR: %s", self.label, ev.detail)
        else:
            log.error("%s - %s", self.label, ev.reply)
        if ev.reply is not None:
            self.enqueue(err_frame(ev.reply))
        self._close(ev.close_reason)

    def _process_ping(self) -> None:
        self.enqueue(PONG_FRAME)
        if self.connected and not self.first_pong_sent:
            self.first_pong_sent = True
            if self.protocol >= 1:
                self.enqueue(info_frame(self.server.client_info(self, connect_info=True)))

    def _process_connect(self, ev: Connect) -> None:
        if self.trace:
            log.log(TRACE, "%s - <<- [CONNECT %s]", self.label, _redact(ev.raw))
        if self._auth_timer is not None:
            self._auth_timer.cancel()
            self._auth_timer = None
        opts = dict(self.connect_opts)
        for key, value in ev.options.items():
            # Go's JSON decoder matches field names case-insensitively; the last one wins.
            folded = key.lower()
            opts[folded if folded in _CONNECT_FIELDS else key] = value
        if not _connect_types_ok(opts):
            log.error("%s - invalid CONNECT", self.label)
            self._close(CloseReason.PROTOCOL_VIOLATION)
            return
        self.connect_opts = opts
        first = not self.connected
        self.connected = True
        if not first and self.subs:
            # A second CONNECT may change the account: nats-server drops every subscription.
            subs = list(self.subs.values())
            for sub in subs:
                sub.closed = True
            self.account.sublist.remove_batch(subs)
            self.subs.clear()
        server = self.server
        self.headers = bool(opts.get("headers")) and not server.options.no_header_support
        self.echo = opts.get("echo", True) is not False
        self.verbose = bool(opts.get("verbose"))
        self.pedantic = bool(opts.get("pedantic"))
        self.no_responders = bool(opts.get("no_responders"))
        self.protocol = int(opts.get("protocol") or 0)
        if server.authenticator.is_slow(opts):
            self._authenticate_off_loop(opts)
            return
        self._finish_connect(opts, self._authenticate(opts))

    def _finish_connect(self, opts: dict[str, Any], result: AuthResult | None) -> None:
        first = not self.label_set
        if result is None:
            log.error("%s - Authorization Error", self.label)
            self.close_with_error(
                errors.AUTHORIZATION_VIOLATION, CloseReason.AUTHENTICATION_VIOLATION
            )
            return
        if not self._bind(result):
            return
        if opts.get("account") or opts.get("new_account"):
            self.close_with_error(
                errors.AUTHORIZATION_VIOLATION, CloseReason.AUTHENTICATION_VIOLATION
            )
            return
        if first:
            self._set_label(opts)
            self.label_set = True
        self._careful_pub = self.trace or self.pedantic or self.verbose
        if self.protocol < 0 or self.protocol > 1:
            self.close_with_error(
                errors.INVALID_CLIENT_PROTOCOL, CloseReason.BAD_CLIENT_PROTOCOL_VERSION
            )
            return
        if self.no_responders and not self.headers:
            self.close_with_error(
                errors.NO_RESPONDERS_REQUIRES_HEADERS, CloseReason.NO_RESPONDERS_REQUIRES_HEADERS
            )
            return
        if self.verbose:
            self.enqueue(OK_FRAME)
        if first and self.account is not self.server.system_account:
            client_connected(self.server, self)

    def _set_label(self, opts: dict[str, Any]) -> None:
        parts = []
        if opts.get("version"):
            parts.append(f"v{opts['version']}")
        if opts.get("lang"):
            parts.append(str(opts["lang"]))
        if opts.get("name"):
            parts.append(str(opts["name"]))
        if parts:
            self.label = f'{self.label} - "{":".join(parts)}"'

    def recheck_auth(self) -> bool:
        """After a configuration reload: authenticate this connection's CONNECT again and bind
        it anew (limits, permissions), as nats-server's reloadAuthorization does. False when
        the credentials no longer pass or no longer lead to this account (the caller closes
        the connection), or when binding closed it (account or subscription limit)."""
        result = self.server.authenticator.check(
            self.connect_opts, self.nonce, self.peer_cert, "STANDARD", self.host
        )
        return result is not None and result.account == self.account.name and self._bind(result)

    def _authenticate(self, opts: dict[str, Any]) -> AuthResult | None:
        return self.server.authenticator.check(
            opts, self.nonce, self.peer_cert, "STANDARD", self.host
        )

    def _authenticate_off_loop(self, opts: dict[str, Any]) -> None:
        """bcrypt takes 50-300 ms: check in a worker thread so other clients are not held up,
        and stop reading this client until the answer is in."""
        self._auth_waiting = True
        if self.transport is not None:
            self.transport.pause_reading()
        future = self.server.loop.run_in_executor(None, self._authenticate, opts)

        def done(fut: asyncio.Future[AuthResult | None]) -> None:
            self._auth_waiting = False
            if self.closed:
                return
            try:
                result = fut.result()
            except Exception:  # a failing check is a failed authentication
                log.exception("%s - authentication check failed", self.label)
                result = None
            self._finish_connect(opts, result)
            stashed, self._stashed = self._stashed, []
            if not self.closed:
                self._process_events(stashed)
                if self.transport is not None and not self._auth_waiting:
                    self.transport.resume_reading()
            self.server.flush_dirty()

        future.add_done_callback(done)

    def _bind(self, result: AuthResult) -> bool:
        """Attach what authentication decided: account, permissions, limits, expiry. Runs at
        CONNECT and again on every configuration reload, as nats-server registers a client
        with its account (registerWithAccount) each time; False when that closed the client."""
        server = self.server
        account = server.get_account(result.account)
        limit = account.max_connections
        # The other clients of the account: this one counts only once it has joined.
        others = account.num_clients - (1 if account is self.account else 0)
        if limit >= 0 and others >= limit:
            self.close_with_error(
                errors.MAXIMUM_ACCOUNT_CONNECTIONS_EXCEEDED,
                CloseReason.MAX_CONNECTIONS_EXCEEDED,
            )
            return False
        if account is not self.account:
            self.account.num_clients -= 1
            account.num_clients += 1
            self.account = account
        perms = result.permissions
        if perms is None and account.config is not None:
            perms = account.config.default_permissions
        self.perms = PermissionChecker(perms)
        # Cached delivery plans hold permission decisions taken under the old permissions.
        self._plans.clear()
        self._last_line = b""
        self.config_user = result.user
        self.auth_user = result.user_label if result.method != "none" else ""
        limits = connection_limits(
            server.options, account.config, result.max_payload, result.max_subscriptions
        )
        self.parser.max_payload = limits.max_payload
        self.max_subs = limits.max_subscriptions
        if self.max_subs and len(self.subs) >= self.max_subs:
            # nats-server checks this at every registration (applyAccountLimits): a reload
            # that leaves a client at (or over) its subscription limit ends the connection.
            log.error("%s - Maximum Subscriptions Exceeded (max=%d)", self.label, self.max_subs)
            self.close_with_error(
                errors.MAXIMUM_SUBSCRIPTIONS_EXCEEDED, CloseReason.MAX_SUBSCRIPTIONS_EXCEEDED
            )
            return False
        expires = [t for t in (result.expires_at, result.account_expires_at) if t]
        if expires:
            if self._expiry_timer is not None:
                self._expiry_timer.cancel()
            delay = max(min(expires) - time.time(), 0.0)
            self._expiry_timer = server.loop.call_later(delay, self._credentials_expired)
        return True

    def _credentials_expired(self) -> None:
        self._expiry_timer = None
        if not self.closed:
            log.info("%s - User Authentication Expired", self.label)
            self.close_with_error(errors.AUTHENTICATION_EXPIRED, CloseReason.AUTHENTICATION_EXPIRED)
            self.flush()

    def _process_sub(self, ev: Sub) -> None:
        if self.trace:
            line = b" ".join(p for p in (ev.subject, ev.queue, ev.sid) if p)
            log.log(TRACE, "%s - <<- [SUB %s]", self.label, line.decode(errors="replace"))
        subject = ev.subject.decode("utf-8", "surrogateescape")
        queue = ev.queue.decode("utf-8", "surrogateescape") if ev.queue else None
        perms = self.perms
        if (perms.sub_restricted or queue is not None) and not perms.can_subscribe(subject, queue):
            log.error(
                "%s - Subscription Violation - %s, SID %s",
                self.label,
                f'Subject "{subject}" using queue "{queue}"' if queue else f'Subject "{subject}"',
                ev.sid.decode(errors="replace"),
            )
            self.send_err(errors.permissions_subscribe(subject, queue))
            return
        max_tokens = self.server.options.max_sub_tokens
        if max_tokens > 0 and subject.count(".") + 1 > max_tokens:
            self.send_err(errors.permissions_subscribe_tokens(subject))
            return
        max_subs = self.max_subs
        if max_subs > 0 and len(self.subs) >= max_subs:
            log.error("%s - Maximum Subscriptions Exceeded (max=%d)", self.label, max_subs)
            self.send_err(errors.MAXIMUM_SUBSCRIPTIONS_EXCEEDED)
            return
        if ev.sid in self.subs:
            # A reused sid is silently ignored; the first subscription stays.
            if self.verbose:
                self.enqueue(OK_FRAME)
            return
        sub = Subscription(self, ev.subject, ev.queue, ev.sid, subject, queue)
        try:
            self.account.sublist.insert(sub)
        except InvalidSubjectError:
            self.send_err(errors.INVALID_SUBJECT)
            return
        self.subs[ev.sid] = sub
        if self.verbose:
            self.enqueue(OK_FRAME)

    def _process_unsub(self, ev: Unsub) -> None:
        if self.trace:
            max_msgs = f" {ev.max_msgs}" if ev.max_msgs > 0 else ""
            sid = ev.sid.decode(errors="replace")
            log.log(TRACE, "%s - <<- [UNSUB %s%s]", self.label, sid, max_msgs)
        sub = self.subs.get(ev.sid)
        if sub is not None:
            if ev.max_msgs > 0 and ev.max_msgs > sub.delivered:
                sub.max_msgs = ev.max_msgs
            else:
                self.unsubscribe(sub)
        if self.verbose:
            self.enqueue(OK_FRAME)

    def unsubscribe(self, sub: Subscription) -> None:
        if sub.closed:
            return
        sub.closed = True
        self.subs.pop(sub.sid, None)
        self.account.sublist.remove(sub)

    def _process_pub(self, ev: Pub) -> None:
        # The hottest function: fields are read by tuple index (ev[2] is ev.payload, ev[4]
        # ev.line), which skips the property calls.
        payload = ev[2]
        size = len(payload)
        self.in_msgs += 1
        self.in_bytes += size
        line = ev[4]
        if line and not self._careful_pub:
            # The cheapest message is one already planned: same PUB line, same SubList
            # generation -> the same receivers and the same MSG lines.
            if line is self._last_line:
                plan = self._last_plan
            else:
                plan = self._plans.get(line)
                self._last_line = line
                self._last_plan = plan
            if plan is not None and plan.genid == self.account.sublist.genid:
                tail = payload + b"\r\n"
                dirty = self.server.dirty
                if not plan.count:
                    self._touched.append(plan)
                plan.count += 1
                plan.nbytes += size
                for client, _, head in plan.targets:
                    out = client.out
                    out.append(head)
                    out.append(tail)
                    if not client.dirty:
                        client.dirty = True
                        dirty.append(client)
                for group in plan.groups:
                    client, sub, head = group[next(queue_rr) % len(group)]
                    sub.delivered += 1
                    client.out_msgs += 1
                    client.out_bytes += size
                    out = client.out
                    out.append(head)
                    out.append(tail)
                    if not client.dirty:
                        client.dirty = True
                        dirty.append(client)
                return
        self._process_pub_slow(ev)

    def _process_pub_slow(self, ev: Pub) -> None:
        subject = ev.subject
        if self.trace:
            self._trace_pub(ev)
        if self.pedantic and not is_valid_literal_subject_bytes(subject):
            self.send_err(errors.INVALID_PUBLISH_SUBJECT)
        perms = self.perms
        if perms.publish_restricted:
            text = subject.decode("utf-8", "surrogateescape")
            if not perms.can_publish(text):
                log.error('%s - Publish Violation - Subject "%s"', self.label, text)
                self.send_err(errors.permissions_publish(text))
                return
        if self.verbose:
            self.enqueue(OK_FRAME)
        sublist = self.account.sublist
        result = sublist.match_bytes(subject)
        reply = ev.reply
        if result.psubs or result.qsubs:
            if ev.line and not self._careful_pub:
                self._remember_plan(ev, result, sublist.genid)
            if deliver(self, result, ev):
                return
        if reply and self.no_responders:
            for sub in sublist.match_bytes(reply).psubs:
                if sub.client is self:
                    self.enqueue(no_responders_frame(reply, sub.sid, subject))
                    break

    def _remember_plan(self, ev: Pub, result: SubListResult[Subscription], genid: int) -> None:
        """Cache the receivers of a plain PUB line: every plain subscriber, and the members of
        each queue group to pick from. Not when a subscription counts deliveries
        (auto-unsubscribe) or is internal: those need the full path every time. A publisher
        with permissions gets a plan only for subjects its allow/deny lists permit (a decision
        that never changes), never for a reply allowed once by allow_responses."""
        perms = self.perms
        if perms.publish_restricted and not perms.allowed_by_rules(
            ev.subject.decode("utf-8", "surrogateescape")
        ):
            return
        receivers: list[Target] = []
        for sub in result.psubs:
            if sub.max_msgs or sub.closed or sub.callback is not None or sub.client.perms.watching:
                return
            if sub.client is self and not self.echo:
                continue
            receivers.append((sub.client, sub, msg_head(ev, sub.sid, False)))
        groups: list[tuple[Target, ...]] = []
        for group in result.qsubs:
            members: list[Target] = []
            for sub in group:
                if (
                    sub.max_msgs
                    or sub.closed
                    or sub.callback is not None
                    or sub.client.perms.watching
                ):
                    return
                if sub.client is self and not self.echo:
                    continue
                members.append((sub.client, sub, msg_head(ev, sub.sid, False)))
            if members:
                groups.append(tuple(members))
        plans = self._plans
        self._last_line = b""
        if len(plans) >= _PLAN_CACHE_SIZE:
            plans.clear()
        plans[ev.line] = Plan(genid, tuple(receivers), tuple(groups))

    def _trace_pub(self, ev: Pub) -> None:
        op = "HPUB" if ev.header_size >= 0 else "PUB"
        reply = b" " + ev.reply if ev.reply else b""
        sizes = f"{ev.header_size} {len(ev.payload)}" if ev.header_size >= 0 else len(ev.payload)
        log.log(
            TRACE,
            "%s - <<- [%s %s%s %s]",
            self.label,
            op,
            ev.subject.decode(errors="replace"),
            reply.decode(errors="replace"),
            sizes,
        )
        limit = self.server.options.max_traced_msg_len
        data = ev.payload if limit <= 0 else ev.payload[:limit]
        log.log(TRACE, "%s - <<- MSG_PAYLOAD: [%r]", self.label, data.decode(errors="replace"))

    # -- reporting -------------------------------------------------------------------------------

    @property
    def pending_bytes(self) -> int:
        tp = self.transport.get_write_buffer_size() if self.transport and not self.closed else 0
        return sum(map(len, self.out)) + tp

    @property
    def name(self) -> str:
        return str(self.connect_opts.get("name") or "")


def _redact(raw: bytes) -> str:
    import json

    try:
        opts = json.loads(raw)
    except ValueError:
        return "[REDACTED]"
    for key in ("pass", "auth_token", "sig", "nkey", "jwt"):
        if key in opts:
            opts[key] = "[REDACTED]"
    return json.dumps(opts, separators=(",", ":"))


def _go_duration(seconds: float) -> str:
    if seconds >= 60 and seconds % 60 == 0:
        return f"{int(seconds // 60)}m0s"
    if seconds == int(seconds):
        return f"{int(seconds)}s"
    return f"{seconds}s"
