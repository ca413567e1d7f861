"""The data source's options: one table, parsed and validated once, into frozen dataclasses.

Spark hands every option over as a string in a case-insensitive dict. This module is the only place
that reads those strings: everything downstream gets typed, validated values, so a bad option fails
on the driver, while the query is planned, with an error naming it (never later, in a task).
Names follow Spark's Kafka source where the meaning matches (`startingOffsets`, `endingOffsets`,
`maxRecordsPerTrigger`, `minPartitions`, `failOnDataLoss`, `includeHeaders`).
"""

from __future__ import annotations

import difflib
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import Enum
from typing import Literal
from urllib.parse import unquote, urlsplit

from pynatsd.spark.errors import OptionError
from pynatsd.subjects import is_valid_subject

Use = Literal["read", "stream-read", "subject-read", "kv-read", "write", "any"]
Mode = Literal["batch", "stream"]


@dataclass(frozen=True)
class OptionSpec:
    name: str
    uses: tuple[Use, ...]
    default: str
    help: str


# The table is data: the parser, the error messages and docs/spark.md's options table follow it.
OPTIONS: tuple[OptionSpec, ...] = (
    OptionSpec(
        "servers",
        ("any",),
        "nats://127.0.0.1:4222",
        "Comma list of server URLs (`nats://`, `tls://`, `host:port`; `user:pass@` allowed).",
    ),
    OptionSpec(
        "stream",
        ("read", "write"),
        "",
        "Read: the JetStream stream (replayable), or a comma list of streams. Write: the "
        "stream expected to store the messages (JetStream publish with acks).",
    ),
    OptionSpec(
        "subject",
        ("read", "write"),
        "",
        "Read with `stream`: filter subject(s), comma list. Read without: the core "
        "subject(s) to subscribe to (live). Write: the target subject, overriding a "
        "`subject` column.",
    ),
    OptionSpec(
        "startingOffsets",
        ("stream-read",),
        "earliest",
        '`earliest`, `latest`, a sequence number, or JSON `{"<stream>": <seq>}` '
        "(-2 earliest, -1 latest). New queries only: a restart resumes from the "
        "checkpoint.",
    ),
    OptionSpec(
        "startingTimestamp",
        ("stream-read",),
        "",
        "Start at the first message stored at or after this time: ISO-8601 or epoch ms.",
    ),
    OptionSpec(
        "endingOffsets",
        ("stream-read",),
        "latest",
        "Batch reads: exclusive end, `latest`, a sequence number or JSON; fixed at planning.",
    ),
    OptionSpec(
        "maxRecordsPerTrigger",
        ("stream-read",),
        "",
        "Streaming reads: at most this many sequence numbers per micro-batch "
        "(alias `maxOffsetsPerTrigger`).",
    ),
    OptionSpec(
        "minPartitions",
        ("stream-read",),
        "2",
        "Spark tasks a large range is split into (contiguous sequence ranges).",
    ),
    OptionSpec(
        "minRowsPerPartition",
        ("stream-read",),
        "50000",
        "A range is split only so that each task gets at least this many sequence numbers.",
    ),
    OptionSpec(
        "failOnDataLoss",
        ("stream-read",),
        "true",
        "Fail when a range to read starts below the stream's first sequence (retention "
        "removed it); `false` skips ahead and logs a warning.",
    ),
    OptionSpec(
        "includeHeaders",
        ("read",),
        "false",
        "Add the `headers` column (`map<string,array<string>>`, repeated keys kept).",
    ),
    OptionSpec(
        "fetchBatchSize",
        ("stream-read",),
        "10000",
        "Messages per pull request (`$JS.API.CONSUMER.MSG.NEXT`), fewer when messages are large "
        "(a pull brings about 4 MiB at most).",
    ),
    OptionSpec(
        "requestTimeout",
        ("any",),
        "5",
        "Seconds to wait for a JetStream API reply, a pull batch or a publish ack.",
    ),
    OptionSpec(
        "bucket",
        ("kv-read", "write"),
        "",
        "A key-value bucket. Read (batch): one row per key with its latest value, or every "
        "revision with `history`. Write: each row's `key` column is put with its `data`.",
    ),
    OptionSpec(
        "history",
        ("kv-read",),
        "false",
        "Bucket reads: every revision of every key (puts, deletes and purges), not only the "
        "latest value of the keys that exist.",
    ),
    OptionSpec(
        "queue",
        ("subject-read",),
        "",
        "Live subject reads: queue group, so several queries share the messages.",
    ),
    OptionSpec(
        "bufferSize",
        ("subject-read",),
        "100000",
        "Live subject reads: messages held between micro-batches.",
    ),
    OptionSpec(
        "onBufferFull",
        ("subject-read",),
        "fail",
        "Live subject reads: `fail` the query, or `drop` new messages and count them.",
    ),
    OptionSpec(
        "maxMessages",
        ("subject-read",),
        "",
        "Batch subject capture: stop after this many messages.",
    ),
    OptionSpec(
        "timeout", ("subject-read",), "10", "Batch subject capture: stop after this many seconds."
    ),
    OptionSpec(
        "publishMode",
        ("write",),
        "auto",
        "`core`, `jetstream` (acked, deduplicated) or `auto`: `jetstream` when `stream` is "
        "given or a stream captures the `subject` option, else `core`.",
    ),
    OptionSpec(
        "msgIdColumn",
        ("write",),
        "",
        "Column holding each row's `Nats-Msg-Id` (else `<stream>:<seq>` of source rows, "
        "else derived from the query, batch, partition and row).",
    ),
    OptionSpec(
        "maxInFlight",
        ("write",),
        "4000",
        "JetStream writes: publishes awaiting their ack, per task.",
    ),
    OptionSpec("nats.user", ("any",), "", "User name."),
    OptionSpec("nats.password", ("any",), "", "Password."),
    OptionSpec("nats.token", ("any",), "", "Authorization token."),
    OptionSpec("nats.creds", ("any",), "", "Path of a `.creds` file (user JWT and nkey seed)."),
    OptionSpec("nats.nkey_seed", ("any",), "", "Path of an nkey seed file, or the seed itself."),
    OptionSpec("nats.name", ("any",), "pynatsd-spark", "Client name shown by the server."),
    OptionSpec("nats.connect_timeout", ("any",), "5", "Seconds to connect to one server."),
    OptionSpec("tls.ca", ("any",), "", "CA file to verify the server's certificate."),
    OptionSpec("tls.cert", ("any",), "", "Client certificate file (with `tls.key`)."),
    OptionSpec("tls.key", ("any",), "", "Client private key file."),
)

