"""Sans-IO codec of the route protocol: `RouteParser.feed(bytes) -> list[event]`, and the frames
a server sends to a route. A route's parser (`RouteRunParser`) hands out a plain RMSG whole in
one read as a bare `Pub`, and the ones that repeat its line right after it as one `RouteMsgRun`
(the receiving route's hot path); `RouteParser.route_msg` and `RouteMsgRun.pub` turn them into
what they stand for.

Corresponds to the route half of nats-server's `server/parser.go` (`RS+`, `RS-`, `RMSG`,
`HMSG`, `LS+`, `LS-`, `LMSG`, and the gateways' `A+`, `A-`) and the argument parsing of
`route.go` (`processRemoteSub`, `processRemoteUnsub`) and `client.go` (`processRoutedMsgArgs`,
`processRoutedHeaderMsgArgs`, `processRoutedOriginClusterMsgArgs`). Ops are case-insensitive
and arguments are split on spaces and tabs. What nats-server answers to bad input, this
produces: an unknown op is `-ERR 'Unknown Protocol Operation'` and a close, a first op other
than CONNECT on an accepted route is `-ERR 'Authorization Violation'`, an argument error is a
close without a word (a `ProtocolError` with no reply).

On a connection pinned to one account (`route_account`, `$SYS` by default) ops carry no account
token: the parser's `account` supplies it, and the frame builders omit an empty account.
Leaf-origin ops (`LS+`, `LS-`, `LMSG`) are only sent to a peer that announced `lnoc`; they are
parsed (as the same events, with their origin) so that a peer that sends them anyway is
understood.

Complexity promise: work is O(bytes received). An incomplete control line is kept and only the
newly received bytes are searched for its end; a payload split over reads is collected in one
buffer and sliced once, so a message sent one byte at a time never costs quadratic time.
"""

from __future__ import annotations

import json
from typing import Any

from pynatsd.protocol import errors
from pynatsd.protocol.errors import CloseReason
from pynatsd.protocol.events import (
    OK,
    PING,
    PONG,
    Err,
    Event,
    Ok,
    Ping,
    Pong,
    ProtocolError,
    Pub,
    make_pub,
)
from pynatsd.server.routed import ShownPub

__all__ = [
    "MAX_CONTROL_LINE",
    "AccountSub",
    "AccountUnsub",
    "RouteConnect",
    "RouteInfo",
    "RouteMsg",
    "RouteMsgRun",
    "RouteParser",
    "RouteRunParser",
    "RouteSub",
    "RouteUnsub",
    "js_ack_deliver_index",
    "rmsg_frame",
    "rmsg_head",
    "rs_minus_frame",
    "rs_plus_frame",
    "shown_delivery",
    "wire_delivery",
    "with_deliver_subject",
]

# Longest control line kept while waiting for its end. Route lines carry queue names and can
# be long; nats-server applies no client limit to them, this only bounds memory.
MAX_CONTROL_LINE = 1024 * 1024
_MAX_SIZE_DIGITS = 9

RouteEvent = Event | Ping | Pong | Ok
# A plain RMSG line: account, subject, reply, size, size as written, the argument.
_RmsgLine = tuple[bytes, bytes, bytes, int, bytes, bytes]
# Distinct plain RMSG lines remembered per connection; cleared wholesale when full.
_MEMO_SIZE = 1024


class RouteInfo(Event):
    """An INFO from the peer (the first one, gossip about another server, or an update)."""

    __slots__ = ("info", "raw")

    def __init__(self, info: dict[str, Any], raw: bytes) -> None:
        self.info = info
        self.raw = raw


class RouteConnect(Event):
    __slots__ = ("options", "raw")

    def __init__(self, options: dict[str, Any], raw: bytes) -> None:
        self.options = options
        self.raw = raw


class RouteSub(Event):
    """RS+ (or LS+ with its `origin` cluster): interest of the peer's server. `weight` is the
    number of members of a queue group there (0 for a plain subscription)."""

    __slots__ = ("account", "origin", "queue", "subject", "weight")

    def __init__(
        self, account: bytes, subject: bytes, queue: bytes, weight: int, origin: bytes = b""
    ) -> None:
        self.account = account
        self.subject = subject
        self.queue = queue
        self.weight = weight
        self.origin = origin


