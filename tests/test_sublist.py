"""Tests for pynatsd.sublist: cases after nats-server's server/sublist_test.go, plus oracles."""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Iterable
from dataclasses import astuple
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from pynatsd import native, sublist
from pynatsd.subjects import is_valid_subject, match_literal, subjects_collide
from pynatsd.sublist import (
    CACHE_MAX,
    EMPTY_RESULT,
    PLIST_MAX,
    PLIST_MIN,
    InvalidSubjectError,
    LockedSubList,
    SubList,
    SubListResult,
)


class Sub:
    """A minimal subscription: identity-hashed, like the server's."""

    __slots__ = ("queue", "subject")

    def __init__(self, subject: str, queue: str | None = None) -> None:
        self.subject = subject
        self.queue = queue

    def __repr__(self) -> str:
        return f"Sub({self.subject!r}, {self.queue!r})"


SL = SubList[Sub]


@pytest.fixture(params=[True, False], ids=["cache", "nocache"])
def sl(request: pytest.FixtureRequest) -> SL:
    return SubList(cache=request.param)


def psubs_of(r: SubListResult[Sub]) -> Counter[int]:
    return Counter(id(s) for s in r.psubs)


def groups_of(r: SubListResult[Sub]) -> dict[str, Counter[int]]:
    out: dict[str, Counter[int]] = {}
    for g in r.qsubs:
        assert g, "an empty queue group must not be returned"
        name = g[0].queue
        assert name is not None
        assert name not in out, "a queue group must appear once"
        assert all(s.queue == name for s in g)
        out[name] = Counter(id(s) for s in g)
    return out


def same(r: SubListResult[Sub], subs: Iterable[Sub]) -> bool:
    subs = list(subs)
    plain = Counter(id(s) for s in subs if s.queue is None)
    groups: dict[str, Counter[int]] = {}
    for s in subs:
        if s.queue is not None:
            groups.setdefault(s.queue, Counter())[id(s)] += 1
    return psubs_of(r) == plain and groups_of(r) == groups


def insert_all(sl: SL, *subjects: str) -> list[Sub]:
    subs = [Sub(s) for s in subjects]
    for s in subs:
        sl.insert(s)
    return subs


# -- basic matching ----------------------------------------------------------------------------


def test_insert_count(sl: SL) -> None:
    insert_all(sl, "foo", "bar", "foo.bar")
    assert sl.count() == 3


@pytest.mark.parametrize(
    ("subscribed", "published", "expected"),
    [
        # (subscriptions, published subject, which subscriptions match, by index)
        (["foo"], "foo", [0]),
        (["foo.bar.baz"], "foo.bar.baz", [0]),
        (["a.b.c", "a.*.c"], "a.b.c", [0, 1]),
        (["a.b.c", "a.b.*"], "a.b.c", [0, 1]),
        (["a.b.c", "a.>"], "a.b.c", [0, 1]),
        (["a.b.c", "a.>"], "a.>", [1]),
        (["foo"], "foo.bar", []),
        (["foo.bar"], "foo", []),
        (["foo.>"], "foo", []),
        (["*"], "foo", [0]),
        (["*"], "foo.bar", []),
        (["*.>"], "foo", []),
        (["*.>"], "foo.bar.baz", [0]),
        ([">"], "a.b.c.d.e", [0]),
        (["a.*.c.>", "a.b.*.d", "*.*.*.*", "a.b.c.d.e"], "a.b.c.d", [0, 1, 2]),
        (["foo.*-", "foo.>-"], "foo.bar", []),
        (["foo.*-", "foo.>-"], "foo.*-", [0]),
        (["foo.*-", "foo.>-"], "foo.>-", [1]),
        # Published `*` and `>` tokens (pedantic off) reach wildcards only, as in matchLevel.
        (["foo.*", "foo.>", ">", "*.*", "foo.bar", "*"], "foo.*", [0, 1, 2, 3]),
        (["foo.*", "foo.>", ">", "*.*", "foo.bar", "*"], "foo.>", [0, 1, 2, 3]),
        (["foo.*", "foo.>", ">", "*.*", "foo.bar", "*"], "*", [2, 5]),
        (["foo.*", "foo.>", ">", "*.*", "foo.bar", "*"], ">", [2, 5]),
        (["a.*.b", "a.>", "a.*"], "a.>.b", [0, 1]),
    ],
)
def test_match_table(sl: SL, subscribed: list[str], published: str, expected: list[int]) -> None:
    subs = insert_all(sl, *subscribed)
    want = [subs[i] for i in expected]
    assert same(sl.match(published), want)
    assert same(sl.match_bytes(published.encode()), want)
    # again, now from the cache when it is on
    assert same(sl.match(published), want)
    assert same(sl.match_bytes(published.encode()), want)
    assert sl.has_interest(published) is bool(want)
    assert sl.num_interest(published) == (len(want), 0)


