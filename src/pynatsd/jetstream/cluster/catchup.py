"""A stream replica's catch-up after a snapshot (nats-server's `processSnapshot`,
`calculateSyncRequest`, `handleClusterSyncRequest`, `runCatchup` and `processCatchupMsg` in
`server/jetstream_cluster.go`), sans-IO and byte for byte as nats-server does it.

A follower that applies a stream snapshot whose last sequence is past its own store asks the
stream's leader for the messages in between, outside RAFT, in the system account:

1. The follower (`CatchupFollower`) listens on a fresh inbox `$JSC.R.<8>` and publishes a
   `SyncRequest` (JSON: `peer`, `first_seq` = its last + 1, `last_seq` = the snapshot's,
   `delete_ranges` true, `min_applied` = the snapshot's RAFT index) to the assignment's sync
   subject `$JSC.SYNC.<8>`, with the inbox as the reply.
2. The leader (`CatchupRun`) streams its store to that inbox: each message as a
   `streamMsgOp` record (`lseq` = the message's own sequence, no reply) with reply
   `$JSC.ACK.<8>.<record length>`; a single deleted sequence as a skip record (also acked),
   a longer run of them as one `deleteRangeOp` record without a reply; an empty message
   (EOF) at the end.
3. The follower stores each record at exactly its sequence with the leader's timestamp and
   answers its reply with an empty message; an error text there aborts the leader's run.
4. Flow control: at most 64 MiB and 256 Ki records unacknowledged per run and 64 MiB per
   server (`OutstandingBytes`); after a batch the leader waits until 4 Ki record slots are
   free or 5 s passed, and looks again every 0.5 s. 30 s without an ack ends a run
   (stalled); 5 s without a first record, or 30 s between records, makes the follower ask
   again, at most 3 times (2 s apart at least), at most 32 requests at once per server
   (`SyncSlots`).

Both sides are objects fed messages and the time (`handle_*`, `tick`); what they want done
comes out of `take_outputs()` as `Publish`, `Subscribe` and `Unsubscribe`, and `next_deadline()`
says when to call `tick` again. The stores are reached through two small ports:
`CatchupSource` (what the leader reads) and `CatchupTarget` (what the follower writes); both
stores of `pynatsd.jetstream.store` are both.
"""

from __future__ import annotations

import enum
import json
import logging
import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from pynatsd.jetstream.cluster.codec import (
    EntryError,
    FieldDecoder,
    go_bool,
    go_string,
    go_struct,
    go_uint64,
    parse_json,
)
from pynatsd.jetstream.cluster.entries import (
    DeleteRange,
    StreamOp,
    decode_delete_range,
    decode_stream_msg,
    encode_delete_range,
    encode_stream_msg,
)
from pynatsd.jetstream.cluster.placement import sync_subject
from pynatsd.jetstream.store.base import (
    InsufficientResourcesError,
    SequenceMismatchError,
    StoredMsg,
    StoreError,
    StreamState,
)
from pynatsd.raft.node import Publish, Subscribe, Unsubscribe

__all__ = [
    "CatchupError",
    "CatchupFollower",
    "CatchupRun",
    "CatchupSource",
    "CatchupTarget",
    "CatchupTimings",
    "FollowerState",
    "OutstandingBytes",
    "Publish",
    "RunState",
    "Subscribe",
    "SyncRequest",
    "SyncSlots",
    "Unsubscribe",
    "apply_catchup_record",
    "decode_sync_request",
    "encode_sync_request",
]

log = logging.getLogger("pynatsd.jetstream.cluster")

# runCatchup's flow control.
MAX_OUT_BYTES = 64 * 1024 * 1024  # maxOutBytes: unacknowledged bytes of one run
MAX_OUT_MSGS = 256 * 1024  # maxOutMsgs: unacknowledged records of one run
MIN_BATCH_SLOTS = 4 * 1024  # minBatchWait: free record slots before the next batch
MAX_TOTAL_OUT_BYTES = 64 * 1024 * 1024  # defaultMaxTotalCatchupOutBytes: per server
MAX_CONCURRENT_SYNC_REQUESTS = 32  # maxConcurrentSyncRequests: per server
MAX_RETRIES = 3  # processSnapshot's maxRetries
# A store with this many more interior deletes than messages is walked message by message
# rather than sequence by sequence (runCatchup's useLoadNext).
LOAD_NEXT_DELETES = 1_000_000