class RouteUnsub(Event):
    """RS- (or LS-): the peer's server lost its interest."""

    __slots__ = ("account", "origin", "queue", "subject")

    def __init__(self, account: bytes, subject: bytes, queue: bytes, origin: bytes = b"") -> None:
        self.account = account
        self.subject = subject
        self.queue = queue
        self.origin = origin


class AccountSub(Event):
    """A+ (gateways only): the remote cluster has interest in the account again."""

    __slots__ = ("account",)

    def __init__(self, account: bytes) -> None:
        self.account = account


class AccountUnsub(Event):
    """A- (gateways only): the remote cluster has no interest at all in the account."""

    __slots__ = ("account",)

    def __init__(self, account: bytes) -> None:
        self.account = account


class RouteMsg(Event):
    """RMSG, HMSG or LMSG: `msg` is the same `Pub` a client's publish makes; `queues` names the
    queue groups the sender picked a member of here (only those may receive it)."""

    __slots__ = ("account", "msg", "origin", "queues")

    def __init__(
        self, account: bytes, msg: Pub, queues: tuple[bytes, ...], origin: bytes = b""
    ) -> None:
        self.account = account
        self.msg = msg
        self.queues = queues
        self.origin = origin


class RouteMsgRun(Event):
    """Plain RMSGs with the same line, one after the other in one read (a peer forwarding a
    stream): the line's account, subject, reply, payload size, size as written and argument
    (the same bytes object as the `line` of the bare `Pub` that came first), and each
    message's payload with its CRLF, as it came."""

    __slots__ = ("account", "line", "reply", "size", "size_text", "subject", "tails")

    def __init__(self, memo: _RmsgLine, tails: list[bytes] | None = None) -> None:
        self.account, self.subject, self.reply, self.size, self.size_text, self.line = memo
        self.tails: list[bytes] = [] if tails is None else tails

    def pub(self, tail: bytes) -> Pub:
        """One of the run's messages as the `Pub` it stands for."""
        return make_pub((self.subject, self.reply, tail[:-2], -1, self.line, self.size_text, b""))


# The fewest messages a run is read in one piece for (`_uniform_run`).
_MIN_BLOCK = 8


def _uniform_run(data: bytes, pos: int, repeat: bytes, size: int) -> list[bytes] | None:
    """The payloads (with their CRLF) of the messages from `pos` on that each are the line
    `repeat` (whole, CRLF included), `size` bytes and a CRLF, if at least `_MIN_BLOCK` of them
    come one after the other; else None. Read in one piece rather than message by message:
    the CR and the LF after every payload are each one strided slice, checked at once, and
    the messages they frame are split on the line, each piece as long as a payload."""
    tail = size + 2
    stride = len(repeat) + tail
    most = (len(data) - pos) // stride
    if most < _MIN_BLOCK or not data.startswith(repeat, pos + stride):
        return None
    stop = pos + most * stride
    count = most
    for column, byte in ((stride - 2, b"\r"), (stride - 1, b"\n")):
        strip = data[pos + column : stop : stride]
        count = min(count, len(strip) - len(strip.lstrip(byte)))
    if count < _MIN_BLOCK:
        return None
    tails = data[pos : pos + count * stride].split(repeat)
    del tails[0]  # b"": the piece starts with the line
    lengths = list(map(len, tails))
    if len(tails) != count or lengths.count(tail) != count:
        # Another line as long, or a payload that holds the line: the messages before it.
        count = 0
        for length in lengths:
            if length != tail:
                break
            count += 1
        if count < _MIN_BLOCK:
            return None
        del tails[count:]
    return tails


def _split(arg: bytes) -> list[bytes]:
    return arg.replace(b"\t", b" ").split()


def _size(text: bytes) -> int:
    if not text or len(text) > _MAX_SIZE_DIGITS or not text.isdigit():
        return -1
    return int(text)


# op name (upper case) -> handler kind
_OPS = {
    b"RS+": "rsub",
    b"RS-": "runsub",
    b"LS+": "lsub",
    b"LS-": "lunsub",
    b"RMSG": "rmsg",
    b"HMSG": "hmsg",
    b"LMSG": "lmsg",
    b"A+": "asub",
    b"A-": "aunsub",
    b"PING": "ping",
    b"PONG": "pong",
    b"+OK": "ok",
    b"-ERR": "err",
    b"INFO": "info",
    b"CONNECT": "connect",
}


class _BadArgs(Exception):
    """An argument error: nats-server closes the route without a word."""


