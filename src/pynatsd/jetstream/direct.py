"""Direct gets: `$JS.API.DIRECT.GET.<stream>` (a JSON request) and
`$JS.API.DIRECT.GET.<stream>.<subject>` (the last message on a subject), answered by the stream
itself with the message as it was stored plus `Nats-Stream`/`Nats-Subject`/`Nats-Sequence`/
`Nats-Time-Stamp` headers, or a status message.

nats-server's `processDirectGetRequest`, `processDirectGetLastBySubjectRequest`,
`getDirectRequest` and `getDirectMulti` (server/stream.go). Batches (`batch`, `multi_last`)
add `Nats-Num-Pending` and `Nats-Last-Sequence` to each message and end with a `204 EOB` status;
`max_bytes` (by default the server's `max_pending`) stops a batch after the message that
reaches it, counting subject, stored header and payload as nats-server does.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pynatsd.gofmt import parse_go_time, rfc3339_ns
from pynatsd.protocol.headers import append_headers

if TYPE_CHECKING:
    from pynatsd.jetstream.store.base import StoredMsg
    from pynatsd.jetstream.stream import Stream

# Status messages of the direct get API, as nats-server writes them.
EMPTY_REQUEST = b"NATS/1.0 408 Empty Request\r\n\r\n"
MALFORMED_REQUEST = b"NATS/1.0 408 Malformed Request\r\n\r\n"
BAD_REQUEST = b"NATS/1.0 408 Bad Request\r\n\r\n"
NOT_FOUND = b"NATS/1.0 404 Message Not Found\r\n\r\n"
NO_RESULTS = b"NATS/1.0 404 No Results\r\n\r\n"
TOO_MANY_RESULTS = b"NATS/1.0 413 Too Many Results\r\n\r\n"
REQUIRED_API_LEVEL = b"NATS/1.0 412 Required Api Level\r\n\r\n"

# getDirectMulti's maxAllowedResponses: more subjects than this is "413 Too Many Results".
_MAX_MULTI = 1024

# send(header, data): one reply message to the requester.
Send = Callable[[bytes, bytes], None]


class _Malformed(Exception):
    """The body does not decode into Go's JSApiMsgGetRequest."""


@dataclass(slots=True)
class DirectGetRequest:
    """Go's JSApiMsgGetRequest as json.Unmarshal fills it (unknown keys ignored)."""

    seq: int = 0  # Seq
    last_by_subj: str = ""  # LastFor
    next_by_subj: str = ""  # NextFor
    batch: int = 0
    max_bytes: int = 0
    start_time: int | None = None  # nanoseconds; StartTime *time.Time
    multi_last: list[str] = field(default_factory=list)  # MultiLastFor
    up_to_seq: int = 0
    up_to_time: int | None = None
    no_hdr: bool = False  # NoHeaders


def _uint(value: Any, bits: int, signed: bool) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise _Malformed
    if isinstance(value, float):
        if not value.is_integer():
            raise _Malformed
        value = int(value)
    lo, hi = (-(1 << (bits - 1)), (1 << (bits - 1)) - 1) if signed else (0, (1 << bits) - 1)
    if not lo <= value <= hi:
        raise _Malformed
    return int(value)


def _time(value: Any) -> int:
    if not isinstance(value, str):
        raise _Malformed
    try:
        return parse_go_time(value)[0]
    except ValueError:
        raise _Malformed from None


def _str(value: Any) -> str:
    if not isinstance(value, str):
        raise _Malformed
    return value


def _decode(body: bytes) -> DirectGetRequest:
    try:
        data = json.loads(body)
    except ValueError:
        raise _Malformed from None
    req = DirectGetRequest()
    if data is None:
        return req
    if not isinstance(data, dict):
        raise _Malformed
    for key, value in data.items():
        if value is None:
            continue  # null leaves Go's zero value
        if key == "seq":
            req.seq = _uint(value, 64, False)
        elif key == "last_by_subj":
            req.last_by_subj = _str(value)
        elif key == "next_by_subj":
            req.next_by_subj = _str(value)
        elif key == "batch":
            req.batch = _uint(value, 64, True)
        elif key == "max_bytes":
            req.max_bytes = _uint(value, 64, True)
        elif key == "start_time":
            req.start_time = _time(value)
        elif key == "multi_last":
            if not isinstance(value, list):
                raise _Malformed
            req.multi_last = [_str(v) for v in value]
        elif key == "up_to_seq":
            req.up_to_seq = _uint(value, 64, False)
        elif key == "up_to_time":
            req.up_to_time = _time(value)
        elif key == "no_hdr":
            if not isinstance(value, bool):
                raise _Malformed
            req.no_hdr = value
    return req


def _conflicting(req: DirectGetRequest) -> bool:
    return (
        (req.seq > 0 and bool(req.last_by_subj))
        or (req.seq > 0 and req.start_time is not None)
        or (req.start_time is not None and bool(req.last_by_subj))
        or (bool(req.last_by_subj) and bool(req.next_by_subj))
        or (bool(req.last_by_subj) and req.batch > 0)
        or (bool(req.last_by_subj) and bool(req.multi_last))
        or (bool(req.next_by_subj) and bool(req.multi_last))
        or (req.up_to_seq > 0 and req.up_to_time is not None)
    )


def direct_get(stream: Stream, body: bytes, max_pending: int, send: Send) -> None:
    """processDirectGetRequest: `$JS.API.DIRECT.GET.<stream>` with a JSON body."""
    if not body:
        send(EMPTY_REQUEST, b"")
        return
    try:
        req = _decode(body)
    except _Malformed:
        send(MALFORMED_REQUEST, b"")
        return
    if (
        req.seq == 0
        and not req.last_by_subj
        and not req.next_by_subj
        and not req.multi_last
        and req.start_time is None
    ):
        send(EMPTY_REQUEST, b"")
        return
    if _conflicting(req):
        send(BAD_REQUEST, b"")
        return
    _get(stream, req, max_pending, send)


