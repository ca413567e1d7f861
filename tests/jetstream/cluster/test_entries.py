"""The entries of stream and consumer RAFT groups (pynatsd/jetstream/cluster/entries.py) against
nats-server's encoders (`server/jetstream_cluster.go`, `consumer.go`).

Table tests: exact bytes worked out by hand from the Go encoders (`encodeStreamMsgAllowCompress
AndBatch`, `encodeStreamPurge`, `encodeMsgDelete`, `encodeDeleteRange`, `updateDelivered`,
`updateAcks`, `updateSkipped`, `addClusterPendingRequest`, `resetStartingSeqLocked`) and the
decoders' edges (`decodeStreamMsg`, `decodeBatchMsg`, Go's `json.Unmarshal`). Property tests:
every entry round-trips, and a decoder given garbage, a truncated entry or one with a flipped
byte raises EntryError or returns a value, nothing else. What nats-server really sends is
checked live in test_entries_vs_nats_server.py.
"""

from __future__ import annotations

import contextlib
import json
import struct
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pynatsd.jetstream.cluster.entries import (
    AckUpdate,
    AddPendingRequest,
    BatchMsg,
    ConsumerEntry,
    DeleteRange,
    DeliveredUpdate,
    EntryError,
    MsgDelete,
    PurgeRequest,
    RemovePendingRequest,
    ResetSeq,
    SkipUpdate,
    StreamEntry,
    StreamMsg,
    StreamPurge,
    decode_batch_msg,
    decode_consumer_entry,
    decode_delete_range,
    decode_msg_delete,
    decode_stream_entry,
    decode_stream_msg,
    decode_stream_purge,
    encode_batch_msg,
    encode_consumer_entry,
    encode_stream_entry,
    encode_stream_msg,
    encode_stream_purge,
)

U64 = st.integers(0, 2**64 - 1)
I64 = st.integers(-(2**63), 2**63 - 1)
TEXT = st.text(max_size=40)
LE64 = struct.Struct("<Q").pack


def s2_literal_block(body: bytes) -> bytes:
    """An S2 block holding `body` as literals only (what `s2.Encode` writes for data it cannot
    compress): uvarint length, then per literal of up to 256 bytes a tag and the bytes."""
    out = bytearray()
    size = len(body)
    while True:
        out.append((size & 0x7F) | (0x80 if size > 0x7F else 0))
        size >>= 7
        if not size:
            break
    for at in range(0, len(body), 256):
        chunk = body[at : at + 256]
        if len(chunk) <= 60:
            out.append((len(chunk) - 1) << 2)
        else:
            out += bytes((60 << 2, len(chunk) - 1))
        out += chunk
    return bytes(out)


# -- stream messages: exact bytes ----------------------------------------------------------------

MSG_CASES = [
    pytest.param(
        StreamMsg("foo", "bar", b"", b"hi", lseq=1, ts=2),
        b"\x04"
        + LE64(1)
        + LE64(2)
        + b"\x03\x00foo"
        + b"\x03\x00bar"
        + b"\x00\x00"
        + b"\x02\x00\x00\x00hi"
        + b"\x00",
        id="plain",
    ),
    pytest.param(
        StreamMsg("a", "", b"NATS/1.0\r\n\r\n", b"", lseq=7, ts=-1, sourced=True),
        b"\x04"
        + LE64(7)
        + b"\xff" * 8
        + b"\x01\x00a"
        + b"\x00\x00"
        + b"\x0c\x00NATS/1.0\r\n\r\n"
        + b"\x00\x00\x00\x00"
        + b"\x01",
        id="header-sourced-negative-ts",
    ),
    pytest.param(
        StreamMsg("", "", b"", b"", lseq=41, ts=0),
        b"\x04" + LE64(41) + LE64(0) + b"\x00" * 10 + b"\x00",
        id="skip",
    ),
    pytest.param(
        StreamMsg("sub.é", "", b"", b"", lseq=0, ts=0),
        b"\x04" + LE64(0) + LE64(0) + b"\x06\x00sub.\xc3\xa9" + b"\x00" * 8 + b"\x00",
        id="utf8-subject",
    ),
]


@pytest.mark.parametrize(("msg", "wire"), MSG_CASES)
def test_stream_msg_exact_bytes(msg: StreamMsg, wire: bytes) -> None:
    assert encode_stream_entry(msg) == wire
    assert decode_stream_msg(wire) == msg


