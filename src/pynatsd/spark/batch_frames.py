"""The publish frames of a whole Arrow batch of rows, built by Arrow kernels.

A JetStream write publishes each row as
`HPUB <subject> <reply> <header size> <total size>\\r\\nNATS/1.0\\r\\nNats-Msg-Id: <id>\\r\\n...`.
For rows without headers of their own (the common case) every part of that is a column
operation: ids from a column or from the row number, lengths, the joined frame. The frames of
a batch then lie back to back in one Arrow buffer, written to the socket as it is. The checks
of the row-by-row path (writer.messages) are made on the columns, with the same errors."""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa  # type: ignore[import-untyped]
import pyarrow.compute as pc  # type: ignore[import-untyped]

from pynatsd.spark.client import FrameBlock
from pynatsd.spark.errors import NatsSparkError

_BIN = pa.large_binary()  # 64-bit offsets: a batch of large messages may pass 2 GiB


def _scalar(value: bytes) -> Any:
    return pa.scalar(value, _BIN)


def _join(*parts: Any) -> Any:
    return pc.binary_join_element_wise(*parts, _scalar(b""))


def _digits(values: Any) -> Any:
    """Numbers in decimal (strings as they are), as binary."""
    return pc.cast(pc.cast(values, pa.string()), _BIN)


def _first(mask: Any) -> int:
    """The index of the first true of a boolean array, -1 if none."""
    return int(pc.index(pc.fill_null(mask, False), True).as_py())


def subjects_of(values: Any, prefix: bytes, row0: int) -> Any:
    """A subject column (string) with `prefix` before each value, checked as the row-by-row
    path checks them: no null, empty or whitespace-holding subject."""
    subjects = pc.cast(values, _BIN)
    if prefix:
        subjects = _join(_scalar(prefix), subjects)
    bad = pc.or_kleene(
        pc.is_null(subjects),
        pc.or_(
            pc.equal(pc.binary_length(subjects), 0),
            pc.match_substring_regex(subjects, "[ \t\r\n]"),
        ),
    )
    at = _first(bad)
    if at >= 0:
        subject = subjects[at].as_py() or b""
        raise NatsSparkError(f"row {row0 + at}: invalid subject {subject[:100]!r}")
    return subjects


def frame_block(
    payloads: Any,
    subjects: Any,
    *,
    reply: bytes,
    ids: Any | None,
    derived: str,
    row0: int,
    header_tail: bytes,
    max_payload: int,
) -> FrameBlock:
    """Frames of one batch: `payloads` (binary or string, nulls as empty), `subjects` (an array
    from `subjects_of`, or one subject as bytes). JetStream frames (`HPUB` with a reply and a
    `Nats-Msg-Id` header, then `header_tail`: more header lines and the blank line) when
    `reply` is set, with the given `ids` (string array, nulls derived) or
    `<derived><row number>`; core `PUB` frames otherwise."""
    n = len(payloads)
    data = pc.fill_null(pc.cast(payloads, _BIN), _scalar(b""))
    subject = subjects if not isinstance(subjects, bytes) else _scalar(subjects)
    size = pc.binary_length(data)
    if reply:
        rows = pa.array(np.arange(row0, row0 + n, dtype=np.int64))
        msg_ids = _join(_scalar(derived.encode()), _digits(rows))
        if ids is not None:
            msg_ids = pc.coalesce(_digits(ids), msg_ids)
        header = _join(
            _scalar(b"NATS/1.0\r\nNats-Msg-Id: "), msg_ids, _scalar(b"\r\n" + header_tail)
        )
        header_size = pc.binary_length(header)
        size = pc.add(size, header_size)
    _check_sizes(size, max_payload, row0)
    space, crlf = _scalar(b" "), _scalar(b"\r\n")
    if reply:
        frames = _join(
            _scalar(b"HPUB "),
            subject,
            _scalar(b" " + reply + b" "),
            _digits(header_size),
            space,
            _digits(size),
            crlf,
            header,
            data,
            crlf,
        )
    else:
        frames = _join(_scalar(b"PUB "), subject, space, _digits(size), crlf, data, crlf)
    offsets = np.frombuffer(
        frames.buffers()[1], dtype=np.int64, count=n + 1, offset=8 * frames.offset
    )
    return FrameBlock(frames.buffers()[2], offsets[1:], start=int(offsets[0]))


def _check_sizes(size: Any, max_payload: int, row0: int) -> None:
    at = _first(pc.greater(size, max_payload))
    if at >= 0:
        raise NatsSparkError(
            f"row {row0 + at}: a message of {size[at].as_py()} bytes "
            f"exceeds the server's max_payload of {max_payload}"
        )
