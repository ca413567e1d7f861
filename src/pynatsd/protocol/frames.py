"""Frame builders: protocol operations the server sends, as bytes."""

from __future__ import annotations

from typing import Any

# The JSON encoder lives in pynatsd.gofmt; the name stays importable from here.
from pynatsd.gofmt import go_json_bytes as go_json_bytes

PING_FRAME = b"PING\r\n"
PONG_FRAME = b"PONG\r\n"
OK_FRAME = b"+OK\r\n"
CRLF = b"\r\n"


def info_frame(info: dict[str, Any]) -> bytes:
    # nats-server writes a space before the CRLF; clients and byte-for-byte tests expect it.
    return b"INFO " + go_json_bytes(info) + b" \r\n"


def err_frame(text: str) -> bytes:
    return b"-ERR '" + text.encode() + b"'\r\n"


def msg_head(
    subject: bytes, sid: bytes, reply: bytes, size: bytes, header_size: bytes = b""
) -> bytes:
    """The MSG control line (HMSG when `header_size` is given), CRLF included. Sizes come as
    text: nats-server copies them as the publisher wrote them (`PUB foo 05`: `MSG foo 1 05`)."""
    if header_size:
        if reply:
            return b"HMSG %s %s %s %s %s\r\n" % (subject, sid, reply, header_size, size)
        return b"HMSG %s %s %s %s\r\n" % (subject, sid, header_size, size)
    if reply:
        return b"MSG %s %s %s %s\r\n" % (subject, sid, reply, size)
    return b"MSG %s %s %s\r\n" % (subject, sid, size)


def msg_frame(subject: bytes, sid: bytes, reply: bytes, payload: bytes) -> bytes:
    return msg_head(subject, sid, reply, b"%d" % len(payload)) + payload + CRLF


def hmsg_frame(subject: bytes, sid: bytes, reply: bytes, header_size: int, payload: bytes) -> bytes:
    """`payload` holds the header block followed by the body."""
    head = msg_head(subject, sid, reply, b"%d" % len(payload), b"%d" % header_size)
    return head + payload + CRLF


def stored_msg_frame(subject: bytes, sid: bytes, reply: bytes, header: bytes, data: bytes) -> bytes:
    """MSG/HMSG from a header block and a body kept apart (JetStream's stored messages and the
    server's own replies). The same bytes as `msg_head` + payload, made in one formatting pass
    with no joined payload first: this is the per-message path of a JetStream fetch."""
    sp = b" " if reply else b""
    if header:
        size = len(header) + len(data)
        return b"HMSG %s %s%s%s %d %d\r\n%s%s\r\n" % (
            subject,
            sid,
            sp,
            reply,
            len(header),
            size,
            header,
            data,
        )
    return b"MSG %s %s%s%s %d\r\n%s\r\n" % (subject, sid, sp, reply, len(data), data)


def pulled_msg_frame(
    subject: bytes,
    sid: bytes,
    ack_prefix: bytes,
    seq: int,
    dseq: int,
    ts: int,
    pending: int,
    header: bytes,
    data: bytes,
) -> bytes:
    """`stored_msg_frame` of a pull consumer's first delivery, its `$JS.ACK` reply
    (`<ack_prefix>1.<seq>.<dseq>.<ts>.<pending>`) made in the same formatting pass: one
    allocation per message fetched (jetstream/consumer/pullrun.py)."""
    if header:
        hlen = len(header)
        return b"HMSG %s %s %s1.%d.%d.%d.%d %d %d\r\n%s%s\r\n" % (
            subject,
            sid,
            ack_prefix,
            seq,
            dseq,
            ts,
            pending,
            hlen,
            hlen + len(data),
            header,
            data,
        )
    return b"MSG %s %s %s1.%d.%d.%d.%d %d\r\n%s\r\n" % (
        subject,
        sid,
        ack_prefix,
        seq,
        dseq,
        ts,
        pending,
        len(data),
        data,
    )


def status_header(code: int, description: str = "", headers: dict[str, str] | None = None) -> bytes:
    """A header block carrying a status, e.g. `NATS/1.0 503`, with optional header lines."""
    line = f"NATS/1.0 {code}" + (f" {description}" if description else "")
    parts = [line]
    if headers:
        parts.extend(f"{k}: {v}" for k, v in headers.items())
    return ("\r\n".join(parts) + "\r\n\r\n").encode()


def no_responders_frame(reply: bytes, sid: bytes, subject: bytes) -> bytes:
    """The 503 status nats-server sends to a requester when nobody is listening."""
    header = b"NATS/1.0 503\r\nNats-Subject: " + subject + b"\r\n\r\n"
    return hmsg_frame(reply, sid, b"", len(header), header)
