"""Subscriptions: what the SubList stores and `server.delivery` delivers to.

A `Subscription` belongs to a receiver: a client connection, or an `InternalClient` of the server
itself (the JetStream API, streams capturing subjects, imports). An internal receiver is handed
each message through its subscription's callback instead of a frame, by the same delivery call
as any other receiver.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from pynatsd.auth import PermissionChecker
from pynatsd.server.delivery import Stats

# The base class is compiled with the SUB path (server/subscribe.py); its subclasses here are
# interpreted and override its class-level flags.
from pynatsd.server.subscribe import Subscription as Subscription

if TYPE_CHECKING:
    from pynatsd.protocol.events import Pub
    from pynatsd.server.client import Client
    from pynatsd.server.delivery import Receiver
    from pynatsd.server.msgtrace import TracedCallback

# callback(subscription, publishing client or None for the server itself, the message)
InternalCallback = Callable[["InternalSubscription", "Client | None", "Pub"], None]
# The same for a client's run of messages, in order (a consumer's acks of one read).
InternalRunCallback = Callable[["InternalSubscription", "Client | None", "list[Pub]"], None]
# The messages of one PUB line, in order: (subscription, subject, reply, each payload with its
# CRLF). No header, one subject and one reply for all; whoever published them.
InternalLineCallback = Callable[["InternalSubscription", bytes, bytes, "list[bytes]"], None]
# An internal receiver may do anything; it never has permissions to check per message.
_NO_PERMISSIONS = PermissionChecker(None)


class InternalClient:
    """The receiver behind internal subscriptions (nats-server's internal clients of kind
    SYSTEM, JETSTREAM and ACCOUNT): never closed by a peer, understands headers, and takes
    each message through its subscription's callback."""

    __slots__ = ("account", "cid", "closed", "echo", "headers", "name", "outbound", "stats")

    # Class attributes, not properties: `deliver` reads them for every message (a JetStream
    # ack, a stream capture).
    perms = _NO_PERMISSIONS
    plain = False

    def __init__(self, account: Any, name: str) -> None:
        self.account = account
        self.name = name
        self.cid = 0
        self.closed = False
        self.echo = True
        self.headers = True
        self.outbound = None
        self.stats = Stats()

    def deliver(self, sub: Subscription, msg: Pub, publisher: Receiver | None) -> None:
        assert sub.callback is not None
        stats = self.stats  # Stats.sent, inlined: once per message
        stats.out_msgs += 1
        stats.out_bytes += len(msg[2])  # the payload
        sub.callback(sub, publisher, msg)

    def unsubscribe(self, sub: Subscription) -> None:
        if not sub.closed:
            sub.closed = True
            self.account.sublist.remove(sub)


class InternalSubscription(Subscription):
    # traced: the callback for a traced message (server/msgtrace.py), for the subscriptions
    # that report into a trace (a stream capturing a subject); None: the plain callback.
    # run: takes a client's run of plain messages at once, as `callback` would one by one (a
    # consumer's acks; see ClientSession._process_acks); None: one at a time.
    # take_line: takes the messages of one PUB line at once, as `callback` would one by one,
    # for a receiver to which who published them makes no difference (a stream capturing a
    # subject): a delivery plan may then hold the subscription (server/plans.py); None: never
    # planned.
    __slots__ = ("callback", "run", "take_line", "traced")

    def __init__(
        self, owner: InternalClient, subject: str, callback: InternalCallback, queue: str = ""
    ) -> None:
        super().__init__(owner, subject.encode(), queue.encode(), b"")
        # This class's slot, in front of the base's class variable (None).
        self.callback: InternalCallback = callback  # type: ignore[misc]
        self.traced: TracedCallback | None = None
        self.run: InternalRunCallback | None = None
        self.take_line: InternalLineCallback | None = None


class RemoteSubscription(Subscription):
    """Interest of another server, learned from a route (nats-server's subscriptions of a
    ROUTER client): `weight` is the number of members of a queue group over there."""

    __slots__ = ("account_name", "origin", "weight", "wire_account")

    remote = True
    # The op of the messages this server is sent (the frame head a delivery plan builds).
    msg_op = b"RMSG"

    def __init__(
        self,
        owner: Any,
        account_name: bytes,
        subject: bytes,
        queue: bytes,
        weight: int,
        wire_account: bytes | None = None,
    ) -> None:
        # nats-server's key of a routed subscription, its `sid` in /routez?subs=detail.
        sid = b" ".join((account_name, subject, queue)) if queue else account_name + b" " + subject
        super().__init__(owner, subject, queue, sid)
        self.account_name = account_name
        # The account token in the RMSG to that server: none on a connection pinned to it.
        self.wire_account = account_name if wire_account is None else wire_account
        self.weight = weight
        # The cluster of the leaf node behind the peer's interest (an LS+), else empty.
        self.origin = b""


class LeafSubscription(RemoteSubscription):
    """Interest of the server at the other end of a leaf connection (nats-server's
    subscriptions of a LEAF client). Its `weight` is 0, so a queue group prefers every other
    member; `queue_weight` is the number of members over there (the LS+ weight)."""

    __slots__ = ("from_hub", "queue_weight")

    leaf = True
    msg_op = b"LMSG"

    def __init__(
        self,
        owner: Any,
        account_name: bytes,
        subject: bytes,
        queue: bytes,
        queue_weight: int,
        from_hub: bool,
    ) -> None:
        super().__init__(owner, account_name, subject, queue, 0, b"")
        # nats-server's key of a leaf subscription: the LS+ arguments without the weight.
        self.sid = subject + b" " + queue if queue else subject
        self.queue_weight = queue_weight
        # This class's slot, in front of the base's class variable (a compiled class's flags
        # are class variables: see server/subscribe.py).
        self.from_hub = from_hub  # type: ignore[misc]
