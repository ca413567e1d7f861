"""The entries of stream and consumer RAFT groups, byte for byte as nats-server writes them
(`server/jetstream_cluster.go`, `consumer.go`).

Every `EntryNormal` of a stream or consumer group is an op byte (`entryOp`) and its body:

- stream groups (`applyStreamEntries`): a message (`streamMsgOp` 4, or 14 when its body is an
  S2 block), a purge (5), a message delete (6), a run of skipped sequences (15), an entry of an
  atomic batch (16, and 17 for the batch's last: the framing around an inner 4 or 14);
- consumer groups (`applyConsumerEntries`): delivered (7), acked (8), skipped to (10), a pull
  request added (12) or removed (13), reset to a sequence (18).

Their `EntrySnapshot` data is in `snapshots`. Decoders take the whole entry (op byte first) and
raise `EntryError` wherever nats-server's return an error; they never read past the buffer and
never raise anything else. Encoders write what nats-server's write, except that a message is
never compressed (nats-server accepts op 4 at any size; compressing needs an S2 block encoder).
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from dataclasses import dataclass
from enum import IntEnum
from typing import Any

from pynatsd.gofmt import go_json
from pynatsd.raft.wire import put_uvarint, read_uvarint
from pynatsd.s2 import S2Error, decode_block

from .codec import (
    BAD_ENTRY,
    MASK64,
    Cursor,
    EntryError,
    FieldDecoder,
    JsonObject,
    go_bool,
    go_bytes,
    go_object,
    go_string,
    go_struct,
    go_text,
    go_uint64,
    i64,
    op_body,
    parse_json,
    put_varint,
    type_error,
    u64,
)

__all__ = [
    "AckUpdate",
    "AddPendingRequest",
    "BatchMsg",
    "ConsumerEntry",
    "ConsumerOp",
    "DeleteRange",
    "DeliveredUpdate",
    "EntryError",
    "MsgDelete",
    "PurgeRequest",
    "RemovePendingRequest",
    "ResetSeq",
    "SkipUpdate",
    "StreamEntry",
    "StreamMsg",
    "StreamOp",
    "StreamPurge",
    "decode_ack_update",
    "decode_batch_msg",
    "decode_consumer_entry",
    "decode_delete_range",
    "decode_delivered_update",
    "decode_msg_delete",
    "decode_pending_request",
    "decode_reset_seq",
    "decode_skip_update",
    "decode_stream_entry",
    "decode_stream_msg",
    "decode_stream_purge",
    "encode_ack_update",
    "encode_batch_msg",
    "encode_consumer_entry",
    "encode_delete_range",
    "encode_delivered_update",
    "encode_msg_delete",
    "encode_pending_request",
    "encode_reset_seq",
    "encode_skip_update",
    "encode_stream_entry",
    "encode_stream_msg",
    "encode_stream_purge",
]


class StreamOp(IntEnum):
    """entryOp values of stream groups (one numbering with the meta and consumer ops)."""

    MSG = 4  # streamMsgOp
    PURGE = 5  # purgeStreamOp
    DELETE_MSG = 6  # deleteMsgOp
    COMPRESSED_MSG = 14  # compressedStreamMsgOp
    DELETE_RANGE = 15  # deleteRangeOp
    BATCH_MSG = 16  # batchMsgOp
    BATCH_COMMIT_MSG = 17  # batchCommitMsgOp


class ConsumerOp(IntEnum):
    """entryOp values of consumer groups."""

    UPDATE_DELIVERED = 7  # updateDeliveredOp
    UPDATE_ACKS = 8  # updateAcksOp
    UPDATE_SKIP = 10  # updateSkipOp
    ADD_PENDING_REQUEST = 12  # addPendingRequest
    REMOVE_PENDING_REQUEST = 13  # removePendingRequest
    RESET_SEQ = 18  # resetSeqOp


BAD_STREAM_MSG = "jetstream cluster bad replicated stream msg"  # errBadStreamMsg

_MAX_U16 = 0xFFFF
_MAX_U32 = 0xFFFFFFFF
_U16 = struct.Struct("<H")
_U32 = struct.Struct("<I")
_U64 = struct.Struct("<Q")
# op, lseq, ts, subject length: the fixed start of a message entry.
_MSG_HEAD = struct.Struct("<BQqH")
_LSEQ_TS = struct.Struct("<Qq")
_MSG_MIN_BODY = 8 + 8 + 2 + 2 + 2 + 4  # decodeStreamMsg refuses anything shorter
_FLAG_SOURCED = 1  # msgFlagFromSourceOrMirror


# -- stream messages (4, 14) and batches (16, 17) -----------------------------------------------


@dataclass(frozen=True, slots=True)
class StreamMsg:
    """A message entry (`encodeStreamMsg`, `decodeStreamMsg`).

    In the log `lseq` is the clustered last sequence before this message (it is stored as
    `lseq + 1 - clfs`); in a catch-up record it is the message's own sequence. A skip has no
    subject and `ts` 0. A flow-control message has no subject or payload, `lseq` and `ts` 0, the
    reply to answer and a control header: the leader answers it once applied, nothing is stored.
    """

    subject: str
    reply: str  # the publisher's reply subject, for the PubAck
    header: bytes  # NATS/1.0 header block, b"" for none
    payload: bytes
    lseq: int  # lseq
    ts: int  # Unix ns, stamped by the leader at proposal
    sourced: bool = False  # msgFlagFromSourceOrMirror: came from a source or mirror


def encode_stream_msg(
    subject: str,
    reply: str,
    header: bytes,
    payload: bytes,
    lseq: int,
    ts: int,
    sourced: bool = False,
) -> bytes:
    """A `streamMsgOp` entry, never compressed. As nats-server does, a subject, reply or
    header longer than 65535 bytes is cut to its first 65535 (the rest is lost, and a header
    cut so is no longer a valid one), a payload to 4 GiB - 1."""
    subj = go_bytes(subject)[:_MAX_U16]
    rep = go_bytes(reply)[:_MAX_U16]
    hdr = header[:_MAX_U16] if len(header) > _MAX_U16 else header
    msg = payload[:_MAX_U32] if len(payload) > _MAX_U32 else payload
    flags = _FLAG_SOURCED if sourced else 0
    return b"".join(
        (
            _MSG_HEAD.pack(StreamOp.MSG, u64(lseq, "lseq"), i64(ts, "ts"), len(subj)),
            subj,
            _U16.pack(len(rep)),
            rep,
            _U16.pack(len(hdr)),
            hdr,
            _U32.pack(len(msg)),
            msg,
            put_uvarint(flags),
        )
    )


def decode_stream_msg(data: bytes) -> StreamMsg:
    """A `streamMsgOp` (4) or `compressedStreamMsgOp` (14) entry."""
    body = op_body(data, (StreamOp.MSG, StreamOp.COMPRESSED_MSG), "a stream message")
    if data[0] == StreamOp.COMPRESSED_MSG:
        try:
            body = memoryview(decode_block(bytes(body)))
        except S2Error as e:
            raise EntryError(str(e)) from None
    return _decode_msg_body(body)


def _decode_msg_body(buf: memoryview) -> StreamMsg:
    """decodeStreamMsg: lengths checked one by one; a missing or bad flags uvarint is 0."""
    if len(buf) < _MSG_MIN_BODY:
        raise EntryError(BAD_STREAM_MSG)
    lseq, ts = _LSEQ_TS.unpack_from(buf)
    subject, pos = _sized(buf, _LSEQ_TS.size, _U16)
    reply, pos = _sized(buf, pos, _U16)
    header, pos = _sized(buf, pos, _U16)
    payload, pos = _sized(buf, pos, _U32)
    flags = 0
    if pos < len(buf):
        value, n = read_uvarint(buf, pos)
        flags = value if n > 0 else 0
    return StreamMsg(
        go_text(subject), go_text(reply), header, payload, lseq, ts, bool(flags & _FLAG_SOURCED)
    )


def _sized(buf: memoryview, pos: int, length: struct.Struct) -> tuple[bytes, int]:
    """A length in `length`'s format at `pos`, then that many bytes: the bytes and the end."""
    start = pos + length.size
    if len(buf) < start:
        raise EntryError(BAD_STREAM_MSG)
    (size,) = length.unpack_from(buf, pos)
    if len(buf) - start < size:
        raise EntryError(BAD_STREAM_MSG)
    return bytes(buf[start : start + size]), start + size


