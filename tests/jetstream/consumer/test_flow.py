"""`PushFlow` alone, through its `FlowOwner`: the flow control window and idle heartbeats."""

from __future__ import annotations

from _consumer_fakes import NS, FakeConsumer

from pynatsd.jetstream.consumer.flow import FC_MAX_PENDING, PushFlow
from pynatsd.protocol.events import Pub


def flow(**config: object) -> tuple[PushFlow, FakeConsumer]:
    owner = FakeConsumer(**{"deliver_subject": "d", "flow_control": True, **config})
    owner.active = True
    return PushFlow(owner), owner


def test_a_flow_control_request_once_half_the_window_is_out() -> None:
    f, owner = flow()
    assert f.maxpb == FC_MAX_PENDING // 16
    f.delivered(f.maxpb // 2)
    assert not owner.ajs.pushed
    f.delivered(1)
    (sent,) = owner.ajs.pushed
    assert sent[0] == "d" and sent[2] == f.fcid.encode() and f.fcid.startswith("$JS.FC.S.C.")
    assert sent[3] == b"NATS/1.0 100 FlowControl Request\r\n\r\n"


def test_the_answer_widens_the_window() -> None:
    f, owner = flow()
    f.delivered(f.maxpb)
    window = f.maxpb
    f.on_flow_control(None, None, Pub(f.fcid.encode(), b"", b""))  # type: ignore[arg-type]
    assert f.maxpb == 2 * window and f.fcid == "" and f.pbytes == 0
    assert owner.called("signal")


def test_an_answer_acknowledges_for_ack_policy_flow_control() -> None:
    f, owner = flow(ack_policy="flow_control")
    f.send_flow_control()
    header = b"NATS/1.0\r\nNats-Last-Stream: 7\r\nNats-Last-Consumer: 5\r\n\r\n"
    f.on_flow_control(None, None, Pub(f.fcid.encode(), b"", header, len(header)))  # type: ignore[arg-type]
    assert owner.called("ack") == [("ack", 7, 5)]


def test_idle_heartbeats_carry_the_sequences_and_a_stall() -> None:
    f, owner = flow(idle_heartbeat=NS)
    owner.state.dseq, owner.state.sseq = 3, 10
    f.reset_heartbeat()
    f.send_flow_control()
    owner.ajs.loop.fire()
    header = owner.ajs.pushed[-1][3]
    assert header == (
        b"NATS/1.0 100 Idle Heartbeat\r\nNats-Last-Consumer: 2\r\nNats-Last-Stream: 9\r\n"
        b"Nats-Consumer-Stalled: " + f.fcid.encode() + b"\r\n\r\n"
    )
    assert len(owner.ajs.loop.pending()) == 1  # the next heartbeat
    f.stop()
    assert not owner.ajs.loop.pending()