_ALIASES = {"maxoffsetspertrigger": "maxrecordspertrigger"}

# Spark adds these to a streaming sink's options by itself; they are not ours to judge.
_SPARK_SINK_KEYS = frozenset({"checkpointlocation"})

_SPECS = {spec.name.lower(): spec for spec in OPTIONS}


# --- connection --------------------------------------------------------------------------------


@dataclass(frozen=True)
class ServerAddress:
    host: str
    port: int
    tls: bool
    user: str = ""
    password: str = ""

    def __str__(self) -> str:
        return f"{'tls' if self.tls else 'nats'}://{self.host}:{self.port}"


@dataclass(frozen=True)
class ConnectOptions:
    servers: tuple[ServerAddress, ...]
    user: str = ""
    password: str = ""
    token: str = ""
    creds: str = ""
    nkey_seed: str = ""
    name: str = "pynatsd-spark"
    connect_timeout: float = 5.0
    request_timeout: float = 5.0
    tls_ca: str = ""
    tls_cert: str = ""
    tls_key: str = ""

    @property
    def wants_tls(self) -> bool:
        return bool(self.tls_ca or self.tls_cert) or any(s.tls for s in self.servers)


# --- read positions ----------------------------------------------------------------------------


class PositionKind(Enum):
    EARLIEST = "earliest"
    LATEST = "latest"
    SEQ = "seq"
    TIME = "time"


@dataclass(frozen=True)
class Position:
    """Where a range starts or ends, before it is resolved against the stream's state."""

    kind: PositionKind
    seq: int = 0
    time_ns: int = 0

    @classmethod
    def earliest(cls) -> Position:
        return cls(PositionKind.EARLIEST)

    @classmethod
    def latest(cls) -> Position:
        return cls(PositionKind.LATEST)


@dataclass(frozen=True)
class StreamReadOptions:
    connect: ConnectOptions
    stream: str
    filters: tuple[str, ...]
    starting: Position
    ending: Position
    max_records_per_trigger: int | None
    min_partitions: int
    min_rows_per_partition: int
    fail_on_data_loss: bool
    include_headers: bool
    fetch_batch_size: int


@dataclass(frozen=True)
class SubjectReadOptions:
    connect: ConnectOptions
    subjects: tuple[str, ...]
    include_headers: bool
    queue: str
    buffer_size: int
    drop_when_full: bool
    max_messages: int | None
    timeout: float


