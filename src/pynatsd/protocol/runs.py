"""Runs of plain PUBs and SUBs: what a server's client parser (`Parser(runs=True)`) hands out
instead of a `Pub` or a `Sub` per line.

A publisher streams: the same PUB line again and again, or a few lines in turn. Each message of
such a stream is a payload slice (with its CRLF, as it came) appended to a `PubRun` of its line,
and the session delivers a run through the line's delivery plan at once (server/plans.py): one
frame per receiver and run, no event object per message.

A client subscribes in bursts (100k SUBs at start-up): consecutive SUBs of a read are one
`SubRun`, their split arguments, which the session hands to the compiled SUB path
(server/subscribe.py) at once.

Compiled by mypyc (native.COMPILED_MODULES) with the parser that makes runs and the plans that
deliver them, so making one and reading it are native operations; interpreted code (the session,
tests) reads its attributes as from any object.
"""

from __future__ import annotations

from pynatsd.protocol.events import Pub, Sub, make_pub

# A memoised PUB line: subject, reply, payload size, size as written, the line's argument.
PubLine = tuple[bytes, bytes, int, bytes, bytes]


class PubRun:
    """Plain PUBs with the same control line, one after the other in one read: the line's
    subject, reply, payload size, size as written and argument (`line`: one bytes object per
    distinct line, the key of its delivery plan), and each message's payload with its CRLF."""

    __slots__ = ("line", "reply", "size", "size_text", "subject", "tails")

    def __init__(self, memo: PubLine) -> None:
        self.subject, self.reply, self.size, self.size_text, self.line = memo
        self.tails: list[bytes] = []

    def pub(self, tail: bytes) -> Pub:
        """One of the run's messages as the `Pub` it stands for."""
        return make_pub((self.subject, self.reply, tail[:-2], -1, self.line, self.size_text, b""))


class SubRun:
    """SUBs one after the other in one read, each as the arguments split from its line:
    [subject, sid] or [subject, queue, sid] (the parser's fast path made them; the line was
    valid as far as the parser checks)."""

    __slots__ = ("args",)

    def __init__(self) -> None:
        self.args: list[list[bytes]] = []

    def subs(self) -> list[Sub]:
        """The run as the `Sub` events it stands for."""
        return [sub_event(args) for args in self.args]


def sub_event(args: list[bytes]) -> Sub:
    """The `Sub` of one SUB line's split arguments."""
    if len(args) == 2:
        return Sub(args[0], b"", args[1])
    return Sub(args[0], args[1], args[2])
