"""The data source's parts alone, without Spark or a server: the wire parser, reply subjects,
range splitting, timestamps, header maps and the rows -> messages mapping of writes."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pytest

from pynatsd.spark import client, offsets
from pynatsd.spark.options import (
    ConnectOptions,
    PublishMode,
    WriteOptions,
    parse_servers,
    parse_timestamp,
)
from pynatsd.spark.schema import header_entries
from pynatsd.spark.wire import Connection, pub_frame, status_of
from pynatsd.spark.writer import WritePlan, frame_blocks


class FakeSocket:
    def __init__(self) -> None:
        self.sent: list[bytes] = []

    def sendall(self, data: bytes) -> None:
        self.sent.append(data)

    def close(self) -> None:
        pass


def _connection() -> tuple[Connection, FakeSocket]:
    conn = Connection(ConnectOptions(servers=parse_servers("127.0.0.1:1")))
    sock = FakeSocket()
    conn._sock = sock  # type: ignore[assignment]
    return conn, sock


def _feed(conn: Connection, data: bytes) -> None:
    """What `_receive` does with a chunk, then parse."""
    conn._buf = conn._buf[conn._pos :] + data
    conn._pos = 0
    conn._process()


STREAM = (
    b"MSG a.b 1 12\r\nhello world!\r\n"
    b"PING\r\n"
    b"HMSG c 1 reply.to 24 29\r\nNATS/1.0\r\nK: v\r\nK: w\r\n\r\nbody!\r\n"
    b"+OK\r\n"
    b"MSG other 2 0\r\n\r\n"
    b"MSG a.b 1 r 2\r\n\r\n\r\n"
)
EXPECTED = [
    (b"a.b", b"", b"", b"hello world!"),
    (b"c", b"reply.to", b"NATS/1.0\r\nK: v\r\nK: w\r\n\r\n", b"body!"),
    (b"a.b", b"r", b"", b"\r\n"),
]


@pytest.mark.parametrize("step", [1, 2, 3, 7, 64, len(STREAM)])
def test_parser_gives_the_same_frames_however_the_bytes_are_split(step: int) -> None:
    conn, sock = _connection()
    got: list[tuple[bytes, bytes, bytes, bytes]] = []
    conn._subs[b"1"] = lambda *m: got.append(m)
    for i in range(0, len(STREAM), step):
        _feed(conn, STREAM[i : i + step])
    assert got == EXPECTED
    assert sock.sent == [b"PONG\r\n"]
    assert conn._pos == len(conn._buf)


def test_server_errors_are_raised_with_their_text() -> None:
    conn, _ = _connection()
    with pytest.raises(Exception, match="Permissions Violation"):
        _feed(conn, b"-ERR 'Permissions Violation for Publish to \"x\"'\r\n")


def test_frames_and_status() -> None:
    assert pub_frame(b"s", b"data", b"r") == b"PUB s r 4\r\ndata\r\n"
    assert pub_frame(b"s", b"d", b"", b"NATS/1.0\r\n\r\n") == (
        b"HPUB s 12 13\r\nNATS/1.0\r\n\r\nd\r\n"
    )
    assert status_of(b"NATS/1.0 404 No Messages\r\n\r\n") == 404
    assert status_of(b"NATS/1.0\r\nK: v\r\n\r\n") == 0


@pytest.mark.parametrize(
    ("reply", "fields"),
    [
        (b"$JS.ACK.S.c.1.42.7.1700000000000000000.9", (42, 1700000000000000000, 9)),
        (b"$JS.ACK.dom.ACCHASH.S.c.1.42.7.1700000000000000000.9.tok", (42, 1700000000000000000, 9)),
    ],
)
def test_ack_subject_layouts(reply: bytes, fields: tuple[int, int, int]) -> None:
    assert client._ack_fields(reply) == fields


def _range_pull(end: int, with_headers: bool) -> client._RangePull:
    pull = client._RangePull(end, with_headers, ())
    pull.on_consumer("S", "c")
    return pull


def test_range_pull_collects_in_order_and_stops_at_the_end() -> None:
    pull = _range_pull(end=12, with_headers=True)
    for seq in (10, 11, 12):
        pull.on_msg(b"s", f"$JS.ACK.S.c.1.{seq}.1.{seq}000.5".encode(), b"", b"x")
    assert pull.chunk.columns().seqs.to_pylist() == [10, 11] and pull.done
    pull = _range_pull(end=100, with_headers=False)
    pull.on_msg(b"s", b"$JS.ACK.S.c.1.5.1.5000.0", b"", b"x")  # nothing pending after it
    assert pull.done and pull.chunk.columns().times_ns.to_pylist() == [5000]
    pull = _range_pull(end=100, with_headers=False)
    pull.on_msg(b"", b"", b"NATS/1.0 404 No Messages\r\n\r\n", b"")
    assert pull.done and not pull.error


def test_a_pull_refused_as_redundant_is_not_the_end() -> None:
    # nats-server refuses a no_wait pull when the pull already waiting covers every message
    # left: the read must go on with that one (it used to stop, losing the rest of a range).
    pull = _range_pull(end=100, with_headers=False)
    pull.outstanding, pull.last_ask = 70, 30
    pull.on_msg(b"", b"", b"NATS/1.0 408 Requests Pending\r\n\r\n", b"")
    assert not pull.done and not pull.error
    assert pull.outstanding == 40 and pull.serial
    pull.on_msg(b"", b"", b"NATS/1.0 408 Request Timeout\r\n\r\n", b"")
    assert pull.done


@pytest.mark.parametrize(
    ("start", "end", "tasks", "min_rows", "expected"),
    [
        (1, 1, 2, 10, []),
        (1, 11, 2, 100, [(1, 11)]),
        (1, 201, 2, 100, [(1, 101), (101, 201)]),
        (1, 201, 8, 50, [(1, 51), (51, 101), (101, 151), (151, 201)]),
        (5, 8, 4, 1, [(5, 6), (6, 7), (7, 8)]),
        (1, 1_000_001, 2, 50_000, [(1, 500_001), (500_001, 1_000_001)]),
    ],
)
def test_split_range(
    start: int, end: int, tasks: int, min_rows: int, expected: list[tuple[int, int]]
) -> None:
    assert offsets.split_range(start, end, tasks, min_rows) == expected


def test_offsets_round_trip_and_reject_another_stream() -> None:
    assert offsets.from_offset("S", offsets.to_offset("S", 42)) == 42
    with pytest.raises(Exception, match="not for stream 'S'"):
        offsets.from_offset("S", {"T": 42})


def test_timestamps() -> None:
    assert parse_timestamp("t", "1000") == 1_000_000_000
    assert parse_timestamp("t", "1970-01-01T00:00:01.5Z") == 1_500_000_000
    assert parse_timestamp("t", "1970-01-01T01:00:00+01:00") == 0
    assert client.rfc3339(1_500_000_001) == "1970-01-01T00:00:01.500000001Z"


def test_header_map_keeps_repeated_keys() -> None:
    assert header_entries(b"NATS/1.0\r\nA: 1\r\nB: 2\r\nA: 3\r\n\r\n") == [
        ("A", ["1", "3"]),
        ("B", ["2"]),
    ]
    assert header_entries(b"") is None


def _plan(**kw: Any) -> WritePlan:
    opts = WriteOptions(
        connect=ConnectOptions(servers=parse_servers("127.0.0.1:1")),
        subject=kw.pop("subject", ""),
        stream=kw.pop("stream", ""),
        publish_mode=PublishMode.JETSTREAM,
        msg_id_column=kw.get("id_column", ""),
        max_in_flight=10,
    )
    fields = {
        "opts": opts,
        "mode": PublishMode.JETSTREAM,
        "data_column": "data",
        "subject_column": "subject",
        "headers_column": "",
        "id_column": "",
        "source_id_columns": False,
    }
    fields.update(kw)
    return WritePlan(**fields)


def _published(
    plan: WritePlan, batch: Any, max_payload: int = 1 << 20, reply: bytes = b"_INBOX.r"
) -> list[tuple[bytes, bytes, bytes]]:
    """(subject, header block, payload) of each frame a write sends, read back from the bytes."""
    if plan.mode is PublishMode.CORE:
        reply = b""
    data = b"".join(
        bytes(block.frames(0, len(block)))
        for block in frame_blocks(plan, iter([batch]), "q:5:0", max_payload, reply)
    )
    out, pos = [], 0
    while pos < len(data):
        eol = data.index(b"\r\n", pos)
        args = data[pos:eol].split(b" ")
        start = eol + 2
        if args[0] == b"HPUB":
            assert args[2] == reply
            hsize, total = int(args[3]), int(args[4])
            out.append((args[1], data[start : start + hsize], data[start + hsize : start + total]))
        else:
            assert args[0] == b"PUB" and len(args) == 3
            total = int(args[2])
            out.append((args[1], b"", data[start : start + total]))
        assert data[start + total : start + total + 2] == b"\r\n"
        pos = start + total + 2
    return out


def test_write_ids_in_order_of_preference() -> None:
    batch = pa.RecordBatch.from_pydict(
        {
            "subject": ["a", "b", "c"],
            "data": ["x", None, "z"],
            "stream": ["S", "S", None],
            "seq": [7, 8, None],
            "id": ["i0", None, "i2"],
            "headers": [None, {"Nats-Msg-Id": ["own"], "K": ["1", "2"]}, {}],
        }
    )

    derived = _published(_plan(stream="T"), batch)
    assert [m[0] for m in derived] == [b"a", b"b", b"c"]
    assert [m[2] for m in derived] == [b"x", b"", b"z"]
    assert derived[0][1] == (b"NATS/1.0\r\nNats-Msg-Id: q:5:0:0\r\nNats-Expected-Stream: T\r\n\r\n")
    source = _published(_plan(source_id_columns=True), batch)
    assert [m[1] for m in source] == [
        b"NATS/1.0\r\nNats-Msg-Id: S:7\r\n\r\n",
        b"NATS/1.0\r\nNats-Msg-Id: S:8\r\n\r\n",
        b"NATS/1.0\r\nNats-Msg-Id: q:5:0:2\r\n\r\n",
    ]
    column = _published(_plan(id_column="id", headers_column="headers"), batch)
    assert column[0][1] == b"NATS/1.0\r\nNats-Msg-Id: i0\r\n\r\n"
    # The row's own header wins over a derived id; repeated keys go out as repeated lines.
    assert column[1][1] == b"NATS/1.0\r\nNats-Msg-Id: own\r\nK: 1\r\nK: 2\r\n\r\n"
    core = _published(_plan(mode=PublishMode.CORE), batch)
    assert [m[1] for m in core] == [b"", b"", b""]
    assert [m[2] for m in core] == [b"x", b"", b"z"]
    with pytest.raises(
        Exception, match=r"row 0: a message of \d+ bytes exceeds the server's max_payload of 10"
    ):
        _published(_plan(), batch, max_payload=10)


@pytest.mark.parametrize("mode", [PublishMode.JETSTREAM, PublishMode.CORE])
def test_rows_without_headers_publish_as_rows_with_them_do(mode: PublishMode) -> None:
    # Batches without headers are framed by Arrow kernels, the others row by row: the same
    # bytes either way (a headers column of nulls only takes the first path).
    rows = {
        "subject": ["a.1", "b", "c.x.y"],
        "data": [b"x" * 5, None, b"\r\n"],
        "stream": ["S", None, "S"],
        "seq": [7, 8, 9],
        "id": [None, 12, 13],
    }
    no_headers = pa.RecordBatch.from_pydict({**rows, "headers": [None, None, None]})
    with_headers = pa.RecordBatch.from_pydict({**rows, "headers": [{}, None, {}]})
    for extra in ({}, {"source_id_columns": True}, {"id_column": "id"}, {"stream": "T"}):
        plan = _plan(mode=mode, headers_column="headers", **extra)
        assert _published(plan, no_headers) == _published(plan, with_headers)


def test_every_option_is_documented() -> None:
    from pathlib import Path

    from pynatsd.spark.options import OPTIONS

    doc = (Path(__file__).resolve().parents[2] / "docs" / "spark.md").read_text()
    for spec in OPTIONS:
        default = f"`{spec.default}`" if spec.default else "—"
        assert f"| `{spec.name}` | {default} |" in doc, spec.name


@pytest.mark.parametrize(
    ("header", "payload", "kind", "text"),
    [
        (
            b"",
            b'{"error":{"code":400,"err_code":10060,"description":"expected stream does '
            b'not match"}}',
            "JetStreamError",
            "nats: publish: expected stream does not match (code 400, err_code 10060)",
        ),
        (
            b"NATS/1.0 503\r\n\r\n",
            b"",
            "NoResponders",
            "nats: publish: no stream captures the subject (no responders); create a stream "
            "for it or use publishMode=core",
        ),
    ],
)
def test_a_failed_publish_says_its_cause_once(
    header: bytes, payload: bytes, kind: str, text: str
) -> None:
    acks = client._Acks()
    acks.on_ack(b"_INBOX.x.0", b"", header, payload)
    acks.on_ack(b"_INBOX.x.1", b"", header, payload)  # a second failure adds nothing
    assert type(acks.error).__name__ == kind
    assert str(acks.error) == text
