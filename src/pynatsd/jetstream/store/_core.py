"""The in-memory index and limit logic shared by the memory and the file store.

A store keeps one small tuple per live message, ``(subject, ts, size, where)``, in a dict keyed
by sequence; ``where`` is the message itself for the memory store and a packed file location
for the file store. Beside it:

- a per-subject index: each subject's live sequences in a sorted list, so a literal filter is a
  bisect, never a scan of the stream;
- ``_dmap``: the sorted interior deleted sequences (between first and last), so "how many
  messages from sequence N on" is a bisect too.

Every removal is planned before anything changes: the subclass writes the record of the change
first (the file store appends it to its segment), and only when that succeeded is memory
updated. A failed write therefore leaves the store exactly as it was.
"""

from __future__ import annotations

import bisect
import time
from collections.abc import Callable, Iterable
from operator import itemgetter
from typing import Any

from pynatsd.subjects import is_literal, match_literal

from .base import (
    MaxBytesError,
    MaxMsgsError,
    MaxMsgsPerSubjectError,
    MsgTooLargeError,
    SequenceMismatchError,
    StoreClosedError,
    StoredMsg,
    StreamLimits,
    StreamState,
)

# (subject, ts, size, where): a tuple, not an object, because there is one per stored message
# and a tuple is the cheapest thing CPython builds (restart time of a 1M-message stream).
Rec = tuple[str, int, int, Any]

# A record's size (rec[2]).
_size_of = itemgetter(2)

# A wildcard filter first walks this many sequences (with a memo of which subjects match): a
# dense filter finds its next message at once. Only then, if at most _SUBJECT_WALK_LIMIT
# subjects match, does it ask each matching subject's list (a sparse filter).
_WALK_FIRST = 32
_SUBJECT_WALK_LIMIT = 256
_MEMO_LIMIT = 64


def is_all(filter_subject: str) -> bool:
    return filter_subject == "" or filter_subject == ">"


class SeqList:
    """The live sequences of one subject, ascending, with an O(1) pop from the front.

    Limits remove the oldest message of a subject far more often than any other; a plain
    ``list.pop(0)`` would move the whole list each time, so the front is an index that only
    occasionally compacts.
    """

    __slots__ = ("head", "seqs")

    def __init__(self, seqs: list[int]) -> None:
        self.seqs = seqs
        self.head = 0

    @property
    def count(self) -> int:
        return len(self.seqs) - self.head

    @property
    def first(self) -> int:
        return self.seqs[self.head]

    @property
    def last(self) -> int:
        return self.seqs[-1]

    def oldest(self, n: int) -> list[int]:
        return self.seqs[self.head : self.head + n]

    def remove(self, seq: int) -> None:
        seqs = self.seqs
        if seqs[self.head] == seq:
            self.head += 1
            if self.head > 32 and self.head * 2 > len(seqs):
                del seqs[: self.head]
                self.head = 0
            return
        i = bisect.bisect_left(seqs, seq, self.head)
        if i < len(seqs) and seqs[i] == seq:
            del seqs[i]

    def first_at_or_after(self, seq: int) -> int | None:
        seqs = self.seqs
        i = bisect.bisect_left(seqs, seq, self.head)
        return seqs[i] if i < len(seqs) else None

    def last_at_or_before(self, seq: int) -> int | None:
        seqs = self.seqs
        i = bisect.bisect_right(seqs, seq, self.head)
        return seqs[i - 1] if i > self.head else None

    def count_at_or_after(self, seq: int) -> int:
        return len(self.seqs) - bisect.bisect_left(self.seqs, seq, self.head)


