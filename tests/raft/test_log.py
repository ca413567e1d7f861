"""The raft write-ahead log: MemoryLog and FileLog held equal by a state machine, the contract
table by table, and FileLog's recovery from torn tails, bit flips, garbage, empty files, a
read-only directory and SIGKILL."""

from __future__ import annotations

import hashlib
import logging
import os
import random
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

import pynatsd
from pynatsd.raft import log as raftlog
from pynatsd.raft.log import FileLog, LogError, MemoryLog, RaftLog
from pynatsd.raft.wire import AppendEntry, Entry, EntryType
from support.readonly import read_only_later

LEADER = "abcdefgh"
CHILD = Path(__file__).with_name("_log_crash_child.py")
REC = struct.Struct("<IIQ")  # a FileLog record's head: crc32, length, index


def next_ae(lg: RaftLog, term: int, sizes: tuple[int, ...] = (8,), lterm: int = 0) -> AppendEntry:
    """The append entry that follows the log's last one."""
    index = lg.last_index + 1
    entries = tuple(
        Entry(EntryType.NORMAL if n % 3 else EntryType.PEER_STATE, b"%d:" % index + b"x" * n)
        for n in sizes
    )
    return AppendEntry(LEADER, term, max(0, index - 2), lg.last_term, index - 1, entries, lterm)


def fill(lg: RaftLog, count: int, term: int = 1) -> dict[int, AppendEntry]:
    appended = {}
    for _ in range(count):
        ae = next_ae(lg, term, (20,))
        lg.append(ae)
        appended[ae.index] = ae
    return appended


def contents(lg: RaftLog) -> tuple[object, ...]:
    """Everything the log answers, around its ends too."""
    first, last = lg.first_index, lg.last_index
    rows = [(i, lg.term_at(i), lg.get(i)) for i in range(max(0, first - 2), last + 3)]
    return first, last, lg.last_term, rows


# Where tests that open logs many times work: memory when the machine has a tmpfs there, as
# their fsyncs are not what they test (a loaded disk makes each one slow).
SCRATCH = "/dev/shm" if os.access("/dev/shm", os.W_OK) else None


@pytest.fixture
def scratch() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="raftlog-", dir=SCRATCH))
    yield path
    shutil.rmtree(path)


def open_file_log(path: Path, segment_bytes: int = 400) -> FileLog:
    return FileLog(path, segment_bytes=segment_bytes)


@pytest.fixture(params=["memory", "file"])
def make_log(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Callable[[], RaftLog]]:
    opened: list[RaftLog] = []

    def make() -> RaftLog:
        lg: RaftLog = MemoryLog() if request.param == "memory" else open_file_log(tmp_path)
        opened.append(lg)
        return lg

    yield make
    for lg in opened:
        lg.close()


# -- the contract, on both logs ------------------------------------------------------------


def test_empty_log(make_log: Callable[[], RaftLog]) -> None:
    lg = make_log()
    assert (lg.first_index, lg.last_index, lg.last_term) == (1, 0, 0)
    assert lg.term_at(0) == 0
    assert lg.term_at(1) is None
    assert lg.get(0) is None
    assert lg.get(1) is None


def test_append_get_and_order(make_log: Callable[[], RaftLog]) -> None:
    lg = make_log()
    first = next_ae(lg, 3, (0, 5, 70000), lterm=9)
    lg.append(first)
    heartbeat = next_ae(lg, 4, ())
    lg.append(heartbeat)
    assert lg.get(1) == first
    assert lg.get(2) == heartbeat
    assert (lg.first_index, lg.last_index, lg.last_term) == (1, 2, 4)
    assert [lg.term_at(i) for i in range(4)] == [0, 3, 4, None]
    for pindex in (0, 1, 3, 7):
        with pytest.raises(LogError, match="pindex"):
            lg.append(AppendEntry(LEADER, 4, 0, 4, pindex, (Entry(0, b"x"),)))
    assert lg.last_index == 2


@pytest.mark.parametrize(
    ("index", "expect_last", "expect_term"),
    [(10, 6, 3), (6, 6, 3), (5, 5, 3), (3, 3, 2), (2, 2, 2), (1, 1, 1), (0, 0, 0)],
)
def test_truncate_after(
    make_log: Callable[[], RaftLog], index: int, expect_last: int, expect_term: int
) -> None:
    lg = make_log()
    for term in (1, 2, 2, 3, 3, 3):
        lg.append(next_ae(lg, term))
    lg.truncate_after(index)
    assert (lg.first_index, lg.last_index, lg.last_term) == (1, expect_last, expect_term)
    assert lg.get(expect_last + 1) is None
    lg.append(next_ae(lg, 7))
    assert (lg.last_index, lg.last_term) == (expect_last + 1, 7)


