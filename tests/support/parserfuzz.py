"""A fast seeded fuzzer for the client protocol parser, for runs of up to millions of frames.

Hypothesis explores cleverly but slowly; this makes frames with `random` (valid ops, then byte
flips, truncations, insertions, CR/LF and digits in odd places), feeds them in reads of random
length, starts a new parser after each `ProtocolError`, and checks the parser's own promises on
the way: it never raises, a `ProtocolError` is the last event of its feed, a dead parser stays
silent. Memory is sampled as `sys.getallocatedblocks()` after each round, so a leak (in the
compiled parser's reference counting, say) shows as blocks that keep growing.

Used by tests/protocol/test_parser.py (a small run) and bench/fuzz_parser.py (1M frames).
"""

from __future__ import annotations

import gc
import random
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from pynatsd.protocol.events import ProtocolError

_SUBJECTS = [b"foo", b"foo.bar", b"a.b.c.d", b"_INBOX.x.y", b"x" * 40, b"\xff\xfe", b"*", b">"]


def valid_frame(rng: random.Random) -> bytes:
    kind = rng.randrange(8)
    subject = rng.choice(_SUBJECTS)
    reply = rng.choice([b"", b"", b"_INBOX.r"])
    sep = rng.choice([b" ", b" ", b"\t", b"  "])
    if kind <= 2:  # PUB is most of what a server reads
        body = rng.randbytes(rng.choice([0, 1, 16, 16, 100, 1500]))
        args = [subject, *([reply] if reply else []), b"%d" % len(body)]
        return b"PUB " + sep.join(args) + b"\r\n" + body + b"\r\n"
    if kind == 3:
        header = b"NATS/1.0\r\nNats-Msg-Id: %d\r\n\r\n" % rng.randrange(1000)
        payload = header + rng.randbytes(rng.randrange(64))
        sizes = [b"%d" % len(header), b"%d" % len(payload)]
        args = [subject, *([reply] if reply else []), *sizes]
        return b"HPUB " + sep.join(args) + b"\r\n" + payload + b"\r\n"
    if kind == 4:
        queue = rng.choice([b"", b" q"])
        return b"SUB " + subject + queue + b" %d\r\n" % rng.randrange(100)
    if kind == 5:
        return b"UNSUB %d%s\r\n" % (rng.randrange(100), rng.choice([b"", b" 5"]))
    if kind == 6:
        return rng.choice([b"PING\r\n", b"PONG\r\n", b"ping\r\n", b"+OK\r\n"])
    return b'CONNECT {"verbose":false,"headers":true}\r\n'


_INSERTS = (b"\r", b"\n", b"\r\n", b" ", b"\t", b"0", b"9", b"99999", b">", b"*", b".", b"\x00")


def mutate(frame: bytes, rng: random.Random) -> bytes:
    """One to three byte flips, truncations, insertions, deletions, duplications, case swaps
    or lost CRs (tests/server/test_fuzz.py sends such frames to a live server)."""
    buf = bytearray(frame)
    for _ in range(rng.randint(1, 3)):
        pos = rng.randint(0, len(buf))
        action = rng.randrange(7)
        if action == 0 and pos < len(buf):
            buf[pos] = rng.randrange(256)
        elif action == 1:
            del buf[pos:]
        elif action == 2:
            buf[pos:pos] = rng.choice(_INSERTS) if rng.random() < 0.6 else rng.randbytes(4)
        elif action == 3:
            del buf[pos : pos + rng.randint(1, 6)]
        elif action == 4:
            buf[pos:pos] = buf[pos : pos + rng.randint(1, 16)]
        elif action == 5:
            buf[:5] = bytes(buf[:5]).swapcase()
        else:
            cr = buf.find(b"\r")
            if cr >= 0:
                del buf[cr]
    return bytes(buf)


@dataclass
class FuzzReport:
    frames: int = 0
    events: int = 0
    protocol_errors: int = 0
    blocks: list[int] = field(default_factory=list)  # allocated blocks after each round

    @property
    def block_growth(self) -> int:
        """Blocks gained from the end of the first round (warm-up) to the end of the last."""
        return self.blocks[-1] - self.blocks[0] if self.blocks else 0


def fuzz(
    make_parser: Callable[[], Any],
    frames: int,
    seed: int = 0,
    rounds: int = 4,
    mutate_ratio: float = 0.3,
) -> FuzzReport:
    """Feed `frames` frames in `rounds` rounds of batches of 64 frames, `mutate_ratio` of the
    batches with one frame mutated (the rest of such a batch usually goes to a fresh parser
    mid-frame: garbage again). Raises AssertionError on a broken promise."""
    rng = random.Random(seed)
    report = FuzzReport()
    per_round = max(1, frames // rounds)
    for _ in range(rounds):
        parser = make_parser()
        batch: list[bytes] = []
        for n in range(per_round):
            batch.append(valid_frame(rng))
            if len(batch) == 64 or n == per_round - 1:
                if rng.random() < mutate_ratio:
                    i = rng.randrange(len(batch))
                    batch[i] = mutate(batch[i], rng)
                parser = _feed(parser, make_parser, b"".join(batch), rng, report)
                batch.clear()
        report.frames += per_round
        gc.collect()
        report.blocks.append(sys.getallocatedblocks())
    return report


def _feed(
    parser: Any, make_parser: Callable[[], Any], data: bytes, rng: random.Random, r: FuzzReport
) -> Any:
    pos = 0
    while pos < len(data):
        n = rng.choice([1, 7, 100, 4096, 65536])
        events = parser.feed(data[pos : pos + n])
        pos += n
        r.events += len(events)
        for i, ev in enumerate(events):
            if isinstance(ev, ProtocolError):
                assert i == len(events) - 1, "a ProtocolError must be the last event"
                assert parser.dead
                assert parser.feed(b"PING\r\n") == []
                r.protocol_errors += 1
                parser = make_parser()
    return parser
