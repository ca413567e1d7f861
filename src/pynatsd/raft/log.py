"""The write-ahead log of one NRG group: each append entry whole, at its own index.

nats-server keeps a group's log in a stream store, one message per append entry at sequence =
index = `ae.pindex + 1`, its body the encoded append entry (`storeToWAL`, `loadEntry`,
`truncateWAL`, `wal.Compact` in server/raft.go). Here it is a store of its own with that
contract: `MemoryLog` and `FileLog` behind the `RaftLog` protocol.

Indexes: the log holds `first_index .. last_index`. Its base is the (term, index) of the last
compaction (a snapshot), (0, 0) when there was none; `first_index` is always base index + 1,
so an empty log has `first_index == last_index + 1`, and `term_at(base index)` is the base
term. `truncate_after`, `compact` and `reset` are durable when they return.

`FileLog` directory::

    base                       magic "PNRB" u32 | crc32 u32 | term u64 | index u64 (replaced
                               atomically: base.tmp, fsync, rename, fsync the directory)
    00000000000000000001.wal   segments, named by the index of their first record

A record: `crc32 u32 | length u32 | index u64 | encoded append entry (length bytes)`, the
CRC-32 (`zlib.crc32`, as the stream store) over everything after itself. A segment holds
consecutive indexes; the next one starts at the following index. Compaction writes the base
and deletes whole segments; records at or below the base left in the segment that holds the
base are skipped on open. On open every segment is scanned: a torn or damaged record ends the
log there (the segment is cut at its offset, later segments are deleted, and the loss is logged
on "pynatsd.raft" with the file and offset), so a damaged log is a shorter log, never a wrong
one. Memory: two 8-byte numbers per entry (its offset and term).
"""

from __future__ import annotations

import bisect
import contextlib
import logging
import os
import struct
import zlib
from array import array
from collections.abc import Iterator
from pathlib import Path
from typing import Protocol

from .files import fsync_directory, write_atomically
from .wire import APPEND_ENTRY_BASE_LEN, AppendEntry, decode_append_entry, encode_append_entry

__all__ = ["FileLog", "LogError", "MemoryLog", "RaftLog"]

log = logging.getLogger("pynatsd.raft")

DEFAULT_SEGMENT_BYTES = 8 * 1024 * 1024
BASE_FILE = "base"
_BASE = struct.Struct("<IIQQ")  # magic, crc32, term, index
_BASE_MAGIC = 0x4252_4E50  # "PNRB"
_REC = struct.Struct("<IIQ")  # crc32, payload length, index
_AE_TERM = struct.Struct("<Q")  # an encoded append entry's term, after the 8-byte leader
_AE_TERM_AT = _REC.size + 8

# Writes and syncs go through these names so that tests can make them fail.
_pwrite = os.pwrite
_fdatasync = os.fdatasync


class LogError(Exception):
    """An append out of order, an operation the log cannot do, or a failed write."""


class RaftLog(Protocol):
    @property
    def first_index(self) -> int: ...
    @property
    def last_index(self) -> int: ...
    @property
    def last_term(self) -> int: ...
    def append(self, ae: AppendEntry) -> None: ...
    def get(self, index: int) -> AppendEntry | None: ...
    def term_at(self, index: int) -> int | None: ...
    def truncate_after(self, index: int) -> None: ...
    def compact(self, index: int, term: int) -> None: ...
    def reset(self, index: int, term: int) -> None: ...
    def sync(self) -> None: ...
    def close(self) -> None: ...


def _check_append(ae: AppendEntry, last_index: int) -> None:
    if ae.pindex != last_index:
        raise LogError(f"raft log: append at pindex {ae.pindex}, the last index is {last_index}")


def _check_truncate(index: int, base_index: int) -> None:
    if index < base_index:
        raise LogError(f"raft log: cannot truncate to {index}, compacted up to {base_index}")


def _check_compact(index: int, term: int, held: int | None) -> None:
    if held is not None and held != term:
        raise LogError(f"raft log: compact to {index} at term {term}, the entry has term {held}")


