"""File store only: recovery on reopen, segments, consumer state, durability and write errors."""

from __future__ import annotations

import asyncio
import errno
import logging
import os
from pathlib import Path

import pytest

from pynatsd.jetstream.store import (
    FileStore,
    InsufficientResourcesError,
    StoreError,
    StreamLimits,
    open_file_store,
)
from pynatsd.jetstream.store import file as file_mod

HDR = b"NATS/1.0\r\nA: b\r\n\r\n"


def open_store(path: Path, **kw: object) -> FileStore:
    limits = kw.pop("limits", StreamLimits())
    assert isinstance(limits, StreamLimits)
    kw.setdefault("segment_bytes", 2048)
    return open_file_store(str(path), limits, **kw)  # type: ignore[arg-type]


def snapshot(store: FileStore) -> tuple[object, list[tuple[int, str, bytes, bytes, int]], object]:
    msgs = []
    m = store.load_next_msg(">", 0)
    while m is not None:
        msgs.append((m.seq, m.subject, m.header, m.data, m.ts))
        m = store.load_next_msg(">", m.seq + 1)
    return store.state(), msgs, store.subjects_state()


def test_reopen_recovers_everything(tmp_path: Path) -> None:
    store = open_store(tmp_path, limits=StreamLimits(max_msgs_per_subject=3))
    for i in range(200):
        store.store_msg(f"s.{i % 7}", HDR if i % 2 else b"", b"payload-%d" % i)
    store.remove_msg(150)
    store.remove_msg(151, erase=True)
    store.purge("s.3", keep=1)
    store.purge(seq=180)
    before = snapshot(store)
    deleted = store.deleted_seqs()
    store.close()
    store = open_store(tmp_path, limits=StreamLimits(max_msgs_per_subject=3))
    assert snapshot(store) == before
    assert store.deleted_seqs() == deleted
    assert store.damaged == []
    assert store.store_msg("s.0", b"", b"next")[0] == 201
    store.close()


def test_reopen_after_purge_keeps_sequence(tmp_path: Path) -> None:
    store = open_store(tmp_path)
    for _ in range(100):
        store.store_msg("a", b"", b"x" * 50)
    assert len(store.segment_paths()) > 1
    store.purge()
    # Only the new active segment with the floor marker is left.
    assert len(store.segment_paths()) == 1
    store.close()
    store = open_store(tmp_path)
    st = store.state()
    assert (st.messages, st.first_seq, st.last_seq) == (0, 101, 100)
    assert store.store_msg("a", b"", b"")[0] == 101
    store.purge(seq=500)
    store.close()
    store = open_store(tmp_path)
    st = store.state()
    assert (st.messages, st.first_seq, st.last_seq) == (0, 500, 499)
    store.close()


def test_old_segments_are_deleted_by_limits(tmp_path: Path) -> None:
    store = open_store(tmp_path, limits=StreamLimits(max_msgs=10))
    for _ in range(2000):
        store.store_msg("a", b"", b"x" * 100)
    # 10 messages of ~150 bytes fit in one or two 2 KiB segments.
    assert len(os.listdir(tmp_path / "msgs")) <= 3
    before = snapshot(store)
    store.close()
    store = open_store(tmp_path, limits=StreamLimits(max_msgs=10))
    assert snapshot(store) == before
    store.close()


def test_limits_lowered_while_closed_apply_on_open(tmp_path: Path) -> None:
    store = open_store(tmp_path)
    for i in range(50):
        store.store_msg(f"k.{i % 5}", b"", b"%d" % i)
    store.close()
    store = open_store(tmp_path, limits=StreamLimits(max_msgs=20, max_msgs_per_subject=3))
    st = store.state()
    assert (st.messages, st.first_seq, st.last_seq) == (15, 36, 50)
    store.close()


def test_interior_removals_do_not_come_back(tmp_path: Path) -> None:
    # KV-style: per-subject limit removes messages in the middle; tombstones must survive the
    # deletion of leading segments.
    lim = StreamLimits(max_msgs_per_subject=1)
    store = open_store(tmp_path, limits=lim)
    store.store_msg("keep", b"", b"first")
    for i in range(500):
        store.store_msg(f"k.{i % 3}", b"", b"v%d" % i)
    store.remove_msg(1)
    before = snapshot(store)
    store.close()
    store = open_store(tmp_path, limits=StreamLimits())
    assert snapshot(store) == before
    assert store.state().messages == 3
    store.close()


