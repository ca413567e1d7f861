"""The route codec alone: each op, bad input as nats-server treats it, frames, and the same
events at any split point of the bytes."""

from __future__ import annotations

import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pynatsd.cluster.protocol import (
    AccountSub,
    AccountUnsub,
    RouteConnect,
    RouteInfo,
    RouteMsg,
    RouteMsgRun,
    RouteParser,
    RouteRunParser,
    RouteSub,
    RouteUnsub,
    js_ack_deliver_index,
    lmsg_frame,
    ls_minus_frame,
    ls_plus_frame,
    rmsg_frame,
    rmsg_head,
    rs_minus_frame,
    rs_plus_frame,
    with_deliver_subject,
)
from pynatsd.protocol.events import Err, Event, Ok, Ping, Pong, ProtocolError, Pub


def describe_all(events: list[Event | Pub], parser: RouteParser) -> list[tuple[object, ...]]:
    """Each event described; a run of messages as its messages."""
    out = []
    for ev in events:
        if isinstance(ev, RouteMsgRun):
            out += [describe(ev.pub(tail), parser) for tail in ev.tails]
        else:
            out.append(describe(ev, parser))
    return out


def describe(ev: Event | Pub, parser: RouteParser) -> tuple[object, ...]:
    if type(ev) is Pub:
        ev = parser.route_msg(ev)
    if isinstance(ev, RouteSub):
        return ("RS+", ev.origin, ev.account, ev.subject, ev.queue, ev.weight)
    if isinstance(ev, RouteUnsub):
        return ("RS-", ev.origin, ev.account, ev.subject, ev.queue)
    if isinstance(ev, RouteMsg):
        m = ev.msg
        return (
            "MSG",
            ev.origin,
            ev.account,
            m.subject,
            m.reply,
            m.payload,
            m.header_size,
            ev.queues,
        )
    if isinstance(ev, (RouteInfo, RouteConnect)):
        return (type(ev).__name__, ev.raw)
    if isinstance(ev, (AccountSub, AccountUnsub)):
        return ("A+" if isinstance(ev, AccountSub) else "A-", ev.account)
    if isinstance(ev, Err):
        return ("ERR", ev.text)
    if isinstance(ev, ProtocolError):
        return ("PROTOCOL", ev.reply)
    return (type(ev).__name__,)


def parse(data: bytes, expect_connect: bool = False) -> list[tuple[object, ...]]:
    parser = RouteParser(expect_connect)
    return describe_all(parser.feed(data), parser)


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        (b"RS+ $G foo\r\n", ("RS+", b"", b"$G", b"foo", b"", 0)),
        (b"A+ ACC\r\n", ("A+", b"ACC")),
        (b"a- $G\r\n", ("A-", b"$G")),
        (b"rs+ $G bar q1 2\r\n", ("RS+", b"", b"$G", b"bar", b"q1", 2)),
        (b"RS+\t$G\tfoo.*\r\n", ("RS+", b"", b"$G", b"foo.*", b"", 0)),
        (b"RS- $G foo\r\n", ("RS-", b"", b"$G", b"foo", b"")),
        (b"RS- $G bar q1\r\n", ("RS-", b"", b"$G", b"bar", b"q1")),
        (b"LS+ LX $G lx.q g1 1\r\n", ("RS+", b"LX", b"$G", b"lx.q", b"g1", 1)),
        (b"LS- LX $G lx.sub\r\n", ("RS-", b"LX", b"$G", b"lx.sub", b"")),
        (b"LS- LX $G lx.q g1\r\n", ("RS-", b"LX", b"$G", b"lx.q", b"g1")),
        (
            b"RMSG $G foo 5\r\nhello\r\n",
            ("MSG", b"", b"$G", b"foo", b"", b"hello", -1, ()),
        ),
        (
            b"RMSG $G foo r.1 2\r\nhi\r\n",
            ("MSG", b"", b"$G", b"foo", b"r.1", b"hi", -1, ()),
        ),
        (
            b"RMSG $G bar | q1 1\r\nx\r\n",
            ("MSG", b"", b"$G", b"bar", b"", b"x", -1, (b"q1",)),
        ),
        (
            b"RMSG $G bar + r q1 q2 1\r\nx\r\n",
            ("MSG", b"", b"$G", b"bar", b"r", b"x", -1, (b"q1", b"q2")),
        ),
        (
            b"HMSG $G foo 12 14\r\nNATS/1.0\r\n\r\nhh\r\n",
            ("MSG", b"", b"$G", b"foo", b"", b"NATS/1.0\r\n\r\nhh", 12, ()),
        ),
        (
            b"LMSG LX $G b.sub 0 5\r\nhello\r\n",
            ("MSG", b"LX", b"$G", b"b.sub", b"", b"hello", -1, ()),
        ),
        (b"PING\r\n", ("Ping",)),
        (b"pong\r\n", ("Pong",)),
        (b"+OK\r\n", ("Ok",)),
        (b"-ERR 'oops'\r\n", ("ERR", b"'oops'")),
        (b'INFO {"server_id":"X"}\r\n', ("RouteInfo", b'{"server_id":"X"}')),
    ],
)
def test_ops(line: bytes, expected: tuple[object, ...]) -> None:
    assert parse(line) == [expected]


