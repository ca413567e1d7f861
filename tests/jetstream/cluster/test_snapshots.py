"""The snapshots of stream and consumer RAFT groups (pynatsd/jetstream/cluster/snapshots.py) and
the AVL sequence set encoding (seqset.py) against nats-server's (`EncodedStreamState`,
`DecodeStreamState`, `encodeConsumerState`, `decodeConsumerState`, `avl.SequenceSet`).

Table tests: exact bytes worked out by hand from the Go encoders, state captured from
nats-server 2.15.1 (test_entries_vs_nats_server.py reads it live from a cluster's files), and
the decoders' edges. Property tests: round trips, a sequence set's tree is one Go's reader
rebuilds into a valid AVL tree, and garbage, cut or flipped snapshots raise EntryError or give
a value, nothing else.
"""

from __future__ import annotations

import contextlib
import struct
from dataclasses import replace
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pynatsd.jetstream.cluster.entries import DeleteRange, EntryError
from pynatsd.jetstream.cluster.seqset import (
    NUM_BUCKETS,
    SeqSetError,
    SeqSetNode,
    SequenceSet,
    decode_seqset,
)
from pynatsd.jetstream.cluster.snapshots import (
    ConsumerState,
    DeleteList,
    PendingAck,
    SequencePair,
    SourceState,
    StreamSnapshotState,
    decode_consumer_state,
    decode_stream_snapshot,
    encode_consumer_state,
    encode_stream_snapshot,
)

LE64 = struct.Struct("<Q").pack
LE32 = struct.Struct("<I").pack
SECOND = 1_000_000_000
U64 = st.integers(0, 2**64 - 1)


def seqset_bytes(
    size: int, nodes: list[tuple[int, dict[int, int], int]], version: int = 2
) -> bytes:
    """An encoded set by hand: (base, {word index: word}, height) per node, in pre-order."""
    words = NUM_BUCKETS if version == 2 else 64
    out = bytes((22, version)) + LE32(len(nodes)) + LE32(size)
    for base, set_words, height in nodes:
        out += LE64(base) + b"".join(LE64(set_words.get(i, 0)) for i in range(words))
        out += struct.pack("<H", height)
    return out


# -- sequence sets --------------------------------------------------------------------------------


def test_seqset_exact_bytes() -> None:
    """22, 2, u32 nodes, u32 size, then base, 32 words, u16 height per node."""
    wire = SequenceSet.from_sequences([5, 1]).encode()
    assert wire == seqset_bytes(2, [(0, {0: 0x22}, 1)])
    assert len(wire) == 2 + 8 + 8 + 32 * 8 + 2


def test_seqset_nodes_cover_2048_sequences_each_in_preorder() -> None:
    seqset = SequenceSet.from_sequences([1, 2048 + 64 + 3, 3 * 2048])
    assert seqset.encode() == seqset_bytes(
        3, [(2048, {1: 1 << 3}, 2), (0, {0: 2}, 1), (6144, {0: 1}, 1)]
    )
    assert list(seqset) == [1, 2048 + 64 + 3, 3 * 2048]
    assert seqset.state() == (1, 6144, 3)


def test_seqset_version_1_is_read_with_64_words_per_node() -> None:
    wire = seqset_bytes(3, [(0, {0: 0b11, 40: 1}, 1)], version=1)
    seqset, size = decode_seqset(wire + b"rest")
    assert size == len(wire)
    assert list(seqset) == [0, 1, 40 * 64]
    assert seqset == SequenceSet.from_sequences([0, 1, 2560])


@pytest.mark.parametrize(
    "wire",
    [
        pytest.param(seqset_bytes(0, [])[:9], id="short"),
        pytest.param(b"\x17" + seqset_bytes(0, [])[1:], id="magic"),
        pytest.param(b"\x16\x03" + seqset_bytes(0, [])[2:], id="version"),
        pytest.param(seqset_bytes(1, [(0, {0: 1}, 1)])[:-1], id="node-cut"),
        pytest.param(seqset_bytes(0, [])[:2] + LE32(2**31) + LE32(0), id="node-count"),
        pytest.param(seqset_bytes(2, [(0, {0: 1}, 1)], version=1), id="v1-size-mismatch"),
    ],
)
def test_bad_seqsets_are_refused(wire: bytes) -> None:
    with pytest.raises(SeqSetError):
        decode_seqset(wire)


