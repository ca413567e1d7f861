"""What every connection to another server has in common, whatever it carries (a route, a
gateway): the asyncio adapter's transport and flow control, pings and staleness, the receiver
attributes, and closing with the interest it brought.

Corresponds to the parts of nats-server's `client.go` that ROUTER and GATEWAY connections share
(`processPingTimer`, `processPong`, `closeConnection`, the slow-consumer handling of the
outbound buffer).
"""

from __future__ import annotations

import asyncio
import random
import socket
import time
from collections.abc import Callable, Coroutine, Iterator
from typing import TYPE_CHECKING, Any, cast

from pynatsd.auth import PermissionChecker
from pynatsd.logger import log
from pynatsd.protocol import errors
from pynatsd.protocol.errors import CloseReason
from pynatsd.protocol.frames import PING_FRAME, err_frame
from pynatsd.server.delivery import Stats
from pynatsd.server.listen import bind, join_host_port, peer_address
from pynatsd.server.outbound import Outbound
from pynatsd.server.plans import Plan, PlanCache

if TYPE_CHECKING:
    from pynatsd.server.accounts import Account
    from pynatsd.server.server import Server
    from pynatsd.server.subscription import RemoteSubscription, Subscription

# Permissions are not enforced on links to other servers: they may send and receive anything.
NO_PERMISSIONS = PermissionChecker(None)
# nats-server's first PING on a route or gateway comes after about a second (+ up to 20%).
FIRST_PING = 1.0


class Link(asyncio.Protocol):
    """A connection to another server. Subclasses say what they are (`kind`, in log lines),
    how often they ping, and what to do once closed."""

    kind = "Link"  # "Router", "Gateway": nats-server's words in "<kind> connection closed"
    stale_kind = "Link"  # "Route", "Gateway": in "Stale <kind> Connection - Closing"
    label_tag = "cid"  # the id's tag in the log label ("rid", "gid")

    def __init__(self, server: Server, cid: int) -> None:
        self.server = server
        self.link_id = cid
        self.outbound = Outbound(
            server, server.options.max_pending, server.options.write_deadline, self._slow
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
        # Delivery plans of the peer's RMSG lines (server/plans.py), for our receivers.
        self.plans = PlanCache()
        # Interest learned from the peer: (account, subject, queue) -> its subscription.
        self.subs: dict[tuple[bytes, bytes, bytes], RemoteSubscription] = {}

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

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.closed:
            self.close(CloseReason.CLIENT_CLOSED if exc is None else CloseReason.READ_ERROR)

    def pause_writing(self) -> None:
        self.outbound.pause_writing(self.server.loop)

    def resume_writing(self) -> None:
        self.outbound.resume_writing()

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

    def send_planned(self, plan: Plan, payload: bytes) -> None:
        """The planned delivery of a message from the peer (as ClientSession._process_pub
        does it for a client's PUB)."""
        tail = payload + b"\r\n"
        dirty = self.server.dirty
        if not plan.count:
            self.plans.touched.append(plan)
        plan.count += 1
        plan.nbytes += len(payload)
        for outbound, _, head in plan.targets:
            frames = outbound.frames
            frames.append(head)
            frames.append(tail)
            if not outbound.dirty:
                outbound.dirty = True
                dirty.append(outbound)

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

    def interest(self) -> Iterator[tuple[bytes, Subscription]]:
        """Every subscription the peer brought, with its account's name."""
        for (account, _, _), sub in self.subs.items():
            yield account, sub

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


class LinkListener:
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
