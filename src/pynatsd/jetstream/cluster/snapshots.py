"""The snapshots of stream and consumer RAFT groups (`EntrySnapshot` data), byte for byte as
nats-server writes them.

- A stream's state (`EncodedStreamState` in `server/filestore.go` and `memstore.go`,
  `DecodeStreamState` in `store.go`, `decodeStreamSnapshot` in `jetstream_cluster.go`): magic
  42, version 1 (2 when it carries sourcing state), uvarint counts, then the interior deletes
  as delete blocks: runs (`33, first, num`) and AVL sequence sets (`seqset`). The JSON of
  servers before 2.10 is still read.
- A consumer's state (`encodeConsumerState` in `store.go`, `decodeConsumerState` in
  `filestore.go`): magic 22, version 2, uvarint floors and delivered sequences, then the
  pending acks (timestamps in seconds below a base) and the redelivery counts.

Decoders raise `EntryError` wherever nats-server's return an error, and nothing else. The
encoder of a consumer state lists pending and redelivered sequences in ascending order
(nats-server in its map's order, which no reader depends on).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass, field

from pynatsd.raft.wire import put_uvarint

from .codec import (
    MASK64,
    Cursor,
    EntryError,
    FieldDecoder,
    go_bytes,
    go_struct,
    go_uint64,
    go_uint64_slice,
    i64,
    parse_json,
    put_varint,
    u64,
    wrap_i64,
)
from .entries import DeleteRange
from .seqset import MAGIC as SEQSET_MAGIC
from .seqset import SeqSetError, SequenceSet, decode_seqset

__all__ = [
    "ConsumerState",
    "DeleteBlock",
    "DeleteList",
    "PendingAck",
    "SequencePair",
    "SourceState",
    "StreamSnapshotState",
    "decode_consumer_state",
    "decode_stream_snapshot",
    "encode_consumer_state",
    "encode_stream_snapshot",
]

CORRUPT_STREAM_STATE = "stream state snapshot is corrupt"  # ErrCorruptStreamState
CORRUPT_CONSUMER_STATE = "corrupt state file"  # errCorruptState

_STREAM_STATE_MAGIC = 42  # streamStateMagic
_STREAM_STATE_VERSION = 1  # streamStateVersion
_STREAM_STATE_VERSION_SOURCES = 2  # streamStateVersionSources
_RUN_LENGTH_MAGIC = 33  # runLengthMagic
_CONSUMER_STATE_MAGIC = 22  # magic (filestore.go)
_CONSUMER_STATE_VERSION = 2


# -- consumer state (a consumer group's snapshot) -------------------------------------------------


@dataclass(frozen=True, slots=True)
class SequencePair:
    """SequencePair: one message's consumer and stream sequence."""

    consumer_seq: int = 0  # Consumer
    stream_seq: int = 0  # Stream


@dataclass(frozen=True, slots=True)
class PendingAck:
    """Pending: a delivered message awaiting its ack."""

    consumer_seq: int  # Sequence: the consumer sequence it went out as
    timestamp: int  # Timestamp: Unix ns of delivery (whole seconds once encoded)


@dataclass(frozen=True, slots=True)
class ConsumerState:
    """ConsumerState (`encodeConsumerState`, `decodeConsumerState`)."""

    delivered: SequencePair = SequencePair()  # Delivered: the last delivered
    ack_floor: SequencePair = SequencePair()  # AckFloor: all at or below are acked
    pending: dict[int, PendingAck] = field(default_factory=dict)  # by stream sequence
    redelivered: dict[int, int] = field(default_factory=dict)  # stream sequence -> count


