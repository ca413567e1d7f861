"""Batch publishing into a stream: atomic batches and fast-ingest batches.

Corresponds to nats-server's `server/jetstream_batching.go` and, in `server/stream.go`,
`processJetStreamAtomicBatchMsg`, `processJetStreamFastBatchMsg` and `getFastBatch` (ADR-50).

- **Atomic** (`allow_atomic`): messages carry `Nats-Batch-Id` and `Nats-Batch-Sequence`; they
  are staged (each answered with an empty reply) until the one with `Nats-Batch-Commit: 1`
  (or `eob`, an end-of-batch marker that is not stored) arrives. Then every staged message is
  checked as nats-server's `checkMsgHeadersPreClusteredProposal` checks a batch, and either all
  are stored, one after the other in the same turn of the event loop, or none is; the commit
  is answered with a PubAck carrying `batch` and `count`.
- **Fast ingest** (`allow_batched`): the batch travels in the reply subject,
  `<prefix>.<id>.<initial flow>.<gap mode>.<batch seq>.<op>.$FI` (op 0 start, 1 append,
  2 commit, 3 commit by end-of-batch, 4 ping). Every message is stored as it comes; the server
  answers with flow acks `{"type":"ack","seq":N,"msgs":M}` every M messages, reports gaps and
  errors (`"type":"gap"`, `"type":"err"`) and ends with the PubAck.

Crash safety of atomic batches, as nats-server's: before a file stream stores a batch, the
checked messages are written to `<stream dir>/batches/<hash of the id>`; the stored messages
keep their batch headers and only the last carries `Nats-Batch-Commit`. After a kill during a
commit the stream's last message has a batch id and no commit header: the rest of the batch
is stored from the staging file at the restart (`recover_partial_batch`), or, without one,
the partial batch is removed. Either way a batch is stored whole or not at all.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import os
import shutil
import struct
import time
import zlib
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pynatsd.jetstream import advisories, errors
from pynatsd.jetstream.counters import check_increment, parse_increment
from pynatsd.jetstream.errors import ApiError, js_error
from pynatsd.jetstream.util import go_json
from pynatsd.logger import log
from pynatsd.protocol.headers import append_headers, header_value

if TYPE_CHECKING:
    from pynatsd.jetstream.stream import Stream

# nats-server's defaults (stream.go); `jetstream { limits { batch { ... } } }` overrides them.
DEFAULT_TIMEOUT = 10.0
DEFAULT_ATOMIC_INFLIGHT_PER_STREAM = 50
DEFAULT_ATOMIC_INFLIGHT_TOTAL = 1000
DEFAULT_ATOMIC_MAX_MSGS = 1000
DEFAULT_FAST_INFLIGHT_PER_STREAM = 1000
DEFAULT_FAST_INFLIGHT_TOTAL = 50_000

FAST_SUFFIX = b".$FI"
_OP_START, _OP_APPEND, _OP_COMMIT, _OP_COMMIT_EOB, _OP_PING = range(5)
_MAX_ID = 64


def _quote(text: str) -> str:
    """Go's %q for the batch id in a PubAck."""
    return json.dumps(text, ensure_ascii=False)


def _parse_uint(text: str | None) -> int | None:
    """Go's parseUint64: digits only."""
    if not text or not text.isdigit() or not text.isascii():
        return None
    return int(text)


# -- the fast-ingest reply subject ----------------------------------------------------------------


@dataclass(slots=True)
class FastOp:
    """One message's batch details, from its reply subject (Go's FastBatch)."""

    id: str
    seq: int
    flow: int
    gap_ok: bool
    ping: bool
    commit: bool
    commit_eob: bool


