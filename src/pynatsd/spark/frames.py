"""A run of `MSG` frames parsed at once, in Arrow, instead of one Python call per frame.

A stream read receives long runs of `MSG <subject> <sid> <reply> <size>\\r\\n<payload>\\r\\n` for
one subscription. Splitting the receive buffer on CRLF gives control lines and payloads in turn,
as long as no payload holds a CRLF itself; each pair is checked (a well-formed control line for
our subscription whose size equals its payload's length), so the run ends at the first frame
that is anything else (a status `HMSG`, a `PING`, a payload with a CRLF, a partial frame) and
the caller's frame-by-frame parser takes over there. The split pieces are examined by Arrow
kernels: about 0.5 us per message of CPU here against 1.7 us for the Python parser and its
callback (measured on this project's 2-core box, 8,000 100-byte messages)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa  # type: ignore[import-untyped]
import pyarrow.compute as pc  # type: ignore[import-untyped]

_CRLF = b"\r\n"


@dataclass(frozen=True)
class MsgRun:
    """Consecutive `MSG` frames of one subscription: binary Arrow arrays of equal length (the
    replies None for a run of frames without a reply subject)."""

    subjects: Any
    replies: Any
    payloads: Any

    def __len__(self) -> int:
        return len(self.subjects)


def _binary_view(buf: bytes, start: int, end: int) -> Any:
    """`buf[start:end]` as a one-element binary Arrow array, without copying it."""
    offsets = pa.py_buffer(np.array([start, end], dtype=np.int32))
    return pa.Array.from_buffers(pa.binary(), 1, [None, offsets, pa.py_buffer(buf)])


def _first_false(mask: Any) -> int:
    """The index of the first false (or null) of a boolean array, its length if there is none."""
    at = pc.index(pc.fill_null(mask, False), False).as_py()
    return len(mask) if at < 0 else int(at)


def msg_run(
    buf: bytes, start: int, end: int, sid: bytes, with_reply: bool = True
) -> tuple[int, MsgRun | None]:
    """The longest run of complete `MSG <subject> <sid> <reply> <size>` frames (`MSG <subject>
    <sid> <size>` without `with_reply`) at `buf[start:end]`: (the offset after it, the run),
    or (start, None) when there is none. `end` must be below 2 GiB (a receive buffer is far
    smaller)."""
    width = 5 if with_reply else 4
    pieces = pc.split_pattern(_binary_view(buf, start, end), _CRLF).values
    # Only pieces followed by a CRLF are complete; the last one never is.
    frames = (len(pieces) - 1) // 2
    if frames <= 0:
        return start, None
    lines = pieces.take(pa.array(np.arange(0, 2 * frames, 2, dtype=np.int64)))
    tokens = pc.split_pattern(lines, b" ")
    ok = pc.and_(pc.equal(pc.list_value_length(tokens), width), pc.starts_with(lines, "MSG "))
    n = _first_false(ok)
    if n == 0:
        return start, None
    tokens = tokens[:n]
    n = min(n, _first_false(pc.equal(pc.list_element(tokens, 2), sid)))
    if n == 0:
        return start, None
    try:
        sizes = pc.cast(pc.cast(pc.list_element(tokens[:n], width - 1), pa.string()), pa.int64())
    except (pa.ArrowInvalid, UnicodeDecodeError):
        return start, None  # not a size: leave it to the frame-by-frame parser to refuse
    payloads = pieces.take(pa.array(np.arange(1, 2 * n, 2, dtype=np.int64)))
    n = min(n, _first_false(pc.equal(pc.binary_length(payloads), sizes)))
    if n == 0:
        return start, None
    # Each piece lost its CRLF: the run ends after 2n pieces and 2n CRLFs.
    offsets = np.frombuffer(
        pieces.buffers()[1], dtype=np.int32, count=2 * n + 1, offset=4 * pieces.offset
    )
    after = start + int(offsets[2 * n] - offsets[0]) + 4 * n
    run = MsgRun(
        subjects=pc.list_element(tokens[:n], 1),
        replies=pc.list_element(tokens[:n], 3) if with_reply else None,
        payloads=payloads[:n],
    )
    return after, run
