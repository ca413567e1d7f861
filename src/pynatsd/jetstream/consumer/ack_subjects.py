"""The sequences in the ack subjects of a run of plain acknowledgements, read in one pass.

nats-server's counterpart is `ackReplyInfo` (server/consumer.go), which reads the tokens of
`$JS.ACK.<stream>.<consumer>.<delivered count>.<stream seq>.<consumer seq>.<ts>.<pending>`
(see pump.py) one by one. A consumer's run of acks from one read (`AckTracker.on_acks`)
hands its whole list here instead of splitting each subject into nine `bytes` and converting
three of them with `int()`.

Compiled by mypyc (native.COMPILED_MODULES): this is the per-ack part of a pull consumer's
acknowledgements, a loop over the subject's bytes. The `Pub`s are `Any` here (an interpreted
type, which mypyc would check each value against).
"""

from __future__ import annotations

from typing import Any, Final

from mypy_extensions import i64

# Longer digit runs are left to `int()` (the caller's general path), which has no limit.
_MAX_DIGITS: Final = 18

NOT_PLAIN: Final = (0, 0, 0)
"""What `plain_ack_sequences` gives for an ack it leaves to the general path."""


def plain_ack_sequences(evs: list[Any], prefix: bytes) -> list[tuple[int, int, int]]:
    """For each ack of `evs` (`Pub`s): its (stream sequence, delivery sequence, delivered
    count) when it is a plain one, else `NOT_PLAIN`. Plain: no header; a body that is empty,
    `+ACK` or `+OK`; a subject that is `prefix` (`$JS.ACK.<stream>.<consumer>.`) followed by
    three tokens of ASCII digits and at least two more tokens, the first number not 0. For
    such a subject the numbers are what `int()` of the split tokens gives; any other form
    (signs, spaces, a missing token) is not plain, and the general path reads it."""
    out: list[tuple[int, int, int]] = []
    start = len(prefix)
    for ev in evs:
        hs: int = ev[3]
        body: bytes = ev[2]
        subject: bytes = ev[0]
        plain = not body or body == b"+ACK" or body == b"+OK"
        if hs > 0 or not plain or not subject.startswith(prefix):
            out.append(NOT_PLAIN)
        else:
            out.append(_sequences(subject, start))
    return out


def _sequences(subject: bytes, k: i64) -> tuple[int, int, int]:
    """The numbers in `subject[k:]` (delivered count, stream and delivery sequence) as
    (stream seq, delivery seq, delivered count), when two more tokens follow them (the
    timestamp and the pending count, empty or not)."""
    dc, k = _number(subject, k)
    if k < 0:
        return NOT_PLAIN
    sseq, k = _number(subject, k + 1)
    if k < 0 or sseq == 0:
        return NOT_PLAIN
    dseq, k = _number(subject, k + 1)
    if k < 0:
        return NOT_PLAIN
    # Then one more dot, after the timestamp: looked for from the end, since the pending
    # count after it is short and the timestamp is 19 digits (no `find`: see _number).
    i: i64 = len(subject) - 1
    while i > k:
        if subject[i] == 46:
            return (int(sseq), int(dseq), int(dc))
        i -= 1
    return NOT_PLAIN


def _number(subject: bytes, k: i64) -> tuple[i64, i64]:
    """The token of ASCII digits at `k` and the index of the dot after it; -1 for the index
    when it is no such token (empty, another byte, too long, or the subject's last). A loop
    over the bytes: compiled (with machine integers: at most 18 digits fit), it costs a
    fraction of a split or a `find` (a method call that parses its arguments)."""
    n: i64 = len(subject)
    end: i64 = k + _MAX_DIGITS + 1
    if end > n:
        end = n
    value: i64 = 0
    i: i64 = k
    while i < end:
        c: i64 = subject[i]
        if c == 46:  # "."
            return value, (i if i > k else -1)
        if c < 48 or c > 57:
            return 0, -1
        value = value * 10 + (c - 48)
        i += 1
    return 0, -1