@dataclass(frozen=True, slots=True)
class BatchMsg:
    """An entry of an atomic batch (`batchMsgOp` 16; `batchCommitMsgOp` 17 for its last):
    `entry` is the message entry inside, its op (4 or 14) first."""

    batch_id: str
    batch_seq: int  # 1 for the batch's first entry, then one more each
    commit: bool  # op 17: the entry that commits the batch
    entry: bytes

    def message(self) -> StreamMsg:
        return decode_stream_msg(self.entry)


def encode_batch_msg(batch: BatchMsg) -> bytes:
    """The batch framing (`encodeStreamMsgAllowCompressAndBatch`): op, u16 id length, id (cut
    to 65535 bytes), uvarint sequence, then the inner entry."""
    if not batch.entry:
        raise EntryError("a batch entry needs an inner entry")
    batch_id = go_bytes(batch.batch_id)[:_MAX_U16]
    op = StreamOp.BATCH_COMMIT_MSG if batch.commit else StreamOp.BATCH_MSG
    return b"".join(
        (
            bytes((op,)),
            _U16.pack(len(batch_id)),
            batch_id,
            put_uvarint(u64(batch.batch_seq, "batch_seq")),
            batch.entry,
        )
    )


def decode_batch_msg(data: bytes) -> BatchMsg:
    """decodeBatchMsg: the inner op is not checked here (nats-server checks it on apply)."""
    buf = op_body(data, (StreamOp.BATCH_MSG, StreamOp.BATCH_COMMIT_MSG), "a batch entry")
    end = len(buf)
    if end < 2:
        raise EntryError(BAD_STREAM_MSG)
    (size,) = _U16.unpack_from(buf, 0)
    if end - 2 < size:
        raise EntryError(BAD_STREAM_MSG)
    batch_id = go_text(buf[2 : 2 + size])
    batch_seq, n = read_uvarint(buf, 2 + size)
    if n <= 0 or 2 + size + n >= end:
        raise EntryError(BAD_STREAM_MSG)
    commit = data[0] == StreamOp.BATCH_COMMIT_MSG
    return BatchMsg(batch_id, batch_seq, commit, bytes(buf[2 + size + n :]))


