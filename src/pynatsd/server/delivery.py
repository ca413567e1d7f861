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
from collections.abc import Sequence
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
    is picked at random over the local members and the remote ones, a remote subscription
    counting as many members as its weight; a remote member picked is final."""
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
        total = sum(weights)
        if not total:
            # Members only in other clusters: the first gateway's take it (nats-server gives
            # a queue group to one gateway, when no member in this cluster took it).
            first = group[0]
            remotes.setdefault(cast(RemoteReceiver, first.client), (first, []))[1].append(
                first.queue_bytes
            )
            continue
        if _deliver_member(publisher, group, _weighted_start(weights, total), msg, remotes, trace):
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
    cluster, none in another cluster (only picked when this cluster has no member)."""
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
) -> bool:
    """One member of a queue group takes the message, trying from `start` on: a local one now
    (True), or another server's, added to `remotes` with the group's name (final)."""
    n = len(members)
    for i in range(n):
        sub = members[(start + i) % n]
        if sub.remote:
            remotes.setdefault(cast(RemoteReceiver, sub.client), (sub, []))[1].append(
                sub.queue_bytes
            )
            return False
        if deliver(publisher, sub, msg, trace):
            return True
    return False


def _weighted_start(weights: list[int], total: int) -> int:
    """Where the pick of a queue member starts: each member's chance is its weight."""
    if len(weights) == 1:
        return 0
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
    processMsgResults does for a GATEWAY connection: to local receivers (`local_msg`: the reply
    without its `_GR_.` routing prefix) and once to each other server of this cluster with
    interest (`msg` as it came), never to another gateway; queue groups only those the sender
    named, a member in this cluster each."""
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
            receiver.deliver_remote(first, msg, names)
            delivered = True
    return delivered


def fan_out_routed(
    publisher: Receiver, result: SubListResult[Subscription], msg: Pub, queues: tuple[bytes, ...]
) -> bool:
    """Deliver a message that came from another server (a route's RMSG): to local receivers
    only (one hop: never to another server), and to queue groups only those the sender
    named, a local member each."""
    delivered = False
    for sub in result.psubs:
        if not sub.remote and deliver(publisher, sub, msg):
            delivered = True
    if not queues:
        return delivered
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
    return delivered


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


def deliver_stored(
    sub: Subscription, subject: bytes, reply: bytes, header: bytes, data: bytes
) -> bool:
    """Deliver a message whose header block and body are kept apart (a stored JetStream message,
    a server reply) to one subscription already found. A plain receiver that understands the
    headers is handed the frame made in one pass; any other takes `deliver`."""
    receiver = sub.client
    outbound = receiver.outbound
    if (
        outbound is not None
        and not sub.max_msgs
        and not sub.closed
        and not receiver.closed
        and (receiver.headers or not header)
        and receiver.plain
    ):
        # Stats.sent and Outbound.push, inlined: this is the per-message path of a JetStream
        # fetch and of every PubAck.
        sub.delivered += 1
        stats = receiver.stats
        stats.out_msgs += 1
        stats.out_bytes += len(header) + len(data)
        outbound.frames.append(stored_msg_frame(subject, sub.sid, reply, header, data))
        if not outbound.dirty:
            outbound.dirty = True
            outbound.flush_queue.dirty.append(outbound)
        return True
    return deliver(None, sub, Pub(subject, reply, header + data, len(header) if header else -1))
