"""Reads of core subjects: no storage behind them, so no replay.

Streaming: a subscription owned by a thread in the driver's long-lived source-runner process
buffers messages between micro-batches; each micro-batch takes what is buffered. Offsets count
messages (`{"n": count}`); a batch that was planned but not committed before a crash is not re-read
(`readBetweenOffsets` has nothing to return): at-most-once, as core NATS itself. For replayable
reads, capture the subject in a stream and read `stream` with a `subject` filter.

Batch: a bounded capture (`maxMessages` and/or `timeout`) in one task."""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

from pyspark.sql.datasource import DataSourceReader, InputPartition, SimpleDataSourceStreamReader
from pyspark.sql.types import StructType

from pynatsd.protocol.headers import parse_headers
from pynatsd.spark.errors import ConnectionLost, NatsSparkError
from pynatsd.spark.options import SubjectReadOptions
from pynatsd.spark.schema import arrow_schema, rows_to_batch
from pynatsd.spark.wire import Connection

log = logging.getLogger("pynatsd.spark")

# (subject, reply, header block, payload, receive time ns)
Received = tuple[bytes, bytes, bytes, bytes, int]


def to_row(msg: Received, seq: int, include_headers: bool) -> tuple[Any, ...]:
    subject, reply, header, payload, ts = msg
    row: list[Any] = [subject.decode(errors="replace"), payload]
    if include_headers:
        row.append(parse_headers(header) if header else None)
    row += [
        reply.decode(errors="replace") or None,
        None,
        seq,
        datetime.fromtimestamp(ts / 1e9, tz=UTC),
    ]
    return tuple(row)


# A subject read whose connection drops reconnects (to any of `servers`) for this long before
# the query fails; what is published meanwhile is not received (core NATS keeps nothing).
RECONNECT_FOR = 60.0
_RECONNECT_WAIT = 0.5


class _Subscriber:
    """The subscription thread: reads into a bounded buffer until stopped. A dropped connection
    is re-established and the subscriptions made again; if that fails for `RECONNECT_FOR`
    seconds the error is kept and raised by the next micro-batch."""

    def __init__(self, opts: SubjectReadOptions) -> None:
        self.opts = opts
        self.lock = threading.Lock()
        self.buffer: deque[Received] = deque()
        self.dropped = 0
        self.reconnects = 0
        self.error: BaseException | None = None
        self.stop = threading.Event()
        self.conn = self._subscribe()
        self.thread = threading.Thread(target=self._run, name="nats-subject-reader", daemon=True)
        self.thread.start()

    def _subscribe(self) -> Connection:
        conn = Connection.open(self.opts.connect)
        try:
            for subject in self.opts.subjects:
                conn.subscribe(subject, self._on_msg, self.opts.queue)
            # After the PONG the server has registered the subscriptions: messages published
            # from now on are ours.
            conn.flush(self.opts.connect.request_timeout)
        except BaseException:
            conn.close()
            raise
        return conn

    def _on_msg(self, subject: bytes, reply: bytes, header: bytes, payload: bytes) -> None:
        with self.lock:
            if len(self.buffer) >= self.opts.buffer_size:
                if not self.opts.drop_when_full:
                    self.error = self.error or NatsSparkError(
                        f"more than {self.opts.buffer_size} messages arrived between two "
                        "micro-batches (option 'bufferSize'; onBufferFull=drop drops instead)"
                    )
                    return
                self.dropped += 1
                return
            self.buffer.append((subject, reply, header, payload, time.time_ns()))

    def _run(self) -> None:
        try:
            while not self.stop.is_set():
                try:
                    self.conn.poll(0.2)
                except (OSError, ConnectionLost) as e:
                    self.conn.close()
                    self.conn = self._reconnect(e)
        except BaseException as e:  # the query sees it at the next micro-batch
            self.error = self.error or e
        finally:
            self.conn.close()

    def _reconnect(self, cause: BaseException) -> Connection:
        log.warning("nats: subject read lost its connection (%s); reconnecting", cause)
        deadline = time.monotonic() + RECONNECT_FOR
        while not self.stop.is_set():
            try:
                conn = self._subscribe()
            except (OSError, NatsSparkError):
                if time.monotonic() > deadline:
                    raise NatsSparkError(
                        f"subject read: connection lost ({cause}) and no server of option "
                        f"'servers' could be reached for {RECONNECT_FOR:.0f} s"
                    ) from cause
                self.stop.wait(_RECONNECT_WAIT)
                continue
            self.reconnects += 1
            log.warning("nats: subject read reconnected to %s", conn.server)
            return conn
        return self.conn  # stopping: `_run` ends

    def take(self) -> list[Received]:
        with self.lock:
            if self.error is not None:
                raise self.error
            taken = list(self.buffer)
            self.buffer.clear()
            dropped, self.dropped = self.dropped, 0
        if dropped:
            log.warning(
                "nats: dropped %d messages on %s (buffer of %d full)",
                dropped,
                ",".join(self.opts.subjects),
                self.opts.buffer_size,
            )
        return taken


