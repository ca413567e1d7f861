"""The snapshot format's parts alone: S2 framing (CRC-32C, chunks, blocks with Snappy copies
and S2 repeats) and the NATSARC1 archive, fed at random split points."""

from __future__ import annotations

import random

import pytest

from pynatsd.jetstream.archive import END, MAGIC, ArchiveError, ArchiveReader, encode_entry
from pynatsd.s2 import MAGIC_CHUNK, S2Error, S2Reader, crc32c, decode_block, encode_chunks


def test_crc32c_check_value() -> None:
    assert crc32c(b"123456789") == 0xE3069283


@pytest.mark.parametrize(
    ("block", "expected"),
    [
        (bytes([5, 4 << 2]) + b"hello", b"hello"),
        # "ab" then a 2-byte-offset copy of length 4 (overlapping): "ababab".
        (bytes([6, 1 << 2]) + b"ab" + bytes([(4 - 1) << 2 | 2, 2, 0]), b"ababab"),
        # "abc", a 1-byte-offset copy (offset 3, length 4), then an S2 repeat of length 4.
        (
            bytes([11, 2 << 2]) + b"abc" + bytes([0b000_000_01, 3]) + bytes([0b000_000_01, 0]),
            b"abcabcabcab",
        ),
    ],
)
def test_blocks(block: bytes, expected: bytes) -> None:
    assert decode_block(block) == expected


def test_a_damaged_block_is_refused() -> None:
    with pytest.raises(S2Error):
        decode_block(bytes([9, 1 << 2]) + b"ab" + bytes([(4 - 1) << 2 | 2, 9, 0]))


def test_stream_round_trip_at_any_split() -> None:
    rng = random.Random(7)
    data = bytes(rng.randrange(256) for _ in range(5000))
    framed = encode_chunks(data[:3000], MAGIC_CHUNK) + encode_chunks(data[3000:])
    for _ in range(20):
        reader = S2Reader()
        out = bytearray()
        pos = 0
        while pos < len(framed):
            step = rng.randint(1, 700)
            for piece in reader.feed(framed[pos : pos + step]):
                out += piece
            pos += step
        assert bytes(out) == data
        assert reader.pending == 0


def test_a_wrong_checksum_is_refused() -> None:
    framed = bytearray(encode_chunks(b"payload", MAGIC_CHUNK))
    framed[-1] ^= 1
    with pytest.raises(S2Error, match="crc"):
        list(S2Reader().feed(bytes(framed)))


def test_archive_entries_at_any_split() -> None:
    entries = [
        ("state.json", 17, 0, b"", b'{"messages":1}'),
        ("a.b", -5, 1, b"NATS/1.0\r\nK: v\r\n\r\n", b"x" * 300),
        ("a.c", 1 << 62, 3, b"", b""),
    ]
    data = MAGIC + b"".join(encode_entry(*e) for e in entries) + END
    rng = random.Random(3)
    for _ in range(20):
        reader = ArchiveReader()
        got = []
        pos = 0
        while pos < len(data):
            step = rng.randint(1, 40)
            got += reader.feed(data[pos : pos + step])
            pos += step
        assert [(e.name, e.timestamp, e.sequence, e.header, e.payload) for e in got[:-1]] == entries
        assert got[-1].is_end


def test_not_an_archive() -> None:
    with pytest.raises(ArchiveError):
        ArchiveReader().feed(b"ustar\0\0\0\0")
