"""A group directory's small files, in nats-server's layout (`server/raft.go`)::

    <group dir>/peers.idx                   encodePeerState bytes, nothing around them
    <group dir>/tav.idx                     term u64, then the voted-for peer's 8 bytes or nothing
    <group dir>/snapshots/snap.<term>.<index>

Every file is replaced as nats-server's `writeFileWithSync` replaces it: written to
`<name>.tmp`, renamed over the old one, the directory fsynced. Here the temporary file is also
fsynced before the rename, so a crash leaves the old file or the new one, whole.

A snapshot (`encodeSnapshot`, all little endian)::

    last_term u64 | last_index u64 | peerstate_len u32 | peerstate | data | checksum[8]

nats-server's checksum is HighwayHash-64 keyed with the SHA-256 of the group name. There is no
HighwayHash library for Python here, so **ours is the first 8 bytes of SHA-256 over everything
before it**: the layout and the file names are nats-server's, but a snapshot written by one
server is refused as damaged by the other (a node without a usable snapshot catches up from
its leader). `write_snapshot` keeps one file; `read_latest_snapshot` takes the newest by
(term, index), as `setupLastSnapshot` does, and falls back to an older one when it is damaged.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import re
import struct
from dataclasses import dataclass
from pathlib import Path

from .wire import (
    PeerState,
    WireError,
    decode_peer_state,
    decode_term_vote,
    encode_peer_state,
    encode_term_vote,
)

__all__ = [
    "PEER_STATE_FILE",
    "SNAPSHOTS_DIR",
    "TERM_VOTE_FILE",
    "Snapshot",
    "SnapshotError",
    "decode_snapshot",
    "encode_snapshot",
    "fsync_directory",
    "read_latest_snapshot",
    "read_peer_state",
    "read_term_vote",
    "snapshot_file_name",
    "write_atomically",
    "write_peer_state",
    "write_snapshot",
    "write_term_vote",
]

log = logging.getLogger("pynatsd.raft")

PEER_STATE_FILE = "peers.idx"  # peerStateFile
TERM_VOTE_FILE = "tav.idx"  # termVoteFile
SNAPSHOTS_DIR = "snapshots"  # snapshotsDir
FILE_MODE = 0o640  # defaultFilePerms

_SNAP_HEAD = struct.Struct("<QQI")  # last term, last index, peer state length
_CHECKSUM_LEN = 8
MIN_SNAPSHOT_LEN = _SNAP_HEAD.size + _CHECKSUM_LEN  # minSnapshotLen = 28
_SNAP_NAME = re.compile(r"snap\.(\d+)\.(\d+)")  # snapFileT = "snap.%d.%d"


class SnapshotError(ValueError):
    """A snapshot file that cannot be used (errSnapshotCorrupt and its like)."""


def fsync_directory(directory: Path) -> None:
    """Make the directory's entries (a created, renamed or deleted file) durable."""
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_atomically(path: Path, data: bytes) -> None:
    """Replace `path` with `data` durably: `<path>.tmp`, fsync, rename, fsync the directory.
    On an error the old file is untouched and the temporary one removed."""
    tmp = path.with_name(path.name + ".tmp")
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, FILE_MODE)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise
    fsync_directory(path.parent)


def read_peer_state(directory: Path) -> PeerState | None:
    """The peers.idx file; None when there is none or it cannot be decoded (logged)."""
    path = Path(directory) / PEER_STATE_FILE
    try:
        return decode_peer_state(path.read_bytes())
    except FileNotFoundError:
        return None
    except WireError as exc:
        log.error("raft: %s is damaged (%s), ignored", path, exc)
        return None


def write_peer_state(directory: Path, ps: PeerState) -> None:
    write_atomically(Path(directory) / PEER_STATE_FILE, encode_peer_state(ps))


def read_term_vote(directory: Path) -> tuple[int, str]:
    """The tav.idx file, read as nats-server's readTermVote reads it: (0, "") when absent."""
    try:
        buf = (Path(directory) / TERM_VOTE_FILE).read_bytes()
    except FileNotFoundError:
        return 0, ""
    return decode_term_vote(buf)