class RouteParser:
    """Turns the bytes a route peer sends into events. `expect_connect` (an accepted route)
    makes any first op but CONNECT an authorization violation. After a `ProtocolError` the
    parser is dead and returns nothing more."""

    __slots__ = (
        "_dead",
        "_held",
        "_memo",
        "_partial",
        "_payload",
        "_pending",
        "_pending_line",
        "_repeat",
        "_repeat_memo",
        "account",
        "expect_connect",
        "hold_after_info",
    )

    # How a plain message whole in one read comes out: as a `RouteMsg` like every other
    # message, or (`RouteRunParser`) as a bare `Pub`, the messages repeating its line right
    # after it as one `RouteMsgRun`.
    message_runs = False
    # The op names this protocol knows (upper case) and the handler kind of each, and the
    # message op the common-case path looks for; a leaf connection reads its own (leafnode/).
    ops: dict[bytes, str] = _OPS
    fast_op = b"RMSG "

    def __init__(self, expect_connect: bool = False, account: bytes = b"") -> None:
        self.expect_connect = expect_connect
        # The account of a connection pinned to one (its ops carry no account token).
        self.account = account
        # Stop after an INFO until the next feed: the INFO may say the connection is pinned,
        # which changes how the ops after it read. `_held` keeps the bytes after it.
        self.hold_after_info = False
        self._held = b""
        self._partial = bytearray()  # an incomplete control line
        # A message waiting for its payload: (account, subject, reply, queues, size, hdr,
        # origin), and the payload bytes received so far.
        self._pending: tuple[bytes, bytes, bytes, tuple[bytes, ...], int, int, bytes] | None = None
        self._payload = bytearray()
        # The plain line of that message, when it is one (`message_runs`): it comes out as a
        # bare `Pub` like a whole one, so that a plan finds it.
        self._pending_line: _RmsgLine | None = None
        self._dead = False
        # Plain RMSG lines seen: argument -> (account, subject, reply, size, size as written,
        # the argument). A peer forwarding a stream of messages repeats the same few lines.
        self._memo: dict[bytes, _RmsgLine] = {}
        # The last such line, whole (`RMSG $G foo 16\r\n`), and what it means: a peer repeating
        # it costs a `startswith` per message.
        self._repeat = b""
        self._repeat_memo: _RmsgLine | None = None

    @property
    def dead(self) -> bool:
        return self._dead

    @property
    def held(self) -> bool:
        """Bytes after an INFO wait for the next feed (see `hold_after_info`)."""
        return bool(self._held)

    def feed(self, data: bytes) -> list[Event | Pub]:
        events: list[Event | Pub] = []
        if self._held:
            data, self._held = self._held + data, b""
        if self._dead or not data:
            return events
        pos = 0
        n = len(data)
        append = events.append
        rep = self._repeat
        # Not while the start of a line waits for its end: those bytes continue it.
        rep_len = 0 if self._partial else len(rep)
        run: list[bytes] | None = None  # the tails of the run being read, if any
        blocks = True  # a run may be read in one piece (`_uniform_run`)
        while pos < n and not self._dead:
            if self._pending is not None:
                # A payload split over reads: what comes first is its rest, whatever it reads.
                pos = self._take_payload(data, pos, events)
                run = None
                continue
            if rep_len and data.startswith(rep, pos):
                memo = self._repeat_memo
                assert memo is not None
                if run is None and blocks:
                    tails = _uniform_run(data, pos, rep, memo[3])
                    if tails is not None:
                        run = tails  # a message with the line right after goes on with it
                        append(RouteMsgRun(memo, tails))
                        pos += len(tails) * (rep_len + memo[3] + 2)
                        continue
                    blocks = False  # not worth trying again in this read
                start = pos + rep_len
                end = start + memo[3] + 2
                if end <= n and data[end - 2] == 0x0D and data[end - 1] == 0x0A:
                    if run is None:
                        run_event = RouteMsgRun(memo)
                        run = run_event.tails
                        append(run_event)
                    run.append(data[start:end])
                    pos = end
                    continue
            run = None
            nl = data.find(b"\n", pos)
            if nl > 0 and not self._partial and data.startswith(self.fast_op, pos):
                # The common message, whole in this read: no per-op dispatch.
                end = self._whole_rmsg(data, pos, nl, events)
                if end > 0:
                    rep = self._repeat
                    rep_len = len(rep)
                    pos = end
                    continue
            if nl < 0:
                self._partial += data[pos:]
                if len(self._partial) > MAX_CONTROL_LINE:
                    self._fail(events, errors.MAXIMUM_CONTROL_LINE_EXCEEDED, "control line")
                elif self._unknown_start(bytes(self._partial[:8])):
                    self._fail(events, errors.UNKNOWN_PROTOCOL_OPERATION, "unknown op")
                return events
            if self._partial:
                self._partial += data[pos : nl + 1]
                line = bytes(self._partial)
                self._partial = bytearray()
                rep = self._repeat  # the lines after it may repeat one again
                rep_len = len(rep)
            else:
                line = data[pos : nl + 1]
            pos = nl + 1
            self._line(line, events)
            if self.hold_after_info and events and isinstance(events[-1], RouteInfo):
                self._held = data[pos:]
                return events
        return events

    def _whole_rmsg(self, data: bytes, pos: int, nl: int, events: list[Event | Pub]) -> int:
        """An upper-case `RMSG acc subject [reply] size` (`fast_op`) with its payload in `data`:
        the position after it, or 0 to take the general path (any other form, or incomplete).
        With `message_runs` the message is appended as a bare `Pub` whose `line` (one bytes
        object per distinct line) names its account through `account_of`."""
        arg = data[pos + 5 : nl - 1] if data[nl - 1] == 0x0D else data[pos + 5 : nl]
        memo = self._memo.get(arg)
        seen = memo is not None
        if memo is None:
            memo = self._rmsg_line(arg)
            if memo is None:
                return 0
        start = nl + 1
        end = start + memo[3]
        if end + 2 > len(data) and self.message_runs:
            # The payload goes on in the next read (with large messages, at the end of nearly
            # every read): kept with its line.
            self._pending = (memo[0], memo[1], memo[2], (), memo[3], -1, b"")
            self._pending_line = memo
            self._payload = bytearray()
            return start
        if end + 2 > len(data) or data[end] != 0x0D or data[end + 1] != 0x0A:
            return 0
        msg = make_pub((memo[1], memo[2], data[start:end], -1, memo[5], memo[4], b""))
        if not self.message_runs:
            events.append(RouteMsg(memo[0], msg, ()))
            return end + 2
        events.append(msg)
        if seen:  # a line seen before may well come again next
            self._repeat = data[pos:start]
            self._repeat_memo = memo
        return end + 2

    def _rmsg_line(self, arg: bytes) -> _RmsgLine | None:
        """Account, subject, reply and size of a plain RMSG argument (memoised), or None for
        a form the general path reads (queues, tabs, a bad size, before CONNECT)."""
        args = arg.split(b" ")
        if self.account:
            args.insert(0, self.account)
        nargs = len(args)
        if nargs == 3:
            account, subject, size_text = args
            reply = b""
        elif nargs == 4:
            account, subject, reply, size_text = args
        else:
            return None
        if (
            not account
            or not subject
            or not size_text.isdigit()
            or len(size_text) > _MAX_SIZE_DIGITS
            or self.expect_connect
            or b"\t" in arg
        ):
            return None
        memo = self._memo
        if len(memo) >= _MEMO_SIZE:
            memo.clear()
        entry = memo[arg] = (account, subject, reply, int(size_text), size_text, arg)
        return entry

    def account_of(self, line: bytes) -> bytes:
        """The account of a bare `Pub` this parser made: the connection's, or its line's
        first token."""
        return self.account or line.split(b" ", 1)[0]

    def route_msg(self, msg: Pub) -> RouteMsg:
        """A bare `Pub` of this parser as the RouteMsg it stands for."""
        return RouteMsg(self.account_of(msg.line), msg, ())

    # -- payloads --------------------------------------------------------------------------------

    def _take_payload(self, data: bytes, pos: int, events: list[Event | Pub]) -> int:
        assert self._pending is not None
        size = self._pending[4]
        need = size + 2 - len(self._payload)
        chunk = data[pos : pos + need]
        if not self._payload and len(chunk) == need:
            body = chunk  # the whole payload in this read: no copy
        else:
            self._payload += chunk
            if len(self._payload) < size + 2:
                return len(data)
            body = bytes(self._payload)
            self._payload = bytearray()
        pending, self._pending = self._pending, None
        if body[size:] != b"\r\n":
            self._fail(events, errors.UNKNOWN_PROTOCOL_OPERATION, "payload not CRLF")
            return len(data)
        memo, self._pending_line = self._pending_line, None
        if memo is not None:
            events.append(make_pub((memo[1], memo[2], body[:size], -1, memo[5], memo[4], b"")))
            return pos + len(chunk)
        account, subject, reply, queues, _, hdr, origin = pending
        events.append(RouteMsg(account, Pub(subject, reply, body[:size], hdr), queues, origin))
        return pos + len(chunk)

    # -- lines -----------------------------------------------------------------------------------

    def _unknown_start(self, head: bytes) -> bool:
        """True when an incomplete line can never become a known op."""
        head = head.upper()
        return not any(head.startswith(name) or name.startswith(head) for name in self.ops)

    def _fail(
        self, events: list[Event | Pub], reply: str | None, detail: str, reason: str = ""
    ) -> None:
        events.append(ProtocolError(reply, reason or CloseReason.PROTOCOL_VIOLATION, detail))
        self._dead = True

    def _line(self, line: bytes, events: list[Event | Pub]) -> None:
        body = line[:-2] if line.endswith(b"\r\n") else line[:-1]
        stripped = body.lstrip(b" \t")
        sp = len(stripped)
        for i, b in enumerate(stripped):
            if b in b" \t":
                sp = i
                break
        op = stripped[:sp].upper()
        arg = stripped[sp:].strip(b" \t")
        kind = self.ops.get(op)
        if self.expect_connect and kind != "connect":
            self._fail(
                events,
                errors.AUTHORIZATION_VIOLATION,
                "expected CONNECT",
                CloseReason.AUTHENTICATION_VIOLATION,
            )
            return
        if kind is None:
            self._fail(events, errors.UNKNOWN_PROTOCOL_OPERATION, f"unknown op {body[:32]!r}")
            return
        try:
            self._dispatch(kind, arg, events)
        except _BadArgs as e:
            self._fail(events, None, str(e))

    def _dispatch(self, kind: str, arg: bytes, events: list[Event | Pub]) -> None:
        if kind == "ping":
            events.append(PING)
        elif kind == "pong":
            events.append(PONG)
        elif kind == "ok":
            events.append(OK)
        elif kind == "err":
            events.append(Err(arg))
        elif kind in ("info", "connect"):
            try:
                decoded = json.loads(arg.decode("utf-8", "replace"))
            except ValueError:
                decoded = None
            if not isinstance(decoded, dict):
                raise _BadArgs(f"invalid {kind.upper()} JSON")
            if kind == "connect":
                self.expect_connect = False
                events.append(RouteConnect(decoded, arg))
            else:
                events.append(RouteInfo(decoded, arg))
        elif kind in ("asub", "aunsub"):
            account = _split(arg)
            if len(account) != 1:
                raise _BadArgs(f"processGatewayAccount{kind[1:].title()} Parse Error")
            events.append(AccountSub(account[0]) if kind == "asub" else AccountUnsub(account[0]))
        elif kind == "rsub":
            events.append(_route_sub(self._with_account(_split(arg)), False))
        elif kind == "runsub":
            events.append(_route_unsub(self._with_account(_split(arg)), False))
        elif kind == "lsub":
            events.append(_route_sub(self._with_origin_account(_split(arg)), True))
        elif kind == "lunsub":
            events.append(_route_unsub(self._with_origin_account(_split(arg)), True))
        else:
            self._start_msg(kind, arg, events)

    def _with_account(self, args: list[bytes]) -> list[bytes]:
        # A connection pinned to one account carries no account token.
        return [self.account, *args] if self.account else args

    def _with_origin_account(self, args: list[bytes]) -> list[bytes]:
        # LS+, LS- and LMSG: the account (if on the wire) comes after the origin cluster.
        return [args[0], self.account, *args[1:]] if self.account and args else args

    def _start_msg(self, kind: str, arg: bytes, events: list[Event | Pub]) -> None:
        args = _split(arg)
        args = self._with_origin_account(args) if kind == "lmsg" else self._with_account(args)
        origin = b""
        if kind == "lmsg":
            if not args:
                raise _BadArgs(f"processRoutedOriginClusterMsgArgs Parse Error: '{arg!r}'")
            origin, args = args[0], args[1:]
        headers = kind != "rmsg"
        account, subject, reply, queues, hdr, size = _msg_args(args, headers, arg)
        if kind == "lmsg" and hdr == 0:
            hdr = -1  # LMSG always carries a header length; 0 means no header block
        self._pending = (account, subject, reply, queues, size, hdr, origin)
        self._payload = bytearray()


