"""The NATS and JetStream calls the data source makes, over `wire.Connection`.

Everything here is what pynatsd's JetStream must serve for the connector (docs/spark.md lists it):
`STREAM.INFO`, `STREAM.NAMES` with a subject filter, `CONSUMER.CREATE` of an ephemeral AckNone pull
consumer (`by_start_sequence` / `by_start_time`, filters, `inactive_threshold`, `mem_storage`),
`CONSUMER.MSG.NEXT` with `batch` + `no_wait` (messages with `$JS.ACK` reply subjects, then a 404 or
408 status when it runs dry), `CONSUMER.DELETE`, and publish acks with `Nats-Msg-Id` deduplication.
"""

from __future__ import annotations

import contextlib
import json
import logging
import secrets
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa  # type: ignore[import-untyped]
import pyarrow.compute as pc  # type: ignore[import-untyped]

from pynatsd.gofmt import format_go_time
from pynatsd.spark.errors import (
    DataLossError,
    JetStreamError,
    NatsSparkError,
    NoResponders,
    OptionError,
    ProtocolError,
    RequestTimeout,
    StreamNotFound,
)
from pynatsd.spark.frames import MsgRun
from pynatsd.spark.wire import Connection, new_inbox, pub_frame, status_of
from pynatsd.subjects import subjects_collide

log = logging.getLogger("pynatsd.spark")

_STREAM_NOT_FOUND = 10059
# An abandoned ephemeral consumer (a killed task) is removed by the server after this long.
_INACTIVE_THRESHOLD_NS = 30_000_000_000
# A pull asks for about this many bytes at most (estimated from the messages read so far),
# and the first pull, before any size is known, for this many messages at most.
_PULL_BYTES = 4 << 20
_FIRST_PULL = 256
# Messages a filtered pull may ask for beyond its estimate of the matches left in its range.
_FILTER_SLACK = 16


@dataclass(frozen=True)
class StreamState:
    name: str
    first_seq: int
    last_seq: int
    messages: int
    subjects: tuple[str, ...]

    @property
    def next_seq(self) -> int:
        """The sequence the next stored message will get: the exclusive end of what exists."""
        return self.last_seq + 1


def api(conn: Connection, suffix: str, body: dict[str, Any] | None, what: str) -> dict[str, Any]:
    subject = "$JS.API." + suffix
    try:
        _, data = conn.request(subject, json.dumps(body).encode() if body is not None else b"")
    except NoResponders:
        raise NoResponders(
            f"{what}: JetStream is not enabled on {conn.server} (no responders on {subject})"
        ) from None
    try:
        reply: dict[str, Any] = json.loads(data)
    except ValueError:
        raise ProtocolError(f"{what}: invalid JSON reply on {subject}: {data[:200]!r}") from None
    error = reply.get("error")
    if error:
        raise JetStreamError(
            what,
            int(error.get("code", 0)),
            int(error.get("err_code", 0)),
            str(error.get("description", "")),
        )
    return reply


def stream_info(conn: Connection, stream: str) -> StreamState:
    try:
        reply = api(conn, f"STREAM.INFO.{stream}", None, f"stream '{stream}'")
    except JetStreamError as e:
        if e.err_code == _STREAM_NOT_FOUND or e.code == 404:
            raise StreamNotFound(
                f"stream '{stream}' does not exist on {conn.server} (option 'stream')"
            ) from None
        raise
    state = reply.get("state", {})
    return StreamState(
        name=stream,
        first_seq=int(state.get("first_seq", 0)),
        last_seq=int(state.get("last_seq", 0)),
        messages=int(state.get("messages", 0)),
        subjects=tuple(reply.get("config", {}).get("subjects") or ()),
    )


def bucket_info(conn: Connection, bucket: str) -> StreamState:
    """The state of a key-value bucket's stream `KV_<bucket>`."""
    try:
        return stream_info(conn, f"KV_{bucket}")
    except StreamNotFound:
        raise OptionError(
            "bucket", f"bucket '{bucket}' does not exist on {conn.server} (no stream KV_{bucket})"
        ) from None


