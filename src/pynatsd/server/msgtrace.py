"""Message tracing: a message carrying `Nats-Trace-Dest` makes the server publish, to that subject,
what it did with the message (who sent it, subject mapping, each receiver, the stream that stored
it, or why not); with `Nats-Trace-Only: true` it only traces and delivers nothing.

Corresponds to nats-server's `server/msgtrace.go` (v2.11+): `initMsgTrace` is `begin`,
`MsgTraceEvent` and its events are `MsgTrace.event` (the same JSON, field for field, in Go's field
order), `addEgressEvent` is `MsgTrace.egress`, and `sendEvent` is `MsgTrace.send`. A W3C
`traceparent` header with the sampled flag starts a trace too, when the publisher's account has a
trace destination (`msg_trace` in its configuration); nats-server does nothing with it otherwise.

Nothing here runs for a message without a header block: the session looks for `Nats-Trace-Dest`
(`TRACE_DEST_NEEDLE`) only in an HPUB's header block, and asks `parent_requested` only when the
account has a trace destination; a message that is not traced is delivered exactly as before. A
single server has no routes, gateways or leaf nodes yet, so there are no hops: the event is the
whole trace.
"""

from __future__ import annotations

import gzip
import json
import random
import re
import time
from typing import TYPE_CHECKING, Any

from pynatsd.gofmt import format_go_time, go_json
from pynatsd.logger import log
from pynatsd.protocol.events import Pub
from pynatsd.s2 import SNAPPY_MAGIC_CHUNK, encode_chunks
from pynatsd.server.events import server_info
from pynatsd.server.reserved import is_reserved_subject
from pynatsd.subjects import is_valid_publish_subject

if TYPE_CHECKING:
    from collections.abc import Callable

    from pynatsd.server.accounts import Account
    from pynatsd.server.delivery import Receiver
    from pynatsd.server.session import ClientSession
    from pynatsd.server.subscription import Subscription

    # An internal subscription that takes part in tracing (a stream capturing a subject):
    # callback(subscription, publisher, message, trace).
    TracedCallback = Callable[[Subscription, Receiver | None, Pub, "MsgTrace"], None]

TRACE_DEST = "Nats-Trace-Dest"
TRACE_ONLY = "Nats-Trace-Only"
TRACE_HOP = "Nats-Trace-Hop"
TRACE_ORIGIN_ACCOUNT = "Nats-Trace-Origin-Account"
# The value a server writes into Nats-Trace-Dest to switch tracing off downstream (a stored
# message, a sampled-out traceparent): it is not a valid subject, so it can never be one.
TRACE_DEST_DISABLED = "trace disabled"
TRACE_PARENT = "traceparent"  # W3C trace context; matched in any case
ACCEPT_ENCODING = "Accept-Encoding"
CONTENT_ENCODING = "Content-Encoding"

# Event types (MsgTraceIngressType...).
INGRESS = "in"
SUBJECT_MAPPING = "sm"
STREAM_EXPORT = "se"
SERVICE_IMPORT = "si"
JETSTREAM = "js"
EGRESS = "eg"

# Connection kinds as nats-server numbers them (client.go: CLIENT, ROUTER, GATEWAY, SYSTEM,
# LEAF, JETSTREAM, ACCOUNT).
KIND_CLIENT = 0

# Why a receiver did not get the message (the egress event's `error`).
ERR_NO_ECHO = "Not delivered because of no echo"
ERR_SUB_DENY = "Not delivered because subscription denies this subject"
ERR_SUB_CLOSED = "Not delivered because subscription is closed"
ERR_CLIENT_CLOSED = "Not delivered because client is closed"
ERR_AUTO_UNSUB_EXCEEDED = "Not delivered because auto-unsubscribe exceeded"
ERR_MAX_PAYLOAD = "maximum payload exceeded"

_HEADER_LINE = b"NATS/1.0\r\n"
_DEST_KEY = TRACE_DEST.encode()
# Where a Nats-Trace-Dest key may start: after the header line or another header's CRLF.
TRACE_DEST_NEEDLE = b"\n" + _DEST_KEY + b":"
_PARENT_NEEDLE = re.compile(rb"\ntraceparent:", re.IGNORECASE)
_HEX = re.compile(rb"[+-]?[0-9a-fA-F]+")


