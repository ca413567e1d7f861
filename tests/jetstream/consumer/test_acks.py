"""`AckTracker` alone, through its `AckOwner` (with the `Redelivery` it queues naks on): acks,
the ack floor, naks, terms."""

from __future__ import annotations

from _consumer_fakes import NS, FakeConsumer

from pynatsd.jetstream.consumer.acks import AckTracker
from pynatsd.jetstream.consumer.redelivery import Redelivery
from pynatsd.jetstream.consumer.status import TERM_UNACKED_DELETED
from pynatsd.protocol.events import Pub

PREFIX = b"$JS.ACK.S.C."


def tracker(**config: object) -> tuple[AckTracker, FakeConsumer]:
    owner = FakeConsumer(**config)
    return AckTracker(owner, owner.state, Redelivery(owner, owner.state), PREFIX), owner


def deliver(acks: AckTracker, owner: FakeConsumer, n: int, now: int = 1) -> None:
    """What the pump does for `n` first deliveries."""
    for _ in range(n):
        seq = owner.state.sseq
        owner.stream.add(f"s.{seq}")
        acks._redelivery.track_pending(seq, owner.state.dseq, now)
        owner.state.sseq += 1
        owner.state.dseq += 1


def ack_msg(sseq: int, dseq: int, body: bytes = b"", dc: int = 1) -> Pub:
    subject = b"%s%d.%d.%d.0.0" % (PREFIX, dc, sseq, dseq)
    return Pub(subject, b"_INBOX.r", body)


def test_acks_in_order_move_the_floor() -> None:
    acks, owner = tracker()
    deliver(acks, owner, 3)
    assert acks.ack(1, 1) and acks.ack(2, 2)
    assert (owner.state.adflr, owner.state.asflr, list(owner.state.pending)) == (2, 2, [3])
    assert acks.ack(3, 3)
    assert (owner.state.adflr, owner.state.asflr, owner.state.pending) == (3, 3, {})
    assert owner.called("save")


def test_an_ack_out_of_order_keeps_the_floor() -> None:
    acks, owner = tracker()
    deliver(acks, owner, 3)
    acks.ack(2, 2)
    assert (owner.state.adflr, owner.state.asflr) == (0, 0)
    acks.ack(1, 1)
    assert (owner.state.adflr, owner.state.asflr) == (2, 2)


def test_an_ack_beyond_what_was_delivered_is_not_answered() -> None:
    acks, owner = tracker()
    deliver(acks, owner, 1)
    assert not acks.ack(5, 5)
    acks.on_ack(None, None, ack_msg(5, 5))  # type: ignore[arg-type]
    assert owner.ajs.replies == []


def test_a_run_of_plain_acks_is_each_ack() -> None:
    acks, owner = tracker()
    deliver(acks, owner, 4)
    acks.on_acks(None, None, [ack_msg(s, s) for s in (1, 2, 4)])  # type: ignore[arg-type]
    assert list(owner.state.pending) == [3]
    assert (owner.state.adflr, owner.state.asflr) == (2, 2)
    assert len(owner.ajs.replies) == 3
    assert owner.called("save") and not owner.called("signal")


def test_a_run_wakes_the_pump_when_a_request_waits() -> None:
    acks, owner = tracker(max_ack_pending=2)
    deliver(acks, owner, 2)
    owner.dthresh = 10 * NS
    acks.on_acks(None, None, [ack_msg(1, 1)])  # type: ignore[arg-type]
    assert owner.called("signal") and owner.called("activity")


def test_ack_all_acks_everything_below() -> None:
    acks, owner = tracker(ack_policy="all")
    deliver(acks, owner, 5)
    acks.ack(3, 3)
    assert list(owner.state.pending) == [4, 5]
    assert (owner.state.adflr, owner.state.asflr) == (3, 3)


def test_a_nak_queues_a_redelivery_and_wakes_the_pump() -> None:
    acks, owner = tracker()
    deliver(acks, owner, 2)
    acks.on_ack(None, None, ack_msg(2, 2, b"-NAK"))  # type: ignore[arg-type]
    assert list(acks._redelivery.rdq) == [2] and acks._redelivery.rdqi == {2}
    assert owner.called("advise_nak") == [("advise_nak", 2, 2, 1)]
    assert owner.called("signal")


def test_a_nak_with_a_delay_waits_instead() -> None:
    acks, owner = tracker()
    deliver(acks, owner, 1)
    acks.on_ack(None, None, ack_msg(1, 1, b'-NAK {"delay": 5000000000}'))  # type: ignore[arg-type]
    assert not acks._redelivery.rdq
    assert owner.state.pending[1].ts > 0


def test_term_acks_with_the_advisory() -> None:
    acks, owner = tracker()
    deliver(acks, owner, 1)
    acks.on_ack(None, None, ack_msg(1, 1, b"+TERM gone"))  # type: ignore[arg-type]
    assert owner.state.pending == {}
    assert owner.called("advise_terminated") == [("advise_terminated", 1, 1, 1, "gone")]


def test_next_asks_the_owner_for_more() -> None:
    acks, owner = tracker()
    deliver(acks, owner, 1)
    acks.on_ack(None, None, ack_msg(1, 1, b"+NXT 5"))  # type: ignore[arg-type]
    assert owner.called("next") == [("next", "_INBOX.r", b" 5")]
    assert owner.ajs.replies == []


def test_a_removed_message_is_terminated() -> None:
    acks, owner = tracker()
    deliver(acks, owner, 2)
    assert acks.removed(1)
    assert not acks.removed(7)
    assert owner.called("advise_terminated") == [
        ("advise_terminated", 1, 1, 1, TERM_UNACKED_DELETED)
    ]
    assert (owner.state.adflr, owner.state.asflr) == (1, 1)


def test_a_purge_acknowledges_what_went() -> None:
    acks, owner = tracker()
    deliver(acks, owner, 4)
    acks._redelivery.add_to_rdq(2)
    owner.stream.store.purge()
    acks.purged(5)
    assert owner.state.pending == {} and not acks._redelivery.rdq
    assert (owner.state.adflr, owner.state.asflr) == (4, 4)


def test_needs_ack() -> None:
    acks, owner = tracker()
    deliver(acks, owner, 2)
    acks.ack(1, 1)
    assert not acks.needs_ack(1, "s.1")
    assert acks.needs_ack(2, "s.2")  # pending
    assert acks.needs_ack(9, "s.9")  # not yet delivered
