"""What every connection to another server has in common, whatever it carries (a route, a
gateway, a leaf node connection): the asyncio adapter's transport and flow control, pings and
staleness, the receiver attributes, delivery by the plan of a message line, and closing with
the interest it brought.

Corresponds to the parts of nats-server's `client.go` that ROUTER, GATEWAY and LEAF
connections share (`processPingTimer`, `processPong`, `closeConnection`, the slow-consumer
handling of the outbound buffer, the per-connection results cache of `processInboundMsg`).
"""

from __future__ import annotations

import asyncio
import random
import socket
import time
from collections.abc import Callable, Coroutine, Iterator
from typing import TYPE_CHECKING, Any, Generic, TypeVar, cast

from pynatsd.auth import PermissionChecker
from pynatsd.cluster.protocol import (
    RouteConnect,
    RouteInfo,
    RouteMsg,
    RouteMsgRun,
    RouteParser,
    RouteSub,
    RouteUnsub,
)
from pynatsd.logger import log
from pynatsd.protocol import errors
from pynatsd.protocol.errors import CloseReason
from pynatsd.protocol.events import Err, Event, Ping, Pong, ProtocolError, Pub
from pynatsd.protocol.frames import PING_FRAME, PONG_FRAME, err_frame
from pynatsd.server.delivery import Stats
from pynatsd.server.listen import bind, join_host_port, peer_address
from pynatsd.server.outbound import Outbound
from pynatsd.server.plans import PlanCache
from pynatsd.sublist import SubListResult

if TYPE_CHECKING:
    from pynatsd.server.accounts import Account
    from pynatsd.server.delivery import Receiver
    from pynatsd.server.server import Server
    from pynatsd.server.subscription import RemoteSubscription, Subscription
    from pynatsd.sublist import SubList

# Permissions are not enforced on links to other servers: they may send and receive anything.
NO_PERMISSIONS = PermissionChecker(None)
# nats-server's first PING on a route, gateway or leaf connection comes after about a second
# (+ up to 20%).
FIRST_PING = 1.0


# Between failed dials of a route or a gateway: a second, or with `connect_backoff` doubled
# each time up to 30 s (nats-server's DEFAULT_ROUTE_CONNECT_MAX, gatewayConnectMaxDelay).
RETRY_DELAY = 1.0
RETRY_MAX_DELAY = 30.0


class RetryDelays:
    """The waits between failed dials of one route or gateway (nats-server's attemptDelay in
    connectToRoute, and solicitGateway's): a second each, or with `connect_backoff` a second
    doubled after each failed attempt, up to 30 s. Once connected it starts again from a
    second."""

    def __init__(self, backoff: bool) -> None:
        self.backoff = backoff
        self.delay = RETRY_DELAY

    def next(self) -> float:
        delay = self.delay
        if self.backoff:
            self.delay = min(delay * 2, RETRY_MAX_DELAY)
        return delay

    def reset(self) -> None:
        self.delay = RETRY_DELAY