class StoreCore:
    """Index, limits and queries; the subclass supplies persistence (the ``_io_*`` hooks)."""

    def __init__(self, limits: StreamLimits) -> None:
        self._limits = _copy_limits(limits)
        self._unlimited = _no_limits(self._limits)
        self._recs: dict[int, Rec] = {}
        self._subjects: dict[str, SeqList] = {}
        self._dmap: list[int] = []
        # nats-server reports first_seq 0 for a store that never held a message, and
        # last_seq + 1 for one that became empty.
        self._first = 0
        self._last = 0
        self._last_ts = 0
        self._bytes = 0
        self._closed = False
        self._memo: dict[str, dict[str, bool]] = {}
        # The subjects matching a wildcard, valid while no subject appears or disappears.
        self._subj_gen = 0
        self._match_cache: dict[str, tuple[int, list[str]]] = {}
        self._consumers: dict[str, Any] = {}

    # -- hooks ------------------------------------------------------------------------------

    def _msg_size(self, slen: int, hlen: int, dlen: int) -> int:
        raise NotImplementedError

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
        """Persist a new message (and the removals it causes); return its index record."""
        raise NotImplementedError

    def _io_remove(self, floor: int, tombs: list[int], erase: Iterable[int] = ()) -> None:
        """Persist removals: every sequence below ``floor``, and each of ``tombs``."""
        raise NotImplementedError

    def _io_read(self, seq: int, rec: Rec) -> StoredMsg | None:
        raise NotImplementedError

    def _io_store_batch(
        self,
        first_seq: int,
        subjects: list[str],
        headers: list[bytes],
        datas: list[bytes],
        ts: int,
        floor: int,
    ) -> list[Rec]:
        """Persist messages, sequences from ``first_seq``, all or nothing; return their index
        records. The file store makes it one write."""
        out = []
        seq = first_seq
        size_of = self._msg_size
        for subject, header, data in zip(subjects, headers, datas, strict=True):
            slen = len(subject) if subject.isascii() else len(subject.encode())
            size = size_of(slen, len(header), len(data))
            out.append(self._io_store(seq, subject, header, data, ts, size, floor, []))
            seq += 1
        return out

    def _io_dropped(self, seq: int, rec: Rec) -> None:
        """Memory no longer holds ``seq`` (the file store counts live records per segment)."""

    def _io_purge_all(self, floor: int, last: int) -> None:
        """Persist the removal of every message; the next sequence will be ``floor``."""
        raise NotImplementedError

    def _io_maintain(self) -> None:
        """An operation finished; the file store may compact segments now."""

    def _io_skip(self, last: int, ts: int, floor: int) -> None:
        """Persist that the last sequence is now ``last`` with nothing stored up to it, and
        that every sequence below ``floor`` is gone."""
        raise NotImplementedError

    # -- properties -------------------------------------------------------------------------

    @property
    def limits(self) -> StreamLimits:
        return _copy_limits(self._limits)

    @property
    def unlimited(self) -> bool:
        """No limit to check or apply when storing: ``store_msgs`` may be used."""
        return self._unlimited

    def _check_open(self) -> None:
        if self._closed:
            raise StoreClosedError()

    # -- writing ----------------------------------------------------------------------------

    def store_msg(
        self, subject: str, header: bytes, data: bytes, ts: int | None = None
    ) -> tuple[int, int]:
        """Store a message, apply the limits; return ``(seq, ts)``.

        Raises a :class:`StoreError` subclass, and changes nothing, when discard new refuses
        the message, the message is too large, or the write fails.
        """
        if self._closed:
            raise StoreClosedError()
        recs = self._recs
        seq = self._last + 1
        if self._unlimited:
            # No limit to check or apply (the common stream): nothing is removed, and the
            # floor is the first live message, as _plan_floor would find.
            if ts is None:
                ts = time.time_ns()
            slen = len(subject) if subject.isascii() else len(subject.encode())
            size = self._msg_size(slen, len(header), len(data))
            sl = self._subjects.get(subject)
            removed: list[int] = []
            new_removed = False
            first = self._first
            if not recs:
                floor = seq
            elif first in recs:
                floor = first
            else:
                floor = min(self._live_at_or_after(first), seq)
            tombs: list[int] = []
        else:
            ts, size, sl, removed, new_removed, floor, tombs = self._plan_store(
                subject, header, data, ts
            )
            seq = self._last + 1  # max_age may have expired messages, never the last one

        rec = self._io_store(seq, subject, header, data, ts, size, floor, tombs)

        if not recs:
            self._first = seq
        recs[seq] = rec
        if sl is None:
            self._subjects[subject] = SeqList([seq])
            self._subj_gen += 1
        else:
            sl.seqs.append(seq)
        self._bytes += size
        self._last = seq
        self._last_ts = ts
        if removed or new_removed:
            for s in removed:
                self._drop(s)
            if new_removed:
                self._drop(seq)
            self._io_maintain()
        return seq, ts

    def store_msgs(
        self, subjects: list[str], headers: list[bytes], datas: list[bytes]
    ) -> tuple[int, int]:
        """Store messages in one go, for a store without limits
        (``unlimited``): one write and one timestamp for all; returns the first sequence
        (the others follow it) and the timestamp. All or nothing: raises a
        :class:`StoreError`, and changes nothing, when the write fails."""
        if self._closed:
            raise StoreClosedError()
        assert self._unlimited, "store_msgs needs a store without limits"
        recs = self._recs
        first_seq = self._last + 1
        ts = time.time_ns()
        first = self._first
        if not recs:
            floor = first_seq
        elif first in recs:
            floor = first
        else:
            floor = min(self._live_at_or_after(first), first_seq)
        new = self._io_store_batch(first_seq, subjects, headers, datas, ts, floor)
        if not recs:
            self._first = first_seq
        end = first_seq + len(new)
        recs.update(zip(range(first_seq, end), new, strict=True))
        index = self._subjects
        # A stream's batch is mostly runs of one subject (one str object each): its
        # sequence list is looked up once per run.
        last: str | None = None
        seqs: list[int] = []
        seq = first_seq
        for rec in new:
            subject = rec[0]
            if subject is not last:
                last = subject
                sl = index.get(subject)
                if sl is None:
                    sl = index[subject] = SeqList([])
                    self._subj_gen += 1
                seqs = sl.seqs
            seqs.append(seq)
            seq += 1
        self._bytes += sum(map(_size_of, new))
        self._last = end - 1
        self._last_ts = ts
        return first_seq, ts

    def _plan_store(
        self, subject: str, header: bytes, data: bytes, ts: int | None
    ) -> tuple[int, int, SeqList | None, list[int], bool, int, list[int]]:
        """store_msg's checks and plan under limits: (ts, size, the subject's list, the
        sequences to remove, whether the new message goes at once, floor, tombstones).
        Raises, and changes nothing, when discard new refuses the message."""
        lim = self._limits
        if 0 <= lim.max_msg_size < len(header) + len(data):
            raise MsgTooLargeError()
        recs = self._recs
        if lim.max_age > 0 and recs:
            now = time.time_ns()
            first_rec = recs.get(self._first)
            if first_rec is not None and first_rec[1] <= now - lim.max_age:
                self.expire(now)
        if ts is None:
            ts = time.time_ns()
        slen = len(subject) if subject.isascii() else len(subject.encode())
        size = self._msg_size(slen, len(header), len(data))
        sl = self._subjects.get(subject)
        mps = lim.max_msgs_per_subject
        at_subject_limit = mps > 0 and sl is not None and sl.count >= mps
        if lim.discard == "new":
            # nats-server's storeRawMsg checks, in this order: at the per-subject limit the
            # oldest of the subject makes room, so only then do the totals not grow.
            if at_subject_limit and lim.discard_new_per_subject:
                raise MaxMsgsPerSubjectError()
            if 0 < lim.max_msgs <= len(recs) and not at_subject_limit:
                raise MaxMsgsError()
            if 0 < lim.max_bytes < self._bytes + size:
                assert sl is not None or not at_subject_limit
                if not at_subject_limit or recs[sl.first][2] < size:  # type: ignore[union-attr]
                    raise MaxBytesError()

        seq = self._last + 1
        removed: list[int] = []
        if at_subject_limit:
            assert sl is not None
            removed = sl.oldest(sl.count - mps + 1)
        if lim.discard == "old" and (lim.max_msgs > 0 or lim.max_bytes > 0):
            removed = self._plan_front_removals(removed, 1, size)
        new_removed = False
        if lim.discard == "old" and 0 < lim.max_bytes < size and len(removed) == len(recs):
            # nats-server stores the message and then drops it again: alone it is over the
            # byte limit. The sequence is used up all the same.
            new_removed = True
        floor = self._plan_floor(removed, seq + 1 if new_removed else seq)
        tombs = sorted(s for s in removed if s > floor)
        return ts, size, sl, removed, new_removed, floor, tombs

    def _live_at_or_after(self, seq: int) -> int:
        """The smallest live sequence >= ``seq``, or last + 1.

        Every sequence between first and last is either live or in the dmap, so a run of
        removed sequences is skipped with two binary searches instead of being walked: a KV
        stream may have millions of removed sequences between two live ones.
        """
        recs = self._recs
        if seq in recs:
            return seq
        last = self._last
        if seq < self._first:
            seq = self._first
            if seq in recs:
                return seq
        dmap = self._dmap
        while seq <= last:
            i = bisect.bisect_left(dmap, seq)
            if i == len(dmap) or dmap[i] != seq:
                seq += 1  # not expected (see above); stay correct anyway
            else:
                # dmap[k] - k is constant along a run of consecutive sequences: find its end.
                base = seq - i
                lo, hi = i + 1, len(dmap)
                while lo < hi:
                    mid = (lo + hi) >> 1
                    if dmap[mid] - mid == base:
                        lo = mid + 1
                    else:
                        hi = mid
                seq = dmap[lo - 1] + 1
            if seq in recs:
                return seq
        return last + 1

    def _live_at_or_before(self, seq: int) -> int:
        """The largest live sequence <= ``seq``, or first - 1 (see :meth:`_live_at_or_after`)."""
        recs = self._recs
        if seq in recs:
            return seq
        first = self._first
        if seq > self._last:
            seq = self._last
            if seq in recs:
                return seq
        dmap = self._dmap
        while seq >= first:
            i = bisect.bisect_left(dmap, seq)
            if i == len(dmap) or dmap[i] != seq:
                seq -= 1
            else:
                base = seq - i
                lo, hi = 0, i
                while lo < hi:
                    mid = (lo + hi) >> 1
                    if dmap[mid] - mid == base:
                        hi = mid
                    else:
                        lo = mid + 1
                seq = dmap[lo] - 1
            if seq in recs:
                return seq
        return first - 1

    def _plan_front_removals(self, removed: list[int], add_msgs: int, add_bytes: int) -> list[int]:
        """Extend ``removed`` with the oldest messages that max_msgs / max_bytes push out."""
        lim = self._limits
        recs = self._recs
        msgs = len(recs) + add_msgs - len(removed)
        nbytes = self._bytes + add_bytes - sum(recs[s][2] for s in removed)
        max_msgs = lim.max_msgs if lim.max_msgs > 0 else 1 << 62
        max_bytes = lim.max_bytes if lim.max_bytes > 0 else 1 << 62
        if msgs <= max_msgs and nbytes <= max_bytes:
            return removed
        out = list(removed)
        taken = set(removed)
        last = self._last
        s = self._live_at_or_after(self._first)
        while s <= last and (msgs > max_msgs or nbytes > max_bytes):
            if s not in taken:
                out.append(s)
                msgs -= 1
                nbytes -= recs[s][2]
            s = self._live_at_or_after(s + 1)
        return out

    def _plan_floor(self, removed: Iterable[int], limit: int) -> int:
        """The first sequence still live after ``removed`` go, or ``limit`` if none below it."""
        recs = self._recs
        if not recs:
            return limit
        gone = set(removed)
        s = self._live_at_or_after(self._first)
        while s < limit and s in gone:
            s = self._live_at_or_after(s + 1)
        return min(s, limit)

    def _drop(self, seq: int) -> Rec | None:
        """Forget ``seq`` in memory (its removal is already persisted)."""
        rec = self._recs.pop(seq, None)
        if rec is None:
            return None
        self._bytes -= rec[2]
        subject = rec[0]
        sl = self._subjects[subject]
        if sl.count == 1:
            del self._subjects[subject]
            self._subj_gen += 1
        else:
            sl.remove(seq)
        if seq == self._first:
            recs = self._recs
            if not recs:
                self._first = self._last + 1
            else:
                self._first = self._live_at_or_after(seq + 1)
            dmap = self._dmap
            if dmap and dmap[0] < self._first:
                del dmap[: bisect.bisect_left(dmap, self._first)]
        else:
            bisect.insort(self._dmap, seq)
        self._io_dropped(seq, rec)
        return rec

    def _remove_many(self, seqs: list[int], erase: bool = False) -> int:
        """Persist, then apply, the removal of ``seqs`` (live sequences)."""
        if not seqs:
            return 0
        floor = self._plan_floor(seqs, self._last + 1)
        tombs = sorted(s for s in seqs if s > floor)
        self._io_remove(floor, tombs, seqs if erase else ())
        for s in seqs:
            self._drop(s)
        self._io_maintain()
        return len(seqs)

    def skip_msgs(self, first: int, num: int) -> None:
        """nats-server's SkipMsgs: use up ``num`` sequences from ``first`` with nothing
        stored (a catch-up's gap), so the next message gets ``first + num``. ``first`` must
        follow the last sequence (else :class:`SequenceMismatchError`, nothing changes). On
        an empty store the first sequence moves past them; otherwise they are interior
        deletes. One record on disk, whatever ``num``."""
        self._check_open()
        if first != self._last + 1:
            raise SequenceMismatchError()
        if num <= 0:
            return
        last = first + num - 1
        ts = self._last_ts or time.time_ns()  # as Go: the last time only when there is none
        floor = self._plan_floor((), last + 1)
        self._io_skip(last, ts, floor)
        if self._recs:
            self._dmap.extend(range(first, last + 1))
        else:
            self._first = floor
        self._last = last
        self._last_ts = ts

    def remove_msg(self, seq: int, erase: bool = False) -> bool:
        """Remove one message; ``erase`` also overwrites its bytes on disk."""
        self._check_open()
        if seq not in self._recs:
            return False
        self._remove_many([seq], erase)
        return True

    def purge(self, subject: str = "", seq: int = 0, keep: int = 0) -> int:
        """nats-server's purge: ``subject`` filter, below ``seq``, keep the last ``keep``."""
        self._check_open()
        # As memstore.PurgeEx: "up to but not including 1" purges nothing.
        if seq == 1:
            return 0
        if is_all(subject):
            if keep == 0 and seq == 0:
                return self._purge_all(self._last + 1)
            if seq > 1:
                return self._compact(seq)
            subject = ">"
        matching = self._matching_subjects(subject)
        total = sum(self._subjects[s].count for s in matching)
        if total == 0:
            return 0
        max_purge = total
        if keep > 0:
            if keep >= total:
                return 0
            max_purge = total - keep
        upto = seq - 1 if seq >= 1 else self._last
        victims: list[int] = []
        for s in matching:
            sl = self._subjects[s]
            victims.extend(x for x in sl.seqs[sl.head :] if x <= upto)
        if len(matching) > 1:
            victims.sort()
        return self._remove_many(victims[:max_purge])

    def _purge_all(self, new_first: int) -> int:
        purged = len(self._recs)
        new_last = max(self._last, new_first - 1)
        self._io_purge_all(new_first, new_last)
        self._recs = {}
        self._subjects = {}
        self._subj_gen += 1
        self._dmap = []
        self._bytes = 0
        self._first = new_first
        self._last = new_last
        return purged

    def _compact(self, seq: int) -> int:
        """Remove every message below ``seq`` (nats-server's Compact)."""
        if seq > self._last:
            return self._purge_all(seq)
        if seq <= self._first:
            return 0
        victims = [s for s in range(self._first, seq) if s in self._recs]
        return self._remove_many(victims)

    def update_limits(self, limits: StreamLimits) -> None:
        """Adopt new limits and apply them at once, as nats-server's UpdateConfig does."""
        self._check_open()
        old = self._limits
        self._limits = _copy_limits(limits)
        self._unlimited = _no_limits(self._limits)
        removed: list[int] = []
        mps = limits.max_msgs_per_subject
        if mps > 0 and (old.max_msgs_per_subject <= 0 or mps < old.max_msgs_per_subject):
            for sl in self._subjects.values():
                if sl.count > mps:
                    removed.extend(sl.oldest(sl.count - mps))
            removed.sort()
        if limits.discard == "old":
            removed = self._plan_front_removals(removed, 0, 0)
        try:
            self._remove_many(removed)
        except BaseException:
            self._limits = old
            raise
        self.expire()

    def expire(self, now: int | None = None) -> None:
        """Remove the leading messages older than max_age (``now`` in ns; default the clock)."""
        self._check_open()
        max_age = self._limits.max_age
        if max_age <= 0 or not self._recs:
            return
        cutoff = (time.time_ns() if now is None else now) - max_age
        recs = self._recs
        victims: list[int] = []
        s = self._first
        last = self._last
        while s <= last:
            if recs[s][1] > cutoff:
                break
            victims.append(s)
            s = self._live_at_or_after(s + 1)
        if len(victims) == len(recs):
            self._purge_all(self._last + 1)
        else:
            self._remove_many(victims)

    def next_expiry(self) -> int | None:
        """When (ns since the epoch) the oldest message passes max_age; None if never."""
        if self._limits.max_age <= 0 or not self._recs:
            return None
        rec = self._recs.get(self._first)
        return None if rec is None else rec[1] + self._limits.max_age

    # -- reading ----------------------------------------------------------------------------

    def load_msg(self, seq: int) -> StoredMsg | None:
        self._check_open()
        rec = self._recs.get(seq)
        return None if rec is None else self._io_read(seq, rec)

    def change_mark(self) -> tuple[int, int]:
        """Changes whenever the store does: a store raises the last sequence, and a removal
        without one lowers the message count."""
        return self._last, len(self._recs)

    def msg_ts(self, seq: int) -> int | None:
        """The timestamp of a live message, without reading it."""
        rec = self._recs.get(seq)
        return None if rec is None else rec[1]

    def msg_subject(self, seq: int) -> str | None:
        rec = self._recs.get(seq)
        return None if rec is None else rec[0]

    def load_next_msg(self, filter_subject: str, start_seq: int) -> StoredMsg | None:
        """The first message with ``seq >= start_seq`` whose subject matches the filter."""
        self._check_open()
        start = max(start_seq, self._first, 1)
        while True:
            seq = self._next_seq(filter_subject, start)
            if seq is None:
                return None
            msg = self._io_read(seq, self._recs[seq])
            if msg is not None:
                return msg
            # A damaged record: the read dropped it; the next one may be fine.
            start = seq + 1

    def load_next_msgs(self, filter_subject: str, start_seq: int, limit: int) -> list[StoredMsg]:
        """Up to ``limit`` messages that ``load_next_msg`` would give one after the other from
        ``start_seq``, in one call: a consumer walking the stream pays the lookups once per
        run instead of once per message."""
        self._check_open()
        out: list[StoredMsg] = []
        start = max(start_seq, self._first, 1)
        if not is_all(filter_subject):
            while len(out) < limit:
                msg = self.load_next_msg(filter_subject, start)
                if msg is None:
                    break
                out.append(msg)
                start = msg.seq + 1
            return out
        recs = self._recs
        read = self._io_read
        seq = self._live_at_or_after(start)
        while seq <= self._last:
            rec = recs.get(seq)
            if rec is None:
                seq = self._live_at_or_after(seq)
                continue
            msg = read(seq, rec)  # None for a damaged record: reported, dropped, skipped
            seq += 1
            if msg is not None:
                out.append(msg)
                if len(out) >= limit:
                    break
        return out

    def _next_seq(self, filter_subject: str, start: int) -> int | None:
        recs = self._recs
        last = self._last
        if start > last or not recs:
            return None
        if is_all(filter_subject):
            s = self._live_at_or_after(start)
            return s if s <= last else None
        if is_literal(filter_subject):
            sl = self._subjects.get(filter_subject)
            return None if sl is None else sl.first_at_or_after(start)
        memo = self._match_memo(filter_subject)
        s = self._live_at_or_after(start)
        for _ in range(_WALK_FIRST):
            if s > last:
                return None
            subject = recs[s][0]
            m = memo.get(subject)
            if m is None:
                m = memo[subject] = match_literal(subject, filter_subject)
            if m:
                return s
            s = self._live_at_or_after(s + 1)
        if s > last:
            return None
        matching = self._matching_subjects(filter_subject)
        if len(matching) <= _SUBJECT_WALK_LIMIT:
            best: int | None = None
            subjects = self._subjects
            for subj in matching:
                found = subjects[subj].first_at_or_after(s)
                if found is not None and (best is None or found < best):
                    best = found
            return best
        while s <= last:
            subject = recs[s][0]
            m = memo.get(subject)
            if m is None:
                m = memo[subject] = match_literal(subject, filter_subject)
            if m:
                return s
            s = self._live_at_or_after(s + 1)
        return None

    def load_last_msg(self, filter_subject: str) -> StoredMsg | None:
        """The newest message matching the filter."""
        return self.load_prev_msg(filter_subject, self._last)

    def load_prev_msg(self, filter_subject: str, start_seq: int) -> StoredMsg | None:
        """The last message with ``seq <= start_seq`` whose subject matches the filter."""
        self._check_open()
        start = min(start_seq, self._last)
        while True:
            seq = self._prev_seq(filter_subject, start)
            if seq is None:
                return None
            msg = self._io_read(seq, self._recs[seq])
            if msg is not None:
                return msg
            start = seq - 1

    def _prev_seq(self, filter_subject: str, start: int) -> int | None:
        recs = self._recs
        first = self._first
        if start < first or not recs:
            return None
        if is_literal(filter_subject) and not is_all(filter_subject):
            sl = self._subjects.get(filter_subject)
            return None if sl is None else sl.last_at_or_before(start)
        if is_all(filter_subject):
            s = self._live_at_or_before(start)
            return s if s >= first else None
        memo = self._match_memo(filter_subject)
        s = self._live_at_or_before(start)
        for _ in range(_WALK_FIRST):
            if s < first:
                return None
            subject = recs[s][0]
            m = memo.get(subject)
            if m is None:
                m = memo[subject] = match_literal(subject, filter_subject)
            if m:
                return s
            s = self._live_at_or_before(s - 1)
        if s < first:
            return None
        matching = self._matching_subjects(filter_subject)
        if len(matching) <= _SUBJECT_WALK_LIMIT:
            best: int | None = None
            subjects = self._subjects
            for subj in matching:
                found = subjects[subj].last_at_or_before(s)
                if found is not None and (best is None or found > best):
                    best = found
            return best
        while s >= first:
            subject = recs[s][0]
            m = memo.get(subject)
            if m is None:
                m = memo[subject] = match_literal(subject, filter_subject)
            if m:
                return s
            s = self._live_at_or_before(s - 1)
        return None

    def seq_for_time(self, ts: int) -> int:
        """The first live sequence stored at or after ``ts`` (deliver policy by_start_time)."""
        for seq, rec in self._recs.items():
            if rec[1] >= ts:
                return seq
        return self._last + 1

    # -- state ------------------------------------------------------------------------------

    def state(self) -> StreamState:
        recs = self._recs
        n = len(recs)
        first_rec = recs.get(self._first) if n else None
        return StreamState(
            messages=n,
            bytes=self._bytes,
            first_seq=self._first,
            first_ts=first_rec[1] if first_rec is not None else 0,
            last_seq=self._last,
            last_ts=self._last_ts,
            num_deleted=(self._last - self._first + 1 - n) if n else 0,
            num_subjects=len(self._subjects),
            consumer_count=len(self.consumer_names()),
        )

    def deleted_seqs(self) -> list[int]:
        """The interior deleted sequences (the ``deleted`` list of a detailed stream info)."""
        return list(self._dmap)

    def subjects_state(self, filter_subject: str = ">") -> dict[str, int]:
        """Messages per subject, for the subjects matching the filter."""
        if is_all(filter_subject):
            return {s: sl.count for s, sl in self._subjects.items()}
        if is_literal(filter_subject):
            sl = self._subjects.get(filter_subject)
            return {} if sl is None else {filter_subject: sl.count}
        return {s: self._subjects[s].count for s in self._matching_subjects(filter_subject)}

    def num_pending(
        self, start_seq: int, filter_subject: str = "", last_per_subject: bool = False
    ) -> int:
        """Messages with ``seq >= start_seq`` matching the filter; with ``last_per_subject``,
        the matching subjects whose newest message is at or after ``start_seq``."""
        start = max(start_seq, self._first)
        if start > self._last or not self._recs:
            return 0
        if last_per_subject:
            subjects: Iterable[str]
            if is_all(filter_subject):
                subjects = self._subjects
            elif is_literal(filter_subject):
                subjects = [filter_subject] if filter_subject in self._subjects else []
            else:
                subjects = self._matching_subjects(filter_subject)
            return sum(1 for s in subjects if self._subjects[s].last >= start)
        if is_all(filter_subject):
            dmap = self._dmap
            return self._last - start + 1 - (len(dmap) - bisect.bisect_left(dmap, start))
        if is_literal(filter_subject):
            sl = self._subjects.get(filter_subject)
            return 0 if sl is None else sl.count_at_or_after(start)
        return sum(
            self._subjects[s].count_at_or_after(start)
            for s in self._matching_subjects(filter_subject)
        )

    def _match_memo(self, filter_subject: str) -> dict[str, bool]:
        memo = self._memo.get(filter_subject)
        if memo is None:
            if len(self._memo) >= _MEMO_LIMIT:
                self._memo.clear()
            memo = self._memo[filter_subject] = {}
        elif len(memo) > 4 * len(self._subjects) + 1024:
            # Subjects come and go (a KV stream); do not let the memo outgrow the index.
            memo.clear()
        return memo

    def _matching_subjects(self, filter_subject: str) -> list[str]:
        if is_all(filter_subject):
            return list(self._subjects)
        if is_literal(filter_subject):
            return [filter_subject] if filter_subject in self._subjects else []
        cached = self._match_cache.get(filter_subject)
        if cached is not None and cached[0] == self._subj_gen:
            return cached[1]
        memo = self._match_memo(filter_subject)
        out = []
        for s in self._subjects:
            m = memo.get(s)
            if m is None:
                m = memo[s] = match_literal(s, filter_subject)
            if m:
                out.append(s)
        if len(self._match_cache) >= _MEMO_LIMIT:
            self._match_cache.clear()
        self._match_cache[filter_subject] = (self._subj_gen, out)
        return out

    # -- consumers --------------------------------------------------------------------------

    def consumer_names(self) -> list[str]:
        return sorted(self._consumers)

    def _forget_consumer(self, name: str) -> None:
        self._consumers.pop(name, None)

    def _check_consumer_name(self, name: str) -> None:
        if not name or name in (".", "..") or any(c in name for c in "/\\\x00"):
            raise ValueError(f"invalid consumer name {name!r}")


def _no_limits(lim: StreamLimits) -> bool:
    """No limit that store_msg has to check or apply."""
    return (
        lim.max_msg_size < 0
        and lim.max_age <= 0
        and lim.max_msgs_per_subject <= 0
        and lim.max_msgs <= 0
        and lim.max_bytes <= 0
    )


def _copy_limits(limits: StreamLimits) -> StreamLimits:
    return StreamLimits(
        max_msgs=limits.max_msgs,
        max_bytes=limits.max_bytes,
        max_age=limits.max_age,
        max_msgs_per_subject=limits.max_msgs_per_subject,
        max_msg_size=limits.max_msg_size,
        discard=limits.discard,
        discard_new_per_subject=limits.discard_new_per_subject,
    )


Callback = Callable[[], None]
