"""The DataFrame schemas of reads and the Arrow record batches that carry them.

`read()` yields `pyarrow.RecordBatch`es rather than tuples: Spark then skips its own row-by-row
conversion (chunks of `spark.sql.execution.arrow.maxRecordsPerBatch`). The batches must match
`to_arrow_schema(schema, timezone="UTC")` exactly, nullability included, so they are built from it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pyarrow as pa  # type: ignore[import-untyped]
import pyarrow.compute as pc  # type: ignore[import-untyped]
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    LongType,
    MapType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from pynatsd.protocol.headers import parse_headers
from pynatsd.spark.client import Chunk

HEADERS_TYPE = MapType(StringType(), ArrayType(StringType(), True), True)


def stream_schema(include_headers: bool) -> StructType:
    fields = [StructField("subject", StringType(), True), StructField("data", BinaryType(), True)]
    if include_headers:
        fields.append(StructField("headers", HEADERS_TYPE, True))
    fields += [
        StructField("stream", StringType(), True),
        StructField("seq", LongType(), True),
        StructField("timestamp", TimestampType(), True),
    ]
    return StructType(fields)


def subject_schema(include_headers: bool) -> StructType:
    """A live subject read: `reply` added, `stream` always null, `seq` counts received messages."""
    schema = stream_schema(include_headers)
    fields = list(schema.fields)
    fields.insert(len(fields) - 3, StructField("reply", StringType(), True))
    return StructType(fields)


def arrow_schema(schema: StructType) -> Any:
    return to_arrow_schema(schema, timezone="UTC")


def header_entries(block: bytes) -> list[tuple[str, list[str]]] | None:
    """A header block as map entries, repeated keys kept as several values; None without one."""
    if not block:
        return None
    return list(parse_headers(block).items())


def chunk_to_batch(chunk: Chunk, stream: str, schema: Any) -> Any:
    """A `pyarrow.RecordBatch` in `schema` (an Arrow schema from `arrow_schema`)."""
    cols = chunk.columns()
    columns: dict[str, Any] = {
        "subject": cols.subjects.cast(pa.string()),
        "data": cols.payloads,
        "stream": pa.repeat(pa.scalar(stream, pa.string()), len(chunk)),
        "seq": cols.seqs,
        # Server times are ns; Spark's are us: converted in Arrow, not per row in Python.
        "timestamp": pc.divide(cols.times_ns, 1000),
    }
    if "headers" in schema.names:
        columns["headers"] = pa.array(
            [header_entries(h) for h in cols.headers], schema.field("headers").type
        )
    return batch_of(columns, schema)


def rows_to_batch(rows: Sequence[tuple[Any, ...]], schema: Any) -> Any:
    """Row tuples in schema order as a record batch (for the small live-subject batches)."""
    columns = {name: [row[i] for row in rows] for i, name in enumerate(schema.names)}
    return batch_of({k: pa.array(v, schema.field(k).type) for k, v in columns.items()}, schema)


def batch_of(columns: dict[str, Any], schema: Any) -> Any:
    """Arrow arrays by column name as a record batch in exactly `schema` (types cast)."""
    arrays = []
    for f in schema:
        array = columns[f.name]
        if array.type != f.type:
            array = array.cast(f.type)
        arrays.append(array)
    return pa.RecordBatch.from_arrays(arrays, schema=schema)
