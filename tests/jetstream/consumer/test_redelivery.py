"""`Redelivery` alone, through its `RedeliveryOwner`: the ack wait timer, backoff, the
redelivery queue, `max_deliver`."""

from __future__ import annotations

from _consumer_fakes import NS, FakeConsumer

from pynatsd.jetstream.consumer.redelivery import Redelivery


def redelivery(**config: object) -> tuple[Redelivery, FakeConsumer]:
    owner = FakeConsumer(**config)
    return Redelivery(owner, owner.state), owner


def deliver(r: Redelivery, owner: FakeConsumer, n: int, now: int = 1) -> None:
    """What the pump does for `n` first deliveries."""
    for _ in range(n):
        seq = owner.state.sseq
        owner.stream.add(f"s.{seq}")
        r.track_pending(seq, owner.state.dseq, now)
        owner.state.sseq += 1
        owner.state.dseq += 1


def test_what_passes_its_ack_wait_is_queued_for_redelivery() -> None:
    r, owner = redelivery()
    deliver(r, owner, 2, now=0)  # delivered long ago
    assert len(owner.ajs.loop.pending()) == 1  # the ack wait timer
    owner.ajs.loop.fire()
    assert list(r.rdq) == [1, 2] and owner.called("signal")
    assert len(owner.ajs.loop.pending()) == 1  # and again for what still waits


def test_what_reached_max_deliver_is_dropped_with_the_advisory() -> None:
    r, owner = redelivery(max_deliver=1)
    deliver(r, owner, 2, now=0)
    owner.ajs.loop.fire()
    assert not r.rdq and owner.state.pending == {}
    assert owner.called("advise_max_deliver") == [
        ("advise_max_deliver", 1, 1),
        ("advise_max_deliver", 2, 1),
    ]
    assert (owner.state.adflr, owner.state.asflr) == (2, 2)


def test_backoff_sets_each_ack_wait() -> None:
    r, _owner = redelivery(backoff=[1 * NS, 5 * NS])
    assert r.ack_wait_for(1) == 1 * NS + 1_000_000
    r.inc_delivery_count(1)
    assert r.ack_wait_for(1) == 5 * NS + 1_000_000
    r.inc_delivery_count(1)
    assert r.ack_wait_for(1) == 5 * NS + 1_000_000  # the last step repeats


def test_delivery_counts() -> None:
    r, _owner = redelivery()
    assert r.delivery_count(3) == 1
    assert r.inc_delivery_count(3) == 2
    r.dec_delivery_count(3)
    assert r.delivery_count(3) == 1 and r._state.rdc == {}


def test_the_queue_keeps_order_and_membership() -> None:
    r, _owner = redelivery()
    r.add_to_rdq(4)
    r.add_to_rdq(2)
    r.add_to_rdq(9, front=True)
    assert list(r.rdq) == [9, 4, 2] and r.rdqi == {2, 4, 9}
    r.remove_from_rdq(4)
    r.remove_from_rdq(7)
    assert list(r.rdq) == [9, 2] and r.rdqi == {2, 9}
    r.clear()
    assert not r.rdq and not r.rdqi


def test_max_ack_pending() -> None:
    r, owner = redelivery(max_ack_pending=2)
    deliver(r, owner, 1)
    assert not r.at_max_ack_pending()
    deliver(r, owner, 1)
    assert r.at_max_ack_pending()


def test_stop_cancels_the_timer() -> None:
    r, owner = redelivery()
    deliver(r, owner, 1)
    r.stop()
    assert not owner.ajs.loop.pending()