def streams_capturing(conn: Connection, subject: str) -> list[str]:
    """Names of the streams that store messages published on `subject` (empty without JetStream)."""
    try:
        reply = api(conn, "STREAM.NAMES", {"subject": subject}, "stream names")
    except NoResponders:
        return []
    return list(reply.get("streams") or [])


# --- reading a sequence range ------------------------------------------------------------------


class Chunk:
    """Columns of consecutive messages of one stream, in sequence order: Arrow arrays for the
    runs parsed in bulk (`extend`), Python lists for messages parsed one by one (`append`),
    joined in order by `columns`."""

    def __init__(self) -> None:
        self._parts: list[ChunkColumns] = []
        self._rows: _Rows = _Rows()
        self._length = 0

    def __len__(self) -> int:
        return self._length

    def append(self, subject: bytes, payload: bytes, header: bytes, seq: int, ts: bytes) -> None:
        rows = self._rows
        rows.subjects.append(subject)
        rows.payloads.append(payload)
        rows.headers.append(header)
        rows.seqs.append(seq)
        rows.times_ns.append(ts)  # digits: Arrow converts them all at once
        self._length += 1

    def extend(self, subjects: Any, payloads: Any, seqs: Any, times_ns: Any) -> None:
        """Messages without headers, as Arrow arrays (binary, binary, int64, int64)."""
        self._flush()
        self._parts.append(ChunkColumns(subjects, payloads, seqs, times_ns, [b""] * len(seqs)))
        self._length += len(seqs)

    def _flush(self) -> None:
        rows = self._rows
        if rows.seqs:
            self._parts.append(
                ChunkColumns(
                    pa.array(rows.subjects, pa.binary()),
                    pa.array(rows.payloads, pa.binary()),
                    pa.array(rows.seqs, pa.int64()),
                    pa.array(rows.times_ns, pa.string()).cast(pa.int64()),
                    rows.headers,
                )
            )
            self._rows = _Rows()

    def columns(self) -> ChunkColumns:
        self._flush()
        parts = self._parts
        if len(parts) == 1:
            return parts[0]
        if not parts:
            empty = pa.array([], pa.binary())
            return ChunkColumns(
                empty, empty, pa.array([], pa.int64()), pa.array([], pa.int64()), []
            )
        return ChunkColumns(
            pa.concat_arrays([p.subjects for p in parts]),
            pa.concat_arrays([p.payloads for p in parts]),
            pa.concat_arrays([p.seqs for p in parts]),
            pa.concat_arrays([p.times_ns for p in parts]),
            [h for p in parts for h in p.headers],
        )


@dataclass
class _Rows:
    subjects: list[bytes] = field(default_factory=list)
    payloads: list[bytes] = field(default_factory=list)
    headers: list[bytes] = field(default_factory=list)
    seqs: list[int] = field(default_factory=list)
    times_ns: list[bytes] = field(default_factory=list)


@dataclass(frozen=True)
class ChunkColumns:
    """A chunk's columns: subjects and payloads (binary), seqs and times in ns (int64) as
    Arrow arrays; the header blocks (b"" for none) as a list."""

    subjects: Any
    payloads: Any
    seqs: Any
    times_ns: Any
    headers: list[bytes]


def _consumer_config(name: str, filters: tuple[str, ...]) -> dict[str, Any]:
    config: dict[str, Any] = {
        "name": name,
        "ack_policy": "none",
        "replay_policy": "instant",
        "mem_storage": True,
        "num_replicas": 1,
        "inactive_threshold": _INACTIVE_THRESHOLD_NS,
    }
    if len(filters) == 1:
        config["filter_subject"] = filters[0]
    elif filters:
        config["filter_subjects"] = list(filters)
    return config


def _create_consumer(conn: Connection, stream: str, config: dict[str, Any]) -> str:
    name = str(config["name"])
    api(
        conn,
        f"CONSUMER.CREATE.{stream}.{name}",
        {"stream_name": stream, "config": config},
        f"creating a reader on stream '{stream}'",
    )
    return name


