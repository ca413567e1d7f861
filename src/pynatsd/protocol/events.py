"""Operations the parser produces. Small classes named after the protocol ops."""

from __future__ import annotations

from typing import Any


class Event:
    __slots__ = ()


class Connect(Event):
    """CONNECT with its JSON decoded (the raw argument is kept for tracing)."""

    __slots__ = ("options", "raw")

    def __init__(self, options: dict[str, Any], raw: bytes) -> None:
        self.options = options
        self.raw = raw


class Pub(Event):
    """PUB or HPUB. `payload` holds header and body; `header_size` is -1 for a plain PUB.

    `line` is the raw control-line argument (`b"foo 5"`) of an upper-case PUB, or b"": equal lines
    mean equal subject, reply and size, so the server can key a cached delivery plan on it.
    """

    __slots__ = ("header_size", "header_text", "line", "payload", "reply", "size_text", "subject")

    def __init__(
        self,
        subject: bytes,
        reply: bytes,
        payload: bytes,
        header_size: int,
        line: bytes = b"",
        size_text: bytes = b"",
        header_text: bytes = b"",
    ) -> None:
        self.subject = subject
        self.reply = reply  # b"" when absent
        self.payload = payload
        self.header_size = header_size
        self.line = line
        # The sizes exactly as the client wrote them (`02` stays `02`): nats-server copies them
        # into the MSG/HMSG lines it delivers.
        self.size_text = size_text or b"%d" % len(payload)
        self.header_text = header_text


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
    silent close nats-server does on argument errors. Always the last event of a feed."""

    __slots__ = ("close_reason", "detail", "reply")

    def __init__(self, reply: str | None, close_reason: str, detail: str) -> None:
        self.reply = reply
        self.close_reason = close_reason
        self.detail = detail


PING = Ping()
PONG = Pong()
OK = Ok()
