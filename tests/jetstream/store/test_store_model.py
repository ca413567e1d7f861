"""Property test: random operations on both stores against a plain dict model.

The file store is also closed and reopened at random points, so every operation's on-disk
record is checked by recovery as well.
"""

from __future__ import annotations

import shutil
import tempfile

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from pynatsd.jetstream.store import (
    FileStore,
    MemoryStore,
    SequenceMismatchError,
    StreamLimits,
    open_file_store,
    open_memory_store,
)
from pynatsd.subjects import match_literal

SUBJECTS = ["a", "b.1", "b.2", "c.x.y", "c.z.y"]
FILTERS = ["", ">", "a", "b.*", "b.>", "c.*.y", "c.x.y", "nope", "*.1"]
HDR = b"NATS/1.0\r\nK: v\r\n\r\n"


def matches(subject: str, filt: str) -> bool:
    return filt in ("", ">") or match_literal(subject, filt)


class Model:
    """The obvious implementation: an insertion-ordered dict of seq -> (subject, hdr, data)."""

    def __init__(self) -> None:
        self.msgs: dict[int, tuple[str, bytes, bytes]] = {}
        self.last = 0
        self.empty_first = 0
        self.max_msgs = -1
        self.mps = -1

    @property
    def first(self) -> int:
        return min(self.msgs) if self.msgs else self.empty_first

    def remove(self, seq: int) -> bool:
        if self.msgs.pop(seq, None) is None:
            return False
        if not self.msgs:
            self.empty_first = self.last + 1
        return True

    def enforce(self) -> None:
        if self.mps > 0:
            for subject in SUBJECTS:
                seqs = [s for s, m in self.msgs.items() if m[0] == subject]
                for s in seqs[: max(0, len(seqs) - self.mps)]:
                    self.remove(s)
        if self.max_msgs > 0:
            for s in list(self.msgs)[: max(0, len(self.msgs) - self.max_msgs)]:
                self.remove(s)

    def store(self, subject: str, hdr: bytes, data: bytes) -> int:
        self.last += 1
        self.msgs[self.last] = (subject, hdr, data)
        self.enforce()
        return self.last

    def skip(self, num: int) -> None:
        if num == 0:
            return  # nothing to use up, nothing changes
        self.last += num
        if not self.msgs:
            self.empty_first = self.last + 1

    def purge_all(self, new_first: int) -> int:
        n = len(self.msgs)
        self.msgs.clear()
        self.empty_first = new_first
        self.last = max(self.last, new_first - 1)
        return n

    def purge(self, subject: str, seq: int, keep: int) -> int:
        if seq == 1:
            return 0
        if subject in ("", ">"):
            if keep == 0 and seq == 0:
                return self.purge_all(self.last + 1)
            if seq > 1:
                if seq > self.last:
                    return self.purge_all(seq)
                victims = [s for s in self.msgs if s < seq]
                for s in victims:
                    self.remove(s)
                return len(victims)
            subject = ">"
        matching = [s for s, m in self.msgs.items() if matches(m[0], subject)]
        limit = len(matching)
        if keep > 0:
            if keep >= len(matching):
                return 0
            limit = len(matching) - keep
        upto = seq - 1 if seq >= 1 else self.last
        victims = [s for s in matching if s <= upto][:limit]
        for s in victims:
            self.remove(s)
        return len(victims)


class StoreMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.dir = tempfile.mkdtemp(prefix="store-model-")
        self.model = Model()
        self.mem: MemoryStore = open_memory_store(StreamLimits())
        self.file: FileStore = self._open()
        self.ts = 1_000
        self._seen: dict[str, tuple[tuple[int, tuple[int, ...]], tuple[int, int]]] = {}

    def _open(self) -> FileStore:
        limits = StreamLimits(max_msgs=self.model.max_msgs, max_msgs_per_subject=self.model.mps)
        return open_file_store(self.dir, limits, segment_bytes=512)

    def teardown(self) -> None:
        self.file.close()
        shutil.rmtree(self.dir, ignore_errors=True)

    @rule(
        subject=st.sampled_from(SUBJECTS),
        with_hdr=st.booleans(),
        data=st.binary(max_size=40),
    )
    def store(self, subject: str, with_hdr: bool, data: bytes) -> None:
        hdr = HDR if with_hdr else b""
        self.ts += 1
        want = self.model.store(subject, hdr, data)
        assert self.mem.store_msg(subject, hdr, data, ts=self.ts)[0] == want
        assert self.file.store_msg(subject, hdr, data, ts=self.ts)[0] == want

    @rule(num=st.sampled_from([0, 1, 1, 3, 40]), off=st.sampled_from([0, 0, 0, -1, 1]))
    def skip(self, num: int, off: int) -> None:
        first = self.model.last + 1 + off
        for store in (self.mem, self.file):
            if off:
                with pytest.raises(SequenceMismatchError):
                    store.skip_msgs(first, num)
            else:
                store.skip_msgs(first, num)
        if not off:
            self.model.skip(num)

    @rule(offset=st.integers(min_value=-2, max_value=3), erase=st.booleans())
    def remove(self, offset: int, erase: bool) -> None:
        msgs = list(self.model.msgs)
        seq = msgs[len(msgs) // 2] + offset if msgs else offset
        want = self.model.remove(seq)
        assert self.mem.remove_msg(seq, erase) == want
        assert self.file.remove_msg(seq, erase) == want

    @rule(
        subject=st.sampled_from(FILTERS),
        seq=st.integers(min_value=0, max_value=40),
        keep=st.sampled_from([0, 0, 1, 2]),
    )
    def purge(self, subject: str, seq: int, keep: int) -> None:
        if subject == "nope":
            subject = ""
        want = self.model.purge(subject, seq, keep)
        assert self.mem.purge(subject, seq, keep) == want
        assert self.file.purge(subject, seq, keep) == want

    @rule(max_msgs=st.sampled_from([-1, 3, 8]), mps=st.sampled_from([-1, 1, 2]))
    def limits(self, max_msgs: int, mps: int) -> None:
        self.model.max_msgs, self.model.mps = max_msgs, mps
        self.model.enforce()
        limits = StreamLimits(max_msgs=max_msgs, max_msgs_per_subject=mps)
        self.mem.update_limits(limits)
        self.file.update_limits(limits)

    @rule()
    def reopen(self) -> None:
        self.file.close()
        self.file = self._open()
        assert self.file.damaged == []

    @invariant()
    def same_state(self) -> None:
        model = self.model
        for store in (self.mem, self.file):
            state = store.state()
            assert state.messages == len(model.msgs)
            assert (state.first_seq, state.last_seq) == (model.first, model.last)
            got = []
            m = store.load_next_msg(">", 0)
            while m is not None:
                got.append((m.seq, m.subject, m.header, m.data))
                m = store.load_next_msg(">", m.seq + 1)
            assert got == [(s, *v) for s, v in model.msgs.items()]
            counts: dict[str, int] = {}
            for subject, _, _ in model.msgs.values():
                counts[subject] = counts.get(subject, 0) + 1
            assert store.subjects_state() == counts
            assert state.num_subjects == len(counts)
        assert self.mem.state().num_deleted == self.file.state().num_deleted

    @invariant()
    def change_mark_moves_with_every_change(self) -> None:
        # A consumer keeps its pending count while the mark stays: any store, removal or
        # purge since the last look must have moved it.
        snapshot = (self.model.last, tuple(self.model.msgs))
        for name, store in (("memory", self.mem), ("file", self.file)):
            mark = store.change_mark()
            seen = self._seen.get(name)
            if seen is not None:
                assert (mark == seen[1]) == (snapshot == seen[0])
            self._seen[name] = (snapshot, mark)

    @invariant()
    def same_queries(self) -> None:
        model = self.model
        starts = [0, model.first + 1, model.last // 2, model.last]
        for store in (self.mem, self.file):
            for filt in FILTERS:
                for start in starts:
                    want = [s for s, m in model.msgs.items() if s >= start and matches(m[0], filt)]
                    got = store.load_next_msg(filt, start)
                    assert (got.seq if got else None) == (want[0] if want else None)
                    for limit in (1, 3, 1000):
                        run = store.load_next_msgs(filt, start, limit)
                        assert [m.seq for m in run] == want[:limit]
                        assert [(m.subject, m.header, m.data) for m in run] == [
                            model.msgs[s] for s in want[:limit]
                        ]
                    assert store.num_pending(start, filt) == len(want)
                    lasts: dict[str, int] = {}
                    for s, m in model.msgs.items():
                        if matches(m[0], filt):
                            lasts[m[0]] = s
                    assert store.num_pending(start, filt, last_per_subject=True) == sum(
                        1 for s in lasts.values() if s >= start
                    )
                last = store.load_last_msg(filt)
                want_last = [s for s, m in model.msgs.items() if matches(m[0], filt)]
                assert (last.seq if last else None) == (want_last[-1] if want_last else None)


StoreMachine.TestCase.settings = settings(
    max_examples=100,
    stateful_step_count=30,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
TestStoreModel = StoreMachine.TestCase