class RouteRunParser(RouteParser):
    """The parser of a route connection: plain messages as bare `Pub`s and runs, which the
    route delivers through its plans without an event object per message."""

    message_runs = True


def _route_sub(args: list[bytes], leaf: bool) -> RouteSub:
    origin = b""
    if leaf:
        if not args:
            raise _BadArgs("processRemoteSub Parse Error")
        origin, args = args[0], args[1:]
    if len(args) == 2:
        return RouteSub(args[0], args[1], b"", 0, origin)
    if len(args) == 4:
        weight = _size(args[3])
        if weight < 0:
            raise _BadArgs("processRemoteSub Parse Error: bad queue weight")
        return RouteSub(args[0], args[1], args[2], weight, origin)
    raise _BadArgs("processRemoteSub Parse Error")


def _route_unsub(args: list[bytes], leaf: bool) -> RouteUnsub:
    origin = b""
    if leaf:
        # We announce `lnocu`: a peer's LS- always names the origin cluster.
        if not args:
            raise _BadArgs("processRemoteUnsub Parse Error")
        origin, args = args[0], args[1:]
    if len(args) == 2:
        return RouteUnsub(args[0], args[1], b"", origin)
    if len(args) == 3:
        return RouteUnsub(args[0], args[1], args[2], origin)
    raise _BadArgs("processRemoteUnsub Parse Error")


