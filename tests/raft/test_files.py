"""A raft group's small files: peers.idx and tav.idx byte for byte as nats-server writes them,
replaced atomically, and snapshots in nats-server's layout that are refused whole when damaged."""

from __future__ import annotations

import hashlib
import logging
import os
import struct
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pynatsd.raft.files import (
    Snapshot,
    SnapshotError,
    decode_snapshot,
    encode_snapshot,
    read_latest_snapshot,
    read_peer_state,
    read_term_vote,
    write_peer_state,
    write_snapshot,
    write_term_vote,
)
from pynatsd.raft.wire import PeerState, encode_peer_state
from support.readonly import read_only_later

PS = PeerState(("aaaaaaaa", "bbbbbbbb", "cccccccc"), 3, 1)


@pytest.mark.parametrize(
    ("ps", "expected"),
    [
        (PS, struct.pack("<II", 3, 3) + b"aaaaaaaabbbbbbbbcccccccc" + struct.pack("<H", 1)),
        (PeerState((), 1), struct.pack("<IIH", 1, 0, 0)),
    ],
)
def test_peer_state_file_is_nats_servers(tmp_path: Path, ps: PeerState, expected: bytes) -> None:
    write_peer_state(tmp_path, ps)
    assert (tmp_path / "peers.idx").read_bytes() == expected
    assert read_peer_state(tmp_path) == ps
    assert sorted(p.name for p in tmp_path.iterdir()) == ["peers.idx"]


@pytest.mark.parametrize(
    ("term", "vote", "expected"),
    [(7, "aaaaaaaa", struct.pack("<Q", 7) + b"aaaaaaaa"), (9, "", struct.pack("<Q", 9))],
)
def test_term_vote_file_is_nats_servers(
    tmp_path: Path, term: int, vote: str, expected: bytes
) -> None:
    write_term_vote(tmp_path, term, vote)
    assert (tmp_path / "tav.idx").read_bytes() == expected
    assert read_term_vote(tmp_path) == (term, vote)


