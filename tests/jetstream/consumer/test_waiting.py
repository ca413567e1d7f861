"""`PullQueue` alone, through its `PullOwner`: pull requests accepted, refused, queued, picked
and ended with nats-server's statuses."""

from __future__ import annotations

import json

from _consumer_fakes import NS, FakeConsumer

from pynatsd.jetstream.consumer.waiting import PullQueue


def queue(**config: object) -> tuple[PullQueue, FakeConsumer]:
    owner = FakeConsumer(**{"max_waiting": 512, **config})
    return PullQueue(owner), owner


def statuses(owner: FakeConsumer) -> list[tuple[str, bytes]]:
    return [(to, header.split(b"\r\n")[0]) for to, _, _, header, _ in owner.ajs.sent]


def test_a_request_waits_and_the_pump_runs() -> None:
    q, owner = queue()
    q.process_next_request("r1", b'{"batch": 3, "expires": 1000000000}')
    assert [(wr.reply, wr.n) for wr in q.requests] == [("r1", 3)]
    assert owner.called("pump")
    assert len(owner.ajs.loop.pending()) == 1  # its expiry


def test_a_plain_number_is_the_batch() -> None:
    assert PullQueue._parse_next_request(b"5")[0] == 5
    assert PullQueue._parse_next_request(b"")[0] == 1


def test_refusals_are_answered_with_nats_servers_statuses() -> None:
    q, owner = queue(max_batch=2)
    q.process_next_request("r1", b'{"batch": 3}')
    q.process_next_request("r2", b'{"batch": "x"}')
    q.process_next_request("r3", b'{"no_wait": true}')  # nothing pending
    assert statuses(owner) == [
        ("r1", b"NATS/1.0 409 Exceeded MaxRequestBatch of 2"),
        ("r2", b"NATS/1.0 400 Bad Request - json: cannot unmarshal string into Go struct "
               b"field .batch of type int"),
        ("r3", b"NATS/1.0 404 No Messages"),
    ]  # fmt: skip
    assert not q.requests


def test_a_push_consumer_takes_no_requests() -> None:
    q, owner = queue(deliver_subject="d")
    q.process_next_request("r1", b"1")
    assert statuses(owner) == [("r1", b"NATS/1.0 409 Consumer is push based")]


def test_max_waiting() -> None:
    q, owner = queue(max_waiting=1)
    owner.ajs.interest = {"r1"}
    q.process_next_request("r1", b'{"batch": 1, "expires": 1000000000}')
    q.process_next_request("r2", b'{"batch": 1, "expires": 1000000000}')
    assert [wr.reply for wr in q.requests] == ["r1"]
    assert statuses(owner) == [("r2", b"NATS/1.0 409 Exceeded MaxWaiting")]


def test_requests_take_messages_in_turn() -> None:
    q, _owner = queue()
    q.process_next_request("r1", b'{"batch": 2}')
    q.process_next_request("r2", b'{"batch": 1}')
    q.find_target = lambda wr: True  # type: ignore[method-assign]
    picked = [q.next_waiting(10, 0) for _ in range(4)]
    assert [wr.reply if wr else None for wr in picked] == ["r1", "r2", "r1", None]


def test_max_bytes_ends_a_request_that_a_message_does_not_fit() -> None:
    q, owner = queue()
    q.process_next_request("r1", json.dumps({"batch": 5, "max_bytes": 100}).encode())
    assert q.next_waiting(500, 0) is None
    assert statuses(owner) == [("r1", b"NATS/1.0 409 Message Size Exceeds MaxBytes")]


def test_an_expired_request_times_out_and_heartbeats_are_sent() -> None:
    q, owner = queue()
    owner.ajs.interest = {"r1", "r2"}
    q.process_next_request("r1", json.dumps({"batch": 2, "expires": 1}).encode())
    q.process_next_request(
        "r2", json.dumps({"batch": 1, "expires": 60 * NS, "idle_heartbeat": 1}).encode()
    )
    owner.state.dseq, owner.state.sseq = 4, 9
    owner.ajs.loop.fire()  # the requests' timer
    sent = owner.ajs.sent
    assert sent[0][0] == "r1" and sent[0][3].startswith(b"NATS/1.0 408 Request Timeout\r\n")
    assert b"Nats-Pending-Messages: 2\r\n" in sent[0][3]
    assert sent[1][0] == "r2" and sent[1][3] == (
        b"NATS/1.0 100 Idle Heartbeat\r\nNats-Last-Consumer: 3\r\nNats-Last-Stream: 8\r\n\r\n"
    )
    assert [wr.reply for wr in q.requests] == ["r2"]


def test_a_deleted_consumer_ends_every_request() -> None:
    q, owner = queue()
    q.process_next_request("r1", b"1")
    q.process_next_request("r2", b"1")
    q.end_all(b"NATS/1.0 409 Consumer Deleted\r\n\r\n")
    assert [s[0] for s in statuses(owner)] == ["r1", "r2"] and not q.requests