@pytest.mark.parametrize("subject", [".foo", "..foo", "foo..", "foo.", "foo..bar", "foo...bar", ""])
def test_match_with_empty_tokens(sl: SL, subject: str) -> None:
    sl.insert(Sub(">"))
    sl.insert(Sub(">", "queue"))
    for _ in range(2):
        assert sl.match(subject) is EMPTY_RESULT
        assert sl.match_bytes(subject.encode()) is EMPTY_RESULT
    assert not sl.has_interest(subject)
    assert sl.num_interest(subject) == (0, 0)


@pytest.mark.parametrize("subject", [b"\xff", b"foo.\xc3", b"foo.\xed\xa0\x80", b"\xc3(.x"])
def test_match_bytes_non_utf8_routes_like_raw_bytes(sl: SL, subject: bytes) -> None:
    # nats-server compares raw bytes; the server decodes SUB subjects with surrogateescape.
    everything = Sub(">")
    sl.insert(everything)
    assert same(sl.match_bytes(subject), [everything])
    exact = Sub(subject.decode("utf-8", "surrogateescape"))
    sl.insert(exact)  # a literal insert must drop the cached bytes entry for this very subject
    assert same(sl.match_bytes(subject), [everything, exact])
    sl.remove(exact)
    assert same(sl.match_bytes(subject), [everything])


def test_lone_surrogate_subject_has_no_bytes_key(sl: SL) -> None:
    sub = Sub("foo.\ud800")  # not produced by any surrogateescape decode
    sl.insert(sub)
    assert same(sl.match("foo.\ud800"), [sub])
    assert sl.remove(sub)


def test_shared_empty_result(sl: SL) -> None:
    assert sl.match("foo") is EMPTY_RESULT
    assert sl.match("bar") is EMPTY_RESULT
    assert sl.match_bytes(b"bar") is EMPTY_RESULT
    assert sl.reverse_match("bar") is EMPTY_RESULT


def test_result_is_immutable(sl: SL) -> None:
    sl.insert(Sub("foo"))
    r = sl.match("foo")
    assert isinstance(r.psubs, tuple)
    with pytest.raises(AttributeError):
        r.psubs = ()  # type: ignore[misc]
    with pytest.raises(AttributeError):
        del r.qsubs  # type: ignore[misc]


# -- queues ------------------------------------------------------------------------------------


def test_basic_queue_results(sl: SL) -> None:
    sub = Sub("foo")
    sub1 = Sub("foo", "bar")
    sub2 = Sub("foo", "baz")
    sub3 = Sub("foo", "bar")
    sub4 = Sub("foo", "baz")

    sl.insert(sub1)
    assert same(sl.match("foo"), [sub1])
    sl.insert(sub2)
    assert same(sl.match("foo"), [sub1, sub2])
    sl.insert(sub)
    assert same(sl.match("foo"), [sub, sub1, sub2])
    sl.insert(sub3)
    sl.insert(sub4)
    r = sl.match("foo")
    assert same(r, [sub, sub1, sub2, sub3, sub4])
    assert sorted(len(g) for g in r.qsubs) == [2, 2]
    assert sl.num_interest("foo") == (1, 4)

    sl.remove(sub)
    assert same(sl.match("foo"), [sub1, sub2, sub3, sub4])
    sl.remove(sub1)
    assert same(sl.match("foo"), [sub2, sub3, sub4])
    sl.remove(sub3)  # last of "bar"
    r = sl.match("foo")
    assert same(r, [sub2, sub4])
    assert len(r.qsubs) == 1
    sl.remove(sub2)
    sl.remove(sub4)
    assert sl.match("foo") is EMPTY_RESULT
    assert sl.count() == 0


def test_queue_groups_merge_across_nodes(sl: SL) -> None:
    subs = [Sub("foo.bar", "q"), Sub("foo.*", "q"), Sub("foo.>", "q"), Sub(">", "r")]
    for s in subs:
        sl.insert(s)
    r = sl.match("foo.bar")
    assert same(r, subs)
    assert len(r.qsubs) == 2
    assert sl.num_interest("foo.bar") == (0, 4)