# The error texts nats-server sends to a record's reply to abort the leader's run.
ERR_STALLED = "catchup stalled"  # errCatchupStalled
ERR_BAD_MSG = "bad catchup msg"  # errCatchupBadMsg
ERR_WRONG_SEQ_FOR_SKIP = "wrong sequence for skipped msg"  # errCatchupWrongSeqForSkip
ERR_NO_LEADER = "catchup aborted, no leader"  # errCatchupAbortedNoLeader
ERR_TOO_MANY_RETRIES = "catchup failed, too many retries"  # errCatchupTooManyRetries
ERR_STREAM_STOPPED = "stream has been stopped"  # errCatchupStreamStopped

SYNC_REPLY_PREFIX = "$JSC.R"  # syncReplySubject
SYNC_ACK_PREFIX = "$JSC.ACK"  # syncAckSubject


@dataclass(frozen=True, slots=True)
class CatchupTimings:
    """The timers of both sides, in seconds; tests shrink them, the defaults are Go's."""

    start: float = 5.0  # streamCatchupStartInterval: wait for the first record
    activity: float = 30.0  # streamCatchupActivityInterval: between records, between acks
    min_retry_wait: float = 2.0  # minRetryWait: between two requests of a follower
    batch_wait: float = 5.0  # minWait: the leader's wait for free slots after a batch
    retry: float = 0.5  # the leader's retry timer: look again for room to send


GO_TIMINGS = CatchupTimings()


# -- what the objects ask for --------------------------------------------------------------------


# The same requests a RAFT node makes of its transport (raft/node.py).
Output = Publish | Subscribe | Unsubscribe


# -- ports ---------------------------------------------------------------------------------------


class CatchupSource(Protocol):
    """What a leader's run reads from its stream's store."""

    def state(self) -> StreamState: ...
    def load_msg(self, seq: int) -> StoredMsg | None: ...
    def load_next_msg(self, filter_subject: str, start_seq: int) -> StoredMsg | None: ...


class CatchupTarget(Protocol):
    """What a follower writes to its stream's store: a message at the next sequence with the
    leader's timestamp, and runs of sequences used up with nothing stored."""

    def state(self) -> StreamState: ...
    def store_msg(
        self, subject: str, header: bytes, data: bytes, ts: int | None = None
    ) -> tuple[int, int]: ...
    def skip_msgs(self, first: int, num: int) -> None: ...


class OutstandingBytes:
    """gcbOut: the catch-up bytes this server has sent and not yet seen acknowledged, over all
    of its runs; no run sends more while they are above `limit`."""

    def __init__(self, limit: int = MAX_TOTAL_OUT_BYTES) -> None:
        self.limit = limit
        self.total = 0

    def below_max(self) -> bool:
        return self.total <= self.limit


class SyncSlots:
    """syncOutSem: how many sync requests of this server's followers may be out at once."""

    def __init__(self, capacity: int = MAX_CONCURRENT_SYNC_REQUESTS) -> None:
        self.free = capacity

    def acquire(self) -> bool:
        if self.free <= 0:
            return False
        self.free -= 1
        return True

    def release(self) -> None:
        self.free += 1


# -- the sync request ----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class SyncRequest:
    """streamSyncRequest: what a follower asks the leader for."""

    first_seq: int  # FirstSeq: the follower's last sequence + 1
    last_seq: int  # LastSeq: the snapshot's last sequence
    peer: str = ""  # Peer: the follower's node ID
    delete_ranges: bool = True  # DeleteRangesOk: runs of deletes may come as one record
    min_applied: int = 0  # MinApplied: the RAFT index of the snapshot


def encode_sync_request(request: SyncRequest) -> bytes:
    """json.Marshal of streamSyncRequest (`peer` omitted when empty)."""
    out: dict[str, object] = {}
    if request.peer:
        out["peer"] = request.peer
    out["first_seq"] = request.first_seq
    out["last_seq"] = request.last_seq
    out["delete_ranges"] = request.delete_ranges
    out["min_applied"] = request.min_applied
    return json.dumps(out, separators=(",", ":"), ensure_ascii=False).encode()


