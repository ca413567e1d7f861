"""The SUB path, compiled: the `Subscription` base class and a client's run of SUBs.

A client subscribes in bursts (100k SUBs at start-up). The parser hands consecutive SUBs of a
read to the session as one `SubRun` (protocol/runs.py); `subscribe_run` makes their
subscriptions and inserts them into the account's SubList in one native loop. Whatever is not
the plain case goes through the session's interpreted `_process_sub`, one `Sub` at a time, which
answers as nats-server's processSub does: tracing, verbose +OK, subscribe permissions, the
token limit, max_subs, a reused sid, an invalid subject. What the SubList's watchers announce
(RS+/LS+ to routes, leafs and gateways) comes from `SubList.insert` either way.

Compiled by mypyc (native.COMPILED_MODULES). `Subscription` is a native class that interpreted
code may subclass (routes, leafs, gateways, internal and MQTT subscriptions): its flags
(`remote`, `leaf`, `from_hub`, `gateway`) and `callback` are class variables, which a subclass
overrides (or shadows with a slot of its own) and which read as class attributes, not as a
field of the base.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

from mypy_extensions import mypyc_attr

from pynatsd.protocol.runs import SubRun, sub_event
from pynatsd.sublist import InvalidSubjectError, SubList

if TYPE_CHECKING:
    from pynatsd.server.delivery import Receiver


@mypyc_attr(allow_interpreted_subclasses=True)
class Subscription:
    """One SUB of one client. `subject`/`queue` are str for the SubList; the wire forms are kept
    as bytes so delivery never re-encodes."""

    # Slots on the pure-Python path too: a million subscriptions, nine fields each.
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

    # True for the interest of another server (`RemoteSubscription`): fan_out sends such a
    # server one message however many of its subscriptions match.
    remote: ClassVar[bool] = False
    # True for the interest of a leaf connection (`LeafSubscription`, always remote too): such
    # a member of a queue group is picked only when no member here or across a route is.
    leaf: ClassVar[bool] = False
    # True for what our own hub told us on a leaf connection we dialed: routes and gateways
    # are never told of it (nats-server's processLeafSub on a spoke).
    from_hub: ClassVar[bool] = False
    # True for the interest of another cluster, through a gateway: a queue group's member
    # there is picked only when the group has none in this cluster (nor on a leaf).
    gateway: ClassVar[bool] = False
    # What an internal receiver calls for each message (`InternalSubscription`, which keeps
    # it in a slot of its own): a client's subscription has none, and no field for it (the
    # compiled class's vtable pointer took those 8 bytes; a million subscriptions stay as big).
    # (Typed Any: mypy reads a callable class variable as a method. It is an InternalCallback.)
    callback: ClassVar[Any] = None

    def __init__(
        self,
        client: Any,
        subject: bytes,
        queue: bytes,
        sid: bytes,
        subject_text: str | None = None,
        queue_text: str | None = None,
    ) -> None:
        self.client: Receiver = client
        self.subject_bytes = subject
        self.subject: str = (
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

    def __repr__(self) -> str:
        return f"<Subscription {self.subject!r} q={self.queue!r} sid={self.sid!r}>"


def subscribe_run(session: Any, run: SubRun) -> None:
    """The SUBs of `run` for a client's session (server/session.py's ClientSession): the plain
    ones here, the rest through `session._process_sub`, in the order they came."""
    if session.trace or session.verbose or session.perms.sub_restricted:
        for args in run.args:
            if not _by_session(session, args):
                return
        return
    perms = session.perms
    max_tokens: int = session.server.options.max_sub_tokens
    max_subs: int = session.max_subs
    subs: dict[bytes, Subscription] = session.subs
    sublist: SubList[Subscription] = session.account.sublist
    for args in run.args:
        subject_bytes = args[0]
        if len(args) == 2:
            queue_bytes = b""
            sid = args[1]
        else:
            queue_bytes = args[1]
            sid = args[2]
        if (max_subs >= 0 and len(subs) >= max_subs) or sid in subs:
            if not _by_session(session, args):  # the limit's -ERR, or a reused sid
                return
            continue
        subject = subject_bytes.decode("utf-8", "surrogateescape")
        queue: str | None = None
        if queue_bytes:
            queue = queue_bytes.decode("utf-8", "surrogateescape")
            if not perms.can_subscribe(subject, queue):  # the reserved `_sys_` queue
                if not _by_session(session, args):
                    return
                continue
        if max_tokens > 0 and subject.count(".") >= max_tokens:
            if not _by_session(session, args):
                return
            continue
        sub = Subscription(session, subject_bytes, queue_bytes, sid, subject, queue)
        try:
            sublist.insert(sub)
        except InvalidSubjectError:
            # Nothing was inserted: the session's path fails the same way and answers it.
            if not _by_session(session, args):
                return
            continue
        subs[sid] = sub


def _by_session(session: Any, args: list[bytes]) -> bool:
    """One SUB through the session's own path; False once the connection is closed, and what
    follows in the run is dropped, as the session's event loop drops what follows a close.
    (No refused SUB closes a connection today: its -ERR waits in the Outbound until the end of
    the read. The check keeps a closed connection from subscribing if one ever does.)"""
    session._process_sub(sub_event(args))
    return not session.closed