def parent_requested(ev: Pub) -> bool:
    """Whether the header block of an HPUB may carry a `traceparent` (any case): a cheap scan
    that `begin` confirms, made only when the publisher's account has a trace destination."""
    # Fields by tuple index (ev[2] payload, ev[3] header size).
    return _PARENT_NEEDLE.search(ev[2], 0, ev[3]) is not None


def trace_headers(block: bytes) -> tuple[dict[str, list[str]], bool]:
    """The header block as {key: [values]} (keys as sent) when it asks for a trace, else {};
    and True when only a sampled `traceparent` asks (the account then decides where the trace
    goes). nats-server's genHeaderMapIfTraceHeadersPresent, byte for byte: keys end at the
    first colon, values are trimmed of spaces and tabs, empty keys or values are skipped."""
    if not block.startswith(_HEADER_LINE):
        return {}, False
    keys: list[bytes] = []
    values: list[bytes] = []
    dest_found = parent_found = False
    i = len(_HEADER_LINE)
    n = len(block)
    while i < n:
        colon = block.find(b":", i)
        if colon < 0:
            break
        key = block[i:colon]
        i = colon + 1
        while i < n and block[i] in b" \t":
            i += 1
        nl = block.find(b"\r\n", i)
        if nl < 0:
            break
        end = nl
        while end > i and block[end - 1] in b" \t":
            end -= 1
        value = block[i:end]
        if key and value:
            if not parent_found and key.lower() == b"traceparent":
                parent_found = _sampled(value)
            elif not dest_found and key == _DEST_KEY:
                if value == TRACE_DEST_DISABLED.encode():
                    return {}, False
                dest_found = True
            keys.append(key)
            values.append(value)
        i = nl + 2
    if not dest_found and not parent_found:
        return {}, False
    headers: dict[str, list[str]] = {}
    for key, value in zip(keys, values, strict=True):
        headers.setdefault(key.decode("utf-8", "replace"), []).append(
            value.decode("utf-8", "replace")
        )
    return headers, not dest_found


def _sampled(value: bytes) -> bool:
    """A `traceparent` (version-trace_id-parent_id-flags) whose flags have the sampled bit.
    The flags are read as Go's ParseInt(s, 16, 8) reads them: signed, at most 127."""
    tokens = value.split(b"-")
    if len(tokens) != 4 or len(tokens[3]) != 2 or not _HEX.fullmatch(tokens[3]):
        return False
    flags = int(tokens[3], 16)
    return -128 <= flags <= 127 and flags & 1 == 1


def set_header(block: bytes, key: str, value: str) -> bytes:
    """`block` with `key`'s value replaced where it is (nats-server's setHeader, which streams
    use), or the header added at the end."""
    start = _key_index(block, key.encode())
    if start >= 0:
        value_start = start + len(key) + 1
        if value_start < len(block) and block[value_start] == 0x20:
            value_start += 1
        value_end = block.find(b"\r", value_start)
        if value_end < 0:
            return block
        return block[:value_start] + value.encode() + block[value_end:]
    line = f"{key}: {value}\r\n".encode()
    if block.endswith(b"\r\n"):
        return block[:-2] + line + b"\r\n"
    return block + line


def _key_index(block: bytes, key: bytes) -> int:
    """Where `key` starts a header line and is followed by a colon (getHeaderKeyIndex)."""
    offset = 0
    while True:
        index = block.find(key, offset)
        if index < 2:
            return -1
        if index >= len(block) - 1 or block[index - 2 : index] != b"\r\n":
            offset = index + len(key)
            continue
        if index + len(key) >= len(block):
            return -1
        if block[index + len(key)] != 0x3A:
            offset = index + len(key)
            continue
        return index


def disable_trace(ev: Pub) -> Pub:
    """The message with its trace destination switched off, for what goes on untraced."""
    if ev.header_size <= 0:
        return ev
    return _replace_header_at_end(ev, TRACE_DEST, TRACE_DEST_DISABLED)


def redirect_trace(ev: Pub, dest: str) -> Pub:
    """The message with its trace destination changed (through a service import)."""
    return _replace_header_at_end(ev, TRACE_DEST, dest)