_SYNC_FIELDS: dict[str, FieldDecoder] = {
    "peer": go_string,
    "first_seq": go_uint64,
    "last_seq": go_uint64,
    "delete_ranges": go_bool,
    "min_applied": go_uint64,
}


def decode_sync_request(data: bytes) -> SyncRequest:
    """json.Unmarshal into streamSyncRequest; raises EntryError where Go errs (the leader
    then ignores the request)."""
    got = go_struct(parse_json(data, "sync request"), _SYNC_FIELDS, "streamSyncRequest")
    return SyncRequest(
        first_seq=got.get("first_seq") or 0,
        last_seq=got.get("last_seq") or 0,
        peer=got.get("peer") or "",
        delete_ranges=bool(got.get("delete_ranges")),
        min_applied=got.get("min_applied") or 0,
    )


def sync_request_for(
    state: StreamState, snapshot_last_seq: int, peer: str, index: int
) -> SyncRequest | None:
    """calculateSyncRequest: None when the store already reaches the snapshot."""
    if state.last_seq >= snapshot_last_seq:
        return None
    return SyncRequest(state.last_seq + 1, snapshot_last_seq, peer, True, index)


def ack_reply_size(subject: str) -> int:
    """parseAckReplyNum of the last token of `$JSC.ACK.<8>.<n>`; -1 when it is no number."""
    token = subject.rpartition(".")[2]
    if not token or not token.isascii() or not token.isdigit():
        return -1
    return int(token)


# -- the leader's run ----------------------------------------------------------------------------


class RunState(enum.Enum):
    SENDING = "sending"
    DONE = "done"  # EOF sent
    SKIPPED = "skipped"  # the log has the snapshot's index but has not applied it yet
    STEP_DOWN = "step down"  # our store ends before what was asked: let another lead
    ABORTED = "aborted"  # the follower sent an error to a record's reply
    STALLED = "stalled"  # no ack for `activity` seconds
    STOPPED = "stopped"  # the owner stopped it (stream gone, server stopping)