def _msg_args(
    args: list[bytes], headers: bool, raw: bytes
) -> tuple[bytes, bytes, bytes, tuple[bytes, ...], int, int]:
    """account, subject, reply, queues, header size (-1: none), total size."""
    name = "processRoutedHeaderMsgArgs" if headers else "processRoutedMsgArgs"
    tail = 2 if headers else 1
    nargs = len(args)
    if nargs < 2 + tail:
        raise _BadArgs(f"{name} Parse Error: '{raw!r}'")
    account, subject = args[0], args[1]
    reply = b""
    queues: tuple[bytes, ...] = ()
    middle = args[2 : nargs - tail]
    if len(middle) == 1:
        reply = middle[0]
    elif len(middle) > 1:
        indicator = middle[0]
        if indicator == b"+":
            reply, queues = middle[1], tuple(middle[2:])
        elif indicator == b"|":
            queues = tuple(middle[1:])
        else:
            raise _BadArgs(f"{name} Bad or Missing Reply Indicator: '{raw!r}'")
    size = _size(args[-1])
    hdr = _size(args[-2]) if headers else -1
    if size < 0 or (headers and (hdr < 0 or hdr > size)):
        raise _BadArgs(f"{name} Bad or Missing Size: '{raw!r}'")
    return account, subject, reply, queues, hdr, size