def _delete_consumer(conn: Connection, stream: str, name: str) -> None:
    # Best effort: the inactive threshold removes it anyway if this fails.
    with contextlib.suppress(Exception):
        api(conn, f"CONSUMER.DELETE.{stream}.{name}", None, "deleting a reader")


def filters_can_match(state: StreamState, filters: tuple[str, ...]) -> bool:
    """Can any of `filters` match a subject the stream stores (always, without filters)?"""
    if not state.subjects or not filters:
        return True
    return any(subjects_collide(f, s) for f in filters for s in state.subjects)


def check_filters(state: StreamState, filters: tuple[str, ...]) -> None:
    """A filter no subject of the stream can match reads nothing, which is a mistake rather
    than a wish (servers accept it silently): refuse it while the query is planned."""
    if not state.subjects:  # a mirror or a sourced stream: no subjects to check against
        return
    for f in filters:
        if not any(subjects_collide(f, s) for s in state.subjects):
            raise OptionError(
                "subject",
                f"filter '{f}' matches no subject of stream '{state.name}' "
                f"({', '.join(state.subjects)})",
            )


def _ack_fields(reply: bytes) -> tuple[int, int, int]:
    """(stream seq, timestamp ns, pending) from a `$JS.ACK` subject, in either layout:
    `$JS.ACK.<stream>.<consumer>.<delivered>.<sseq>.<cseq>.<ts>.<pending>` (9 tokens) or with
    domain and account hash before the stream (12 tokens or more)."""
    t = reply.split(b".")
    if len(t) == 9:
        return int(t[5]), int(t[7]), int(t[8])
    if len(t) >= 11:
        return int(t[7]), int(t[9]), int(t[10])
    raise ProtocolError(f"unexpected JetStream reply subject {reply[:120]!r}")


class _RangePull:
    """State of one pull loop: the callback appends into the current chunk."""

    def __init__(self, end: int, with_headers: bool, filters: tuple[str, ...]) -> None:
        self.end = end
        self.with_headers = with_headers
        self.filters = filters
        self.prefix = b""
        self.chunk = Chunk()
        self.first_seq = 0
        self.last_seq = 0
        self.done = False
        self.outstanding = 0  # messages asked for by pull requests and not delivered yet
        self.received = 0
        self.error = ""
        self.stalled = False
        self.last_ask = 0  # the size of the last pull sent
        self.serial = False  # a pull was refused as redundant: one pull at a time from now on

    def on_consumer(self, stream: str, consumer: str) -> None:
        """A (new) consumer: replies in the common 9-token layout start with this prefix, and
        nothing asked of an abandoned consumer is still on its way to us."""
        self.prefix = f"$JS.ACK.{stream}.{consumer}.".encode()
        self.outstanding = 0
        self.stalled = False

    def on_msg(self, subject: bytes, reply: bytes, header: bytes, payload: bytes) -> None:
        if not reply:
            code = status_of(header)
            if code == 408 and b"Requests Pending" in header:
                # Refused: the pull already waiting covers every message left (nats-server's
                # rule for no_wait pulls). Not the end: wait for that one, pipeline no more.
                self.outstanding -= self.last_ask
                self.serial = True
            elif code in (404, 408):  # nothing more stored: the range is complete
                self.done = True
            elif code == 503:  # the consumer is not there (yet, or any more): a leader moved
                self.stalled = True
            elif code != 100:  # 100 is an idle heartbeat; 409 and others end the read
                self.error = header.split(b"\r\n", 1)[0].decode(errors="replace")
            return
        if reply.startswith(self.prefix):
            _, sseq, _, ts, left = reply[len(self.prefix) :].split(b".")
            seq = int(sseq)
        else:
            seq, ts_ns, pending = _ack_fields(reply)
            ts, left = str(ts_ns).encode(), str(pending).encode()
        self.outstanding -= 1
        if seq >= self.end:
            self.done = True
            return
        if not self.first_seq:
            self.first_seq = seq
        self.last_seq = seq
        self.chunk.append(subject, payload, header if self.with_headers else b"", seq, ts)
        self.received += 1
        if left == b"0" or seq >= self.end - 1:
            self.done = True

    def on_run(self, run: MsgRun) -> None:
        """`on_msg` for a run of messages without headers, in Arrow (frames.py)."""
        n = len(run)
        prefix = self.prefix
        fields = pc.split_pattern(
            pc.binary_slice(run.replies, len(prefix), 1 << 16), b"."
        )  # <delivered>.<sseq>.<cseq>.<ts>.<pending>
        # A run's replies name one consumer, in one layout: the first tells.
        if not (
            run.replies[0].as_py().startswith(prefix)
            and pc.all(pc.equal(pc.list_value_length(fields), 5)).as_py()
        ):
            # Another layout (with a domain): one by one.
            for s, r, p in zip(
                run.subjects.to_pylist(),
                run.replies.to_pylist(),
                run.payloads.to_pylist(),
                strict=True,
            ):
                self.on_msg(s, r, b"", p)
            return
        seqs = _digits(pc.list_element(fields, 1))
        self.outstanding -= n
        seq_values = seqs.to_numpy()
        keep = int(np.searchsorted(seq_values, self.end))  # sequences only grow
        if keep < n:
            self.done = True
        if keep == 0:
            return
        times = _digits(pc.list_element(fields, 3)[:keep])
        if not self.first_seq:
            self.first_seq = int(seq_values[0])
        self.last_seq = int(seq_values[keep - 1])
        self.chunk.extend(run.subjects[:keep], run.payloads[:keep], seqs[:keep], times)
        self.received += keep
        # Nothing pending after a message: its reply ends in ".0".
        if self.last_seq >= self.end - 1 or pc.any(pc.ends_with(run.replies[:keep], ".0")).as_py():
            self.done = True


