"""`records.decode_run`, the file store's compiled run read: it serves exactly the intact records
of the window, in sequence order, and leaves the first one it cannot serve (removed, outside
the window or another segment's, damaged) to the store; the compiled module against its
pure-Python copy."""

from __future__ import annotations

from types import ModuleType
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pynatsd import native
from pynatsd.jetstream.store import records
from pynatsd.jetstream.store.base import StoredMsg
from pynatsd.jetstream.store.file import encode_record

SEG = 7


@st.composite
def windows(draw: st.DrawFn) -> tuple[bytes, int, dict[int, Any], list[StoredMsg]]:
    """A window of records of sequences 1..n as the store indexes them (some removed, some
    in another segment, one maybe flipped), and the messages written."""
    count = draw(st.integers(1, 12))
    win_off = draw(st.sampled_from([0, 100]))
    buf = b"\0" * win_off
    recs: dict[int, Any] = {}
    written = []
    for seq in range(1, count + 1):
        msg = StoredMsg(
            seq,
            draw(st.sampled_from(["s.a", "s.b.c"])),
            draw(st.sampled_from([b"", b"NATS/1.0\r\nK: v\r\n\r\n"])),
            draw(st.binary(max_size=20)),
            draw(st.integers(0, 2**63 - 1)),
        )
        written.append(msg)
        rec = encode_record(0, seq, msg.ts, 1, msg.subject.encode(), msg.header, msg.data)
        seg = SEG if draw(st.integers(0, 9)) else SEG + 1
        if draw(st.integers(0, 7)):  # else removed: not in the index
            recs[seq] = (msg.subject, msg.ts, 0, (len(rec) << 64) | (seg << 32) | len(buf))
        buf += rec
    cut = draw(st.integers(0, 30))  # the window may end inside the last records
    buf = buf[: len(buf) - cut] if cut else buf
    flip = draw(st.integers(-1, len(buf) - 1))
    if flip >= win_off:
        buf = buf[:flip] + bytes([buf[flip] ^ 0x40]) + buf[flip + 1 :]
    return buf[win_off:], win_off, recs, written


def _read(module: ModuleType, window: bytes, win_off: int, recs: dict[int, Any], limit: int) -> Any:
    out: list[StoredMsg] = []
    stop = module.decode_run(window, win_off, SEG, recs, 1, len(recs) + 12, limit, out)
    return stop, out


@given(windows(), st.integers(1, 15))
def test_a_run_serves_the_intact_records_of_the_window_in_order(
    case: tuple[bytes, int, dict[int, Any], list[StoredMsg]], limit: int
) -> None:
    window, win_off, recs, written = case
    stop, out = _read(records, window, win_off, recs, limit)
    # Every message served is the one written, in order from 1, without a gap.
    assert out == written[: len(out)]
    assert len(out) <= limit
    assert stop == len(out) + 1
    if len(out) < limit and stop in recs:
        # The first one not served cannot be served from this window.
        loc = recs[stop][3]
        off, length = (loc & 0xFFFFFFFF) - win_off, loc >> 64
        elsewhere = (loc >> 32) & 0xFFFFFFFF != SEG or off + length > len(window)
        assert elsewhere or records.decode(window, off, length, stop, recs[stop][0]) is None


@pytest.mark.skipif(not native.select().compiled, reason="the pure-Python path is active")
@given(windows(), st.integers(1, 15))
def test_compiled_run_read_is_the_pure_one(
    case: tuple[bytes, int, dict[int, Any], list[StoredMsg]], limit: int
) -> None:
    assert native.is_compiled(records)
    pure = native.load_pure("pynatsd.jetstream.store.records")
    window, win_off, recs, _ = case
    assert _read(records, window, win_off, recs, limit) == _read(pure, window, win_off, recs, limit)
