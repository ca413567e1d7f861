"""nats-server's AVL sequence set encoding (`server/avl/seqset.go`, `SequenceSet.Encode`/`Decode`).

A `SequenceSet` is an AVL tree of nodes, each covering 2048 sequences from a `base` (a multiple
of 2048 when nats-server made it) with 32 64-bit words: bit *j* of word *i* is sequence
`base + 64*i + j`. The stream snapshot carries it as one kind of delete block. Encoding,
version 2, all little-endian::

    22 | 2 | nodes u32 | size u32 | per node, in pre-order: base u64, 32 u64 words, height u16

A reader rebuilds the tree by plain binary-search-tree insertion of the nodes in that order
(the heights are taken as written, so they must be the real AVL heights). Version 1 had 64
words per node and is read by inserting every set bit afresh; its size must then match.

Here a set keeps its nodes as they came (so a decoded set re-encodes to the same bytes);
`from_sequences` builds a balanced tree of its own (not the shape nats-server's insertions
would give, which depends on their history, but as valid to a Go reader).
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

MAGIC = 22  # seqSetMagic (avl magic)
VERSION = 2
BITS_PER_BUCKET = 64  # bitsPerBucket
NUM_BUCKETS = 32  # numBuckets (version 2)
NUM_ENTRIES = NUM_BUCKETS * BITS_PER_BUCKET  # numEntries: sequences one node covers
V1_NUM_BUCKETS = 64
MIN_LEN = 2 + 8  # minLen: magic, version, node count, size
_MASK64 = (1 << 64) - 1

_HEAD = struct.Struct("<BBII")
_NODE = struct.Struct(f"<Q{NUM_BUCKETS}QH")
_V1_NODE = struct.Struct(f"<Q{V1_NUM_BUCKETS}QH")


class SeqSetError(ValueError):
    """An encoding nats-server's `avl.Decode` refuses (`ss: bad encoding`, `ss: bad version`)."""


@dataclass(frozen=True, slots=True)
class SeqSetNode:
    """One tree node: `words[i]` holds sequences `base + 64*i ...`; `height` as encoded."""

    base: int
    words: tuple[int, ...]
    height: int

    def first(self) -> int:
        """`min()`: the lowest member (0 for a node with none)."""
        for i, word in enumerate(self.words):
            if word:
                return (self.base + i * BITS_PER_BUCKET + (word & -word).bit_length() - 1) & _MASK64
        return 0

    def last(self) -> int:
        """`max()`: the highest member (0 for a node with none)."""
        for i in range(len(self.words) - 1, -1, -1):
            if word := self.words[i]:
                return (self.base + i * BITS_PER_BUCKET + word.bit_length() - 1) & _MASK64
        return 0

    def sequences(self) -> Iterator[int]:
        for i, word in enumerate(self.words):
            start = self.base + i * BITS_PER_BUCKET
            while word:
                low = word & -word
                yield (start + low.bit_length() - 1) & _MASK64
                word ^= low


@dataclass(frozen=True, slots=True)
class SequenceSet:
    """avl.SequenceSet as encoded: `size` is the count the header states (nats-server trusts
    it), `nodes` the tree in pre-order."""

    size: int
    nodes: tuple[SeqSetNode, ...] = ()

    @classmethod
    def from_sequences(cls, sequences: Iterable[int]) -> SequenceSet:
        """A set holding `sequences` (each 0 <= seq < 2**64), as a height-balanced tree."""
        words: dict[int, list[int]] = {}
        count = 0
        for seq in sequences:
            if not 0 <= seq <= _MASK64:
                raise SeqSetError(f"ss: sequence out of range: {seq}")
            offset = seq % NUM_ENTRIES
            node = words.setdefault(seq - offset, [0] * NUM_BUCKETS)
            mask = 1 << (offset % BITS_PER_BUCKET)
            if not node[offset // BITS_PER_BUCKET] & mask:
                node[offset // BITS_PER_BUCKET] |= mask
                count += 1
        bases = sorted(words)
        nodes: list[SeqSetNode] = []

        def build(lo: int, hi: int) -> int:
            """Append the subtree of bases[lo:hi] in pre-order; return its height."""
            if lo >= hi:
                return 0
            mid = (lo + hi) // 2
            at = len(nodes)
            nodes.append(SeqSetNode(bases[mid], (), 0))
            height = 1 + max(build(lo, mid), build(mid + 1, hi))
            nodes[at] = SeqSetNode(bases[mid], tuple(words[bases[mid]]), height)
            return height

        build(0, len(bases))
        return cls(count, tuple(nodes))

    def __iter__(self) -> Iterator[int]:
        """The members in the order nats-server's `Range` visits them: the tree rebuilt from
        the pre-order is walked in order, i.e. the nodes by base (equal bases as written)."""
        for node in sorted(self.nodes, key=lambda n: n.base):
            yield from node.sequences()

    def state(self) -> tuple[int, int, int]:
        """`State()`: first and last member and the size; zeros for a set with no nodes."""
        if not self.nodes:
            return 0, 0, 0
        ordered = sorted(self.nodes, key=lambda n: n.base)
        return ordered[0].first(), ordered[-1].last(), self.size

    def encode(self) -> bytes:
        """`Encode`: version 2."""
        parts = [_HEAD.pack(MAGIC, VERSION, len(self.nodes) & 0xFFFFFFFF, self.size & 0xFFFFFFFF)]
        for node in self.nodes:
            parts.append(_NODE.pack(node.base, *node.words, node.height & 0xFFFF))
        return b"".join(parts)


def decode_seqset(buf: bytes | memoryview, pos: int = 0) -> tuple[SequenceSet, int]:
    """`avl.Decode` of the set starting at `buf[pos]`: the set and the bytes it took. What
    follows it in `buf` is left alone (a stream snapshot has more delete blocks after it)."""
    available = len(buf) - pos
    if available < MIN_LEN or buf[pos] != MAGIC:
        raise SeqSetError("ss: bad encoding")
    _, version, count, size = _HEAD.unpack_from(buf, pos)
    if version == 1:
        return _decode_v1(buf, pos, count, size)
    if version != VERSION:
        raise SeqSetError("ss: bad version")
    if count > (available - MIN_LEN) // _NODE.size:
        raise SeqSetError("ss: bad encoding")
    nodes = []
    at = pos + MIN_LEN
    for _ in range(count):
        base, *words, height = _NODE.unpack_from(buf, at)
        nodes.append(SeqSetNode(base, tuple(words), height))
        at += _NODE.size
    return SequenceSet(size, tuple(nodes)), at - pos


def _decode_v1(buf: bytes | memoryview, pos: int, count: int, size: int) -> tuple[SequenceSet, int]:
    """decodev1: 64 words per node, every set bit inserted afresh, the size checked."""
    if count > (len(buf) - pos - MIN_LEN) // _V1_NODE.size:
        raise SeqSetError("ss: bad encoding")
    members: set[int] = set()
    at = pos + MIN_LEN
    for _ in range(count):
        base, *words, _height = _V1_NODE.unpack_from(buf, at)
        members.update(SeqSetNode(base, tuple(words), 0).sequences())
        at += _V1_NODE.size
    if len(members) != size:
        raise SeqSetError("ss: bad encoding")
    return SequenceSet.from_sequences(members), at - pos