@pytest.mark.parametrize(
    ("data", "reply"),
    [
        (b"FOO bar\r\n", "Unknown Protocol Operation"),
        (b"RS+ $G\r\n", None),  # processRemoteSub Parse Error: a close without a word
        (b"RS+ $G foo q\r\n", None),  # a queue needs its weight
        (b"RS- $G\r\n", None),
        (b"A+\r\n", None),  # an account op names one account
        (b"A- a b\r\n", None),
        (b"RMSG $G foo\r\n", None),
        (b"RMSG $G foo x\r\n", None),  # bad size
        (b"RMSG $G foo ? q 1\r\n", None),  # bad reply indicator
        (b"HMSG $G foo 5 2\r\n", None),  # header larger than the message
        (b"RMSG $G foo 2\r\nhiX\n", "Unknown Protocol Operation"),  # payload not CRLF
    ],
)
def test_bad_input(data: bytes, reply: str | None) -> None:
    events = parse(data)
    assert events[-1] == ("PROTOCOL", reply)


def test_accepted_route_expects_connect_first() -> None:
    assert parse(b"PING\r\n", expect_connect=True) == [("PROTOCOL", "Authorization Violation")]
    events = parse(b'CONNECT {"name":"A"}\r\nPING\r\n', expect_connect=True)
    assert events == [("RouteConnect", b'{"name":"A"}'), ("Ping",)]


def test_dead_after_error() -> None:
    parser = RouteParser()
    assert isinstance(parser.feed(b"BAD\r\n")[-1], ProtocolError)
    assert parser.feed(b"PING\r\n") == []


def test_frames() -> None:
    assert rs_plus_frame(b"$G", b"foo") == b"RS+ $G foo\r\n"
    assert rs_plus_frame(b"$G", b"bar", b"q1", 2) == b"RS+ $G bar q1 2\r\n"
    assert rs_minus_frame(b"$G", b"bar", b"q1") == b"RS- $G bar q1\r\n"
    assert rmsg_head(b"$G", b"foo", b"", [], 5) == b"RMSG $G foo 5\r\n"
    assert rmsg_head(b"$G", b"foo", b"my.reply", [], 9) == b"RMSG $G foo my.reply 9\r\n"
    assert rmsg_head(b"$G", b"bar", b"", [b"q1"], 1) == b"RMSG $G bar | q1 1\r\n"
    assert rmsg_head(b"$G", b"bar", b"r", [b"q1", b"q2"], 1) == b"RMSG $G bar + r q1 q2 1\r\n"
    assert rmsg_head(b"$G", b"foo", b"", [], 22, 20) == b"HMSG $G foo 20 22\r\n"
    hmsg = Pub(b"foo", b"", b"NATS/1.0\r\nA: b\r\n\r\nhi", 18)
    assert rmsg_frame(b"$G", hmsg) == b"HMSG $G foo 18 20\r\nNATS/1.0\r\nA: b\r\n\r\nhi\r\n"
    # A peer without headers gets the body alone, as RMSG.
    assert rmsg_frame(b"$G", hmsg, headers=False) == b"RMSG $G foo 2\r\nhi\r\n"


_token = st.text(alphabet="abcxyz019_-", min_size=1, max_size=6)
_subject = st.lists(_token, min_size=1, max_size=4).map(".".join)