class Link(asyncio.Protocol):
    """A connection to another server. Subclasses say what they are (`kind`, in log lines),
    how often they ping, and what to do once closed."""

    # nats-server's words in "<kind> connection closed": "Router", "Gateway", "Leafnode"
    kind = "Link"
    # Set by the kind: its codec (a run parser: plain messages come as bare `Pub`s and runs)
    # and the part it belongs to.
    parser: RouteParser
    listener: LinkListener[Any]
    stale_kind = "Link"  # "Route", "Gateway", "Leaf": in "Stale <kind> Connection - Closing"
    label_tag = "cid"  # the id's tag in the log label ("rid", "gid", "lid")

    def __init__(self, server: Server, cid: int, write_deadline: float = 0.0) -> None:
        """`write_deadline`: this kind's own (0: the server's)."""
        self.server = server
        self.link_id = cid
        self.outbound = Outbound(
            server,
            server.options.max_pending,
            write_deadline or server.options.write_deadline,
            self._slow,
        )
        self.transport: asyncio.Transport | None = None
        self.closed = False
        self.close_reason = ""
        self.echo = True
        self.perms = NO_PERMISSIONS
        self.headers = True
        self.stats = Stats()
        self.host = ""
        self.port = 0
        self.label = ""
        self.start = time.time()
        self.last_activity = self.start
        self.pings_out = 0
        self.rtt = 0.0
        self._rtt_start = 0.0
        self._ping_timer: asyncio.TimerHandle | None = None
        self.done: asyncio.Future[None] = server.loop.create_future()
        # Delivery plans of the peer's RMSG/LMSG lines (server/plans.py), for our receivers.
        self.plans = PlanCache()
        # Interest learned from the peer: (account, subject, queue) -> its subscription.
        self.subs: dict[tuple[bytes, bytes, bytes], RemoteSubscription] = {}
        # Replies to route back across this link for a little while, (account, reply) -> the
        # subject the answer goes back on, the subscription that catches it, its expiry.
        self.reply_routes: dict[tuple[bytes, bytes], tuple[bytes, Subscription, float]] = {}

    # -- the Receiver protocol -------------------------------------------------------------------

    @property
    def cid(self) -> int:
        return self.link_id

    @property
    def account(self) -> Account:
        return self.server.global_account

    @property
    def plain(self) -> bool:
        return False  # frames carry the account: never part of a client's delivery plan

    def deliver(self, sub: Subscription, msg: Pub, publisher: Receiver | None) -> None:
        """Frame `msg` for the peer (RMSG, LMSG), as its kind does."""
        raise NotImplementedError

    def unsubscribe(self, sub: Subscription) -> None:
        pass  # another server's subscriptions never auto-unsubscribe

    # -- asyncio.Protocol ------------------------------------------------------------------------

    def attach(self, base: asyncio.BaseTransport) -> asyncio.Transport:
        """connection_made's common part: the transport, the peer address, the log label."""
        transport = cast(asyncio.Transport, base)
        self.transport = transport
        self.outbound.attach(transport)
        peer = peer_address(transport)
        if peer is not None:
            self.host, self.port = peer
        self.label = f"{join_host_port(self.host, self.port)} - {self.label_tag}:{self.link_id}"
        return transport

    def connection_made(self, base: asyncio.BaseTransport) -> None:
        if self._opened(base):
            self._begin()

    def _opened(self, base: asyncio.BaseTransport) -> bool:
        """The connection is there: name it and keep it with its part's (False when the part
        stopped meanwhile and the connection is dropped)."""
        transport = self.attach(base)
        listener = self.listener
        if not listener.running:
            self.closed = True
            transport.abort()
            return False
        listener.connecting.add(self)
        return True

    def _begin(self) -> None:
        """The link's protocol starts (after the TLS handshake on a TLS link)."""
        raise NotImplementedError

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.closed:
            self.close(CloseReason.CLIENT_CLOSED if exc is None else CloseReason.READ_ERROR)

    def pause_writing(self) -> None:
        self.outbound.pause_writing(self.server.loop)

    def resume_writing(self) -> None:
        self.outbound.resume_writing()

    # -- events ----------------------------------------------------------------------------------

    def _handle_events(self, events: list[Event | Pub]) -> None:
        """One read's events. The hot path, inlined: a plain message (a bare `Pub` from the
        parser) whose line has a plan under its SubList's generation goes straight to the
        planned receivers (as ClientSession._process_pub does for a client's PUB), and so do
        the messages that repeat its line right after it (a `RouteMsgRun`). A kind plans a
        line (`remember_plan`) only when nothing it checks per message could stop or change
        a message with that line: the check was made when the plan was made."""
        plans = self.plans
        dirty = self.server.dirty
        touched = plans.touched
        count = nbytes = 0
        for ev in events:
            if type(ev) is Pub:
                line = ev[4]
                plan = plans.last_plan if line is plans.last_line else plans.lookup(line)
                if plan is not None and plan.genid == plan.sublist.genid:  # type: ignore[union-attr]
                    payload = ev[2]
                    count += 1
                    nbytes += len(payload)
                    plan.send(payload, dirty, touched)
                    continue
                self._process_msg(self.parser.route_msg(ev))
            elif type(ev) is RouteMsgRun:
                self._deliver_run(ev)
            else:
                self._handle(cast(Event, ev))
            if self.closed:
                break
        if count:
            stats = self.stats
            stats.in_msgs += count
            stats.in_bytes += nbytes

    def _deliver_run(self, run: RouteMsgRun) -> None:
        """Messages with the same line, one after the other: once the line has a plan, all
        the rest go to each planned receiver as one frame (its MSG line before each payload)."""
        plans = self.plans
        line = run.line
        tails = run.tails
        for i, tail in enumerate(tails):
            plan = plans.last_plan if line is plans.last_line else plans.lookup(line)
            if plan is None or plan.genid != plan.sublist.genid:  # type: ignore[union-attr]
                self._process_msg(RouteMsg(run.account, run.pub(tail), ()))
                if self.closed:
                    return
                continue
            rest = tails[i:] if i else tails
            k = len(rest)
            nbytes = k * run.size
            stats = self.stats
            stats.in_msgs += k
            stats.in_bytes += nbytes
            plan.send_run(rest, run.size, self.server.dirty, plans.touched)
            return

    def remember_plan(
        self, msg: Pub, receivers: tuple[Subscription, ...], sublist: SubList[Subscription]
    ) -> None:
        """Plan the line of `msg` (a bare `Pub` of the parser) for `receivers`, this server's
        own plain ones, while `sublist`'s generation holds (`_handle_events`)."""
        self.plans.remember(self, msg, SubListResult(receivers), sublist.genid, sublist)

    def _handle(self, ev: Event) -> None:
        """One event from the peer: what every link does alike, the rest by its kind."""
        if isinstance(ev, RouteMsg):
            self._process_msg(ev)
        elif isinstance(ev, RouteSub):
            self._process_sub(ev)
        elif isinstance(ev, RouteUnsub):
            self._process_unsub(ev)
        elif isinstance(ev, Ping):
            self.send_now(PONG_FRAME)
        elif isinstance(ev, Pong):
            self.pong()
        elif isinstance(ev, RouteInfo):
            self._process_info(ev.info)
        elif isinstance(ev, RouteConnect):
            self._process_connect(ev.options)
        elif isinstance(ev, Err):
            self._process_err(ev.text.decode(errors="replace"))
        elif isinstance(ev, ProtocolError):
            if ev.reply is not None:
                self.send_now(err_frame(ev.reply))
            log.error("%s - %s", self.label, ev.detail)
            self.close(ev.close_reason)
        else:
            self._process_other(ev)

    def _process_msg(self, ev: RouteMsg) -> None:
        raise NotImplementedError

    def _process_sub(self, ev: RouteSub) -> None:
        raise NotImplementedError

    def _process_unsub(self, ev: RouteUnsub) -> None:
        raise NotImplementedError

    def _process_info(self, info: dict[str, Any]) -> None:
        raise NotImplementedError

    def _process_connect(self, opts: dict[str, Any]) -> None:
        raise NotImplementedError

    def _process_err(self, text: str) -> None:
        """The peer's -ERR: log it as this kind does, and close."""
        raise NotImplementedError

    def _process_other(self, ev: Event) -> None:
        """An op only some kinds know (A+/A- on a gateway, +OK on a route): ignored here."""

    # -- pings -----------------------------------------------------------------------------------

    def start_pinging(self) -> None:
        self._ping_timer = self.server.loop.call_later(
            FIRST_PING * (1 + random.random() * 0.2), self._ping_fired
        )

    def ping_settings(self) -> tuple[float, int]:
        """The ping interval and the pings that may go unanswered."""
        opts = self.server.options
        return opts.ping_interval, opts.ping_max

    def may_ping(self) -> bool:
        return True

    def pong(self) -> None:
        self.pings_out = 0
        if self._rtt_start:
            self.rtt = time.monotonic() - self._rtt_start

    def ping_now(self) -> None:
        self._rtt_start = time.monotonic()
        self.send_now(PING_FRAME)

    def _ping_fired(self) -> None:
        self._ping_timer = None
        if self.closed:
            return
        interval, ping_max = self.ping_settings()
        if self.pings_out + 1 > ping_max:
            log.debug("%s - Stale %s Connection - Closing", self.label, self.stale_kind)
            self.server.stats_stale_connection()
            self.send_now(err_frame(errors.STALE_CONNECTION))
            self.close(CloseReason.STALE_CONNECTION)
            return
        if self.may_ping():
            self.pings_out += 1
            self.ping_now()
        self._ping_timer = self.server.loop.call_later(interval, self._ping_fired)

    # -- output and closing ----------------------------------------------------------------------

    def send_now(self, frame: bytes) -> None:
        if self.closed:
            return
        self.outbound.push(frame)
        self.outbound.flush()

    def refuse(self, text: str, reason: str) -> None:
        """-ERR with `text`, then close."""
        self.send_now(err_frame(text))
        self.close(reason)

    def _slow(self, kind: str) -> None:
        self.server.stats_slow_consumer()
        reason = (
            CloseReason.SLOW_CONSUMER_PENDING_BYTES
            if kind == "pending"
            else CloseReason.SLOW_CONSUMER_WRITE_DEADLINE
        )
        log.info("%s - Slow Consumer Detected", self.label)
        self.close(reason, abort=True)

    # -- replies routed back ---------------------------------------------------------------------

    def reply_route_subscription(self, account: bytes, reply: bytes) -> Subscription:
        """The subscription of this link that catches the answers on `reply`."""
        raise NotImplementedError

    def add_reply_route(
        self, account: Account, name: bytes, reply: bytes, routed: bytes, lifetime: float
    ) -> None:
        """Send what is published on `reply` within `lifetime` seconds across this link as
        `routed` (nats-server's trackGWReply and handleGWReplyMap, kept per account)."""
        key = (name, reply)
        expires = time.monotonic() + lifetime
        existing = self.reply_routes.get(key)
        if existing is not None:
            self.reply_routes[key] = (routed, existing[1], expires)
            return
        sub = self.reply_route_subscription(name, reply)
        try:
            account.sublist.insert(sub)
        except ValueError:
            return
        self.reply_routes[key] = (routed, sub, expires)
        self.server.loop.call_later(lifetime, self._expire_reply_route, account, key)

    def _expire_reply_route(self, account: Account, key: tuple[bytes, bytes]) -> None:
        entry = self.reply_routes.get(key)
        if entry is None:
            return
        left = entry[2] - time.monotonic()
        if left > 0 and not self.closed:
            self.server.loop.call_later(left, self._expire_reply_route, account, key)
            return
        del self.reply_routes[key]
        entry[1].closed = True
        account.sublist.remove(entry[1])

    def routed_subject(self, account: bytes, subject: bytes) -> bytes:
        """The subject an answer on `subject` goes back on (`subject` when none is routed)."""
        route = self.reply_routes.get((account, subject))
        return subject if route is None else route[0]

    def interest(self) -> Iterator[tuple[bytes, Subscription]]:
        """Every subscription the peer brought, and the reply routes, with its account's
        name."""
        for (account, _, _), sub in self.subs.items():
            yield account, sub
        for (account, _), (_, route_sub, _) in self.reply_routes.items():
            yield account, route_sub
        self.reply_routes.clear()

    def close(self, reason: str, abort: bool = False) -> None:
        if self.closed:
            return
        self.closed = True
        self.close_reason = reason
        if self._ping_timer is not None:
            self._ping_timer.cancel()
            self._ping_timer = None
        self.outbound.close(abort)
        by_account: dict[bytes, list[Subscription]] = {}
        for account, sub in list(self.interest()):
            sub.closed = True
            by_account.setdefault(account, []).append(sub)
        self.subs.clear()
        for name, subs in by_account.items():
            owner = self.server.accounts.get(name.decode(errors="replace"))
            if owner is not None:
                owner.sublist.remove_batch(subs)
        if self.label:
            log.info("%s - %s connection closed: %s", self.label, self.kind, reason)
        self.closed_hook()
        if not self.done.done():
            self.done.set_result(None)

    def closed_hook(self) -> None:
        """Called once closed, after the peer's interest is gone."""