def test_long_subject_and_header_are_cut_to_65535_bytes_as_nats_server_cuts_them() -> None:
    """encodeStreamMsgAllowCompressAndBatch clips subject, reply and header to math.MaxUint16
    (the clustered publish path refuses such headers before proposing, error 10097)."""
    wire = encode_stream_msg("s" * 70000, "r" * 65536, b"h" * 65540, b"p" * 70000, 1, 1)
    got = decode_stream_msg(wire)
    assert (got.subject, got.reply, got.header) == ("s" * 65535, "r" * 65535, b"h" * 65535)
    assert got.payload == b"p" * 70000
    assert len(wire) == 1 + 16 + 3 * (2 + 65535) + 4 + 70000 + 1


def test_a_subject_cut_inside_a_character_keeps_its_bytes() -> None:
    wire = encode_stream_msg("a" + "é" * 40000, "", b"", b"", 1, 1)
    subject = decode_stream_msg(wire).subject
    assert subject.encode("utf-8", "surrogateescape") == ("a" + "é" * 40000).encode()[:65535]


def test_compressed_message_decodes_from_an_s2_block() -> None:
    body = encode_stream_msg("big", "_INBOX.1", b"", b"z" * 9000, 5, 6)[1:]
    assert decode_stream_msg(b"\x0e" + s2_literal_block(body)) == StreamMsg(
        "big", "_INBOX.1", b"", b"z" * 9000, 5, 6
    )


@pytest.mark.parametrize(
    ("tail", "sourced"),
    [
        pytest.param(b"", False, id="no-flags-old-encoding"),
        pytest.param(b"\x01", True, id="flag"),
        pytest.param(b"\x03\xff", True, id="other-bits-and-trailing-bytes"),
        pytest.param(b"\x81", False, id="cut-uvarint-is-zero"),
        pytest.param(b"\xff" * 11, False, id="overflowing-uvarint-is-zero"),
    ],
)
def test_flags_are_read_as_decodeStreamMsg_reads_them(tail: bytes, sourced: bool) -> None:
    body = LE64(1) + LE64(2) + b"\x01\x00x" + b"\x00\x00" * 2 + b"\x00" * 4
    assert decode_stream_msg(b"\x04" + body + tail).sourced is sourced


@pytest.mark.parametrize(
    "wire",
    [
        pytest.param(b"", id="empty"),
        pytest.param(b"\x04" + b"\x00" * 25, id="under-26-bytes"),
        pytest.param(
            b"\x04" + LE64(1) + LE64(2) + b"\x09\x00" + b"\x00" * 8, id="subject-past-end"
        ),
        pytest.param(b"\x04" + LE64(1) + LE64(2) + b"\x00" * 6 + b"\x01\x00\x00\x00", id="payload"),
        pytest.param(b"\x05" + b"\x00" * 30, id="not-a-message-op"),
        pytest.param(b"\x0e\xff\xff", id="bad-s2"),
        pytest.param(b"\x0e" + s2_literal_block(b"\x00" * 10), id="s2-of-a-short-body"),
    ],
)
def test_bad_stream_msgs_are_refused(wire: bytes) -> None:
    with pytest.raises(EntryError):
        decode_stream_msg(wire)


# -- batches ---------------------------------------------------------------------------------------

INNER = encode_stream_msg("b", "", b"", b"1", 9, 10)


def test_batch_framing_exact_bytes() -> None:
    """op, u16 id length, id, uvarint batch sequence, then the inner entry (op 4 or 14)."""
    batch = BatchMsg("uuid", 300, False, INNER)
    assert encode_batch_msg(batch) == b"\x10\x04\x00uuid\xac\x02" + INNER
    commit = BatchMsg("uuid", 1, True, INNER)
    assert encode_batch_msg(commit) == b"\x11\x04\x00uuid\x01" + INNER
    assert decode_batch_msg(encode_batch_msg(batch)) == batch
    assert decode_stream_entry(encode_batch_msg(commit)) == commit
    assert commit.message() == StreamMsg("b", "", b"", b"1", 9, 10)


@pytest.mark.parametrize(
    "wire",
    [
        b"\x10",
        b"\x10\x05",
        b"\x10\x05\x00abc",
        b"\x10\x01\x00a",  # no sequence
        b"\x10\x01\x00a\x80",  # sequence cut
        b"\x10\x01\x00a\x01",  # no inner op
    ],
)
def test_bad_batch_framing_is_refused(wire: bytes) -> None:
    with pytest.raises(EntryError):
        decode_batch_msg(wire)


