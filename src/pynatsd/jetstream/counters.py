"""Counter streams (`allow_msg_counter`, ADR-49): a publish with `Nats-Incr` adds to the
subject's counter, and the stored message is the new total.

nats-server's counterpart is the counter part of `processJetStreamMsg` in `server/stream.go`
(`getMessageIncr`, `CounterValue`, `CounterSources`): the header checks come first with the
other publish expectations (`check_increment`), the arithmetic after the duplicate and rollup
checks (`apply_increment`). The stored body is `{"val":"<total>"}`, the stored `Nats-Incr` is
the increment that made it. A message sourced into a counter stream carries its origin's total;
the target keeps, per origin stream and subject, the last total it saw in
`Nats-Counter-Sources` (`{"<stream>":{"<subject>":"<total>"}}`) and adds the difference, so
several counters sum into one aggregate.
"""

from __future__ import annotations

import json
import re
from typing import TYPE_CHECKING, Any

from pynatsd.jetstream.errors import js_error
from pynatsd.protocol.headers import header_value
from pynatsd.server.msgtrace import set_header

if TYPE_CHECKING:
    from pynatsd.jetstream.stream import Stream

INCR = "Nats-Incr"
COUNTER_SOURCES = "Nats-Counter-Sources"
# What Go's big.Int SetString(s, 10) accepts.
_BIG_INT = re.compile(r"[+-]?[0-9]+\Z")
# The headers an increment may not carry (their checks make no sense for a counter).
_INCOMPATIBLE = (
    "Nats-Rollup",
    "Nats-Expected-Stream",
    "Nats-Expected-Last-Msg-Id",
    "Nats-Expected-Last-Subject-Sequence-Subject",
    "Nats-Expected-Last-Sequence",
    "Nats-Expected-Last-Subject-Sequence",
)


def parse_increment(header: bytes) -> int | None:
    """The `Nats-Incr` value, None without one (or with an empty one); raises "message counter
    increment is invalid" for anything Go's big.Int refuses."""
    text = header_value(header, INCR)
    if not text:
        return None
    if not _BIG_INT.match(text):
        raise js_error("MessageIncrInvalid")
    return int(text)


def check_increment(stream: Stream, header: bytes, data: bytes) -> None:
    """A client's increment, before the other publish expectations (Go's order): parsable,
    on a counter stream, without a payload, without headers it cannot honour."""
    if parse_increment(header) is None:
        return
    if not stream.config.allow_msg_counter:
        raise js_error("MessageIncrDisabled")
    if data:
        raise js_error("MessageIncrPayload")
    if any(header_value(header, key) for key in _INCOMPATIBLE):
        raise js_error("MessageIncrInvalid")


def apply_increment(
    stream: Stream, subject: str, header: bytes, data: bytes
) -> tuple[bytes, bytes, str]:
    """The header and body to store on a counter stream, and the new total (for the PubAck's
    `val`). A message without an increment is refused: a counter stream holds counters only."""
    incr = parse_increment(header) if header else None
    if incr is None:
        raise js_error("MessageIncrMissing")
    total = 0
    sources: dict[str, dict[str, str]] = {}
    last = stream.store.load_last_msg(subject)
    if last is not None:
        total = _big_int(_counter_value(last.data))
        stored = header_value(last.header, COUNTER_SOURCES) if last.header else None
        if stored:
            sources = _counter_sources(stored)
    origin = header_value(header, "Nats-Stream-Source")
    if origin:
        incr = _sourced_increment(origin, subject, data, sources)
        header = set_header(header, INCR, str(incr))
    total += incr
    if sources:
        text = json.dumps(sources, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
        header = set_header(header, COUNTER_SOURCES, text)
    return header, b'{"val":"%d"}' % total, str(total)


def _sourced_increment(
    origin: str, subject: str, data: bytes, sources: dict[str, dict[str, str]]
) -> int:
    """A copied counter brings its origin's total: the increment is the difference from the
    total last seen from that origin stream and subject (recorded in `sources`)."""
    fields = origin.split(" ")
    stream_name = fields[0]
    origin_subject = fields[4] if len(fields) >= 5 else subject
    total = _big_int(_counter_value(data))
    seen = sources.setdefault(stream_name, {})
    previous = _big_int(seen.get(origin_subject, ""))
    seen[origin_subject] = str(total)
    return total - previous


def _counter_value(data: bytes) -> str:
    """Go's json.Unmarshal into CounterValue: an object whose `val` (any case) is a string."""
    try:
        value: Any = json.loads(data)
    except ValueError:
        raise js_error("MessageCounterBroken") from None
    if value is None:
        return ""
    if not isinstance(value, dict):
        raise js_error("MessageCounterBroken")
    for key, item in value.items():
        if key.lower() == "val":
            if item is None:
                continue
            if not isinstance(item, str):
                raise js_error("MessageCounterBroken")
            return item
    return ""


def _counter_sources(text: str) -> dict[str, dict[str, str]]:
    try:
        value: Any = json.loads(text)
    except ValueError:
        raise js_error("MessageCounterBroken") from None
    if not isinstance(value, dict) or not all(
        isinstance(subjects, dict) and all(isinstance(v, str) for v in subjects.values())
        for subjects in value.values()
    ):
        raise js_error("MessageCounterBroken")
    return value


def _big_int(text: str) -> int:
    """Go's SetString on a stored total; one it cannot read counts as zero."""
    return int(text) if _BIG_INT.match(text) else 0