def test_a_v2_size_is_taken_as_written() -> None:
    """decodev2 trusts the header's size (only decodev1 checks it)."""
    seqset, _ = decode_seqset(seqset_bytes(7, [(0, {0: 1}, 1)]))
    assert seqset.size == 7 and list(seqset) == [0]


def go_rebuild(nodes: tuple[SeqSetNode, ...]) -> dict[str, Any] | None:
    """insertNode: the pre-order nodes inserted into a plain binary search tree."""
    root: dict[str, Any] | None = None
    for node in nodes:
        new = {"node": node, "l": None, "r": None}
        if root is None:
            root = new
            continue
        at = root
        while True:
            side = "l" if node.base < at["node"].base else "r"
            if at[side] is None:
                at[side] = new
                break
            at = at[side]
    return root


def check_avl(tree: dict[str, Any] | None) -> int:
    """The real height of `tree`, checking each node's written height and AVL balance."""
    if tree is None:
        return 0
    left, right = check_avl(tree["l"]), check_avl(tree["r"])
    assert abs(left - right) <= 1
    assert tree["node"].height == 1 + max(left, right)
    return 1 + max(left, right)


SEQUENCES = st.sets(st.integers(0, 2**64 - 1) | st.integers(0, 40_000), max_size=60)


@given(SEQUENCES)
def test_seqsets_round_trip_into_a_tree_go_reads_as_avl(sequences: set[int]) -> None:
    seqset = SequenceSet.from_sequences(sequences)
    assert list(seqset) == sorted(sequences)
    assert seqset.size == len(sequences)
    decoded, size = decode_seqset(seqset.encode())
    assert decoded == seqset and size == len(seqset.encode())
    check_avl(go_rebuild(seqset.nodes))


@given(st.binary(max_size=700), st.integers(0, 3))
def test_seqset_garbage_raises_seqset_error_only(body: bytes, version: int) -> None:
    with contextlib.suppress(SeqSetError):
        decode_seqset(bytes((22, version)) + body)


# -- stream snapshots -----------------------------------------------------------------------------

# Captured from nats-server 2.15.1: the file-store R3 stream of the live test (30 messages, 8
# purged by subject and 2 deleted), its group's snapshot written on shutdown.
GO_FILE_STREAM = bytes.fromhex("2a01 14 c158 01 1e 00 0a") + seqset_bytes(
    10, [(0, {0: 0x4444446C}, 1)]
)
GO_FILE_STREAM_DELETED = [2, 3, 5, 6, 10, 14, 18, 22, 26, 30]

STREAM_CASES = [
    pytest.param(
        StreamSnapshotState(3, 100, 1, 5, 0, (DeleteRange(2, 2),)),
        bytes.fromhex("2a01 03 64 01 05 00 02 21 02 02"),
        id="run",
    ),
    pytest.param(
        StreamSnapshotState(3, 100, 1, 5, 4, (DeleteRange(2, 2),), (SourceState("A", 10, "id"),)),
        bytes.fromhex("2a02 03 64 01 05 04 01 01 41 0a 02 6964 02 21 02 02"),
        id="v2-sources",
    ),
    pytest.param(
        StreamSnapshotState(0, 0, 0, 0), bytes.fromhex("2a01 00 00 00 00 00 00"), id="empty"
    ),
    pytest.param(
        StreamSnapshotState(0, 0, 0, 0, deleted=(SequenceSet(0),), num_deleted=1),
        bytes.fromhex("2a01 00 00 00 00 00 01 1602 00000000 00000000"),
        id="nats-server-empty-memory-store",  # its count lacks the file store's last > first
    ),
    pytest.param(
        StreamSnapshotState(
            20, 11329, 1, 30, 0, (SequenceSet.from_sequences(GO_FILE_STREAM_DELETED),)
        ),
        GO_FILE_STREAM,
        id="nats-server-file-store",
    ),
]


@pytest.mark.parametrize(("state", "wire"), STREAM_CASES)
def test_stream_snapshot_exact_bytes(state: StreamSnapshotState, wire: bytes) -> None:
    assert encode_stream_snapshot(state) == wire
    assert decode_stream_snapshot(wire) == replace(state, num_deleted=state.interior_deletes())