class MemoryLog:
    """The log in memory (nats-server's memstore WAL): the encoded entries by index."""

    def __init__(self) -> None:
        self._entries: dict[int, tuple[int, bytes]] = {}  # index -> (term, encoded entry)
        self._base_index = self._base_term = 0
        self._last_index = self._last_term = 0

    @property
    def first_index(self) -> int:
        return self._base_index + 1

    @property
    def last_index(self) -> int:
        return self._last_index

    @property
    def last_term(self) -> int:
        return self._last_term

    def append(self, ae: AppendEntry) -> None:
        _check_append(ae, self._last_index)
        self._entries[ae.pindex + 1] = (ae.term, encode_append_entry(ae))
        self._last_index, self._last_term = ae.pindex + 1, ae.term

    def get(self, index: int) -> AppendEntry | None:
        held = self._entries.get(index)
        return None if held is None else decode_append_entry(held[1])

    def term_at(self, index: int) -> int | None:
        if index == self._base_index:
            return self._base_term
        held = self._entries.get(index)
        return None if held is None else held[0]

    def truncate_after(self, index: int) -> None:
        if index >= self._last_index:
            return
        _check_truncate(index, self._base_index)
        for i in range(self._last_index, index, -1):
            del self._entries[i]
        self._last_index = index
        self._last_term = self.term_at(index) or 0

    def compact(self, index: int, term: int) -> None:
        if index <= self._base_index:
            return
        _check_compact(index, term, self.term_at(index))
        for i in range(self._base_index + 1, min(index, self._last_index) + 1):
            del self._entries[i]
        self._base_index, self._base_term = index, term
        if index >= self._last_index:
            self._last_index, self._last_term = index, term

    def reset(self, index: int, term: int) -> None:
        self._entries.clear()
        self._base_index = self._last_index = index
        self._base_term = self._last_term = term

    def sync(self) -> None:
        pass

    def close(self) -> None:
        pass


class _Segment:
    __slots__ = ("fd", "first", "offsets", "path", "size", "terms")

    def __init__(self, first: int, path: Path, fd: int) -> None:
        self.first = first  # the index of its first record
        self.path = path
        self.fd = fd
        self.size = 0  # bytes of whole records: where the next one goes
        self.offsets = array("Q")  # record offset by index - first
        self.terms = array("Q")  # entry term by index - first

    @property
    def end(self) -> int:
        """The index after its last record."""
        return self.first + len(self.offsets)


