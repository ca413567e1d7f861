"""Streaming reads of a stream (micro-batches). Offsets are `{"<stream>": next_seq}`; Spark logs
each batch's [start, end) in the checkpoint before running it, and a restarted or retried batch is
re-read from exactly that range: reads are deterministic, so with an idempotent sink the pipeline
is exactly-once. Nothing is acknowledged on the server; no consumer state outlives a task.

Where things run: one long-lived "source runner" Python process on the driver calls
`initialOffset`, `latestOffset`, `partitions`, `commit` on the same instance; executors call
`read` on a separate pickled copy, so `read` uses nothing but the options and the partition."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from pyspark.sql.datasource import DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)
from pyspark.sql.types import StructType

from pynatsd.spark import client, offsets
from pynatsd.spark.options import StreamReadOptions
from pynatsd.spark.reader import SeqRange, checked_start, read_partition
from pynatsd.spark.wire import Connection


class StreamMicroBatchReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    def __init__(self, opts: StreamReadOptions, schema: StructType) -> None:
        self.opts = opts
        self.schema = schema
        self._target: int | None = None  # Trigger.AvailableNow: never read past this
        self._latest: int | None = None
        # Fail while the query starts, on the driver, if the server is unreachable, the stream
        # missing or a filter matches none of its subjects.
        with Connection.open(opts.connect) as conn:
            client.check_filters(client.stream_info(conn, opts.stream), opts.filters)

    def _state(self) -> client.StreamState:
        with Connection.open(self.opts.connect) as conn:
            return client.stream_info(conn, self.opts.stream)

    def initialOffset(self) -> dict[str, int]:
        with Connection.open(self.opts.connect) as conn:
            state = client.stream_info(conn, self.opts.stream)
            return offsets.to_offset(
                self.opts.stream, offsets.resolve_start(conn, self.opts, state)
            )

    def getDefaultReadLimit(self) -> ReadLimit:
        if self.opts.max_records_per_trigger is not None:
            return ReadMaxRows(self.opts.max_records_per_trigger)
        return ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        self._target = self._state().next_seq

    def latestOffset(self, start: dict[str, Any], limit: ReadLimit) -> dict[str, int]:
        first = offsets.from_offset(self.opts.stream, start)
        end = self._target if self._target is not None else self._state().next_seq
        self._latest = end
        if isinstance(limit, ReadMaxRows):
            end = min(end, first + limit.max_rows)
        return offsets.to_offset(self.opts.stream, max(end, first))

    def reportLatestOffset(self) -> dict[str, int] | None:
        if self._latest is None:
            return None
        return offsets.to_offset(self.opts.stream, self._latest)

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> Sequence[InputPartition]:
        first = offsets.from_offset(self.opts.stream, start)
        last = offsets.from_offset(self.opts.stream, end)
        if last <= first:
            return []
        first = checked_start(self.opts, first, self._state())
        return [
            SeqRange(s, e)
            for s, e in offsets.split_range(
                first, last, self.opts.min_partitions, self.opts.min_rows_per_partition
            )
        ]

    def read(self, partition: InputPartition) -> Iterator[Any]:
        return read_partition(self.opts, partition, self.schema)

    def commit(self, end: dict[str, Any]) -> None:
        # Recovery needs nothing from the server: the checkpoint holds the exact ranges.
        pass
