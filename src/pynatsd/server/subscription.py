"""A client's subscription: what the SubList stores and the router delivers to."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pynatsd.server.client import Client


class Subscription:
    """One SUB of one client. `subject`/`queue` are str for the SubList; the wire forms are kept
    as bytes so delivery never re-encodes."""

    __slots__ = (
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

    def __init__(self, client: Client, subject: bytes, queue: bytes, sid: bytes) -> None:
        self.client = client
        self.subject_bytes = subject
        self.subject = subject.decode("utf-8", "surrogateescape")
        self.queue_bytes = queue
        self.queue: str | None = queue.decode("utf-8", "surrogateescape") if queue else None
        self.sid = sid
        self.max_msgs = 0  # auto-unsubscribe after this many deliveries; 0 = no limit
        self.delivered = 0
        self.closed = False

    def __repr__(self) -> str:
        return f"<Subscription {self.subject!r} q={self.queue!r} sid={self.sid!r}>"
