"""Fault tests of the file store: SIGKILL while publishing, and damaged segment files."""

from __future__ import annotations

import hashlib
import logging
import os
import random
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

import pynatsd
from pynatsd.jetstream.store import FileStore, StreamLimits, open_file_store

CHILD = Path(__file__).with_name("_store_crash_child.py")


def read_lines(proc: subprocess.Popen[bytes], out: list[str]) -> None:
    assert proc.stdout is not None
    for raw in proc.stdout:
        # A line cut by the kill has no newline: that ack never reached the "client".
        if raw.endswith(b"\n"):
            out.append(raw.decode().strip())


def check_integrity(store: FileStore) -> list[tuple[int, str]]:
    """Every message served is whole; returns (seq, digest) in order."""
    served = []
    prev = 0
    m = store.load_next_msg(">", 0)
    while m is not None:
        assert m.seq > prev
        prev = m.seq
        body, tail = m.data[:-32], m.data[-32:]
        assert hashlib.sha256(body).digest() == tail, f"seq {m.seq} is not whole"
        served.append((m.seq, hashlib.sha256(m.header + m.data).hexdigest()[:16]))
        m = store.load_next_msg(">", m.seq + 1)
    return served


@pytest.mark.parametrize(("window", "mode"), [(1, "log"), (64, "log"), (64, "kv"), (200, "batch")])
def test_sigkill_loses_no_acknowledged_message(tmp_path: Path, window: int, mode: str) -> None:
    rnd = random.Random(window)
    acked: dict[int, str] = {}
    deleted: set[int] = set()
    removing: set[int] = set()
    # The child imports the same pynatsd as this test, installed or not.
    env = {**os.environ, "PYTHONPATH": str(Path(pynatsd.__file__).parents[1])}
    for round_no in range(6):
        lines: list[str] = []
        proc = subprocess.Popen(
            [sys.executable, str(CHILD), str(tmp_path), str(round_no), str(window), mode],
            stdout=subprocess.PIPE,
            env=env,
        )
        reader = threading.Thread(target=read_lines, args=(proc, lines))
        reader.start()
        deadline = time.monotonic() + 20
        while not lines and time.monotonic() < deadline:
            time.sleep(0.005)
        assert lines and lines[0].startswith("ready")
        # The kill lands at a random point after the first ack (a loaded box can take longer
        # than the random delay to store and sync one message).
        while len(lines) < 2 and time.monotonic() < deadline:
            time.sleep(0.005)
        time.sleep(rnd.uniform(0.02, 0.25))
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        reader.join()
        for line in lines[1:]:
            kind, seq, *rest = line.split()
            if kind == "ack":
                acked[int(seq)] = rest[0]
            elif kind == "rm":
                removing.add(int(seq))
            else:
                deleted.add(int(seq))
        assert len(lines) > 1, "the child acked nothing before the kill"

        limits = StreamLimits(max_msgs_per_subject=1) if mode == "kv" else StreamLimits()
        store = open_file_store(str(tmp_path), limits)
        try:
            # Only a torn tail may be found after a crash, never damage in the middle.
            assert all(d.truncated for d in store.damaged), store.damaged
            served = dict(check_integrity(store))
            if mode == "kv":
                # Key k.(seq % 5) holds its newest acked value, or a newer one.
                assert len(served) == 5
                for key in range(5):
                    (mine,) = [s for s in served if s % 5 == key]
                    newest = max((s for s in acked if s % 5 == key), default=0)
                    assert mine >= newest, f"key {key}: acked {newest}, found {mine}"
                    if mine == newest:
                        assert served[mine] == acked[mine]
                continue
            for seq, digest in acked.items():
                if seq in deleted:
                    assert seq not in served, f"durably deleted seq {seq} came back"
                elif seq in removing:
                    # Removed, but the removal was not yet durable: either outcome is fine.
                    assert served.get(seq, digest) == digest
                else:
                    assert served.get(seq) == digest, f"acked seq {seq} lost or changed"
        finally:
            store.close()


def record_layout(store: FileStore) -> dict[int, tuple[str, int, int]]:
    """seq -> (segment path, offset, length), from the store's own index."""
    out = {}
    for seq, rec in store._recs.items():
        loc = rec[3]
        seg = store._segs[(loc >> 32) & 0xFFFFFFFF]
        out[seq] = (seg.path, loc & 0xFFFFFFFF, loc >> 64)
    return out


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_corruption_is_detected_and_contained(
    tmp_path: Path, seed: int, caplog: pytest.LogCaptureFixture
) -> None:
    rnd = random.Random(seed)
    store = open_file_store(str(tmp_path), StreamLimits(), segment_bytes=4096)
    expected = {}
    for i in range(400):
        hdr = b"NATS/1.0\r\nI: %d\r\n\r\n" % i if i % 4 == 0 else b""
        data = rnd.randbytes(rnd.randrange(0, 120))
        seq, _ = store.store_msg(f"c.{i % 9}", hdr, data)
        expected[seq] = (f"c.{i % 9}", hdr, data)
    layout = record_layout(store)
    store.close()

    lost: set[int] = set()
    for _ in range(15):
        paths = sorted({p for p, _, _ in layout.values() if os.path.exists(p)})
        path = rnd.choice(paths)
        size = os.path.getsize(path)
        if size == 0:
            continue
        raw = bytearray(Path(path).read_bytes())
        if rnd.random() < 0.75:
            off = rnd.randrange(size)
            raw[off] ^= 1 << rnd.randrange(8)
            hit = {s for s, (p, o, n) in layout.items() if p == path and o <= off < o + n}
        else:
            off = rnd.randrange(size)
            del raw[off:]
            hit = {s for s, (p, o, n) in layout.items() if p == path and o + n > off}
        Path(path).write_bytes(bytes(raw))
        new = hit - lost
        lost |= hit

        caplog.clear()
        with caplog.at_level(logging.WARNING, "pynatsd.jetstream.store"):
            store = open_file_store(str(tmp_path), StreamLimits(), segment_bytes=4096)
        try:
            if new:
                # Damage is reported: logged, and listed with the sequences around it.
                assert store.damaged, f"damage to {sorted(new)} went unreported"
                assert "damaged" in caplog.text or "truncating" in caplog.text
                for seq in new:
                    assert any(
                        d.after_seq < seq and (d.before_seq is None or seq < d.before_seq)
                        for d in store.damaged
                    ), f"seq {seq} not covered by a report"
            for seq, (subject, hdr, data) in expected.items():
                m = store.load_msg(seq)
                if seq in lost:
                    assert m is None, f"damaged seq {seq} was served"
                else:
                    assert m is not None, f"undamaged seq {seq} not served"
                    assert (m.subject, m.header, m.data) == (subject, hdr, data)
            walked = []
            m = store.load_next_msg(">", 0)
            while m is not None:
                walked.append(m.seq)
                m = store.load_next_msg(">", m.seq + 1)
            assert walked == sorted(set(expected) - lost)
        finally:
            store.close()
