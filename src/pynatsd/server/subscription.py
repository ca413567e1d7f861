"""Subscriptions: what the SubList stores and the router delivers to.

A `Subscription` belongs to a client connection. An `InternalSubscription` belongs to the server
itself (the JetStream API, streams capturing subjects): the router calls its callback instead of
writing a frame, in the same pass as any other delivery.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pynatsd.protocol.events import Pub
    from pynatsd.server.client import Client

# callback(subscription, publishing client or None for the server itself, the message)
InternalCallback = Callable[["InternalSubscription", "Client | None", "Pub"], None]


class Subscription:
    """One SUB of one client. `subject`/`queue` are str for the SubList; the wire forms are kept
    as bytes so delivery never re-encodes."""

    __slots__ = (
        "callback",
        "client",
        "closed",
        "delivered",
        "max_msgs",
        "queue",
        "queue_bytes",
        "sid",
        "subject",
        "subject_bytes",
    )

    def __init__(
        self,
        client: Any,
        subject: bytes,
        queue: bytes,
        sid: bytes,
        subject_text: str | None = None,
        queue_text: str | None = None,
    ) -> None:
        self.client: Client = client
        self.subject_bytes = subject
        self.subject = (
            subject.decode("utf-8", "surrogateescape") if subject_text is None else subject_text
        )
        self.queue_bytes = queue
        if queue_text is None and queue:
            queue_text = queue.decode("utf-8", "surrogateescape")
        self.queue: str | None = queue_text
        self.sid = sid
        self.max_msgs = 0  # auto-unsubscribe after this many deliveries; 0 = no limit
        self.delivered = 0
        self.closed = False
        self.callback: InternalCallback | None = None

    def __repr__(self) -> str:
        return f"<Subscription {self.subject!r} q={self.queue!r} sid={self.sid!r}>"


class InternalClient:
    """Stands in for a connection as the owner of internal subscriptions (never closed by a
    peer, understands headers)."""

    __slots__ = ("account", "cid", "closed", "headers", "name")

    def __init__(self, account: Any, name: str) -> None:
        self.account = account
        self.name = name
        self.cid = 0
        self.closed = False
        self.headers = True


class InternalSubscription(Subscription):
    __slots__ = ()

    def __init__(
        self, owner: InternalClient, subject: str, callback: InternalCallback, queue: str = ""
    ) -> None:
        super().__init__(owner, subject.encode(), queue.encode(), b"")
        self.callback = callback
