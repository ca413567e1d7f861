"""Batch reads of a stream: the range is fixed once, on the driver, while the query is planned;
each Spark task then reads one contiguous sub-range with its own ephemeral consumer."""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import replace
from typing import Any

from pyspark.sql.datasource import DataSourceReader, Filter, InputPartition
from pyspark.sql.types import StructType

from pynatsd.spark import client, offsets
from pynatsd.spark.errors import DataLossError
from pynatsd.spark.options import StreamReadOptions
from pynatsd.spark.pushdown import Pushed, push_filters
from pynatsd.spark.schema import arrow_schema, chunk_to_batch
from pynatsd.spark.wire import Connection

log = logging.getLogger("pynatsd.spark")

# Rows per Arrow batch handed to Spark: large enough to amortize the per-batch cost, small enough
# to keep a task's memory flat.
CHUNK_ROWS = 20_000


class SeqRange(InputPartition):
    """One task's share of a read: sequences start <= seq < end (of `stream`, when a query
    reads several)."""

    def __init__(self, start: int, end: int, stream: str = "") -> None:
        super().__init__((stream, start, end) if stream else (start, end))
        self.start = start
        self.end = end
        self.stream = stream


def checked_start(opts: StreamReadOptions, start: int, state: client.StreamState) -> int:
    """`start`, unless retention removed it: then fail (failOnDataLoss) or skip ahead."""
    if start >= state.first_seq:
        return start
    if opts.fail_on_data_loss:
        raise DataLossError(
            f"stream '{opts.stream}' no longer holds sequences {start}.."
            f"{state.first_seq - 1} (removed by retention or purge); set "
            "failOnDataLoss=false to skip them"
        )
    log.warning(
        "nats: stream '%s' lost sequences %d..%d before they were read",
        opts.stream,
        start,
        state.first_seq - 1,
    )
    return state.first_seq


def read_partition(
    opts: StreamReadOptions, partition: InputPartition, schema: StructType
) -> Iterator[Any]:
    """What a task does (batch and streaming alike): read its range as Arrow record batches."""
    if not isinstance(partition, SeqRange):  # Spark's stand-in for "no partitions"
        return
    target = arrow_schema(schema)
    with Connection.open(opts.connect) as conn:
        for chunk in client.read_range(
            conn,
            opts.stream,
            partition.start,
            partition.end,
            opts.filters,
            batch_size=opts.fetch_batch_size,
            chunk_rows=CHUNK_ROWS,
            with_headers=opts.include_headers,
            fail_on_data_loss=opts.fail_on_data_loss,
        ):
            yield chunk_to_batch(chunk, opts.stream, target)


class StreamBatchReader(DataSourceReader):
    """Built by the planner on the driver, then pickled to the executors, which only call
    `read`. The range is resolved in `partitions` (still on the driver, while the query is
    planned, so errors surface before any task runs): with pushdown on, Spark calls
    `pushFilters` between the two (`PushdownStreamBatchReader`)."""

    def __init__(self, opts: StreamReadOptions, schema: StructType) -> None:
        self.opts = opts
        self.schema = schema
        self.pushed = Pushed()
        self.option_filters = opts.filters

    def partitions(self) -> Sequence[InputPartition]:
        opts, pushed = self.opts, self.pushed
        with Connection.open(opts.connect) as conn:
            state = client.stream_info(conn, opts.stream)
            client.check_filters(state, self.option_filters)
            if pushed.empty:
                return []
            start = offsets.resolve_start(conn, opts, state)
            start = checked_start(opts, start, state)
            end = offsets.resolve_end(opts.ending, state)
            start, end = max(start, pushed.seq_start), min(end, pushed.seq_end)
            if pushed.time_start_ns and start < end:
                found = client.sequence_at_time(conn, opts.stream, pushed.time_start_ns, ())
                start = max(start, found if found is not None else end)
            if pushed.time_end_ns < 2**63 and start < end:
                found = client.sequence_at_time(conn, opts.stream, pushed.time_end_ns, ())
                if found is not None:
                    end = min(end, found)
        if self.pushed.described:
            log.info("nats: pushed to the consumer: %s", self.pushed.describe())
        return [
            SeqRange(s, e)
            for s, e in offsets.split_range(
                start, end, opts.min_partitions, opts.min_rows_per_partition
            )
        ]

    def read(self, partition: InputPartition) -> Iterator[Any]:
        return read_partition(self.opts, partition, self.schema)


class PushdownStreamBatchReader(StreamBatchReader):
    """The reader Spark's filter-pushdown planner gets. PySpark refuses every read of a reader
    that implements `pushFilters` while `spark.sql.python.filterPushdown.enabled` is off, and
    tells the data source nothing of the setting: so this class is handed out only by the
    planner that pushes filters (`NatsDataSource.reader`)."""

    def pushFilters(self, filters: list[Filter]) -> Iterable[Filter]:
        pushed, remaining = push_filters(filters, self.opts.filters)
        if pushed.subjects:
            # A subject the stream cannot hold selects no rows, and the server would refuse a
            # consumer filtering on it: keep the others.
            with Connection.open(self.opts.connect) as conn:
                state = client.stream_info(conn, self.opts.stream)
            subjects = tuple(s for s in pushed.subjects if client.filters_can_match(state, (s,)))
            pushed = replace(pushed, subjects=subjects)
            # Here, not in `partitions`: Spark pickles the reader for the tasks in between.
            self.opts = replace(self.opts, filters=subjects)
        self.pushed = pushed
        return remaining
