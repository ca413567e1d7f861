"""Delivery: the one way a message reaches a receiver.

Corresponds to `processMsgResults` and `deliverMsg` in nats-server's `server/client.go`. Every
receiver kind (a client connection today; routes, leaf nodes, gateways and MQTT sessions as they
come; the server's own internal subscriptions) sits behind `Receiver`, and every message, whoever
published it, goes through `deliver`: the checks nats-server makes per subscription (closed,
no-echo, deny-on-deliver permissions, reply tracking for allow_responses, auto-unsubscribe) are
made here once, then the receiver frames the message in its own protocol (MSG/HMSG for a client,
RMSG for a route, a callback for an internal subscription) and counts it.

Two shortcuts keep the hot paths cheap without a second set of rules:
- a `Plan` caches, per PUB line and SubList generation, the receivers that need nothing checked
  per message and their ready-made MSG lines (`remember_plan` decides who qualifies, using the
  same rules as `deliver`);
- `deliver_stored` writes JetStream's stored messages and the server's replies to a receiver
  that needs nothing checked, in one formatting pass.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from itertools import count
from typing import TYPE_CHECKING, Protocol, cast

from pynatsd.protocol.events import Pub
from pynatsd.protocol.frames import stored_msg_frame
from pynatsd.server.msgtrace import (
    ERR_AUTO_UNSUB_EXCEEDED,
    ERR_SUB_DENY,
    trace_refusal,
    traced_delivery,
)

if TYPE_CHECKING:
    from pynatsd.auth import PermissionChecker
    from pynatsd.server.accounts import Account
    from pynatsd.server.msgtrace import MsgTrace
    from pynatsd.server.outbound import Outbound
    from pynatsd.server.subscription import Subscription
    from pynatsd.sublist import SubListResult

# Rotates the starting member of queue groups so load spreads evenly.
queue_rr = count()

# True once a server of this process has routes: `fan_out` then looks for the interest of
# other servers in each result. A process without a cluster never pays for the search.
_remote_delivery = False


def enable_remote_delivery() -> None:
    """Called by the cluster part when it starts (there is no way back: a result may hold
    remote interest from then on)."""
    global _remote_delivery
    _remote_delivery = True


class Stats:
    """Messages and payload bytes in and out of one receiver (nats-server's `in_msgs`,
    `out_bytes`, ... in /connz and /varz). The only place they are counted."""

    __slots__ = ("in_bytes", "in_msgs", "out_bytes", "out_msgs")

    def __init__(self) -> None:
        self.in_msgs = 0
        self.in_bytes = 0
        self.out_msgs = 0
        self.out_bytes = 0

    def received(self, msgs: int, nbytes: int) -> None:
        self.in_msgs += msgs
        self.in_bytes += nbytes

    def sent(self, msgs: int, nbytes: int) -> None:
        self.out_msgs += msgs
        self.out_bytes += nbytes

    def add(self, other: Stats) -> None:
        self.received(other.in_msgs, other.in_bytes)
        self.sent(other.out_msgs, other.out_bytes)


class Receiver(Protocol):
    """What a subscription belongs to. `deliver` below has made every check; the receiver only
    frames the message in its protocol, counts it in `stats` and queues it."""

    closed: bool
    echo: bool  # False: the receiver's own publishes are not delivered back to it
    headers: bool  # understands header blocks (else they are stripped)
    perms: PermissionChecker
    stats: Stats

    @property
    def cid(self) -> int:
        """The connection id (/connz `cid`); 0 for the server's internal receivers."""

    @property
    def account(self) -> Account:
        """The account whose SubList holds the receiver's subscriptions."""

    @property
    def outbound(self) -> Outbound | None:
        """Where frames for a receiver that writes bytes wait for the end of the read; None
        for the server's internal subscriptions."""

    @property
    def plain(self) -> bool:
        """True when nothing must be checked or traced per message (no deny-on-deliver, no
        reply tracking, no trace): frames may then be built ahead and pushed to `outbound`."""

    def deliver(self, sub: Subscription, msg: Pub, publisher: Receiver | None) -> None: ...

    def unsubscribe(self, sub: Subscription) -> None: ...