def test_missing_and_short_files(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    assert read_peer_state(tmp_path) is None
    assert read_term_vote(tmp_path) == (0, "")
    assert read_latest_snapshot(tmp_path) is None
    (tmp_path / "tav.idx").write_bytes(b"")
    assert read_term_vote(tmp_path) == (0, "")  # as readTermVote: too short is term 0
    (tmp_path / "tav.idx").write_bytes(struct.pack("<Q", 4) + b"abc")
    assert read_term_vote(tmp_path) == (4, "")
    for damaged in (b"", b"\x01\x00\x00", struct.pack("<II", 3, 2) + b"aaaaaaaa"):
        (tmp_path / "peers.idx").write_bytes(damaged)
        caplog.clear()
        with caplog.at_level(logging.ERROR, "pynatsd.raft"):
            assert read_peer_state(tmp_path) is None
        assert "peers.idx is damaged" in caplog.text


def test_replacement_is_atomic(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write_peer_state(tmp_path, PS)
    write_term_vote(tmp_path, 3, "aaaaaaaa")
    (tmp_path / "tav.idx.tmp").write_bytes(b"left by a crash")
    assert read_term_vote(tmp_path) == (3, "aaaaaaaa")

    def broken_fsync(fd: int) -> None:
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(os, "fsync", broken_fsync)
    with pytest.raises(OSError, match="Input/output"):
        write_peer_state(tmp_path, PeerState(("dddddddd",), 1))
    with pytest.raises(OSError, match="Input/output"):
        write_term_vote(tmp_path, 4, "bbbbbbbb")
    monkeypatch.undo()
    assert read_peer_state(tmp_path) == PS
    assert read_term_vote(tmp_path) == (3, "aaaaaaaa")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["peers.idx", "tav.idx"]


def test_read_only_directory(tmp_path: Path) -> None:
    with read_only_later(tmp_path) as (path, make_read_only):
        write_peer_state(path, PS)
        write_term_vote(path, 2, "aaaaaaaa")
        write_snapshot(path, 2, 10, b"ps", b"data")
        make_read_only()
        with pytest.raises(OSError):
            write_peer_state(path, PeerState(("dddddddd",), 1))
        with pytest.raises(OSError):
            write_term_vote(path, 3, "")
        with pytest.raises(OSError):
            write_snapshot(path, 3, 20, b"ps", b"data")
        assert read_peer_state(path) == PS
        assert read_term_vote(path) == (2, "aaaaaaaa")
        snap = read_latest_snapshot(path)
        assert snap is not None
        assert (snap.last_term, snap.last_index, snap.data) == (2, 10, b"data")


# -- snapshots -----------------------------------------------------------------------------


def test_snapshot_layout(tmp_path: Path) -> None:
    ps = encode_peer_state(PS)
    path = write_snapshot(tmp_path, 5, 1234, ps, b"state machine")
    assert path == tmp_path / "snapshots" / "snap.5.1234"
    body = struct.pack("<QQI", 5, 1234, len(ps)) + ps + b"state machine"
    assert path.read_bytes() == checksummed(body)
    assert read_latest_snapshot(tmp_path) == Snapshot(5, 1234, ps, b"state machine", path)


@given(
    term=st.integers(0, 2**64 - 1),
    index=st.integers(1, 2**64 - 1),
    ps=st.binary(max_size=60),
    data=st.binary(max_size=200),
)
def test_snapshot_round_trip(term: int, index: int, ps: bytes, data: bytes) -> None:
    assert decode_snapshot(encode_snapshot(term, index, ps, data)) == Snapshot(
        term, index, ps, data
    )


def test_only_the_newest_is_kept(tmp_path: Path) -> None:
    write_snapshot(tmp_path, 1, 10, b"", b"one")
    (tmp_path / "snapshots" / "snap.2.20.tmp").write_bytes(b"left by a crash")
    (tmp_path / "snapshots" / "unrelated").write_bytes(b"x")
    write_snapshot(tmp_path, 2, 20, b"", b"two")
    names = sorted(os.listdir(tmp_path / "snapshots"))
    assert names == ["snap.2.20", "unrelated"]
    # Written last wins, even over a newer name (the caller installs the one it means).
    write_snapshot(tmp_path, 1, 15, b"", b"older")
    assert sorted(os.listdir(tmp_path / "snapshots")) == ["snap.1.15", "unrelated"]
    with pytest.raises(ValueError, match="index 1"):
        write_snapshot(tmp_path, 1, 0, b"", b"")


def put(tmp_path: Path, name: str, buf: bytes) -> None:
    (tmp_path / "snapshots").mkdir(exist_ok=True)
    (tmp_path / "snapshots" / name).write_bytes(buf)


def test_newest_by_term_then_index(tmp_path: Path) -> None:
    put(tmp_path, "snap.2.100", encode_snapshot(2, 100, b"", b"a"))
    put(tmp_path, "snap.3.5", encode_snapshot(3, 5, b"", b"b"))
    put(tmp_path, "snap.3.4", encode_snapshot(3, 4, b"", b"c"))
    put(tmp_path, "snap.03.9", encode_snapshot(3, 9, b"", b"not the name snap.%d.%d prints"))
    put(tmp_path, "snap.4.9.tmp", encode_snapshot(4, 9, b"", b"unfinished"))
    snap = read_latest_snapshot(tmp_path)
    assert snap is not None
    assert snap.data == b"b"


def checksummed(body: bytes) -> bytes:
    return body + hashlib.sha256(body).digest()[:8]


def test_damaged_newest_falls_back(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    # As after a crash between writing the new file and deleting the old one.
    put(tmp_path, "snap.1.10", encode_snapshot(1, 10, b"ps", b"older"))
    good = encode_snapshot(2, 20, b"ps", b"newer")
    damaged = [
        b"",
        good[:27],
        good + b"garbage",
        bytes([good[0] ^ 1]) + good[1:],
        encode_snapshot(2, 21, b"ps", b"the name says 20"),
        checksummed(struct.pack("<QQI", 2, 20, 99) + b"a peer state shorter than its length"),
    ]
    for buf in damaged:
        put(tmp_path, "snap.2.20", buf)
        caplog.clear()
        with caplog.at_level(logging.ERROR, "pynatsd.raft"):
            snap = read_latest_snapshot(tmp_path)
        assert snap is not None
        assert snap.data == b"older"
        assert "snap.2.20" in caplog.text
    (tmp_path / "snapshots" / "snap.1.10").unlink()
    assert read_latest_snapshot(tmp_path) is None


def test_every_flipped_bit_and_cut_is_refused() -> None:
    good = encode_snapshot(3, 77, encode_peer_state(PS), b"payload")
    for offset in range(len(good)):
        for bit in (0, 7):
            buf = bytearray(good)
            buf[offset] ^= 1 << bit
            with pytest.raises(SnapshotError):
                decode_snapshot(bytes(buf))
    for length in range(len(good)):
        with pytest.raises(SnapshotError):
            decode_snapshot(good[:length])


def test_index_zero_is_refused() -> None:
    # nats-server 2.9.12 could write one; nats-server removes it on load.
    with pytest.raises(SnapshotError, match="index 0"):
        decode_snapshot(encode_snapshot(1, 0, b"", b"x"))
