"""`PriorityGroups` alone, through its `PriorityOwner`, over a real `PullQueue`: pins,
overflow and prioritized order."""

from __future__ import annotations

import json

from _consumer_fakes import NS, FakeConsumer

from pynatsd.jetstream.consumer.priority import PriorityGroups, pin_header
from pynatsd.jetstream.consumer.waiting import PriorityRequest, PullQueue, PullRequest


def groups(policy: str) -> tuple[PriorityGroups, PullQueue, FakeConsumer]:
    owner = FakeConsumer(
        max_waiting=512,
        priority_policy=policy,
        priority_groups=["g"],
        priority_timeout=60 * NS,
    )
    q = PullQueue(owner)
    q.find_target = lambda wr: True  # type: ignore[method-assign]
    return PriorityGroups(owner, q), q, owner


def request(reply: str, **pg: object) -> PullRequest:
    return PullRequest(reply, 10, 0, False, 0, 0, 0, pg=PriorityRequest(group="g", **pg))  # type: ignore[arg-type]


def test_the_first_request_to_get_a_message_is_pinned() -> None:
    p, q, owner = groups("pinned_client")
    q.requests.extend([request("a"), request("b")])
    first = p.next_waiting(1, 0)
    assert first is not None and first.reply == "a"
    assert p.pin_id and owner.called("pinned") == [("pinned", "g", p.pin_id)]
    # Only the pinned client gets messages; the other waits.
    second = p.next_waiting(1, 0)
    assert second is first
    q.requests.remove(first)
    assert p.next_waiting(1, 0) is None
    assert [wr.reply for wr in q.requests] == ["b"]
    assert p.info()[0]["pinned_client_id"] == p.pin_id


def test_a_request_with_another_pin_is_refused() -> None:
    p, _q, owner = groups("pinned_client")
    p.pin_id = "current"
    assert not p.accept_priority_request("r", PriorityRequest(group="g", id="old"))
    assert owner.ajs.sent[0][3] == b"NATS/1.0 423 Nats-Pin-Id mismatch\r\n\r\n"
    assert p.accept_priority_request("r", PriorityRequest(group="g", id="current"))


def test_unpin_and_the_pin_timeout() -> None:
    p, q, owner = groups("pinned_client")
    q.requests.append(request("a"))
    p.next_waiting(1, 0)
    p.unpin("g")
    assert not p.pin_id and owner.called("unpinned") == [("unpinned", "g", "admin")]
    q.requests.append(request("b"))
    p.next_waiting(1, 0)
    owner.ajs.loop.fire()  # the pin's timer
    assert not p.pin_id and owner.called("unpinned")[-1] == ("unpinned", "g", "timeout")


def test_overflow_requests_wait_until_the_consumer_is_behind() -> None:
    p, q, owner = groups("overflow")
    q.requests.append(request("a", min_pending=5))
    owner.pending_count = 2
    assert p.next_waiting(1, 0) is None
    owner.pending_count = 4  # with the message handed out: 5
    assert p.next_waiting(1, 0) is not None


def test_prioritized_requests_go_by_their_priority() -> None:
    p, q, _owner = groups("prioritized")
    for reply, priority in (("low", 5), ("high", 0), ("mid", 2), ("high2", 0)):
        p.add_prioritized(request(reply, priority=priority))
    assert [wr.reply for wr in q.requests] == ["high", "high2", "mid", "low"]


def test_refusals_in_nats_servers_order() -> None:
    p, _q, owner = groups("overflow")
    assert not p.accept_priority_request("r", PriorityRequest(group="g", id="x"))
    assert not p.accept_priority_request("r", PriorityRequest(group="h"))
    assert not p.accept_priority_request("r", PriorityRequest(group="g", priority=10))
    assert [s[3].split(b"\r\n")[0] for s in owner.ajs.sent] == [
        b"NATS/1.0 400 Bad Request - Not a Pinned Client Priority consumer",
        b"NATS/1.0 400 Bad Request - Invalid Priority Group",
        b"NATS/1.0 400 Bad Request - Priority must be between 0 and 9",
    ]


def test_the_pin_header() -> None:
    assert pin_header(b"", "P") == b"NATS/1.0\r\nNats-Pin-Id: P\r\n\r\n"
    assert (
        pin_header(b"NATS/1.0\r\nA: 1\r\n\r\n", "P")
        == b"NATS/1.0\r\nA: 1\r\nNats-Pin-Id: P\r\n\r\n"
    )


def test_the_queue_takes_prioritized_requests_through_its_owner() -> None:
    _p, q, owner = groups("prioritized")
    q.process_next_request("r", json.dumps({"batch": 1, "group": "g", "priority": 3}).encode())
    assert [wr.reply for wr in owner.waiting] == ["r"]  # the fake owner's add_prioritized