def test_compact(make_log: Callable[[], RaftLog]) -> None:
    lg = make_log()
    for term in (1, 1, 2, 2, 3):
        lg.append(next_ae(lg, term))
    with pytest.raises(LogError, match="term"):
        lg.compact(3, 1)  # the entry at 3 has term 2
    lg.compact(3, 2)
    assert (lg.first_index, lg.last_index, lg.last_term) == (4, 5, 3)
    assert [lg.term_at(i) for i in range(1, 7)] == [None, None, 2, 2, 3, None]
    assert lg.get(3) is None
    assert lg.get(4) is not None
    lg.compact(2, 1)  # below the base: nothing to do
    assert lg.first_index == 4
    with pytest.raises(LogError, match="truncate"):
        lg.truncate_after(2)
    lg.truncate_after(3)  # down to the base: empty, based at the snapshot
    assert (lg.first_index, lg.last_index, lg.last_term) == (4, 3, 2)
    lg.append(next_ae(lg, 5))
    # A snapshot past the end: empty, starting after it.
    lg.compact(20, 6)
    assert (lg.first_index, lg.last_index, lg.last_term) == (21, 20, 6)
    assert lg.term_at(20) == 6
    assert lg.get(4) is None
    lg.append(next_ae(lg, 6))
    assert (lg.last_index, lg.term_at(21)) == (21, 6)


def test_reset(make_log: Callable[[], RaftLog]) -> None:
    lg = make_log()
    fill(lg, 5, term=2)
    lg.reset(3, 9)  # below the last index: everything goes all the same
    assert (lg.first_index, lg.last_index, lg.last_term) == (4, 3, 9)
    assert lg.get(3) is None
    assert lg.term_at(3) == 9
    lg.append(next_ae(lg, 9))
    lg.reset(0, 0)
    assert contents(lg) == contents(MemoryLog())


# -- MemoryLog and FileLog are the same log ------------------------------------------------


class LogMachine(RuleBasedStateMachine):
    """Random appends, truncations, compactions, resets and reopenings on both logs."""

    def __init__(self) -> None:
        super().__init__()
        self.dir = Path(tempfile.mkdtemp(prefix="raftlog-", dir=SCRATCH))
        self.mem = MemoryLog()
        self.file = open_file_log(self.dir, segment_bytes=300)

    def teardown(self) -> None:
        self.file.close()
        shutil.rmtree(self.dir)

    def both(self, op: Callable[[RaftLog], None]) -> None:
        outcomes = []
        for lg in (self.mem, self.file):
            try:
                op(lg)
                outcomes.append("ok")
            except LogError:
                outcomes.append("LogError")
        assert outcomes[0] == outcomes[1]

    @rule(step=st.integers(0, 2), sizes=st.lists(st.integers(0, 90), max_size=3))
    def append(self, step: int, sizes: list[int]) -> None:
        ae = next_ae(self.mem, self.mem.last_term + step, tuple(sizes))
        self.both(lambda lg: lg.append(ae))

    @rule(shift=st.sampled_from([-2, -1, 1, 2]))
    def append_out_of_order(self, shift: int) -> None:
        good = next_ae(self.mem, self.mem.last_term)
        ae = AppendEntry(LEADER, good.term, 0, good.pterm, max(0, good.pindex + shift), ())
        if ae.pindex != good.pindex:
            self.both(lambda lg: lg.append(ae))

    @rule(data=st.data())
    def truncate_after(self, data: st.DataObject) -> None:
        low = max(0, self.mem.first_index - 3)
        index = data.draw(st.integers(low, self.mem.last_index + 2))
        self.both(lambda lg: lg.truncate_after(index))

    @rule(data=st.data())
    def compact(self, data: st.DataObject) -> None:
        low = max(0, self.mem.first_index - 3)
        index = data.draw(st.integers(low, self.mem.last_index + 4))
        held = self.mem.term_at(index)
        if held is None or data.draw(st.booleans()):
            term = data.draw(st.integers(0, self.mem.last_term + 3))
        else:
            term = held
        self.both(lambda lg: lg.compact(index, term))

    @precondition(lambda self: self.mem.last_index > 0)
    @rule(data=st.data())
    def reset(self, data: st.DataObject) -> None:
        index = data.draw(st.integers(0, self.mem.last_index + 4))
        term = data.draw(st.integers(0, self.mem.last_term + 2))
        self.both(lambda lg: lg.reset(index, term))

    @rule(close=st.booleans())
    def reopen(self, close: bool) -> None:
        old = self.file
        if close:
            old.close()
        else:
            old.sync()  # as after a crash of the process once the log was synced
        self.file = open_file_log(self.dir, segment_bytes=300)
        old.close()

    @invariant()
    def same(self) -> None:
        assert contents(self.file) == contents(self.mem)