class CatchupRun:
    """runCatchup: one follower's catch-up, on the leader.

    `send_subject` is the follower's inbox, `ack_subject` our fresh `$JSC.ACK.<8>` (records'
    replies are it plus `.<length>`). `progress` is our RAFT node's (last index, applied).
    `send_limit` bounds the records one call sends (the event loop gets a turn in between;
    `wants_more` then says to call `resume` again soon): a batch of nats-server split across
    several calls, with the same records on the wire.
    """

    def __init__(
        self,
        source: CatchupSource,
        request: SyncRequest,
        send_subject: str,
        ack_subject: str,
        *,
        outstanding: OutstandingBytes | None = None,
        timings: CatchupTimings = GO_TIMINGS,
        progress: tuple[int, int] | None = None,
        send_limit: int = MAX_OUT_MSGS,
        max_out_bytes: int = MAX_OUT_BYTES,
        max_out_msgs: int = MAX_OUT_MSGS,
        min_batch_slots: int = MIN_BATCH_SLOTS,
    ) -> None:
        self.source = source
        self.request = request
        self.send_subject = send_subject
        self.ack_subject = ack_subject
        self.ack_filter = ack_subject + ".*"
        self.outstanding = outstanding if outstanding is not None else OutstandingBytes()
        self.timings = timings
        self.progress = progress
        self.send_limit = send_limit
        self.max_out_bytes = max_out_bytes
        self.max_out_msgs = max_out_msgs
        self.min_batch_slots = min_batch_slots
        self.state = RunState.SENDING
        self.seq = request.first_seq  # the next sequence to look at
        self.last = request.last_seq
        self.out_bytes = 0  # outb
        self.out_msgs = 0  # outm
        self.batch_sent = 0  # spb: records of the batch sent last
        self.batch_open = False  # a batch split by send_limit goes on without a wait
        self.wait_until = 0.0  # the end of the wait for free slots, once it began
        self.active_until = 0.0  # notActive
        self.retry_at = 0.0  # the retry timer
        self.wants_more = False
        self.lag = 0  # records the follower still lacks (catchups[peer])
        self.use_load_next = False
        self._store_last = 0  # the store's last sequence, as last looked at
        self._store_first = 0  # and its first, when the run began
        self._dr_first = 0  # a pending run of deleted sequences
        self._dr_num = 0
        self.outputs: list[Output] = []

    @property
    def finished(self) -> bool:
        return self.state is not RunState.SENDING

    def take_outputs(self) -> list[Output]:
        outputs, self.outputs = self.outputs, []
        return outputs

    def next_deadline(self) -> float | None:
        if self.finished:
            return None
        if self.wait_until:
            return min(self.active_until, self.retry_at, self.wait_until)
        return min(self.active_until, self.retry_at)

    # ----- in
    def start(self, now: float) -> None:
        """The checks before streaming, then the first batch."""
        request = self.request
        if self.progress is not None:
            index, applied = self.progress
            if index >= request.min_applied > applied:
                # The follower got the snapshot from a former leader; we have it in our log
                # but not applied yet. The follower asks again after a while.
                self._finish(RunState.SKIPPED, unsubscribe=False)
                return
            state = self.source.state()
            if state.last_seq < self.last:
                log.warning(
                    "Catchup skipped, requested sequence %d was larger than current state: %s",
                    self.seq,
                    state,
                )
                self._finish(RunState.STEP_DOWN, unsubscribe=False)
                return
        state = self.source.state()
        self._store_last = state.last_seq
        self._store_first = state.first_seq
        self.use_load_next = request.delete_ranges and (
            state.num_deleted > 2 * state.messages or state.num_deleted > LOAD_NEXT_DELETES
        )
        self.lag = max(self.last - self.seq, 0)
        self.outputs.append(Subscribe(self.ack_filter))
        self.active_until = now + self.timings.activity
        self.retry_at = now + self.timings.retry
        self._send_next(now)

    def handle_ack(self, now: float, subject: str, payload: bytes) -> None:
        """A message on `$JSC.ACK.<8>.*`: an empty one acknowledges a record of that length;
        any text is the follower's error and ends the run."""
        if self.finished:
            return
        if payload:
            log.warning(
                "Catchup was aborted on the remote due to: %r",
                payload.decode("utf-8", "replace"),
            )
            self._finish(RunState.ABORTED)
            return
        size = max(ack_reply_size(subject), 0)
        self.out_bytes -= size
        self.outstanding.total -= size
        self.out_msgs -= 1
        if self.lag > 0:
            self.lag -= 1
        self.active_until = now + self.timings.activity
        self._send_next(now)

    def tick(self, now: float) -> None:
        if self.finished:
            return
        if now >= self.active_until:
            log.warning("Catchup stalled")
            self._finish(RunState.STALLED)
            return
        waited = self.wait_until and now >= self.wait_until
        if now >= self.retry_at or self.wants_more or waited:
            self._send_next(now)

    def resume(self, now: float) -> None:
        """Go on with a batch that `send_limit` cut."""
        if not self.finished:
            self._send_next(now)

    def stop(self) -> None:
        if not self.finished:
            self._finish(RunState.STOPPED)

    # ----- sending
    def _send_next(self, now: float) -> None:
        """sendNextBatchAndContinue."""
        self.retry_at = now + self.timings.retry
        self.wants_more = False
        if self.seq > self.last:
            self._eof()
            return
        if self.batch_sent > 0 and not self.batch_open:
            free = self.max_out_msgs - self.out_msgs
            if free <= self.min_batch_slots:
                if not self.wait_until:
                    self.wait_until = now + self.timings.batch_wait
                if now < self.wait_until:
                    return
            self.batch_sent = 0
            self.wait_until = 0.0
        self.batch_open = False
        sent = 0
        outstanding = self.outstanding
        limited = False
        while (
            self.seq <= self.last
            and self.out_bytes <= self.max_out_bytes
            and self.out_msgs <= self.max_out_msgs
            and outstanding.below_max()
        ):
            if sent >= self.send_limit:
                self.batch_open = self.wants_more = limited = True
                break
            if not self._send_one():
                return
            sent += 1
            if self.finished:
                return
        if not limited:
            self._flush_deletes()  # the end of a batch

    def _send_one(self) -> bool:
        """The record(s) for `self.seq`, which then moves on; False when the run ended."""
        seq = self.seq
        msg: StoredMsg | None
        if self.use_load_next:
            msg = self.source.load_next_msg("", seq)
            if msg is not None and msg.seq > seq:
                if msg.seq > self.last:
                    self._add_deletes(seq, self.last - seq + 1)
                    self.seq = self.last
                    return self._after(self.last)
                self._add_deletes(seq, msg.seq - seq)
                seq = self.seq = msg.seq
            elif msg is None:
                if self._past_end(seq):
                    return False
                self._add_deletes(seq, self.last - seq + 1)
                self.seq = self.last
                return self._after(self.last)
        else:
            msg = self.source.load_msg(seq)
            if msg is None:
                if self._past_end(seq):
                    return False
                if seq < self._store_first and self.request.delete_ranges:
                    # Everything below the store's first sequence is gone: the same run of
                    # deletes nats-server gathers one sequence at a time, in one step.
                    upto = min(self._store_first - 1, self.last)
                    self._add_deletes(seq, upto - seq + 1)
                    self.seq = upto
                    return self._after(upto)
        if msg is not None:
            self._flush_deletes()
            record = encode_stream_msg(msg.subject, "", msg.header, msg.data, msg.seq, msg.ts)
            self._send_acked(record)
        elif self.request.delete_ranges:
            self._add_deletes(seq, 1)
        else:
            self._send_acked(encode_stream_msg("", "", b"", b"", seq, 0))
        return self._after(seq)

    def _after(self, seq: int) -> bool:
        if seq == self.last:
            self._eof()
            return False
        self.seq = seq + 1
        return True

    def _past_end(self, seq: int) -> bool:
        """ErrStoreEOF: the store now ends before `seq` (truncated since the run began). What
        we have goes, then EOF; the follower finds itself short and asks again."""
        if seq <= self._store_last:
            return False
        state = self.source.state()
        self._store_last = state.last_seq
        if seq <= state.last_seq:
            return False
        log.warning(
            "Catchup completed, but requested sequence %d was larger than current state: %s",
            seq,
            state,
        )
        self._flush_deletes()
        self._eof()
        return True

    def _add_deletes(self, first: int, num: int) -> None:
        if num <= 0:
            return
        if self._dr_num and self._dr_first + self._dr_num == first:
            self._dr_num += num
            return
        self._flush_deletes()
        self._dr_first, self._dr_num = first, num

    def _flush_deletes(self) -> None:
        """sendDR: one deleted sequence as an acknowledged skip record, more as one
        deleteRangeOp record without a reply (nothing to acknowledge)."""
        first, num = self._dr_first, self._dr_num
        if not num:
            return
        self._dr_first = self._dr_num = 0
        if num == 1:
            self._send_acked(encode_stream_msg("", "", b"", b"", first, 0))
        else:
            record = encode_delete_range(DeleteRange(first, num))
            self.outputs.append(Publish(self.send_subject, "", record))
            self.lag = max(self.lag - num, 0)

    def _send_acked(self, record: bytes) -> None:
        size = len(record)
        self.out_bytes += size
        self.outstanding.total += size
        self.out_msgs += 1
        self.batch_sent += 1
        self.outputs.append(Publish(self.send_subject, f"{self.ack_subject}.{size}", record))

    def _eof(self) -> None:
        self._flush_deletes()
        self.outputs.append(Publish(self.send_subject, "", b""))
        self._finish(RunState.DONE)

    def _finish(self, state: RunState, unsubscribe: bool = True) -> None:
        self.state = state
        self.wants_more = False
        # gcbSubLast: what this run still had out no longer counts against the server.
        self.outstanding.total -= self.out_bytes
        self.out_bytes = 0
        if unsubscribe:
            self.outputs.append(Unsubscribe(self.ack_filter))