def _replace_header_at_end(ev: Pub, key: str, value: str) -> Pub:
    """The message with every `key` header removed and `key: value` appended (the client's
    setHeader in nats-server, used to switch tracing off for what is delivered)."""
    hs = ev.header_size
    payload = ev.payload
    block = payload[: hs - 2]  # without the blank line that ends it
    needle = key.encode()
    while True:
        start = _key_index(block, needle)
        if start < 1:
            break
        end = block.find(b"\r\n", start)
        if end < 0:
            break
        block = block[:start] + block[end + 2 :]
        if len(block) <= len(_HEADER_LINE) + 2:
            block = b""
            break
    if not block:
        block = _HEADER_LINE
    header = block + f"{key}: {value}\r\n\r\n".encode()
    return Pub(ev.subject, ev.reply, header + payload[hs:], len(header), ev.line)


# The current second as Go writes it, and its zone (`Z` or `+hh:mm`): an event stamps each
# step, and the date and zone change once a second at most.
_clock: dict[int, tuple[str, str]] = {}


def _now() -> str:
    """time.Now() as Go's JSON writes it: local time with its UTC offset (Z in UTC), the
    fraction of the second without trailing zeros."""
    secs, fraction = divmod(time.time_ns(), 1_000_000_000)
    second = _clock.get(secs)
    if second is None:
        text = format_go_time(secs * 1_000_000_000, time.localtime(secs).tm_gmtoff)
        _clock.clear()
        second = _clock[secs] = (text[:19], text[19:])
    if not fraction:
        return second[0] + second[1]
    return second[0] + f".{fraction:09d}".rstrip("0") + second[1]


def begin(session: ClientSession, ev: Pub) -> tuple[Pub | None, MsgTrace | None]:
    """Start tracing a client's HPUB, as initMsgTrace does: (message, trace). The message is
    None when nats-server drops it (a trace-only message whose trace cannot be made, a trace
    destination the client may not publish to); it may come back with its Nats-Trace-Dest
    switched off; the trace is None when the message goes untraced."""
    hs = ev.header_size
    headers, external = trace_headers(ev.payload[:hs])
    if not headers:
        return ev, None
    trace_only = False
    dest = ""
    if not external:
        only = headers.get(TRACE_ONLY)
        trace_only = only is not None and only[0].lower() in ("1", "true", "on")
        dest = headers[TRACE_DEST][0]
    origin = headers.get(TRACE_ORIGIN_ACCOUNT)
    if origin:
        log.error(
            '%s - Message tracing disabled because of header "%s" with value=%s',
            session.label,
            TRACE_ORIGIN_ACCOUNT,
            _go_quote(origin[0]),
        )
        if trace_only:
            return None, None
        return disable_trace(ev), None
    account = session.account
    if external:
        config = account.config
        if config is None or not config.trace_dest:
            return ev, None
        dest = config.trace_dest
        if not _sample(config.trace_sampling):
            return disable_trace(ev), None
    if not is_valid_publish_subject(dest):
        log.error(
            "%s - Destination %s is not valid, won't be able to trace events",
            session.label,
            _go_quote(dest),
        )
        return (None if trace_only else ev), None
    if not _may_publish_trace(session, dest):
        session.publish_violation(dest.encode())  # before the trace exists: no ingress error
        return None, None
    subject = ev.subject.decode("utf-8", "surrogateescape")
    trace = MsgTrace(session, account, dest, trace_only, subject, headers, len(ev.payload))
    encoding = headers.get(ACCEPT_ENCODING)
    trace.compression = _compression(encoding[0] if encoding else "")
    return ev, trace


def trace_refused_payload(session: ClientSession, ev: Pub) -> None:
    """An HPUB over the maximum payload, with as much of its header block as arrived: if that
    asks for a trace, the trace (ingress only, with the error) is sent before the connection
    is closed (sendMsgTraceIngressErrEvent)."""
    _, trace = begin(session, ev)
    if trace is None:
        return
    trace.ingress_error(ERR_MAX_PAYLOAD)
    trace.event["request"]["msgsize"] = int(ev.size_text)
    trace.send(session)