@dataclass(frozen=True)
class KvReadOptions:
    connect: ConnectOptions
    bucket: str
    history: bool
    fetch_batch_size: int

    @property
    def stream(self) -> str:
        """The stream a bucket lives in (nats-server's and the clients' naming)."""
        return f"KV_{self.bucket}"

    @property
    def prefix(self) -> str:
        """The subject of key K is `<prefix>K`."""
        return f"$KV.{self.bucket}."


@dataclass(frozen=True)
class MultiStreamReadOptions:
    """Several streams in one query (`stream` is a comma list): one set of options each, the
    same but for their positions, which JSON offsets give per stream."""

    parts: tuple[StreamReadOptions, ...]


ReadOptions = StreamReadOptions | SubjectReadOptions | KvReadOptions | MultiStreamReadOptions


class PublishMode(Enum):
    AUTO = "auto"
    CORE = "core"
    JETSTREAM = "jetstream"


@dataclass(frozen=True)
class WriteOptions:
    connect: ConnectOptions
    subject: str
    stream: str
    publish_mode: PublishMode
    msg_id_column: str
    max_in_flight: int
    bucket: str = ""  # a key-value bucket: subjects are `$KV.<bucket>.<key column>`


# --- parsing -----------------------------------------------------------------------------------


class _Raw:
    """The user's options, lower-cased and checked against the table, with typed getters."""

    def __init__(self, options: Mapping[str, str], allowed: tuple[Use, ...], what: str) -> None:
        self.values: dict[str, str] = {}
        for key, value in options.items():
            low = _ALIASES.get(key.lower(), key.lower())
            if low in _SPARK_SINK_KEYS and "write" in allowed:
                continue
            if low == "path":
                raise OptionError(
                    key,
                    "the nats source takes no path; use the options "
                    "'stream' and/or 'subject' (load() and save() without "
                    "arguments)",
                )
            spec = _SPECS.get(low)
            if spec is None:
                # The likely fix alone when there is one: a message's last line is what Spark
                # (and Spark Connect, which cuts long messages) shows.
                close = difflib.get_close_matches(low, list(_SPECS), n=1)
                if close:
                    raise OptionError(
                        key, f"unknown option; did you mean '{_SPECS[close[0]].name}'?"
                    )
                raise OptionError(
                    key, "unknown option; known options: " + ", ".join(s.name for s in OPTIONS)
                )
            if "any" not in spec.uses and not _applies(spec.uses, allowed):
                raise OptionError(spec.name, f"does not apply to {what}")
            if low in self.values:
                raise OptionError(spec.name, "given twice (an alias and its name)")
            self.values[low] = value

    def has(self, name: str) -> bool:
        return name.lower() in self.values

    def text(self, name: str) -> str:
        return self.values.get(name.lower(), _SPECS[name.lower()].default).strip()

    def integer(self, name: str, minimum: int) -> int:
        raw = self.text(name)
        try:
            value = int(raw)
        except ValueError:
            raise OptionError(name, f"expected an integer, got {raw!r}") from None
        if value < minimum:
            raise OptionError(name, f"must be >= {minimum}, got {value}")
        return value

    def optional_integer(self, name: str, minimum: int) -> int | None:
        return self.integer(name, minimum) if self.text(name) else None

    def boolean(self, name: str) -> bool:
        raw = self.text(name).lower()
        if raw in ("true", "1", "yes"):
            return True
        if raw in ("false", "0", "no"):
            return False
        raise OptionError(name, f"expected true or false, got {raw!r}")

    def seconds(self, name: str) -> float:
        raw = self.text(name)
        return parse_seconds(name, raw)


def _applies(uses: tuple[Use, ...], allowed: tuple[Use, ...]) -> bool:
    return any(u in allowed for u in uses)


def parse_seconds(name: str, raw: str) -> float:
    """`5`, `2.5`, `500ms`, `5s`, `2m` -> seconds; must be positive."""
    text = raw.strip().lower()
    scale = 1.0
    for suffix, factor in (("ms", 0.001), ("s", 1.0), ("m", 60.0)):
        if text.endswith(suffix):
            text, scale = text[: -len(suffix)], factor
            break
    try:
        value = float(text) * scale
    except ValueError:
        raise OptionError(name, f"expected seconds (e.g. 5, 2.5, 500ms), got {raw!r}") from None
    if not value > 0:
        raise OptionError(name, f"must be positive, got {raw!r}")
    return value