class RemoteReceiver(Receiver, Protocol):
    """The receiver of `RemoteSubscription`s: another server (through a route). It is sent one
    message however many of its subscriptions match, naming the queue groups whose member it
    holds (a route's RMSG `| q1 q2`)."""

    def deliver_remote(self, sub: Subscription, msg: Pub, queues: list[bytes]) -> None: ...


def deliver(
    publisher: Receiver | None, sub: Subscription, msg: Pub, trace: MsgTrace | None = None
) -> bool:
    """Hand `msg` to `sub`'s receiver unless nats-server would not: True when it was delivered.
    A traced message (`trace`, see server/msgtrace.py) reports each decision into it."""
    receiver = sub.client
    if sub.closed or receiver.closed or (receiver is publisher and not receiver.echo):
        if trace is not None:
            trace_refusal(trace, publisher, sub)
        return False
    perms = receiver.perms
    if perms.watching:
        # Deny lists are checked at delivery too: a `foo.>` subscriber denied `foo.secret`
        # never gets it; and a request's reply becomes publishable under allow_responses.
        if perms.delivery_filter and perms.deny_delivery(
            msg.subject.decode("utf-8", "surrogateescape"), sub.queue
        ):
            if trace is not None and receiver.outbound is not None:
                trace.egress(receiver, sub, ERR_SUB_DENY)
            return False
        if trace is not None and trace.only:
            return traced_delivery(trace, publisher, sub, msg)
        if msg.reply:
            perms.track_request(msg.reply.decode("utf-8", "surrogateescape"))
    elif trace is not None and trace.only:
        return traced_delivery(trace, publisher, sub, msg)
    sub.delivered += 1
    if sub.max_msgs:
        if sub.delivered > sub.max_msgs:
            receiver.unsubscribe(sub)
            if trace is not None and receiver.outbound is not None:
                trace.egress(receiver, sub, ERR_AUTO_UNSUB_EXCEEDED)
            return False
        if sub.delivered == sub.max_msgs:
            receiver.unsubscribe(sub)
    if trace is not None:
        return traced_delivery(trace, publisher, sub, msg)
    receiver.deliver(sub, msg, publisher)
    return True


def fan_out(
    publisher: Receiver | None,
    result: SubListResult[Subscription],
    msg: Pub,
    trace: MsgTrace | None = None,
) -> bool:
    """Deliver to every plain subscription and to one member of each queue group (the next in
    turn that takes it): True when at least one subscription received the message."""
    if _remote_delivery:
        return _fan_out_with_remotes(publisher, result, msg, trace)
    delivered = False
    for sub in result.psubs:
        if deliver(publisher, sub, msg, trace):
            delivered = True
    for group in result.qsubs:
        n = len(group)
        start = next(queue_rr) % n
        for i in range(n):
            if deliver(publisher, group[(start + i) % n], msg, trace):
                delivered = True
                break
    return delivered


def _fan_out_with_remotes(
    publisher: Receiver | None,
    result: SubListResult[Subscription],
    msg: Pub,
    trace: MsgTrace | None,
) -> bool:
    """`fan_out` where other servers may have interest (nats-server's processMsgResults for a
    message from a client): each such server gets the message once, and a queue group's member
    is picked at random over the local members and those on the other servers of this
    cluster, a route's subscription counting as many members as its weight; a route's member
    picked is final. A leaf's member is picked only when none of those takes it, another
    cluster's (a gateway's) only when no leaf's does either (`_deliver_member`)."""
    delivered = False
    # Each remote server's receiver: one of its subscriptions (for the account) and the
    # queue groups it was picked for.
    remotes: dict[RemoteReceiver, tuple[Subscription, list[bytes]]] = {}
    for sub in result.psubs:
        if sub.remote:
            remotes.setdefault(cast(RemoteReceiver, sub.client), (sub, []))
        elif deliver(publisher, sub, msg, trace):
            delivered = True
    for group in result.qsubs:
        # _queue_weight, inlined: this runs for every queue group of every message in a
        # cluster.
        weights = [
            (0 if sub.gateway else sub.weight) if sub.remote else 1  # type: ignore[attr-defined]
            for sub in group
        ]
        if _deliver_member(
            publisher, group, _weighted_start(weights, sum(weights)), msg, remotes, trace
        ):
            delivered = True
    if remotes and (trace is None or not trace.only):
        for receiver, (first, queues) in remotes.items():
            if receiver.closed:
                continue
            perms = receiver.perms
            if perms.delivery_filter and perms.deny_delivery(
                msg.subject.decode("utf-8", "surrogateescape"), first.queue
            ):
                continue  # a route's export deny list (nats-server's checkDenySub)
            receiver.deliver_remote(first, msg, queues)
            delivered = True
    return delivered