def test_an_inner_op_is_not_checked_by_the_framing() -> None:
    """decodeBatchMsg returns whatever op follows; applying it is another matter."""
    assert decode_batch_msg(b"\x10\x00\x00\x01\x63").entry == b"\x63"


# -- purge, delete, delete range: Go's JSON ------------------------------------------------------

CLIENT = {"start": "2026-01-02T03:04:05.5Z", "acc": "APP", "rtt": 604648, "kind": "Client"}

JSON_CASES: list[Any] = [
    pytest.param(
        StreamPurge("S", 30, "$JS.API.STREAM.PURGE.S", "_R_.x", PurgeRequest(filter="a.>"), CLIENT),
        b'\x05{"client":{"start":"2026-01-02T03:04:05.5Z","acc":"APP","rtt":604648,'
        b'"kind":"Client"},"stream":"S","last_seq":30,"subject":"$JS.API.STREAM.PURGE.S",'
        b'"reply":"_R_.x","request":{"filter":"a.\\u003e"}}\n',
        id="purge-filter",
    ),
    pytest.param(
        StreamPurge("S", 0, request=PurgeRequest()),
        b'\x05{"stream":"S","last_seq":0,"subject":"","reply":"","request":{}}\n',
        id="purge-empty-request",
    ),
    pytest.param(
        StreamPurge("S", 7, request=PurgeRequest(seq=5, keep=2)),
        b'\x05{"stream":"S","last_seq":7,"subject":"","reply":"","request":{"seq":5,"keep":2}}\n',
        id="purge-seq-keep",
    ),
    pytest.param(
        StreamPurge("S", 2**64 - 1, "<&>"),
        b'\x05{"stream":"S","last_seq":18446744073709551615,"subject":"\\u003c\\u0026\\u003e",'
        b'"reply":""}\n',
        id="purge-no-request",
    ),
    pytest.param(
        MsgDelete("S", 3, subject="$JS.API.STREAM.MSG.DELETE.S", reply="r"),
        b'\x06{"stream":"S","seq":3,"subject":"$JS.API.STREAM.MSG.DELETE.S","reply":"r"}\n',
        id="delete-erase",
    ),
    pytest.param(
        MsgDelete("S", 9, no_erase=True),
        b'\x06{"stream":"S","seq":9,"no_erase":true,"subject":"","reply":""}\n',
        id="delete-no-erase-internal",
    ),
    pytest.param(DeleteRange(5, 3), b'\x0f{"First":5,"Num":3}\n', id="delete-range"),
]


@pytest.mark.parametrize(("entry", "wire"), JSON_CASES)
def test_json_entries_exact_bytes(entry: StreamEntry, wire: bytes) -> None:
    assert encode_stream_entry(entry) == wire
    assert decode_stream_entry(wire) == entry


@pytest.mark.parametrize(
    ("wire", "entry"),
    [
        pytest.param(
            b'\x05{"STREAM":"S","Last_Seq":4,"unknown":[1,{"x":2}],"request":null}',
            StreamPurge("S", 4),
            id="case-insensitive-unknown-ignored-no-newline",
        ),
        pytest.param(
            b'\x05{"stream":"S","last_seq":1,"request":{"seq":2},"request":{"keep":3}}',
            StreamPurge("S", 1, request=PurgeRequest(seq=2, keep=3)),
            id="repeated-struct-merges",
        ),
        pytest.param(
            b'\x06 {"stream":"A","seq":1,"seq":2,"subject":null,"no_erase":false} \n',
            MsgDelete("A", 2),
            id="last-wins-null-leaves-zero",
        ),
        pytest.param(b"\x06null", MsgDelete("", 0), id="null-is-the-zero-struct"),
        pytest.param(b'\x0f{"first":1,"NUM":2}', DeleteRange(1, 2), id="delete-range-folded"),
    ],
)
def test_json_entries_decode_as_go_decodes(wire: bytes, entry: StreamEntry) -> None:
    assert decode_stream_entry(wire) == entry