class FileLog:
    """The log in segment files of checksummed records (see the module docstring)."""

    def __init__(
        self,
        directory: Path,
        sync_always: bool = False,
        *,
        segment_bytes: int = DEFAULT_SEGMENT_BYTES,
    ) -> None:
        self._dir = Path(directory)
        self._sync_always = sync_always
        self._segment_bytes = segment_bytes
        self._segs: list[_Segment] = []
        self._firsts: list[int] = []  # each segment's first index, for bisect
        self._dirty: set[_Segment] = set()  # written since the last sync
        self._dir_dirty = False  # segments created or deleted since the last sync
        self._failed: str | None = None  # why every call is refused: closed, or a failed write
        self._base_index = self._base_term = 0
        try:
            self._dir.mkdir(parents=True, exist_ok=True)
            self._probe_writable()
            self._read_base()
            self._recover()
            self.sync()
        except (OSError, LogError) as exc:
            self._close_fds()
            raise LogError(f"raft log {self._dir}: cannot open: {exc}") from exc

    @property
    def first_index(self) -> int:
        return self._base_index + 1

    @property
    def last_index(self) -> int:
        return self._segs[-1].end - 1 if self._has_entries() else self._base_index

    @property
    def last_term(self) -> int:
        return self._segs[-1].terms[-1] if self._has_entries() else self._base_term

    def _has_entries(self) -> bool:
        return bool(self._segs) and self._segs[-1].end - 1 > self._base_index

    # -- recovery ---------------------------------------------------------------------------

    def _probe_writable(self) -> None:
        # As nats-server checks a group's directory before it starts: say so at once.
        probe = self._dir / "probe.tmp"
        try:
            os.close(os.open(probe, os.O_WRONLY | os.O_CREAT, 0o640))
            probe.unlink()
        except OSError as exc:
            raise LogError(f"storage directory is not writable: {exc}") from exc

    def _read_base(self) -> None:
        path = self._dir / BASE_FILE
        try:
            raw = path.read_bytes()
        except FileNotFoundError:
            return
        if len(raw) == _BASE.size:
            magic, crc, term, index = _BASE.unpack(raw)
            if magic == _BASE_MAGIC and crc == zlib.crc32(raw[8:]):
                self._base_index, self._base_term = index, term
                return
        log.error("raft log %s: base record damaged (%d bytes), base taken as 0", path, len(raw))
        path.unlink()

    def _recover(self) -> None:
        for tmp in self._dir.glob("*.tmp"):
            tmp.unlink()
        found = sorted((int(p.stem), p) for p in self._dir.glob("*.wal") if p.stem.isdigit())
        expected = self._base_index + 1  # the next index the log needs
        ended = False
        for k, (first, path) in enumerate(found):
            ahead = found[k + 1][0] if k + 1 < len(found) else None
            if not self._segs and not ended and ahead is not None and ahead <= expected:
                path.unlink()  # wholly at or below the base: left by a compaction
                continue
            if ended or first > expected or (self._segs and first != expected):
                if not ended:
                    log.error("raft log %s: does not start at index %d", path, expected)
                ended = True
                log.error("raft log %s: deleted (after the end of the log)", path)
                path.unlink()
                continue
            seg = _Segment(first, path, os.open(path, os.O_RDWR))
            try:
                ended = self._scan(seg, last_file=ahead is None)
            except OSError:
                os.close(seg.fd)
                raise
            if seg.end <= expected:  # nothing above the base or the previous segment
                log.warning("raft log %s: no entry after index %d, deleted", path, expected - 1)
                self._dirty.discard(seg)
                os.close(seg.fd)
                path.unlink()
                continue
            self._segs.append(seg)
            self._firsts.append(first)
            expected = seg.end
        self._dir_dirty = True

    def _scan(self, seg: _Segment, last_file: bool) -> bool:
        """Index the records of a segment; cut it at the first bad one (True if there is one)."""
        data = seg.path.read_bytes()
        size, pos, index = len(data), 0, seg.first
        while pos < size:
            end = size + 1
            if size - pos >= _REC.size:
                crc, length, rec_index = _REC.unpack_from(data, pos)
                end = pos + _REC.size + length
                if (
                    end <= size
                    and rec_index == index
                    and length >= APPEND_ENTRY_BASE_LEN
                    and zlib.crc32(memoryview(data)[pos + 4 : end]) == crc
                ):
                    seg.offsets.append(pos)
                    seg.terms.append(_AE_TERM.unpack_from(data, pos + _AE_TERM_AT)[0])
                    pos, index = end, index + 1
                    continue
            # A tail cut short, or zeros where the last writes never landed.
            torn = last_file and (end >= size or not data[pos:].strip(b"\0"))
            log.log(
                logging.WARNING if torn else logging.ERROR,
                "raft log %s: %s record at offset %d: the log ends at index %d, %d bytes cut",
                seg.path,
                "torn" if torn else "damaged",
                pos,
                index - 1,
                size - pos,
            )
            os.ftruncate(seg.fd, pos)
            self._dirty.add(seg)
            break
        seg.size = pos
        return pos < size

    # -- the log ----------------------------------------------------------------------------

    def append(self, ae: AppendEntry) -> None:
        self._check_usable()
        _check_append(ae, self.last_index)
        index = ae.pindex + 1
        payload = encode_append_entry(ae)
        head = _REC.pack(0, len(payload), index)[4:]
        record = struct.pack("<I", zlib.crc32(payload, zlib.crc32(head))) + head + payload
        seg = self._segs[-1] if self._segs else None
        if seg is None or seg.size >= self._segment_bytes:
            seg = self._new_segment(index)
        try:
            if _pwrite(seg.fd, record, seg.size) != len(record):
                raise OSError("short write")
        except OSError as exc:
            try:  # a record cut short must not be left after the end
                os.ftruncate(seg.fd, seg.size)
            except OSError:
                self._failed = f"cannot cut back a failed write: {exc}"
            raise LogError(f"raft log {self._dir}: cannot append index {index}: {exc}") from exc
        seg.offsets.append(seg.size)
        seg.terms.append(ae.term)
        seg.size += len(record)
        self._dirty.add(seg)
        if self._sync_always:
            self.sync()

    def _new_segment(self, first: int) -> _Segment:
        path = self._dir / f"{first:020d}.wal"
        with self._io(f"create {path.name}"):
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o640)
        seg = _Segment(first, path, fd)
        self._segs.append(seg)
        self._firsts.append(first)
        self._dir_dirty = True
        return seg

    def _segment_of(self, index: int) -> _Segment:
        last = self._segs[-1]
        return last if index >= last.first else self._segs[bisect.bisect(self._firsts, index) - 1]

    def get(self, index: int) -> AppendEntry | None:
        """The entry at index; None outside the log, or when its record no longer passes its
        checksum (damage after open, logged)."""
        if not self._base_index < index <= self.last_index:
            return None
        seg = self._segment_of(index)
        k = index - seg.first
        start = seg.offsets[k]
        end = seg.offsets[k + 1] if k + 1 < len(seg.offsets) else seg.size
        with self._io(f"read index {index}"):
            raw = os.pread(seg.fd, end - start, start)
        crc, _length, rec_index = _REC.unpack_from(raw.ljust(_REC.size, b"\0"))
        if len(raw) != end - start or rec_index != index or zlib.crc32(raw[4:]) != crc:
            log.error("raft log %s: damaged record at offset %d (index %d)", seg.path, start, index)
            return None
        return decode_append_entry(raw[_REC.size :])

    def term_at(self, index: int) -> int | None:
        if index == self._base_index:
            return self._base_term
        if not self._base_index < index <= self.last_index:
            return None
        seg = self._segment_of(index)
        return seg.terms[index - seg.first]

    def truncate_after(self, index: int) -> None:
        if index >= self.last_index:
            return
        _check_truncate(index, self._base_index)
        self._check_usable()
        with self._changing(f"truncate after {index}"):
            # A segment left with nothing above the base goes too, as recovery would drop it.
            while self._segs and (self._segs[-1].first > index or index == self._base_index):
                self._drop_segment(-1)
            seg = self._segs[-1] if self._segs else None
            if seg is not None and index + 1 < seg.end:
                k = index + 1 - seg.first
                seg.size = seg.offsets[k]
                del seg.offsets[k:], seg.terms[k:]
                os.ftruncate(seg.fd, seg.size)
                self._dirty.add(seg)
        self.sync()

    def compact(self, index: int, term: int) -> None:
        if index <= self._base_index:
            return
        _check_compact(index, term, self.term_at(index))
        self._check_usable()
        emptied = index >= self.last_index
        with self._changing(f"compact to {index}"):
            write_atomically(self._dir / BASE_FILE, self._base_record(term, index))
            self._base_index, self._base_term = index, term
            while self._segs and (
                emptied or (len(self._segs) > 1 and self._firsts[1] <= index + 1)
            ):
                self._drop_segment(0)
        self.sync()

    def reset(self, index: int, term: int) -> None:
        self._check_usable()
        with self._changing(f"reset to {index}"):
            while self._segs:  # deleted first: the old entries must not outlive the new base
                self._drop_segment(-1)
            self.sync()
            write_atomically(self._dir / BASE_FILE, self._base_record(term, index))
        self._base_index, self._base_term = index, term

    @staticmethod
    def _base_record(term: int, index: int) -> bytes:
        body = struct.pack("<QQ", term, index)
        return struct.pack("<II", _BASE_MAGIC, zlib.crc32(body)) + body

    def _drop_segment(self, pos: int) -> None:
        seg = self._segs.pop(pos)
        self._firsts.pop(pos)
        self._dirty.discard(seg)
        os.close(seg.fd)
        seg.path.unlink()
        self._dir_dirty = True

    def sync(self) -> None:
        """Make everything written so far durable. A failed fsync fails the log for good: the
        kernel may have dropped the pages, and a later fsync could succeed over lost data."""
        self._check_usable()
        try:
            for seg in self._dirty:
                _fdatasync(seg.fd)
            if self._dir_dirty:
                fsync_directory(self._dir)
        except OSError as exc:
            self._failed = f"fsync failed: {exc}"
            raise LogError(f"raft log {self._dir}: {self._failed}") from exc
        self._dirty.clear()
        self._dir_dirty = False

    def close(self) -> None:
        """Sync and close; a closed log refuses every call. Closing twice does nothing."""
        if self._failed == "closed":
            return
        try:
            if self._failed is None:
                self.sync()
        finally:
            self._failed = "closed"
            self._close_fds()

    def _close_fds(self) -> None:
        for seg in self._segs:
            with contextlib.suppress(OSError):
                os.close(seg.fd)

    def _check_usable(self) -> None:
        if self._failed is not None:
            raise LogError(f"raft log {self._dir}: {self._failed}")

    @contextlib.contextmanager
    def _io(self, what: str) -> Iterator[None]:
        try:
            yield
        except OSError as exc:
            raise LogError(f"raft log {self._dir}: cannot {what}: {exc}") from exc

    @contextlib.contextmanager
    def _changing(self, what: str) -> Iterator[None]:
        """A change of several files cut by an error fails the log: memory and disk may differ.
        Each change is ordered so that what it leaves on disk opens as a consistent log."""
        try:
            yield
        except (OSError, LogError) as exc:
            self._failed = f"cannot {what}: {exc}"
            raise LogError(f"raft log {self._dir}: {self._failed}") from exc
