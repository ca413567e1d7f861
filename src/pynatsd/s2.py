"""The S2 stream format (github.com/klauspost/compress/s2), as nats-server wraps its stream
snapshots in it (`s2.NewWriter`, `s2.NewReader` in `server/stream_backup.go`) and compresses
message trace events (in Snappy's framing, which S2's is a superset of).

A stream is chunks: a 1-byte type and a 3-byte little-endian length, then the body. The
stream identifier (`S2sTwO`, or Snappy's `sNaPpY`, which S2 readers also accept) comes first;
data chunks carry the masked CRC-32C of their uncompressed bytes and either the bytes as they
are or one compressed block (Snappy's block format with S2's repeat-offset copies).

`S2Writer` writes uncompressed data chunks only: pure-Python compression would cost more
than the bytes it saves, and any S2 (or Snappy) reader reads them. `S2Reader` decodes both
kinds, so a snapshot nats-server made can be read.
"""

from __future__ import annotations

from collections.abc import Iterator

import google_crc32c

MAGIC_CHUNK = b"\xff\x06\x00\x00S2sTwO"
SNAPPY_MAGIC_CHUNK = b"\xff\x06\x00\x00sNaPpY"
_MAGIC_BODIES = (b"S2sTwO", b"sNaPpY")
_COMPRESSED = 0x00
_UNCOMPRESSED = 0x01
_IDENTIFIER = 0xFF
# The largest block S2 writes (maxBlockSize): an uncompressed chunk holds at most this much.
MAX_BLOCK = 4 << 20
_MAX_CHUNK = (1 << 24) - 1


class S2Error(ValueError):
    """A stream that is not S2, or is damaged."""


def crc32c(data: bytes) -> int:
    """CRC-32C (Castagnoli), in C: at the pure-Python rate of about 8 MB/s it bounded a
    snapshot's speed."""
    return int(google_crc32c.value(data))


def masked_crc(data: bytes) -> int:
    """S2's and Snappy's checksum of a chunk: CRC-32C, rotated and offset."""
    c = crc32c(data)
    return (((c >> 15) | (c << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def encode_chunks(data: bytes, identifier: bytes = b"", max_block: int = MAX_BLOCK) -> bytes:
    """`data` as uncompressed data chunks of at most `max_block` bytes, after `identifier`
    (the stream identifier chunk, at the start of a stream)."""
    out = bytearray(identifier)
    for start in range(0, len(data), max_block):
        block = data[start : start + max_block]
        size = len(block) + 4
        out += bytes((_UNCOMPRESSED, size & 0xFF, (size >> 8) & 0xFF, size >> 16))
        out += masked_crc(block).to_bytes(4, "little")
        out += block
    return bytes(out)


class S2Reader:
    """Decodes an S2 (or Snappy framed) stream fed in pieces of any size."""

    def __init__(self) -> None:
        self._buf = bytearray()
        self._seen_magic = False

    def feed(self, data: bytes) -> Iterator[bytes]:
        """The uncompressed bytes of every chunk completed by `data`."""
        buf = self._buf
        buf += data
        pos = 0
        while len(buf) - pos >= 4:
            kind = buf[pos]
            size = buf[pos + 1] | buf[pos + 2] << 8 | buf[pos + 3] << 16
            if len(buf) - pos - 4 < size:
                break
            body = bytes(buf[pos + 4 : pos + 4 + size])
            pos += 4 + size
            out = self._chunk(kind, body)
            if out:
                yield out
        del buf[:pos]

    def _chunk(self, kind: int, body: bytes) -> bytes:
        if kind == _IDENTIFIER:
            if body not in _MAGIC_BODIES:
                raise S2Error("s2: corrupt input")
            self._seen_magic = True
            return b""
        if not self._seen_magic:
            raise S2Error("s2: corrupt input")
        if kind in (_COMPRESSED, _UNCOMPRESSED):
            if len(body) < 4:
                raise S2Error("s2: corrupt input")
            want = int.from_bytes(body[:4], "little")
            data = body[4:] if kind == _UNCOMPRESSED else decode_block(body[4:])
            if masked_crc(data) != want:
                raise S2Error("s2: corrupt input, crc mismatch")
            return data
        if kind >= 0x80:  # skippable: padding, the index, anything reserved for later
            return b""
        raise S2Error("s2: unsupported input")

    @property
    def pending(self) -> int:
        """Bytes of an incomplete chunk still waiting for the rest."""
        return len(self._buf)


def _uvarint(src: bytes, pos: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        if pos >= len(src) or shift > 63:
            raise S2Error("s2: corrupt input")
        b = src[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if b < 0x80:
            return value, pos
        shift += 7


def decode_block(src: bytes) -> bytes:
    """One S2 block: Snappy's literals and copies, plus S2's repeats (a 1-byte-offset copy
    with offset 0 copies again from the last offset, with longer lengths)."""
    size, s = _uvarint(src, 0)
    if size > _MAX_CHUNK:
        raise S2Error("s2: corrupt input")
    dst = bytearray()
    offset = 0
    end = len(src)
    try:
        while s < end:
            tag = src[s]
            kind = tag & 3
            if kind == 0:
                x = tag >> 2
                if x < 60:
                    s += 1
                else:
                    n = x - 59
                    x = int.from_bytes(src[s + 1 : s + 1 + n], "little")
                    s += 1 + n
                length = x + 1
                if s + length > end:
                    raise S2Error("s2: corrupt input")
                dst += src[s : s + length]
                s += length
                continue
            if kind == 1:
                length = (tag >> 2) & 7
                toffset = ((tag & 0xE0) << 3) | src[s + 1]
                s += 2
                if toffset == 0:  # repeat the last offset
                    if length == 5:
                        length = src[s] + 4
                        s += 1
                    elif length == 6:
                        length = int.from_bytes(src[s : s + 2], "little") + (1 << 8)
                        s += 2
                    elif length == 7:
                        length = int.from_bytes(src[s : s + 3], "little") + (1 << 16)
                        s += 3
                else:
                    offset = toffset
                length += 4
            elif kind == 2:
                offset = int.from_bytes(src[s + 1 : s + 3], "little")
                length = 1 + (tag >> 2)
                s += 3
            else:
                offset = int.from_bytes(src[s + 1 : s + 5], "little")
                length = 1 + (tag >> 2)
                s += 5
            d = len(dst)
            if offset <= 0 or d < offset or d + length > size:
                raise S2Error("s2: corrupt input")
            if offset >= length:
                dst += dst[d - offset : d - offset + length]
            else:
                for i in range(length):
                    dst.append(dst[d - offset + i])
    except IndexError:
        raise S2Error("s2: corrupt input") from None
    if len(dst) != size:
        raise S2Error("s2: corrupt input")
    return bytes(dst)
