"""The one delivery path: the rules nats-server applies per subscription, for every receiver kind.

Real sessions (no sockets: their frames stay in their outbound queue) and real internal
receivers, on a server that is built but not started.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from pynatsd.auth import PermissionChecker
from pynatsd.options import Options, Permissions, SubjectPermission
from pynatsd.protocol.events import Pub
from pynatsd.server.delivery import deliver_first, deliver_stored, fan_out
from pynatsd.server.server import Server
from pynatsd.server.session import ClientSession
from pynatsd.server.subscription import InternalClient, InternalSubscription, Subscription


@pytest.fixture
def server() -> Iterator[Server]:
    yield Server(Options(port=0, host="127.0.0.1"))


def _session(server: Server, headers: bool = True, echo: bool = True) -> ClientSession:
    session = ClientSession(server)
    session.headers = headers
    session.echo = echo
    return session


def _subscribe(session: ClientSession, subject: str, sid: bytes, queue: str = "") -> Subscription:
    sub = Subscription(session, subject.encode(), queue.encode(), sid)
    session.subs[sid] = sub
    session.account.sublist.insert(sub)
    return sub


def _publish(server: Server, publisher: ClientSession | None, subject: str, msg: Pub) -> bool:
    return fan_out(publisher, server.global_account.sublist.match(subject), msg)


def _taken(session: ClientSession) -> bytes:
    frames = b"".join(session.outbound.frames)
    session.outbound.frames.clear()
    return frames


def test_every_plain_subscriber_and_one_member_per_queue_group(server: Server) -> None:
    a, b = _session(server), _session(server)
    members = [_session(server) for _ in range(3)]
    _subscribe(a, "orders.*", b"1")
    _subscribe(b, "orders.eu", b"2")
    for i, member in enumerate(members):
        _subscribe(member, "orders.>", b"%d" % i, queue="workers")
    for _ in range(30):
        assert _publish(server, None, "orders.eu", Pub(b"orders.eu", b"", b"hi"))
    assert _taken(a) == b"MSG orders.eu 1 2\r\nhi\r\n" * 30
    assert _taken(b) == b"MSG orders.eu 2 2\r\nhi\r\n" * 30
    counts = [m.stats.out_msgs for m in members]
    assert sum(counts) == 30 and all(counts)  # once per message, spread over the members


def test_no_echo_skips_the_publishers_own_subscription(server: Server) -> None:
    quiet, other = _session(server, echo=False), _session(server)
    _subscribe(quiet, "foo", b"1")
    _subscribe(other, "foo", b"1")
    assert _publish(server, quiet, "foo", Pub(b"foo", b"", b"x"))
    assert _taken(quiet) == b""
    assert _taken(other) == b"MSG foo 1 1\r\nx\r\n"
    # Alone with its own subscription, nothing is delivered at all.
    assert not _publish(server, quiet, "foo", Pub(b"foo", b"", b"x")) or _taken(other)


def test_auto_unsubscribe_after_max_msgs(server: Server) -> None:
    session = _session(server)
    sub = _subscribe(session, "foo", b"9")
    sub.max_msgs = 2
    results = [_publish(server, None, "foo", Pub(b"foo", b"", b"m")) for _ in range(3)]
    assert results == [True, True, False]
    assert _taken(session) == b"MSG foo 9 1\r\nm\r\n" * 2
    assert sub.closed and b"9" not in session.subs
    assert not server.global_account.sublist.match("foo").psubs


def test_headers_stripped_for_a_client_that_did_not_ask_for_them(server: Server) -> None:
    plain, modern = _session(server, headers=False), _session(server)
    _subscribe(plain, "foo", b"1")
    _subscribe(modern, "foo", b"1")
    header = b"NATS/1.0\r\nA: b\r\n\r\n"
    msg = Pub(b"foo", b"r", header + b"body", len(header))
    assert _publish(server, None, "foo", msg)
    assert _taken(plain) == b"MSG foo 1 r 4\r\nbody\r\n"
    assert _taken(modern) == b"HMSG foo 1 r 18 22\r\n" + header + b"body\r\n"
    assert (plain.stats.out_msgs, plain.stats.out_bytes) == (1, 4)
    assert (modern.stats.out_msgs, modern.stats.out_bytes) == (1, 22)


def test_deny_is_applied_on_delivery_to_a_wider_subscription(server: Server) -> None:
    session = _session(server)
    session.perms = PermissionChecker(
        Permissions(subscribe=SubjectPermission(allow=["foo.>"], deny=["foo.secret"]))
    )
    assert session.perms.can_subscribe("foo.>")
    _subscribe(session, "foo.>", b"1")
    assert not _publish(server, None, "foo.secret", Pub(b"foo.secret", b"", b"s"))
    assert _publish(server, None, "foo.open", Pub(b"foo.open", b"", b"o"))
    assert _taken(session) == b"MSG foo.open 1 1\r\no\r\n"


def test_internal_receivers_take_the_same_path(server: Server) -> None:
    got: list[tuple[bytes, bytes, int]] = []
    owner = InternalClient(server.global_account, "test")

    def callback(sub: InternalSubscription, publisher: object, msg: Pub) -> None:
        got.append((msg.subject, msg.payload, msg.header_size))

    sub = InternalSubscription(owner, "svc.>", callback)
    server.global_account.sublist.insert(sub)
    assert _publish(server, None, "svc.a", Pub(b"svc.a", b"", b"q"))
    # A stored message (header and body apart) reaches an internal receiver as one message.
    assert deliver_stored(sub, b"svc.b", b"", b"NATS/1.0\r\n\r\n", b"d")
    assert got == [(b"svc.a", b"q", -1), (b"svc.b", b"NATS/1.0\r\n\r\nd", 12)]
    assert owner.stats.out_msgs == 2
    owner.unsubscribe(sub)
    assert not _publish(server, None, "svc.a", Pub(b"svc.a", b"", b"q"))


def test_stored_messages_to_a_client(server: Server) -> None:
    session = _session(server)
    sub = _subscribe(session, "_INBOX.1", b"5")
    assert deliver_stored(sub, b"orders.eu", b"$JS.ACK.x", b"", b"data")
    assert _taken(session) == b"MSG orders.eu 5 $JS.ACK.x 4\r\ndata\r\n"
    # Without header support the header block is dropped, as for any delivery.
    plain = _session(server, headers=False)
    sub = _subscribe(plain, "_INBOX.2", b"6")
    assert deliver_stored(sub, b"orders.eu", b"", b"NATS/1.0\r\n\r\n", b"data")
    assert _taken(plain) == b"MSG orders.eu 6 4\r\ndata\r\n"


def test_deliver_first_shows_the_stream_subject(server: Server) -> None:
    first, second = _session(server), _session(server)
    _subscribe(first, "_INBOX.x", b"1")
    _subscribe(second, "_INBOX.x", b"2")
    result = server.global_account.sublist.match("_INBOX.x")
    assert deliver_first(result, Pub(b"orders.eu", b"", b"m"))
    assert _taken(first) + _taken(second) in (
        b"MSG orders.eu 1 1\r\nm\r\n",
        b"MSG orders.eu 2 1\r\nm\r\n",
    )