# -- frames ------------------------------------------------------------------------------------


def rs_plus_frame(account: bytes, subject: bytes, queue: bytes = b"", weight: int = 0) -> bytes:
    """RS+; a queue subscription carries its weight (members on this server)."""
    prefix = b"RS+ " + account + b" " if account else b"RS+ "
    if queue:
        return prefix + b"%s %s %d\r\n" % (subject, queue, weight)
    return prefix + subject + b"\r\n"


def rs_minus_frame(account: bytes, subject: bytes, queue: bytes = b"") -> bytes:
    prefix = b"RS- " + account + b" " if account else b"RS- "
    if queue:
        return prefix + subject + b" " + queue + b"\r\n"
    return prefix + subject + b"\r\n"


def ls_plus_frame(
    origin: bytes, account: bytes, subject: bytes, queue: bytes = b"", weight: int = 0
) -> bytes:
    """LS+: interest of a leaf node of cluster `origin` that dialed this server (for a peer
    that announced `lnoc`)."""
    return b"LS+ " + origin + b" " + rs_plus_frame(account, subject, queue, weight)[4:]


def ls_minus_frame(origin: bytes, account: bytes, subject: bytes, queue: bytes = b"") -> bytes:
    """LS-: the origin cluster only for a peer that announced `lnocu`."""
    prefix = b"LS- " + origin + b" " if origin else b"LS- "
    return prefix + rs_minus_frame(account, subject, queue)[4:]


def lmsg_frame(origin: bytes, account: bytes, msg: Pub, queues: list[bytes]) -> bytes:
    """LMSG: a message of a leaf node of cluster `origin`; it always carries a header length
    (0 when there is none)."""
    payload = msg.payload
    head = rmsg_head(account, msg.subject, msg.reply, queues, len(payload), max(msg.header_size, 0))
    return b"LMSG " + origin + b" " + head[5:] + payload + b"\r\n"