# -- purges, deletes and delete ranges (5, 6, 15) --------------------------------------------------


@dataclass(frozen=True, slots=True)
class PurgeRequest:
    """JSApiStreamPurgeRequest, as the client asked (every field omitempty)."""

    seq: int = 0  # Sequence: purge up to, not including, this sequence
    filter: str = ""  # Subject: only messages on subjects matching this
    keep: int = 0  # Keep: how many of the newest to keep


@dataclass(frozen=True, slots=True)
class StreamPurge:
    """streamPurge (`purgeStreamOp`), proposed by the stream leader; the leader answers the
    request on `subject`/`reply` once applied. Without `request.seq` the purge stops at
    `last_seq + 1`, so that a replay cannot purge later messages."""

    stream: str
    last_seq: int  # LastSeq: the leader's last sequence when it proposed
    subject: str = ""  # the API subject the request came on
    reply: str = ""  # the requester's reply subject
    request: PurgeRequest | None = None
    client: dict[str, Any] | None = None  # ClientInfo JSON of the requester, kept as sent


@dataclass(frozen=True, slots=True)
class MsgDelete:
    """streamMsgDelete (`deleteMsgOp`): an API delete (the leader answers on apply) or the
    leader's own removal of an expired or limited message (`no_erase`, no client)."""

    stream: str
    seq: int
    no_erase: bool = False  # NoErase: remove without overwriting the message's bytes
    subject: str = ""
    reply: str = ""
    client: dict[str, Any] | None = None


@dataclass(frozen=True, slots=True)
class DeleteRange:
    """DeleteRange: `num` sequences from `first` deleted. The body of `deleteRangeOp` (a
    catch-up gap record, or in the log under the `js_raft_delete_range` feature flag) and a
    run-length delete block of a stream snapshot."""

    first: int  # First
    num: int  # Num

    def state(self) -> tuple[int, int, int]:
        """`State()`: first, last, count."""
        return self.first, (self.first + max(self.num - 1, 0)) & MASK64, self.num

    def __iter__(self) -> Iterator[int]:
        return iter(range(self.first, self.first + self.num))