def parse_fast_reply(reply: str) -> FastOp | None:
    """Go's getFastBatch for a reply ending in `.$FI`; None when the pattern is invalid."""
    parts = reply[:-4].rsplit(".", 5)
    if len(parts) < 6:
        return None
    _, batch_id, flow_s, gap, seq_s, op_s = parts
    try:
        op = int(op_s)
    except ValueError:
        op = 0 if not op_s.lstrip("-").isdigit() else -1
    if not op_s or op < _OP_START or op > _OP_PING:
        return None
    seq = _parse_uint(seq_s)
    if seq is None or seq == 0 or seq >= (1 << 64) - 1:
        return None
    commit_eob = op == _OP_COMMIT_EOB
    if seq == 1 and commit_eob:
        return None
    if (op == _OP_START and seq != 1) or (op == _OP_APPEND and seq <= 1):
        return None
    if gap not in ("fail", "ok"):
        return None
    try:
        flow = int(flow_s)
    except ValueError:
        flow = 0
    if flow <= 0:
        flow = 10
    flow = min(flow, 65535)
    return FastOp(
        batch_id, seq, flow, gap == "ok", op == _OP_PING, commit_eob or op == _OP_COMMIT, commit_eob
    )


# -- limits ------------------------------------------------------------------------------------


@dataclass(slots=True)
class BatchLimits:
    timeout: float = DEFAULT_TIMEOUT
    atomic_per_stream: int = DEFAULT_ATOMIC_INFLIGHT_PER_STREAM
    atomic_total: int = DEFAULT_ATOMIC_INFLIGHT_TOTAL
    max_msgs: int = DEFAULT_ATOMIC_MAX_MSGS
    fast_per_stream: int = DEFAULT_FAST_INFLIGHT_PER_STREAM
    fast_total: int = DEFAULT_FAST_INFLIGHT_TOTAL


def limits_from(opts: Any) -> BatchLimits:
    lim = BatchLimits()
    if opts.jetstream_batch_timeout > 0:
        lim.timeout = opts.jetstream_batch_timeout
    if opts.jetstream_batch_inflight_per_stream > 0:
        lim.atomic_per_stream = lim.fast_per_stream = opts.jetstream_batch_inflight_per_stream
    if opts.jetstream_batch_inflight_total > 0:
        lim.atomic_total = lim.fast_total = opts.jetstream_batch_inflight_total
    if opts.jetstream_batch_max_msgs > 0:
        lim.max_msgs = opts.jetstream_batch_max_msgs
    return lim


@dataclass(slots=True)
class InflightCounts:
    """The server-wide counts of open batches (Go's globalInflight*Batches)."""

    atomic: int = 0
    fast: int = 0


# -- the consistency checks of a batch ---------------------------------------------------------


@dataclass(slots=True)
class StagedDiff:
    """What a batch changes before it is stored (Go's batchStagedDiff): message ids, the
    messages per subject, the expected last sequences already checked."""

    last_seq: int
    msg_ids: set[str] = field(default_factory=set)
    inflight: dict[str, list[int]] = field(default_factory=dict)  # subject -> [bytes, msgs]
    expected: dict[str, int] = field(default_factory=dict)


def _stored_size(stream: Stream, subject: str, header: bytes, data: bytes) -> int:
    if stream.config.storage == "memory":
        return len(subject) + len(header) + len(data) + 16
    size = 22 + len(subject) + len(data) + 8
    return size + 4 + len(header) if header else size


def check_batch_msg(
    diff: StagedDiff, stream: Stream, subject: str, header: bytes, data: bytes
) -> None:
    """One message of a batch, in the order of nats-server's
    checkMsgHeadersPreClusteredProposal (single server: no counters in flight)."""
    from pynatsd.jetstream.ttl import parse_message_ttl

    cfg = stream.config
    if header:
        if len(header) > 65535:
            raise js_error("StreamHeaderExceedsMaximum")
        if b"\r\nNats-Incr:" in header:
            check_increment(stream, header, data)
        expected_stream = header_value(header, "Nats-Expected-Stream")
        if expected_stream and expected_stream != cfg.name:
            raise errors.stream_not_match()
        text = header_value(header, "Nats-TTL")
        if text:
            try:
                ttl = parse_message_ttl(text)
                bad = False
            except ApiError:
                ttl, bad = 0, True
            if ttl != 0 or bad:
                if not cfg.allow_msg_ttl:
                    raise js_error("MessageTTLDisabled")
                if bad:
                    raise js_error("MessageTTLInvalid")
        msg_id = header_value(header, "Nats-Msg-Id")
        if msg_id:
            if msg_id in diff.msg_ids or stream.seen_msg_id(msg_id):
                raise js_error("AtomicPublishContainsDuplicateMessage")
            diff.msg_ids.add(msg_id)
        if b"\r\nNats-Stream-Source:" in header:
            raise js_error("MessageSourceHdrNotAllowed")
    if cfg.allow_msg_counter and (not header or parse_increment(header) is None):
        # The totals themselves are added up as the commit stores the batch, in order.
        raise js_error("MessageIncrMissing")
    if header:
        _check_expectations(diff, stream, subject, header)
    inflight = diff.inflight.get(subject)
    size = _stored_size(stream, subject, header, data)
    if inflight is None:
        inflight = diff.inflight[subject] = [size, 1]
    else:
        inflight[0] += size
        inflight[1] += 1
    diff.last_seq += 1
    if cfg.discard == "new":
        _check_discard_new(diff, stream, subject, header, inflight[1])


