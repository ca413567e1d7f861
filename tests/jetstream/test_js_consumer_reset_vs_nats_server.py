"""`$JS.API.CONSUMER.RESET.<stream>.<consumer>` side by side with nats-server -js: the same
reset requests (empty, with a sequence, malformed, refused by the deliver policy) and the
deliveries after them, replies compared as JSON after normalising times."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from support.jspair import Step, assert_same, side_by_side
from support.natsserver import nats_server_binary

pytestmark = pytest.mark.skipif(nats_server_binary() is None, reason="nats-server not installed")

API = "$JS.API"


def stream(name: str, **cfg: Any) -> Step:
    return ("req", f"{API}.STREAM.CREATE.{name}", {"name": name, **cfg})


def durable(stream_name: str, name: str, **cfg: Any) -> Step:
    return (
        "req",
        f"{API}.CONSUMER.CREATE.{stream_name}.{name}",
        {"stream_name": stream_name, "config": {"durable_name": name, **cfg}},
    )


def reset(
    stream_name: str, name: str, body: Any = "", headers: dict[str, str] | None = None
) -> Step:
    step: Step = ("req", f"{API}.CONSUMER.RESET.{stream_name}.{name}", body)
    return (*step, headers) if headers else step


def fetch(stream_name: str, name: str, batch: int) -> Step:
    return (
        "fetch",
        f"{API}.CONSUMER.MSG.NEXT.{stream_name}.{name}",
        {"batch": batch, "no_wait": True},
        0.3,
    )


def publish(subject: str, n: int) -> list[Step]:
    return [("pub", f"{subject}.{i}", f"m{i}") for i in range(1, n + 1)]


SCENARIOS: dict[str, list[Step]] = {
    "reset to the ack floor and to a sequence": [
        stream("S", subjects=["s.>"]),
        *publish("s", 10),
        durable("S", "C", ack_policy="explicit"),
        fetch("S", "C", 3),
        # Back to the ack floor: the three pending messages come again, as first deliveries.
        reset("S", "C"),
        fetch("S", "C", 2),
        reset("S", "C", {"seq": 5}),
        fetch("S", "C", 2),
        ("req", f"{API}.CONSUMER.INFO.S.C", ""),
        reset("S", "C", {}),
        reset("S", "C", "null"),
        reset("S", "C", {"SEQ": 9, "other": True}),
        fetch("S", "C", 5),
        reset("S", "C", {"seq": 100}),
        fetch("S", "C", 1),
        reset("S", "C", {"seq": 0}),
        ("req", f"{API}.INFO", ""),
    ],
    "malformed reset requests": [
        stream("S", subjects=["s.>"]),
        *publish("s", 3),
        durable("S", "C", ack_policy="explicit"),
        reset("S", "C", "{bad"),
        reset("S", "C", " "),
        reset("S", "C", "[]"),
        reset("S", "C", {"seq": -1}),
        reset("S", "C", {"seq": "2"}),
        reset("S", "C", '{"seq": 1.5}'),
        reset("S", "C", '{"seq": 1e2}'),
        reset("S", "C", {"seq": 2}, {"Nats-Required-Api-Level": "99"}),
        reset("S", "C", {"seq": 2}, {"Nats-Required-Api-Level": "x"}),
        reset("S", "C", {"seq": 2}, {"Nats-Required-Api-Level": "1"}),
        # The stream's identity comes back in a header when the request asks for it.
        reset("S", "C", {"seq": 2}, {"Nats-Stream-Identity": "anything"}),
        reset("S", "C", "[]", {"Nats-Stream-Identity": "anything"}),
        # Nobody answers for a consumer or a stream that does not exist.
        reset("S", "NOPE"),
        reset("NOPE", "C"),
        ("req", f"{API}.CONSUMER.INFO.S.C", ""),
    ],
    "deliver policies": [
        stream("S", subjects=["s.>"]),
        *publish("s", 6),
        durable(
            "S", "SEQ", ack_policy="explicit", deliver_policy="by_start_sequence", opt_start_seq=4
        ),
        reset("S", "SEQ", {"seq": 2}),
        reset("S", "SEQ", {"seq": 3}),
        reset("S", "SEQ", {"seq": 4}),
        reset("S", "SEQ", {"seq": 6}),
        fetch("S", "SEQ", 2),
        reset("S", "SEQ"),
        durable(
            "S",
            "PAST",
            ack_policy="explicit",
            deliver_policy="by_start_time",
            opt_start_time="2001-01-01T00:00:00Z",
        ),
        reset("S", "PAST", {"seq": 1}),
        durable(
            "S",
            "FUTURE",
            ack_policy="explicit",
            deliver_policy="by_start_time",
            opt_start_time="2100-01-01T00:00:00Z",
        ),
        reset("S", "FUTURE", {"seq": 6}),
        reset("S", "FUTURE"),
        durable("S", "LAST", ack_policy="explicit", deliver_policy="last"),
        reset("S", "LAST", {"seq": 2}),
        reset("S", "LAST"),
        durable("S", "NEW", ack_policy="none", deliver_policy="new"),
        reset("S", "NEW", {"seq": 1}),
        durable("S", "LPS", ack_policy="explicit", deliver_policy="last_per_subject"),
        reset("S", "LPS", {"seq": 1}),
        reset("S", "LPS"),
    ],
    "push consumer": [
        stream("S", subjects=["s.>"]),
        *publish("s", 4),
        ("watch", "deliver.here"),
        durable("S", "PUSH", ack_policy="explicit", deliver_subject="deliver.here"),
        ("collect", "deliver.here", 0.3),
        reset("S", "PUSH", {"seq": 3}),
        ("collect", "deliver.here", 0.3),
        reset("S", "PUSH"),
        ("collect", "deliver.here", 0.3),
    ],
    "interest stream drops what nobody needs any more": [
        stream("I", subjects=["i.>"], retention="interest"),
        durable("I", "A", ack_policy="explicit"),
        durable("I", "B", ack_policy="explicit", filter_subject="i.1"),
        *publish("i", 5),
        reset("I", "A", {"seq": 4}),
        ("req", f"{API}.STREAM.INFO.I", ""),
        fetch("I", "A", 5),
        reset("I", "A", {"seq": 1}),
        ("req", f"{API}.CONSUMER.INFO.I.A", ""),
    ],
}


@pytest.mark.parametrize("name", list(SCENARIOS))
async def test_reset_as_nats_server(tmp_path: Path, name: str) -> None:
    expected, got = await side_by_side(tmp_path, SCENARIOS[name])
    assert_same(expected, got)
