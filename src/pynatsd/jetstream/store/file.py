"""The file store: segment files of length-prefixed, checksummed records, rebuilt on open.

Layout of a stream directory::

    LOCK                      flock'd while open: two servers never share a stream
    msgs/0000000001.seg       segments, appended in order; the newest is the active one
    msgs/0000000001.idx       snapshot of a sealed segment's index (fast restart), optional
    consumers/<name>/state.json

A record (little endian)::

    magic u32 | crc32 u32 | kind u8 | seq u64 | ts i64 | floor u64 | slen u16 | hlen u32 | dlen u32
    | subject | header | data

The CRC covers everything after itself, lengths included. ``kind`` is a message, a tombstone
list (``data`` is the removed sequences), a floor marker (a purge) or an erased message.
``floor`` is the first live sequence when the record was written: every sequence below it is
gone. Removals from the front (limits, max_age, purge) therefore cost nothing extra; only
removals from the middle write tombstones. See docs/jetstream-store.md.
"""

from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import contextlib
import errno
import fcntl
import functools
import gc
import json
import logging
import os
import shutil
import struct
import threading
import time
import zlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from ._core import Rec, SeqList, StoreCore, is_all
from .base import (
    InsufficientResourcesError,
    StoredMsg,
    StoreError,
    StreamLimits,
)
from .records import HDR, HDR_SIZE, KIND_MSG, MAGIC, decode, decode_run

__all__ = [
    "DamageReport",
    "FileConsumerStateStore",
    "FileStore",
    "open_file_store",
]

log = logging.getLogger("pynatsd.jetstream.store")

MAGIC_BYTES = struct.pack("<I", MAGIC)
_U32 = struct.Struct("<I")
# A message record's header after the magic and the CRC (what the CRC covers first).
_MSG_HEAD = struct.Struct("<BQqQHII")
# The magic and the CRC in front of a record.
_MAGIC_CRC = struct.Struct("<II")
# A body larger than this is not copied into its record when a batch is written (see
# _io_store_batch): it goes to the write's join as it is.
_BODY_APART = 256
KIND_TOMBS = 1
KIND_FLOOR = 2
KIND_ERASED = 3
_MAX_KIND = 3

DEFAULT_SEGMENT_BYTES = 8 * 1024 * 1024
# Bytes read at once when a record is loaded: the records after it come from memory.
_READ_WINDOW = 64 * 1024

# Writes and syncs go through these names so that tests can make them fail (a full disk).
_pwrite = os.pwrite
_fdatasync = os.fdatasync

_executor_lock = threading.Lock()
_executor: concurrent.futures.ThreadPoolExecutor | None = None


# _MSG_HEAD followed by a subject of a given length, by that length (_head_with_subject).
_HEADS_WITH_SUBJECT: dict[int, Any] = {}


def _head_with_subject(length: int) -> Any:
    """The pack function of a message record's head and its subject of `length` bytes."""
    pack = _HEADS_WITH_SUBJECT.get(length)
    if pack is None:
        if len(_HEADS_WITH_SUBJECT) >= 256:
            _HEADS_WITH_SUBJECT.clear()
        pack = _HEADS_WITH_SUBJECT[length] = struct.Struct(f"<BQqQHII{length}s").pack
    return pack


def _fsync_executor() -> concurrent.futures.ThreadPoolExecutor:
    # One small pool for every store of the process: an fsync is a blocking call that must not
    # run on the event loop, and a thread per stream would be wasteful.
    global _executor
    with _executor_lock:
        if _executor is None:
            _executor = concurrent.futures.ThreadPoolExecutor(
                max_workers=4, thread_name_prefix="pynatsd-fsync"
            )
        return _executor


@dataclass(frozen=True, slots=True)
class DamageReport:
    """A byte range of a segment that holds no valid record, found by recovery or a read."""

    segment: str
    start: int
    end: int
    after_seq: int
    """The last good message sequence before the damage (0 if none)."""
    before_seq: int | None
    """The first good message sequence after it, if any: the lost ones lie in between."""
    truncated: bool
    """A torn tail that recovery cut off (the newest segment) rather than left in place."""


def encode_record(
    kind: int, seq: int, ts: int, floor: int, subject: bytes, header: bytes, data: bytes
) -> bytes:
    body = HDR.pack(MAGIC, 0, kind, seq, ts, floor, len(subject), len(header), len(data))[8:]
    checked = b"".join((body, subject, header, data))
    return MAGIC_BYTES + _U32.pack(zlib.crc32(checked)) + checked


def _seg_name(seg_id: int) -> str:
    return f"{seg_id:010d}.seg"


class _Segment:
    __slots__ = (
        "dirty",
        "fd",
        "first_seq",
        "id",
        "last_seq",
        "live",
        "live_bytes",
        "max_floor",
        "max_seq",
        "max_seq_ts",
        "path",
        "size",
        "tombs",
    )

    def __init__(self, seg_id: int, path: str, fd: int, size: int) -> None:
        self.id = seg_id
        self.path = path
        self.fd = fd
        self.size = size
        self.dirty = False
        # Live messages and their record bytes: what compaction would keep.
        self.live = 0
        self.live_bytes = 0
        # The message sequences physically here (live or not), 0 if none.
        self.first_seq = 0
        self.last_seq = 0
        # What the segment's records say beyond messages, kept so that compaction can carry
        # it over without parsing the file: tombstones, the highest floor, the highest seq.
        self.tombs: list[int] = []
        self.max_floor = 0
        self.max_seq = 0
        self.max_seq_ts = 0

    def note(self, seq: int, ts: int, floor: int, tombs: list[int]) -> None:
        if floor > self.max_floor:
            self.max_floor = floor
        if seq >= self.max_seq:
            self.max_seq = seq
            self.max_seq_ts = ts
        if tombs:
            self.tombs.extend(tombs)