def _digits(array: Any) -> Any:
    """Decimal digits (binary) as int64."""
    return pc.cast(pc.cast(array, pa.string()), pa.int64())


LAST_PER_SUBJECT = "last_per_subject"

# A pull that brings nothing at all within `requestTimeout`, or a 503 status (lost in a cluster
# while a stream or consumer leader moves), is retried this many times, each from a new consumer.
PULL_RETRIES = 2


class _Puller:
    """One ephemeral consumer and the inbox its pulls answer to. A stalled one is replaced by a
    new consumer starting after the last message received, on a new inbox (late messages of the
    old one are ignored), so a retry can neither skip nor repeat a message."""

    def __init__(
        self, conn: Connection, stream: str, pull: _RangePull, start: int, deliver: str
    ) -> None:
        self.conn = conn
        self.stream = stream
        self.pull = pull
        self.deliver = deliver
        self.config = _consumer_config("", pull.filters)
        self.name = ""
        self.sid = b""
        self.inbox = b""
        self.next_subject = b""
        self.open(start)

    def open(self, start: int) -> None:
        self.config["name"] = "spark_" + secrets.token_hex(8)
        if self.deliver == LAST_PER_SUBJECT:
            self.config["deliver_policy"] = LAST_PER_SUBJECT
        else:
            self.config.update(deliver_policy="by_start_sequence", opt_start_seq=start)
        self.name = _create_consumer(self.conn, self.stream, self.config)
        self.pull.on_consumer(self.stream, self.name)
        inbox = new_inbox()
        self.sid = self.conn.subscribe(inbox, self.pull.on_msg, runs=self.pull.on_run)
        self.inbox = inbox.encode()
        self.next_subject = f"$JS.API.CONSUMER.MSG.NEXT.{self.stream}.{self.name}".encode()

    def request(self, want: int) -> None:
        body = b'{"batch":%d,"no_wait":true}' % want
        self.conn.send(pub_frame(self.next_subject, body, self.inbox))

    def close(self) -> None:
        self.conn.unsubscribe(self.sid)
        _delete_consumer(self.conn, self.stream, self.name)

    def reopen(self, start: int) -> None:
        self.close()
        self.open(start)