def _json_entry(op: int, value: dict[str, Any]) -> bytes:
    """The op byte, then `json.NewEncoder(...).Encode`: Go's JSON and a newline."""
    return bytes((op,)) + go_json(value) + b"\n"


def _client_first(client: dict[str, Any] | None) -> dict[str, Any]:
    return {} if client is None else {"client": client}


def encode_stream_purge(purge: StreamPurge) -> bytes:
    out = _client_first(purge.client)
    out["stream"] = purge.stream
    out["last_seq"] = u64(purge.last_seq, "last_seq")
    out["subject"] = purge.subject
    out["reply"] = purge.reply
    if (request := purge.request) is not None:
        fields: dict[str, Any] = {}
        if request.seq:
            fields["seq"] = u64(request.seq, "seq")
        if request.filter:
            fields["filter"] = request.filter
        if request.keep:
            fields["keep"] = u64(request.keep, "keep")
        out["request"] = fields
    return _json_entry(StreamOp.PURGE, out)


_PURGE_REQUEST_FIELDS: dict[str, FieldDecoder] = {
    "seq": go_uint64,
    "filter": go_string,
    "keep": go_uint64,
}


def _go_purge_request(value: Any, previous: Any, where: str) -> Any:
    if value is None:
        return None
    if not isinstance(value, JsonObject):
        raise type_error(value, where, "*server.JSApiStreamPurgeRequest")
    return go_struct(value, _PURGE_REQUEST_FIELDS, "JSApiStreamPurgeRequest", previous)


_PURGE_FIELDS: dict[str, FieldDecoder] = {
    "client": go_object,
    "stream": go_string,
    "last_seq": go_uint64,
    "subject": go_string,
    "reply": go_string,
    "request": _go_purge_request,
}


def decode_stream_purge(data: bytes) -> StreamPurge:
    body = op_body(data, (StreamOp.PURGE,), "a purge")
    got = go_struct(parse_json(body, "purge"), _PURGE_FIELDS, "streamPurge")
    request = got.get("request")
    return StreamPurge(
        stream=got.get("stream") or "",
        last_seq=got.get("last_seq") or 0,
        subject=got.get("subject") or "",
        reply=got.get("reply") or "",
        request=None if request is None else PurgeRequest(**request),
        client=got.get("client"),
    )


def encode_msg_delete(delete: MsgDelete) -> bytes:
    out = _client_first(delete.client)
    out["stream"] = delete.stream
    out["seq"] = u64(delete.seq, "seq")
    if delete.no_erase:
        out["no_erase"] = True
    out["subject"] = delete.subject
    out["reply"] = delete.reply
    return _json_entry(StreamOp.DELETE_MSG, out)


_DELETE_FIELDS: dict[str, FieldDecoder] = {
    "client": go_object,
    "stream": go_string,
    "seq": go_uint64,
    "no_erase": go_bool,
    "subject": go_string,
    "reply": go_string,
}


def decode_msg_delete(data: bytes) -> MsgDelete:
    body = op_body(data, (StreamOp.DELETE_MSG,), "a message delete")
    got = go_struct(parse_json(body, "message delete"), _DELETE_FIELDS, "streamMsgDelete")
    return MsgDelete(
        stream=got.get("stream") or "",
        seq=got.get("seq") or 0,
        no_erase=bool(got.get("no_erase")),
        subject=got.get("subject") or "",
        reply=got.get("reply") or "",
        client=got.get("client"),
    )


def encode_delete_range(delete_range: DeleteRange) -> bytes:
    first, num = u64(delete_range.first, "first"), u64(delete_range.num, "num")
    return _json_entry(StreamOp.DELETE_RANGE, {"First": first, "Num": num})


_DELETE_RANGE_FIELDS: dict[str, FieldDecoder] = {"First": go_uint64, "Num": go_uint64}