@dataclass(slots=True)
class _Scan:
    """What a segment holds, as recovery found it."""

    msgs: list[tuple[int, str, int, int, int]]  # seq, subject, ts, size, loc
    tombs: list[int]
    floor: int
    max_seq: int
    max_seq_ts: int
    good_end: int
    damaged: list[tuple[int, int]]
    tail_seq_hint: int


def _msg_size(slen: int, hlen: int, dlen: int) -> int:
    # fileStoreMsgSize: nats-server counts its own record layout, and state.bytes and
    # max_bytes follow it so that STREAM.INFO matches the Go server byte for byte.
    if hlen == 0:
        return 22 + slen + dlen + 8
    return 22 + slen + 4 + hlen + dlen + 8


def scan_segment(seg_id: int, buf: bytes, intern: dict[str, str]) -> _Scan:
    """Parse every valid record of a segment image; resynchronise after damage.

    A record is valid when its magic, its lengths and its CRC agree. After a bad one the scan
    looks for the next magic number and carries on from there, so a flipped bit costs one
    record, not the rest of the segment.
    """
    msgs: list[tuple[int, str, int, int, int]] = []
    tombs: list[int] = []
    damaged: list[tuple[int, int]] = []
    floor = 0
    max_seq = 0
    max_seq_ts = 0
    good_end = 0
    tail_seq_hint = 0
    n = len(buf)
    mv = memoryview(buf)
    unpack = HDR.unpack_from
    crc32 = zlib.crc32
    seg_bits = seg_id << 32
    pos = 0
    bad_start = -1
    while pos < n:
        ok = False
        if n - pos >= HDR_SIZE:
            magic, crc, kind, seq, ts, rfloor, slen, hlen, dlen = unpack(buf, pos)
            if magic == MAGIC:
                end = pos + HDR_SIZE + slen + hlen + dlen
                ok = end <= n and kind <= _MAX_KIND and crc32(mv[pos + 8 : end]) == crc
                if not ok and bad_start < 0 and kind == KIND_MSG:
                    tail_seq_hint = seq
        if not ok:
            if bad_start < 0:
                bad_start = pos
            nxt = buf.find(MAGIC_BYTES, pos + 1)
            if nxt < 0:
                break
            pos = nxt
            continue
        if bad_start >= 0:
            damaged.append((bad_start, pos))
            bad_start = -1
            tail_seq_hint = 0
        if rfloor > floor:
            floor = rfloor
        if seq > max_seq:
            max_seq = seq
            max_seq_ts = ts
        if kind == KIND_MSG:
            p = pos + HDR_SIZE
            subject = buf[p : p + slen].decode("utf-8", "surrogateescape")
            subject = intern.setdefault(subject, subject)
            length = end - pos
            # fileStoreMsgSize inlined: this loop runs once per stored message on restart.
            size = 30 + slen + dlen + (4 + hlen if hlen else 0)
            msgs.append((seq, subject, ts, size, (length << 64) | seg_bits | pos))
        elif kind == KIND_TOMBS:
            p = pos + HDR_SIZE + slen + hlen
            tombs.extend(struct.unpack_from(f"<{dlen // 8}Q", buf, p))
        elif kind == KIND_ERASED:
            tombs.append(seq)
        good_end = end
        pos = end
    if bad_start >= 0:
        damaged.append((bad_start, n))
    return _Scan(msgs, tombs, floor, max_seq, max_seq_ts, good_end, damaged, tail_seq_hint)