@pytest.mark.parametrize(
    "wire",
    [
        b"\x05",
        b"\x05{",
        b"\x05[]",
        b'\x05"s"',
        b'\x05{"stream":1}',
        b'\x05{"last_seq":-1}',
        b'\x05{"last_seq":-0}',
        b'\x05{"last_seq":1.0}',
        b'\x05{"last_seq":18446744073709551616}',
        b'\x05{"last_seq":NaN}',
        b'\x05{"request":[]}',
        b'\x05{"client":"x"}',
        b'\x05{"stream":"S"} {}',
        b'\x06{"no_erase":1}',
        b'\x06{"seq":true}',
        b'\x0f{"First":"1"}',
        b"\x0f" + b"[" * 100_000,
    ],
)
def test_json_go_would_refuse_is_refused(wire: bytes) -> None:
    with pytest.raises(EntryError):
        decode_stream_entry(wire)


def test_unknown_stream_op_is_refused() -> None:
    with pytest.raises(EntryError, match="unknown stream entry op type: 7"):
        decode_stream_entry(b"\x07\x01\x02")


# -- consumer entries: exact bytes ----------------------------------------------------------------

CONSUMER_CASES = [
    pytest.param(DeliveredUpdate(1, 2, 1, 300), b"\x07\x01\x02\x01\xd8\x04", id="delivered"),
    pytest.param(DeliveredUpdate(300, 0, 2, -1), b"\x07\xac\x02\x00\x02\x01", id="delivered-neg"),
    pytest.param(AckUpdate(300, 1), b"\x08\xac\x02\x01", id="acks"),
    pytest.param(SkipUpdate(5), b"\x0a" + LE64(5), id="skip"),
    pytest.param(AddPendingRequest("_INBOX.a"), b"\x0c_INBOX.a", id="add-pending"),
    pytest.param(RemovePendingRequest("_INBOX.a"), b"\x0d_INBOX.a", id="remove-pending"),
    pytest.param(ResetSeq(7, "r.1"), b"\x12" + LE64(7) + b"r.1", id="reset"),
    pytest.param(ResetSeq(1), b"\x12" + LE64(1), id="reset-no-reply"),
]


@pytest.mark.parametrize(("entry", "wire"), CONSUMER_CASES)
def test_consumer_entries_exact_bytes(entry: ConsumerEntry, wire: bytes) -> None:
    assert encode_consumer_entry(entry) == wire
    assert decode_consumer_entry(wire) == entry


@pytest.mark.parametrize(
    ("wire", "entry"),
    [
        (b"\x07\x01\x02\x03\x04\xff\xff", DeliveredUpdate(1, 2, 3, 2)),
        (b"\x08\x01\x02\x03", AckUpdate(1, 2)),
        (b"\x0a" + LE64(9) + b"more", SkipUpdate(9)),
    ],
)
def test_consumer_decoders_ignore_what_follows(wire: bytes, entry: ConsumerEntry) -> None:
    assert decode_consumer_entry(wire) == entry


@pytest.mark.parametrize(
    "wire",
    [
        pytest.param(b"", id="empty"),
        pytest.param(b"\x07\x01\x02\x03", id="delivered-no-ts"),
        pytest.param(b"\x07\x01\x02\x03\x80", id="delivered-cut-ts"),
        pytest.param(b"\x07" + b"\xff" * 11, id="delivered-overflow"),
        pytest.param(b"\x08\x01", id="acks-no-sseq"),
        pytest.param(b"\x0a\x01", id="skip-short"),
        pytest.param(b"\x12" + b"\0" * 7, id="reset-short"),
        pytest.param(b"\x04", id="a-stream-op"),
    ],
)
def test_bad_consumer_entries_are_refused(wire: bytes) -> None:
    with pytest.raises(EntryError):
        decode_consumer_entry(wire)


# -- round trips ---------------------------------------------------------------------------------

JSON_SCALARS = st.one_of(st.none(), st.booleans(), st.integers(-(2**63), 2**64 - 1), TEXT)
CLIENTS = st.none() | st.dictionaries(TEXT, JSON_SCALARS | st.lists(JSON_SCALARS, max_size=3))