def test_sources_without_a_sequence_are_left_out_and_version_1_is_written() -> None:
    state = StreamSnapshotState(1, 1, 1, 1, sources=(SourceState("A", 0, "x"),))
    assert encode_stream_snapshot(state)[:2] == b"\x2a\x01"


@pytest.mark.parametrize(
    ("msgs", "first", "last", "count"),
    [(3, 1, 5, 2), (5, 1, 5, 0), (9, 1, 5, 0), (0, 5, 5, 0), (0, 6, 5, 0), (0, 0, 0, 0)],
)
def test_num_deleted_is_the_file_stores(msgs: int, first: int, last: int, count: int) -> None:
    """`last - first + 1 - msgs` when `last > first` (a memory store writes 1 for 0, 0, 0)."""
    assert StreamSnapshotState(msgs, 0, first, last).interior_deletes() == count


def test_delete_blocks_are_written_only_with_a_count() -> None:
    state = StreamSnapshotState(5, 0, 1, 5, deleted=(DeleteRange(9, 1),))
    assert encode_stream_snapshot(state) == bytes.fromhex("2a01 05 00 01 05 00 00")
    as_memory_store = replace(state, msgs=0, first_seq=0, last_seq=0, num_deleted=1)
    assert encode_stream_snapshot(as_memory_store).endswith(bytes.fromhex("01 21 09 01"))


def test_a_legacy_delete_list_is_sent_as_a_seqset() -> None:
    state = StreamSnapshotState(3, 0, 1, 5, deleted=(DeleteList((2, 4)),))
    decoded = decode_stream_snapshot(encode_stream_snapshot(state))
    assert decoded.deleted == (SequenceSet.from_sequences([2, 4]),)


@pytest.mark.parametrize(
    ("wire", "state"),
    [
        pytest.param(
            b'{"messages":3,"bytes":10,"first_seq":1,"last_seq":5,"clfs":1,"deleted":[4,2]}',
            StreamSnapshotState(3, 10, 1, 5, 1, (DeleteList((4, 2)),)),
            id="legacy-json",
        ),
        pytest.param(
            b'{"Messages":3,"deleted":[],"extra":{}}',
            StreamSnapshotState(3, 0, 0, 0),
            id="legacy-json-folded-empty",
        ),
        pytest.param(b"null", StreamSnapshotState(0, 0, 0, 0), id="legacy-null"),
        pytest.param(
            bytes.fromhex("2a01 01 02 03 04 05"),
            StreamSnapshotState(1, 2, 3, 4, 5, num_deleted=0),
            id="unreadable-count-is-none",
        ),
        pytest.param(
            bytes.fromhex("2a01 01 02 03 04 05 01"),
            StreamSnapshotState(1, 2, 3, 4, 5, num_deleted=1),
            id="count-without-blocks",
        ),
        pytest.param(
            bytes.fromhex("2a01 01 02 03 04 05 00 ffff"),
            StreamSnapshotState(1, 2, 3, 4, 5, num_deleted=0),
            id="bytes-after-a-zero-count-ignored",
        ),
        pytest.param(
            bytes.fromhex("2a02 01 02 03 04 05 02 01 41 01 00 01 41 02 01 62 00"),
            StreamSnapshotState(1, 2, 3, 4, 5, sources=(SourceState("A", 2, "b"),), num_deleted=0),
            id="repeated-source-last-wins",
        ),
    ],
)
def test_stream_snapshots_decode_as_go_decodes(wire: bytes, state: StreamSnapshotState) -> None:
    assert decode_stream_snapshot(wire) == state


@pytest.mark.parametrize(
    "wire",
    [
        pytest.param(b"", id="empty"),
        pytest.param(bytes.fromhex("2a01 01 02 03 04"), id="cut-counts"),
        pytest.param(bytes.fromhex("2a01 01 02 03 04 05 01 07"), id="unknown-block"),
        pytest.param(bytes.fromhex("2a01 01 02 03 04 05 01 21 01"), id="cut-run"),
        pytest.param(bytes.fromhex("2a01 01 02 03 04 05 01 16 02 00"), id="cut-seqset"),
        pytest.param(bytes.fromhex("2a02 01 02 03 04 05"), id="v2-no-source-count"),
        pytest.param(bytes.fromhex("2a02 01 02 03 04 05 01 05 41"), id="v2-cut-name"),
        pytest.param(bytes.fromhex("2a03 01 02 03 04 05 00"), id="version-3-is-not-json"),
        pytest.param(b'{"messages":-1}', id="json-negative"),
        pytest.param(b'{"deleted":[1,"2"]}', id="json-string-seq"),
        pytest.param(b"[]", id="json-array"),
    ],
)
def test_bad_stream_snapshots_are_refused(wire: bytes) -> None:
    with pytest.raises(EntryError):
        decode_stream_snapshot(wire)