def _may_publish_trace(session: ClientSession, dest: str) -> bool:
    """allowedToPublishOnMsgTraceDest: not a reserved subject (server/reserved.py), and the
    client's publish allow/deny lists (no allow_responses)."""
    if is_reserved_subject(dest.encode(), session.account is session.server.system_account):
        return False
    perms = session.perms
    return not perms.publish_restricted or perms.allowed_by_rules(dest)


def _sample(sampling: int) -> bool:
    if sampling <= 0 or sampling >= 100:
        return True
    # rand.Int31n(100) <= sampling, as nats-server draws it.
    return random.randrange(100) <= sampling


def _compression(accept: str) -> str:
    """What Accept-Encoding asks for the event: "" (none), "gzip", "snappy", or "identity"
    for an encoding nats-server does not write."""
    if not accept:
        return ""
    lowered = accept.lower()
    if "snappy" in lowered or "s2" in lowered:
        return "snappy"
    if "gzip" in lowered:
        return "gzip"
    return "identity"


def _go_quote(text: str) -> str:
    """Go's %q of a header value or subject (printable text as JSON writes it)."""
    return json.dumps(text, ensure_ascii=False)


def trace_refusal(trace: MsgTrace, publisher: Receiver | None, sub: Subscription) -> None:
    """`deliver` refused a closed subscription or client, or the publisher's own message
    under no-echo: say which (nats-server checks them in this order)."""
    receiver = sub.client
    if receiver.outbound is None:
        return  # the server's own subscriptions have no egress
    if receiver is publisher and not receiver.echo:
        trace.egress(receiver, sub, ERR_NO_ECHO)
    elif sub.closed:
        trace.egress(receiver, sub, ERR_SUB_CLOSED)
    else:
        trace.egress(receiver, sub, ERR_CLIENT_CLOSED)


def traced_delivery(
    trace: MsgTrace, publisher: Receiver | None, sub: Subscription, msg: Pub
) -> bool:
    """The end of `deliver` for a traced message, once every check passed: a client's egress
    is recorded (and, trace only, nothing is sent); a subscription of the server's own that
    takes part in tracing (a stream) is handed the trace; any other internal one gets the
    message untraced, or nothing when only tracing."""
    receiver = sub.client
    if receiver.outbound is not None:
        trace.egress(receiver, sub)
        if trace.only:
            return True
        receiver.deliver(sub, msg, publisher)
        return True
    traced: TracedCallback | None = getattr(sub, "traced", None)
    if traced is not None and trace.followed:
        if not trace.only:
            receiver.stats.sent(1, len(msg.payload))
        traced(sub, publisher, msg, trace)
        return True
    if trace.only:
        return False
    receiver.deliver(sub, msg, publisher)
    return True