def parse_servers(raw: str) -> tuple[ServerAddress, ...]:
    servers = []
    for item in (s.strip() for s in raw.split(",")):
        if not item:
            continue
        url = urlsplit(item if "://" in item else f"nats://{item}")
        if url.scheme not in ("nats", "tls"):
            raise OptionError(
                "servers", f"unsupported scheme {url.scheme!r} in {item!r} (use nats:// or tls://)"
            )
        try:
            port = url.port or 4222
        except ValueError:
            raise OptionError("servers", f"bad port in {item!r}") from None
        if not url.hostname:
            raise OptionError("servers", f"no host in {item!r}")
        servers.append(
            ServerAddress(
                url.hostname,
                port,
                url.scheme == "tls",
                unquote(url.username or ""),
                unquote(url.password or ""),
            )
        )
    if not servers:
        raise OptionError("servers", "no server URL given")
    return tuple(servers)


def _connect_options(raw: _Raw) -> ConnectOptions:
    for name in ("nats.creds", "tls.ca", "tls.cert", "tls.key"):
        path = raw.text(name)
        if path and not os.path.isfile(path):
            raise OptionError(name, f"no such file: {path!r}")
    if raw.text("tls.key") and not raw.text("tls.cert"):
        raise OptionError("tls.key", "needs 'tls.cert' too")
    if raw.text("tls.cert") and not raw.text("tls.key"):
        raise OptionError("tls.cert", "needs 'tls.key' too")
    seed = raw.text("nats.nkey_seed")
    if seed and not os.path.isfile(seed) and not seed.startswith("SU"):
        raise OptionError(
            "nats.nkey_seed", "expected the path of a seed file or a user seed (SU...)"
        )
    if raw.text("nats.password") and not raw.text("nats.user"):
        raise OptionError("nats.password", "needs 'nats.user' too")
    return ConnectOptions(
        servers=parse_servers(raw.text("servers")),
        user=raw.text("nats.user"),
        password=raw.text("nats.password"),
        token=raw.text("nats.token"),
        creds=raw.text("nats.creds"),
        nkey_seed=seed,
        name=raw.text("nats.name"),
        connect_timeout=raw.seconds("nats.connect_timeout"),
        request_timeout=raw.seconds("requestTimeout"),
        tls_ca=raw.text("tls.ca"),
        tls_cert=raw.text("tls.cert"),
        tls_key=raw.text("tls.key"),
    )


def _subjects(name: str, raw: str) -> tuple[str, ...]:
    subjects = tuple(s.strip() for s in raw.split(",") if s.strip())
    for subject in subjects:
        # The server's own rules (pynatsd.subjects): no empty tokens or whitespace, `>` last.
        if not is_valid_subject(subject):
            raise OptionError(name, f"invalid subject {subject!r}")
    return subjects


def _position(name: str, raw: str, stream: str, allow_earliest: bool) -> Position:
    text = raw.strip()
    low = text.lower()
    if low == "earliest" and allow_earliest:
        return Position.earliest()
    if low == "latest":
        return Position.latest()
    expected = (
        "'earliest', 'latest'" if allow_earliest else "'latest'"
    ) + f', a sequence number or JSON {{"{stream}": <seq>}}'
    if text.startswith("{"):
        try:
            parsed = json.loads(text)
        except ValueError:
            raise OptionError(name, f"invalid JSON {text!r}; expected {expected}") from None
        if not isinstance(parsed, dict) or set(parsed) != {stream}:
            raise OptionError(
                name, f"the JSON must name exactly the stream {stream!r}, got {text!r}"
            )
        value = parsed[stream]
        if not isinstance(value, int) or isinstance(value, bool):
            raise OptionError(name, f"the sequence must be an integer, got {value!r}")
        if value == -2 and allow_earliest:
            return Position.earliest()
        if value == -1:
            return Position.latest()
        seq = value
    else:
        try:
            seq = int(text)
        except ValueError:
            raise OptionError(name, f"expected {expected}, got {text!r}") from None
    if seq < 1:
        raise OptionError(name, f"sequence numbers start at 1, got {seq}")
    return Position(PositionKind.SEQ, seq=seq)


def parse_timestamp(name: str, raw: str) -> int:
    """ISO-8601 (naive means UTC) or epoch milliseconds -> epoch nanoseconds."""
    text = raw.strip()
    if text.lstrip("-").isdigit():
        return _in_range(name, text, int(text) * 1_000_000)
    try:
        when = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise OptionError(name, f"expected ISO-8601 or epoch milliseconds, got {text!r}") from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    delta = when - datetime(1970, 1, 1, tzinfo=UTC)
    return _in_range(
        name,
        text,
        (delta.days * 86_400 + delta.seconds) * 1_000_000_000 + delta.microseconds * 1000,
    )