def _queue_weight(sub: Subscription) -> int:
    """A queue member's share of the pick: 1 here, its weight on another server of this
    cluster, none on a leaf (its weight is 0) or in another cluster: those are only picked
    when no member of this cluster takes the message."""
    if not sub.remote:
        return 1
    return 0 if sub.gateway else sub.weight  # type: ignore[attr-defined]


def _deliver_member(
    publisher: Receiver | None,
    members: Sequence[Subscription],
    start: int,
    msg: Pub,
    remotes: dict[RemoteReceiver, tuple[Subscription, list[bytes]]],
    trace: MsgTrace | None = None,
    takes: Callable[[Subscription], bool] | None = None,
) -> bool:
    """One member of a queue group takes the message, trying from `start` on: a local one now
    (True), or one on another server of this cluster, added to `remotes` with the group's name
    (final). A leaf's member (never the publisher's) is the fallback when none of those takes
    it, and another cluster's the last one (nats-server's processMsgResults keeps the first
    leaf member as `rsub`; sendMsgToGateways skips the groups already delivered). `takes`
    says which other servers' members may be picked at all."""
    n = len(members)
    leaf: Subscription | None = None
    gateway: Subscription | None = None
    for i in range(n):
        sub = members[(start + i) % n]
        if sub.remote:
            if takes is not None and not takes(sub):
                continue
            if sub.leaf:
                if leaf is None and sub.client is not publisher:
                    leaf = sub
            elif sub.gateway:
                if gateway is None:
                    gateway = sub
            else:
                _add_remote(remotes, sub)
                return False
            continue
        if deliver(publisher, sub, msg, trace):
            return True
    fallback = leaf or gateway
    if fallback is not None:
        _add_remote(remotes, fallback)
    return False


def _add_remote(
    remotes: dict[RemoteReceiver, tuple[Subscription, list[bytes]]], sub: Subscription
) -> None:
    """`sub`'s server is sent the message for `sub`'s queue group."""
    remotes.setdefault(cast(RemoteReceiver, sub.client), (sub, []))[1].append(sub.queue_bytes)


def _weighted_start(weights: list[int], total: int) -> int:
    """Where the pick of a queue member starts: each member's chance is its weight (any member
    when none weighs anything: all are on leafs or in other clusters)."""
    n = len(weights)
    if n == 1:
        return 0
    if not total:
        return random.randrange(n)
    pick = random.randrange(total)
    start = 0
    while pick >= weights[start]:
        pick -= weights[start]
        start += 1
    return start


def fan_out_from_gateway(
    publisher: Receiver,
    result: SubListResult[Subscription],
    msg: Pub,
    queues: tuple[bytes, ...],
    local_msg: Pub,
) -> bool:
    """Deliver a message that came from another cluster (a gateway's RMSG), as nats-server's
    processMsgResults does for a GATEWAY connection: to local receivers and leaf connections
    (`local_msg`: the reply without its `_GR_.` routing prefix, whose answer the gateway routes
    back) and once to each other server of this cluster with interest (`msg` as it came),
    never to another gateway; queue groups only those the sender named, a member in this
    cluster each (a leaf's as the fallback)."""
    delivered = False
    remotes: dict[RemoteReceiver, tuple[Subscription, list[bytes]]] = {}
    for sub in result.psubs:
        if not sub.remote:
            if deliver(publisher, sub, local_msg):
                delivered = True
        elif not sub.gateway:
            remotes.setdefault(cast(RemoteReceiver, sub.client), (sub, []))
    for group in result.qsubs if queues else ():
        if group[0].queue_bytes not in queues:
            continue
        members = [sub for sub in group if not sub.gateway]
        if not members:
            continue
        weights = [_queue_weight(sub) for sub in members]
        start = _weighted_start(weights, sum(weights))
        if _deliver_member(publisher, members, start, local_msg, remotes):
            delivered = True
    for receiver, (first, names) in remotes.items():
        if not receiver.closed:
            receiver.deliver_remote(first, local_msg if first.leaf else msg, names)
            delivered = True
    return delivered