TestLogMachine = LogMachine.TestCase
TestLogMachine.settings = settings(max_examples=100, stateful_step_count=40, deadline=None)


# -- FileLog on disk -----------------------------------------------------------------------


def segments(path: Path) -> list[Path]:
    return sorted(path.glob("*.wal"))


def record_offsets(data: bytes) -> list[tuple[int, int, int]]:
    """(start, end, index) of each record of an intact segment."""
    out, pos = [], 0
    while pos < len(data):
        _crc, length, index = REC.unpack_from(data, pos)
        out.append((pos, pos + REC.size + length, index))
        pos += REC.size + length
    return out


def test_segments_rotate_and_compaction_deletes_them(tmp_path: Path) -> None:
    lg = open_file_log(tmp_path, segment_bytes=200)
    appended = fill(lg, 30)
    names = [p.name for p in segments(tmp_path)]
    assert len(names) >= 5
    assert names[0] == "00000000000000000001.wal"
    lg.compact(17, 1)
    remaining = segments(tmp_path)
    assert int(remaining[0].stem) <= 18 < int(remaining[1].stem)
    lg.close()
    lg = open_file_log(tmp_path, segment_bytes=200)
    assert (lg.first_index, lg.last_index) == (18, 30)
    assert all(lg.get(i) == appended[i] for i in range(18, 31))
    lg.truncate_after(20)
    last = segments(tmp_path)[-1]
    assert int(last.stem) <= 20
    assert record_offsets(last.read_bytes())[-1][2] == 20
    lg.close()


