"""Per-message TTLs: the `Nats-TTL` header as nats-server reads it (`parseMessageTTL` in
`server/stream.go`). The timers that remove expired messages, and the subject delete markers
placed instead, are the stream's (`stream.py`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pynatsd.jetstream.errors import ApiError, js_error
from pynatsd.jetstream.util import now_ns, parse_go_duration
from pynatsd.protocol.headers import header_value

if TYPE_CHECKING:
    from pynatsd.jetstream.stream import Stream

__all__ = ["age_out", "is_delete_marker", "parse_message_ttl", "ttl_or_zero"]

NS = 1_000_000_000


def parse_message_ttl(text: str) -> int:
    """Go's parseMessageTTL: seconds; -1 for "never"; ApiError 10165 when invalid."""
    if text.lower() == "never":
        return -1
    ns = parse_go_duration(text)
    if ns is not None:
        if ns < NS:
            raise js_error("MessageTTLInvalid")
        return ns // NS
    try:
        value = int(text)
    except ValueError:
        raise js_error("MessageTTLInvalid") from None
    if value < 0:
        raise js_error("MessageTTLInvalid")
    return value


def ttl_or_zero(header: bytes) -> int:
    """The TTL as Go's first (lenient) look at it sees it: 0 when absent or unparsable."""
    text = header_value(header, "Nats-TTL")
    if not text:
        return 0
    try:
        return parse_message_ttl(text)
    except ApiError:
        return 0


def is_delete_marker(header: bytes) -> bool:
    """nats-server's isSubjectDeleteMarker."""
    if not header:
        return False
    return bool(header_value(header, "Nats-Marker-Reason")) or (
        header_value(header, "KV-Operation") == "PURGE"
    )


def age_out(stream: Stream) -> int | None:
    """max_age for a stream with per-message TTLs, as nats-server's expireMsgs: from the
    oldest message on, each one older than max_age goes, except one with `Nats-TTL: never`;
    with subject delete markers, the last message of a subject is replaced by a marker
    (`Nats-Marker-Reason: MaxAge`) instead. Returns when the next message ages out (ns), or
    None when no message but the exempt ones is left."""
    cfg = stream.config
    max_age = cfg.max_age
    store = stream.store
    markers = cfg.subject_delete_marker_ttl > 0
    seq = max(store.state().first_seq, 1)
    while not stream.closed:
        msg = store.load_next_msg("", seq)
        if msg is None:
            return None
        if msg.ts > now_ns() - max_age:
            return msg.ts + max_age
        seq = msg.seq + 1
        if msg.header and ttl_or_zero(msg.header) < 0:
            continue
        if markers and not is_delete_marker(msg.header):
            last = store.load_last_msg(msg.subject)
            if last is not None and last.seq == msg.seq:
                stream.place_marker(msg.subject)  # its rollup removes the message
                continue
        stream.remove_msg(msg.seq)
    return None