# -- removal and pruning -----------------------------------------------------------------------


def test_remove(sl: SL) -> None:
    sub = Sub("a.b.c.d")
    sl.insert(sub)
    assert sl.count() == 1
    assert same(sl.match("a.b.c.d"), [sub])
    assert sl.remove(Sub("a.b.c")) is False
    assert sl.remove(Sub("a.b.c.d")) is False  # same subject, other subscription
    assert sl.count() == 1
    assert sl.remove(sub) is True
    assert sl.remove(sub) is False
    assert sl.count() == 0
    assert sl.match("a.b.c.d") is EMPTY_RESULT


def test_remove_wildcard(sl: SL) -> None:
    sub, psub, fsub = insert_all(sl, "a.b.c.d", "a.b.*.d", "a.b.>")
    assert sl.count() == 3
    assert same(sl.match("a.b.c.d"), [sub, psub, fsub])
    assert sl.remove(sub)
    assert same(sl.match("a.b.c.d"), [psub, fsub])
    assert sl.remove(fsub)
    assert same(sl.match("a.b.c.d"), [psub])
    assert sl.remove(psub)
    assert sl.count() == 0
    assert sl.match("a.b.c.d") is EMPTY_RESULT


@pytest.mark.parametrize("subject", ["a.b.c.d.e.f", "a.b.*.d.e.>", ">", "*.*", "foo"])
def test_remove_prunes(sl: SL, subject: str) -> None:
    assert sl.num_levels() == 0
    sub = Sub(subject)
    sl.insert(sub)
    assert sl.num_levels() == subject.count(".") + 1
    sl.remove(sub)
    assert sl.num_levels() == 0
    root = sl._root
    assert not root.nodes and root.pwc is None and root.fwc is None


def test_prune_keeps_shared_prefix(sl: SL) -> None:
    a, b, q = Sub("a.b.c"), Sub("a.b"), Sub("a.b.c.d", "q")
    for s in (a, b, q):
        sl.insert(s)
    sl.remove(q)
    assert sl.num_levels() == 3
    sl.remove(a)
    assert sl.num_levels() == 2
    node_b = sl._root.nodes["a"].next.nodes["b"]  # type: ignore[union-attr]
    assert node_b.next is None, "an emptied level must be dropped"
    sl.remove(b)
    assert sl.num_levels() == 0


@pytest.mark.parametrize("subject", ["a.b..d", "a.>.b", "", ".", "foo bar"])
def test_remove_bad_subject_is_noop(sl: SL, subject: str) -> None:
    sl.insert(Sub("a.b.c.d"))
    genid = sl.genid
    assert sl.remove(Sub(subject)) is False
    assert sl.remove(Sub(subject, "q")) is False
    assert sl.count() == 1
    assert sl.genid == genid


def test_remove_with_wildcards_as_literals(sl: SL) -> None:
    for subject in ("foo.*-", "foo.>-"):
        sub = Sub(subject)
        sl.insert(sub)
        assert sl.remove(Sub("foo.bar")) is False
        assert sl.count() == 1
        assert sl.remove(sub)
        assert sl.count() == 0


def test_remove_queue_from_wrong_group_is_noop(sl: SL) -> None:
    sub = Sub("foo", "a")
    sl.insert(sub)
    sub.queue = "b"  # misuse: the SubList must not find it under another group
    assert sl.remove(sub) is False
    sub.queue = "a"
    assert sl.remove(sub) is True


def test_remove_batch(sl: SL) -> None:
    sub1, sub2, sub3 = insert_all(sl, "foo", "bar", "baz")
    wild = Sub("*")
    sl.insert(wild)
    assert same(sl.match("foo"), [sub1, wild])
    genid = sl.genid
    sl.remove_batch([Sub("not.inserted"), sub1, sub3, wild, sub1])
    assert sl.genid == genid + 1
    assert sl.count() == 1
    assert same(sl.match("bar"), [sub2])
    assert sl.match("foo") is EMPTY_RESULT
    assert sl.match("baz") is EMPTY_RESULT
    sl.remove_batch([])
    sl.remove_batch([sub1])
    assert sl.genid == genid + 1


def test_remove_batch_without_cache_keeps_it_off() -> None:
    sl: SL = SubList(cache=False)
    sl.insert(Sub("foo"))
    sub = Sub("bar")
    sl.insert(sub)
    sl.remove_batch([sub])
    for _ in range(10):
        sl.match("foo")
    assert not sl.cache_enabled
    assert sl.stats().num_cache == 0