def test_sync_always_syncs_each_append(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    synced: list[int] = []
    monkeypatch.setattr(raftlog, "_fdatasync", lambda fd: synced.append(fd))
    lg = FileLog(tmp_path / "always", sync_always=True)
    fill(lg, 3)
    assert len(synced) == 3
    lazy = FileLog(tmp_path / "lazy")
    fill(lazy, 3)
    assert len(synced) == 3
    lazy.sync()
    lazy.sync()  # nothing new: no fsync
    assert len(synced) == 4
    lg.close()
    lazy.close()


def test_failed_write_changes_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    lg = open_file_log(tmp_path)
    appended = fill(lg, 3)
    size = segments(tmp_path)[0].stat().st_size

    def half_write(fd: int, data: bytes, offset: int) -> int:
        os.pwrite(fd, data[: len(data) // 2], offset)
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(raftlog, "_pwrite", half_write)
    with pytest.raises(LogError, match="No space left"):
        lg.append(next_ae(lg, 1))
    assert lg.last_index == 3
    assert segments(tmp_path)[0].stat().st_size == size
    monkeypatch.undo()
    appended.update(fill(lg, 1))
    lg.close()
    lg = open_file_log(tmp_path)
    assert [lg.get(i) for i in range(1, 5)] == [appended[i] for i in range(1, 5)]
    lg.close()


def test_failed_fsync_fails_the_log(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    lg = open_file_log(tmp_path)
    fill(lg, 2)

    def eio(fd: int) -> None:
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(raftlog, "_fdatasync", eio)
    with pytest.raises(LogError, match="fsync failed"):
        lg.sync()
    monkeypatch.undo()
    with pytest.raises(LogError, match="fsync failed"):
        lg.append(next_ae(lg, 1))
    with pytest.raises(LogError, match="fsync failed"):
        lg.sync()
    lg.close()
    with pytest.raises(LogError, match="closed"):
        lg.append(next_ae(lg, 1))


@pytest.mark.parametrize("op", ["truncate", "compact", "reset"])
def test_failed_change_fails_the_log(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, op: str
) -> None:
    lg = open_file_log(tmp_path, segment_bytes=200)
    appended = fill(lg, 30)
    real_unlink = Path.unlink
    calls: list[Path] = []

    def unlink_once(path: Path, missing_ok: bool = False) -> None:
        calls.append(path)
        if len(calls) == 2:
            raise OSError(5, "Input/output error")
        real_unlink(path, missing_ok)

    monkeypatch.setattr(Path, "unlink", unlink_once)
    change = {
        "truncate": lambda: lg.truncate_after(10),
        "compact": lambda: lg.compact(25, 1),
        "reset": lambda: lg.reset(40, 2),
    }[op]
    with pytest.raises(LogError, match="Input/output"):
        change()
    monkeypatch.undo()
    with pytest.raises(LogError, match=f"cannot {op}"):
        lg.append(next_ae(lg, 1))
    lg.close()
    # What the change left on disk opens as a consistent log.
    lg = open_file_log(tmp_path, segment_bytes=200)
    check_never_wrong(lg, appended)
    lg.close()


def test_torn_last_record_at_every_offset(scratch: Path, caplog: pytest.LogCaptureFixture) -> None:
    src = scratch / "src"
    lg = open_file_log(src, segment_bytes=1 << 20)
    appended = fill(lg, 6)
    lg.close()
    (seg,) = segments(src)
    data = seg.read_bytes()
    start, end, _index = record_offsets(data)[-1]
    work = scratch / "work"
    for cut in range(start, end):
        shutil.rmtree(work, ignore_errors=True)
        shutil.copytree(src, work)
        (work / seg.name).write_bytes(data[:cut])
        caplog.clear()
        with caplog.at_level(logging.WARNING, "pynatsd.raft"):
            lg = open_file_log(work)
        assert lg.last_index == 5
        assert [lg.get(i) for i in range(1, 6)] == [appended[i] for i in range(1, 6)]
        assert (work / seg.name).stat().st_size == start
        if cut > start:
            assert f"{seg.name}: torn record at offset {start}" in caplog.text
        lg.append(appended[6])
        lg.close()
        assert open_file_log(work).get(6) == appended[6]


def build_damage_template(path: Path) -> dict[int, AppendEntry]:
    """Several segments, compacted into the first one that remains (a base file and dead
    records on disk)."""
    lg = open_file_log(path, segment_bytes=250)
    appended = {}
    for term in (1, 1, 2, 2, 2, 3, 3, 4, 4, 4, 4, 5, 5, 6, 6, 6, 7, 7, 7, 7, 8, 8):
        ae = next_ae(lg, term, (random.Random(term).randrange(0, 60),))
        lg.append(ae)
        appended[ae.index] = ae
    lg.compact(6, 3)
    lg.close()
    return appended


def check_never_wrong(lg: FileLog, appended: dict[int, AppendEntry]) -> None:
    for i in range(lg.first_index, lg.last_index + 1):
        assert lg.get(i) == appended[i]
        assert lg.term_at(i) == appended[i].term
    base = lg.first_index - 1
    assert lg.term_at(base) == (appended[base].term if base else 0)


def test_random_bit_flips(scratch: Path, caplog: pytest.LogCaptureFixture) -> None:
    src = scratch / "src"
    appended = build_damage_template(src)
    files = {p.name: p.read_bytes() for p in src.iterdir()}
    records = {name: record_offsets(data) for name, data in files.items() if name.endswith(".wal")}
    assert "base" in files
    assert len(records) >= 3
    rnd = random.Random(7)
    work = scratch / "work"
    for _ in range(150):
        shutil.rmtree(work, ignore_errors=True)
        work.mkdir()
        for name, data in files.items():
            (work / name).write_bytes(data)
        name = rnd.choice(sorted(files))
        damaged = bytearray(files[name])
        offset = rnd.randrange(len(damaged))
        damaged[offset] ^= 1 << rnd.randrange(8)
        (work / name).write_bytes(damaged)
        caplog.clear()
        with caplog.at_level(logging.WARNING, "pynatsd.raft"):
            lg = open_file_log(work, segment_bytes=250)
        assert caplog.records, f"a flip at {name}:{offset} went unnoticed"
        check_never_wrong(lg, appended)
        for start, end, index in records.get(name, []):
            if start <= offset < end:
                assert lg.last_index < index or lg.first_index > index
        # The log goes on from where it ends, and reopens the same.
        ae = next_ae(lg, lg.last_term + 1)
        lg.append(ae)
        before = contents(lg)
        lg.close()
        lg = open_file_log(work, segment_bytes=250)
        assert contents(lg) == before
        lg.close()


@pytest.mark.parametrize(
    "garbage",
    [
        b"\0" * 100,
        b"\xff" * 7,
        random.Random(1).randbytes(300),
        REC.pack(0, 1 << 30, 7),  # a head claiming a huge record
        "copy",  # a whole valid record again: right checksum, wrong index
    ],
)
def test_garbage_after_the_end(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, garbage: bytes | str
) -> None:
    lg = open_file_log(tmp_path, segment_bytes=1 << 20)
    appended = fill(lg, 5)
    lg.close()
    (seg,) = segments(tmp_path)
    data = seg.read_bytes()
    start, end, _ = record_offsets(data)[-1]
    extra = data[start:end] if garbage == "copy" else garbage
    assert isinstance(extra, bytes)
    seg.write_bytes(data + extra)
    with caplog.at_level(logging.WARNING, "pynatsd.raft"):
        lg = open_file_log(tmp_path)
    assert f"{seg.name}: torn record at offset {len(data)}" in caplog.text
    assert seg.stat().st_size == len(data)
    check_never_wrong(lg, appended)
    assert lg.last_index == 5
    lg.close()


def test_zero_length_files(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    src = tmp_path / "src"
    appended = build_damage_template(src)
    names = [p.name for p in segments(src)]
    cases = {"base": None, names[-1]: None, names[1]: None}
    for name in cases:
        work = tmp_path / f"work-{name}"
        shutil.copytree(src, work)
        (work / name).write_bytes(b"")
        caplog.clear()
        with caplog.at_level(logging.WARNING, "pynatsd.raft"):
            lg = open_file_log(work, segment_bytes=250)
        assert name in caplog.text
        check_never_wrong(lg, appended)
        if name != "base":
            assert lg.last_index == int(Path(name).stem) - 1
        lg.close()
    # An empty segment left by a crash right after it was created costs nothing.
    work = tmp_path / "fresh"
    shutil.copytree(src, work)
    (work / f"{len(appended) + 1:020d}.wal").write_bytes(b"")
    lg = open_file_log(work, segment_bytes=250)
    assert (lg.first_index, lg.last_index) == (7, len(appended))
    check_never_wrong(lg, appended)
    lg.close()


def test_damage_after_open_is_not_served(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    lg = open_file_log(tmp_path, segment_bytes=1 << 20)
    appended = fill(lg, 3)
    (seg,) = segments(tmp_path)
    start, _end, _ = record_offsets(seg.read_bytes())[1]
    with open(seg, "r+b") as f:
        f.seek(start + REC.size + 20)
        f.write(b"\x99")
    with caplog.at_level(logging.ERROR, "pynatsd.raft"):
        assert lg.get(2) is None
    assert f"damaged record at offset {start} (index 2)" in caplog.text
    assert lg.get(3) == appended[3]
    lg.close()


def test_read_only_directory(tmp_path: Path) -> None:
    with read_only_later(tmp_path) as (path, make_read_only):
        lg = open_file_log(path / "group")
        fill(lg, 3)
        lg.close()
        make_read_only()
        with pytest.raises(LogError, match="not writable"):
            open_file_log(path / "group")
        with pytest.raises(LogError, match="group2"):
            open_file_log(path / "group2")


# -- SIGKILL -------------------------------------------------------------------------------


def read_lines(proc: subprocess.Popen[bytes], out: list[str]) -> None:
    assert proc.stdout is not None
    for raw in proc.stdout:
        if raw.endswith(b"\n"):  # a line cut by the kill was never "acknowledged"
            out.append(raw.decode().strip())


def test_sigkill_loses_no_synced_entry(tmp_path: Path) -> None:
    rnd = random.Random(3)
    synced: dict[int, str] = {}
    env = {**os.environ, "PYTHONPATH": str(Path(pynatsd.__file__).parents[1])}
    for round_no in range(4):
        lines: list[str] = []
        proc = subprocess.Popen(
            [sys.executable, str(CHILD), str(tmp_path), str(round_no)],
            stdout=subprocess.PIPE,
            env=env,
        )
        reader = threading.Thread(target=read_lines, args=(proc, lines))
        reader.start()
        deadline = time.monotonic() + 20
        while len(lines) < 2 and time.monotonic() < deadline:
            time.sleep(0.005)
        time.sleep(rnd.uniform(0.01, 0.2))
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        reader.join()
        assert lines[0].startswith("ready")
        for line in lines[1:]:
            _kind, synced_index, digest = line.split()
            synced[int(synced_index)] = digest
        lg = FileLog(tmp_path)
        assert lg.last_index >= max(synced)
        for index, digest in synced.items():
            if index >= lg.first_index:
                ae = lg.get(index)
                assert ae is not None, f"synced index {index} is missing"
                data = ae.entries[0].data
                assert data[:16] == digest.encode()
                assert hashlib.sha256(data[16:]).hexdigest()[:16] == digest
        lg.close()
    assert len(synced) > 20