@st.composite
def _stream(draw: st.DrawFn) -> bytes:
    """A mix of frames as a peer would send them."""
    parts: list[bytes] = []
    for _ in range(draw(st.integers(1, 12))):
        kind = draw(st.sampled_from(["sub", "qsub", "unsub", "msg", "hmsg", "qmsg", "ping"]))
        subject = draw(_subject).encode()
        if kind == "sub":
            parts.append(rs_plus_frame(b"$G", subject))
        elif kind == "qsub":
            parts.append(rs_plus_frame(b"$G", subject, b"q", draw(st.integers(1, 9))))
        elif kind == "unsub":
            parts.append(rs_minus_frame(b"$G", subject))
        elif kind == "ping":
            parts.append(b"PING\r\n")
        else:
            body = draw(st.binary(max_size=40))
            hdr = -1
            if kind == "hmsg":
                body = b"NATS/1.0\r\nK: v\r\n\r\n" + body
                hdr = 18
            queues = [b"q1"] if kind == "qmsg" else []
            reply = draw(st.sampled_from([b"", b"_INBOX.r"]))
            parts.append(rmsg_frame(b"$G", Pub(subject, reply, body, hdr), queues))
    return b"".join(parts)


@pytest.mark.parametrize("parser_class", [RouteParser, RouteRunParser])
@settings(max_examples=200, deadline=None)
@given(data=_stream(), cuts=st.lists(st.integers(0, 2000), max_size=8))
def test_any_split_gives_the_same_events(
    parser_class: type[RouteParser], data: bytes, cuts: list[int]
) -> None:
    """Whole or cut anywhere, the same messages; the route's parser (runs) reads the same."""
    whole = parse(data)
    assert all(ev[0] != "PROTOCOL" for ev in whole)
    parser = parser_class()
    events: list[tuple[object, ...]] = []
    start = 0
    for cut in sorted(c % (len(data) + 1) for c in cuts):
        events += describe_all(parser.feed(data[start:cut]), parser)
        start = cut
    events += describe_all(parser.feed(data[start:]), parser)
    assert events == whole


def test_byte_at_a_time_is_linear() -> None:
    """A large payload fed one byte at a time costs O(bytes), not O(bytes^2)."""
    body = b"x" * 200_000
    data = b"RMSG $G foo %d\r\n" % len(body) + body + b"\r\n"
    parser = RouteParser()
    began = time.perf_counter()
    events: list[Event] = []
    for i in range(len(data)):
        events += parser.feed(data[i : i + 1])
    assert time.perf_counter() - began < 5
    assert len(events) == 1 and isinstance(events[0], RouteMsg)
    assert events[0].msg.payload == body


def test_repeated_lines_take_the_fast_path() -> None:
    """Whole plain RMSGs come out as bare Pubs whose line names the account, and once a line
    repeats, the messages right after it with the same line as one run; one line object per
    distinct line; mixed with other ops and other lines they keep their order."""
    parser = RouteRunParser()
    data = b"RMSG $G foo 2\r\nhi\r\n" * 4 + b"RMSG A bar r 1\r\nx\r\nPING\r\n"
    data += b"RMSG $G foo 2\r\nyo\r\n"
    events = parser.feed(data)
    assert describe_all(events, parser) == [
        *[("MSG", b"", b"$G", b"foo", b"", b"hi", -1, ())] * 4,
        ("MSG", b"", b"A", b"bar", b"r", b"x", -1, ()),
        ("Ping",),
        ("MSG", b"", b"$G", b"foo", b"", b"yo", -1, ()),
    ]
    assert [type(ev) for ev in events] == [
        Pub,
        Pub,
        RouteMsgRun,
        Pub,
        Ping,
        RouteMsgRun,
    ]
    runs = [ev for ev in events if isinstance(ev, RouteMsgRun)]
    assert [run.tails for run in runs] == [[b"hi\r\n", b"hi\r\n"], [b"yo\r\n"]]
    foo = [ev.line for ev in events if type(ev) is Pub][:2] + [run.line for run in runs]
    assert all(line is foo[0] for line in foo)
    # A plain RouteParser (the base of other server links) gives RouteMsg events instead.
    plain = RouteParser()
    assert [type(ev) for ev in plain.feed(data)] == [RouteMsg] * 5 + [Ping, RouteMsg]


LINE = b"RMSG $G foo 3\r\n"