def test_large_node_plist(sl: SL) -> None:
    subs = [Sub("foo") for _ in range(PLIST_MAX * 2)]
    for s in subs:
        sl.insert(s)
    r = sl.match("foo")
    assert len(r.psubs) == PLIST_MAX * 2
    sl.remove(r.psubs[PLIST_MAX])
    sl.remove(r.psubs[0])
    sl.remove(r.psubs[-1])
    r2 = sl.match("foo")
    assert len(r2.psubs) == PLIST_MAX * 2 - 3
    assert same(r2, [s for s in subs if s not in (r.psubs[PLIST_MAX], r.psubs[0], r.psubs[-1])])


def test_plist_shared_and_hysteresis() -> None:
    sl: SL = SubList()
    subs = [Sub("foo.>") for _ in range(PLIST_MAX + 1)]
    for s in subs:
        sl.insert(s)
    node = sl._root.nodes["foo"].next.fwc  # type: ignore[union-attr]
    assert node is not None
    r1 = sl.match("foo.a")
    r2 = sl.match("foo.b")
    assert same(r1, subs)
    # Two subjects served by one flat node share one tuple: no per-match copy.
    assert r1.psubs is r2.psubs
    assert node.plist is r1.psubs
    assert type(node.psubs) is dict
    # Between PLIST_MIN and PLIST_MAX the node stays flat (no flapping at the boundary).
    while len(subs) > PLIST_MIN:
        sl.remove(subs.pop())
        assert type(node.psubs) is dict
        assert same(sl.match("foo.c"), subs)
        if len(subs) % 50 == 0:
            # an insert into a flat node must refresh its snapshot too
            extra = Sub("foo.>")
            sl.insert(extra)
            assert same(sl.match("foo.c"), [*subs, extra])
            sl.remove(extra)
    sl.remove(subs.pop())
    assert type(node.psubs) is tuple
    r = sl.match("foo.d")
    assert same(r, subs)
    assert r.psubs is node.psubs, "a small node's tuple is the result itself"


# -- bad input ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "subject", [".foo", "foo.", "foo..bar", "foo.bar..baz", "foo.>.bar", "", "foo bar", "a.\tb"]
)
def test_insert_invalid_subject(sl: SL, subject: str) -> None:
    keep = Sub("foo.bar")
    sl.insert(keep)
    sl.match("foo.bar")
    genid, levels = sl.genid, sl.num_levels()
    with pytest.raises(InvalidSubjectError):
        sl.insert(Sub(subject))
    with pytest.raises(ValueError):
        sl.insert(Sub(subject, "q"))
    assert (sl.genid, sl.num_levels(), sl.count()) == (genid, levels, 1)
    assert sl.all() == [keep]


@pytest.mark.parametrize("queue", ["", "a b", "a\nb", "\t"])
def test_insert_invalid_queue(sl: SL, queue: str) -> None:
    genid = sl.genid
    with pytest.raises(InvalidSubjectError, match="queue"):
        sl.insert(Sub("foo.bar", queue))
    assert sl.genid == genid
    assert sl.count() == 0
    assert sl.num_levels() == 0


def test_insert_twice_is_noop(sl: SL) -> None:
    sub, qsub = Sub("foo"), Sub("foo", "q")
    sl.insert(sub)
    sl.insert(qsub)
    genid = sl.genid
    sl.insert(sub)
    sl.insert(qsub)
    assert sl.genid == genid
    assert sl.count() == 2
    assert same(sl.match("foo"), [sub, qsub])


# -- cache -------------------------------------------------------------------------------------


def test_cache_follows_inserts_and_removes() -> None:
    sl: SL = SubList()
    sub = Sub("a.b.c.d")
    psub, fsub = Sub("a.b.*.d"), Sub("a.b.>")
    sl.insert(sub)
    assert same(sl.match("a.b.c.d"), [sub])
    sl.insert(psub)
    sl.insert(fsub)
    assert same(sl.match("a.b.c.d"), [sub, psub, fsub])
    sl.remove(sub)
    assert same(sl.match("a.b.c.d"), [psub, fsub])
    sl.remove(fsub)
    sl.remove(psub)
    assert sl.count() == 0
    assert sl.cache_count() == 0
    assert sl.match("a.b.c.d") is EMPTY_RESULT

    sl = SubList()
    sl.insert(Sub("foo.*"))
    sl.insert(Sub("foo.bar"))
    assert len(sl.match("foo.baz").psubs) == 1
    assert len(sl.match("foo.bar").psubs) == 2
    sl.insert(Sub("foo.>"))
    assert len(sl.match("foo.bar").psubs) == 3


