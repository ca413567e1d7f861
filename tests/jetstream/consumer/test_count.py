"""`PendingCount` alone, through its `CountOwner`, over a real memory store."""

from __future__ import annotations

from _consumer_fakes import FakeConsumer

from pynatsd.jetstream.consumer.count import PendingCount


def owner_with(filters: list[str], subjects: list[str]) -> FakeConsumer:
    owner = FakeConsumer(filter_subjects=filters)
    for subject in subjects:
        owner.stream.add(subject)
    return owner


def test_one_literal_filter_is_counted_by_the_store() -> None:
    owner = owner_with(["s.a"], ["s.a", "s.b", "s.a"])
    count = PendingCount(owner)
    assert count.cheap and count.num_pending() == 2
    owner.state.sseq = 2
    count.npc = 2  # as the pump keeps it along a delivery
    assert count.num_pending() == 2  # the store did not change: kept
    owner.stream.add("s.a")
    assert count.num_pending() == 2  # it did: counted again from sseq 2 (seqs 3 and 4)


def test_a_wildcard_is_counted_once_and_kept() -> None:
    owner = owner_with(["s.*"], ["s.a", "s.b", "x.c"])
    count = PendingCount(owner)
    assert not count.cheap and count.num_pending() == 2
    owner.stream.add("s.c")
    assert count.num_pending() == 2  # kept: the pump adds new messages itself
    count.forget()
    assert count.num_pending() == 3


def test_several_filters_and_the_skip_list() -> None:
    owner = owner_with(["s.a", "s.b"], ["s.a", "s.b", "s.c", "s.a"])
    count = PendingCount(owner)
    assert count.num_pending() == 3
    owner.state.lss, owner.state.lss_resume = [1, 2], 4
    count.forget()
    assert count.start() == 5 and count.num_pending() == 2  # the two in the skip list


def test_new_filters() -> None:
    owner = owner_with(["s.a"], ["s.a", "s.b"])
    count = PendingCount(owner)
    assert count.num_pending() == 1
    owner.filters = []
    count.refilter()
    assert count.num_pending() == 2