@settings(max_examples=200, deadline=None)
@given(
    count=st.integers(0, 150),
    breaks=st.lists(
        st.tuples(
            st.integers(0, 150),
            st.sampled_from(
                [
                    b"PING\r\n",
                    b"RMSG $G foo 2\r\nab\r\n",
                    b"RMSG $G bar 3\r\nabc\r\n",
                    b"RMSG $G fob 3\r\nabc\r\n",  # a message as long, another line
                    b"RMSG $G foo 3\r\nab",
                ]
            ),
        ),
        max_size=3,
    ),
    payloads=st.lists(st.sampled_from([b"abc", b"\r\nR", b"MSG", b"foo"]), min_size=1, max_size=4),
    cuts=st.lists(st.integers(0, 3000), max_size=3),
)
def test_long_runs_read_in_one_piece(
    count: int, breaks: list[tuple[int, bytes]], payloads: list[bytes], cuts: list[int]
) -> None:
    """A long run of one line (read in one piece) is the messages it stands for, whatever ends
    it: another op, another line (as long or not), another size, the end of a read."""
    messages = [LINE + payloads[i % len(payloads)] + b"\r\n" for i in range(count)]
    messages.insert(0, LINE + b"xyz\r\n" + LINE + b"xyz\r\n")  # the line seen: runs begin
    for at, other in breaks:
        messages.insert(min(at, len(messages)), other)
    data = b"".join(messages)
    if data.endswith(b"ab"):
        data += b"c\r\n"
    whole = parse(data)
    parser = RouteRunParser()
    events: list[Event | Pub] = []
    start = 0
    for cut in sorted(c % (len(data) + 1) for c in cuts):
        events += parser.feed(data[start:cut])
        start = cut
    events += parser.feed(data[start:])
    assert describe_all(events, parser) == whole


def test_a_stream_of_one_line_is_one_run() -> None:
    """A read of messages with the line of the one before, each as long as the others, is one
    run, payloads that hold the line itself too."""
    parser = RouteRunParser()
    events = parser.feed((LINE + b"abc\r\n") * 100)
    assert [type(ev) for ev in events] == [Pub, Pub, RouteMsgRun]
    run = events[2]
    assert isinstance(run, RouteMsgRun) and run.tails == [b"abc\r\n"] * 98
    line = b"RMSG $G foo 16\r\n"
    events = parser.feed((line + line + b"\r\n") * 20 + (line + b"x" * 16 + b"\r\n") * 20)
    assert [type(ev) for ev in events] == [Pub, Pub, RouteMsgRun]
    run = events[2]
    assert isinstance(run, RouteMsgRun)
    assert run.tails == [line + b"\r\n"] * 18 + [b"x" * 16 + b"\r\n"] * 20
    # Another line as long and, further on, a payload holding the line: as many pieces as
    # messages, but not each as long as a payload.
    other = b"RMSG $G fob 16\r\n"
    plain = line + b"x" * 16 + b"\r\n"
    data = plain * 10 + other + b"y" * 16 + b"\r\n" + line + line + b"\r\n" + plain * 10
    assert describe_all(parser.feed(data), parser) == parse(data)


def test_ping_pong_ok_events() -> None:
    events = RouteParser().feed(b"PING\r\nPONG\r\n+OK\r\n")
    assert [type(e) for e in events] == [Ping, Pong, Ok]


def test_pinned_connection_ops_carry_no_account() -> None:
    """On a connection pinned to `$SYS`, ops name no account; the parser supplies it."""
    parser = RouteParser(account=b"$SYS")
    events = describe_all(
        parser.feed(
            b"RS+ $SYS.REQ.SERVER.PING\r\nRS+ q.sub g 2\r\nRS- q.sub g\r\n"
            b"RMSG $SYS.SERVER.X.STATSZ 2\r\nhi\r\nRMSG a.b | g 1\r\nx\r\n"
        ),
        parser,
    )
    assert events == [
        ("RS+", b"", b"$SYS", b"$SYS.REQ.SERVER.PING", b"", 0),
        ("RS+", b"", b"$SYS", b"q.sub", b"g", 2),
        ("RS-", b"", b"$SYS", b"q.sub", b"g"),
        ("MSG", b"", b"$SYS", b"$SYS.SERVER.X.STATSZ", b"", b"hi", -1, ()),
        ("MSG", b"", b"$SYS", b"a.b", b"", b"x", -1, (b"g",)),
    ]
    assert rs_plus_frame(b"", b"foo") == b"RS+ foo\r\n"
    assert rs_minus_frame(b"", b"foo", b"q") == b"RS- foo q\r\n"
    assert rmsg_head(b"", b"foo", b"", [], 5) == b"RMSG foo 5\r\n"


