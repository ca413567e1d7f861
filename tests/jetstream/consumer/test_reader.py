"""`StreamReader` alone, through its `ReaderOwner`, with a real `Redelivery`, `AckTracker`
and `PendingCount`: redeliveries first, then the skip list, then the stream."""

from __future__ import annotations

from collections import deque

from _consumer_fakes import FakeConsumer

from pynatsd.jetstream.consumer.acks import AckTracker
from pynatsd.jetstream.consumer.count import PendingCount
from pynatsd.jetstream.consumer.reader import StreamReader
from pynatsd.jetstream.consumer.redelivery import Redelivery
from pynatsd.jetstream.consumer.waiting import PullRequest


def reader(**config: object) -> tuple[StreamReader, Redelivery, FakeConsumer]:
    owner = FakeConsumer(**config)
    for i in range(1, 6):
        owner.stream.add(f"s.{i}", b"%d" % i)
    redelivery = Redelivery(owner, owner.state)
    acks = AckTracker(owner, owner.state, redelivery, b"$JS.ACK.S.C.")
    waiting: deque[PullRequest] = deque([PullRequest("r", 10, 0, False, 0, 0, 0)])
    return StreamReader(owner, acks, redelivery, PendingCount(owner), waiting), redelivery, owner


def next_seq(r: StreamReader) -> tuple[int, int] | None:
    found = r.next_msg()
    return None if found is None else (found[0].seq, found[1])


def test_the_stream_in_order_then_nothing() -> None:
    r, _acks, owner = reader()
    assert [next_seq(r) for _ in range(6)] == [(1, 1), (2, 1), (3, 1), (4, 1), (5, 1), None]
    assert owner.state.sseq == 6


def test_redeliveries_come_first_with_their_count() -> None:
    r, acks, _owner = reader()
    next_seq(r)
    next_seq(r)
    acks.add_to_rdq(1)
    assert next_seq(r) == (1, 2)
    assert next_seq(r) == (3, 1)


def test_the_skip_list_before_the_stream() -> None:
    r, _acks, owner = reader()
    owner.state.lss, owner.state.lss_resume = [2, 4], 5
    assert [next_seq(r) for _ in range(2)] == [(2, 1), (4, 1)]
    assert next_seq(r) is None and owner.state.sseq == 6


def test_a_message_no_one_took_is_put_back() -> None:
    r, _acks, owner = reader()
    assert next_seq(r) == (1, 1)
    r.put_back(1, 1)
    assert owner.state.sseq == 1
    r.ahead.clear()
    assert next_seq(r) == (1, 1)


def test_a_message_removed_since_the_read_ahead_is_skipped() -> None:
    r, _acks, owner = reader()
    assert next_seq(r) == (1, 1)
    assert len(r.ahead) == 4
    owner.stream.store.remove_msg(2)
    assert next_seq(r) == (3, 1)


def test_past_max_deliver_is_not_delivered_again() -> None:
    r, acks, owner = reader(max_deliver=1)
    next_seq(r)
    acks.track_pending(1, 1, 0)
    acks.add_to_rdq(1)
    assert next_seq(r) == (2, 1)
    assert owner.called("advise_max_deliver") == [("advise_max_deliver", 1, 1)]
    assert 1 not in owner.state.pending
