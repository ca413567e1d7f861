"""Per-message TTLs: the `Nats-TTL` header as nats-server reads it (`parseMessageTTL` in
`server/stream.go`). The timers that remove expired messages, and the subject delete markers
placed instead, are the stream's (`stream.py`).
"""

from __future__ import annotations

from pynatsd.jetstream.errors import js_error
from pynatsd.jetstream.util import parse_go_duration

__all__ = ["parse_message_ttl"]

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