def test_literal_change_keeps_unrelated_cache_entries() -> None:
    sl: SL = SubList()
    insert_all(sl, "foo", "bar.*")
    r_foo = sl.match("foo")
    r_bar = sl.match_bytes(b"bar.x")
    new = Sub("baz")
    sl.insert(new)
    assert sl.match("foo") is r_foo
    assert sl.match_bytes(b"bar.x") is r_bar
    assert same(sl.match_bytes(b"baz"), [new])
    extra = Sub("foo")
    sl.insert(extra)
    assert sl.match("foo") is not r_foo
    assert len(sl.match("foo").psubs) == 2
    sl.insert(Sub("*"))  # a wildcard change drops everything
    assert sl.cache_count() == 0


def test_cache_is_bounded_and_keeps_hot_entries() -> None:
    sl: SL = SubList()
    hot = Sub("hot")
    sl.insert(hot)
    for i in range(4 * CACHE_MAX):
        sl.match(f"foo-{i}")
        sl.match_bytes(f"foo-{i}".encode())
        sl.match("hot")
        assert sl.cache_count() <= 2 * CACHE_MAX
        assert len(sl._cache) <= CACHE_MAX
        assert len(sl._bcache) <= CACHE_MAX
    before = sl.stats().num_matches - round(sl.stats().cache_hit_rate * sl.stats().num_matches)
    assert same(sl.match("hot"), [hot])
    after = sl.stats().num_matches - round(sl.stats().cache_hit_rate * sl.stats().num_matches)
    assert before == after, "the hot subject must still be cached"


def test_sweep_gives_old_entries_a_second_chance() -> None:
    sl: SL = SubList()
    sub = Sub("s.*")
    sl.insert(sub)
    first = sl.match("s.0")
    for i in range(1, CACHE_MAX):
        sl.match(f"s.{i}")
    assert len(sl._cache.old) == CACHE_MAX  # the first generation is retired, not dropped
    misses = sl._misses
    assert sl.match("s.0") is first
    assert sl._misses == misses, "a result still in the old generation is not recomputed"
    for i in range(CACHE_MAX, CACHE_MAX + 300):
        sl.match(f"s.{i}")
    assert not sl._cache.old, "the old generation is freed a few entries per miss"
    assert sl.match("s.0") is first


def test_no_cache_never_caches() -> None:
    sl: SL = SubList(cache=False)
    insert_all(sl, "foo", "bar", "baz", "foo.bar.baz")
    sl.match("a.b.c")
    sl.match("bar")
    sl.match_bytes(b"bar")
    assert sl.stats().num_cache == 0
    assert sl.stats().cache_hit_rate == 0.0


def test_genid() -> None:
    sl: SL = SubList()
    assert sl.genid == 0
    sub = Sub("foo")
    sl.insert(sub)
    assert sl.genid == 1
    sl.match("foo")
    assert sl.genid == 1
    sl.remove(sub)
    assert sl.genid == 2
    sl.remove(sub)
    assert sl.genid == 2


# -- interest --------------------------------------------------------------------------------

# (subscriptions as (subject, queue), published subject, (plain, queue) interest)
INTEREST = [
    ([("foo", None)], "foo", (1, 0)),
    ([("foo", None)], "bar", (0, 0)),
    ([("foo.*", None)], "foo", (0, 0)),
    ([("foo.*", None)], "foo.bar", (1, 0)),
    ([("foo.*", None)], "foo.bar.baz", (0, 0)),
    ([("foo.>", None)], "foo", (0, 0)),
    ([("foo.>", None)], "foo.bar", (1, 0)),
    ([("foo.>", None)], "foo.bar.baz", (1, 0)),
    ([("*.>", None)], "foo", (0, 0)),
    ([("*.>", None)], "foo.bar", (1, 0)),
    ([("*.>", None)], "foo.bar.baz", (1, 0)),
    ([("*.bar", None)], "foo.bar", (1, 0)),
    ([("*.bar", None)], "foo.baz", (0, 0)),
    ([("*", None)], "foo", (1, 0)),
    ([("*", None)], "foo.bar", (0, 0)),
    ([("foo", "bar")], "foo", (0, 1)),
    ([("foo", "bar")], "foo.bar", (0, 0)),
    ([("foo", "bar"), ("foo", "baz")], "foo", (0, 2)),
    ([("foo", "bar"), ("foo", "baz"), ("foo", "baz")], "foo", (0, 3)),
    ([("foo.*", "bar"), ("foo.*", "baz"), ("foo.*", "baz")], "foo.bar", (0, 3)),
    ([("foo.*", "bar"), ("foo.*", "baz")], "foo.bar.baz", (0, 0)),
    ([("foo.>", "bar"), ("foo.>", "baz"), ("foo.>", "baz")], "foo.bar.baz", (0, 3)),
    ([("*.>", "bar")], "foo.bar.baz", (0, 1)),
    ([("*.bar", "bar")], "foo.bar", (0, 1)),
    ([("*.bar", "bar")], "foo.bar.baz", (0, 0)),
    ([("*", "bar")], "foo", (0, 1)),
    ([("stream.A.child", None), ("stream.*", None)], "stream.A.child", (1, 0)),
    ([("stream.A.child", None), ("stream.*", None)], "stream.A", (1, 0)),
    # Overlapping subscriptions are all counted (nats-server's NumInterest stops at a `>`).
    ([("foo.>", None), ("foo.bar", None), ("*.bar", "q"), (">", "q")], "foo.bar", (2, 2)),
]