# -- the follower --------------------------------------------------------------------------------


class CatchupError(Exception):
    """A record the follower could not take: `text` goes to the record's reply. `retry`:
    ask the leader again (else the catch-up fails)."""

    def __init__(self, text: str, retry: bool) -> None:
        super().__init__(text)
        self.text = text
        self.retry = retry


def apply_catchup_record(target: CatchupTarget, record: bytes) -> int:
    """processCatchupMsg: store one record; returns the sequence it covered up to.

    Only ops 4, 14 (a message or a skip) and 15 (a run of deletes) are valid. A message is
    stored at exactly its sequence, with the leader's timestamp; a skip (no subject, ts 0) and
    a run use the sequences up with nothing stored.
    """
    if not record:
        raise CatchupError(ERR_BAD_MSG, retry=False)
    op = record[0]
    if op == StreamOp.DELETE_RANGE:
        try:
            dr = decode_delete_range(record)
        except EntryError:
            raise CatchupError(ERR_BAD_MSG, retry=False) from None
        _skip(target, dr.first, dr.num)
        return dr.first + dr.num - 1
    if op not in (StreamOp.MSG, StreamOp.COMPRESSED_MSG):
        raise CatchupError(ERR_BAD_MSG, retry=False)
    try:
        msg = decode_stream_msg(record)
    except EntryError:
        raise CatchupError(ERR_BAD_MSG, retry=False) from None
    seq = msg.lseq
    if not msg.subject and msg.ts == 0:
        _skip(target, seq, 1)
        return seq
    if seq != target.state().last_seq + 1:
        raise CatchupError(SequenceMismatchError.description, retry=True)
    try:
        target.store_msg(msg.subject, msg.header, msg.payload, msg.ts)
    except InsufficientResourcesError as e:
        raise CatchupError(e.description, retry=False) from None
    except StoreError as e:
        raise CatchupError(e.description, retry=True) from None
    return seq