def _in_range(name: str, text: str, time_ns: int) -> int:
    # Servers compare times as int64 nanoseconds: beyond that a time wraps around (to the past).
    if not 0 <= time_ns < 2**63:
        raise OptionError(name, f"{text!r} is outside 1970..2262")
    return time_ns


def parse_read_options(options: Mapping[str, str], mode: Mode | None) -> ReadOptions:
    """Validate a read's options. `mode` is None when only the schema is wanted (Spark asks for
    it before it says whether the query is batch or streaming)."""
    probe = {k.lower(): v for k, v in options.items()}
    if probe.get("bucket", "").strip():
        return _kv_read_options(_Raw(options, ("read", "kv-read"), "bucket reads"), mode)
    stream = probe.get("stream", "").strip()
    subject_raw = probe.get("subject", "")
    if not stream and not subject_raw.strip():
        raise OptionError(
            "stream",
            "a read needs 'stream' (a JetStream stream, replayable) or "
            "'subject' (a core subject, live); with both, 'subject' "
            "filters the stream",
        )
    if "," in stream:
        return MultiStreamReadOptions(
            tuple(
                _stream_read_options(_Raw(part, ("read", "stream-read"), "stream reads"), s, mode)
                for s, part in _per_stream(options, stream)
            )
        )
    if stream:
        return _stream_read_options(
            _Raw(options, ("read", "stream-read"), "stream reads"), stream, mode
        )
    what = "subject reads (no 'stream' given)"
    return _subject_read_options(_Raw(options, ("read", "subject-read"), what), mode)


def _kv_read_options(raw: _Raw, mode: Mode | None) -> KvReadOptions:
    bucket = raw.text("bucket")
    if not all(c.isalnum() or c in "-_" for c in bucket):
        raise OptionError("bucket", f"invalid bucket name {bucket!r}")
    if mode == "stream":
        raise OptionError("bucket", "a bucket is read in batch only; stream its 'KV_<bucket>'")
    if raw.has("includeHeaders"):
        raise OptionError("includeHeaders", "does not apply to bucket reads")
    return KvReadOptions(
        connect=_connect_options(raw),
        bucket=bucket,
        history=raw.boolean("history"),
        fetch_batch_size=int(_SPECS["fetchbatchsize"].default),
    )


def _per_stream(options: Mapping[str, str], raw: str) -> list[tuple[str, dict[str, str]]]:
    """The options of each stream of a comma list: the same options, with `stream` one name
    and JSON `startingOffsets`/`endingOffsets` reduced to that stream's entry."""
    names = [n.strip() for n in raw.split(",")]
    if "" in names or len(set(names)) != len(names):
        raise OptionError("stream", f"expected distinct stream names, got {raw!r}")
    json_positions: dict[str, dict[str, object]] = {}
    for key, value in options.items():
        if key.lower() in ("startingoffsets", "endingoffsets") and value.strip().startswith("{"):
            try:
                parsed = json.loads(value)
            except ValueError:
                raise OptionError(key, f"invalid JSON {value!r}") from None
            if not isinstance(parsed, dict) or set(parsed) != set(names):
                raise OptionError(key, f"the JSON must name exactly the streams {names}")
            json_positions[key] = parsed
        elif key.lower() in ("startingoffsets", "endingoffsets") and value.strip().lower() not in (
            "earliest",
            "latest",
        ):
            raise OptionError(key, "with several streams: 'earliest', 'latest' or JSON per stream")
    parts = []
    for name in names:
        part = {k: v for k, v in options.items() if k.lower() != "stream"}
        part["stream"] = name
        for key, parsed in json_positions.items():
            part[key] = json.dumps({name: parsed[name]})
        parts.append((name, part))
    return parts


def _check_stream_name(name: str, stream: str) -> None:
    if any(c in stream for c in " \t.*>/\\") or not stream.isprintable():
        raise OptionError(name, f"invalid stream name {stream!r}")


