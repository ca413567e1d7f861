"""`ConsumerReset` alone, through its `ResetOwner`: where a reset may move a consumer, and
its reply."""

from __future__ import annotations

import json

import pytest
from _consumer_fakes import FakeConsumer

from pynatsd.jetstream.consumer.reset import ConsumerReset, decode_reset_request
from pynatsd.jetstream.consumer.state import Pending
from pynatsd.jetstream.errors import ApiError
from pynatsd.protocol.events import Pub


def reset(**config: object) -> tuple[ConsumerReset, FakeConsumer]:
    owner = FakeConsumer(**config)
    for i in range(1, 11):
        owner.stream.add(f"s.{i}")
    owner.state.sseq, owner.state.dseq, owner.state.asflr, owner.state.adflr = 8, 8, 4, 4
    owner.state.pending[5] = Pending(5, 1)
    return ConsumerReset(owner), owner


def test_back_to_the_ack_floor() -> None:
    r, owner = reset()
    assert r.reset_to(0) == 5
    assert (owner.state.sseq, owner.state.dseq, owner.state.pending) == (5, 1, {})
    assert owner.called("forget_delivered") and owner.called("save") and owner.called("signal")


def test_to_a_sequence_the_policy_allows() -> None:
    r, _owner = reset(deliver_policy="by_start_sequence", opt_start_seq=3)
    assert r.reset_to(3) == 3
    with pytest.raises(ApiError, match="below start seq"):
        r.reset_to(2)
    r, _owner = reset(deliver_policy="new")
    with pytest.raises(ApiError, match="not allowed"):
        r.reset_to(2)


def test_the_reply_carries_the_info_and_the_sequence() -> None:
    r, owner = reset()
    header = b"NATS/1.0\r\nNats-Stream-Identity: x\r\n\r\n"
    r.on_reset(None, None, Pub(b"$JS.API.CONSUMER.RESET.S.C", b"rep", header + b"{}", len(header)))  # type: ignore[arg-type]
    ((to, data, reply_header),) = owner.ajs.replies
    assert to == b"rep" and json.loads(data)["reset_seq"] == 5
    assert json.loads(data)["name"] == "C"
    assert reply_header == b"NATS/1.0\r\nNats-Stream-Identity: identity\r\n\r\n"


def test_an_interest_stream_drops_what_is_below_the_new_start() -> None:
    r, owner = reset()
    owner.stream.config.retention = "interest"
    r.reset_to(4)
    assert owner.stream.acked == [1, 2, 3]


def test_request_bodies() -> None:
    assert decode_reset_request(b"") == 0
    assert decode_reset_request(b'{"SEQ": 7}') == 7
    with pytest.raises(ApiError):
        decode_reset_request(b"[1]")