@pytest.mark.parametrize(("subs", "subject", "expected"), INTEREST)
def test_interest(
    sl: SL, subs: list[tuple[str, str | None]], subject: str, expected: tuple[int, int]
) -> None:
    for subj, queue in subs:
        sl.insert(Sub(subj, queue))
    assert sl.num_interest(subject) == expected
    assert sl.has_interest(subject) is (expected != (0, 0))
    sl.match(subject)  # now answered from the cache, when there is one
    assert sl.num_interest(subject) == expected
    assert sl.has_interest(subject) is (expected != (0, 0))


def test_interest_uses_cache() -> None:
    sl: SL = SubList()
    sl.insert(Sub("foo"))
    assert sl.has_interest("foo")
    assert not sl.has_interest("bar")
    assert sl.stats().num_matches == 0
    sl.match("foo")
    sl.match("bar")  # negative results are cached too
    for _ in range(4):
        assert sl.has_interest("foo")
        assert not sl.has_interest("bar")
    st_ = sl.stats()
    assert st_.num_matches == 10
    assert st_.cache_hit_rate == 0.8


# -- reverse match -----------------------------------------------------------------------------

REVERSE_SUBS = ["foo", "bar", "foo.bar", "foo.baz", "foo.bar.baz"]


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("foo", ["foo"]),
        ("bar", ["bar"]),
        ("*", ["foo", "bar"]),
        ("baz", []),
        ("foo.*", ["foo.bar", "foo.baz"]),
        ("*.*", ["foo.bar", "foo.baz"]),
        ("*.bar", ["foo.bar"]),
        ("*.baz", ["foo.baz"]),
        ("bar.*", []),
        ("*.bat", []),
        ("foo.>", ["foo.bar", "foo.baz", "foo.bar.baz"]),
        (">", REVERSE_SUBS),
        ("*.>", ["foo.bar", "foo.baz", "foo.bar.baz"]),
        ("foo..bar", []),
    ],
)
def test_reverse_match(sl: SL, query: str, expected: list[str]) -> None:
    subs = {s: Sub(s) for s in REVERSE_SUBS}
    for s in subs.values():
        sl.insert(s)
    assert same(sl.reverse_match(query), [subs[e] for e in expected])


@pytest.mark.parametrize("query", ["uplink.1.*.*.>", "uplink.1.2.3.>", "uplink.a.b.c"])
def test_reverse_match_wider(sl: SL, query: str) -> None:
    sub = Sub("uplink.*.*.>")
    sl.insert(sub)
    assert same(sl.reverse_match(query), [sub])


def test_reverse_match_wildcard_subscriptions(sl: SL) -> None:
    subs = insert_all(sl, "foo.>", "foo.bar.baz", "*.bar", ">", "foo.*.*")
    assert same(sl.reverse_match("foo.bar"), [subs[0], subs[2], subs[3]])
    assert same(sl.reverse_match(">"), subs)


# -- inspection ------------------------------------------------------------------------------


def test_all(sl: SL) -> None:
    subs = [Sub("foo.bar.baz"), Sub("foo"), Sub("baz"), Sub("foo", "q"), Sub("foo.>", "q")]
    for s in subs:
        sl.insert(s)
    assert Counter(map(id, sl.all())) == Counter(map(id, subs))


