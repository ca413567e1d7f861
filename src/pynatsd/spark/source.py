"""The `nats` data source: Spark's entry point, dispatching to the reader or writer the options
ask for. Options are parsed here, in the driver-side planner, so bad ones fail before any task."""

from __future__ import annotations

import sys

from pyspark.errors import PySparkNotImplementedError
from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    DataSourceWriter,
    SimpleDataSourceStreamReader,
)
from pyspark.sql.types import StructType

from pynatsd.spark.errors import NatsSparkError, OptionError
from pynatsd.spark.kv_reader import KvBatchReader, kv_schema
from pynatsd.spark.multi_stream import MultiStreamBatchReader, MultiStreamMicroBatchReader
from pynatsd.spark.options import (
    KvReadOptions,
    MultiStreamReadOptions,
    StreamReadOptions,
    SubjectReadOptions,
    parse_read_options,
    parse_write_options,
)
from pynatsd.spark.reader import PushdownStreamBatchReader, StreamBatchReader
from pynatsd.spark.schema import stream_schema, subject_schema
from pynatsd.spark.stream_reader import StreamMicroBatchReader
from pynatsd.spark.subject_reader import SubjectCaptureReader, SubjectStreamReader
from pynatsd.spark.writer import BatchWriter, StreamWriter, plan_write

# The PySpark worker that plans a read with filter pushdown (spark.sql.python.filterPushdown
# .enabled): only it calls `pushFilters`, and PySpark fails any other read of a reader that has it.
_PUSHDOWN_PLANNER = "data_source_pushdown_filters.py"


def _pushing_filters() -> bool:
    """Is `reader()` being called by Spark's filter-pushdown planner? PySpark says so nowhere
    but in the caller: its module."""
    frame = sys._getframe(2)
    while frame is not None:
        if frame.f_code.co_filename.endswith(_PUSHDOWN_PLANNER):
            return True
        frame = frame.f_back  # type: ignore[assignment]
    return False


class NatsDataSource(DataSource):
    """`spark.read.format("nats")`: streams (replayable) and subjects (live), batch and
    streaming, reads and writes. See docs/spark.md."""

    @classmethod
    def name(cls) -> str:
        return "nats"

    def schema(self) -> StructType:
        opts = parse_read_options(self.options, None)
        if isinstance(opts, KvReadOptions):
            return kv_schema()
        if isinstance(opts, MultiStreamReadOptions):
            return stream_schema(opts.parts[0].include_headers)
        if isinstance(opts, StreamReadOptions):
            return stream_schema(opts.include_headers)
        return subject_schema(opts.include_headers)

    def _read_schema(self, given: StructType, expected: StructType) -> StructType:
        if given.simpleString() != expected.simpleString():
            raise NatsSparkError(
                "the read schema is fixed by the options; drop .schema(...) "
                f"(expected {expected.simpleString()}, got "
                f"{given.simpleString()})"
            )
        return expected

    def reader(self, schema: StructType) -> DataSourceReader:
        opts = parse_read_options(self.options, "batch")
        if isinstance(opts, KvReadOptions):
            return KvBatchReader(opts, self._read_schema(schema, self.schema()))
        if isinstance(opts, MultiStreamReadOptions):
            return MultiStreamBatchReader(opts, self._read_schema(schema, self.schema()))
        if isinstance(opts, StreamReadOptions):
            cls = PushdownStreamBatchReader if _pushing_filters() else StreamBatchReader
            return cls(opts, self._read_schema(schema, self.schema()))
        return SubjectCaptureReader(opts, self._read_schema(schema, self.schema()))

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        opts = parse_read_options(self.options, "stream")
        if isinstance(opts, KvReadOptions):  # refused by the parser in stream mode
            raise NatsSparkError("internal: stream reader asked for a bucket read")
        if isinstance(opts, MultiStreamReadOptions):
            return MultiStreamMicroBatchReader(opts, self._read_schema(schema, self.schema()))
        if isinstance(opts, SubjectReadOptions):
            # Live subjects keep their subscription in the driver: Spark's simple reader.
            raise PySparkNotImplementedError(
                errorClass="NOT_IMPLEMENTED", messageParameters={"feature": "streamReader"}
            )
        return StreamMicroBatchReader(opts, self._read_schema(schema, self.schema()))

    def simpleStreamReader(self, schema: StructType) -> SimpleDataSourceStreamReader:
        opts = parse_read_options(self.options, "stream")
        if not isinstance(opts, SubjectReadOptions):
            raise NatsSparkError("internal: simple reader asked for a stream read")
        return SubjectStreamReader(opts, self._read_schema(schema, self.schema()))

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        if overwrite:
            raise OptionError("mode", "NATS can only append; use .mode('append')")
        return BatchWriter(plan_write(parse_write_options(self.options), schema))

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        if overwrite:
            raise OptionError("outputMode", "NATS can only append; use outputMode('append')")
        return StreamWriter(plan_write(parse_write_options(self.options), schema))