def fan_out_routed(
    publisher: Receiver,
    result: SubListResult[Subscription],
    msg: Pub,
    queues: tuple[bytes, ...],
    origin: bytes = b"",
) -> bool:
    """Deliver a message that came from another server (a route's RMSG): to local receivers
    only (one hop: never to another server), and to queue groups only those the sender
    named, a local member each. A message of a leaf node of cluster `origin` (an LMSG) never
    goes to a leaf node of that cluster (nats-server's cluster-wide no echo)."""
    delivered = False
    # Leaf connections to send it to: made only when there is one (routes without leafs pay
    # nothing for them).
    leafs: dict[RemoteReceiver, tuple[Subscription, list[bytes]]] | None = None
    for sub in result.psubs:
        if not sub.remote:
            if deliver(publisher, sub, msg):
                delivered = True
        elif sub.leaf and sub.client.leaf_takes_routed(msg.subject):  # type: ignore[attr-defined]
            if origin and _of_origin(sub, origin):
                continue
            if leafs is None:
                leafs = {}
            leafs.setdefault(cast(RemoteReceiver, sub.client), (sub, []))
    if queues:
        for group in result.qsubs:
            if group[0].queue_bytes not in queues:
                continue
            local = [sub for sub in group if not sub.remote]
            n = len(local)
            start = random.randrange(n) if n > 1 else 0
            for i in range(n):
                if deliver(publisher, local[(start + i) % n], msg):
                    delivered = True
                    break
            else:
                # No member here took it: a leaf connected to us may (never another route).
                for sub in group:
                    if sub.leaf and sub.client.leaf_takes_routed(b""):  # type: ignore[attr-defined]
                        if origin and _of_origin(sub, origin):
                            continue
                        if leafs is None:
                            leafs = {}
                        leafs.setdefault(cast(RemoteReceiver, sub.client), (sub, []))[1].append(
                            sub.queue_bytes
                        )
                        break
    if leafs is not None:
        for receiver, (first, names) in leafs.items():
            if not receiver.closed:
                receiver.deliver_remote(first, msg, names)
                delivered = True
    return delivered


def fan_out_from_leaf(
    publisher: RemoteReceiver,
    result: SubListResult[Subscription],
    msg: Pub,
    queues: tuple[bytes, ...],
    to_routes: bool,
) -> bool:
    """Deliver a message that came over a leaf connection (nats-server's processMsgResults for
    a LEAF client, then sendMsgToGateways): to local receivers, to every other leaf connection
    (never back where it came from, nor to a leaf of the same origin cluster), to the other
    clusters through the gateways, and to routes only when `to_routes` (the leaf dialed us;
    what our own hub sends us stays in this cluster). An LMSG without queue names reaches no
    queue group; with names, a member here or across a route first, then a leaf's, then
    another cluster's."""
    delivered = False
    remotes: dict[RemoteReceiver, tuple[Subscription, list[bytes]]] = {}
    for sub in result.psubs:
        if not sub.remote:
            if deliver(publisher, sub, msg):
                delivered = True
        elif _forwards_leaf_msg(publisher, sub, to_routes):
            remotes.setdefault(cast(RemoteReceiver, sub.client), (sub, []))
    if queues:

        def takes(sub: Subscription) -> bool:
            return _forwards_leaf_msg(publisher, sub, to_routes)

        for group in result.qsubs:
            if group[0].queue_bytes not in queues:
                continue
            weights = [_queue_weight(sub) for sub in group]
            start = _weighted_start(weights, sum(weights))
            if _deliver_member(publisher, group, start, msg, remotes, takes=takes):
                delivered = True
    origin = publisher.remote_cluster.encode() if to_routes else b""  # type: ignore[attr-defined]
    for receiver, (first, names) in remotes.items():
        if not receiver.closed:
            # To a route: LMSG with the leaf's cluster where the peer knows it.
            to_route = getattr(receiver, "deliver_leaf_origin", None) if origin else None
            if to_route is not None and not first.leaf:
                to_route(first, msg, names, origin)
            else:
                receiver.deliver_remote(first, msg, names)
            delivered = True
    return delivered or bool(remotes)