_L = TypeVar("_L", bound=Link)


class LinkListener(Generic[_L]):
    """The listening half of a part that links to other servers (the cluster, the gateways):
    its port, bound at start (so a port that cannot be had fails the start with nats-server's
    [FTL] text) and served once the server is ready, and its background tasks (dials)."""

    def __init__(self, server: Server) -> None:
        self.server = server
        self.port = 0
        self.running = False
        self._listener: asyncio.Server | None = None
        self._socket: socket.socket | None = None  # bound at start, served once ready
        self._tasks: set[asyncio.Task[None]] = set()
        self.connecting: set[_L] = set()  # every open connection of the part

    def bind_port(self, host: str, port: int, what: str) -> None:
        """Bind `host`:`port` (-1: any free port); `what` names it in the [FTL] text."""
        self._socket = bind(
            host,
            0 if port == -1 else port,
            lambda err: f"Error listening on {what}: {port} - {err}",
        )
        self.port = int(self._socket.getsockname()[1])
        self.running = True

    async def serve(self, factory: Callable[[], asyncio.Protocol]) -> bool:
        """Accept connections on the bound port; False if the part stopped meanwhile."""
        sock, self._socket = self._socket, None
        if sock is None or not self.running:
            return False
        self._listener = await self.server.loop.create_server(factory, sock=sock, backlog=100)
        return True

    def stop_listening(self) -> None:
        self.running = False
        if self._socket is not None:
            self._socket.close()
            self._socket = None
        if self._listener is not None:
            self._listener.close()
            self._listener = None
        for task in list(self._tasks):
            task.cancel()

    def _spawn(self, coro: Coroutine[Any, Any, None]) -> None:
        task = self.server.loop.create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)


def count_interest(counts: dict[tuple[bytes, bytes], int], sub: Subscription, delta: int) -> int:
    """Count a subscription of `sub`'s subject and queue in or out of `counts` (local interest
    per account, as nats-server tallies it for routes and gateways): the count before."""
    key = (sub.subject_bytes, sub.queue_bytes)
    old = counts.get(key, 0)
    if old + delta > 0:
        counts[key] = old + delta
    else:
        counts.pop(key, None)
    return old
