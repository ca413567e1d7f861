"""nats-server's stream backup archive (`server/archive/archive.go`, format `NATSARC1`), the
content of a V2 stream snapshot before its S2 compression.

The archive is the 8 magic bytes, then entries: the name's length (uvarint), a timestamp
(zig-zag varint), a sequence (uvarint, 0 when unset), the header size and the payload size
(uvarints), the name, and header plus payload. A snapshot writes `state.json` (the stream's
state), one `consumers/<name>` per consumer (config and state), one entry per message (the
subject as name, its time and sequence, its header and body), and an entry of all zeros at the
end, so that a truncated backup is told from a complete one.
"""

from __future__ import annotations

from dataclasses import dataclass

MAGIC = b"NATSARC1"
_MAX_NAME = 1 << 20


class ArchiveError(ValueError):
    """Not an archive, or a damaged one."""


@dataclass(slots=True)
class Entry:
    name: str
    timestamp: int
    sequence: int
    header: bytes
    payload: bytes

    @property
    def is_end(self) -> bool:
        """The end-of-backup sentinel: every field zero."""
        return (
            not self.name
            and self.timestamp == 0
            and self.sequence == 0
            and not self.header
            and not self.payload
        )


def _uvarint(value: int) -> bytes:
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _varint(value: int) -> bytes:
    """Go's binary.PutVarint: zig-zag, then as a uvarint."""
    return _uvarint((value << 1) ^ (value >> 63) if value < 0 else value << 1)


def encode_entry(name: str, timestamp: int, sequence: int, header: bytes, payload: bytes) -> bytes:
    raw = name.encode()
    return b"".join(
        (
            _uvarint(len(raw)),
            _varint(timestamp),
            _uvarint(sequence),
            _uvarint(len(header)),
            _uvarint(len(payload)),
            raw,
            header,
            payload,
        )
    )


END = encode_entry("", 0, 0, b"", b"")


class ArchiveReader:
    """Reads entries from archive bytes fed in pieces of any size (O(bytes) overall: a
    consumed prefix is dropped once per feed)."""

    def __init__(self) -> None:
        self._buf = bytearray()
        self._magic = False

    def feed(self, data: bytes) -> list[Entry]:
        buf = self._buf
        buf += data
        pos = 0
        if not self._magic:
            if len(buf) < len(MAGIC):
                return []
            if bytes(buf[: len(MAGIC)]) != MAGIC:
                raise ArchiveError("archive: invalid archive stream")
            self._magic = True
            pos = len(MAGIC)
        out: list[Entry] = []
        while True:
            parsed = self._parse(buf, pos)
            if parsed is None:
                break
            entry, pos = parsed
            out.append(entry)
        del buf[:pos]
        return out

    @property
    def started(self) -> bool:
        return self._magic

    @staticmethod
    def _parse(buf: bytearray, pos: int) -> tuple[Entry, int] | None:
        fields: list[int] = []
        p = pos
        for _ in range(5):
            value = shift = 0
            while True:
                if p >= len(buf):
                    return None
                b = buf[p]
                p += 1
                value |= (b & 0x7F) << shift
                if b < 0x80:
                    break
                shift += 7
                if shift > 63:
                    raise ArchiveError("archive: invalid archive stream")
            fields.append(value)
        name_len, zigzag, seq, hsize, psize = fields
        if name_len > _MAX_NAME:
            raise ArchiveError("archive: invalid archive stream")
        timestamp = (zigzag >> 1) ^ -(zigzag & 1)
        end = p + name_len + hsize + psize
        if end > len(buf):
            return None
        name = bytes(buf[p : p + name_len]).decode("utf-8", "surrogateescape")
        p += name_len
        header = bytes(buf[p : p + hsize])
        payload = bytes(buf[p + hsize : end])
        return Entry(name, timestamp, seq, header, payload), end
