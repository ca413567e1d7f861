"""Sans-IO parser for the client side of the NATS protocol: `feed(bytes) -> list[event]`.

It follows nats-server's `server/parser.go` byte for byte in what it accepts and rejects, but works
a line at a time with `bytes.find` instead of a per-byte state machine, which is what makes it fast
in Python.

Complexity promise: work is O(bytes received). A control line split over many reads is kept as a
partial line bounded by `max_control_line` (longer partial lines are an error), and a payload split
over many reads is collected as a list of chunks joined once when complete, so a payload sent one
byte at a time never costs quadratic time.
"""

from __future__ import annotations

import json
import re
from typing import Any, TypeAlias

from pynatsd.protocol import errors
from pynatsd.protocol.errors import CloseReason
from pynatsd.protocol.events import (
    OK,
    PING,
    PONG,
    Connect,
    Err,
    Event,
    Info,
    ProtocolError,
    Pub,
    Sub,
    Unsub,
    make_pub,
)
from pynatsd.protocol.runs import PubRun, SubRun

# What a feed gives: events, with the fast paths' PUBs and runs of PUBs and SUBs.
Parsed: TypeAlias = Event | Pub | PubRun | SubRun

_SPACE_TAB = b" \t"
# The subjects of JetStream's acks (`$JS.ACK.<stream>.<consumer>.<sequences...>`).
_ACK_PREFIX = b"$JS.ACK."
# Distinct PUB lines remembered per connection; cleared wholesale when full.
_PUB_MEMO_SIZE = 256
# Sizes longer than 9 digits are refused, as nats-server's parseSize does.
_MAX_SIZE_DIGITS = 9

# Op names and what may follow them: "arg" ops need a space or tab, "any" ops take anything up
# to the end of the line, "json" ops skip spaces and start their argument at any other byte.
_OPS: tuple[tuple[bytes, str], ...] = (
    (b"PUB", "arg"),
    (b"HPUB", "arg"),
    (b"SUB", "arg"),
    (b"UNSUB", "arg"),
    (b"PING", "any"),
    (b"PONG", "any"),
    (b"CONNECT", "json"),
    (b"INFO", "json"),
    (b"+OK", "any"),
    (b"-ERR", "arg"),
)


_PUB_SEPARATORS = re.compile(rb"[ \t]+")
_SUB_SEPARATORS = re.compile(rb"[ \t\r\n]+")


def split_pub_args(arg: bytes) -> list[bytes]:
    """PUB/HPUB arguments: nats-server splits them on spaces and tabs only."""
    # `arg.find(b"\t")`, not `b"\t" in arg`: bytes' `in` tries the needle as an integer first
    # and raises and clears a TypeError each time (2,200 instructions, callgrind).
    if arg.find(b"\t") < 0:
        args = arg.split(b" ")  # the usual line: single spaces, no tab
        for a in args:
            if not a:  # two spaces in a row, or one at either end
                break
        else:
            return args
    return [a for a in _PUB_SEPARATORS.split(arg) if a]


def split_sub_args(arg: bytes) -> list[bytes]:
    """SUB/UNSUB arguments: spaces, tabs, CR and LF separate them (nats-server's splitArg)."""
    return [a for a in _SUB_SEPARATORS.split(arg) if a]


def _plain_split(arg: bytes, args: list[bytes]) -> bool:
    """True when `args` (arg.split()) are 2 or 3 tokens that `arg` holds separated by single
    spaces or tabs: what bytes.split() and nats-server's splitArg then agree on."""
    nargs = len(args)
    if nargs == 2:
        cut = len(args[0])
        if cut + 1 + len(args[1]) != len(arg):
            return False
    elif nargs == 3:
        cut = len(args[0])
        second = cut + 1 + len(args[1])
        if second + 1 + len(args[2]) != len(arg):
            return False
        sep = arg[second]
        if sep != 0x20 and sep != 0x09:
            return False
    else:
        return False
    sep = arg[cut]
    return sep == 0x20 or sep == 0x09


def _reject_constant(name: str) -> Any:
    raise ValueError(f"invalid JSON constant {name}")


def decode_json(arg: bytes) -> Any:
    """JSON as Go's decoder reads it: invalid UTF-8 becomes U+FFFD, NaN/Infinity are errors."""
    return json.loads(arg.decode("utf-8", "replace"), parse_constant=_reject_constant)