def _skip(target: CatchupTarget, first: int, num: int) -> None:
    try:
        target.skip_msgs(first, num)
    except SequenceMismatchError:
        raise CatchupError(ERR_WRONG_SEQ_FOR_SKIP, retry=True) from None
    except StoreError as e:
        retry = not isinstance(e, InsufficientResourcesError)
        raise CatchupError(e.description, retry) from None


class FollowerState(enum.Enum):
    WAITING_SLOT = "waiting for a sync slot"  # syncOutSem
    WAITING_LEADER = "waiting for a leader"  # leaderless at the first attempt
    REQUESTED = "requested"  # the request is out; records come in
    RETRY_WAIT = "waiting to retry"  # minRetryWait
    DONE = "done"  # the store reaches the snapshot
    FAILED = "failed"  # `error` says why


class CatchupFollower:
    """processSnapshot's catch-up loop, on the follower, for one snapshot.

    `leaderless` says whether the group has no leader now (checked before each attempt).
    `start` either finds nothing to do (DONE at once) or sends the first request.
    """

    def __init__(
        self,
        target: CatchupTarget,
        *,
        sync_subject: str,
        peer: str,
        snapshot_last_seq: int,
        min_applied: int,
        leaderless: Callable[[], bool] = lambda: False,
        slots: SyncSlots | None = None,
        timings: CatchupTimings = GO_TIMINGS,
        rng: random.Random | None = None,
    ) -> None:
        self.target = target
        self.sync_subject = sync_subject
        self.peer = peer
        self.snapshot_last_seq = snapshot_last_seq
        self.min_applied = min_applied
        self.leaderless = leaderless
        self.slots = slots if slots is not None else SyncSlots()
        self.timings = timings
        self.rng = rng or random.Random()
        self.state = FollowerState.RETRY_WAIT
        self.error = ""
        self.attempts = 0  # numRetries
        self.inbox = ""
        self.holds_slot = False
        self.deadline = 0.0  # notActive, or the end of a wait
        self.sent_at = 0.0  # reqSendTime
        self.records = 0  # records taken over all attempts
        self.started = 0.0
        self.took = 0.0  # seconds from start to the end of a catch-up that succeeded
        self.outputs: list[Output] = []

    @property
    def finished(self) -> bool:
        return self.state in (FollowerState.DONE, FollowerState.FAILED)

    def take_outputs(self) -> list[Output]:
        outputs, self.outputs = self.outputs, []
        return outputs

    def next_deadline(self) -> float | None:
        return None if self.finished else self.deadline

    # ----- in
    def start(self, now: float) -> None:
        self.started = now
        if self._request() is None:
            self._finish(FollowerState.DONE)
            return
        self._retry(now)

    def handle(self, now: float, inbox: str, reply: str, payload: bytes) -> None:
        """A message on one of our inboxes: a record, or EOF (empty, no reply)."""
        if self.state is not FollowerState.REQUESTED or inbox != self.inbox:
            return  # an inbox we left (nats-server unsubscribes it; a late one is dropped)
        self.deadline = now + self.timings.activity
        if not payload:
            if self.target.state().last_seq >= self.snapshot_last_seq:
                self.took = now - self.started
                self._finish(FollowerState.DONE)
            else:
                self._wait_to_retry(now)
            return
        try:
            apply_catchup_record(self.target, payload)
        except CatchupError as e:
            if reply:
                self.outputs.append(Publish(reply, "", e.text.encode()))
            if not e.retry:
                log.warning("Catchup errored: %s", e.text)
                self._fail(e.text)
                return
            log.warning("Catchup errored, will retry: %s", e.text)
            self._wait_to_retry(now)
            return
        self.records += 1
        if reply:
            self.outputs.append(Publish(reply, "", b""))

    def tick(self, now: float) -> None:
        if self.finished or now < self.deadline:
            return
        state = self.state
        if state is FollowerState.REQUESTED:
            log.warning("Catchup stalled")
            self._retry(now)
        elif state is FollowerState.WAITING_LEADER:
            if self.leaderless():
                self._fail(ERR_NO_LEADER)
            else:
                self._next_attempt(now)
        elif state is FollowerState.WAITING_SLOT:
            self._attempt(now)
        else:
            self._retry(now)

    def stop(self) -> None:
        """The stream or the server stops: leave the inbox, give the slot back."""
        if not self.finished:
            self._fail(ERR_STREAM_STOPPED)

    # ----- the attempts (processSnapshot's RETRY)
    def _request(self) -> SyncRequest | None:
        return sync_request_for(
            self.target.state(), self.snapshot_last_seq, self.peer, self.min_applied
        )

    def _retry(self, now: float) -> None:
        self._release_slot()
        self._leave_inbox()
        if self.leaderless():
            if self.attempts == 0:
                # Maybe one comes online meanwhile: look again once.
                self.state = FollowerState.WAITING_LEADER
                self.deadline = now + self.timings.start
                return
            self._fail(ERR_NO_LEADER)
            return
        self._next_attempt(now)

    def _next_attempt(self, now: float) -> None:
        self.attempts += 1
        if self.attempts > MAX_RETRIES:
            self._fail(ERR_TOO_MANY_RETRIES)
            return
        self._attempt(now)

    def _attempt(self, now: float) -> None:
        if not self.slots.acquire():
            self.state = FollowerState.WAITING_SLOT
            self.deadline = now + self.timings.retry
            return
        self.holds_slot = True
        request = self._request()
        if request is None:
            self._finish(FollowerState.DONE)
            return
        self.inbox = sync_subject(SYNC_REPLY_PREFIX, self.rng)
        self.outputs.append(Subscribe(self.inbox))
        self.outputs.append(Publish(self.sync_subject, self.inbox, encode_sync_request(request)))
        self.state = FollowerState.REQUESTED
        self.sent_at = now
        self.deadline = now + self.timings.start

    def _wait_to_retry(self, now: float) -> None:
        """Never ask again sooner than `min_retry_wait` after the last request."""
        self._leave_inbox()
        self._release_slot()
        self.state = FollowerState.RETRY_WAIT
        self.deadline = max(now, self.sent_at + self.timings.min_retry_wait)
        if self.deadline <= now:
            self._retry(now)

    def _leave_inbox(self) -> None:
        if self.inbox:
            self.outputs.append(Unsubscribe(self.inbox))
            self.inbox = ""

    def _release_slot(self) -> None:
        if self.holds_slot:
            self.holds_slot = False
            self.slots.release()

    def _fail(self, error: str) -> None:
        self.error = error
        self._finish(FollowerState.FAILED)

    def _finish(self, state: FollowerState) -> None:
        self.state = state
        self._leave_inbox()
        self._release_slot()
