"""The file store's message records read back: one record (`decode`) and a run of them from the
read window (`decode_run`), compiled by mypyc (docs/performance.md).

A consumer reads the stream forward, so after one `pread` of a window (file.py, `_io_read`) the
next records come from memory: `FileStore.load_next_msgs` hands the window to `decode_run`,
which decodes each live record it holds, its checksum checked as nats-server checks each
message's hash, and stops at the first sequence it cannot serve from the window (removed, in
another segment or past the window, damaged). The store does that one the general way and
comes back. The record layout is file.py's (the module docstring there).
"""

from __future__ import annotations

import struct
import zlib
from typing import TYPE_CHECKING, Any, Final

from .base import StoredMsg

if TYPE_CHECKING:
    from ._core import Rec

MAGIC: Final = 0x31534E50  # b"PNS1"
HDR: Final = struct.Struct("<IIBQqQHII")
HDR_SIZE: Final = 43  # HDR.size
KIND_MSG: Final = 0
# StoredMsg built without NamedTuple's Python-level __new__ (one per message a consumer reads).
_new_tuple: Final[Any] = tuple.__new__
_crc32: Final = zlib.crc32
_unpack: Final = HDR.unpack_from


def decode(window: bytes, start: int, length: int, seq: int, subject: str) -> StoredMsg | None:
    """The message record of `length` bytes at `start` in `window`, if it is intact: the
    right magic, kind, sequence and sizes, and its checksum."""
    head = _unpack(window, start)
    magic: int = head[0]
    crc: int = head[1]
    kind: int = head[2]
    rseq: int = head[3]
    ts: int = head[4]
    slen: int = head[6]
    hlen: int = head[7]
    dlen: int = head[8]
    end = start + length
    if (
        magic != MAGIC
        or kind != KIND_MSG
        or rseq != seq
        or HDR_SIZE + slen + hlen + dlen != length
        or _crc32(window[start + 8 : end]) != crc
    ):
        return None
    h = start + HDR_SIZE + slen
    d = h + hlen
    msg: StoredMsg = _new_tuple(StoredMsg, (seq, subject, window[h:d], window[d:end], ts))
    return msg


def decode_run(
    window: bytes,
    win_off: int,
    win_seg: int,
    recs: dict[int, Rec],
    seq: int,
    last: int,
    limit: int,
    out: list[StoredMsg],
) -> int:
    """Decode the messages from `seq` on that lie whole in `window` (the bytes of segment
    `win_seg` from offset `win_off`), appending them to `out` until it holds `limit` or `last`
    is passed. Returns the first sequence not read (`last` + 1 if none is left)."""
    win_end = win_off + len(window)
    while seq <= last and len(out) < limit:
        rec = recs.get(seq)
        if rec is None:
            return seq
        loc: int = rec[3]
        off = loc & 0xFFFFFFFF
        length = loc >> 64
        if off < win_off or off + length > win_end or (loc >> 32) & 0xFFFFFFFF != win_seg:
            return seq
        msg = decode(window, off - win_off, length, seq, rec[0])
        if msg is None:
            return seq
        out.append(msg)
        seq += 1
    return seq