STREAM_MSGS = st.builds(
    StreamMsg,
    subject=TEXT,
    reply=TEXT,
    header=st.binary(max_size=64),
    payload=st.binary(max_size=256),
    lseq=U64,
    ts=I64,
    sourced=st.booleans(),
)
STREAM_ENTRIES: st.SearchStrategy[StreamEntry] = st.one_of(
    STREAM_MSGS,
    st.builds(
        StreamPurge,
        stream=TEXT,
        last_seq=U64,
        subject=TEXT,
        reply=TEXT,
        request=st.none() | st.builds(PurgeRequest, seq=U64, filter=TEXT, keep=U64),
        client=CLIENTS,
    ),
    st.builds(MsgDelete, TEXT, U64, st.booleans(), TEXT, TEXT, CLIENTS),
    st.builds(DeleteRange, U64, U64),
    st.builds(
        BatchMsg,
        TEXT,
        U64,
        st.booleans(),
        STREAM_MSGS.map(encode_stream_entry),
    ),
)
CONSUMER_ENTRIES: st.SearchStrategy[ConsumerEntry] = st.one_of(
    st.builds(DeliveredUpdate, U64, U64, U64, I64),
    st.builds(AckUpdate, U64, U64),
    st.builds(SkipUpdate, U64),
    st.builds(AddPendingRequest, TEXT),
    st.builds(RemovePendingRequest, TEXT),
    st.builds(ResetSeq, U64, TEXT),
)


@given(STREAM_ENTRIES)
def test_stream_entries_round_trip(entry: StreamEntry) -> None:
    wire = encode_stream_entry(entry)
    assert decode_stream_entry(wire) == entry
    assert encode_stream_entry(decode_stream_entry(wire)) == wire


@given(CONSUMER_ENTRIES)
def test_consumer_entries_round_trip(entry: ConsumerEntry) -> None:
    wire = encode_consumer_entry(entry)
    assert decode_consumer_entry(wire) == entry


@given(STREAM_MSGS)
def test_go_json_of_a_purge_parses_as_json(msg: StreamMsg) -> None:
    """The JSON bodies are JSON any reader takes (json.loads), not only ours."""
    purge = StreamPurge(msg.subject, msg.lseq, msg.reply, msg.subject, PurgeRequest(filter="x"))
    wire = encode_stream_purge(purge)
    assert wire.endswith(b"\n")
    assert json.loads(wire[1:])["stream"] == msg.subject


# -- garbage ---------------------------------------------------------------------------------------

DECODERS: list[Callable[[bytes], object]] = [
    decode_stream_entry,
    decode_consumer_entry,
    decode_stream_msg,
    decode_batch_msg,
    decode_stream_purge,
    decode_msg_delete,
    decode_delete_range,
]
OPS = st.sampled_from([4, 5, 6, 7, 8, 10, 12, 13, 14, 15, 16, 17, 18, 99])


def only_entry_errors(decoder: Callable[[bytes], object], wire: bytes) -> None:
    with contextlib.suppress(EntryError):
        decoder(wire)


@given(op=OPS, body=st.binary(max_size=120))
def test_garbage_raises_entry_error_only(op: int, body: bytes) -> None:
    for decoder in DECODERS:
        only_entry_errors(decoder, bytes((op,)) + body)


@given(op=OPS, value=st.recursive(JSON_SCALARS, lambda c: st.lists(c) | st.dictionaries(TEXT, c)))
def test_any_json_raises_entry_error_only(op: int, value: Any) -> None:
    for decoder in DECODERS:
        only_entry_errors(decoder, bytes((op,)) + json.dumps(value).encode())


@given(entry=STREAM_ENTRIES | CONSUMER_ENTRIES, data=st.data())
def test_cut_or_flipped_entries_raise_entry_error_only(entry: Any, data: st.DataObject) -> None:
    encode = encode_stream_entry if isinstance(entry, STREAM_TYPES) else encode_consumer_entry
    wire = encode(entry)
    cut = data.draw(st.integers(0, len(wire)))
    flip_at = data.draw(st.integers(0, len(wire) - 1))
    flipped = bytearray(wire)
    flipped[flip_at] ^= data.draw(st.integers(1, 255))
    for decoder in DECODERS:
        only_entry_errors(decoder, wire[:cut])
        only_entry_errors(decoder, bytes(flipped))


def test_every_prefix_of_each_kind_of_entry() -> None:
    """Exhaustively: each kind of entry cut at every length."""
    wires = [wire for _, wire in (p.values for p in MSG_CASES + JSON_CASES)]
    wires += [wire for _, wire in (p.values for p in CONSUMER_CASES)]
    wires.append(b"\x0e" + s2_literal_block(encode_stream_msg("s", "r", b"h", b"p" * 70, 1, 2)))
    wires.append(encode_batch_msg(BatchMsg("id", 2, True, INNER)))
    for wire in wires:
        for cut in range(len(wire)):
            for decoder in DECODERS:
                only_entry_errors(decoder, wire[:cut])


STREAM_TYPES = (StreamMsg, StreamPurge, MsgDelete, DeleteRange, BatchMsg)
