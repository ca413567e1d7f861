"""Several streams in one query (`stream` is a comma list): the offsets are one map,
`{"A": next_seq_of_A, "B": next_seq_of_B}`, as Kafka's are per topic; each stream is planned
and read as a single-stream query would be, and each task reads one stream's range.

Built from one single-stream reader per stream (`StreamBatchReader`,
`StreamMicroBatchReader`), which get the sub-map of their own stream."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from pyspark.sql.datasource import DataSourceReader, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)
from pyspark.sql.types import StructType

from pynatsd.spark.errors import NatsSparkError
from pynatsd.spark.options import MultiStreamReadOptions, StreamReadOptions
from pynatsd.spark.reader import SeqRange, StreamBatchReader, read_partition
from pynatsd.spark.stream_reader import StreamMicroBatchReader


def _tagged(stream: str, partitions: Sequence[InputPartition]) -> list[InputPartition]:
    return [SeqRange(p.start, p.end, stream) for p in partitions if isinstance(p, SeqRange)]


def _read(
    parts: dict[str, StreamReadOptions], partition: InputPartition, schema: StructType
) -> Iterator[Any]:
    if not isinstance(partition, SeqRange):
        return iter(())
    return read_partition(parts[partition.stream], partition, schema)


class MultiStreamBatchReader(DataSourceReader):
    def __init__(self, opts: MultiStreamReadOptions, schema: StructType) -> None:
        self.parts = {p.stream: p for p in opts.parts}
        self.schema = schema

    def partitions(self) -> Sequence[InputPartition]:
        out: list[InputPartition] = []
        for stream, part in self.parts.items():
            out += _tagged(stream, StreamBatchReader(part, self.schema).partitions())
        return out

    def read(self, partition: InputPartition) -> Iterator[Any]:
        return _read(self.parts, partition, self.schema)


class MultiStreamMicroBatchReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    def __init__(self, opts: MultiStreamReadOptions, schema: StructType) -> None:
        self.parts = {p.stream: p for p in opts.parts}
        self.schema = schema
        self.readers = {s: StreamMicroBatchReader(p, schema) for s, p in self.parts.items()}

    def _split(self, offset: dict[str, Any]) -> dict[str, dict[str, Any]]:
        if set(offset) != set(self.parts):
            raise NatsSparkError(
                f"the checkpoint's offset {offset} is not for streams {sorted(self.parts)} "
                "(option 'stream' changed? use a new checkpointLocation)"
            )
        return {s: {s: offset[s]} for s in self.parts}

    def initialOffset(self) -> dict[str, int]:
        merged: dict[str, int] = {}
        for reader in self.readers.values():
            merged.update(reader.initialOffset())
        return merged

    def getDefaultReadLimit(self) -> ReadLimit:
        return next(iter(self.readers.values())).getDefaultReadLimit()

    def prepareForTriggerAvailableNow(self) -> None:
        for reader in self.readers.values():
            reader.prepareForTriggerAvailableNow()

    def latestOffset(self, start: dict[str, Any], limit: ReadLimit) -> dict[str, int]:
        """Each stream's end; a row limit is shared in proportion to what each has waiting
        (Kafka's maxOffsetsPerTrigger rule), so no stream starves another."""
        starts = self._split(start)
        ends = {
            s: r.latestOffset(starts[s], ReadAllAvailable())[s] for s, r in self.readers.items()
        }
        if isinstance(limit, ReadMaxRows):
            waiting = {s: max(ends[s] - start[s], 0) for s in ends}
            total = sum(waiting.values())
            if total > limit.max_rows:
                share = {s: limit.max_rows * waiting[s] // total for s in ends}
                # What the rounding left goes to the streams with most waiting: a batch always
                # advances, even when the limit is smaller than the number of streams.
                left = limit.max_rows - sum(share.values())
                for s in sorted(ends, key=lambda s: -waiting[s])[:left]:
                    share[s] += 1
                ends = {s: start[s] + share[s] for s in ends}
        return ends

    def reportLatestOffset(self) -> dict[str, int] | None:
        merged: dict[str, int] = {}
        for reader in self.readers.values():
            latest = reader.reportLatestOffset()
            if latest is None:
                return None
            merged.update(latest)
        return merged

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> Sequence[InputPartition]:
        starts, ends = self._split(start), self._split(end)
        out: list[InputPartition] = []
        for s, reader in self.readers.items():
            out += _tagged(s, reader.partitions(starts[s], ends[s]))
        return out

    def read(self, partition: InputPartition) -> Iterator[Any]:
        return _read(self.parts, partition, self.schema)

    def commit(self, end: dict[str, Any]) -> None:
        pass
