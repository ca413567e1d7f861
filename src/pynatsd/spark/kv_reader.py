"""Batch reads of a key-value bucket as a table: one row per key with its latest value, or
with `history` every revision (puts, deletes, purges) in order.

A bucket is the stream `KV_<bucket>` storing key K at subject `$KV.<bucket>.K` (nats-server's
and the NATS clients' layout; a delete or purge is a message with the header `KV-Operation:
DEL` or `PURGE`). The latest values are read with one `last_per_subject` consumer (the server
sends only each key's last message); the history is a plain read of the stream."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import pyarrow as pa  # type: ignore[import-untyped]
import pyarrow.compute as pc  # type: ignore[import-untyped]
from pyspark.sql.datasource import DataSourceReader, InputPartition
from pyspark.sql.types import (
    BinaryType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from pynatsd.spark import client, offsets
from pynatsd.spark.options import KvReadOptions
from pynatsd.spark.reader import CHUNK_ROWS, SeqRange
from pynatsd.spark.schema import arrow_schema, batch_of
from pynatsd.spark.wire import Connection

# Rows per task for a history read, split as stream reads are.
_HISTORY_ROWS_PER_TASK = 50_000
_OPERATION = b"\r\nKV-Operation: "


def kv_schema() -> StructType:
    return StructType(
        [
            StructField("key", StringType(), True),
            StructField("data", BinaryType(), True),
            StructField("revision", LongType(), True),
            StructField("created", TimestampType(), True),
            StructField("operation", StringType(), True),
        ]
    )


def operation(header: bytes) -> str:
    """PUT, DEL or PURGE, from a KV message's header block."""
    at = header.find(_OPERATION)
    if at < 0:
        return "PUT"
    end = header.find(b"\r\n", at + len(_OPERATION))
    return header[at + len(_OPERATION) : end].decode(errors="replace").strip()


def chunk_to_kv_batch(chunk: client.Chunk, prefix: bytes, history: bool, schema: Any) -> Any:
    cols = chunk.columns()
    ops = [operation(h) for h in cols.headers]
    keep = None if history else [op == "PUT" for op in ops]
    cut = len(prefix)
    columns: dict[str, Any] = {
        "key": pc.binary_slice(cols.subjects, cut, 1 << 16).cast(pa.string()),
        "data": cols.payloads,
        "revision": cols.seqs,
        "created": pc.divide(cols.times_ns, 1000),
        "operation": pa.array(ops, pa.string()),
    }
    batch = batch_of(columns, schema)
    return batch.filter(pa.array(keep)) if keep is not None else batch


class KvBatchReader(DataSourceReader):
    def __init__(self, opts: KvReadOptions, schema: StructType) -> None:
        self.opts = opts
        self.schema = schema

    def partitions(self) -> Sequence[InputPartition]:
        with Connection.open(self.opts.connect) as conn:
            state = client.bucket_info(conn, self.opts.bucket)
        start, end = max(state.first_seq, 1), state.next_seq
        if not self.opts.history:
            return [SeqRange(start, end)] if end > start else []  # one consumer: one task
        return [
            SeqRange(s, e) for s, e in offsets.split_range(start, end, 2, _HISTORY_ROWS_PER_TASK)
        ]

    def read(self, partition: InputPartition) -> Iterator[Any]:
        if not isinstance(partition, SeqRange):
            return
        opts = self.opts
        target = arrow_schema(self.schema)
        with Connection.open(opts.connect) as conn:
            for chunk in client.read_range(
                conn,
                opts.stream,
                partition.start,
                partition.end,
                (opts.prefix + ">",),
                batch_size=opts.fetch_batch_size,
                chunk_rows=CHUNK_ROWS,
                with_headers=True,
                fail_on_data_loss=False,
                deliver="by_start_sequence" if opts.history else client.LAST_PER_SUBJECT,
            ):
                yield chunk_to_kv_batch(chunk, opts.prefix.encode(), opts.history, target)