def write_term_vote(directory: Path, term: int, vote: str) -> None:
    write_atomically(Path(directory) / TERM_VOTE_FILE, encode_term_vote(term, vote))


@dataclass(frozen=True, slots=True)
class Snapshot:
    last_term: int  # lastTerm: the term of the entry at last_index
    last_index: int  # lastIndex: the last log index the snapshot covers
    peer_state: bytes  # peerstate: encode_peer_state bytes of the membership at last_index
    data: bytes  # the state machine's snapshot
    path: Path | None = None  # the file it was read from


def snapshot_file_name(term: int, index: int) -> str:
    return f"snap.{term}.{index}"


def _parse_snapshot_name(name: str) -> tuple[int, int] | None:
    # As termAndIndexFromSnapFile: the name must be exactly what snap.%d.%d prints.
    match = _SNAP_NAME.fullmatch(name)
    if match is None:
        return None
    term, index = int(match[1]), int(match[2])
    return (term, index) if name == snapshot_file_name(term, index) else None


def _checksum(buf: bytes | memoryview) -> bytes:
    return hashlib.sha256(buf).digest()[:_CHECKSUM_LEN]


def encode_snapshot(term: int, index: int, peer_state: bytes, data: bytes) -> bytes:
    body = b"".join((_SNAP_HEAD.pack(term, index, len(peer_state)), peer_state, data))
    return body + _checksum(body)


def decode_snapshot(buf: bytes) -> Snapshot:
    """Raises SnapshotError when the file is short, its checksum is wrong, the peer state runs
    past the data, or its index is 0 (nats-server's 2.9.12 bug, refused as it refuses it)."""
    if len(buf) < MIN_SNAPSHOT_LEN:
        raise SnapshotError("too short")
    end = len(buf) - _CHECKSUM_LEN
    if _checksum(memoryview(buf)[:end]) != buf[end:]:
        raise SnapshotError("checksums did not match")
    term, index, ps_len = _SNAP_HEAD.unpack_from(buf)
    if _SNAP_HEAD.size + ps_len > end:
        raise SnapshotError("peer state length out of range")
    if index == 0:
        raise SnapshotError("last index 0 is invalid")
    ps_end = _SNAP_HEAD.size + ps_len
    return Snapshot(term, index, bytes(buf[_SNAP_HEAD.size : ps_end]), bytes(buf[ps_end:end]))


def write_snapshot(
    directory: Path, term: int, index: int, peer_state_bytes: bytes, data: bytes
) -> Path:
    """Write `snapshots/snap.<term>.<index>` durably, then delete every other snapshot file
    (older ones, and leftovers of interrupted writes): the new one is the only one kept."""
    if index <= 0:
        raise ValueError("a snapshot must cover at least index 1")
    snap_dir = Path(directory) / SNAPSHOTS_DIR
    if not snap_dir.is_dir():
        snap_dir.mkdir(parents=True)
        fsync_directory(snap_dir.parent)
    path = snap_dir / snapshot_file_name(term, index)
    write_atomically(path, encode_snapshot(term, index, peer_state_bytes, data))
    for name in os.listdir(snap_dir):
        if name != path.name and name.startswith("snap."):
            with contextlib.suppress(FileNotFoundError):
                (snap_dir / name).unlink()
    return path


def read_latest_snapshot(directory: Path) -> Snapshot | None:
    """The newest intact snapshot by (term, index); a damaged one is logged and skipped."""
    snap_dir = Path(directory) / SNAPSHOTS_DIR
    try:
        names = os.listdir(snap_dir)
    except FileNotFoundError:
        return None
    found = [(key, name) for name in names if (key := _parse_snapshot_name(name)) is not None]
    for (term, index), name in sorted(found, reverse=True):
        path = snap_dir / name
        try:
            snap = decode_snapshot(path.read_bytes())
        except (OSError, SnapshotError) as exc:
            log.error("raft: snapshot %s is unusable (%s), skipped", path, exc)
            continue
        if (snap.last_term, snap.last_index) != (term, index):
            log.error(
                "raft: snapshot %s holds term %d index %d, not its name's, skipped",
                path,
                snap.last_term,
                snap.last_index,
            )
            continue
        return Snapshot(snap.last_term, snap.last_index, snap.peer_state, snap.data, path)
    return None
