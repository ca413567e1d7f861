"""Writes: each row becomes one message. Input columns: `data` (binary or string; `value` is
accepted as Kafka users spell it), optional `subject` (the `subject` option overrides it),
optional `headers` (`map<string,array<string>>` or `map<string,string>`).

JetStream writes publish with acks and a `Nats-Msg-Id` per row, so a retried task or batch is
stored once (within the stream's `duplicate_window`). The id is, in order of preference: the
`msgIdColumn`; `<stream>:<seq>` of a row read from a stream (NATS -> Spark -> NATS pipelines);
for streaming writes `<queryId>:<batchId>:<partition>:<row>` (stable across retries because our
reads of a logged batch are deterministic); for batch writes `<writeId>:<partition>:<row>`, where
the write id is drawn once on the driver, so it covers task retries within one job only.
A `Nats-Msg-Id` in the row's `headers` is kept when there is no `msgIdColumn`.
Core writes are fire-and-forget (at-most-once)."""

from __future__ import annotations

import logging
import re
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pyarrow as pa  # type: ignore[import-untyped]
import pyarrow.compute as pc  # type: ignore[import-untyped]
from pyspark import TaskContext
from pyspark.sql.datasource import (
    DataSourceArrowWriter,
    DataSourceStreamArrowWriter,
    WriterCommitMessage,
)
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    IntegerType,
    LongType,
    MapType,
    StringType,
    StructType,
)

from pynatsd.protocol.headers import build_headers
from pynatsd.spark import batch_frames, client
from pynatsd.spark.errors import NatsSparkError, OptionError
from pynatsd.spark.options import PublishMode, WriteOptions
from pynatsd.spark.wire import Connection, new_inbox, pub_frame

log = logging.getLogger("pynatsd.spark")


@dataclass(frozen=True)
class WritePlan:
    """What the driver decided once, for every task: where each column comes from."""

    opts: WriteOptions
    mode: PublishMode  # CORE or JETSTREAM, never AUTO
    data_column: str
    subject_column: str  # "" when the `subject` option is used
    headers_column: str
    id_column: str
    source_id_columns: bool  # `stream` and `seq` columns: ids "<stream>:<seq>"
    subject_prefix: bytes = b""  # put before the subject column's values (`$KV.<bucket>.`)


@dataclass
class NatsCommitMessage(WriterCommitMessage):
    published: int
    duplicates: int


def plan_write(opts: WriteOptions, schema: StructType) -> WritePlan:
    """Check the DataFrame's columns against the options and settle the publish mode; also
    connects once, so an unreachable server, bad credentials or a missing stream fail here, on
    the driver, before any task runs."""
    types = {f.name: f.dataType for f in schema.fields}
    data = "data" if "data" in types else "value" if "value" in types else ""
    if not data:
        raise OptionError(
            "data",
            "a write needs a 'data' column (binary or string; 'value' is "
            f"accepted too); the columns are {sorted(types)}",
        )
    if not isinstance(types[data], BinaryType | StringType):
        raise OptionError(
            data, f"column '{data}' must be binary or string, not {types[data].simpleString()}"
        )
    subject_column = ""
    if opts.bucket:
        if not isinstance(types.get("key"), StringType):
            raise OptionError("bucket", "a bucket write needs a string 'key' column")
        subject_column = "key"
    elif not opts.subject:
        if "subject" not in types:
            raise OptionError("subject", "a write needs the 'subject' option or a 'subject' column")
        if not isinstance(types["subject"], StringType):
            raise OptionError("subject", "column 'subject' must be a string")
        subject_column = "subject"
    headers = ""
    if "headers" in types:
        t = types["headers"]
        ok = (
            isinstance(t, MapType)
            and isinstance(t.keyType, StringType)
            and (
                isinstance(t.valueType, StringType)
                or (
                    isinstance(t.valueType, ArrayType)
                    and isinstance(t.valueType.elementType, StringType)
                )
            )
        )
        if not ok:
            raise OptionError(
                "headers",
                "column 'headers' must be map<string,array<string>> or "
                f"map<string,string>, not {t.simpleString()}",
            )
        headers = "headers"
    if opts.msg_id_column:
        id_type = types.get(opts.msg_id_column)
        if id_type is None:
            raise OptionError("msgIdColumn", f"no column '{opts.msg_id_column}'")
        if not isinstance(id_type, StringType | LongType | IntegerType):
            raise OptionError(
                "msgIdColumn", f"column '{opts.msg_id_column}' must be a string or an integer"
            )
    source_ids = isinstance(types.get("stream"), StringType) and isinstance(
        types.get("seq"), LongType | IntegerType
    )
    mode = _publish_mode(opts)
    prefix = f"$KV.{opts.bucket}.".encode() if opts.bucket else b""
    return WritePlan(
        opts, mode, data, subject_column, headers, opts.msg_id_column, source_ids, prefix
    )