def encode_consumer_state(state: ConsumerState, now_ns: int | None = None) -> bytes:
    """Version 2. Pending timestamps are stored in seconds below a base, `now_ns` (the clock
    when None) rounded to the second as Go's `time.Round` does (halves up)."""
    ack_consumer = u64(state.ack_floor.consumer_seq, "ack floor")
    ack_stream = u64(state.ack_floor.stream_seq, "ack floor")
    parts = [
        bytes((_CONSUMER_STATE_MAGIC, _CONSUMER_STATE_VERSION)),
        put_uvarint(ack_consumer),
        put_uvarint(ack_stream),
        put_uvarint(u64(state.delivered.consumer_seq, "delivered")),
        put_uvarint(u64(state.delivered.stream_seq, "delivered")),
        put_uvarint(len(state.pending)),
    ]
    if state.pending:
        now = time.time_ns() if now_ns is None else now_ns
        base = (now + 500_000_000) // 1_000_000_000  # mints
        parts.append(put_varint(wrap_i64(base)))
        for seq in sorted(state.pending):
            pending = state.pending[seq]
            ts = i64(pending.timestamp, "pending timestamp")
            seconds = -(-ts // 1_000_000_000) if ts < 0 else ts // 1_000_000_000  # Go's `/`
            parts.append(put_uvarint((u64(seq, "pending") - ack_stream) & MASK64))
            parts.append(
                put_uvarint((u64(pending.consumer_seq, "pending") - ack_consumer) & MASK64)
            )
            parts.append(put_varint(wrap_i64(base - seconds)))
    parts.append(put_uvarint(len(state.redelivered)))
    for seq in sorted(state.redelivered):
        parts.append(put_uvarint((u64(seq, "redelivered") - ack_stream) & MASK64))
        parts.append(put_uvarint(u64(state.redelivered[seq], "redelivered count")))
    return b"".join(parts)


def decode_consumer_state(data: bytes) -> ConsumerState:
    """decodeConsumerState, versions 1 and 2. As there, a cut in the redelivered part (or a
    redelivered entry with a zero) only drops entries, it is not an error."""
    if len(data) < 2 or data[0] != _CONSUMER_STATE_MAGIC:
        raise EntryError(CORRUPT_CONSUMER_STATE)
    version = data[1]
    if version not in (1, 2):
        raise EntryError(f"unsupported version: {version}")
    cursor = Cursor(data, 2)
    ack_consumer, ack_stream = cursor.uvarint(), cursor.uvarint()
    delivered_consumer, delivered_stream = cursor.uvarint(), cursor.uvarint()
    if cursor.failed:
        raise EntryError(CORRUPT_CONSUMER_STATE)
    if version == 1:  # delivered was stored as the next to deliver
        if ack_consumer > 1:
            delivered_consumer = (delivered_consumer + ack_consumer - 1) & MASK64
        if ack_stream > 1:
            delivered_stream = (delivered_stream + ack_stream - 1) & MASK64
    if (ack_stream | delivered_stream) >> 63:
        raise EntryError(CORRUPT_CONSUMER_STATE)
    pending = _decode_pending(cursor, version, ack_consumer, ack_stream)
    redelivered: dict[int, int] = {}
    for _ in range(_go_count(cursor.uvarint())):
        seq, count = cursor.uvarint(), cursor.uvarint()
        if cursor.failed:
            break
        if seq > 0 and count > 0:
            redelivered[(seq + ack_stream) & MASK64] = count
    return ConsumerState(
        SequencePair(delivered_consumer, delivered_stream),
        SequencePair(ack_consumer, ack_stream),
        pending,
        redelivered,
    )


def _go_count(count: int) -> int:
    """`for i := 0; i < int(count); i++`: a count with bit 63 set is negative, no iterations."""
    return 0 if count >> 63 else count


def _decode_pending(
    cursor: Cursor, version: int, ack_consumer: int, ack_stream: int
) -> dict[int, PendingAck]:
    pending: dict[int, PendingAck] = {}
    count = cursor.uvarint()
    if count == 0:
        return pending
    base = cursor.varint()  # mints
    for _ in range(_go_count(count)):
        seq = cursor.uvarint()
        dseq = cursor.uvarint() if version == 2 else 0
        ts = cursor.varint()
        if cursor.failed:
            raise EntryError(CORRUPT_CONSUMER_STATE)
        seq = (seq + ack_stream) & MASK64
        if seq == 0:
            raise EntryError(CORRUPT_CONSUMER_STATE)
        if version == 2:
            dseq = (dseq + ack_consumer) & MASK64
            seconds = wrap_i64(base - ts)
        else:
            seconds = wrap_i64(ts + base)
        pending[seq] = PendingAck(dseq, wrap_i64(seconds * 1_000_000_000))
    return pending


# -- stream state (a stream group's snapshot) ----------------------------------------------------


@dataclass(frozen=True, slots=True)
class DeleteList:
    """DeleteSlice: the deleted sequences of a legacy JSON snapshot, as listed."""

    seqs: tuple[int, ...]

    def state(self) -> tuple[int, int, int]:
        return (self.seqs[0], self.seqs[-1], len(self.seqs)) if self.seqs else (0, 0, 0)

    def __iter__(self) -> Iterator[int]:
        return iter(self.seqs)


DeleteBlock = DeleteRange | SequenceSet | DeleteList


@dataclass(frozen=True, slots=True)
class SourceState:
    """StreamSourceState, by the source's name: how far a sourced stream has read it."""

    name: str  # the key in Sources
    seq: int  # Seq
    ident: str = ""  # Ident


@dataclass(frozen=True, slots=True)
class StreamSnapshotState:
    """StreamReplicatedState: what a stream group's snapshot says (`EncodedStreamState`).

    `num_deleted` is the interior-delete count as written; None when made here, and then
    encoded as nats-server's file store computes it (`last - first + 1 - msgs` when
    `last > first`, else 0). Delete blocks are written only when that count is not 0.
    """

    msgs: int  # Msgs
    total_bytes: int  # Bytes
    first_seq: int  # FirstSeq
    last_seq: int  # LastSeq
    failed: int = 0  # Failed: proposals that failed on apply (clfs)
    deleted: tuple[DeleteBlock, ...] = ()  # Deleted
    sources: tuple[SourceState, ...] = ()  # Sources (version 2 only)
    num_deleted: int | None = None

    def deleted_count(self) -> int:
        """DeleteBlocks.NumDeleted: the sum of the blocks' counts."""
        return sum(block.state()[2] for block in self.deleted)

    def deleted_sequences(self) -> Iterator[int]:
        for block in self.deleted:
            yield from block

    def interior_deletes(self) -> int:
        """What the count says: as written, or as the file store computes it."""
        if self.num_deleted is not None:
            return self.num_deleted
        if self.last_seq > self.first_seq:
            return max(self.last_seq - self.first_seq + 1 - self.msgs, 0)
        return 0


def encode_stream_snapshot(state: StreamSnapshotState) -> bytes:
    """`EncodedStreamState`: version 1, or 2 when a source has a sequence (sources with none
    are left out, as nats-server leaves them). A legacy `DeleteList` goes as a sequence set."""
    sources = [s for s in state.sources if s.seq]
    version = _STREAM_STATE_VERSION_SOURCES if sources else _STREAM_STATE_VERSION
    counts = (state.msgs, state.total_bytes, state.first_seq, state.last_seq, state.failed)
    parts = [bytes((_STREAM_STATE_MAGIC, version))]
    parts += [put_uvarint(u64(n, "stream state")) for n in counts]
    if sources:
        parts.append(put_uvarint(len(sources)))
        for source in sources:
            name, ident = go_bytes(source.name), go_bytes(source.ident)
            parts += (put_uvarint(len(name)), name, put_uvarint(u64(source.seq, "source seq")))
            parts += (put_uvarint(len(ident)), ident)
    num_deleted = u64(state.interior_deletes(), "num_deleted")
    parts.append(put_uvarint(num_deleted))
    if num_deleted:
        parts += (_encode_delete_block(block) for block in state.deleted)
    return b"".join(parts)


def _encode_delete_block(block: DeleteBlock) -> bytes:
    if isinstance(block, DeleteRange):
        first, num = u64(block.first, "first"), u64(block.num, "num")
        return bytes((_RUN_LENGTH_MAGIC,)) + put_uvarint(first) + put_uvarint(num)
    if isinstance(block, DeleteList):
        block = SequenceSet.from_sequences(block.seqs)
    return block.encode()


def decode_stream_snapshot(data: bytes) -> StreamSnapshotState:
    """decodeStreamSnapshot: the binary form when the data starts 42, 1|2; else legacy JSON."""
    if len(data) >= 2 and data[0] == _STREAM_STATE_MAGIC and data[1] in (1, 2):
        return _decode_binary_state(data)
    return _decode_json_state(data)


def _decode_binary_state(buf: bytes) -> StreamSnapshotState:
    """DecodeStreamState. A count of deletes that cannot be read counts as none (as there)."""
    cursor = Cursor(buf, 2)
    msgs, total_bytes, first, last, failed = (cursor.uvarint() for _ in range(5))
    if cursor.failed:
        raise EntryError(CORRUPT_STREAM_STATE)
    sources: dict[str, SourceState] = {}
    if buf[1] == _STREAM_STATE_VERSION_SOURCES:
        count = cursor.uvarint()
        if cursor.failed:
            raise EntryError(CORRUPT_STREAM_STATE)
        for _ in range(count):  # each source takes 3 bytes or fails
            name = cursor.text()
            seq = cursor.uvarint()
            ident = cursor.text()
            if name is None or ident is None or cursor.failed:
                raise EntryError(CORRUPT_STREAM_STATE)
            sources[name] = SourceState(name, seq, ident)
    num_deleted = cursor.uvarint()
    blocks: list[DeleteBlock] = []
    if num_deleted:
        while cursor.pos < len(buf):
            blocks.append(_decode_delete_block(cursor))
    return StreamSnapshotState(
        msgs, total_bytes, first, last, failed, tuple(blocks), tuple(sources.values()), num_deleted
    )


def _decode_delete_block(cursor: Cursor) -> DeleteBlock:
    tag = cursor.buf[cursor.pos]
    if tag == _RUN_LENGTH_MAGIC:
        cursor.pos += 1
        first, num = cursor.uvarint(), cursor.uvarint()
        if cursor.failed:
            raise EntryError(CORRUPT_STREAM_STATE)
        return DeleteRange(first, num)
    if tag == SEQSET_MAGIC:
        try:
            seqset, size = decode_seqset(cursor.buf, cursor.pos)
        except SeqSetError:
            raise EntryError(CORRUPT_STREAM_STATE) from None
        cursor.pos += size
        return seqset
    raise EntryError(CORRUPT_STREAM_STATE)


_LEGACY_STATE_FIELDS: dict[str, FieldDecoder] = {
    "messages": go_uint64,
    "bytes": go_uint64,
    "first_seq": go_uint64,
    "last_seq": go_uint64,
    "clfs": go_uint64,
    "deleted": go_uint64_slice,
}


def _decode_json_state(data: bytes) -> StreamSnapshotState:
    """streamSnapshot, the JSON of servers before 2.10 (`deleted`: every interior delete)."""
    got = go_struct(parse_json(data, "stream snapshot"), _LEGACY_STATE_FIELDS, "streamSnapshot")
    deleted = got.get("deleted") or []
    return StreamSnapshotState(
        msgs=got.get("messages") or 0,
        total_bytes=got.get("bytes") or 0,
        first_seq=got.get("first_seq") or 0,
        last_seq=got.get("last_seq") or 0,
        failed=got.get("clfs") or 0,
        deleted=(DeleteList(tuple(deleted)),) if deleted else (),
    )