def decode_delete_range(data: bytes) -> DeleteRange:
    body = op_body(data, (StreamOp.DELETE_RANGE,), "a delete range")
    got = go_struct(parse_json(body, "delete range"), _DELETE_RANGE_FIELDS, "DeleteRange")
    return DeleteRange(got.get("First") or 0, got.get("Num") or 0)


StreamEntry = StreamMsg | StreamPurge | MsgDelete | DeleteRange | BatchMsg


def decode_stream_entry(data: bytes) -> StreamEntry:
    """Any `EntryNormal` of a stream group, by its op."""
    if not data:
        raise EntryError(BAD_ENTRY)
    op = data[0]
    if op in (StreamOp.MSG, StreamOp.COMPRESSED_MSG):
        return decode_stream_msg(data)
    if op in (StreamOp.BATCH_MSG, StreamOp.BATCH_COMMIT_MSG):
        return decode_batch_msg(data)
    if op == StreamOp.PURGE:
        return decode_stream_purge(data)
    if op == StreamOp.DELETE_MSG:
        return decode_msg_delete(data)
    if op == StreamOp.DELETE_RANGE:
        return decode_delete_range(data)
    raise EntryError(f"unknown stream entry op type: {op}")


def encode_stream_entry(entry: StreamEntry) -> bytes:
    if isinstance(entry, StreamMsg):
        return encode_stream_msg(
            entry.subject,
            entry.reply,
            entry.header,
            entry.payload,
            entry.lseq,
            entry.ts,
            entry.sourced,
        )
    if isinstance(entry, BatchMsg):
        return encode_batch_msg(entry)
    if isinstance(entry, StreamPurge):
        return encode_stream_purge(entry)
    if isinstance(entry, MsgDelete):
        return encode_msg_delete(entry)
    return encode_delete_range(entry)


# -- consumer entries (7, 8, 10, 12, 13, 18) ---------------------------------------------------


@dataclass(frozen=True, slots=True)
class DeliveredUpdate:
    """updateDeliveredOp: a message went out (`updateDelivered`); replicas record it and the
    leader sends the held message once this is committed."""

    consumer_seq: int  # dseq
    stream_seq: int  # sseq
    delivery_count: int  # dc
    timestamp: int  # ts: Unix ns of the delivery


@dataclass(frozen=True, slots=True)
class AckUpdate:
    """updateAcksOp: an ack (`updateAcks`)."""

    consumer_seq: int  # dseq
    stream_seq: int  # sseq


@dataclass(frozen=True, slots=True)
class SkipUpdate:
    """updateSkipOp: a filtered consumer moved its start past unmatched messages."""

    stream_seq: int  # sseq: the next stream sequence to consider


@dataclass(frozen=True, slots=True)
class AddPendingRequest:
    """addPendingRequest: a pull request's reply subject, remembered by the replicas."""

    reply: str


@dataclass(frozen=True, slots=True)
class RemovePendingRequest:
    """removePendingRequest: that pull request is done."""

    reply: str


@dataclass(frozen=True, slots=True)
class ResetSeq:
    """resetSeqOp: the consumer restarts at `stream_seq`; the leader answers `reply`."""

    stream_seq: int  # sseq
    reply: str = ""


ConsumerEntry = (
    DeliveredUpdate | AckUpdate | SkipUpdate | AddPendingRequest | RemovePendingRequest | ResetSeq
)


def encode_delivered_update(update: DeliveredUpdate) -> bytes:
    return b"".join(
        (
            bytes((ConsumerOp.UPDATE_DELIVERED,)),
            put_uvarint(u64(update.consumer_seq, "consumer_seq")),
            put_uvarint(u64(update.stream_seq, "stream_seq")),
            put_uvarint(u64(update.delivery_count, "delivery_count")),
            put_varint(i64(update.timestamp, "timestamp")),
        )
    )


def decode_delivered_update(data: bytes) -> DeliveredUpdate:
    """decodeDeliveredUpdate (anything after the timestamp is ignored)."""
    buf = op_body(data, (ConsumerOp.UPDATE_DELIVERED,), "a delivered update")
    cursor = Cursor(buf, 0)
    dseq, sseq, dc = cursor.uvarint(), cursor.uvarint(), cursor.uvarint()
    ts = cursor.varint()
    if cursor.failed:
        raise EntryError("jetstream cluster bad replicated delivered update")
    return DeliveredUpdate(dseq, sseq, dc, ts)


