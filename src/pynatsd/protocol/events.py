"""Operations the parser produces. Small classes named after the protocol ops."""

from __future__ import annotations

from functools import partial
from operator import itemgetter
from typing import TYPE_CHECKING, Any


class Event:
    __slots__ = ()


class Connect(Event):
    """CONNECT with its JSON decoded (the raw argument is kept for tracing)."""

    __slots__ = ("options", "raw")

    def __init__(self, options: dict[str, Any], raw: bytes) -> None:
        self.options = options
        self.raw = raw


class Pub(tuple):  # type: ignore[type-arg]
    """PUB or HPUB. `payload` holds header and body; `header_size` is -1 for a plain PUB.

    `line` is the raw control-line argument (`b"foo 5"`) of an upper-case PUB, or b"": equal lines
    mean equal subject, reply and size, so the server can key a cached delivery plan on it.
    `size_text`/`header_text` are the sizes exactly as the client wrote them (`02` stays `02`):
    nats-server copies them into the MSG/HMSG lines it delivers.

    A tuple underneath: the parser makes one per message, and `tuple.__new__` costs a fraction
    of a Python `__init__` (see `make_pub`).
    """

    __slots__ = ()

    if TYPE_CHECKING:
        subject: bytes
        reply: bytes  # b"" when absent
        payload: bytes
        header_size: int
        line: bytes
        size_text: bytes
        header_text: bytes
    else:
        subject = property(itemgetter(0))
        reply = property(itemgetter(1))
        payload = property(itemgetter(2))
        header_size = property(itemgetter(3))
        line = property(itemgetter(4))
        size_text = property(itemgetter(5))
        header_text = property(itemgetter(6))

    def __new__(
        cls,
        subject: bytes,
        reply: bytes,
        payload: bytes,
        header_size: int = -1,
        line: bytes = b"",
        size_text: bytes = b"",
        header_text: bytes = b"",
    ) -> Pub:
        if header_size >= 0 and not header_text:
            header_text = b"%d" % header_size
        fields = (subject, reply, payload, header_size, line, size_text or b"%d" % len(payload))
        return tuple.__new__(cls, (*fields, header_text))

    def __repr__(self) -> str:
        return f"Pub(subject={self.subject!r}, reply={self.reply!r}, payload={self.payload!r})"


# The parser's fast path: `make_pub((subject, reply, payload, -1, line, size_text, b""))`.
make_pub = partial(tuple.__new__, Pub)


class Sub(Event):
    __slots__ = ("queue", "sid", "subject")

    def __init__(self, subject: bytes, queue: bytes, sid: bytes) -> None:
        self.subject = subject
        self.queue = queue  # b"" when absent
        self.sid = sid


class Unsub(Event):
    __slots__ = ("max_msgs", "sid")

    def __init__(self, sid: bytes, max_msgs: int) -> None:
        self.sid = sid
        self.max_msgs = max_msgs  # <= 0 means "now"


class Ping(Event):
    __slots__ = ()


class Pong(Event):
    __slots__ = ()


class Info(Event):
    """An INFO sent by a client: accepted and ignored, as nats-server does."""

    __slots__ = ("raw",)

    def __init__(self, raw: bytes) -> None:
        self.raw = raw


class Ok(Event):
    __slots__ = ()


class Err(Event):
    """A client's own -ERR: the server logs it and closes the connection."""

    __slots__ = ("text",)

    def __init__(self, text: bytes) -> None:
        self.text = text


class ProtocolError(Event):
    """The stream cannot be parsed further. `reply` is the -ERR text to send, or None for the
    silent close nats-server does on argument errors. Always the last event of a feed.

    `pub` is set for an HPUB over the maximum payload: its subject, the part of its header
    block that came with the control line, and its sizes as written (nats-server traces such
    a message if that header asks for it)."""

    __slots__ = ("close_reason", "detail", "pub", "reply")

    def __init__(
        self, reply: str | None, close_reason: str, detail: str, pub: Pub | None = None
    ) -> None:
        self.reply = reply
        self.close_reason = close_reason
        self.detail = detail
        self.pub = pub


PING = Ping()
PONG = Pong()
OK = Ok()
