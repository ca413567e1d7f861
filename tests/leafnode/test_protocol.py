"""The leaf codec alone: leaf ops in (whole, and split at every point), frames out."""

from __future__ import annotations

import pytest

from pynatsd.cluster.protocol import RouteMsg, RouteMsgRun, RouteSub, RouteUnsub
from pynatsd.leafnode.protocol import (
    LeafParser,
    lmsg_frame,
    lmsg_head,
    ls_minus_frame,
    ls_plus_frame,
)
from pynatsd.protocol.events import Ping, ProtocolError, Pub

STREAM = (
    b"LS+ foo\r\nLS+ bar q 2\r\nls- bar q\r\nLMSG foo rep 3\r\nabc\r\n"
    b"HMSG foo 12 14\r\nNATS/1.0\r\n\r\nhi\r\nLMSG f | q1 q2 1\r\nx\r\n"
    b"LMSG g + r q1 2\r\nyz\r\nPING\r\n"
)


def _shape(events: list[object], parser: LeafParser) -> list[tuple[object, ...]]:
    """Each event described; a plain LMSG (a bare `Pub`) and each of a run's as the message
    it stands for."""
    out: list[tuple[object, ...]] = []
    expanded: list[object] = []
    for ev in events:
        if isinstance(ev, RouteMsgRun):
            expanded += [parser.route_msg(ev.pub(tail)) for tail in ev.tails]
        else:
            expanded.append(parser.route_msg(ev) if type(ev) is Pub else ev)
    for ev in expanded:
        if isinstance(ev, RouteSub):
            out.append(("sub", ev.subject, ev.queue, ev.weight))
        elif isinstance(ev, RouteUnsub):
            out.append(("unsub", ev.subject, ev.queue))
        elif isinstance(ev, RouteMsg):
            m = ev.msg
            out.append(("msg", m.subject, m.reply, bytes(m.payload), m.header_size, ev.queues))
        elif isinstance(ev, Ping):
            out.append(("ping",))
        else:
            out.append((type(ev).__name__,))
    return out


EXPECTED = [
    ("sub", b"foo", b"", 0),
    ("sub", b"bar", b"q", 2),
    ("unsub", b"bar", b"q"),
    ("msg", b"foo", b"rep", b"abc", -1, ()),
    ("msg", b"foo", b"", b"NATS/1.0\r\n\r\nhi", 12, ()),
    ("msg", b"f", b"", b"x", -1, (b"q1", b"q2")),
    ("msg", b"g", b"r", b"yz", -1, (b"q1",)),
    ("ping",),
]


def test_leaf_ops_whole() -> None:
    parser = LeafParser()
    assert _shape(parser.feed(STREAM), parser) == EXPECTED


@pytest.mark.parametrize("split", range(1, len(STREAM)))
def test_leaf_ops_split_anywhere(split: int) -> None:
    parser = LeafParser()
    events = parser.feed(STREAM[:split]) + parser.feed(STREAM[split:])
    assert _shape(events, parser) == EXPECTED


def test_a_repeated_line_is_a_run() -> None:
    """LMSGs repeating the line of the one before (seen before) come as one run, as on a
    route; another op ends the run, the line after it starts the next."""
    parser = LeafParser()
    data = b"LMSG foo 1\r\na\r\n" * 2 + b"LMSG foo 1\r\nb\r\n" * 3 + b"PING\r\nLMSG foo 1\r\nc\r\n"
    events = parser.feed(data)
    assert [type(ev) for ev in events] == [Pub, Pub, RouteMsgRun, Ping, RouteMsgRun]
    run = events[2]
    assert isinstance(run, RouteMsgRun) and run.tails == [b"b\r\n"] * 3
    assert [m[3] for m in _shape(events, parser) if m[0] == "msg"] == [b"a", b"a"] + [b"b"] * 3 + [
        b"c"
    ]


@pytest.mark.parametrize(
    ("data", "reply"),
    [
        (b"FOO bar\r\n", "Unknown Protocol Operation"),
        (b"RS+ $G foo\r\n", None),  # a route op: closed without a word
        (b"RMSG $G foo 1\r\nx\r\n", None),
        (b"LS+ a b c d\r\n", None),
    ],
)
def test_bad_input(data: bytes, reply: str | None) -> None:
    (event,) = LeafParser().feed(data)
    assert isinstance(event, ProtocolError)
    assert event.reply == reply


def test_first_op_must_be_connect_on_an_accepted_leaf() -> None:
    (event,) = LeafParser(expect_connect=True).feed(b"LS+ foo\r\n")
    assert isinstance(event, ProtocolError)
    assert event.reply == "Authorization Violation"


def test_frames() -> None:
    assert ls_plus_frame(b"foo") == b"LS+ foo\r\n"
    assert ls_plus_frame(b"foo", b"q", 3) == b"LS+ foo q 3\r\n"
    assert ls_minus_frame(b"foo") == b"LS- foo\r\n"
    assert ls_minus_frame(b"foo", b"q") == b"LS- foo q\r\n"
    assert lmsg_head(b"s", b"r", (), 5) == b"LMSG s r 5\r\n"
    assert lmsg_head(b"s", b"", [b"q"], 5) == b"LMSG s | q 5\r\n"
    assert lmsg_head(b"s", b"r", [b"q"], 5, 2) == b"HMSG s + r q 2 5\r\n"
    assert lmsg_frame(Pub(b"s", b"", b"hi", -1)) == b"LMSG s 2\r\nhi\r\n"
    with_header = Pub(b"s", b"", b"NATS/1.0\r\n\r\nhi", 12)
    assert lmsg_frame(with_header) == b"HMSG s 12 14\r\nNATS/1.0\r\n\r\nhi\r\n"
    assert lmsg_frame(with_header, headers=False) == b"LMSG s 2\r\nhi\r\n"