class MsgTrace:
    """The trace of one message: the event being built and where it goes (msgTrace)."""

    __slots__ = (
        "account",
        "compression",
        "dest",
        "event",
        "events",
        "export",
        "ingress",
        "js",
        "only",
    )

    def __init__(
        self,
        session: ClientSession,
        account: Account,
        dest: str,
        only: bool,
        subject: str,
        headers: dict[str, list[str]],
        size: int,
    ) -> None:
        self.account = account
        self.dest = dest
        self.only = only  # trace only: nothing is delivered or stored
        self.compression = ""
        ingress: dict[str, Any] = {
            "type": INGRESS,
            "ts": _now(),
            "kind": KIND_CLIENT,
            "cid": session.cid,
        }
        if session.name:
            ingress["name"] = session.name
        ingress["acc"] = account.name
        ingress["subj"] = subject
        self.ingress = ingress
        self.events: list[dict[str, Any]] = [ingress]
        request: dict[str, Any] = {"header": {k: headers[k] for k in sorted(headers)}}
        if size:
            request["msgsize"] = size
        self.event: dict[str, Any] = {"server": None, "request": request, "events": self.events}
        self.js: dict[str, Any] | None = None
        # While a stream import carries the message into another account: that account, the
        # subject there, whether the import lets the trace follow (allow_trace), and how a
        # subscription there is named on the exporter's side (nats-server reports the
        # "shadow" subscription it made in the exporting account).
        self.export: tuple[str, str, bool, Callable[[str], str]] | None = None

    @property
    def followed(self) -> bool:
        """False while the message crosses a stream import that does not allow tracing."""
        return self.export is None or self.export[2]

    def through_import(
        self, account: str, to: str, allowed: bool, shadow: Callable[[str], str]
    ) -> None:
        """A stream import carries the message into `account` as `to` (until `imported`)."""
        self.export = (account, to, allowed, shadow)

    def imported(self) -> None:
        self.export = None

    # -- what happened to the message, in order --------------------------------------------------

    def ingress_error(self, text: str) -> None:
        """The publish was refused (permissions, a reserved reply)."""
        self.ingress["error"] = text

    def subject_mapped(self, to: str) -> None:
        """A subject mapping applied to the published subject and chose `to`."""
        self.events.append({"type": SUBJECT_MAPPING, "ts": _now(), "to": to})

    def egress(self, receiver: Receiver, sub: Subscription, error: str = "") -> None:
        """One client subscription the message went to (or did not, and why). Through a stream
        import, nats-server reports the import first, and the client only if the import
        allows tracing."""
        subject = sub.subject
        if self.export is not None:
            account, to, allowed, shadow = self.export
            self.stream_export(account, to)
            if not allowed:
                return
            subject = shadow(subject)
        event: dict[str, Any] = {"type": EGRESS, "ts": _now(), "kind": KIND_CLIENT}
        event["cid"] = receiver.cid
        name = getattr(receiver, "name", "")
        if name:
            event["name"] = name
        acc = receiver.account.name
        if acc != self.ingress["acc"]:
            event["acc"] = acc
        event["sub"] = subject
        if sub.queue:
            event["queue"] = sub.queue
        if error:
            event["error"] = error
        self.events.append(event)

    def stream_export(self, account: str, to: str) -> None:
        self.events.append({"type": STREAM_EXPORT, "ts": _now(), "acc": account, "to": to})

    def service_import(self, account: str, source: str, to: str) -> None:
        self.events.append(
            {"type": SERVICE_IMPORT, "ts": _now(), "acc": account, "from": source, "to": to}
        )

    def jetstream(self, stream: str) -> None:
        """A stream captured the message; `jetstream_done` completes the event."""
        self.js = {"type": JETSTREAM, "ts": _now(), "stream": stream}
        self.events.append(self.js)

    def jetstream_reached(self, subject: str, no_interest: bool) -> None:
        """The stream passed its checks and would store the message under `subject` (with
        interest retention and no consumer interested: it would not keep it)."""
        js = self.js
        if js is None:
            return
        js["ts"] = _now()
        if subject:
            js["subject"] = subject
        if no_interest:
            js["nointerest"] = True

    def jetstream_failed(self, text: str) -> None:
        if self.js is not None and text:
            self.js["error"] = text

    # -- the end ---------------------------------------------------------------------------------

    def send(self, session: ClientSession) -> None:
        """Publish the event to the trace destination, in the publisher's account. Without a
        system account nats-server sends no event (its internal send loop is not running),
        though a trace-only message is still not delivered."""
        server = session.server
        if server.options.no_system_account:
            return
        self.event["server"] = server_info(server)
        body = go_json(self.event)
        header = b""
        if self.compression == "gzip":
            body = gzip.compress(body, mtime=0)
            header = b"NATS/1.0\r\nContent-Encoding: gzip\r\n\r\n"
        elif self.compression == "snappy":
            body = snappy_frames(body)
            header = b"NATS/1.0\r\nContent-Encoding: snappy\r\n\r\n"
        elif self.compression:
            header = b"NATS/1.0\r\nContent-Encoding: identity\r\n\r\n"
        server.publish_internal(self.account, self.dest, "", header, body)


# -- Snappy framing, for `Accept-Encoding: snappy` ------------------------------------------------
# nats-server writes S2 in Snappy's framing format. The format lets a writer store chunks
# uncompressed; pynatsd does, so any Snappy reader decodes the event (only the bytes differ).


def snappy_frames(data: bytes) -> bytes:
    """`data` in Snappy's framing format, as uncompressed chunks with masked CRC-32C."""
    return encode_chunks(data, SNAPPY_MAGIC_CHUNK, 65536)