def rmsg_head(
    account: bytes,
    subject: bytes,
    reply: bytes,
    queues: tuple[bytes, ...] | list[bytes],
    size: int,
    header_size: int = -1,
) -> bytes:
    """The RMSG control line (HMSG when `header_size` >= 0), CRLF included: with queues the
    reply follows a `+` (`+ reply q1 q2`) or a `|` stands for no reply (`| q1`)."""
    parts = [b"HMSG" if header_size >= 0 else b"RMSG", account, subject]
    if not account:  # a connection pinned to the account
        del parts[1]
    if queues:
        if reply:
            parts += [b"+", reply]
        else:
            parts.append(b"|")
        parts.extend(queues)
    elif reply:
        parts.append(reply)
    if header_size >= 0:
        parts.append(b"%d" % header_size)
    parts.append(b"%d" % size)
    return b" ".join(parts) + b"\r\n"


def rmsg_frame(
    account: bytes, msg: Pub, queues: tuple[bytes, ...] | list[bytes] = (), headers: bool = True
) -> bytes:
    """A message for a route; header blocks are stripped for a peer without headers."""
    payload = msg.payload
    hdr = msg.header_size
    if hdr >= 0 and not headers:
        payload = payload[hdr:]
        hdr = -1
    head = rmsg_head(account, msg.subject, msg.reply, queues, len(payload), hdr)
    return head + payload + b"\r\n"


# -- JetStream deliveries ------------------------------------------------------------------------

# A JetStream delivery (to a pull request's inbox, a push consumer's deliver subject) is routed
# on one subject and shown under another, the stream's. Across a route nats-server sends it on
# the routing subject and appends `@<shown subject>` to its reply, a `$JS.ACK.` subject; the
# receiving server matches the routing subject and shows its clients the subject after the `@`
# with the reply before it (client.go processMsgResults and jsAckDeliverIdx).
_JS_ACK = b"$JS.ACK."
# `$JS.ACK.<stream>.<consumer>.<delivered>.<sseq>.<cseq>.<tm>.<pending>`: eight dots.
_JS_ACK_DOTS = 8


def js_ack_deliver_index(reply: bytes) -> int:
    """Where the `@` of a `$JS.ACK....@<subject>` reply is, or -1. Stream and consumer names may
    hold an `@`: only the first one after the eight dots counts, as in nats-server."""
    if not reply.startswith(_JS_ACK):
        return -1
    at = reply.find(b"@", len(_JS_ACK))
    while at != -1:
        if reply.count(b".", 0, at) >= _JS_ACK_DOTS:
            return at
        at = reply.find(b"@", at + 1)
    return -1


def with_deliver_subject(reply: bytes, shown: bytes) -> bytes:
    """The reply a JetStream delivery shown under `shown` carries across a route: `@<shown>`
    appended, unless there is no reply or it has one already (nats-server appends it only
    then)."""
    if not reply or js_ack_deliver_index(reply) != -1:
        return reply
    return reply + b"@" + shown


def wire_delivery(msg: ShownPub) -> Pub:
    """A JetStream delivery as it crosses to another server (a route, a leaf, a gateway): on
    the subject it is routed on, the one it shows after its reply's `@`."""
    return Pub(
        msg.routing, with_deliver_subject(msg.reply, msg.subject), msg.payload, msg.header_size
    )


def shown_delivery(msg: Pub) -> Pub:
    """A message from another server shown as the JetStream delivery it is when its reply is a
    `$JS.ACK....@<subject>` (else `msg` itself): routed on its subject, showing `<subject>`."""
    reply = msg.reply
    at = js_ack_deliver_index(reply)
    if at <= 0 or at >= len(reply) - 1:
        return msg
    return ShownPub(reply[at + 1 :], reply[:at], msg.payload, msg.header_size, msg.subject)


def bare_info(**fields: Any) -> dict[str, Any]:
    """An INFO with only some fields set (`fields`, in order), as Go marshals its Info: the
    fields without omitempty are always there."""
    info: dict[str, Any] = {
        "server_id": "",
        "server_name": "",
        "version": "",
        "proto": 0,
        "go": "",
        "host": "",
        "port": 0,
        "headers": False,
        "max_payload": 0,
    }
    info.update(fields)
    return info