def direct_get_last(stream: Stream, key: str, body: bytes, max_pending: int, send: Send) -> None:
    """processDirectGetLastBySubjectRequest: `$JS.API.DIRECT.GET.<stream>.<subject>`."""
    req = DirectGetRequest()
    if body:
        try:
            req = _decode(body)
        except _Malformed:
            send(MALFORMED_REQUEST, b"")
            return
    if not key or (
        req.last_by_subj
        or req.next_by_subj
        or req.multi_last
        or req.seq
        or req.batch
        or req.start_time is not None
        or req.up_to_seq
        or req.up_to_time is not None
    ):
        send(BAD_REQUEST, b"")
        return
    req.last_by_subj = key
    _get(stream, req, max_pending, send)


def _header(stream: str, msg: StoredMsg, extra: tuple[tuple[str, str], ...] = ()) -> bytes:
    fields = [
        ("Nats-Stream", stream),
        ("Nats-Subject", msg.subject),
        ("Nats-Sequence", str(msg.seq)),
        ("Nats-Time-Stamp", rfc3339_ns(msg.ts)),
        *extra,
    ]
    return append_headers(msg.header, fields)


def _cost(msg: StoredMsg) -> int:
    # nats-server counts subject, stored header and payload against max_bytes.
    return len(msg.subject) + len(msg.header) + len(msg.data)


def _get(stream: Stream, req: DirectGetRequest, max_pending: int, send: Send) -> None:
    """getDirectRequest: one message, or a batch ending with `204 EOB`."""
    if req.multi_last:
        _get_multi(stream, req, max_pending, send)
        return
    store = stream.store
    seq = store.seq_for_time(req.start_time) if req.start_time is not None else req.seq
    is_batch = req.batch != 0
    batch = req.batch if is_batch else 1
    pending = store.num_pending(max(seq, 1), req.next_by_subj) if is_batch else 0
    limit = req.max_bytes or max_pending
    sent_bytes = 0
    last = 0
    i = 0
    while i < batch:
        msg: StoredMsg | None
        if seq > 0 and not req.next_by_subj:
            msg = store.load_msg(seq) if i == 0 and not is_batch else store.load_next_msg("", seq)
        elif req.next_by_subj:
            msg = store.load_next_msg(req.next_by_subj, seq)
        else:
            msg = store.load_last_msg(req.last_by_subj)
        if msg is None:
            if batch > 1 and i > 0:
                break
            send(NOT_FOUND, b"")
            return
        seq = msg.seq + 1
        header = b""
        if not req.no_hdr:
            if is_batch:
                pending = max(pending - 1, 0)
                extra = (("Nats-Num-Pending", str(pending)), ("Nats-Last-Sequence", str(last)))
                header = _header(stream.name, msg, extra)
            else:
                header = _header(stream.name, msg)
        last = msg.seq
        send(header, msg.data)
        sent_bytes += _cost(msg)
        if sent_bytes >= limit:
            break
        i += 1
    if is_batch:
        send(
            f"NATS/1.0 204 EOB\r\nNats-Num-Pending: {pending}\r\n"
            f"Nats-Last-Sequence: {last}\r\n\r\n".encode(),
            b"",
        )


def _multi_last_seqs(stream: Stream, filters: list[str], up_to: int) -> list[int] | None:
    """The last sequence of each subject matching the filters, at or below `up_to`, sorted;
    None when there are more than nats-server answers."""
    store = stream.store
    seqs: set[int] = set()
    for f in filters:
        for subject in store.subjects_state(f):
            msg = store.load_prev_msg(subject, up_to)
            if msg is not None:
                seqs.add(msg.seq)
        if len(seqs) > _MAX_MULTI:
            return None
    return sorted(seqs)


def _get_multi(stream: Stream, req: DirectGetRequest, max_pending: int, send: Send) -> None:
    """getDirectMulti: the last message of each subject, ending with an EOB that names the
    sequence the answer is valid up to."""
    store = stream.store
    limit = req.max_bytes or max_pending
    up_to = req.up_to_seq
    if req.up_to_time is not None:
        up_to = store.seq_for_time(req.up_to_time)
        if up_to <= store.state().first_seq:
            send(NO_RESULTS, b"")
            return
        up_to -= 1
    if up_to == 0:
        up_to = store.state().last_seq
    seqs = _multi_last_seqs(stream, req.multi_last, up_to)
    if seqs is None:
        send(TOO_MANY_RESULTS, b"")
        return
    if not seqs:
        send(NO_RESULTS, b"")
        return
    pending = len(seqs)
    last = 0
    sent = sent_bytes = 0
    for seq in seqs:
        pending = max(pending - 1, 0)
        if seq < req.seq:
            continue
        msg = store.load_msg(seq)
        if msg is None:
            send(NOT_FOUND, b"")
            return
        extra = (("Nats-Num-Pending", str(pending)), ("Nats-Last-Sequence", str(last)))
        last = msg.seq
        send(_header(stream.name, msg, extra), msg.data)
        sent_bytes += _cost(msg)
        if sent_bytes >= limit:
            break
        sent += 1
        if req.batch > 0 and sent >= req.batch:
            break
    send(
        f"NATS/1.0 204 EOB\r\nNats-Num-Pending: {pending}\r\nNats-Last-Sequence: {last}\r\n"
        f"Nats-UpTo-Sequence: {up_to}\r\n\r\n".encode(),
        b"",
    )