def parse_size(data: bytes) -> int:
    """A payload size or max-msgs count; -1 when it is not 1 to 9 ASCII digits."""
    if not data or len(data) > _MAX_SIZE_DIGITS or not data.isdigit():
        return -1
    return int(data)


def _classify(head: bytes) -> tuple[bytes, str] | bool | None:
    """Match the start of a line (upper-cased) against the op names.

    Returns the (op, kind) when `head` holds a complete op name with a valid next byte, True when
    `head` could still become one (a partial line), and None when it can never be one.
    """
    partial = False
    for name, kind in _OPS:
        if head.startswith(name):
            if len(head) == len(name):
                # The byte after the name has not arrived (partial line) or is the line end.
                return (name, kind) if kind != "arg" else True
            if kind == "arg" and head[len(name)] not in _SPACE_TAB:
                continue
            return name, kind
        if name.startswith(head):
            partial = True
    return True if partial else None


class Parser:
    """Turns the bytes a client sends into events.

    `max_payload` and `max_control_line` may be changed between feeds (config reload).
    `headers` says whether HPUB is allowed before any CONNECT (a server's client passes False).
    `expect_connect` makes any first op other than CONNECT an authorization violation (set when
    the server requires authentication); it is cleared by the parser once it yields a CONNECT.
    `runs` makes the plain upper-case PUBs come out as `PubRun`s, the messages that repeat the
    line before them in the same run (a server's client reads its publishers' streams so),
    not as a `Pub` each, and consecutive SUBs of the fast path as one `SubRun`.
    After a `ProtocolError` event the parser is dead and every further feed returns nothing.
    """

    __slots__ = (
        "_dead",
        "_headers_supported",
        "_max_control_line",
        "_max_payload",
        "_partial",
        "_payload",
        "_pending_pub",
        "_pub_memo",
        "_repeat",
        "_repeat_memo",
        "_runs",
        "_skip_line",
        "expect_connect",
        "headers",
    )

    def __init__(
        self,
        max_payload: int = 1024 * 1024,
        max_control_line: int = 4096,
        expect_connect: bool = False,
        headers: bool = True,
        headers_supported: bool = True,
        runs: bool = False,
    ) -> None:
        self._runs = runs
        self._max_payload = max_payload
        self._max_control_line = max_control_line
        self.expect_connect = expect_connect
        self._headers_supported = headers_supported
        # Whether HPUB is allowed: a CONNECT sets it to what the client asked for (if the
        # server has headers); an HPUB otherwise ends the connection at its line, as in
        # nats-server. A server's client starts with False (nothing negotiated yet).
        self.headers = headers
        self._partial = b""  # an incomplete control line
        self._skip_line: Event | None = None  # PING/PONG/+OK whose line end has not arrived
        # A PUB waiting for its payload: subject, reply, size, header size, line, size texts.
        self._pending_pub: tuple[bytes, bytes, int, int, bytes, bytes, bytes] | None = None
        # A payload split over reads, collected in one buffer (a list of the reads' bytes
        # objects would cost their per-object overhead on every tiny read).
        self._payload = bytearray()
        self._dead = False
        self._pub_memo: dict[bytes, tuple[bytes, bytes, int, bytes, bytes]] = {}
        self._repeat = b""
        self._repeat_memo: tuple[bytes, bytes, int, bytes, bytes] = (b"", b"", 0, b"", b"")

    @property
    def max_payload(self) -> int:
        return self._max_payload

    @max_payload.setter
    def max_payload(self, value: int) -> None:
        # The repeated PUB line skips the size check: it was made under the old limit.
        self._max_payload = value
        self._repeat = b""

    @property
    def max_control_line(self) -> int:
        return self._max_control_line

    @max_control_line.setter
    def max_control_line(self, value: int) -> None:
        # Memoised PUB lines were checked against the old limit.
        self._max_control_line = value
        self._pub_memo.clear()
        self._repeat = b""

    @property
    def dead(self) -> bool:
        return self._dead

    def feed(self, data: bytes) -> list[Parsed]:
        events: list[Parsed] = []
        if self._dead or not data:
            return events
        if self._pending_pub is not None:
            pos = self._continue_payload(data, events)
            if 0 <= pos < len(data):
                self._parse(data, pos, events)
            return events
        if self._skip_line is not None:
            nl = data.find(b"\n")
            if nl < 0:
                return events
            events.append(self._skip_line)
            self._skip_line = None
            data = data[nl + 1 :]
        elif self._partial:
            data = self._partial + data
            self._partial = b""
        self._parse(data, 0, events)
        return events

    # -- payloads split over reads -------------------------------------------------------------

    def _continue_payload(self, data: bytes, events: list[Parsed]) -> int:
        """Collect payload bytes: the position in `data` after the payload's CRLF once it is
        complete, else -1. Only the payload's own bytes are copied, never the rest of the
        read (a large read that completes a split payload would otherwise be copied whole)."""
        assert self._pending_pub is not None
        subject, reply, size, header_size, line, size_text, header_text = self._pending_pub
        pending = self._payload
        before = len(pending)
        need = size + 2
        take = need - before
        pending += data[:take]
        if len(pending) < need:
            if before <= size < len(pending) and pending[size] != 0x0D:
                # The byte after the payload has arrived: it must be the CR.
                self._fail(events, errors.UNKNOWN_PROTOCOL_OPERATION, "payload not CRLF")
            return -1
        self._payload = bytearray()
        self._pending_pub = None
        if pending[size:need] != b"\r\n":
            self._fail(events, errors.UNKNOWN_PROTOCOL_OPERATION, "payload not followed by CRLF")
            return -1
        payload = bytes(pending[:size])
        events.append(Pub(subject, reply, payload, header_size, line, size_text, header_text))
        return take

    # -- the main loop ---------------------------------------------------------------------------

    def _fail(
        self,
        events: list[Parsed],
        reply: str | None,
        detail: str,
        reason: str = "",
        pub: Pub | None = None,
    ) -> None:
        # nats-server closes a connection it cannot parse as a "Protocol Violation".
        events.append(ProtocolError(reply, reason or CloseReason.PROTOCOL_VIOLATION, detail, pub))
        self._dead = True

    def _fail_max_payload(self, events: list[Parsed], pub: Pub | None = None) -> None:
        self._fail(
            events,
            errors.MAXIMUM_PAYLOAD_VIOLATION,
            "max payload",
            CloseReason.MAX_PAYLOAD_EXCEEDED,
            pub,
        )

    def _fail_control_line(self, events: list[Parsed]) -> None:
        self._fail(
            events,
            errors.MAXIMUM_CONTROL_LINE_EXCEEDED,
            "control line",
            CloseReason.MAX_CONTROL_LINE_EXCEEDED,
        )

    def _parse(self, buf: bytes, pos: int, events: list[Parsed]) -> None:
        n = len(buf)
        append = events.append
        # The last PUB control line, whole (`PUB foo 16\r\n`), with what it means: a publisher
        # repeating one line costs a compare per message instead of find/slice/lookup.
        rep = self._repeat
        rep_len = len(rep)
        rep_memo = self._repeat_memo
        runs = self._runs
        # The run being read, if any: it goes on while it is the last event and the line is
        # its line.
        run: PubRun | None = None
        sub_run: SubRun | None = None  # the same for SUBs
        while pos < n:
            # Compared as slices: compiled, `buf.startswith(x, pos)` is a method call by name
            # with a boxed position (a thousand instructions); a slice and a compare are not.
            if rep_len and buf[pos : pos + rep_len] == rep:
                start = pos + rep_len
                end = start + rep_memo[2]
                if end + 2 <= n and buf[end] == 0x0D and buf[end + 1] == 0x0A:
                    if runs:
                        if run is None or run.line is not rep_memo[4] or events[-1] is not run:
                            run = PubRun(rep_memo)
                            append(run)
                        run.tails.append(buf[start : end + 2])
                    else:
                        subject, reply, _, size_text, line = rep_memo
                        append(make_pub((subject, reply, buf[start:end], -1, line, size_text, b"")))
                    pos = end + 2
                    continue
            if self.expect_connect and buf[pos] not in b"Cc":
                self._fail(
                    events,
                    errors.AUTHORIZATION_VIOLATION,
                    "expected CONNECT",
                    CloseReason.AUTHENTICATION_VIOLATION,
                )
                return
            nl = buf.find(b"\n", pos)
            if nl < 0:
                self._keep_partial(buf[pos:], events)
                return
            # Fast path: an upper-case PUB, by far the most common line. Its argument is looked
            # up in a small memo first: a publisher usually repeats the same few lines.
            if buf[pos : pos + 4] == b"PUB ":
                arg = buf[pos + 4 : nl]
                memo = self._pub_memo.get(arg)
                seen = memo is not None
                if memo is None:
                    if arg[:8] == _ACK_PREFIX:
                        # A JetStream ack: its subject carries the message's sequences, so
                        # the line never comes again. No memo entry (it would only push out
                        # the lines that repeat), no run: a `Pub` without a line, which no
                        # delivery plan is looked up or made for.
                        if arg.find(b"\r") >= 0:
                            arg = arg[:-1]
                        if len(arg) > self._max_control_line:
                            self._fail_control_line(events)
                            return
                        pos = self._parse_pub(buf, nl, arg, False, events)
                        if pos < 0:
                            return
                        continue
                    if not arg.strip(_SPACE_TAB):
                        # Only blanks before a bare LF: the argument starts at the LF.
                        pos = self._parse_line(buf, pos, nl, events)
                        if pos < 0:
                            return
                        continue
                    memo = self._parse_pub_line(arg, events)
                    if memo is None:
                        return
                subject, reply, size, size_text, line = memo
                if size > self._max_payload:
                    self._fail_max_payload(events)
                    return
                start = nl + 1
                end = start + size
                if end + 2 <= n:
                    if buf[end] != 0x0D or buf[end + 1] != 0x0A:
                        self._fail(events, errors.UNKNOWN_PROTOCOL_OPERATION, "payload not CRLF")
                        return
                    if runs:
                        if run is None or run.line is not line or events[-1] is not run:
                            run = PubRun(memo)
                            append(run)
                        run.tails.append(buf[start : end + 2])
                    else:
                        append(make_pub((subject, reply, buf[start:end], -1, line, size_text, b"")))
                    if seen:  # a line seen before may well come again next
                        rep = self._repeat = buf[pos:start]
                        rep_len = len(rep)
                        rep_memo = self._repeat_memo = memo
                    pos = end + 2
                    continue
                pending = (subject, reply, size, -1, line, size_text, b"")
                self._wait_payload(buf, start, pending, events)
                return
            if buf[pos : pos + 5] == b"HPUB ":
                # Third fast path: JetStream publishers send HPUB (Nats-Msg-Id) with a new
                # reply subject each time, so there is nothing to memoise.
                arg = buf[pos + 5 : nl].lstrip(_SPACE_TAB)
                if not arg:  # the argument starts at a bare LF: the general path reads it
                    pos = self._parse_line(buf, pos, nl, events)
                    if pos < 0:
                        return
                    continue
                if arg[-1] == 0x0D or arg.find(b"\r") >= 0:  # not `in`: see SUB below
                    arg = arg[:-1]
                if len(arg) > self._max_control_line:
                    self._fail_control_line(events)
                    return
                pos = self._parse_pub(buf, nl, arg, True, events)
                if pos < 0:
                    return
                continue
            if buf[pos : pos + 4] == b"SUB ":
                # Second fast path: clients subscribe in bursts (100k SUBs on start-up). No
                # `in` on bytes here: `b"\r" in arg` first tries the needle as an integer and
                # builds a TypeError to discard (2,000 instructions a test, callgrind).
                if buf[nl - 1] == 0x0D:  # CRLF: nats-server drops the CR
                    arg = buf[pos + 4 : nl - 1]
                else:
                    arg = buf[pos + 4 : nl]
                    if arg.find(b"\r") >= 0:  # a CR anywhere: the last byte goes
                        arg = arg[:-1]
                args = arg.split()
                nargs = len(args)
                # bytes.split() also splits on \v and \f, which Go keeps in tokens: unless
                # the arguments are split by single spaces or tabs, look for them.
                if not _plain_split(arg, args) and (
                    arg.find(b"\x0b") >= 0 or arg.find(b"\x0c") >= 0
                ):
                    args = split_sub_args(arg)
                    nargs = len(args)
                if (nargs == 2 or nargs == 3) and len(arg) <= self._max_control_line:
                    if runs:
                        if sub_run is None or events[-1] is not sub_run:
                            sub_run = SubRun()
                            append(sub_run)
                        sub_run.args.append(args)
                    elif nargs == 2:
                        append(Sub(args[0], b"", args[1]))
                    else:
                        append(Sub(args[0], args[1], args[2]))
                    pos = nl + 1
                    continue
            pos = self._parse_line(buf, pos, nl, events)
            if pos < 0:
                return

    def _parse_pub_line(
        self, line: bytes, events: list[Parsed]
    ) -> tuple[bytes, bytes, int, bytes, bytes] | None:
        """Subject, reply and size of a PUB argument (memoised), or None after an error."""
        # nats-server drops the last byte of the argument when a CR appeared anywhere in it.
        arg = line[:-1] if line.find(b"\r") >= 0 else line
        if (
            len(arg) > self._max_control_line
            and len(arg.lstrip(_SPACE_TAB)) > self._max_control_line
        ):
            self._fail_control_line(events)
            return None
        parsed = self._split_pub(arg, events)
        if parsed is None:
            return None
        memo = self._pub_memo
        if len(memo) >= _PUB_MEMO_SIZE:
            memo.clear()
        entry = (*parsed, line)
        memo[line] = entry
        return entry

    def _split_pub(
        self, arg: bytes, events: list[Parsed]
    ) -> tuple[bytes, bytes, int, bytes] | None:
        """Subject, reply, size and the size as written, of a PUB argument; None after an
        error (nats-server's processPub)."""
        args = split_pub_args(arg)
        nargs = len(args)
        if nargs == 2:
            subject, reply = args[0], b""
        elif nargs == 3:
            subject, reply = args[0], args[1]
        else:
            self._fail(events, None, f"processPub Parse Error: {arg!r}")
            return None
        size = parse_size(args[-1])
        if size < 0:
            self._fail(events, None, f"processPub Bad or Missing Size: {arg!r}")
            return None
        return subject, reply, size, args[-1]

    def _wait_payload(
        self,
        buf: bytes,
        start: int,
        pub: tuple[bytes, bytes, int, int, bytes, bytes, bytes],
        events: list[Parsed],
    ) -> None:
        rest = buf[start:]
        size = pub[2]
        if len(rest) > size and rest[size] != 0x0D:
            self._fail(events, errors.UNKNOWN_PROTOCOL_OPERATION, "payload not CRLF")
            return
        self._pending_pub = pub
        self._payload = bytearray(rest)

    def _keep_partial(self, partial: bytes, events: list[Parsed]) -> None:
        """An incomplete line: reject it early when nats-server would, else keep it."""
        head = partial[:8].upper()
        found = _classify(head)
        if found is None:
            self._fail(events, errors.UNKNOWN_PROTOCOL_OPERATION, f"unknown op {partial[:16]!r}")
            return
        if found is True:
            self._partial = partial
            return
        assert isinstance(found, tuple)
        name, kind = found
        if kind == "any":
            # PING/PONG/+OK ignore everything up to the line end: keep nothing.
            self._skip_line = {b"PING": PING, b"PONG": PONG}.get(name, OK)
            return
        arg = partial[len(name) :].lstrip(_SPACE_TAB)
        if not arg:
            # nats-server skips the spaces after an op without buffering them.
            self._partial = partial[: len(name) + 1]
            return
        arg = arg.replace(b"\r", b"")
        if len(arg) > self.max_control_line:
            self._fail_control_line(events)
            return
        self._partial = partial

    def _parse_line(self, buf: bytes, pos: int, nl: int, events: list[Parsed]) -> int:
        """Handle one complete line other than the fast-path PUB. Returns the next position, or
        -1 when parsing must stop (error, or waiting for a payload)."""
        found = _classify(buf[pos : min(pos + 8, nl)].upper())
        if not isinstance(found, tuple):
            self._fail(events, errors.UNKNOWN_PROTOCOL_OPERATION, f"unknown op {buf[pos:nl]!r}")
            return -1
        name, kind = found
        if kind == "any":
            events.append({b"PING": PING, b"PONG": PONG}.get(name, OK))
            return nl + 1
        arg = buf[pos + len(name) : nl].lstrip(_SPACE_TAB)
        if not arg:
            # nats-server starts an argument at the first byte after the blanks that follow
            # the op, even a bare LF: `CONNECT\n{...}\r\n` carries "\n{...}" and `PUB \nfoo 1`
            # the subject "\nfoo", each read to the next LF.
            end = buf.find(b"\n", nl + 1)
            if end < 0:
                self._keep_partial(buf[pos:], events)
                return -1
            arg = buf[nl:end]
            nl = end
        if b"\r" in arg:
            arg = arg[:-1]
        if len(arg) > self.max_control_line:
            self._fail_control_line(events)
            return -1
        if name == b"PUB" or name == b"HPUB":
            return self._parse_pub(buf, nl, arg, name == b"HPUB", events)
        if name == b"SUB":
            args = split_sub_args(arg)
            if len(args) == 2:
                events.append(Sub(args[0], b"", args[1]))
            elif len(args) == 3:
                events.append(Sub(args[0], args[1], args[2]))
            else:
                self._fail(events, None, f"processSub Parse Error: {arg!r}")
                return -1
        elif name == b"UNSUB":
            args = split_sub_args(arg)
            if len(args) == 1:
                events.append(Unsub(args[0], -1))
            elif len(args) == 2:
                events.append(Unsub(args[0], parse_size(args[1])))
            else:
                self._fail(events, None, f"processUnsub Parse Error: {arg!r}")
                return -1
        elif name == b"CONNECT":
            try:
                options: Any = decode_json(arg)
            except ValueError:
                options = None
            else:
                # Go decodes JSON null into the options struct as "change nothing".
                if options is None:
                    options = {}
            if not isinstance(options, dict):
                self._fail(events, None, "invalid CONNECT JSON")
                return -1
            self.expect_connect = False
            self.headers = self._headers_supported and bool(options.get("headers"))
            events.append(Connect(options, arg))
        elif name == b"INFO":
            try:
                info = decode_json(arg)
            except ValueError:
                info = False
            if info is not None and not isinstance(info, dict):
                self._fail(events, None, "invalid INFO JSON")
                return -1
            events.append(Info(arg))
        else:  # -ERR from the client
            events.append(Err(arg))
        return nl + 1

    def _parse_pub(
        self,
        buf: bytes,
        nl: int,
        arg: bytes,
        has_headers: bool,
        events: list[Parsed],
    ) -> int:
        header_size = -1
        header_text = b""
        if has_headers:
            if not self.headers:
                self._fail(events, None, "message headers not supported")
                return -1
            args = split_pub_args(arg)
            nargs = len(args)
            if nargs == 3:
                subject, reply = args[0], b""
            elif nargs == 4:
                subject, reply = args[0], args[1]
            else:
                self._fail(events, None, f"processHeaderPub Parse Error: {arg!r}")
                return -1
            header_text = args[-2]
            size_text = args[-1]
            if (
                header_text.isdigit()
                and size_text.isdigit()
                and len(header_text) <= _MAX_SIZE_DIGITS
                and len(size_text) <= _MAX_SIZE_DIGITS
            ):  # parse_size of both, inline
                header_size = int(header_text)
                size = int(size_text)
            else:
                header_size = parse_size(header_text)
                size = parse_size(size_text)
            if header_size < 0 or size < 0 or header_size > size:
                self._fail(events, None, f"processHeaderPub Bad Sizes: {arg!r}")
                return -1
        else:
            parsed = self._split_pub(arg, events)
            if parsed is None:
                return -1
            subject, reply, size, size_text = parsed
        if size > self._max_payload:
            pub = None
            if header_size > 0 and nl + 1 < len(buf):
                # What of the header block came in this read (message tracing).
                block = buf[nl + 1 : nl + 1 + header_size]
                pub = Pub(subject, reply, block, header_size, b"", size_text, header_text)
            self._fail_max_payload(events, pub)
            return -1
        start = nl + 1
        end = start + size
        if end + 2 <= len(buf):
            if buf[end] != 0x0D or buf[end + 1] != 0x0A:
                self._fail(events, errors.UNKNOWN_PROTOCOL_OPERATION, "payload not CRLF")
                return -1
            events.append(
                make_pub((subject, reply, buf[start:end], header_size, b"", size_text, header_text))
            )
            return end + 2
        pending = (subject, reply, size, header_size, b"", size_text, header_text)
        self._wait_payload(buf, start, pending, events)
        return -1