def _of_origin(sub: Subscription, origin: bytes) -> bool:
    """`sub` is a leaf connection's to a server of the leaf cluster `origin`."""
    return sub.client.remote_cluster.encode() == origin  # type: ignore[attr-defined, no-any-return]


def _forwards_leaf_msg(publisher: RemoteReceiver, sub: Subscription, to_routes: bool) -> bool:
    """The server behind `sub` is sent a message from the leaf connection `publisher`."""
    receiver = sub.client
    if receiver is publisher:
        return False
    if sub.leaf:
        return not receiver.same_origin(publisher)  # type: ignore[attr-defined]
    if sub.gateway:
        return True
    # Never a route's member of a queue group of the publisher's own leaf cluster: that server
    # does not send it back there (nats-server's processMsgResults).
    origin: bytes = getattr(sub, "origin", b"")
    return to_routes and not (
        origin and origin == publisher.remote_cluster.encode()  # type: ignore[attr-defined]
    )


def deliver_first(result: SubListResult[Subscription], msg: Pub) -> bool:
    """Deliver to the first subscription of `result` that takes it: how JetStream hands a stored
    message to the inbox of a pull request (the MSG line shows the stream subject, not the
    inbox)."""
    for sub in result.psubs:
        if deliver(None, sub, msg):
            return True
    for group in result.qsubs:
        for sub in group:
            if deliver(None, sub, msg):
                return True
    return False


def plain_stored_outbound(sub: Subscription) -> Outbound | None:
    """The outbound queue that `deliver_stored` would write `sub`'s messages straight into
    (a plain receiver, nothing to check per message but whether it takes headers), or None.
    What it says holds until control goes back to the event loop or to a receiver's callback:
    a run of deliveries checks once and settles the counts with `settle_stored`."""
    receiver = sub.client
    outbound = receiver.outbound
    if (
        outbound is not None
        and not sub.max_msgs
        and not sub.closed
        and not receiver.closed
        and receiver.plain
    ):
        return outbound
    return None


def settle_stored(sub: Subscription, outbound: Outbound, msgs: int, nbytes: int) -> None:
    """Count `msgs` frames of `nbytes` payload bytes that a run put in `outbound` (the queue
    `plain_stored_outbound` gave for `sub`) as `deliver_stored` counts each."""
    if msgs:
        sub.delivered += msgs
        stats = sub.client.stats
        stats.out_msgs += msgs
        stats.out_bytes += nbytes
        if not outbound.dirty:
            outbound.dirty = True
            outbound.flush_queue.dirty.append(outbound)


def deliver_stored(
    sub: Subscription, subject: bytes, reply: bytes, header: bytes, data: bytes
) -> bool:
    """Deliver a message whose header block and body are kept apart (a stored JetStream message,
    a server reply) to one subscription already found. A plain receiver that understands the
    headers is handed the frame made in one pass; any other takes `deliver`."""
    outbound = plain_stored_outbound(sub)
    if outbound is not None and (sub.client.headers or not header):
        outbound.frames.append(stored_msg_frame(subject, sub.sid, reply, header, data))
        settle_stored(sub, outbound, 1, len(header) + len(data))
        return True
    return deliver(None, sub, Pub(subject, reply, header + data, len(header) if header else -1))
