"""`DeliveryPump` alone, through its `PumpOwner`, driving the real parts it works on
(redelivery, the reader, the request queue, priority groups, the count, flow control): what
goes out, to whom, with which ack reply."""

from __future__ import annotations

from _consumer_fakes import FakeConsumer

from pynatsd.jetstream.consumer.acks import AckTracker
from pynatsd.jetstream.consumer.count import PendingCount
from pynatsd.jetstream.consumer.flow import PushFlow
from pynatsd.jetstream.consumer.priority import PriorityGroups
from pynatsd.jetstream.consumer.pump import DeliveryPump
from pynatsd.jetstream.consumer.reader import StreamReader
from pynatsd.jetstream.consumer.redelivery import Redelivery
from pynatsd.jetstream.consumer.waiting import PullQueue
from pynatsd.server.subscription import InternalClient, InternalSubscription

PREFIX = b"$JS.ACK.S.C."


def pump(n: int = 3, **config: object) -> tuple[DeliveryPump, PullQueue, FakeConsumer]:
    owner = FakeConsumer(**{"max_waiting": 512, **config})
    for i in range(1, n + 1):
        owner.stream.add(f"s.{i}", b"m%d" % i)
    redelivery = Redelivery(owner, owner.state)
    acks = AckTracker(owner, owner.state, redelivery, PREFIX)
    queue = PullQueue(owner)
    owner.waiting = queue.requests
    count = PendingCount(owner)
    reader = StreamReader(owner, acks, redelivery, count, queue.requests)
    priority = PriorityGroups(owner, queue)
    p = DeliveryPump(owner, redelivery, reader, queue, priority, count, PushFlow(owner), PREFIX)
    return p, queue, owner


def test_push_delivers_each_message_with_its_ack_reply() -> None:
    p, _, owner = pump(deliver_subject="d")
    owner.active = True
    p.pump()
    assert [(to, subject, data) for to, subject, _, _, data in owner.ajs.pushed] == [
        ("d", "s.1", b"m1"),
        ("d", "s.2", b"m2"),
        ("d", "s.3", b"m3"),
    ]
    replies = [reply.split(b".") for _, _, reply, _, _ in owner.ajs.pushed]
    # $JS.ACK.<stream>.<consumer>.<delivered count>.<stream seq>.<consumer seq>.<ts>.<pending>
    assert [(r[4], r[5], r[6], r[8]) for r in replies] == [
        (b"1", b"1", b"1", b"2"),
        (b"1", b"2", b"2", b"1"),
        (b"1", b"3", b"3", b"0"),
    ]
    assert sorted(owner.state.pending) == [1, 2, 3]
    assert (owner.state.sseq, owner.state.dseq, owner.state.delivered_sseq) == (4, 4, 3)
    assert owner.ajs.server.flushes == 1


def test_push_waits_for_interest() -> None:
    p, _, owner = pump(deliver_subject="d")
    p.pump()
    assert not owner.ajs.pushed


def test_a_pull_request_gets_its_batch_and_the_rest_waits() -> None:
    p, queue, owner = pump(5, ack_policy="none")
    owner.ajs.interest = {"r"}
    account = owner.ajs.account
    account.sublist.insert(InternalSubscription(InternalClient(account, "t"), "r", print))
    queue.process_next_request("r", b'{"batch": 2, "expires": 1000000000}')
    p.pump()
    assert [(to, subject) for to, subject, *_ in owner.ajs.sent] == [("r", "s.1"), ("r", "s.2")]
    assert not queue.requests and owner.state.sseq == 3
    assert (owner.state.adflr, owner.state.asflr) == (2, 2)  # ack none: acked as delivered


def test_signal_runs_one_pump_soon() -> None:
    p, _queue, owner = pump(deliver_subject="d")
    owner.active = True
    p.signal()
    p.signal()
    assert len(owner.ajs.loop.pending()) == 1
    owner.ajs.loop.fire()
    assert len(owner.ajs.pushed) == 3


def test_a_new_message_is_counted_and_delivered() -> None:
    p, _, owner = pump(0, deliver_subject="d", filter_subject="s.>")
    owner.active = True
    p._count.num_pending()
    seq = owner.stream.add("s.9")
    p.on_new_message(seq, "s.9")
    assert [subject for _, subject, *_ in owner.ajs.pushed] == ["s.9"]


def test_a_push_delivery_nobody_received_rechecks_interest() -> None:
    p, _, owner = pump(1, deliver_subject="d")
    owner.active = True
    owner.ajs.deliver_push = lambda *a: False  # type: ignore[method-assign]
    p.pump()
    assert owner.called("interest_lost")
