"""One route connection: the asyncio adapter over the route codec, and the receiver that stands
for the peer server in the account SubLists.

Corresponds to the connection half of nats-server's `server/route.go` (`createRoute`,
`processRouteConnect`, `processRouteInfo`, `processRemoteSub`, `processRemoteUnsub`,
`processInboundRoutedMsg`) and the ROUTER kind of `client.go`. The handshake, as nats-server
does it: the accepting side sends its INFO at once and expects CONNECT first; the dialing side
sends CONNECT at once and its INFO once the peer's INFO has arrived. The route registers with
the cluster (`Cluster.register`) when the peer's INFO is in; a duplicate (both servers dialed
each other) or a route to ourselves is closed without a word.

As a receiver (`server.delivery.RemoteReceiver`) a route is handed each message once, with the
queue groups whose member it holds, and frames it as RMSG/HMSG with the account.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, cast

from pynatsd.cluster.link import Link
from pynatsd.cluster.permissions import route_permissions
from pynatsd.cluster.protocol import (
    RouteMsg,
    RouteMsgRun,
    RouteRunParser,
    RouteSub,
    RouteUnsub,
    js_ack_deliver_index,
    lmsg_frame,
    rmsg_frame,
    with_deliver_subject,
)
from pynatsd.logger import log
from pynatsd.protocol import errors
from pynatsd.protocol.errors import CloseReason
from pynatsd.protocol.events import Event, Pub
from pynatsd.protocol.frames import PING_FRAME, go_json_bytes
from pynatsd.server.delivery import fan_out_routed
from pynatsd.server.routed import ShownPub
from pynatsd.server.subscription import RemoteSubscription
from pynatsd.sublist import SubListResult

if TYPE_CHECKING:
    from pynatsd.cluster.cluster import Cluster
    from pynatsd.cluster.pool import Slot
    from pynatsd.server.accounts import Account
    from pynatsd.server.delivery import Receiver
    from pynatsd.server.subscription import Subscription

ROUTE_PING_MAX_INTERVAL = 30.0

DUPLICATE_ROUTE = "Duplicate Route"
CLUSTER_NAME_CONFLICT = "Cluster Name Conflict"


def route_info_frame(info: dict[str, Any]) -> bytes:
    # As a client INFO: a space before the CRLF.
    return b"INFO " + go_json_bytes(info) + b" \r\n"


class Route(Link):
    """A route to one peer server; also that server's receiver in every account SubList."""

    kind = "Router"
    stale_kind = "Route"
    label_tag = "rid"

    def __init__(
        self,
        cluster: Cluster,
        *,
        solicited: bool,
        url: str = "",
        configured: bool = False,
        slot: Slot = 0,
    ) -> None:
        server = cluster.server
        super().__init__(server, server.next_cid())
        self.cluster = cluster
        # The server's gateways (they start before any route connects), for messages with
        # gateway-routed subjects or replies and gateway INFOs from peers.
        self.gateways = cluster.gateways
        self.solicited = solicited  # we dialed it (did_solicit)
        self.configured = configured  # an explicit route of the configuration (is_configured)
        self.url = url
        self.rid = self.link_id
        # Its place in the pool to the peer: an index, or the account it is pinned to (a
        # dialed connection knows it now, an accepted one from the peer's INFO).
        self.slot: Slot = slot
        self.pinned_account = slot if isinstance(slot, bytes) else b""
        self.parser = RouteRunParser(expect_connect=not solicited, account=self.pinned_account)
        self.parser.hold_after_info = True
        self.registered = False
        self.retry = False  # closed after being kept over a duplicate: dial the peer again
        self.pinned = False  # a peer's pinned connection we cannot take (no pool), left to it
        # `cluster { permissions }`: export decides which of the peer's RS+ are taken.
        self.perms = route_permissions(cluster.opts.permissions)
        self.remote_id = ""
        self.remote_name = ""
        self.remote_info: dict[str, Any] = {}
        self.last_in = time.monotonic()
        # Accounts by the name on the wire (looked up once).
        self._accounts: dict[bytes, Account] = {}
        # The peer understands LS+/LMSG with a leaf's origin cluster (`lnoc`), and LS- with it
        # (`lnocu`): from its INFO.
        self.lnoc = False
        self.lnocu = False
        # The peer's LS+ interest (of its leaf nodes), by (origin, account, subject, queue).
        self.leaf_subs: dict[tuple[bytes, bytes, bytes, bytes], RemoteSubscription] = {}

    # -- the Receiver protocol -------------------------------------------------------------------

    def deliver(self, sub: Subscription, msg: Pub, publisher: Receiver | None) -> None:
        self.deliver_remote(sub, msg, [sub.queue_bytes] if sub.queue else [])

    def deliver_remote(self, sub: Subscription, msg: Pub, queues: list[bytes]) -> None:
        account = sub.wire_account if isinstance(sub, RemoteSubscription) else b"$G"
        if type(msg) is ShownPub:
            # A JetStream delivery: sent on the subject it is routed on, the one it shows
            # after its reply's `@` (cluster/protocol.py).
            msg = Pub(
                msg.routing,
                with_deliver_subject(msg.reply, msg.subject),
                msg.payload,
                msg.header_size,
            )
        frame = rmsg_frame(account, msg, queues, self.headers)
        self.stats.sent(1, len(msg.payload))
        self.last_activity = time.time()
        self.outbound.push(frame)

    def deliver_leaf_origin(
        self, sub: Subscription, msg: Pub, queues: list[bytes], origin: bytes
    ) -> None:
        """A message of a leaf node of cluster `origin`: LMSG with the origin to a peer that
        announced `lnoc` (so that it never goes back to that cluster), else RMSG/HMSG."""
        if not self.lnoc:
            self.deliver_remote(sub, msg, queues)
            return
        account = sub.wire_account if isinstance(sub, RemoteSubscription) else b"$G"
        self.stats.sent(1, len(msg.payload))
        self.last_activity = time.time()
        self.outbound.push(lmsg_frame(origin, account, msg, queues))

    # -- asyncio.Protocol ------------------------------------------------------------------------

    def connection_made(self, base: asyncio.BaseTransport) -> None:
        if self._opened(base):
            self._begin()

    def _opened(self, base: asyncio.BaseTransport) -> bool:
        """The connection is there: name it and keep it (False when the cluster stopped
        meanwhile and the connection is dropped)."""
        transport = self.attach(base)
        if not self.cluster.running:
            self.closed = True
            transport.abort()
            return False
        self.cluster.connecting.add(self)
        return True

    def _begin(self) -> None:
        """The route protocol starts (after the TLS handshake on a TLS cluster)."""
        log.info("%s - Route connection created", self.label)
        if self.solicited:
            self.send_now(self.cluster.connect_frame(self.url))
        else:
            self.send_now(route_info_frame(self.cluster.route_info()))
        self.start_pinging()

    def data_received(self, data: bytes) -> None:
        if self.closed:
            return
        self.last_in = time.monotonic()
        self.last_activity = time.time()
        parser = self.parser
        events = parser.feed(data)
        while True:
            self._handle_events(events)
            if self.closed or not parser.held:
                break
            events = parser.feed(b"")  # what came after an INFO, read as it now says
        self.plans.settle()
        server = self.server
        server.flush_dirty()

    def _handle_events(self, events: list[Event | Pub]) -> None:
        """One read's events. The hot path, inlined: a plain RMSG (a bare `Pub` from the
        parser) whose line has a plan under its SubList's generation goes straight to the
        planned receivers (as ClientSession._process_pub does for a client's PUB)."""
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

    # -- events ----------------------------------------------------------------------------------

    def _process_err(self, text: str) -> None:
        if self.pinned or not self.registered:
            log.debug("%s - Router Error %s", self.label, text)
        else:
            log.error("%s - Router Error %s", self.label, text)
        self.close(CloseReason.PARSE_ERROR)

    def _process_connect(self, opts: dict[str, Any]) -> None:
        """The CONNECT of a peer that dialed us (nats-server's processRouteConnect)."""
        if opts.get("lang"):
            self.refuse("attempted to connect to route port", CloseReason.PROTOCOL_VIOLATION)
            return
        if opts.get("gateway"):
            self.refuse("attempted to connect to route port", CloseReason.PROTOCOL_VIOLATION)
            return
        cluster = self.cluster
        peer_cluster = str(opts.get("cluster") or "")
        if (
            peer_cluster
            and peer_cluster != cluster.cluster_name
            and not cluster.dynamic
            and not opts.get("cluster_dynamic")
        ):
            self.refuse(
                f'Rejecting connection, cluster name "{peer_cluster}" does not match '
                f'"{cluster.cluster_name}"',
                CLUSTER_NAME_CONFLICT,
            )
            return
        if not cluster.authorized(opts):
            log.error("%s - authentication error", self.label)
            self.refuse(errors.AUTHORIZATION_VIOLATION, CloseReason.AUTHENTICATION_VIOLATION)
            return
        if peer_cluster and cluster.dynamic and not opts.get("cluster_dynamic"):
            cluster.adopt_name(peer_cluster)
        self.headers = bool(opts.get("headers"))

    def _process_info(self, info: dict[str, Any]) -> None:
        server_id = str(info.get("server_id") or "")
        if self.registered:
            if info.get("route_acc_add_reqid"):
                self.cluster.pinned_changes.peer_request(self, info)
            elif info.get("gateway"):
                # About a gateway (processGatewayInfoFromRoute): for the gateways, if any.
                self._gateway_info(info)
            elif server_id and server_id != self.remote_id:
                self.cluster.gossip(self, info)  # about another server: dial it
            else:
                self.cluster.peer_update(self, info)
            return
        cluster = self.cluster
        if server_id == self.server.server_id:
            if self.url:
                log.warning("Detected route to self, ignoring %s", self.url)
                cluster.self_urls.add(self.url)
            self.close(DUPLICATE_ROUTE)
            return
        peer_cluster = str(info.get("cluster") or "")
        if peer_cluster and peer_cluster != cluster.cluster_name:
            if cluster.dynamic and not info.get("cluster_dynamic"):
                cluster.adopt_name(peer_cluster)
            elif not info.get("cluster_dynamic") or not cluster.dynamic:
                log.error(
                    "%s - Cluster name conflict: %s vs %s",
                    self.label,
                    peer_cluster,
                    cluster.cluster_name,
                )
                self.close(CLUSTER_NAME_CONFLICT)
                return
        self.remote_id = server_id
        self.remote_name = str(info.get("server_name") or "")
        self.remote_info = info
        self.lnoc = bool(info.get("lnoc"))
        self.lnocu = bool(info.get("lnocu"))
        if not self.solicited:
            pinned = str(info.get("route_account") or "").encode()
            if pinned and not cluster.pool_size:
                # A Go peer's pinned connection: without a pool we take none; the peer sees
                # our INFO has no route_pool_size, says so with -ERR and closes it. Never
                # registered, so it can not displace the real route.
                self.pinned = True
                return
            if pinned:
                if pinned.decode(errors="replace") not in self.server.accounts:
                    text = f'Unable to lookup account "{pinned.decode(errors="replace")}": ' + (
                        "account missing"
                    )
                    log.error("%s - %s", self.label, text)
                    self.refuse(text, CloseReason.MISSING_ACCOUNT)
                    return
                self.slot = self.pinned_account = self.parser.account = pinned
            else:
                self.slot = int(info.get("route_pool_idx") or 0)
        if "headers" in info:
            self.headers = (
                self.headers and bool(info.get("headers"))
                if not self.solicited
                else bool(info.get("headers"))
            )
        problem = cluster.pool_problem(self)
        if problem:
            # nats-server's sendErrAndErr: the peer is told, the log says it too.
            log.error("%s - %s", self.label, problem)
            self.refuse(problem, CloseReason.PROTOCOL_VIOLATION)
            return
        if self.solicited:
            # The dialer's INFO waits for the peer's (nats-server delays it the same way).
            self.send_now(route_info_frame(cluster.route_info(route=self)))
        if not cluster.register(self):
            if log.isEnabledFor(logging.DEBUG):
                log.debug("%s - Detected duplicate remote route %r", self.label, server_id)
            self.close(DUPLICATE_ROUTE)
            return
        self.registered = True
        self.parser.hold_after_info = False
        label = self.remote_name or server_id
        log.info("%s - Route connection registered with %s", self.label, label)
        self.outbound.push(cluster.interest_frames(self))
        if self.gateways is not None:
            self.outbound.push(self.gateways.frames_for_route())
        if self.solicited:
            self._rtt_start = time.monotonic()
            self.outbound.push(PING_FRAME)
        self.outbound.flush()
        if self.solicited:
            cluster.fill_pool(self)

    def _gateway_info(self, info: dict[str, Any]) -> None:
        if self.gateways is not None:
            self.gateways.info_from_route(info)

    # -- interest and messages -------------------------------------------------------------------

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

    def _process_sub(self, ev: RouteSub) -> None:
        account = self.server.accounts.get(ev.account.decode(errors="replace"))
        if account is None:
            if log.isEnabledFor(logging.DEBUG):
                log.debug(
                    "%s - Unknown account %r for subject %r",
                    self.label,
                    ev.account.decode(errors="replace"),
                    ev.subject.decode(errors="replace"),
                )
            return
        key = (ev.account, ev.subject, ev.queue)
        sub = self.leaf_subs.get((ev.origin, *key)) if ev.origin else self.subs.get(key)
        if sub is not None:
            sub.weight = max(ev.weight, 1)  # a queue group's new size over there
            return
        perms = self.perms
        if perms.sub_restricted and not perms.can_subscribe(ev.subject.decode(errors="replace")):
            if log.isEnabledFor(logging.DEBUG):
                log.debug(
                    "%s - Can not export %r, ignoring remote subscription request",
                    self.label,
                    ev.subject.decode(errors="replace"),
                )
            return
        wire = b"" if self.pinned_account else ev.account
        sub = RemoteSubscription(self, ev.account, ev.subject, ev.queue, max(ev.weight, 1), wire)
        sub.origin = ev.origin
        if self.lnocu:
            # nats-server's key (its sid in /routez) for a peer that sends LS- with the
            # origin: the kind, then the origin of a leaf's interest.
            sub.sid = (b"L " + ev.origin + b" " if ev.origin else b"R ") + sub.sid
        try:
            account.sublist.insert(sub)
        except ValueError:
            log.debug("%s - invalid remote subscription %r", self.label, ev.subject)
            return
        if ev.origin:
            self.leaf_subs[(ev.origin, *key)] = sub
        else:
            self.subs[key] = sub

    def _process_unsub(self, ev: RouteUnsub) -> None:
        key = (ev.account, ev.subject, ev.queue)
        sub = self.leaf_subs.pop((ev.origin, *key), None) if ev.origin else self.subs.pop(key, None)
        if sub is None:
            return
        sub.closed = True
        account = self.server.accounts.get(ev.account.decode(errors="replace"))
        if account is not None:
            account.sublist.remove(sub)

    def _process_msg(self, ev: RouteMsg) -> None:
        msg = ev.msg
        stats = self.stats  # Stats.received, inlined
        stats.in_msgs += 1
        stats.in_bytes += len(msg.payload)
        account = self._accounts.get(ev.account)
        if account is None:
            account = self.server.accounts.get(ev.account.decode(errors="replace"))
            if account is None:
                return
            self._accounts[ev.account] = account
        gateways = self.gateways
        if gateways is not None and gateways.message_from_route(self, account, ev):
            return
        sublist = account.sublist
        line = msg.line
        reply = msg.reply
        if reply and reply.startswith(b"$JS.ACK."):
            at = js_ack_deliver_index(reply)
            if 0 < at < len(reply) - 1:
                # A JetStream delivery, routed on the subject it came on: its clients here
                # see the subject after the reply's `@` (never planned: `_handle_events`
                # finds no plan for its line).
                shown = ShownPub(
                    reply[at + 1 :], reply[:at], msg.payload, msg.header_size, msg.subject
                )
                result = sublist.match_bytes(msg.subject)
                if result.psubs or result.qsubs:
                    fan_out_routed(self, result, shown, ev.queues)
                return
        result = sublist.match_bytes(msg.subject)
        if result.psubs or result.qsubs:
            if line and not ev.queues and not any(sub.leaf for sub in result.psubs):
                # Local plain receivers only (one hop), no queue group (none named), used by
                # the next RMSG with this line (`_handle_events`); a leaf connected to us is
                # sent it by fan_out_routed, with no plan.
                local = tuple(sub for sub in result.psubs if not sub.remote)
                self.plans.remember(self, msg, SubListResult(local), sublist.genid, sublist)
            fan_out_routed(self, result, msg, ev.queues, ev.origin)

    def drop_interest(
        self,
        account: bytes | None = None,
        which: Callable[[tuple[bytes, bytes, bytes]], bool] | None = None,
    ) -> None:
        """Forget the interest the peer announced on this connection: all of it, one
        account's (moving to a connection of its own: nats-server's removeRemoteSubsForAcc),
        or the (account, subject, queue) keys `which` picks."""
        by_account: dict[bytes, list[RemoteSubscription]] = {}
        # Both tables by the (account, subject, queue) each entry stands for.
        entries: list[tuple[tuple[bytes, bytes, bytes], Any, dict[Any, RemoteSubscription]]] = [
            (key, key, self.subs) for key in self.subs
        ]
        entries += [(leaf_key[1:], leaf_key, self.leaf_subs) for leaf_key in self.leaf_subs]
        for key, own_key, table in entries:
            if account is not None and key[0] != account:
                continue
            if which is not None and not which(key):
                continue
            sub = table.pop(own_key)
            sub.closed = True
            by_account.setdefault(key[0], []).append(sub)
        for name, subs in by_account.items():
            account_obj = self.server.accounts.get(name.decode(errors="replace"))
            if account_obj is not None:
                account_obj.sublist.remove_batch(subs)

    # -- output and closing ----------------------------------------------------------------------

    def interest(self) -> Iterator[tuple[bytes, Subscription]]:
        for (_, account, _, _), sub in self.leaf_subs.items():
            yield account, sub
        self.leaf_subs = {}
        yield from super().interest()

    def ping_settings(self) -> tuple[float, int]:
        opts = self.server.options.cluster
        interval = min(opts.ping_interval if opts else 30.0, ROUTE_PING_MAX_INTERVAL)
        return interval, opts.ping_max if opts else 2

    def closed_hook(self) -> None:
        self.cluster.route_closed(self)