def _publish_mode(opts: WriteOptions) -> PublishMode:
    with Connection.open(opts.connect) as conn:
        if opts.bucket:
            client.bucket_info(conn, opts.bucket)
        elif opts.stream:
            client.stream_info(conn, opts.stream)
        if opts.stream and opts.subject:
            capturing = client.streams_capturing(conn, opts.subject)
            if opts.stream not in capturing:
                raise OptionError(
                    "subject", f"stream '{opts.stream}' does not capture subject '{opts.subject}'"
                )
        if opts.publish_mode is not PublishMode.AUTO:
            return opts.publish_mode
        if opts.stream or (opts.subject and client.streams_capturing(conn, opts.subject)):
            return PublishMode.JETSTREAM
        return PublishMode.CORE


def _header_lines(value: Any) -> list[tuple[str, str]]:
    if not value:
        return []
    items = value.items() if isinstance(value, dict) else value
    lines: list[tuple[str, str]] = []
    for key, vals in items:
        if vals is None:
            continue
        if isinstance(vals, str):
            lines.append((key, vals))
        else:
            lines.extend((key, v) for v in vals if v is not None)
    return lines


_BAD_SUBJECT = re.compile(rb"[ \t\r\n]")


def _check_subject(subject: bytes, row: int) -> None:
    if not subject or _BAD_SUBJECT.search(subject):
        raise NatsSparkError(f"row {row}: invalid subject {subject[:100]!r}")


def _jetstream_header(
    user: list[tuple[str, str]], msg_id: Any, from_column: bool, expected: list[tuple[str, str]]
) -> bytes:
    """The header block of a JetStream publish with the row's own headers. A `Nats-Msg-Id`
    among them is kept unless the id comes from `msgIdColumn`."""
    lines = list(user)
    if from_column and msg_id is not None:
        lines = [kv for kv in lines if kv[0] != "Nats-Msg-Id"]
        lines.append(("Nats-Msg-Id", str(msg_id)))
    elif not any(k == "Nats-Msg-Id" for k, _ in lines):
        lines.append(("Nats-Msg-Id", str(msg_id)))
    return build_headers(lines + expected)


def frame_blocks(
    plan: WritePlan, batches: Iterator[Any], id_prefix: str, max_payload: int, reply: bytes
) -> Iterator[client.FrameBlock]:
    """The publish frames of every row, a block per Arrow batch: built by Arrow kernels
    (batch_frames.py) for a batch without headers of its own (the common case), row by row
    (`messages`) otherwise. JetStream frames carry the reply subject `reply` and each row's
    `Nats-Msg-Id`; core frames (`reply` b"") neither."""
    opts = plan.opts
    jetstream = plan.mode is PublishMode.JETSTREAM
    expected = [("Nats-Expected-Stream", opts.stream)] if jetstream and opts.stream else []
    tail = b"".join(f"{k}: {v}\r\n".encode() for k, v in expected) + b"\r\n"
    row = 0
    for batch in batches:
        n = batch.num_rows
        if not n:
            continue
        if plan.headers_column and batch.column(plan.headers_column).null_count < n:
            rows = _batch_messages(plan, batch, row, id_prefix, max_payload, expected, tail)
            yield client.frame_block([pub_frame(s, p, reply, h) for s, h, p in rows])
        else:
            subjects = (
                batch_frames.subjects_of(
                    batch.column(plan.subject_column), plan.subject_prefix, row
                )
                if plan.subject_column
                else opts.subject.encode()
            )
            yield batch_frames.frame_block(
                batch.column(plan.data_column),
                subjects,
                reply=reply if jetstream else b"",
                ids=_given_ids(plan, batch) if jetstream else None,
                derived=f"{id_prefix}:",
                row0=row,
                header_tail=tail,
                max_payload=max_payload,
            )
        row += n


def _given_ids(plan: WritePlan, batch: Any) -> Any | None:
    """The ids a batch's rows bring (string array, null where a row brings none), or None."""
    if plan.id_column:
        return batch.column(plan.id_column)
    if plan.source_id_columns:
        return pc.binary_join_element_wise(
            pc.cast(batch.column("stream"), pa.string()),
            pc.cast(batch.column("seq"), pa.string()),
            ":",
        )
    return None


