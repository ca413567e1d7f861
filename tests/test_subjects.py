"""Tests for pynatsd.subjects: tables after nats-server's server/sublist_test.go, plus oracles."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pynatsd.subjects import (
    is_literal,
    is_literal_bytes,
    is_valid_literal_subject_bytes,
    is_valid_publish_subject,
    is_valid_publish_subject_bytes,
    is_valid_queue_name,
    is_valid_queue_name_bytes,
    is_valid_subject,
    is_valid_subject_bytes,
    match_literal,
    match_literal_bytes,
    num_tokens,
    num_tokens_bytes,
    split_sublist_subject,
    subjects_collide,
    token_at,
    token_at_bytes,
)

VALID_SUBJECTS = [
    ("foo", True),
    ("foo.bar.*", True),
    ("foo.bar.>", True),
    ("*", True),
    (">", True),
    ("*.*.>", True),
    ("foo*", True),
    ("foo**", True),
    ("foo.**", True),
    ("foo*bar", True),
    ("foo.*bar", True),
    ("foo*.bar", True),
    ("*bar", True),
    ("foo>", True),
    ("foo.>>", True),
    ("foo>bar", True),
    ("foo.>bar", True),
    ("foo>.bar", True),
    (">bar", True),
    ("foo.>-", True),
    ("héllo.wörld", True),
    ("foo\vbar", True),  # only space, \t, \n, \f and \r are whitespace to nats-server
    ("", False),
    (".", False),
    (".foo", False),
    ("foo.", False),
    ("foo..bar", False),
    ("foo...bar", False),
    (">.bar", False),
    ("foo.>.bar", False),
    ("foo.>.>", False),
    ("foo bar", False),
    ("foo\tbar", False),
    ("foo.\n", False),
    ("foo\r", False),
    ("\f", False),
    (" ", False),
]


@pytest.mark.parametrize(("subject", "valid"), VALID_SUBJECTS)
def test_is_valid_subject(subject: str, valid: bool) -> None:
    assert is_valid_subject(subject) is valid
    assert is_valid_subject_bytes(subject.encode()) is valid
    assert is_valid_subject(subject, check_runes=True) is valid
    assert is_valid_subject_bytes(subject.encode(), check_runes=True) is valid


@pytest.mark.parametrize(
    "subject",
    [
        "foo.bar.baz.\x00",
        "foo\x00bar",
        "foo.\ufffd",  # what Go sees where UTF-8 was broken
        "foo.\udcff",  # a surrogateescape-decoded invalid byte
    ],
)
def test_check_runes_rejects(subject: str) -> None:
    assert is_valid_subject(subject)
    assert not is_valid_subject(subject, check_runes=True)
    assert not is_valid_publish_subject(subject, check_runes=True)


@pytest.mark.parametrize(
    "subject",
    [b"foo.bar.baz.\x00", b"foo.\xff", b"foo.\xc3", b"\xed\xa0\x80", b"foo.\xef\xbf\xbd"],
)
def test_check_runes_rejects_bytes(subject: bytes) -> None:
    assert is_valid_subject_bytes(subject)
    assert not is_valid_subject_bytes(subject, check_runes=True)
    assert not is_valid_publish_subject_bytes(subject, check_runes=True)


LITERALS = [
    ("foo", True),
    ("foo.bar", True),
    ("foo*.bar", True),
    ("foo.**", True),
    ("foo.>>", True),
    (">bar", True),
    ("foo.*-", True),
    ("*", False),
    (">", False),
    ("foo.*", False),
    ("foo.>", False),
    ("foo.*.>", False),
    ("foo.*.bar", False),
    ("foo.bar.>", False),
    ("*.bar", False),
]


@pytest.mark.parametrize(("subject", "literal"), LITERALS)
def test_is_literal(subject: str, literal: bool) -> None:
    assert is_literal(subject) is literal
    assert is_literal_bytes(subject.encode()) is literal


PUBLISH_SUBJECTS = [
    ("foo", True),
    ("foo*", True),
    ("foo.**", True),
    ("foo*bar", True),
    ("foo.>bar", True),
    (">bar", True),
    ("foo", True),
    (".foo", False),
    ("foo.", False),
    ("foo..bar", False),
    ("foo.bar.*", False),
    ("foo.bar.>", False),
    ("*", False),
    (">", False),
    ("foo bar", False),
    ("", False),
]


@pytest.mark.parametrize(("subject", "ok"), PUBLISH_SUBJECTS)
def test_is_valid_publish_subject(subject: str, ok: bool) -> None:
    assert is_valid_publish_subject(subject) is ok
    assert is_valid_publish_subject_bytes(subject.encode()) is ok


@pytest.mark.parametrize(
    ("queue", "ok"),
    [
        ("workers", True),
        ("a.b", True),
        ("*", True),
        ("q-1_x", True),
        ("", False),
        ("a b", False),
        ("a\tb", False),
        ("a\r\n", False),
        ("\f", True),  # nats-server takes it (differential case form_feed_in_subject_and_queue)
    ],
)
def test_is_valid_queue_name(queue: str, ok: bool) -> None:
    assert is_valid_queue_name(queue) is ok
    assert is_valid_queue_name_bytes(queue.encode()) is ok


MATCHES = [
    # (published, pattern, matches)
    ("foo", "foo", True),
    ("foo", "bar", False),
    ("foo", "*", True),
    ("foo", ">", True),
    ("foo.bar", ">", True),
    ("foo.bar", "*", False),
    ("foo.bar", "foo.>", True),
    ("foo.bar", "bar.>", False),
    ("foo", "foo.>", False),
    ("stats.test.22", "stats.>", True),
    ("stats.test.22", "stats.*.*", True),
    ("foo.bar", "foo", False),
    ("stats.test.foos", "stats.test.foos", True),
    ("stats.test.foos", "stats.test.foo", False),
    ("stats.test.foo", "stats.test.foos", False),
    ("stats.test", "stats.test.*", False),
    ("stats.test.foos", "stats.*", False),
    ("stats.test.foos", "stats.*.*.foos", False),
    ("a.b.c.d", "a.*.c.>", True),
    ("a.b.c", "a.*.c.>", False),
    ("a.b.c", "*.*.*", True),
    ("a.b.c", "*.*", False),
    ("a.b", "*.*.*", False),
    # Wildcard characters that are not whole tokens are plain text.
    ("*bar", "*bar", True),
    ("foo*", "foo*", True),
    ("foo*bar", "foo*bar", True),
    ("foo.***.bar", "foo.***.bar", True),
    (">bar", ">bar", True),
    ("foo>", "foo>", True),
    ("foo>bar", "foo>bar", True),
    ("foo.>>>.bar", "foo.>>>.bar", True),
    ("foo.bar", "foo.*-", False),
    ("foo.*-", "foo.*", True),
    # A published `*` or `>` token is a literal token that only wildcards match.
    ("foo.*", "foo.*", True),
    ("foo.*", "foo.>", True),
    ("foo.*", ">", True),
    ("foo.*", "foo.bar", False),
    ("foo.>", "foo.*", True),
    ("foo.>", "foo.>", True),
    ("foo.>", "foo.bar", False),
    ("foo.>", "foo.bar.baz", False),
    ("*", "*", True),
    ("*", "foo", False),
    ("a.>.b", "a.*.b", True),
    ("a.>.b", "a.>", True),
    ("a.>.b", "a.*", False),
]


@pytest.mark.parametrize(("literal", "pattern", "expected"), MATCHES)
def test_match_literal(literal: str, pattern: str, expected: bool) -> None:
    assert match_literal(literal, pattern) is expected
    assert match_literal_bytes(literal.encode(), pattern.encode()) is expected


COLLISIONS = [
    ("foo.*", "foo.*.bar.>", False),
    ("foo.*", "foo.foo", True),
    ("foo.*", "*.foo", True),
    ("foo.bar.>", "*.bar.foo", True),
    ("foo", "foo", True),
    ("foo", "bar", False),
    ("foo", "foo.bar", False),
    ("foo.>", "foo", False),
    ("foo.>", ">", True),
    ("foo.>", "foo.*.*", True),
    ("foo.>", "bar.*.>", False),
    ("*", "foo.>", False),
    ("*", ">", True),
    ("*.*", "foo.>", True),
    ("*.>", "foo", False),
    ("a.*.c", "a.>", True),
    ("a.*.c", "a.b.d", False),
    ("a.*.c", "*.b.*", True),
    ("a.*", "a.b.>", False),
    ("a.*.>", "a.>", True),
    ("a.*.>", "*.*", False),
    ("foo*", "*", True),
    ("foo..bar", "foo.*.bar", False),  # invalid subjects collide with nothing
    ("foo.>.bar", "foo.>.bar", False),
]


@pytest.mark.parametrize(("a", "b", "expected"), COLLISIONS)
def test_subjects_collide(a: str, b: str, expected: bool) -> None:
    assert subjects_collide(a, b) is expected
    assert subjects_collide(b, a) is expected


@pytest.mark.parametrize(
    ("subject", "index", "token"),
    [
        ("foo.bar.baz.*", 0, ""),
        ("foo.bar.baz.*", 1, "foo"),
        ("foo.bar.baz.*", 2, "bar"),
        ("foo.bar.baz.*", 3, "baz"),
        ("foo.bar.baz.*", 4, "*"),
        ("foo.bar.baz.*", 5, ""),
        ("foo.bar.baz.*", -1, ""),
        ("foo", 1, "foo"),
        ("", 1, ""),
        ("a..b", 2, ""),
        ("a..b", 3, "b"),
    ],
)
def test_token_at(subject: str, index: int, token: str) -> None:
    assert token_at(subject, index) == token
    assert token_at_bytes(subject.encode(), index) == token.encode()


@pytest.mark.parametrize(
    ("subject", "count"), [("", 0), ("foo", 1), ("foo.bar", 2), ("a.b.c.>", 4), ("a..b", 3)]
)
def test_num_tokens(subject: str, count: int) -> None:
    assert num_tokens(subject) == count
    assert num_tokens_bytes(subject.encode()) == count


# -- oracles ---------------------------------------------------------------------------------

TOKENS = ["a", "b", "ab", "*", ">", "a*", "é"]
subject_st = st.lists(st.sampled_from(TOKENS), min_size=1, max_size=5).map(".".join)
valid_pattern_st = subject_st.filter(is_valid_subject)


def _regex_match(literal: str, pattern: str) -> bool:
    """A second, independent definition of matching: the pattern compiled to a regex."""
    parts = []
    toks = pattern.split(".")
    for i, t in enumerate(toks):
        if t == "*":
            parts.append(r"[^.]+")
        elif t == ">" and i == len(toks) - 1:
            parts.append(r"[^.]+(?:\.[^.]+)*")
        else:
            parts.append(re.escape(t))
    return re.fullmatch(r"\.".join(parts), literal) is not None


@settings(max_examples=300, deadline=None)
@given(subject_st, valid_pattern_st)
def test_match_literal_oracle(literal: str, pattern: str) -> None:
    expected = _regex_match(literal, pattern)
    assert match_literal(literal, pattern) is expected
    assert match_literal_bytes(literal.encode(), pattern.encode()) is expected


def _brute_collide(a: str, b: str) -> bool:
    """Do `a` and `b` both match some literal subject? Try every candidate built from their
    own tokens plus a fresh one, up to one token longer than the longer pattern."""
    fresh = "zz"
    alphabet = sorted({t for t in (a + "." + b).split(".") if t not in ("*", ">")} | {fresh})
    longest = max(a.count("."), b.count(".")) + 2
    cands: list[str] = []
    frontier = [""]
    for _ in range(longest):
        frontier = [f"{p}.{t}" if p else t for p in frontier for t in alphabet]
        cands.extend(frontier)
    return any(match_literal(c, a) and match_literal(c, b) for c in cands)


@settings(max_examples=150, deadline=None)
@given(
    st.lists(st.sampled_from(["a", "b", "*", ">"]), min_size=1, max_size=3).map(".".join),
    st.lists(st.sampled_from(["a", "b", "*", ">"]), min_size=1, max_size=3).map(".".join),
)
def test_subjects_collide_oracle(a: str, b: str) -> None:
    expected = is_valid_subject(a) and is_valid_subject(b) and _brute_collide(a, b)
    assert subjects_collide(a, b) is expected


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet="ab.*> \t\x00é", max_size=12))
def test_str_and_bytes_agree(subject: str) -> None:
    b = subject.encode()
    assert is_valid_subject(subject) is is_valid_subject_bytes(b)
    assert is_valid_subject(subject, True) is is_valid_subject_bytes(b, True)
    assert is_literal(subject) is is_literal_bytes(b)
    assert num_tokens(subject) == num_tokens_bytes(b)
    for i in range(5):
        assert token_at(subject, i).encode() == token_at_bytes(b, i)


@pytest.mark.parametrize(
    ("subject", "tokens"),
    [
        ("a.b", ["a", "b"]),
        ("a\fb", ["a\fb"]),  # an ordinary byte for the SubList, as in nats-server
        ("a.\v.>", ["a", "\v", ">"]),
        ("a b", None),
        ("a\tb", None),
        ("a.\r", None),
        ("a..b", None),
        ("a.>.b", None),
        ("", None),
    ],
)
def test_split_sublist_subject(subject: str, tokens: list[str] | None) -> None:
    assert split_sublist_subject(subject) == tokens
    # isValidSubject (configuration, JetStream) still refuses a form feed.
    if "\f" in subject:
        assert not is_valid_subject(subject)


@pytest.mark.parametrize(
    ("subject", "ok"),
    [
        (b"a.b", True),
        (b"a\x0cb", True),
        (b"a b", True),  # IsValidLiteralSubject does not look at whitespace
        (b"a..b", False),
        (b"a.*", False),
        (b"a.>", False),
        (b"a*.b>", True),
        (b"", False),
    ],
)
def test_is_valid_literal_subject_bytes(subject: bytes, ok: bool) -> None:
    assert is_valid_literal_subject_bytes(subject) is ok