def test_stats() -> None:
    sl: SL = SubList()
    foo = Sub("foo")
    sl.insert(foo)
    for _ in range(4):
        sl.match("foo")
    st_ = sl.stats()
    assert st_.cache_hit_rate == 0.75
    assert (st_.num_subs, st_.num_inserts, st_.num_removes, st_.num_matches) == (1, 1, 0, 4)
    assert st_.num_cache == 1
    sl.insert(Sub("foo", "q"))
    sl.insert(Sub("*"))
    sl.match("foo")
    sl.match("bar")
    sl.remove(foo)
    st_ = sl.stats()
    assert (st_.num_subs, st_.num_inserts, st_.num_removes) == (2, 3, 1)
    assert st_.num_cache == 1  # "bar" survived: removing literal foo drops only "foo"
    assert st_.max_fanout == 1
    sl.match("foo")
    st_ = sl.stats()
    assert st_.max_fanout == 2  # one plain subscriber plus one queue group
    assert st_.avg_fanout == 1.5


# -- threads -----------------------------------------------------------------------------------


def test_locked_sublist_threads() -> None:
    lsl: LockedSubList[Sub] = LockedSubList()
    keep = Sub("keep.>")
    lsl.insert(keep)
    errors: list[BaseException] = []

    def worker(n: int) -> None:
        try:
            for i in range(300):
                s = Sub(f"t{n}.{i % 7}", "q" if i % 3 == 0 else None)
                lsl.insert(s)
                assert lsl.has_interest(f"t{n}.{i % 7}")
                assert keep in lsl.match(f"keep.{n}").psubs
                assert keep in lsl.match_bytes(f"keep.{n}".encode()).psubs
                lsl.num_interest(f"t{n}.x")
                lsl.reverse_match(f"t{n}.*")
                if i % 2:
                    assert lsl.remove(s)
                else:
                    lsl.remove_batch([s])
        except BaseException as e:
            errors.append(e)

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert lsl.count() == 1
    assert lsl.all() == [keep]
    assert lsl.genid == 1 + 4 * 300 * 2
    assert lsl.stats().num_subs == 1


# -- oracles -----------------------------------------------------------------------------------

# "\udcff" is the byte 0xff of a non-UTF-8 subject, as the server decodes it (surrogateescape).
SUB_TOKENS = ["a", "b", "c", "\udcff", "*", ">"]
PUB_TOKENS = ["a", "b", "c", "d", "\udcff", "*", ">"]
sub_subject_st = (
    st.lists(st.sampled_from(SUB_TOKENS), min_size=1, max_size=4)
    .map(".".join)
    .filter(is_valid_subject)
)
pub_subject_st = st.lists(st.sampled_from(PUB_TOKENS), min_size=1, max_size=5).map(".".join)
sub_st = st.builds(Sub, sub_subject_st, st.sampled_from([None, None, "q1", "q2"]))


def wire(subject: str) -> bytes:
    return subject.encode("utf-8", "surrogateescape")


def brute(subs: Iterable[Sub], subject: str) -> list[Sub]:
    if not is_valid_subject(subject.replace("*", "x").replace(">", "x")):
        return []  # empty tokens: the trie answers nothing
    return [s for s in subs if match_literal(subject, s.subject)]


def check_all(sl: SL, subs: list[Sub], subjects: list[str]) -> None:
    for subject in subjects:
        want = brute(subs, subject)
        for _ in range(2):  # miss, then hit
            assert same(sl.match(subject), want), subject
            assert same(sl.match_bytes(wire(subject)), want), subject
        plain = sum(1 for s in want if s.queue is None)
        assert sl.num_interest(subject) == (plain, len(want) - plain)
        assert sl.has_interest(subject) is bool(want)
    assert sl.count() == len(subs)
    assert Counter(map(id, sl.all())) == Counter(map(id, subs))


@settings(max_examples=150, deadline=None)
@given(
    cache=st.booleans(),
    subs=st.lists(sub_st, max_size=25),
    subjects=st.lists(pub_subject_st, min_size=1, max_size=15),
    data=st.data(),
)
def test_match_oracle(
    cache: bool, subs: list[Sub], subjects: list[str], data: st.DataObject
) -> None:
    sl: SL = SubList(cache=cache)
    for s in subs:
        sl.insert(s)
    check_all(sl, subs, subjects)
    doomed = data.draw(st.lists(st.sampled_from(subs), unique_by=id) if subs else st.just([]))
    single = data.draw(st.booleans())
    if single:
        for s in doomed:
            assert sl.remove(s)
    else:
        sl.remove_batch(doomed)
    kept = [s for s in subs if all(s is not d for d in doomed)]
    check_all(sl, kept, subjects)
    for s in doomed:
        assert not sl.remove(s)
    check_all(sl, kept, subjects)
    assert (sl.num_levels() == 0) is (not kept)