class SubjectStreamReader(SimpleDataSourceStreamReader):
    def __init__(self, opts: SubjectReadOptions, schema: StructType) -> None:
        self.opts = opts
        self.schema = schema
        self._sub: _Subscriber | None = None

    def __getstate__(self) -> dict[str, Any]:
        # Planner workers build and pickle this object: the thread stays behind.
        state = dict(self.__dict__)
        state["_sub"] = None
        return state

    def _subscriber(self) -> _Subscriber:
        if self._sub is None:
            self._sub = _Subscriber(self.opts)
        return self._sub

    def initialOffset(self) -> dict[str, int]:
        self._subscriber()
        return {"n": 0}

    def read(self, start: dict[str, Any]) -> tuple[Iterator[tuple[Any, ...]], dict[str, int]]:
        first = int(start.get("n", 0))
        taken = self._subscriber().take()
        rows = [to_row(m, first + i, self.opts.include_headers) for i, m in enumerate(taken)]
        return iter(rows), {"n": first + len(rows)}

    def readBetweenOffsets(
        self, start: dict[str, Any], end: dict[str, Any]
    ) -> Iterator[tuple[Any, ...]]:
        # Called only for a batch planned before a restart: core NATS kept nothing to re-read.
        lost = int(end.get("n", 0)) - int(start.get("n", 0))
        if lost > 0:
            log.warning(
                "nats: %d live messages of a batch interrupted by a restart are not "
                "replayed (core subjects are at-most-once)",
                lost,
            )
        return iter([])

    def commit(self, end: dict[str, Any]) -> None:
        pass


class SubjectCaptureReader(DataSourceReader):
    """A batch read of a live subject: subscribe in one task, keep what arrives until
    `maxMessages` or `timeout`."""

    def __init__(self, opts: SubjectReadOptions, schema: StructType) -> None:
        self.opts = opts
        self.schema = schema
        with Connection.open(opts.connect):  # unreachable server or bad credentials: fail now
            pass

    def partitions(self) -> list[InputPartition]:
        return [InputPartition("capture")]

    def read(self, partition: InputPartition) -> Iterator[Any]:
        opts = self.opts
        got: list[Received] = []
        limit = opts.max_messages

        def on_msg(subject: bytes, reply: bytes, header: bytes, payload: bytes) -> None:
            if limit is None or len(got) < limit:
                got.append((subject, reply, header, payload, time.time_ns()))

        with Connection.open(opts.connect) as conn:
            for subject in opts.subjects:
                conn.subscribe(subject, on_msg, opts.queue)
            deadline = time.monotonic() + opts.timeout
            while (limit is None or len(got) < limit) and time.monotonic() < deadline:
                conn.poll(min(0.2, max(deadline - time.monotonic(), 0.001)))
        rows = [to_row(m, i + 1, opts.include_headers) for i, m in enumerate(got)]
        if rows:
            yield rows_to_batch(rows, arrow_schema(self.schema))