def _check_expectations(diff: StagedDiff, stream: Stream, subject: str, header: bytes) -> None:
    cfg = stream.config
    expected_last = _parse_uint(header_value(header, "Nats-Expected-Last-Sequence"))
    if expected_last is not None:
        if expected_last != diff.last_seq:
            raise errors.wrong_last_sequence(diff.last_seq)
        if diff.inflight:
            # Only the first message of a batch may expect a last sequence.
            raise js_error("StreamWrongLastSequenceConstant")
    subject_seq = _parse_uint(header_value(header, "Nats-Expected-Last-Subject-Sequence"))
    for_subject = header_value(header, "Nats-Expected-Last-Subject-Sequence-Subject")
    if subject_seq is not None:
        seq_subject = for_subject or subject
        if seq_subject in diff.inflight:
            raise js_error("StreamWrongLastSequenceConstant")
        seen = diff.expected.get(seq_subject)
        if seen is not None:
            if seen != subject_seq:
                raise errors.wrong_last_sequence(seen)
        else:
            last_msg = stream.store.load_last_msg(seq_subject)
            last = last_msg.seq if last_msg is not None else 0
            if last != subject_seq:
                raise errors.wrong_last_sequence(last)
            diff.expected[seq_subject] = last
    elif for_subject:
        raise js_error("StreamExpectedLastSeqPerSubjectInvalid")
    if b"\r\nNats-Schedule:" in header and not cfg.allow_msg_schedules:
        raise js_error("MessageSchedulesDisabled")
    rollup = header_value(header, "Nats-Rollup")
    if rollup:
        if not cfg.allow_rollup_hdrs or cfg.deny_purge:
            raise errors.rollup_failed("rollup not permitted")
        if rollup == "sub":
            if subject in diff.inflight:
                raise errors.rollup_failed("batch rollup sub invalid")
        elif rollup == "all":
            if diff.inflight:
                raise errors.rollup_failed("batch rollup all invalid")
        else:
            raise errors.rollup_failed(f"rollup value invalid: {_quote(rollup)}")


def _check_discard_new(
    diff: StagedDiff, stream: Stream, subject: str, header: bytes, subject_msgs: int
) -> None:
    cfg = stream.config
    if cfg.max_msgs > 0 or cfg.max_bytes > 0:
        st = stream.store.state()
        msgs = st.messages + sum(i[1] for i in diff.inflight.values())
        size = st.bytes + sum(i[0] for i in diff.inflight.values())
        if cfg.max_msgs > 0 and msgs > cfg.max_msgs:
            raise errors.stream_store_failed("maximum messages exceeded")
        if cfg.max_bytes > 0 and size > cfg.max_bytes:
            raise errors.stream_store_failed("maximum bytes exceeded")
    if (
        cfg.discard_new_per_subject
        and cfg.max_msgs_per_subject > 0
        and b"\r\nNats-Rollup:" not in (header or b"")
    ):
        total = stream.store.subjects_state(subject).get(subject, 0) + subject_msgs
        if total > cfg.max_msgs_per_subject:
            raise errors.stream_store_failed("maximum messages per subject exceeded")