class FileStore(StoreCore):
    """A stream store on disk. Open it with :func:`open_file_store`."""

    def __init__(
        self,
        directory: str,
        limits: StreamLimits,
        sync_always: bool = True,
        sync_interval: float = 120.0,
        segment_bytes: int = DEFAULT_SEGMENT_BYTES,
        loop: asyncio.AbstractEventLoop | None = None,
    ) -> None:
        super().__init__(StreamLimits())
        self._dir = os.path.abspath(directory)
        self._msgs_dir = os.path.join(self._dir, "msgs")
        self._cons_dir = os.path.join(self._dir, "consumers")
        self._sync_always = sync_always
        self._sync_interval = sync_interval
        self._segment_bytes = segment_bytes
        self._loop = loop
        self._segs: dict[int, _Segment] = {}
        # Read-ahead: (segment, file offset, bytes) of the last window read.
        # The last read-ahead: its segment, its offset, and the bytes.
        self._window: tuple[_Segment | None, int, bytes] = (None, 0, b"")
        self._active: _Segment | None = None
        self._wgen = 0
        self._synced_gen = 0
        self._sync_inflight = False
        self._sync_future: concurrent.futures.Future[BaseException | None] | None = None
        self._dir_dirty = False
        self._waiters: collections.deque[
            tuple[int, Callable[[], None], Callable[[BaseException], None] | None]
        ] = collections.deque()
        self._deferred_close: list[int] = []
        self._lazy_handle: asyncio.TimerHandle | None = None
        self._failed: StoreError | None = None
        self._compact_due: set[int] = set()
        self.damaged: list[DamageReport] = []
        """Every damaged range found since open (recovery, or a read that failed its CRC)."""
        self.recovery_seconds = 0.0
        os.makedirs(self._msgs_dir, exist_ok=True)
        os.makedirs(self._cons_dir, exist_ok=True)
        self._lock_fd = os.open(os.path.join(self._dir, "LOCK"), os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(self._lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            os.close(self._lock_fd)
            raise StoreError(f"stream store {self._dir} is in use") from exc
        try:
            t0 = time.perf_counter()
            # Recovery allocates a tuple per message and frees nothing: the cyclic collector
            # would walk the growing index again and again (half the restart time of a
            # 1M-message stream) for no garbage at all.
            gc_was_enabled = gc.isenabled()
            gc.disable()
            try:
                self._recover()
            finally:
                if gc_was_enabled:
                    gc.enable()
            self.recovery_seconds = time.perf_counter() - t0
            for name in sorted(os.listdir(self._cons_dir)):
                if os.path.isdir(os.path.join(self._cons_dir, name)):
                    self._consumers[name] = FileConsumerStateStore(self, name)
            # Limits may have changed while the stream was down (nats-server re-applies them
            # on recovery too).
            self.update_limits(limits)
        except BaseException:
            self._close_files()
            raise

    _msg_size = staticmethod(_msg_size)

    # -- recovery ---------------------------------------------------------------------------

    def _recover(self) -> None:
        names = os.listdir(self._msgs_dir)
        for name in names:
            if name.endswith(".tmp"):
                # A compaction cut short by a crash: the segment it was replacing is intact.
                os.unlink(os.path.join(self._msgs_dir, name))
        seg_ids = sorted(
            int(name[:-4]) for name in names if name.endswith(".seg") and name[:-4].isdigit()
        )
        intern: dict[str, str] = {}
        scans: list[tuple[_Segment, _Scan]] = []
        cut_at = -1  # where the newest segment's torn tail was cut off
        for i, seg_id in enumerate(seg_ids):
            path = os.path.join(self._msgs_dir, _seg_name(seg_id))
            fd = os.open(path, os.O_RDWR)
            with open(fd, "rb", closefd=False) as fh:
                buf = fh.read()
            seg = _Segment(seg_id, path, fd, len(buf))
            self._segs[seg_id] = seg
            scan = scan_segment(seg_id, buf, intern)
            is_last = i == len(seg_ids) - 1
            if is_last and scan.damaged and scan.damaged[-1][1] == len(buf):
                # A torn tail: the write of the newest records never completed (a crash) or
                # they were damaged. They cannot be served; cut them off so appends continue
                # from a clean end.
                start = scan.damaged[-1][0]
                log.warning(
                    "stream store %s: truncating %d damaged bytes at the end of segment %s",
                    self._dir,
                    len(buf) - start,
                    _seg_name(seg_id),
                )
                os.ftruncate(fd, start)
                seg.size = start
                cut_at = start
                if scan.tail_seq_hint == scan.max_seq + 1:
                    # The header of the torn record was intact: do not hand its sequence to
                    # another message, in case it had been acknowledged before the damage.
                    # A tombstone for it keeps that true across the next restarts.
                    scan.max_seq = scan.tail_seq_hint
                    tomb = encode_record(
                        KIND_TOMBS,
                        scan.max_seq,
                        scan.max_seq_ts,
                        scan.floor,
                        b"",
                        b"",
                        struct.pack("<Q", scan.max_seq),
                    )
                    try:
                        _pwrite(fd, tomb, start)
                        seg.size = start + len(tomb)
                        seg.dirty = True
                        scan.tombs.append(scan.max_seq)
                    except OSError as exc:
                        log.error(
                            "stream store %s: cannot record the lost sequence: %s", self._dir, exc
                        )
            scans.append((seg, scan))

        floor = max((s.floor for _, s in scans), default=0)
        tombs: set[int] = set()
        last = 0
        last_ts = 0
        for _, s in scans:
            tombs.update(s.tombs)
            if s.max_seq > last:
                last, last_ts = s.max_seq, s.max_seq_ts
        # A floor marker stores last_seq in its seq field; a purge to beyond the end also
        # moves last_seq (nats-server's Compact past the end).
        last = max(last, floor - 1)

        recs = self._recs
        subjects: dict[str, list[int]] = {}
        prev = 0
        for seg, s in scans:
            live = 0
            live_bytes = 0
            for seq, subject, ts, size, loc in s.msgs:
                if seq < floor or seq in tombs:
                    continue
                if seq <= prev:
                    log.error(
                        "stream store %s: record for sequence %d out of order in segment %s; "
                        "ignored",
                        self._dir,
                        seq,
                        _seg_name(seg.id),
                    )
                    continue
                prev = seq
                recs[seq] = (subject, ts, size, loc)
                sl = subjects.get(subject)
                if sl is None:
                    subjects[subject] = [seq]
                else:
                    sl.append(seq)
                self._bytes += size
                live += 1
                live_bytes += loc >> 64
            seg.live = live
            seg.live_bytes = live_bytes
            if s.msgs:
                # Ascending within a segment (records out of order were skipped above; the
                # compaction walk checks each record's segment anyway).
                seg.first_seq = s.msgs[0][0]
                seg.last_seq = s.msgs[-1][0]
            seg.tombs = s.tombs
            seg.max_floor = s.floor
            seg.max_seq = s.max_seq
            seg.max_seq_ts = s.max_seq_ts

        # Damage reports name the sequences that could have been lost.
        for seg, s in scans:
            for start, end in s.damaged:
                before = max((m[0] for m in s.msgs if m[4] & 0xFFFFFFFF < start), default=0)
                after = min((m[0] for m in s.msgs if m[4] & 0xFFFFFFFF >= end), default=None)
                truncated = seg is scans[-1][0] and start == cut_at
                report = DamageReport(
                    os.path.basename(seg.path), start, end, before, after, truncated
                )
                self.damaged.append(report)
                if not truncated:
                    log.error(
                        "stream store %s: damaged records in segment %s bytes %d-%d "
                        "(between sequences %d and %s); they will not be served",
                        self._dir,
                        report.segment,
                        start,
                        end,
                        before,
                        "end" if after is None else after,
                    )

        self._subjects = {k: SeqList(v) for k, v in subjects.items()}
        self._subj_gen += 1
        self._last = last
        self._last_ts = last_ts
        if recs:
            self._first = next(iter(recs))
            dmap = self._dmap
            p = self._first
            for seq in recs:
                if seq != p:
                    dmap.extend(range(p, seq))
                p = seq + 1
            # Removed messages after the last live one count as interior deletes too.
            dmap.extend(range(p, last + 1))
        else:
            self._first = floor if floor else (last + 1 if last else 0)

        if scans:
            self._active = scans[-1][0]
            self._delete_dead_segments()
        else:
            self._active = self._new_segment(1)

    # -- segments ---------------------------------------------------------------------------

    def _new_segment(self, seg_id: int) -> _Segment:
        path = os.path.join(self._msgs_dir, _seg_name(seg_id))
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
        except OSError as exc:
            raise self._write_error(exc) from exc
        seg = _Segment(seg_id, path, fd, 0)
        self._segs[seg_id] = seg
        self._dir_dirty = True
        return seg

    def _rotate(self) -> _Segment:
        old = self._active
        assert old is not None
        seg = self._new_segment(old.id + 1)
        self._active = seg
        return seg

    def _delete_dead_segments(self) -> None:
        """Delete leading segments without live messages.

        Only leading ones: a tombstone in a segment refers to a sequence in it or in an older
        segment, so deleting from the front never loses a tombstone that still matters.
        """
        for seg in list(self._segs.values()):
            if seg.live > 0 or seg is self._active:
                break
            del self._segs[seg.id]
            self._forget_window()
            try:
                os.unlink(seg.path)
            except OSError as exc:
                log.error("stream store %s: cannot delete %s: %s", self._dir, seg.path, exc)
            self._close_fd(seg.fd)

    def _close_fd(self, fd: int) -> None:
        # An fsync of this descriptor may be running in a worker; closing it under the worker
        # could let the number be reused by another file.
        if self._sync_inflight:
            self._deferred_close.append(fd)
        else:
            os.close(fd)

    # -- writing ----------------------------------------------------------------------------

    def _write_error(self, exc: OSError) -> StoreError:
        log.error("stream store %s: write failed: %s", self._dir, exc)
        if exc.errno in (errno.ENOSPC, errno.EDQUOT, errno.EFBIG):
            return InsufficientResourcesError()
        return InsufficientResourcesError()

    def _append(self, buf: bytes) -> tuple[_Segment, int]:
        """Append bytes (whole records) to the active segment in one write; all or nothing."""
        if self._failed is not None:
            raise self._failed
        total = len(buf)
        seg = self._active
        assert seg is not None
        if seg.size > 0 and seg.size + total > self._segment_bytes:
            seg = self._rotate()
        pos = seg.size
        try:
            done = 0
            while done < total:
                done += _pwrite(seg.fd, buf[done:] if done else buf, pos + done)
        except OSError as exc:
            # Leave no partial record behind: cut the file back to where this write began.
            try:
                os.ftruncate(seg.fd, pos)
            except OSError:
                self._scrub(seg, pos)
            raise self._write_error(exc) from exc
        seg.size = pos + total
        seg.dirty = True
        self._wgen += 1
        if not self._sync_always and self._lazy_handle is None:
            self._start_lazy_timer()
        return seg, pos

    def _scrub(self, seg: _Segment, pos: int) -> None:
        """The file could not be cut back to `pos` after a failed write: zero what the write
        left beyond it. A later append overwrites those bytes from `pos` on, but may be
        shorter: whole records of a failed batch would then survive it and come back at the
        next recovery. Zeros are a torn tail to recovery. Rewriting bytes the file already
        has needs no free space; if even that fails, the store fails (as after a failed
        fsync), since what the disk holds is no longer known."""
        try:
            end = os.fstat(seg.fd).st_size
            if end > pos:
                os.pwrite(seg.fd, bytes(end - pos), pos)
        except OSError as exc:
            log.error("stream store %s: cannot clear a failed write: %s", self._dir, exc)
            self._failed = InsufficientResourcesError()

    def _io_store(
        self,
        seq: int,
        subject: str,
        header: bytes,
        data: bytes,
        ts: int,
        size: int,
        floor: int,
        tombs: list[int],
    ) -> Rec:
        sb = subject.encode("utf-8", "surrogateescape")
        rec = encode_record(KIND_MSG, seq, ts, floor, sb, header, data)
        if tombs:
            seg, pos = self._append(rec + self._tombs_record(floor, tombs))
        else:
            seg, pos = self._append(rec)
        seg.live += 1
        seg.live_bytes += len(rec)
        if not seg.first_seq:
            seg.first_seq = seq
        seg.last_seq = seq
        if tombs or floor > seg.max_floor or seq < seg.max_seq:
            seg.note(seq, ts, floor, tombs)
        else:  # note(), for the usual newest message
            seg.max_seq = seq
            seg.max_seq_ts = ts
        return (subject, ts, size, (len(rec) << 64) | (seg.id << 32) | pos)

    def _io_store_batch(
        self,
        first_seq: int,
        subjects: list[str],
        headers: list[bytes],
        datas: list[bytes],
        ts: int,
        floor: int,
    ) -> list[Rec]:
        """The records of a batch in one write (one segment: a batch may take a segment past
        ``segment_bytes``, as one large message does). The records are the ones
        ``encode_record`` makes, built in as few copies as can be: the head with the subject in
        one pack (the subject encoded once for a run of it), and a large body left apart for
        the write's join to copy (its CRC continued over it), since each copy of a large bytes
        object is an allocation outside Python's small-object heap."""
        parts: list[bytes] = []
        append = parts.append
        sizes: list[int] = []
        magic_crc = _MAGIC_CRC.pack
        crc32 = zlib.crc32
        seq = first_seq
        last: str | None = None
        sb = b""
        pack: Any = None
        for subject, header, data in zip(subjects, headers, datas, strict=True):
            if subject is not last:
                last = subject
                sb = subject.encode("utf-8", "surrogateescape")
                pack = _head_with_subject(len(sb))
            head = pack(KIND_MSG, seq, ts, floor, len(sb), len(header), len(data), sb)
            if header:
                head += header
            if len(data) > _BODY_APART:
                append(magic_crc(MAGIC, crc32(data, crc32(head))) + head)
                append(data)
            else:
                checked = head + data
                append(magic_crc(MAGIC, crc32(checked)) + checked)
            # fileStoreMsgSize: 22 + subject + data + 8, and 4 + the header when there is one.
            sizes.append(8 + len(head) + len(data))
            seq += 1
        seg, pos = self._append(b"".join(parts))
        start = pos
        out: list[Rec] = []
        seg_bits = seg.id << 32
        extra = 30 - HDR_SIZE
        for subject, header, length in zip(subjects, headers, sizes, strict=True):
            size = length + extra + 4 if header else length + extra
            out.append((subject, ts, size, (length << 64) | seg_bits | pos))
            pos += length
        seg.live += len(out)
        seg.live_bytes += pos - start
        if not seg.first_seq:
            seg.first_seq = first_seq
        seg.last_seq = seq - 1
        seg.note(seq - 1, ts, floor, [])
        return out

    def _tombs_record(self, floor: int, tombs: list[int]) -> bytes:
        data = struct.pack(f"<{len(tombs)}Q", *tombs)
        return encode_record(KIND_TOMBS, self._last, self._last_ts, floor, b"", b"", data)

    def _io_remove(self, floor: int, tombs: list[int], erase: Iterable[int] = ()) -> None:
        for seq in erase:
            self._erase_in_place(seq)
        if tombs:
            rec = self._tombs_record(floor, tombs)
        else:
            rec = encode_record(KIND_FLOOR, self._last, self._last_ts, floor, b"", b"", b"")
        seg, _ = self._append(rec)
        seg.note(self._last, self._last_ts, floor, tombs)

    def _io_skip(self, last: int, ts: int, floor: int) -> None:
        # A floor marker whose seq is the new last sequence: recovery takes the highest seq
        # of any record as the last one, and every sequence after the last live message as
        # an interior delete, so the skipped run needs no tombstones.
        rec = encode_record(KIND_FLOOR, last, ts, floor, b"", b"", b"")
        seg, _ = self._append(rec)
        seg.note(last, ts, floor, [])
        if not self._recs:
            self._delete_dead_segments()  # the marker in the active segment says it all

    def _erase_in_place(self, seq: int) -> None:
        rec = self._recs[seq]
        loc = rec[3]
        length = loc >> 64
        seg = self._segs[(loc >> 32) & 0xFFFFFFFF]
        off = loc & 0xFFFFFFFF
        # Same length as the original, so the records after it stay where they are; the kind
        # makes recovery treat it as a tombstone.
        payload = length - HDR_SIZE
        body = encode_record(KIND_ERASED, seq, 0, 0, b"", b"", bytes(payload))
        self._forget_window()
        try:
            _pwrite(seg.fd, body, off)
        except OSError as exc:
            raise self._write_error(exc) from exc
        seg.dirty = True

    def _io_dropped(self, seq: int, rec: Rec) -> None:
        loc = rec[3]
        seg = self._segs.get((loc >> 32) & 0xFFFFFFFF)
        if seg is None:
            return
        seg.live -= 1
        seg.live_bytes -= loc >> 64
        if seg is self._active:
            return
        if seg.live == 0 and next(iter(self._segs)) == seg.id:
            self._delete_dead_segments()
        elif seg.live_bytes * 2 < seg.size and (
            seg.size >= min(4096, self._segment_bytes // 2) or seg.live == 0
        ):
            self._compact_due.add(seg.id)

    def _io_maintain(self) -> None:
        if self._compact_due:
            due = sorted(self._compact_due)
            self._compact_due.clear()
            for seg_id in due:
                seg = self._segs.get(seg_id)
                if seg is not None and seg is not self._active:
                    try:
                        self._compact_segment(seg)
                    except OSError as exc:
                        # Compaction only reclaims space; the old file is still intact.
                        log.error(
                            "stream store %s: compacting %s failed: %s", self._dir, seg.path, exc
                        )

    def _forget_window(self) -> None:
        """The read-ahead window must not outlive a rewrite or removal of its segment."""
        self._window = (None, 0, b"")

    def _compact_segment(self, seg: _Segment) -> None:
        """Rewrite a sealed segment that is mostly dead with only what still matters.

        Kept: the live message records (byte for byte), the tombstones that may still name a
        message in an older segment, and a floor marker with the segment's highest floor and
        sequence. Removals in the middle of a stream (a KV bucket keeping one value per key)
        would otherwise pin every segment behind the oldest live key forever. The new file
        is synced and renamed over the old one, so a crash leaves one or the other.
        """
        self._forget_window()
        recs = self._recs
        with open(seg.fd, "rb", closefd=False) as fh:
            fh.seek(0)
            buf = fh.read()
        oldest = next(iter(self._segs.values())).first_seq or seg.first_seq
        keep_tombs = [t for t in seg.tombs if oldest <= t < seg.first_seq and t >= self._first]
        later_has_records = any(s.size > 0 for s in self._segs.values() if s.id > seg.id)
        if seg.live == 0 and not keep_tombs and later_has_records:
            # Nothing here matters any more: later records carry a floor and a last
            # sequence at least as high as this segment's.
            del self._segs[seg.id]
            os.unlink(seg.path)
            self._close_fd(seg.fd)
            return
        out = bytearray()
        moved: list[tuple[int, Rec]] = []
        seg_bits = seg.id << 32
        for seq in range(seg.first_seq, seg.last_seq + 1) if seg.live else ():
            rec = recs.get(seq)
            if rec is None or (rec[3] >> 32) & 0xFFFFFFFF != seg.id:
                continue
            loc = rec[3]
            off = loc & 0xFFFFFFFF
            length = loc >> 64
            moved.append((seq, (rec[0], rec[1], rec[2], (length << 64) | seg_bits | len(out))))
            out += buf[off : off + length]
        if keep_tombs:
            data = struct.pack(f"<{len(keep_tombs)}Q", *keep_tombs)
            out += encode_record(
                KIND_TOMBS, seg.max_seq, seg.max_seq_ts, seg.max_floor, b"", b"", data
            )
        out += encode_record(KIND_FLOOR, seg.max_seq, seg.max_seq_ts, seg.max_floor, b"", b"", b"")
        tmp = seg.path + ".tmp"
        fd = os.open(tmp, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            done = 0
            while done < len(out):
                done += _pwrite(fd, memoryview(out)[done:], done)
            _fdatasync(fd)
            os.replace(tmp, seg.path)
        except BaseException:
            os.close(fd)
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise
        self._fsync_dir()
        self._close_fd(seg.fd)
        seg.fd = fd
        seg.size = len(out)
        seg.dirty = False
        seg.tombs = keep_tombs
        seg.live_bytes = sum(rec[3] >> 64 for _, rec in moved)
        if moved:
            seg.first_seq = moved[0][0]
            seg.last_seq = moved[-1][0]
        else:
            seg.first_seq = seg.last_seq = 0
        for seq, rec in moved:
            recs[seq] = rec

    def _fsync_dir(self) -> None:
        dfd = os.open(self._msgs_dir, os.O_RDONLY)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)

    def _io_purge_all(self, floor: int, last: int) -> None:
        marker = encode_record(KIND_FLOOR, last, self._last_ts, floor, b"", b"", b"")
        try:
            if self._active is not None and self._active.size > 0:
                # A fresh segment that holds only the floor: every older file can then go.
                self._rotate()
            seg, _ = self._append(marker)
            seg.note(last, self._last_ts, floor, [])
        except StoreError:
            # A full disk: a purge is how an operator makes room, so it must not need any.
            if not self._purge_in_place(floor, last):
                raise
            return
        for seg in self._segs.values():
            seg.live = 0
        self._delete_dead_segments()

    def _purge_in_place(self, floor: int, last: int) -> bool:
        """Record a purge without new space: overwrite the first record of the newest
        non-empty segment (all records are dead now) with a floor marker of the same length,
        sync it, then drop every other byte."""
        target = None
        for seg in reversed(self._segs.values()):
            if seg.size >= HDR_SIZE:
                target = seg
                break
        if target is None:
            return False
        try:
            head = os.pread(target.fd, HDR_SIZE, 0)
            magic, _, _, _, _, _, slen, hlen, dlen = HDR.unpack_from(head, 0)
            if magic != MAGIC:
                return False
            length = HDR_SIZE + slen + hlen + dlen
            pad = bytes(length - HDR_SIZE)
            marker = encode_record(KIND_FLOOR, last, self._last_ts, floor, b"", b"", pad)
            _pwrite(target.fd, marker, 0)
            _fdatasync(target.fd)
            os.ftruncate(target.fd, length)
        except OSError as exc:
            log.error("stream store %s: purge on a full disk failed: %s", self._dir, exc)
            return False
        log.warning("stream store %s: disk full; purge recorded in place", self._dir)
        target.size = length
        target.first_seq = target.last_seq = target.live_bytes = 0
        target.tombs = []
        target.note(last, self._last_ts, floor, [])
        for seg in list(self._segs.values()):
            seg.live = 0
            if seg is not target and seg is not self._active:
                del self._segs[seg.id]
                self._forget_window()
                with contextlib.suppress(OSError):
                    os.unlink(seg.path)
                self._close_fd(seg.fd)
        return True

    # -- reading ----------------------------------------------------------------------------

    def load_next_msgs(self, filter_subject: str, start_seq: int, limit: int) -> list[StoredMsg]:
        """StoreCore's run of messages, with the records in the current read-ahead window
        decoded in place (records.decode_run, compiled); the rest, and anything damaged, go
        through `_io_read`, which reads the next window."""
        if not is_all(filter_subject):
            return super().load_next_msgs(filter_subject, start_seq, limit)
        self._check_open()
        out: list[StoredMsg] = []
        recs = self._recs
        segs = self._segs
        seq = self._live_at_or_after(max(start_seq, self._first, 1))
        while seq <= self._last:
            win_seg, win_off, window = self._window
            # The window serves only while its segment is still the store's.
            win_id = win_seg.id if win_seg is not None and segs.get(win_seg.id) is win_seg else -1
            seq = decode_run(window, win_off, win_id, recs, seq, self._last, limit, out)
            if seq > self._last or len(out) >= limit:
                break
            rec = recs.get(seq)
            if rec is None:
                seq = self._live_at_or_after(seq)
                continue
            msg = self._io_read(seq, rec)
            seq += 1
            if msg is not None:
                out.append(msg)
                if len(out) >= limit:
                    break
        return out

    def _io_read(self, seq: int, rec: Rec) -> StoredMsg | None:
        loc = rec[3]
        length = loc >> 64
        seg = self._segs.get((loc >> 32) & 0xFFFFFFFF)
        off = loc & 0xFFFFFFFF
        # Consumers read forward: one pread of a window serves the records that follow.
        win_seg, start, window = self._window
        if (
            seg is not None
            and win_seg is seg
            and start <= off
            and off + length <= start + len(window)
        ):
            start = off - start
        elif seg is None:
            window, start = b"", 0
        elif length >= _READ_WINDOW:
            window, start = os.pread(seg.fd, length, off), 0
        else:
            window, start = os.pread(seg.fd, _READ_WINDOW, off), 0
            self._window = (seg, off, window)
        if len(window) - start >= length:
            msg = decode(window, start, length, seq, rec[0])
            if msg is not None:
                return msg
        # The bytes changed under us since they were written or recovered (a bad disk): never
        # serve them, report them, and forget the message (recovery will find it damaged too).
        name = "?" if seg is None else os.path.basename(seg.path)
        log.error(
            "stream store %s: record for sequence %d in segment %s at %d is damaged; "
            "it will not be served",
            self._dir,
            seq,
            name,
            off,
        )
        self.damaged.append(DamageReport(name, off, off + length, seq - 1, seq + 1, False))
        self._drop(seq)
        return None

    # -- durability -------------------------------------------------------------------------

    def when_durable(
        self,
        seq: int,
        callback: Callable[[], None],
        errback: Callable[[BaseException], None] | None = None,
    ) -> None:
        """Call ``callback`` once everything written so far (so ``seq``) is on stable storage.

        With ``sync_always`` the fsync runs in a worker thread and all writes made while one
        fsync runs share the next one (group commit); the callback runs on the event loop
        thread. Without a running loop the fsync is done here and then. In the lazy mode
        (``sync_always=False``) the callback runs at once, as nats-server acks before fsync.
        If the fsync fails, ``errback`` gets the error and ``callback`` is never called.
        """
        if self._failed is not None:
            # Linux reports a failed writeback once: a later fsync may "succeed" although the
            # data is gone. Never ack after a failure.
            if errback is not None:
                errback(self._failed)
            return
        if self._closed or not self._sync_always or self._synced_gen >= self._wgen:
            callback()
            return
        self._waiters.append((self._wgen, callback, errback))
        if not self._sync_inflight:
            self._start_sync()

    def _dirty_fds(self) -> tuple[list[int], bool]:
        fds = []
        for seg in self._segs.values():
            if seg.dirty:
                seg.dirty = False
                fds.append(seg.fd)
        dir_sync = self._dir_dirty
        self._dir_dirty = False
        return fds, dir_sync

    def _start_sync(self) -> None:
        target = self._wgen
        fds, dir_sync = self._dirty_fds()
        loop = self._loop
        if loop is None:
            try:
                loop = asyncio.get_running_loop()
            except RuntimeError:
                loop = None
        if loop is None or loop.is_closed():
            self._sync_done(target, self._fsync(fds, dir_sync))
            return
        self._sync_inflight = True
        # A concurrent future rather than run_in_executor: close() can then wait for it even
        # when the event loop is gone, before closing the descriptors the worker uses.
        fut = _fsync_executor().submit(self._fsync, fds, dir_sync)
        self._sync_future = fut
        fut.add_done_callback(functools.partial(self._sync_finished_in_worker, loop, target))

    def _sync_finished_in_worker(
        self,
        loop: asyncio.AbstractEventLoop,
        target: int,
        fut: concurrent.futures.Future[BaseException | None],
    ) -> None:
        # Runs in the worker thread: hand the result to the loop thread.
        with contextlib.suppress(RuntimeError):  # the loop is closed: close() cleans up
            loop.call_soon_threadsafe(self._on_sync_future, target, fut)

    def _fsync(self, fds: list[int], dir_sync: bool) -> BaseException | None:
        """Runs in a worker thread: no store state is touched here."""
        try:
            for fd in fds:
                _fdatasync(fd)
            if dir_sync:
                dfd = os.open(self._msgs_dir, os.O_RDONLY)
                try:
                    os.fsync(dfd)
                finally:
                    os.close(dfd)
        except OSError as exc:
            return exc
        return None

    def _on_sync_future(
        self, target: int, fut: concurrent.futures.Future[BaseException | None]
    ) -> None:
        if self._closed or fut is not self._sync_future:
            # close() waited for this sync, then synced and answered everything itself.
            return
        self._sync_inflight = False
        self._sync_future = None
        for fd in self._deferred_close:
            os.close(fd)
        self._deferred_close.clear()
        err: BaseException | None
        err = StoreError("fsync cancelled") if fut.cancelled() else fut.exception() or fut.result()
        self._sync_done(target, err)

    def _sync_done(self, target: int, err: BaseException | None) -> None:
        waiters = self._waiters
        if err is not None:
            # After a failed fsync the kernel may have dropped the dirty pages: nothing
            # written since the last good sync can be promised any more. Fail the store.
            log.error("stream store %s: fsync failed: %s", self._dir, err)
            self._failed = InsufficientResourcesError()
            while waiters:
                _, _, errback = waiters.popleft()
                if errback is not None:
                    _call_safely(errback, err)
            return
        if target > self._synced_gen:
            self._synced_gen = target
        while waiters and waiters[0][0] <= target:
            _, callback, _ = waiters.popleft()
            _call_safely(callback)
        if waiters and not self._sync_inflight and not self._closed:
            self._start_sync()

    def _start_lazy_timer(self) -> None:
        loop = self._loop
        if loop is None:
            try:
                loop = asyncio.get_running_loop()
            except RuntimeError:
                return
        self._lazy_handle = loop.call_later(self._sync_interval, self._lazy_tick)

    def _lazy_tick(self) -> None:
        self._lazy_handle = None
        if self._closed:
            return
        if self._synced_gen < self._wgen and not self._sync_inflight:
            self._start_sync()
        self._start_lazy_timer()

    def flush(self) -> None:
        """fsync everything now, in this thread (blocking); answers pending waiters."""
        self._check_open()
        target = self._wgen
        fds, dir_sync = self._dirty_fds()
        err = self._fsync(fds, dir_sync)
        if err is not None:
            self._sync_done(target, err)
            raise InsufficientResourcesError() from err
        if not self._sync_inflight:
            self._sync_done(target, None)
        else:
            self._synced_gen = max(self._synced_gen, target)
        for cons in list(self._consumers.values()):
            cons.flush()

    # -- consumers --------------------------------------------------------------------------

    def consumer_state_store(self, name: str) -> FileConsumerStateStore:
        self._check_consumer_name(name)
        store = self._consumers.get(name)
        if store is None:
            store = self._consumers[name] = FileConsumerStateStore(self, name)
        assert isinstance(store, FileConsumerStateStore)
        return store

    # -- lifecycle --------------------------------------------------------------------------

    def close(self) -> None:
        """Flush, fsync and close. Waiters still pending are answered (their data is synced)."""
        if self._closed:
            return
        if self._lazy_handle is not None:
            self._lazy_handle.cancel()
            self._lazy_handle = None
        err: BaseException | None = None
        try:
            for cons in list(self._consumers.values()):
                cons.flush()
            fds, _dir_sync = self._dirty_fds()
            err = self._fsync(fds, True)
        finally:
            self._closed = True
            target = self._wgen
            if err is None:
                self._synced_gen = target
                while self._waiters:
                    _call_safely(self._waiters.popleft()[1])
            else:
                self._sync_done(target, err)
            self._close_files()

    def _close_files(self) -> None:
        self._closed = True
        self._active = None
        if self._sync_future is not None:
            # The worker may be inside fsync(fd): let it finish before the numbers go.
            concurrent.futures.wait([self._sync_future])
            self._sync_future = None
        self._sync_inflight = False
        self._close_all_fds()
        with contextlib.suppress(OSError):
            os.close(self._lock_fd)
        self._lock_fd = -1

    def _close_all_fds(self) -> None:
        for seg in self._segs.values():
            with contextlib.suppress(OSError):
                os.close(seg.fd)
        self._segs.clear()
        for fd in self._deferred_close:
            with contextlib.suppress(OSError):
                os.close(fd)
        self._deferred_close.clear()

    def delete(self) -> None:
        """Close and remove the stream's directory."""
        if not self._closed:
            for cons in list(self._consumers.values()):
                cons.cancel()
            self._closed = True
            self._close_files()
        shutil.rmtree(self._dir, ignore_errors=True)

    @property
    def directory(self) -> str:
        return self._dir

    def segment_paths(self) -> list[str]:
        """The segment files, oldest first (for tests and tools)."""
        return [seg.path for seg in self._segs.values()]


def _call_safely(fn: Callable[..., None], *args: Any) -> None:
    try:
        fn(*args)
    except Exception:
        log.exception("stream store callback failed")


class FileConsumerStateStore:
    """A consumer's state in ``consumers/<name>/state.json``, replaced atomically.

    When an event loop runs, ``save`` hands the state to a worker thread (write to a temporary
    file, fsync, rename, fsync the directory); states saved while a write is in flight replace
    each other, and only the newest is written next. The consumer already limits how often it
    saves (``Consumer.save``).
    """

    def __init__(self, owner: FileStore, name: str) -> None:
        self._owner = owner
        self._name = name
        self._dir = os.path.join(owner._cons_dir, name)
        self._path = os.path.join(self._dir, "state.json")
        self._pending: bytes | None = None
        self._handle: asyncio.Handle | None = None
        self._writing = False
        self._deleted = False
        self._lock = threading.Lock()

    def save(self, state: dict[str, Any]) -> None:
        # First line: the CRC of the second, the JSON body; a flipped bit or a cut file is
        # then told apart from a valid state.
        body = json.dumps(state, separators=(",", ":"), sort_keys=True).encode()
        self._pending = b"%d\n%s\n" % (zlib.crc32(body), body)
        self._deleted = False
        try:
            loop = self._owner._loop or asyncio.get_running_loop()
        except RuntimeError:
            self.flush()
            return
        if self._handle is None and not self._writing:
            self._handle = loop.call_soon(self._kick, loop)

    def _kick(self, loop: asyncio.AbstractEventLoop) -> None:
        self._handle = None
        data = self._pending
        if data is None or self._deleted:
            return
        self._pending = None
        self._writing = True
        fut = loop.run_in_executor(_fsync_executor(), self._write, data)
        fut.add_done_callback(lambda f: self._written(f, loop, data))

    def _written(
        self, fut: asyncio.Future[None], loop: asyncio.AbstractEventLoop, data: bytes
    ) -> None:
        self._writing = False
        exc = None if fut.cancelled() else fut.exception()
        if exc is not None:
            log.error("consumer state %s: write failed: %s", self._path, exc)
            if self._pending is None:
                self._pending = data
        if self._pending is not None and self._handle is None and not self._deleted:
            self._handle = loop.call_soon(self._kick, loop)

    def _write(self, data: bytes) -> None:
        with self._lock:
            if self._deleted:
                return
            tmp = self._path + ".tmp"
            flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC
            try:
                fd = os.open(tmp, flags, 0o644)
            except FileNotFoundError:
                # The first write (or one after a delete): the directory is made then, not
                # looked up before each of the ~20 writes a second of an ack storm.
                os.makedirs(self._dir, exist_ok=True)
                fd = os.open(tmp, flags, 0o644)
            try:
                view = memoryview(data)
                while view:
                    view = view[os.write(fd, view) :]
                os.fsync(fd)
            finally:
                os.close(fd)
            os.replace(tmp, self._path)
            dfd = os.open(self._dir, os.O_RDONLY)
            try:
                os.fsync(dfd)
            finally:
                os.close(dfd)

    def flush(self) -> None:
        """Write the pending state now, in this thread."""
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None
        data = self._pending
        if data is None or self._deleted:
            return
        self._pending = None
        try:
            self._write(data)
        except OSError as exc:
            self._pending = data
            log.error("consumer state %s: write failed: %s", self._path, exc)
            raise InsufficientResourcesError() from exc

    def load(self) -> dict[str, Any] | None:
        data = self._pending
        if data is None:
            try:
                with open(self._path, "rb") as fh:
                    data = fh.read()
            except FileNotFoundError:
                return None
        try:
            crc_line, body, rest = data.split(b"\n", 2)
            if rest or zlib.crc32(body) != int(crc_line):
                raise ValueError("checksum mismatch")
            state = json.loads(body)
            if not isinstance(state, dict):
                raise ValueError("not an object")
        except ValueError as exc:
            log.error("consumer state %s is damaged (%s); ignoring it", self._path, exc)
            return None
        return state

    def cancel(self) -> None:
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None
        self._pending = None

    def delete(self) -> None:
        self.cancel()
        with self._lock:
            self._deleted = True
            shutil.rmtree(self._dir, ignore_errors=True)
        self._owner._forget_consumer(self._name)


def open_file_store(
    directory: str,
    limits: StreamLimits,
    sync_always: bool = True,
    sync_interval: float = 120.0,
    *,
    segment_bytes: int = DEFAULT_SEGMENT_BYTES,
    loop: asyncio.AbstractEventLoop | None = None,
) -> FileStore:
    """Open (creating or recovering) the file store in ``directory``."""
    return FileStore(directory, limits, sync_always, sync_interval, segment_bytes, loop)