DELETE_BLOCKS = st.lists(
    st.builds(DeleteRange, U64, U64) | SEQUENCES.map(SequenceSet.from_sequences), max_size=4
)
SOURCES = st.dictionaries(st.text(max_size=10), st.tuples(st.integers(1, 2**64 - 1), st.text()))


@given(st.tuples(U64, U64, U64, U64, U64), DELETE_BLOCKS, SOURCES, U64)
def test_stream_snapshots_round_trip(
    counts: tuple[int, int, int, int, int],
    blocks: list[DeleteRange | SequenceSet],
    sources: dict[str, tuple[int, str]],
    num_deleted: int,
) -> None:
    state = StreamSnapshotState(
        *counts,
        deleted=tuple(blocks) if num_deleted else (),
        sources=tuple(SourceState(name, seq, ident) for name, (seq, ident) in sources.items()),
        num_deleted=num_deleted,
    )
    assert decode_stream_snapshot(encode_stream_snapshot(state)) == state


# -- consumer states ------------------------------------------------------------------------------

CONSUMER = ConsumerState(
    delivered=SequencePair(10, 20),
    ack_floor=SequencePair(5, 15),
    pending={16: PendingAck(6, 1_700_000_000 * SECOND)},
    redelivered={17: 2},
)
# Captured from nats-server 2.15.1: the live test's R3 consumer (`o.dat`, the same encoding as
# its group's snapshot), delivered 10/15, acked to 4/8, five pending, one redelivered.
GO_CONSUMER = bytes.fromhex("160204080a0f05cadcddb00d010102030202040302050402070602010101")
GO_CONSUMER_NOW = 1_795_929_893 * SECOND


@pytest.mark.parametrize(
    ("state", "now", "wire"),
    [
        pytest.param(
            CONSUMER,
            1_700_000_010_499_999_999,
            # floors 5 15, delivered 10 20, 1 pending; base 1700000010 (zig-zag 3400000020);
            # 16-15, 6-5, base - 1700000000 = 10 (zig-zag 20); 1 redelivered: 17-15, count 2
            bytes.fromhex("1602 05 0f 0a 14 01 94c49fd50c 01 01 14 01 02 02"),
            id="hand",
        ),
        pytest.param(
            CONSUMER,
            1_700_000_010_500_000_000,
            bytes.fromhex("1602 05 0f 0a 14 01 96c49fd50c 01 01 16 01 02 02"),
            id="half-second-rounds-up",
        ),
        pytest.param(ConsumerState(), 0, bytes.fromhex("1602 00 00 00 00 00 00"), id="empty"),
        pytest.param(
            ConsumerState(
                SequencePair(10, 15),
                SequencePair(4, 8),
                {
                    s: PendingAck(d, 1_795_929_892 * SECOND)
                    for s, d in [(9, 5), (11, 6), (12, 7), (13, 8), (15, 10)]
                },
                {9: 1},
            ),
            GO_CONSUMER_NOW,
            GO_CONSUMER,
            id="nats-server",
        ),
    ],
)
def test_consumer_state_exact_bytes(state: ConsumerState, now: int, wire: bytes) -> None:
    assert encode_consumer_state(state, now_ns=now) == wire
    assert decode_consumer_state(wire) == state


def test_pending_timestamps_keep_whole_seconds_truncated_as_go_divides() -> None:
    state = replace(CONSUMER, pending={16: PendingAck(6, -1_500_000_000), 18: PendingAck(7, 1_999)})
    decoded = decode_consumer_state(encode_consumer_state(state, now_ns=5 * SECOND))
    assert decoded.pending == {16: PendingAck(6, -SECOND), 18: PendingAck(7, 0)}