def read_range(
    conn: Connection,
    stream: str,
    start: int,
    end: int,
    filters: tuple[str, ...],
    *,
    batch_size: int,
    chunk_rows: int,
    with_headers: bool,
    fail_on_data_loss: bool,
    deliver: str = "by_start_sequence",
) -> Iterator[Chunk]:
    """The messages of `stream` with start <= seq < end (and matching `filters`), in order, as
    chunks of about `chunk_rows`. An ephemeral AckNone consumer from `start`; pulls with
    `no_wait` (never waiting for new messages), each for at most what is left of the range.
    The next pull is sent when half of the previous one has arrived, so the server prepares a
    batch while this process parses the last one (measured: +15-25% on a 2-core box).
    With `deliver=LAST_PER_SUBJECT`, only the last message of each subject (a key-value
    bucket's latest values), from the start of the stream."""
    if end <= start:
        return
    pull = _RangePull(end, with_headers, filters)
    puller = _Puller(conn, stream, pull, start, deliver)
    timeout = conn.options.request_timeout
    last_want = [0]
    bytes_before = conn.bytes_received
    checked_loss = deliver == LAST_PER_SUBJECT  # a gap at the start is the point there
    # A new last-per-subject consumer starts over: it cannot resume after a stall.
    retries = 0 if deliver == LAST_PER_SUBJECT else PULL_RETRIES

    def wanted() -> int:
        """How many to pull now: 0 while enough is on its way or the range is covered."""
        if pull.outstanding > last_want[0] // 2 or (pull.serial and pull.outstanding > 0):
            return 0
        # At most what is left of the range beyond what was already asked for.
        left = end - 1 - max(pull.last_seq, start - 1) - pull.outstanding
        if left <= 0:
            return 0 if pull.outstanding > 0 else 1
        if filters and pull.received:
            # A filtered consumer skips sequences, and the server sends what a pull asks for
            # even past the range's end (the next task's share): ask for about the matches
            # left in the range at the density seen so far, a little more, never less than 1.
            seen = pull.last_seq - start + 1
            left = min(left, pull.received * (end - 1 - pull.last_seq) // seen + _FILTER_SLACK)
        # Bound the bytes one pull brings (large messages would otherwise pile up in the
        # server's buffer for us, up to a slow-consumer disconnect): sized by what came so far.
        if pull.received:
            per_msg = max((conn.bytes_received - bytes_before) // pull.received, 1)
            cap = max(1, min(batch_size, _PULL_BYTES // per_msg))
        else:
            cap = min(batch_size, _FIRST_PULL)
        return min(cap, left)

    def ready() -> bool:
        return pull.done or pull.stalled or len(pull.chunk) >= chunk_rows or wanted() > 0

    try:
        while not pull.done:
            want = wanted()
            if want:
                puller.request(want)
                pull.outstanding += want
                pull.last_ask = last_want[0] = want
            try:
                conn.run(ready, timeout, f"messages of stream '{stream}'")
            except RequestTimeout:
                if not retries:
                    raise
                pull.stalled = True
            if pull.stalled:
                if not retries:
                    raise ProtocolError(
                        f"reading stream '{stream}' stopped: its consumer is unavailable "
                        f"on {conn.server} (503)"
                    )
                retries -= 1
                log.warning(
                    "nats: reading stream '%s' from %s stalled; reading on from sequence %d "
                    "with a new consumer",
                    stream,
                    conn.server,
                    max(pull.last_seq + 1, start),
                )
                puller.reopen(max(pull.last_seq + 1, start))
                last_want[0] = 0
                continue
            if pull.error:
                raise ProtocolError(f"reading stream '{stream}' stopped: {pull.error}")
            if not checked_loss and pull.first_seq:
                checked_loss = True
                _check_loss(conn, stream, start, pull.first_seq, fail_on_data_loss)
            if len(pull.chunk) >= chunk_rows:
                yield pull.chunk
                pull.chunk = Chunk()
        if not checked_loss:
            _check_loss(conn, stream, start, end, fail_on_data_loss)
        if len(pull.chunk):
            yield pull.chunk
    finally:
        puller.close()


def _check_loss(conn: Connection, stream: str, start: int, first_read: int, fail: bool) -> None:
    """A gap at the start of a range is normal (filters, deleted messages) unless retention has
    removed the range's beginning: that is data loss."""
    if first_read <= start or not fail:
        return
    state = stream_info(conn, stream)
    if state.first_seq > start:
        raise DataLossError(
            f"stream '{stream}' no longer holds sequences {start}.."
            f"{state.first_seq - 1} (removed by retention or purge); set "
            "failOnDataLoss=false to skip them"
        )


def sequence_at_time(
    conn: Connection, stream: str, time_ns: int, filters: tuple[str, ...]
) -> int | None:
    """The sequence of the first message stored at or after `time_ns`, None if there is none."""
    config = _consumer_config("spark_" + secrets.token_hex(8), filters)
    config.update(deliver_policy="by_start_time", opt_start_time=rfc3339(time_ns))
    name = _create_consumer(conn, stream, config)
    found: list[int] = []
    done: list[bool] = []

    def on_msg(subject: bytes, reply: bytes, header: bytes, payload: bytes) -> None:
        if reply:
            found.append(_ack_fields(reply)[0])
        done.append(True)

    inbox = new_inbox()
    sid = conn.subscribe(inbox, on_msg)
    try:
        conn.send(
            pub_frame(
                f"$JS.API.CONSUMER.MSG.NEXT.{stream}.{name}".encode(),
                b'{"batch":1,"no_wait":true}',
                inbox.encode(),
            )
        )
        conn.run(lambda: bool(done), conn.options.request_timeout, "a message by time")
    finally:
        conn.unsubscribe(sid)
        _delete_consumer(conn, stream, name)
    return found[0] if found else None


def rfc3339(time_ns: int) -> str:
    """The start time as the server reads it (Go's RFC3339Nano, in UTC)."""
    return format_go_time(time_ns)


# --- publishing --------------------------------------------------------------------------------

# (subject, header block or b"", payload)
Outgoing = tuple[bytes, bytes, bytes]

# Frames written to the socket at once, at most.
_FRAMES_PER_WRITE = 1024


@dataclass(frozen=True)
class FrameBlock:
    """Publish frames back to back in `data` from offset `start`; frame i ends at `ends[i]`
    (increasing). Built per Arrow batch (batch_frames.py), so a block is written without a
    Python call per message."""

    data: Any  # bytes, or a pyarrow Buffer
    ends: Any  # a sequence of ints (a numpy array)
    start: int = 0

    def __len__(self) -> int:
        return len(self.ends)

    def frames(self, first: int, last: int) -> memoryview:
        """Frames first <= i < last."""
        start = int(self.ends[first - 1]) if first else self.start
        return memoryview(self.data)[start : int(self.ends[last - 1])]


def frame_block(frames: list[bytes]) -> FrameBlock:
    """A block of frames built one by one (`pub_frame`)."""
    return FrameBlock(b"".join(frames), np.cumsum([len(f) for f in frames], dtype=np.int64))


def blocks_of(
    messages: Iterable[Outgoing], reply: bytes, per_block: int = 4096
) -> Iterator[FrameBlock]:
    """Messages as frame blocks, all with the reply subject `reply` (b"" for none)."""
    frames: list[bytes] = []
    for subject, header, payload in messages:
        frames.append(pub_frame(subject, payload, reply, header))
        if len(frames) >= per_block:
            yield frame_block(frames)
            frames = []
    if frames:
        yield frame_block(frames)


@dataclass
class PublishResult:
    published: int = 0
    duplicates: int = 0


def publish_core(conn: Connection, blocks: Iterable[FrameBlock]) -> int:
    """Fire-and-forget publishes; a final PING/PONG makes sure the server has processed them
    all (and surfaces a -ERR such as a permissions violation)."""
    count = 0
    for block in blocks:
        n = len(block)
        for first in range(0, n, _FRAMES_PER_WRITE):
            conn.send(block.frames(first, min(n, first + _FRAMES_PER_WRITE)))
        count += n
    conn.flush(conn.options.request_timeout)
    return count


_ERROR = b'"error"'
_DUPLICATE = b'"duplicate":true'


class _Acks:
    """Counts acks; keeps the first failure as the exception `check` raises, said once."""

    def __init__(self) -> None:
        self.received = 0
        self.duplicates = 0
        self.error: NatsSparkError | None = None

    def on_ack(self, subject: bytes, reply: bytes, header: bytes, payload: bytes) -> None:
        self.received += 1
        if self.error is None and header and status_of(header) == 503:
            self.error = NoResponders(
                "publish: no stream captures the subject (no responders); "
                "create a stream for it or use publishMode=core"
            )
        elif _ERROR in payload:
            if self.error is None:
                err = json.loads(payload).get("error", {})
                self.error = JetStreamError(
                    "publish",
                    int(err.get("code", 0)),
                    int(err.get("err_code", 0)),
                    str(err.get("description", "")),
                )
        elif _DUPLICATE in payload or b'"duplicate": true' in payload:
            self.duplicates += 1

    def on_run(self, run: MsgRun) -> None:
        """Acks parsed in bulk (frames.py): counted in Arrow; the failed ones, if any, one by
        one."""
        payloads = run.payloads
        failed = pc.match_substring(payloads, _ERROR.decode())
        if pc.any(failed).as_py():
            for payload in payloads.filter(failed).to_pylist():
                self.on_ack(b"", b"", b"", payload)
            payloads = payloads.filter(pc.invert(failed))
        self.received += len(payloads)
        self.duplicates += pc.sum(pc.match_substring(payloads, _DUPLICATE.decode())).as_py() or 0
        self.duplicates += pc.sum(pc.match_substring(payloads, '"duplicate": true')).as_py() or 0


def publish_acked(
    conn: Connection, blocks: Iterable[FrameBlock], reply: bytes, window: int
) -> PublishResult:
    """JetStream publishes whose frames (`blocks`) all carry the reply subject `reply` (a new
    inbox), at most `window` awaiting an ack. Acks are counted, not matched: any negative ack
    fails the whole call, Spark then retries the task, and the `Nats-Msg-Id` headers make the
    messages already stored count as duplicates instead of twice."""
    acks = _Acks()
    sid = conn.subscribe(reply.decode(), acks.on_ack, runs=acks.on_run, runs_have_replies=False)
    timeout = conn.options.request_timeout
    sent = 0
    low_water = max(window // 2, 1)

    def acked_beyond(seen: int) -> Callable[[], bool]:
        return lambda: acks.received > seen

    def await_acks(target: int) -> None:
        """Until `target` acks have come. `requestTimeout` bounds a wait without any ack, not
        the whole wait: on a busy machine half a large window may take longer than that."""
        while acks.received < target:
            # A server drops publishes past a stream's inbound queue limit (nats-server's
            # `max_buffered_msgs`) without an ack: then this times out, naming the window.
            what = f"publish acks ({sent - acks.received} outstanding, option 'maxInFlight')"
            conn.run(acked_beyond(acks.received), timeout, what)
            if acks.error is not None:
                raise acks.error

    try:
        for block in blocks:
            n, first = len(block), 0
            while first < n:
                room = window - (sent - acks.received)
                if room <= 0:
                    await_acks(sent - low_water + 1)
                    continue
                last = min(n, first + min(room, _FRAMES_PER_WRITE))
                conn.send(block.frames(first, last))
                sent += last - first
                first = last
        await_acks(sent)
        if acks.error is not None:
            raise acks.error
    finally:
        conn.unsubscribe(sid)
    return PublishResult(published=sent - acks.duplicates, duplicates=acks.duplicates)