def _stream_read_options(raw: _Raw, stream: str, mode: Mode | None) -> StreamReadOptions:
    _check_stream_name("stream", stream)
    if raw.has("startingOffsets") and raw.has("startingTimestamp"):
        raise OptionError(
            "startingTimestamp", "give 'startingOffsets' or 'startingTimestamp', not both"
        )
    if mode == "stream" and raw.has("endingOffsets"):
        raise OptionError("endingOffsets", "applies to batch reads only (a stream has no end)")
    if mode == "batch" and raw.has("maxRecordsPerTrigger"):
        raise OptionError("maxRecordsPerTrigger", "applies to streaming reads only")
    if raw.has("startingTimestamp"):
        starting = Position(
            PositionKind.TIME,
            time_ns=parse_timestamp("startingTimestamp", raw.text("startingTimestamp")),
        )
    else:
        starting = _position("startingOffsets", raw.text("startingOffsets"), stream, True)
    ending = _position("endingOffsets", raw.text("endingOffsets"), stream, False)
    return StreamReadOptions(
        connect=_connect_options(raw),
        stream=stream,
        filters=_subjects("subject", raw.text("subject")),
        starting=starting,
        ending=ending,
        max_records_per_trigger=raw.optional_integer("maxRecordsPerTrigger", 1),
        min_partitions=raw.integer("minPartitions", 1),
        min_rows_per_partition=raw.integer("minRowsPerPartition", 1),
        fail_on_data_loss=raw.boolean("failOnDataLoss"),
        include_headers=raw.boolean("includeHeaders"),
        fetch_batch_size=raw.integer("fetchBatchSize", 1),
    )


def _subject_read_options(raw: _Raw, mode: Mode | None) -> SubjectReadOptions:
    if mode == "stream" and (raw.has("maxMessages") or raw.has("timeout")):
        name = "maxMessages" if raw.has("maxMessages") else "timeout"
        raise OptionError(name, "applies to batch captures of a subject only")
    if mode == "batch" and raw.has("onBufferFull"):
        raise OptionError("onBufferFull", "applies to streaming reads of a subject only")
    full = raw.text("onBufferFull").lower()
    if full not in ("fail", "drop"):
        raise OptionError("onBufferFull", f"expected 'fail' or 'drop', got {full!r}")
    queue = raw.text("queue")
    if any(c.isspace() for c in queue):
        raise OptionError("queue", f"invalid queue group {queue!r}")
    return SubjectReadOptions(
        connect=_connect_options(raw),
        subjects=_subjects("subject", raw.text("subject")),
        include_headers=raw.boolean("includeHeaders"),
        queue=queue,
        buffer_size=raw.integer("bufferSize", 1),
        drop_when_full=full == "drop",
        max_messages=raw.optional_integer("maxMessages", 1),
        timeout=raw.seconds("timeout"),
    )


def parse_write_options(options: Mapping[str, str]) -> WriteOptions:
    raw = _Raw(options, ("write",), "writes")
    stream = raw.text("stream")
    if stream:
        _check_stream_name("stream", stream)
    bucket = raw.text("bucket")
    if bucket:
        if not all(c.isalnum() or c in "-_" for c in bucket):
            raise OptionError("bucket", f"invalid bucket name {bucket!r}")
        for other in ("stream", "subject"):
            if raw.has(other):
                raise OptionError(other, "a bucket write takes its subjects from 'key'")
        if raw.text("publishMode").lower() == "core":
            raise OptionError("publishMode", "a bucket is written with JetStream publishes")
        stream = f"KV_{bucket}"
    subjects = _subjects("subject", raw.text("subject"))
    if len(subjects) > 1:
        raise OptionError("subject", "a write takes one subject")
    for subject in subjects:
        if "*" in subject.split(".") or ">" in subject.split("."):
            raise OptionError("subject", f"cannot publish to a wildcard subject {subject!r}")
    try:
        mode = PublishMode(raw.text("publishMode").lower())
    except ValueError:
        raise OptionError(
            "publishMode",
            f"expected 'auto', 'core' or 'jetstream', got {raw.text('publishMode')!r}",
        ) from None
    if mode is PublishMode.CORE and stream:
        raise OptionError(
            "publishMode",
            "'core' cannot honour 'stream' (a core publish gets no "
            "ack); use 'jetstream' or drop 'stream'",
        )
    if mode is PublishMode.CORE and raw.has("msgIdColumn"):
        raise OptionError("msgIdColumn", "needs a JetStream publish; 'publishMode' is 'core'")
    return WriteOptions(
        connect=_connect_options(raw),
        subject=subjects[0] if subjects else "",
        stream=stream,
        publish_mode=mode,
        msg_id_column=raw.text("msgIdColumn"),
        max_in_flight=raw.integer("maxInFlight", 1),
        bucket=bucket,
    )