# -- the batches of one stream -----------------------------------------------------------------


@dataclass(slots=True)
class AtomicBatch:
    msgs: list[tuple[str, bytes, bytes]] = field(default_factory=list)
    lseq: int = 0
    timer: asyncio.TimerHandle | None = None


@dataclass(slots=True)
class FastBatch:
    """Go's fastBatch: lseq the highest batch sequence seen, pseq the highest stored, fseq the
    one of the last flow ack, sseq the stream sequence of the last stored message."""

    gap_ok: bool
    max_ack: int
    lseq: int = 0
    sseq: int = 0
    pseq: int = 0
    fseq: int = 0
    pending: int = 0
    ack_messages: int = 0
    reply: bytes = b""
    commit: bool = False
    timer: asyncio.TimerHandle | None = None


class Batching:
    """The open batches of one stream (Go's `batching`)."""

    def __init__(self, stream: Stream) -> None:
        self.stream = stream
        self.atomic: dict[str, AtomicBatch] = {}
        self.fast: dict[str, FastBatch] = {}
        js = stream.ajs.js
        self.limits: BatchLimits = js.batch_limits
        self.counts: InflightCounts = js.batch_counts

    # -- replies ---------------------------------------------------------------------------

    def _error(self, reply: bytes, err: ApiError) -> None:
        if reply and not self.stream.config.no_ack:
            self.stream.reply_error(reply, err)

    def _pub_ack(self, seq: int, batch_id: str, count: int, extra: str = "") -> bytes:
        return self.stream.ack_prefix() + (
            f'{seq}{extra},"batch":{_quote(batch_id)},"count":{count}}}'.encode()
        )

    def _send_after_store(self, reply: bytes, body: bytes) -> None:
        """A flow ack or PubAck: sent once what is stored so far is durable."""
        if reply and not self.stream.config.no_ack:
            self.stream.queue_ack(reply, body, self.stream.store.state().last_seq)

    def _advisory(self, batch_id: str, reason: str) -> None:
        advisories.batch_abandoned(self.stream, batch_id, reason)

    def _common_checks(self, reply: bytes, header: bytes, data: bytes) -> bool:
        """What both kinds check first: sealed, resources, the message size."""
        stream = self.stream
        cfg = stream.config
        if cfg.sealed:
            self._error(reply, errors.stream_sealed())
            return False
        if stream.ajs.storage_limited:
            try:
                stream.ajs.check_resources(stream)
            except ApiError as e:
                self._error(reply, e)
                return False
        max_size = cfg.max_msg_size
        if max_size >= 0 and (len(header) > max_size or len(data) > max_size - len(header)):
            self._error(reply, errors.message_size_exceeds())
            return False
        return True

    # -- atomic ----------------------------------------------------------------------------

    def on_atomic(
        self, batch_id: str, subject: str, reply: bytes, header: bytes, data: bytes
    ) -> None:
        stream = self.stream
        cfg = stream.config
        if not self._common_checks(reply, header, data):
            return
        if not cfg.allow_atomic:
            return self._error(reply, js_error("AtomicPublishDisabled"))
        if len(batch_id) > _MAX_ID:
            return self._error(reply, js_error("AtomicPublishInvalidBatchID"))
        seq = _parse_uint(header_value(header, "Nats-Batch-Sequence"))
        if seq is None:
            return self._error(reply, js_error("AtomicPublishMissingSeq"))
        commit_value = header_value(header, "Nats-Batch-Commit")
        commit = commit_value is not None
        eob = commit_value == "eob"
        limits = self.limits
        batch = self.atomic.get(batch_id)
        if batch is None:
            if seq != 1:
                size = seq - 1 if eob else seq
                if size > limits.max_msgs:
                    return self._error(
                        reply, js_error("AtomicPublishTooLargeBatch", size=limits.max_msgs)
                    )
                return self._error(reply, js_error("AtomicPublishIncompleteBatch"))
            if len(self.atomic) + 1 > limits.atomic_per_stream:
                return self._error(reply, js_error("AtomicPublishTooManyInflight"))
            if self.counts.atomic + 1 > limits.atomic_total:
                return self._error(reply, js_error("AtomicPublishTooManyInflight"))
            self.counts.atomic += 1
            batch = self.atomic[batch_id] = AtomicBatch()
        if commit and not eob and commit_value != "1":
            self._drop_atomic(batch_id)
            return self._error(reply, js_error("AtomicPublishInvalidBatchCommit"))
        self._arm_atomic(batch_id, batch)
        batch.lseq += 1
        if batch.lseq != seq or (seq == 1 and eob):
            self._drop_atomic(batch_id)
            self._advisory(batch_id, "incomplete")
            return self._error(reply, js_error("AtomicPublishIncompleteBatch"))
        size = seq - 1 if eob else seq
        if size > limits.max_msgs:
            self._drop_atomic(batch_id)
            self._advisory(batch_id, "large")
            return self._error(reply, js_error("AtomicPublishTooLargeBatch", size=limits.max_msgs))
        if not eob:
            batch.msgs.append((subject, header, data))
        if not commit:
            if reply and not cfg.no_ack:
                stream.ajs.reply(reply, b"")  # staged
            return None
        self._drop_atomic(batch_id)
        self._commit_atomic(batch_id, batch, reply, eob)
        return None

    def _arm_atomic(self, batch_id: str, batch: AtomicBatch) -> None:
        if batch.timer is not None:
            batch.timer.cancel()
        batch.timer = self.stream.ajs.loop.call_later(
            self.limits.timeout, self._atomic_timed_out, batch_id, batch
        )

    def _atomic_timed_out(self, batch_id: str, batch: AtomicBatch) -> None:
        if self.atomic.get(batch_id) is batch:
            batch.timer = None
            self._drop_atomic(batch_id)
            self._advisory(batch_id, "timeout")

    def _drop_atomic(self, batch_id: str) -> None:
        batch = self.atomic.pop(batch_id, None)
        if batch is None:
            return
        self.counts.atomic -= 1
        if batch.timer is not None:
            batch.timer.cancel()
            batch.timer = None

    def _commit_atomic(self, batch_id: str, batch: AtomicBatch, reply: bytes, eob: bool) -> None:
        stream = self.stream
        diff = StagedDiff(last_seq=stream.store.state().last_seq)
        checked: list[tuple[str, bytes, bytes]] = []
        for subject, header, data in batch.msgs:
            if header and header_value(header, "Nats-Expected-Last-Msg-Id"):
                return self._error(
                    reply,
                    js_error(
                        "AtomicPublishUnsupportedHeaderBatch",
                        header="Nats-Expected-Last-Msg-Id",
                    ),
                )
            try:
                check_batch_msg(diff, stream, subject, header, data)
            except ApiError as e:
                return self._error(reply, e)
            checked.append((subject, header, data))
        if eob:
            subject, header, data = checked[-1]
            checked[-1] = (subject, append_headers(header, [("Nats-Batch-Commit", "1")]), data)
        staged = _stage(stream, batch_id, checked)
        try:
            self._store_checked(batch_id, checked, reply)
        finally:
            if staged:
                _unlink(staged)
        return None

    def _store_checked(
        self, batch_id: str, checked: list[tuple[str, bytes, bytes]], reply: bytes
    ) -> None:
        stream = self.stream
        stored: list[int] = []
        for subject, header, data in checked:
            try:
                # Checked above as a batch, so stored as the server places its own messages.
                seq, _ = stream.process_message(subject, header, data, sourced=True)
            except ApiError as e:
                # All or nothing: what this commit stored so far goes again.
                for done in reversed(stored):
                    stream.remove_msg(done)
                return self._error(reply, e)
            stored.append(seq)
        if reply and not stream.config.no_ack:
            stream.queue_ack(reply, self._pub_ack(stored[-1], batch_id, len(checked)), stored[-1])
        return None

    # -- fast ingest -----------------------------------------------------------------------

    def on_fast(self, subject: str, reply: bytes, header: bytes, data: bytes) -> None:
        stream = self.stream
        cfg = stream.config
        if not self._common_checks(reply, header, data):
            return
        if not cfg.allow_batched:
            return self._error(reply, js_error("BatchPublishDisabled"))
        op = parse_fast_reply(reply.decode("utf-8", "surrogateescape"))
        if op is None:
            return self._error(reply, js_error("BatchPublishInvalidPattern"))
        if len(op.id) > _MAX_ID:
            return self._error(reply, js_error("BatchPublishInvalidBatchID"))
        b = self.fast.get(op.id)
        if b is None:
            if op.seq != 1:
                return self._error(reply, js_error("BatchPublishUnknownBatchID"))
            limits = self.limits
            if len(self.fast) + 1 > limits.fast_per_stream:
                return self._error(reply, js_error("BatchPublishTooManyInflight"))
            if self.counts.fast + 1 > limits.fast_total:
                return self._error(reply, js_error("BatchPublishTooManyInflight"))
            self.counts.fast += 1
            b = self.fast[op.id] = FastBatch(gap_ok=op.gap_ok, max_ack=op.flow)
            self._fast_init(b)
        if not b.commit:
            self._arm_fast(op.id, b)
        if op.ping:
            return self._fast_ping(op, b, reply)
        if b.commit:
            return None  # committing after an error: the client waits for the PubAck
        b.lseq += 1
        if b.lseq != op.seq:
            if op.seq > b.lseq:
                self._send_now(reply, {"type": "gap", "last_seq": b.lseq, "seq": op.seq})
            if b.gap_ok and op.seq > b.lseq:
                b.lseq = op.seq
            else:
                b.lseq -= 1
                self._fast_commit(b, op.id, reply)
                return None
        if op.commit:
            if op.commit_eob:
                b.lseq -= 1
                if b.pending == 0:
                    b.pseq = b.lseq
            self._fast_commit(b, op.id, reply)
            if op.commit_eob:
                return None
        if op.seq == 1 and reply and not cfg.no_ack and not op.commit:
            self._send_now(reply, {"type": "ack", "seq": 0, "msgs": b.ack_messages})
        diff = StagedDiff(last_seq=stream.store.state().last_seq)
        try:
            check_batch_msg(diff, stream, subject, header, data)
        except ApiError as e:
            return self._fast_rejected(op, b, reply, e, header)
        b.pending += 1
        try:
            seq, _ = stream.process_message(subject, header, data, sourced=True)
        except ApiError as e:
            b.pending -= 1
            return self._error(reply, e)
        self._fast_stored(op, b, reply, seq)
        return None

    def _send_now(self, reply: bytes, body: dict[str, Any]) -> None:
        if reply:
            self.stream.ajs.reply(reply, go_json(body))

    def _fast_init(self, b: FastBatch) -> None:
        b.ack_messages = 1 if len(self.fast) > 1 else min(500, b.max_ack)

    def _arm_fast(self, batch_id: str, b: FastBatch) -> None:
        if b.timer is not None:
            b.timer.cancel()
        b.timer = self.stream.ajs.loop.call_later(
            self.limits.timeout, self._fast_timed_out, batch_id, b
        )

    def _fast_timed_out(self, batch_id: str, b: FastBatch) -> None:
        if self.fast.get(batch_id) is b:
            self._drop_fast(batch_id)

    def _drop_fast(self, batch_id: str) -> None:
        b = self.fast.pop(batch_id, None)
        if b is None:
            return
        self.counts.fast -= 1
        if b.timer is not None:
            b.timer.cancel()
            b.timer = None

    def _fast_commit(self, b: FastBatch, batch_id: str, reply: bytes) -> bool:
        """Go's fastBatchCommit: the PubAck now if everything is stored, else after the last."""
        b.commit = True
        if b.timer is not None:
            b.timer.cancel()
            b.timer = None
        if b.lseq == b.pseq:
            self._drop_fast(batch_id)
            self._send_after_store(reply, self._pub_ack(b.sseq, batch_id, b.lseq))
            return True
        return False

    def _fast_ping(self, op: FastOp, b: FastBatch, reply: bytes) -> None:
        send_flow = True
        if op.seq > b.lseq:
            self._send_now(reply, {"type": "gap", "last_seq": b.lseq + 1, "seq": op.seq + 1})
            if b.gap_ok:
                b.lseq = op.seq
                if b.pending == 0:
                    b.pseq = b.lseq
                send_flow = not self._check_flow(b, reply)
            else:
                self._fast_commit(b, op.id, reply)
                send_flow = False
        if send_flow:
            self._send_flow(b, b.fseq, reply)

    def _fast_rejected(
        self, op: FastOp, b: FastBatch, reply: bytes, err: ApiError, header: bytes
    ) -> None:
        duplicate = err.err_code == 10201  # AtomicPublishContainsDuplicateMessage
        if duplicate:
            if b.pending == 0:
                b.pseq = op.seq
                self._check_flow(b, reply)
            if not op.commit:
                return
        if not b.gap_ok and b.lseq == 1:
            # A batch failing at once is answered as a single publish would be.
            self._drop_fast(op.id)
            if duplicate:
                msg_id = header_value(header, "Nats-Msg-Id") or ""
                dseq = self.stream.seen_msg_id(msg_id)
                body = self._pub_ack(dseq, op.id, op.seq, ',"duplicate": true')
                if reply:
                    self.stream.ajs.reply(reply, body)
            else:
                self._error(reply, err)
            return
        if not duplicate:
            self._send_now(reply, {"type": "err", "seq": op.seq, "error": err.to_json()})
        if b.gap_ok and not op.commit:
            return
        if not duplicate:
            b.lseq -= 1
            if b.pending == 0:
                b.pseq = b.lseq
        self._fast_commit(b, op.id, reply)

    def _fast_stored(self, op: FastOp, b: FastBatch, reply: bytes, seq: int) -> None:
        """Go's fastBatchRegisterSequences, as the leader of a single server."""
        b.reply = reply
        if b.pending > 0:
            b.pending -= 1
        b.sseq = seq
        b.pseq = b.lseq if b.pending == 0 else op.seq
        if b.lseq == b.pseq and b.commit:
            self._drop_fast(op.id)
            self._send_after_store(reply, self._pub_ack(b.sseq, op.id, b.lseq))
            return
        self._check_flow(b, reply)

    def _check_flow(self, b: FastBatch, reply: bytes) -> bool:
        """Go's checkFlowControl: a flow ack every `ack_messages` stored messages, ramping the
        window up to 500 shared by the stream's open batches, at most what the client allows."""
        am = b.ack_messages
        if b.pseq < b.fseq + am:
            return False
        b.fseq += (b.pseq - b.fseq) // am * am
        most = min(max(500 // len(self.fast), 1), b.max_ack)
        if b.ack_messages < most:
            b.ack_messages = min(b.ack_messages * 2, most)
        elif b.ack_messages > most:
            b.ack_messages = max(b.ack_messages // 2, most)
        self._send_flow(b, b.fseq, reply)
        return True

    def _send_flow(self, b: FastBatch, seq: int, reply: bytes) -> None:
        self._send_after_store(reply, go_json({"type": "ack", "seq": seq, "msgs": b.ack_messages}))

    # -- lifecycle -------------------------------------------------------------------------

    def config_changed(self) -> None:
        cfg = self.stream.config
        if not cfg.allow_atomic:
            for batch_id in list(self.atomic):
                self._drop_atomic(batch_id)
        if not cfg.allow_batched:
            for batch_id in list(self.fast):
                self._drop_fast(batch_id)

    def stop(self) -> None:
        for batch_id in list(self.atomic):
            self._drop_atomic(batch_id)
        for batch_id in list(self.fast):
            self._drop_fast(batch_id)


# -- crash safety ------------------------------------------------------------------------------

_LENGTHS = struct.Struct("<III")


def _staging_dir(stream: Stream) -> str | None:
    directory = getattr(stream.store, "directory", None)
    return os.path.join(directory, "batches") if isinstance(directory, str) else None


def _staging_path(stream: Stream, batch_id: str) -> str | None:
    directory = _staging_dir(stream)
    if directory is None:
        return None
    return os.path.join(directory, hashlib.sha256(batch_id.encode()).hexdigest()[:32])


def _stage(stream: Stream, batch_id: str, msgs: list[tuple[str, bytes, bytes]]) -> str | None:
    """Write the checked batch where a restart finds it (file streams). Not fsynced: it
    covers a killed process (the page cache survives); the PubAck waits for the stream's
    own fsync anyway."""
    path = _staging_path(stream, batch_id)
    if path is None:
        return None
    buf = bytearray()
    for subject, header, data in msgs:
        raw = subject.encode("utf-8", "surrogateescape")
        buf += _LENGTHS.pack(len(raw), len(header), len(data))
        buf += raw
        buf += header
        buf += data
    buf += struct.pack("<I", zlib.crc32(buf))
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path + ".tmp", "wb") as f:
            f.write(buf)
        os.replace(path + ".tmp", path)
    except OSError as e:
        log.warning("JetStream %s: could not stage batch %r: %s", stream.name, batch_id, e)
        return None
    return path


def _read_staged(path: str) -> list[tuple[str, bytes, bytes]] | None:
    try:
        with open(path, "rb") as f:
            buf = f.read()
    except OSError:
        return None
    if len(buf) < 4 or struct.unpack("<I", buf[-4:])[0] != zlib.crc32(buf[:-4]):
        return None
    msgs = []
    pos, end = 0, len(buf) - 4
    while pos < end:
        slen, hlen, dlen = _LENGTHS.unpack_from(buf, pos)
        pos += _LENGTHS.size
        subject = buf[pos : pos + slen].decode("utf-8", "surrogateescape")
        pos += slen
        header = buf[pos : pos + hlen]
        pos += hlen
        msgs.append((subject, header, buf[pos : pos + dlen]))
        pos += dlen
    return msgs


def _unlink(path: str) -> None:
    with contextlib.suppress(OSError):
        os.unlink(path)


def recover_partial_batch(stream: Stream) -> int:
    """After a restart: a last message that belongs to an atomic batch but is not its commit
    means the server died while storing the batch. The rest is stored from the staging file
    (nats-server's roll forward); without one, the stored part is removed. Returns how many
    messages were added (positive) or removed (negative)."""
    try:
        return _recover(stream)
    finally:
        directory = _staging_dir(stream)
        if directory is not None and os.path.isdir(directory):
            shutil.rmtree(directory, ignore_errors=True)


def _recover(stream: Stream) -> int:
    store = stream.store
    last = store.load_last_msg("")
    if last is None or not last.header or b"\r\nNats-Batch-Id:" not in last.header:
        return 0
    header = last.header
    batch_id = header_value(header, "Nats-Batch-Id")
    seq = _parse_uint(header_value(header, "Nats-Batch-Sequence"))
    if not batch_id or seq is None or header_value(header, "Nats-Batch-Commit") is not None:
        return 0
    path = _staging_path(stream, batch_id)
    staged = _read_staged(path) if path is not None else None
    if staged is not None and seq < len(staged):
        for subject, hdr, data in staged[seq:]:
            stream.process_message(subject, hdr, data, sourced=True)
        log.warning(
            "JetStream stream %s: restored the partial batch %r (messages %d to %d)",
            stream.name,
            batch_id,
            seq + 1,
            len(staged),
        )
        return len(staged) - seq
    removed = 0
    msg: Any = last
    started = time.monotonic()
    while msg is not None and msg.header and header_value(msg.header, "Nats-Batch-Id") == batch_id:
        stream.remove_msg(msg.seq)
        removed += 1
        if _parse_uint(header_value(msg.header, "Nats-Batch-Sequence")) == 1:
            break
        msg = store.load_prev_msg("", msg.seq - 1) if msg.seq > 1 else None
    log.warning(
        "JetStream stream %s: removed %d messages of the partial batch %r (%.1f ms)",
        stream.name,
        removed,
        batch_id,
        (time.monotonic() - started) * 1000,
    )
    return -removed