def test_leaf_origin_frames_and_pinned_ops() -> None:
    """LS+/LS-/LMSG as nats-server writes them, and on a pinned connection (no account token
    after the origin)."""
    assert ls_plus_frame(b"LX", b"$G", b"lx.sub") == b"LS+ LX $G lx.sub\r\n"
    assert ls_plus_frame(b"LX", b"$G", b"lx.q", b"g1", 2) == b"LS+ LX $G lx.q g1 2\r\n"
    assert ls_minus_frame(b"LX", b"$G", b"lx.q", b"g1") == b"LS- LX $G lx.q g1\r\n"
    assert ls_minus_frame(b"", b"$G", b"lx.sub") == b"LS- $G lx.sub\r\n"
    assert lmsg_frame(b"LX", b"$G", Pub(b"b.sub", b"", b"hello"), []) == (
        b"LMSG LX $G b.sub 0 5\r\nhello\r\n"
    )
    hmsg = Pub(b"b.sub", b"r", b"NATS/1.0\r\nA: b\r\n\r\nhi", 18)
    assert lmsg_frame(b"LX", b"$G", hmsg, [b"q1"]) == (
        b"LMSG LX $G b.sub + r q1 18 20\r\nNATS/1.0\r\nA: b\r\n\r\nhi\r\n"
    )
    parser = RouteParser(account=b"$SYS")
    events = describe_all(
        parser.feed(b"LS+ LX a.b g 2\r\nLS- LX a.b g\r\nLMSG LX a.b 0 1\r\nx\r\n"),
        parser,
    )
    assert events == [
        ("RS+", b"LX", b"$SYS", b"a.b", b"g", 2),
        ("RS-", b"LX", b"$SYS", b"a.b", b"g"),
        ("MSG", b"LX", b"$SYS", b"a.b", b"", b"x", -1, ()),
    ]


def test_hold_after_info_until_the_next_feed() -> None:
    """The bytes after an INFO wait until the INFO is handled (it may pin the connection)."""
    parser = RouteParser()
    parser.hold_after_info = True
    first = parser.feed(b'INFO {"route_account":"$SYS"}\r\nRS+ foo\r\n')
    assert [type(ev) for ev in first] == [RouteInfo]
    assert parser.held
    parser.account = b"$SYS"
    parser.hold_after_info = False
    assert describe_all(parser.feed(b""), parser) == [("RS+", b"", b"$SYS", b"foo", b"", 0)]


def test_pool_index_is_nats_servers() -> None:
    """fnv32a(account) % pool size: `$G` goes on connection 2 of 3, as observed between Go
    servers (nats-cluster-facts §1.5)."""
    from pynatsd.cluster.pool import fnv32a, pool_index

    assert fnv32a(b"$G") == 2059166108
    assert pool_index(b"$G", 3) == 2
    assert pool_index(b"$SYS", 3) == 0
    assert pool_index(b"$G", 1) == 0


def test_a_split_payload_is_never_read_as_a_repeated_line() -> None:
    """The rest of a payload split over reads is payload, even when it reads like the line
    being repeated; so is the rest of a control line split over reads."""
    parser = RouteRunParser()
    line = b"RMSG $G foo 17\r\n"
    events = parser.feed(line + b"a" * 17 + b"\r\n" + line + b"b" * 17 + b"\r\n" + line)
    events += parser.feed(line + b"x\r\n" + line + b"c" * 17 + b"\r\nRMSG $G f")
    events += parser.feed(b"oo 17\r\n" + b"d" * 17 + b"\r\n")
    payloads = [m[5] for m in describe_all(events, parser)]
    assert payloads == [b"a" * 17, b"b" * 17, line + b"x", b"c" * 17, b"d" * 17]


ACK = b"$JS.ACK.S.C.1.2.3.1700000000000000000.0"


@pytest.mark.parametrize(
    ("reply", "index"),
    [
        (ACK + b"@orders.1", len(ACK)),
        # Stream and consumer names may hold an `@`: only one after the eight dots counts.
        (b"$JS.ACK.S@x.C@y.1.2.3.17.0@orders.1", len(b"$JS.ACK.S@x.C@y.1.2.3.17.0")),
        (ACK, -1),
        (b"_INBOX.a@b", -1),
        (b"$JS.ACK.S.C@orders.1", -1),
    ],
)
def test_js_ack_deliver_index_is_nats_servers(reply: bytes, index: int) -> None:
    """nats-server's jsAckDeliverIdx: where the shown subject of a routed JetStream delivery
    starts (after the `@`)."""
    assert js_ack_deliver_index(reply) == index


def test_with_deliver_subject_appends_once() -> None:
    assert with_deliver_subject(ACK, b"orders.1") == ACK + b"@orders.1"
    assert with_deliver_subject(ACK + b"@orders.1", b"orders.1") == ACK + b"@orders.1"
    assert with_deliver_subject(b"", b"orders.1") == b""