@settings(max_examples=150, deadline=None)
@given(subs=st.lists(sub_st, max_size=20), queries=st.lists(sub_subject_st, max_size=10))
def test_reverse_match_oracle(subs: list[Sub], queries: list[str]) -> None:
    sl: SL = SubList()
    for s in subs:
        sl.insert(s)
    for q in queries:
        assert same(sl.reverse_match(q), [s for s in subs if subjects_collide(q, s.subject)]), q


_PURE = native.load_pure("pynatsd.sublist")


def ids(r: Any) -> tuple[tuple[int, ...], tuple[tuple[int, ...], ...]]:
    """A result as subscriber identities in order, comparable across the two paths' classes."""
    return tuple(map(id, r.psubs)), tuple(tuple(map(id, g)) for g in r.qsubs)


@pytest.mark.skipif(not native.select().compiled, reason="the pure-Python path is active")
@settings(max_examples=150, deadline=None)
@given(
    subs=st.lists(sub_st, max_size=25),
    subjects=st.lists(pub_subject_st, min_size=1, max_size=15),
    doomed=st.integers(0, 25),
)
def test_compiled_sublist_agrees_with_pure(
    subs: list[Sub], subjects: list[str], doomed: int
) -> None:
    assert native.is_compiled(sublist)
    compiled: SL = SubList()
    pure = _PURE.SubList()
    for s in subs:
        compiled.insert(s)
        pure.insert(s)
    compiled.remove_batch(subs[:doomed])
    pure.remove_batch(subs[:doomed])
    for subject in subjects:
        for _ in range(2):  # miss, then hit
            assert ids(compiled.match(subject)) == ids(pure.match(subject))
            assert ids(compiled.match_bytes(wire(subject))) == ids(pure.match_bytes(wire(subject)))
        assert ids(compiled.reverse_match(subject)) == ids(pure.reverse_match(subject))
        assert compiled.num_interest(subject) == pure.num_interest(subject)
        assert compiled.has_interest(subject) == pure.has_interest(subject)
    assert compiled.count() == pure.count()
    assert compiled.num_levels() == pure.num_levels()
    assert astuple(compiled.stats()) == astuple(pure.stats())


class SubListMachine(RuleBasedStateMachine):
    """Interleaves inserts, removes and matches so the cache outlives many changes."""

    @initialize(cache=st.booleans())
    def setup(self, cache: bool) -> None:
        self.sl: SL = SubList(cache=cache)
        self.subs: list[Sub] = []
        self.genid = 0

    @rule(sub=sub_st)
    def insert(self, sub: Sub) -> None:
        # Matching the subject itself before and after is what exposes a cache entry that the
        # change failed to invalidate.
        self.match(sub.subject)
        self.sl.insert(sub)
        self.subs.append(sub)
        self.genid += 1
        self.match(sub.subject)

    @precondition(lambda self: self.subs)
    @rule(data=st.data())
    def remove(self, data: st.DataObject) -> None:
        i = data.draw(st.integers(0, len(self.subs) - 1))
        sub = self.subs[i]
        self.match(sub.subject)
        assert self.sl.remove(self.subs.pop(i))
        self.genid += 1
        self.match(sub.subject)

    @precondition(lambda self: self.subs)
    @rule(data=st.data())
    def remove_batch(self, data: st.DataObject) -> None:
        doomed = data.draw(st.lists(st.sampled_from(self.subs), unique_by=id, min_size=1))
        self.sl.remove_batch(doomed)
        self.subs = [s for s in self.subs if all(s is not d for d in doomed)]
        self.genid += 1

    @rule(subject=pub_subject_st)
    def publish(self, subject: str) -> None:
        self.match(subject)

    def match(self, subject: str) -> None:
        want = brute(self.subs, subject)
        assert same(self.sl.match(subject), want)
        assert same(self.sl.match_bytes(wire(subject)), want)

    @invariant()
    def counts(self) -> None:
        assert self.sl.count() == len(self.subs)
        assert self.sl.genid == self.genid


SubListMachine.TestCase.settings = settings(max_examples=60, stateful_step_count=40, deadline=None)
test_sublist_machine = SubListMachine.TestCase
