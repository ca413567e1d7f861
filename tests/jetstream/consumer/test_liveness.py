"""`Liveness` alone, through its `LivenessOwner`, with a real `PullQueue` and `Redelivery`:
interest in a push consumer's deliver subject, and deletion when inactive."""

from __future__ import annotations

from _consumer_fakes import NS, FakeConsumer

from pynatsd.jetstream.consumer.liveness import Liveness
from pynatsd.jetstream.consumer.redelivery import Redelivery
from pynatsd.jetstream.consumer.waiting import PullQueue


def liveness(**config: object) -> tuple[Liveness, PullQueue, FakeConsumer]:
    owner = FakeConsumer(**config)
    queue = PullQueue(owner)
    return Liveness(owner, queue, Redelivery(owner, owner.state)), queue, owner


def test_a_push_consumer_follows_interest_in_its_deliver_subject() -> None:
    life, _, owner = liveness(deliver_subject="d")
    owner.dthresh = 5 * NS
    life.start()
    assert not owner.active
    assert len(owner.ajs.loop.pending()) == 1  # deleted unless interest comes
    owner.ajs.delivery_interest = True
    owner.ajs.account.stream_import_subs = True  # type: ignore[attr-defined]
    life.interest_changed()
    assert owner.active and owner.called("signal")
    assert not owner.ajs.loop.pending()


def test_an_inactive_push_consumer_is_deleted() -> None:
    life, _, owner = liveness(deliver_subject="d")
    owner.dthresh = 5 * NS
    life.start()
    owner.ajs.loop.fire()
    assert owner.ajs.deleted == ["C"]


def test_a_pull_consumer_is_kept_while_requests_come() -> None:
    life, _queue, owner = liveness()
    owner.dthresh = 3600 * NS
    life.start()
    (_timer,) = owner.ajs.loop.pending()
    owner.ajs.loop.fire()
    assert owner.ajs.deleted == []  # the last request came less than the threshold ago
    assert len(owner.ajs.loop.pending()) == 1
    owner.dthresh = 1  # now long ago
    owner.ajs.loop.fire()
    assert owner.ajs.deleted == ["C"]


def test_acks_restart_the_countdown() -> None:
    life, _, owner = liveness()
    owner.dthresh = 5 * NS
    life.start()
    (first,) = owner.ajs.loop.pending()
    life.ack_activity()
    assert first.cancelled and len(owner.ajs.loop.pending()) == 1
