"""Pull consumer priority groups (ADR-42) side by side with nats-server -js: the config checks,
the pull request checks, `pinned_client` (the `Nats-Pin-Id` header, pins refused with 423, the
pin TTL, `CONSUMER.UNPIN`, the pinned/unpinned advisories, `priority_groups` in consumer info),
`overflow` (`min_pending`, `min_ack_pending`) and `prioritized` (`priority`). Pin ids differ
from server to server: they are recorded as `<pin>`, and `<pin>` in a request stands for the
last one received (see support/jspair.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from support.jspair import Step, assert_same, side_by_side
from support.natsserver import nats_server_binary

pytestmark = pytest.mark.skipif(nats_server_binary() is None, reason="nats-server not installed")

API = "$JS.API"
PINNED_ADV = "$JS.EVENT.ADVISORY.CONSUMER.PINNED.S.>"
UNPINNED_ADV = "$JS.EVENT.ADVISORY.CONSUMER.UNPINNED.S.>"
WATCH_ADVISORIES: list[Step] = [("watch", PINNED_ADV), ("watch", UNPINNED_ADV)]
COLLECT_ADVISORIES: list[Step] = [("collect", PINNED_ADV, 0.1), ("collect", UNPINNED_ADV, 0.0)]


def stream(name: str, **cfg: Any) -> Step:
    return ("req", f"{API}.STREAM.CREATE.{name}", {"name": name, **cfg})


def durable(name: str, **cfg: Any) -> Step:
    return (
        "req",
        f"{API}.CONSUMER.CREATE.S.{name}",
        {"stream_name": "S", "config": {"durable_name": name, "ack_policy": "explicit", **cfg}},
    )


def pull(name: str, body: Any, seconds: float = 0.45) -> Step:
    """A pull request and what it gets within `seconds` (long enough for EXPIRES to end it)."""
    return ("fetch", f"{API}.CONSUMER.MSG.NEXT.S.{name}", body, seconds)


def pull_to(name: str, inbox: str, body: Any) -> Step:
    """A pull request left waiting; its messages arrive on `inbox` (watched)."""
    return ("send", f"{API}.CONSUMER.MSG.NEXT.S.{name}", body, inbox)


def info(name: str) -> Step:
    return ("req", f"{API}.CONSUMER.INFO.S.{name}", "")


def unpin(name: str, body: Any, stream_name: str = "S") -> Step:
    return ("req", f"{API}.CONSUMER.UNPIN.{stream_name}.{name}", body)


def publish(n: int, first: int = 1) -> list[Step]:
    return [("pub", f"s.{i}", f"m{i}") for i in range(first, first + n)]


PINNED = {"priority_policy": "pinned_client", "priority_groups": ["A"]}
EXPIRES = 200_000_000  # 200 ms

SCENARIOS: dict[str, list[Step]] = {
    "config checks": [
        stream("S", subjects=["s.>"]),
        durable("B1", priority_policy="pinned_client"),
        durable("B2", priority_policy="pinned_client", priority_groups=[""]),
        durable("B3", priority_policy="pinned_client", priority_groups=["a b"]),
        durable("B4", priority_policy="overflow", priority_groups=["x" * 17]),
        durable("B5", priority_groups=["A"]),
        durable("B6", priority_timeout=1000),
        durable("B7", priority_policy="none", priority_groups=["A"]),
        durable("B8", priority_policy="bogus", priority_groups=["A"]),
        (
            "req",
            f"{API}.CONSUMER.CREATE.S.B9",
            '{"stream_name":"S","config":{"priority_policy":null}}',
        ),
        (
            "req",
            f"{API}.CONSUMER.CREATE.S.B9",
            '{"stream_name":"S","config":{"priority_policy":5}}',
        ),
        durable("B10", priority_policy="overflow", priority_groups=["A"], deliver_subject="d.x"),
        # Accepted: two groups, a TTL with another policy, the default pin TTL.
        durable("OK1", priority_policy="overflow", priority_groups=["A", "B"]),
        durable("OK2", priority_policy="prioritized", priority_groups=["A"], priority_timeout=5),
        durable("OK3", **PINNED),
        durable("OK4", priority_policy="pinned_client", priority_groups=["g/1=_-"]),
        # Updates may change the policy and the groups.
        durable("OK1", priority_policy="pinned_client", priority_groups=["C"]),
        durable("OK1", priority_policy="none"),
        ("req", f"{API}.CONSUMER.LIST.S", ""),
    ],
    "pull request checks": [
        stream("S", subjects=["s.>"]),
        *publish(2),
        durable("O", priority_policy="overflow", priority_groups=["A"]),
        durable("P", **PINNED),
        durable("N"),
        pull("P", {"batch": 1, "expires": EXPIRES}),
        pull("P", {"batch": 1, "expires": EXPIRES, "group": "B"}),
        pull("P", {"batch": 1, "expires": EXPIRES, "group": "A", "min_pending": 1}),
        pull("O", {"batch": 1, "expires": EXPIRES, "group": "A", "id": "x"}),
        pull("O", {"batch": 1, "expires": EXPIRES, "group": "A", "priority": 10}),
        pull("O", {"batch": 1, "expires": EXPIRES, "group": "A", "priority": -1}),
        pull("N", {"batch": 1, "expires": EXPIRES, "min_ack_pending": 2}),
        pull("N", {"batch": 1, "expires": EXPIRES, "id": "x"}),
        pull("O", '{"group": 5}'),
        pull("O", '{"group": "A", "min_pending": "x"}'),
        pull("O", '{"group": "A", "min_pending": 1.5}'),
        pull("O", '{"group": "A", "id": 5}'),
        pull("O", '{"group": "A", "priority": "x"}'),
        pull("O", '{"batch": "x"}'),
        pull("O", '{"no_wait": 1}'),
        pull("O", '{"expires": "x"}'),
        # Ignored by a consumer without a policy; a negative minimum is no minimum.
        pull("N", {"batch": 1, "no_wait": True, "group": "Z", "priority": 3}),
        pull("O", {"batch": 1, "no_wait": True, "group": "A", "min_pending": -5}),
        # Not JSON: no priority fields at all, so no group is missing.
        pull("O", "1"),
        ("req", f"{API}.CONSUMER.MSG.NEXT.S.O", "1", {"Nats-Required-Api-Level": "6"}),
    ],
    "pinned client": [
        stream("S", subjects=["s.>"]),
        *WATCH_ADVISORIES,
        *publish(6),
        durable(
            "P",
            priority_policy="pinned_client",
            priority_groups=["A"],
            priority_timeout=30_000_000_000,
        ),
        info("P"),
        pull("P", {"batch": 2, "expires": EXPIRES, "group": "A"}),
        info("P"),
        # While the pin holds: others wait (and time out), a wrong id is refused at once.
        pull("P", {"batch": 1, "expires": EXPIRES, "group": "A"}),
        pull("P", {"batch": 1, "expires": EXPIRES, "group": "A", "id": "bogus"}),
        pull("P", {"batch": 1, "no_wait": True, "group": "A"}),
        pull("P", {"batch": 1, "expires": EXPIRES, "group": "A", "id": "<pin>"}),
        *COLLECT_ADVISORIES,
        unpin("P", ""),
        unpin("P", " "),
        unpin("P", "null"),
        unpin("P", "[]"),
        unpin("P", {}),
        unpin("P", {"group": 5}),
        unpin("P", {"group": "a b"}),
        unpin("P", {"group": "B"}),
        unpin("NOPE", {"group": "A"}),
        unpin("P", {"group": "A"}, stream_name="NOPE"),
        unpin("P", {"GROUP": "A", "extra": 1}),
        *COLLECT_ADVISORIES,
        info("P"),
        # The old pin is refused, the next request without one is pinned anew.
        pull("P", {"batch": 1, "expires": EXPIRES, "group": "A", "id": "<pin>"}),
        pull("P", {"batch": 1, "expires": EXPIRES, "group": "A"}),
        pull("P", {"batch": 1, "expires": EXPIRES, "group": "A", "id": "<pin>", "no_wait": True}),
        *COLLECT_ADVISORIES,
        ("req", f"{API}.CONSUMER.LIST.S", ""),
    ],
    "pin expires after priority_timeout": [
        stream("S", subjects=["s.>"]),
        *WATCH_ADVISORIES,
        *publish(3),
        durable(
            "T",
            priority_policy="pinned_client",
            priority_groups=["A"],
            priority_timeout=1_000_000_000,
        ),
        pull("T", {"batch": 1, "expires": EXPIRES, "group": "A"}),
        info("T"),
        ("sleep", 1.2),
        info("T"),
        *COLLECT_ADVISORIES,
        pull("T", {"batch": 1, "expires": EXPIRES, "group": "A", "id": "<pin>"}),
        pull("T", {"batch": 1, "expires": EXPIRES, "group": "A"}),
        *COLLECT_ADVISORIES,
    ],
    "pins and requests without priority fields or room": [
        stream("S", subjects=["s.>"]),
        ("pub", "s.big", "x" * 200),
        durable("M", priority_policy="pinned_client", priority_groups=["A"]),
        # Too small for the message: ended with 409, and the pin it was given is released.
        pull("M", {"batch": 1, "max_bytes": 10, "expires": EXPIRES, "group": "A"}),
        info("M"),
        pull("M", {"batch": 1, "expires": EXPIRES, "group": "A"}),
        durable("PLAIN", priority_policy="pinned_client", priority_groups=["A"]),
        # A plain batch size has no group: it is served, and pins nobody.
        pull("PLAIN", "1"),
        info("PLAIN"),
    ],
    "pinned client among waiting requests": [
        stream("S", subjects=["s.>"]),
        durable(
            "W",
            priority_policy="pinned_client",
            priority_groups=["A"],
            priority_timeout=30_000_000_000,
        ),
        ("watch", "first.inbox"),
        ("watch", "second.inbox"),
        pull_to("W", "first.inbox", {"batch": 1, "expires": 1_500_000_000, "group": "A"}),
        pull_to("W", "second.inbox", {"batch": 5, "expires": 1_500_000_000, "group": "A"}),
        ("sleep", 0.1),
        *publish(3),
        ("collect", "first.inbox", 0.2),
        ("collect", "second.inbox", 0.0),
        info("W"),
        # The pinned client asks again: the messages the other could not have are its.
        pull("W", {"batch": 5, "expires": EXPIRES, "group": "A", "id": "<pin>"}),
        ("collect", "second.inbox", 1.5),
    ],
    "overflow": [
        stream("S", subjects=["s.>"]),
        *publish(10),
        durable("O", priority_policy="overflow", priority_groups=["A"]),
        pull("O", {"batch": 5, "expires": EXPIRES, "group": "A", "min_pending": 20}),
        pull("O", {"batch": 3, "expires": EXPIRES, "group": "A", "min_pending": 5}),
        # 7 left: a request for at least 7 gets one message (the 7th counts itself), 8 none.
        pull("O", {"batch": 3, "expires": EXPIRES, "group": "A", "min_pending": 8}),
        pull("O", {"batch": 3, "expires": EXPIRES, "group": "A", "min_pending": 7}),
        # 4 awaiting acks now.
        pull("O", {"batch": 2, "expires": EXPIRES, "group": "A", "min_ack_pending": 10}),
        pull("O", {"batch": 2, "expires": EXPIRES, "group": "A", "min_ack_pending": 4}),
        pull(
            "O",
            {"batch": 2, "expires": EXPIRES, "group": "A", "min_ack_pending": 50, "min_pending": 2},
        ),
        pull("O", {"batch": 2, "expires": EXPIRES, "group": "A"}),
        info("O"),
    ],
    "prioritized": [
        stream("S", subjects=["s.>"]),
        durable("R", priority_policy="prioritized", priority_groups=["A"]),
        ("watch", "p5.inbox"),
        ("watch", "p1.inbox"),
        ("watch", "p9.inbox"),
        ("watch", "p1b.inbox"),
        ("watch", "none.inbox"),
        pull_to(
            "R", "p5.inbox", {"batch": 1, "expires": 1_500_000_000, "group": "A", "priority": 5}
        ),
        pull_to("R", "none.inbox", "2"),
        pull_to(
            "R", "p1.inbox", {"batch": 2, "expires": 1_500_000_000, "group": "A", "priority": 1}
        ),
        pull_to(
            "R", "p9.inbox", {"batch": 1, "expires": 1_500_000_000, "group": "A", "priority": 9}
        ),
        pull_to(
            "R", "p1b.inbox", {"batch": 1, "expires": 1_500_000_000, "group": "A", "priority": 1}
        ),
        ("sleep", 0.1),
        info("R"),
        *publish(7),
        ("collect", "p1.inbox", 0.2),
        ("collect", "p1b.inbox", 0.0),
        ("collect", "p5.inbox", 0.0),
        ("collect", "p9.inbox", 0.0),
        ("collect", "none.inbox", 0.0),
    ],
}


def _without_pending(steps: list[Any]) -> list[Any]:
    """The pending count an ack subject ends with, taken out of what the inboxes collected.
    Each publish waits for its PubAck, and nats-server's consumer delivers on its own
    goroutine: whether the next message is stored before it counts pending is a race there."""
    out = []
    for kind, subject, records in steps:
        if kind == "collect":
            records = [
                {**r, "reply": r["reply"].rsplit(".", 1)[0] + ".<pending>"}
                if r["reply"].startswith("$JS.ACK.")
                else r
                for r in records
            ]
        out.append((kind, subject, records))
    return out


@pytest.mark.parametrize("name", list(SCENARIOS))
async def test_priority_groups_as_nats_server(tmp_path: Path, name: str) -> None:
    expected, got = await side_by_side(tmp_path, SCENARIOS[name])
    if name == "prioritized":
        expected, got = _without_pending(expected), _without_pending(got)
    assert_same(expected, got)