def _batch_messages(
    plan: WritePlan,
    batch: Any,
    row0: int,
    id_prefix: str,
    max_payload: int,
    expected: list[tuple[str, str]],
    tail: bytes,
) -> Iterator[client.Outgoing]:
    """(subject, header block, payload) per row of one batch, with the row's `Nats-Msg-Id` in
    JetStream mode. Columns are converted per batch (Arrow -> Python lists); rows without
    headers of their own get their header block by concatenation."""
    opts = plan.opts
    jetstream = plan.mode is PublishMode.JETSTREAM
    fixed_subject = opts.subject.encode()
    derived = f"{id_prefix}:"
    n = batch.num_rows
    payloads = batch.column(plan.data_column).to_pylist()
    subjects = batch.column(plan.subject_column).to_pylist() if plan.subject_column else None
    headers = batch.column(plan.headers_column).to_pylist() if plan.headers_column else None
    ids: list[Any] | None = None
    if jetstream:
        given = _given_ids(plan, batch)
        ids = given.to_pylist() if given is not None else None
    for i in range(n):
        row = row0 + i
        payload = payloads[i]
        if payload is None:
            payload = b""
        elif isinstance(payload, str):
            payload = payload.encode()
        if subjects is not None:
            value = subjects[i]
            subject = plan.subject_prefix + value.encode() if value is not None else b""
            _check_subject(subject, row)
        else:
            subject = fixed_subject
        user = _header_lines(headers[i]) if headers is not None else None
        if jetstream:
            given_id = ids[i] if ids is not None else None
            msg_id = given_id if given_id is not None else derived + str(row)
            if user:
                from_column = bool(plan.id_column) and given_id is not None
                header = _jetstream_header(user, msg_id, from_column, expected)
            else:
                header = b"NATS/1.0\r\nNats-Msg-Id: " + str(msg_id).encode() + b"\r\n" + tail
        else:
            header = build_headers(user) if user else b""
        if len(header) + len(payload) > max_payload:
            raise NatsSparkError(
                f"row {row}: a message of {len(header) + len(payload)} bytes "
                f"exceeds the server's max_payload of {max_payload}"
            )
        yield subject, header, payload


def publish(plan: WritePlan, batches: Iterator[Any], id_prefix: str) -> NatsCommitMessage:
    with Connection.open(plan.opts.connect) as conn:
        max_payload = int(conn.info.get("max_payload", 1 << 20))
        if plan.mode is PublishMode.JETSTREAM:
            reply = new_inbox().encode()
            blocks = frame_blocks(plan, batches, id_prefix, max_payload, reply)
            result = client.publish_acked(conn, blocks, reply, plan.opts.max_in_flight)
            return NatsCommitMessage(result.published, result.duplicates)
        blocks = frame_blocks(plan, batches, id_prefix, max_payload, b"")
        return NatsCommitMessage(client.publish_core(conn, blocks), 0)


def _totals(messages: list[WriterCommitMessage | None]) -> tuple[int, int]:
    done = [m for m in messages if isinstance(m, NatsCommitMessage)]
    return sum(m.published for m in done), sum(m.duplicates for m in done)


class BatchWriter(DataSourceArrowWriter):
    def __init__(self, plan: WritePlan) -> None:
        self.plan = plan
        self.write_id = uuid.uuid4().hex  # drawn on the driver: the same in every task attempt

    def write(self, iterator: Iterator[Any]) -> NatsCommitMessage:
        ctx = TaskContext.get()
        partition = ctx.partitionId() if ctx is not None else 0
        return publish(self.plan, iterator, f"{self.write_id}:{partition}")

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        published, duplicates = _totals(messages)
        log.info("nats: wrote %d messages (%d duplicates ignored)", published, duplicates)

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        published, _ = _totals(messages)
        log.warning(
            "nats: write aborted after %d messages were published by finished tasks; "
            "JetStream deduplicates them on a retry within the duplicate window",
            published,
        )


class StreamWriter(DataSourceStreamArrowWriter):
    def __init__(self, plan: WritePlan) -> None:
        self.plan = plan

    def write(self, iterator: Iterator[Any]) -> NatsCommitMessage:
        ctx = TaskContext.get()
        if ctx is None:
            raise NatsSparkError("streaming write outside a Spark task")
        query = ctx.getLocalProperty("sql.streaming.queryId") or "query"
        batch = ctx.getLocalProperty("streaming.sql.batchId") or "0"
        return publish(self.plan, iterator, f"{query}:{batch}:{ctx.partitionId()}")

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        published, duplicates = _totals(messages)
        log.info(
            "nats: batch %d wrote %d messages (%d duplicates ignored)",
            batchId,
            published,
            duplicates,
        )

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        log.warning("nats: batch %d aborted; its retry is deduplicated by Nats-Msg-Id", batchId)