def test_second_open_of_a_directory_is_refused(tmp_path: Path) -> None:
    store = open_store(tmp_path)
    with pytest.raises(StoreError):
        open_store(tmp_path)
    store.close()
    open_store(tmp_path).close()


def test_delete_removes_directory(tmp_path: Path) -> None:
    store = open_store(tmp_path / "s")
    store.store_msg("a", b"", b"")
    store.consumer_state_store("c").save({"x": 1})
    store.delete()
    assert not (tmp_path / "s").exists()


def test_consumer_state_survives_reopen(tmp_path: Path) -> None:
    store = open_store(tmp_path)
    store.consumer_state_store("dur").save({"ack_floor": {"stream_seq": 3}, "pending": {}})
    store.consumer_state_store("other")  # never saved: not on disk
    store.close()
    store = open_store(tmp_path)
    assert store.consumer_names() == ["dur"]
    assert store.consumer_state_store("dur").load() == {
        "ack_floor": {"stream_seq": 3},
        "pending": {},
    }
    store.close()


def test_damaged_consumer_state_is_not_used(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    store = open_store(tmp_path)
    store.consumer_state_store("dur").save({"delivered": 12345})
    store.close()
    path = tmp_path / "consumers" / "dur" / "state.json"
    raw = bytearray(path.read_bytes())
    raw[-5] ^= 0x04  # a digit of the body changes: still valid JSON, wrong checksum
    path.write_bytes(bytes(raw))
    store = open_store(tmp_path)
    with caplog.at_level(logging.ERROR, "pynatsd.jetstream.store"):
        assert store.consumer_state_store("dur").load() is None
    assert "damaged" in caplog.text
    path.write_bytes(b"")
    assert store.consumer_state_store("dur").load() is None
    store.close()


async def test_consumer_state_save_is_debounced(tmp_path: Path) -> None:
    store = open_store(tmp_path)
    cs = store.consumer_state_store("dur")
    for i in range(100):
        cs.save({"n": i})
    assert cs.load() == {"n": 99}
    path = tmp_path / "consumers" / "dur" / "state.json"
    for _ in range(100):
        if path.exists() and b'"n":99' in path.read_bytes():
            break
        await asyncio.sleep(0.02)
    assert b'"n":99' in path.read_bytes()
    store.close()


async def test_group_commit_shares_fsyncs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls = []
    real = file_mod._fdatasync

    def slow_sync(fd: int) -> None:
        calls.append(fd)
        real(fd)

    monkeypatch.setattr(file_mod, "_fdatasync", slow_sync)
    store = open_store(tmp_path, segment_bytes=1 << 20)
    acked: list[int] = []
    done = asyncio.get_running_loop().create_future()
    n = 500

    def ack(seq: int) -> None:
        acked.append(seq)
        if len(acked) == n:
            done.set_result(None)

    for i in range(n):
        seq, _ = store.store_msg("a", b"", b"%d" % i)
        store.when_durable(seq, lambda seq=seq: ack(seq))
        if i == 0:
            assert acked == []  # never before its fsync, never inside when_durable
        if i % 50 == 0:
            await asyncio.sleep(0)
    await asyncio.wait_for(done, 10)
    assert acked == list(range(1, n + 1))  # in order
    assert 1 <= len(calls) <= 40  # shared, far fewer than one per message
    # Once durable, a later request is answered at once.
    hit: list[int] = []
    store.when_durable(n, lambda: hit.append(1))
    assert hit == [1]
    store.close()


async def test_lazy_sync_acks_at_once_and_syncs_later(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[int] = []
    monkeypatch.setattr(file_mod, "_fdatasync", lambda fd: calls.append(fd))
    store = open_store(tmp_path, sync_always=False, sync_interval=0.05)
    seq, _ = store.store_msg("a", b"", b"")
    hit: list[int] = []
    store.when_durable(seq, lambda: hit.append(seq))
    assert hit == [1] and calls == []
    for _ in range(50):
        if calls:
            break
        await asyncio.sleep(0.02)
    assert calls
    store.close()


async def test_failed_fsync_fails_the_store(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(fd: int) -> None:
        raise OSError(errno.EIO, "I/O error")

    monkeypatch.setattr(file_mod, "_fdatasync", broken)
    store = open_store(tmp_path)
    seq, _ = store.store_msg("a", b"", b"")
    fut = asyncio.get_running_loop().create_future()
    store.when_durable(seq, lambda: fut.set_result("acked"), lambda e: fut.set_result("failed"))
    assert await asyncio.wait_for(fut, 5) == "failed"
    with pytest.raises(InsufficientResourcesError):
        store.store_msg("a", b"", b"")
    monkeypatch.undo()
    store.close()


def fill_disk_mid_write(monkeypatch: pytest.MonkeyPatch, fail_truncate: bool) -> None:
    """Every write from now on gets half its bytes to the disk, then ENOSPC; with
    `fail_truncate`, cutting the file back fails too (EIO)."""
    real_pwrite = file_mod._pwrite

    def disk_full(fd: int, data: bytes, offset: int) -> int:
        real_pwrite(fd, data[: len(data) // 2], offset)
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(file_mod, "_pwrite", disk_full)
    if fail_truncate:

        def no_truncate(fd: int, length: int) -> None:
            raise OSError(errno.EIO, "I/O error")

        monkeypatch.setattr(file_mod.os, "ftruncate", no_truncate)


@pytest.mark.parametrize("fail_truncate", [False, True])
def test_enospc_mid_record_corrupts_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fail_truncate: bool
) -> None:
    store = open_store(tmp_path, segment_bytes=1 << 20)
    for i in range(20):
        store.store_msg("a", b"", b"before-%d" % i)
    before = snapshot(store)
    fill_disk_mid_write(monkeypatch, fail_truncate)
    for _ in range(3):
        with pytest.raises(StoreError) as err:
            store.store_msg("a", HDR, b"y" * 300)
        assert err.value.description == "insufficient resources"
    with pytest.raises(StoreError):
        store.remove_msg(3)
    assert snapshot(store) == before
    monkeypatch.undo()
    # Space is back: writing goes on where the good data ends.
    seq, _ = store.store_msg("a", b"", b"after")
    assert seq == 21
    after = snapshot(store)
    store.close()
    store = open_store(tmp_path)
    assert snapshot(store) == after
    store.close()


def test_torn_tail_is_truncated_and_logged(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    store = open_store(tmp_path)
    for i in range(30):
        store.store_msg("a", b"", b"m%d" % i)
    before = snapshot(store)
    last_seg = Path(store.segment_paths()[-1])
    store.close()
    good_size = last_seg.stat().st_size
    record = file_mod.encode_record(0, 31, 1, 1, b"a", b"", b"torn-record")
    with last_seg.open("ab") as fh:
        fh.write(record[:-4])  # the write of seq 31 never completed
    with caplog.at_level(logging.WARNING, "pynatsd.jetstream.store"):
        store = open_store(tmp_path)
    assert "truncating" in caplog.text
    assert [d.truncated for d in store.damaged] == [True]
    # Cut back to the last whole record (plus a tombstone for the lost sequence).
    assert last_seg.stat().st_size == good_size + file_mod.HDR_SIZE + 8
    assert snapshot(store)[1] == before[1]
    # The torn record's header was intact: its sequence is not handed out again, not even
    # after one more restart.
    store.close()
    store = open_store(tmp_path)
    assert store.damaged == []
    assert store.state().last_seq == 31
    assert store.store_msg("a", b"", b"new")[0] == 32
    store.close()


def test_damage_found_on_read_is_not_served(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    store = open_store(tmp_path)
    for i in range(10):
        store.store_msg("a", b"", b"message-%d" % i)
    loc = store._recs[4][3]
    off = loc & 0xFFFFFFFF
    seg_path = store._segs[(loc >> 32) & 0xFFFFFFFF].path
    fd = os.open(seg_path, os.O_RDWR)
    byte = os.pread(fd, 1, off + 50)
    os.pwrite(fd, bytes([byte[0] ^ 0x10]), off + 50)
    os.close(fd)
    with caplog.at_level(logging.ERROR, "pynatsd.jetstream.store"):
        assert store.load_msg(4) is None
        got = store.load_next_msg(">", 3)
        assert got is not None and got.seq == 3
        got = store.load_next_msg(">", 4)
        assert got is not None and got.seq == 5
    assert "damaged" in caplog.text
    assert store.damaged and store.state().messages == 9
    store.close()
    store = open_store(tmp_path)
    assert [m[0] for m in snapshot(store)[1]] == [1, 2, 3, 5, 6, 7, 8, 9, 10]
    assert store.damaged
    store.close()


def test_damage_inside_a_run_is_skipped_and_reported(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # A consumer reads runs of records out of one read-ahead window: a damaged record in
    # the middle of the window is reported and left out, the records around it are served.
    store = open_store(tmp_path, segment_bytes=1 << 20)
    for i in range(20):
        store.store_msg("a", b"", b"message-%d" % i)
    loc = store._recs[7][3]
    off = loc & 0xFFFFFFFF
    fd = os.open(store._segs[(loc >> 32) & 0xFFFFFFFF].path, os.O_RDWR)
    byte = os.pread(fd, 1, off + 50)
    os.pwrite(fd, bytes([byte[0] ^ 0x01]), off + 50)
    os.close(fd)
    with caplog.at_level(logging.ERROR, "pynatsd.jetstream.store"):
        run = store.load_next_msgs(">", 1, 10)
    assert [m.seq for m in run] == [1, 2, 3, 4, 5, 6, 8, 9, 10, 11]
    assert all(m.data == b"message-%d" % (m.seq - 1) for m in run)
    assert "sequence 7" in caplog.text
    assert [(d.after_seq, d.before_seq) for d in store.damaged] == [(6, 8)]
    assert store.load_msg(7) is None
    assert [m.seq for m in store.load_next_msgs(">", 6, 3)] == [6, 8, 9]
    store.close()


def _try_mount_tmpfs(path: Path) -> bool:
    if os.geteuid() != 0:
        return False
    path.mkdir()
    rc = os.system(f"mount -t tmpfs -o size=256k tmpfs {path} 2>/dev/null")
    return rc == 0


def test_full_tmpfs(tmp_path: Path) -> None:
    mnt = tmp_path / "small"
    if not _try_mount_tmpfs(mnt):
        pytest.skip("cannot mount a small tmpfs here")
    try:
        store = open_store(mnt / "s", segment_bytes=64 * 1024)
        stored = 0
        with pytest.raises(StoreError) as err:
            for _ in range(100_000):
                store.store_msg("a", b"", os.urandom(1000))
                stored += 1
        assert err.value.description == "insufficient resources"
        assert stored > 50
        before = snapshot(store)
        # Still refuses cleanly, and reading works.
        with pytest.raises(StoreError):
            store.store_msg("a", b"", os.urandom(1000))
        store.close()
        store = open_store(mnt / "s")
        assert snapshot(store) == before
        assert store.damaged == []
        # Making room (purge) makes the store writable again.
        store.purge()
        assert store.store_msg("a", b"", b"ok")[0] == stored + 1
        store.close()
    finally:
        os.system(f"umount {mnt}")


def test_kv_workload_compacts_segments(tmp_path: Path) -> None:
    # One key written once at the start, others overwritten many times: without compaction
    # the first segment would pin every later one.
    lim = StreamLimits(max_msgs_per_subject=1)
    store = open_store(tmp_path, limits=lim, segment_bytes=4096)
    store.store_msg("kv.pinned", b"", b"forever")
    for i in range(3000):
        store.store_msg(f"kv.{i % 10}", b"", b"value-%d" % i + b"." * 60)
    files = list((tmp_path / "msgs").iterdir())
    total = sum(p.stat().st_size for p in files)
    assert total < 20 * 4096, (len(files), total)
    assert not any(p.name.endswith(".tmp") for p in files)
    before = snapshot(store)
    assert before[0].messages == 11
    store.close()
    (tmp_path / "msgs" / "0000000001.seg.tmp").write_bytes(b"half a compaction")
    store = open_store(tmp_path, limits=StreamLimits())
    assert snapshot(store) == before
    assert store.damaged == []
    assert not (tmp_path / "msgs" / "0000000001.seg.tmp").exists()
    store.close()


def test_store_msgs_is_one_write_and_survives_reopen(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = open_store(tmp_path)
    writes: list[int] = []
    real_pwrite = file_mod._pwrite

    def counting(fd: int, data: bytes, offset: int) -> int:
        writes.append(len(data))
        return real_pwrite(fd, data, offset)

    monkeypatch.setattr(file_mod, "_pwrite", counting)
    store.store_msg("a", b"", b"zero")
    headers = [HDR if i % 3 == 0 else b"" for i in range(300)]
    store.store_msgs(["a", "b", "a"] * 100, headers, [b"x%d" % i for i in range(300)])
    assert len(writes) == 2
    monkeypatch.undo()
    before = snapshot(store)
    store.close()
    store = open_store(tmp_path)
    assert snapshot(store) == before
    assert store.state().messages == 301
    store.close()


def test_store_msgs_writes_the_records_store_msg_writes(tmp_path: Path) -> None:
    """A batch's records are byte for byte `encode_record`'s: small bodies and large ones
    (left apart for the write's join), headers, a subject repeated (one str object for a
    run of it, as a stream hands them) and subjects of other lengths and scripts."""
    store = open_store(tmp_path)
    run = "orders.new"
    subjects = [run] * 5 + ["ü.x", "a", run, "b.c.d.e"] * 3
    bodies = [b"", b"x", b"y" * 256, b"z" * 257, b"w" * 4000]
    datas = [bodies[i % len(bodies)] + b"%d" % i for i in range(len(subjects))]
    headers = [HDR if i % 4 == 1 else b"" for i in range(len(subjects))]
    first, ts = store.store_msgs(subjects, headers, datas)
    store.close()
    expected = b"".join(
        file_mod.encode_record(
            file_mod.KIND_MSG, first + i, ts, first, subject.encode(), header, data
        )
        for i, (subject, header, data) in enumerate(zip(subjects, headers, datas, strict=True))
    )
    (segment,) = (tmp_path / "msgs").iterdir()
    assert segment.read_bytes() == expected
    store = open_store(tmp_path)
    got = [store.load_msg(first + i) for i in range(len(subjects))]
    assert [(m.subject, m.header, m.data) for m in got if m is not None] == list(
        zip(subjects, headers, datas, strict=True)
    )
    store.close()


@pytest.mark.parametrize("fail_truncate", [False, True])
def test_store_msgs_on_a_full_disk_stores_none(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fail_truncate: bool
) -> None:
    """All or nothing: a batch cut by ENOSPC half way leaves the store as it was, on reopen
    too, and the next write goes where the good data ends."""
    store = open_store(tmp_path, segment_bytes=1 << 20)
    for i in range(20):
        store.store_msg("a", b"", b"before-%d" % i)
    before = snapshot(store)
    fill_disk_mid_write(monkeypatch, fail_truncate)
    with pytest.raises(StoreError) as err:
        store.store_msgs(["a", "b"] * 50, [b""] * 100, [b"y" * 30] * 100)
    assert err.value.description == "insufficient resources"
    assert snapshot(store) == before
    monkeypatch.undo()
    seq, _ = store.store_msgs(["c"], [HDR], [b"after"])
    assert seq == 21
    after = snapshot(store)
    store.close()
    store = open_store(tmp_path)
    assert snapshot(store) == after
    store.close()


def test_skips_survive_reopen(tmp_path: Path) -> None:
    """A skipped run is one floor marker on disk: the last sequence, the first one and the
    interior deletes come back as they were, and the next message gets the next number."""
    store = open_store(tmp_path)
    store.skip_msgs(1, 10)  # empty: the first sequence moves
    store.close()
    store = open_store(tmp_path)
    st = store.state()
    assert (st.messages, st.first_seq, st.last_seq) == (0, 11, 10)
    for i in range(40):
        store.store_msg("a", HDR, b"x" * 30, ts=100 + i)
    store.skip_msgs(51, 100_000)
    size = sum(os.path.getsize(p) for p in store.segment_paths())
    before = snapshot(store)
    deleted = store.deleted_seqs()
    store.close()
    store = open_store(tmp_path)
    assert snapshot(store) == before
    assert store.deleted_seqs() == deleted
    assert sum(os.path.getsize(p) for p in store.segment_paths()) == size
    assert store.store_msg("a", b"", b"after")[0] == 100_051
    store.close()
    store = open_store(tmp_path)
    st = store.state()
    assert (st.messages, st.first_seq, st.last_seq, st.num_deleted) == (41, 11, 100_051, 100_000)
    store.close()


def test_skips_on_an_empty_store_leave_one_segment(tmp_path: Path) -> None:
    store = open_store(tmp_path)
    for _ in range(100):
        store.store_msg("a", b"", b"x" * 50)
    store.purge(seq=101)
    for first in range(101, 1101):
        store.skip_msgs(first, 1)
    assert len(store.segment_paths()) <= 2
    store.close()
    store = open_store(tmp_path)
    st = store.state()
    assert (st.messages, st.first_seq, st.last_seq) == (0, 1101, 1100)
    store.close()
