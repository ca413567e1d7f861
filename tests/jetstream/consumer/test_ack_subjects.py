"""The sequences of plain acks read in one pass (`plain_ack_sequences`): exactly what splitting
each subject and `int()` give, and every other ack left to the general path."""

from __future__ import annotations

import random

import pytest

from pynatsd.jetstream.consumer.ack_subjects import NOT_PLAIN, plain_ack_sequences
from pynatsd.protocol.events import Pub

PREFIX = b"$JS.ACK.S.C."


@pytest.mark.parametrize(
    ("subject", "body", "header_size", "expected"),
    [
        (b"$JS.ACK.S.C.1.2.3.1764300000000000000.0", b"", -1, (2, 3, 1)),
        (b"$JS.ACK.S.C.4.20.31.1.0", b"+ACK", -1, (20, 31, 4)),
        (b"$JS.ACK.S.C.1.007.3.1.0", b"+OK", -1, (7, 3, 1)),
        (b"$JS.ACK.S.C.1.2.3..", b"", -1, (2, 3, 1)),  # nine tokens, two empty
        (b"$JS.ACK.S.C.1.2.3.4.5.6.7", b"", -1, (2, 3, 1)),
        (b"$JS.ACK.S.C.1.999999999999999999.3.1.0", b"", -1, (999999999999999999, 3, 1)),
        # Left to the general path:
        (b"$JS.ACK.S.C.1.2.3.1.0", b"-NAK", -1, NOT_PLAIN),
        (b"$JS.ACK.S.C.1.2.3.1.0", b"+WPI", -1, NOT_PLAIN),
        (b"$JS.ACK.S.C.1.2.3.1.0", b"+NXT", -1, NOT_PLAIN),
        (b"$JS.ACK.S.C.1.2.3.1.0", b"+TERM", -1, NOT_PLAIN),
        (b"$JS.ACK.S.C.1.2.3.1.0", b"NATS/1.0\r\n\r\n+ACK", 12, NOT_PLAIN),
        (b"$JS.ACK.S.D.1.2.3.1.0", b"", -1, NOT_PLAIN),  # another consumer's
        (b"$JS.ACK.S.C.1.2.3.1", b"", -1, NOT_PLAIN),  # eight tokens
        (b"$JS.ACK.S.C.1.2.3", b"", -1, NOT_PLAIN),
        (b"$JS.ACK.S.C.1.0.3.1.0", b"", -1, NOT_PLAIN),  # stream sequence 0
        (b"$JS.ACK.S.C.1.+2.3.1.0", b"", -1, NOT_PLAIN),  # int() reads it; the general path
        (b"$JS.ACK.S.C.1. 2.3.1.0", b"", -1, NOT_PLAIN),
        (b"$JS.ACK.S.C.1.2_0.3.1.0", b"", -1, NOT_PLAIN),
        (b"$JS.ACK.S.C.1.x.3.1.0", b"", -1, NOT_PLAIN),
        (b"$JS.ACK.S.C..2.3.1.0", b"", -1, NOT_PLAIN),
        (b"$JS.ACK.S.C.1.9999999999999999999.3.1.0", b"", -1, NOT_PLAIN),  # 19 digits
    ],
)
def test_plain_acks_and_the_rest(
    subject: bytes, body: bytes, header_size: int, expected: tuple[int, int, int]
) -> None:
    assert plain_ack_sequences([Pub(subject, b"", body, header_size)], PREFIX) == [expected]


def _general(subject: bytes) -> tuple[int, int, int] | None:
    """The general path's reading (`AckTracker.on_ack`): None where it finds no sequence."""
    tokens = subject.split(b".")
    if len(tokens) < 9:
        return None
    try:
        dc, sseq, dseq = int(tokens[4]), int(tokens[5]), int(tokens[6])
    except ValueError:
        return None
    return (sseq, dseq, dc) if sseq else None


def test_a_plain_ack_reads_as_the_general_path_reads_it() -> None:
    """Random subjects after the prefix: each one read as plain has the numbers the general
    path finds, and each the general path reads with only digits in them is plain."""
    rng = random.Random(5)
    digits = [b"0", b"1", b"7", b"42", b"1234567890"]
    others = [b"", b".", b"+", b" ", b"_", b"x"]
    plain = 0
    for _ in range(5000):
        tail = b".".join(
            b"".join(
                rng.choice(digits if rng.random() < 0.9 else others)
                for _ in range(rng.randrange(1, 3))
            )
            for _ in range(rng.randrange(3, 8))
        )
        subject = PREFIX + tail
        (got,) = plain_ack_sequences([Pub(subject, b"", b"")], PREFIX)
        general = _general(subject)
        if got != NOT_PLAIN:
            plain += 1
            assert got == general, subject
        elif general is not None:
            assert not all(t.isdigit() and len(t) <= 18 for t in subject.split(b".")[4:7])
    assert plain > 200


def test_one_answer_per_ack_in_order() -> None:
    evs = [
        Pub(b"$JS.ACK.S.C.1.5.5.1.0", b"", b""),
        Pub(b"$JS.ACK.S.C.1.6.6.1.0", b"", b"-NAK"),
        Pub(b"$JS.ACK.S.C.2.7.9.1.0", b"inbox", b"+ACK"),
    ]
    assert plain_ack_sequences(evs, PREFIX) == [(5, 5, 1), NOT_PLAIN, (7, 9, 2)]