def encode_ack_update(update: AckUpdate) -> bytes:
    return b"".join(
        (
            bytes((ConsumerOp.UPDATE_ACKS,)),
            put_uvarint(u64(update.consumer_seq, "consumer_seq")),
            put_uvarint(u64(update.stream_seq, "stream_seq")),
        )
    )


def decode_ack_update(data: bytes) -> AckUpdate:
    buf = op_body(data, (ConsumerOp.UPDATE_ACKS,), "an ack update")
    cursor = Cursor(buf, 0)
    dseq, sseq = cursor.uvarint(), cursor.uvarint()
    if cursor.failed:
        raise EntryError("jetstream cluster bad replicated ack update")
    return AckUpdate(dseq, sseq)


def encode_skip_update(update: SkipUpdate) -> bytes:
    return bytes((ConsumerOp.UPDATE_SKIP,)) + _U64.pack(u64(update.stream_seq, "stream_seq"))


def decode_skip_update(data: bytes) -> SkipUpdate:
    """decodeSkipUpdate: 8 bytes LE (anything after them is ignored)."""
    buf = op_body(data, (ConsumerOp.UPDATE_SKIP,), "a skip update")
    if len(buf) < 8:
        raise EntryError("jetstream cluster bad replicated skip update")
    return SkipUpdate(_U64.unpack_from(buf)[0])


def encode_pending_request(request: AddPendingRequest | RemovePendingRequest) -> bytes:
    add = isinstance(request, AddPendingRequest)
    op = ConsumerOp.ADD_PENDING_REQUEST if add else ConsumerOp.REMOVE_PENDING_REQUEST
    return bytes((op,)) + go_bytes(request.reply)


def decode_pending_request(data: bytes) -> AddPendingRequest | RemovePendingRequest:
    ops = (ConsumerOp.ADD_PENDING_REQUEST, ConsumerOp.REMOVE_PENDING_REQUEST)
    reply = go_text(op_body(data, ops, "a pending request"))
    if data[0] == ConsumerOp.ADD_PENDING_REQUEST:
        return AddPendingRequest(reply)
    return RemovePendingRequest(reply)


def encode_reset_seq(reset: ResetSeq) -> bytes:
    stream_seq = u64(reset.stream_seq, "stream_seq")
    return bytes((ConsumerOp.RESET_SEQ,)) + _U64.pack(stream_seq) + go_bytes(reset.reply)


def decode_reset_seq(data: bytes) -> ResetSeq:
    buf = op_body(data, (ConsumerOp.RESET_SEQ,), "a reset")
    if len(buf) < 8:
        raise EntryError("jetstream cluster bad replicated reset update")
    return ResetSeq(_U64.unpack_from(buf)[0], go_text(buf[8:]))


def decode_consumer_entry(data: bytes) -> ConsumerEntry:
    """Any `EntryNormal` of a consumer group, by its op."""
    if not data:
        raise EntryError(BAD_ENTRY)
    op = data[0]
    if op == ConsumerOp.UPDATE_DELIVERED:
        return decode_delivered_update(data)
    if op == ConsumerOp.UPDATE_ACKS:
        return decode_ack_update(data)
    if op == ConsumerOp.UPDATE_SKIP:
        return decode_skip_update(data)
    if op in (ConsumerOp.ADD_PENDING_REQUEST, ConsumerOp.REMOVE_PENDING_REQUEST):
        return decode_pending_request(data)
    if op == ConsumerOp.RESET_SEQ:
        return decode_reset_seq(data)
    raise EntryError(f"unknown consumer entry op type: {op}")


def encode_consumer_entry(entry: ConsumerEntry) -> bytes:
    if isinstance(entry, DeliveredUpdate):
        return encode_delivered_update(entry)
    if isinstance(entry, AckUpdate):
        return encode_ack_update(entry)
    if isinstance(entry, SkipUpdate):
        return encode_skip_update(entry)
    if isinstance(entry, ResetSeq):
        return encode_reset_seq(entry)
    return encode_pending_request(entry)