@pytest.mark.parametrize(
    ("wire", "state"),
    [
        pytest.param(
            bytes.fromhex("1601 05 0f 03 04 01 0a 02 04 00"),
            # version 1: delivered stored as next to deliver (+ floor - 1), no consumer seq per
            # pending, ts stored as ts - base: (2 + 5) s
            ConsumerState(
                SequencePair(7, 18), SequencePair(5, 15), {17: PendingAck(0, 7 * SECOND)}
            ),
            id="version-1",
        ),
        pytest.param(
            bytes.fromhex("1602 05 0f 0a 14 00 02 02 02"),
            ConsumerState(SequencePair(10, 20), SequencePair(5, 15), {}, {17: 2}),
            id="cut-redelivered-drops-entries",
        ),
        pytest.param(
            bytes.fromhex("1602 05 0f 0a 14 00 03 00 04 01 00 02 02"),
            ConsumerState(SequencePair(10, 20), SequencePair(5, 15), {}, {17: 2}),
            id="zero-redelivered-entries-dropped",
        ),
        pytest.param(
            bytes.fromhex("1602 05 0f 0a 14"),
            ConsumerState(SequencePair(10, 20), SequencePair(5, 15)),
            id="no-pending-count-is-none",
        ),
    ],
)
def test_consumer_states_decode_as_go_decodes(wire: bytes, state: ConsumerState) -> None:
    assert decode_consumer_state(wire) == state


@pytest.mark.parametrize(
    ("wire", "error"),
    [
        (b"", "corrupt state file"),
        (b"\x17\x02", "corrupt state file"),
        (b"\x16\x03", "unsupported version: 3"),
        (bytes.fromhex("1602 05 0f 0a"), "corrupt state file"),
        (bytes.fromhex("1602 00 80808080808080808001 00 00"), "corrupt state file"),  # bit 63
        (bytes.fromhex("1602 00 00 00 00 01 00 00 00 00"), "corrupt state file"),  # stream seq 0
        (bytes.fromhex("1602 00 00 00 00 02 00 01 00 00"), "corrupt state file"),  # cut pending
    ],
)
def test_bad_consumer_states_are_refused(wire: bytes, error: str) -> None:
    with pytest.raises(EntryError, match=error):
        decode_consumer_state(wire)


SEQ = st.integers(1, 2**64 - 1)


@st.composite
def consumer_states(draw: st.DrawFn) -> ConsumerState:
    ack_floor = SequencePair(draw(U64), draw(st.integers(0, 2**63 - 1)))
    delivered = SequencePair(draw(U64), draw(st.integers(0, 2**63 - 1)))
    seconds = st.integers(-(2**33), 2**33)  # Unix ns in an int64: +-292 years
    pending = draw(
        st.dictionaries(SEQ, st.builds(PendingAck, U64, seconds.map(lambda s: s * SECOND)))
    )
    counts = st.dictionaries(SEQ.filter(lambda s: s != ack_floor.stream_seq), SEQ)
    return ConsumerState(delivered, ack_floor, pending, draw(counts))


@given(consumer_states(), st.integers(-(2**33), 2**33))
def test_consumer_states_round_trip(state: ConsumerState, now_seconds: int) -> None:
    assert decode_consumer_state(encode_consumer_state(state, now_seconds * SECOND)) == state


# -- garbage ---------------------------------------------------------------------------------------


def only_entry_errors(wire: bytes) -> None:
    for decoder in (decode_stream_snapshot, decode_consumer_state):
        with contextlib.suppress(EntryError):
            decoder(wire)


@given(st.sampled_from([b"*\x01", b"*\x02", b"\x16\x01", b"\x16\x02", b"", b"{"]), st.binary())
def test_snapshot_garbage_raises_entry_error_only(head: bytes, body: bytes) -> None:
    only_entry_errors(head + body)


@given(
    st.sampled_from([GO_FILE_STREAM, GO_CONSUMER] + [p.values[1] for p in STREAM_CASES]),
    st.data(),
)
def test_cut_or_flipped_snapshots_raise_entry_error_only(wire: bytes, data: st.DataObject) -> None:
    only_entry_errors(wire[: data.draw(st.integers(0, len(wire)))])
    flipped = bytearray(wire)
    flipped[data.draw(st.integers(0, len(wire) - 1))] ^= data.draw(st.integers(1, 255))
    only_entry_errors(bytes(flipped))


def test_every_prefix_of_the_captured_snapshots() -> None:
    for wire in (GO_FILE_STREAM, GO_CONSUMER):
        for cut in range(len(wire)):
            only_entry_errors(wire[:cut])
