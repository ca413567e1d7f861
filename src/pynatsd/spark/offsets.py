"""Offsets are stream sequence numbers: what a query has read is the half-open range below
`{"<stream>": next_seq}`. This module resolves the user's positions against the stream's state,
translates checkpoint offsets, and splits a range into contiguous per-task sub-ranges."""

from __future__ import annotations

import math
from typing import Any

from pynatsd.spark import client
from pynatsd.spark.errors import NatsSparkError
from pynatsd.spark.options import Position, PositionKind, StreamReadOptions
from pynatsd.spark.wire import Connection


def resolve_start(conn: Connection, opts: StreamReadOptions, state: client.StreamState) -> int:
    """The first sequence a new query reads (`startingOffsets` / `startingTimestamp`)."""
    pos = opts.starting
    if pos.kind is PositionKind.EARLIEST:
        return max(state.first_seq, 1)
    if pos.kind is PositionKind.LATEST:
        return state.next_seq
    if pos.kind is PositionKind.SEQ:
        return pos.seq
    found = client.sequence_at_time(conn, opts.stream, pos.time_ns, opts.filters)
    return found if found is not None else state.next_seq


def resolve_end(pos: Position, state: client.StreamState) -> int:
    """The exclusive end of a batch read (`endingOffsets`)."""
    if pos.kind is PositionKind.SEQ:
        return pos.seq
    return state.next_seq


def to_offset(stream: str, next_seq: int) -> dict[str, int]:
    return {stream: next_seq}


def from_offset(stream: str, offset: dict[str, Any]) -> int:
    """The next sequence recorded in a checkpoint offset; it must be this query's stream."""
    value = offset.get(stream)
    if not isinstance(value, int) or set(offset) != {stream}:
        raise NatsSparkError(
            f"the checkpoint's offset {offset} is not for stream '{stream}' "
            "(option 'stream' changed? use a new checkpointLocation)"
        )
    return value


def split_range(start: int, end: int, max_tasks: int, min_rows: int) -> list[tuple[int, int]]:
    """[start, end) as contiguous sub-ranges: as many as `max_tasks`, but none smaller than
    `min_rows` sequence numbers (a task costs ~0.1-0.5 s of fixed overhead, so small micro-batches
    stay one task). Contiguous ranges keep each task's consumer reading forward, in order."""
    size = end - start
    if size <= 0:
        return []
    tasks = max(1, min(max_tasks, math.ceil(size / min_rows) if size >= min_rows else 1))
    step = math.ceil(size / tasks)
    return [(s, min(s + step, end)) for s in range(start, end, step)]
