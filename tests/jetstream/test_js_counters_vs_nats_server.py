"""Counter streams (`allow_msg_counter`, `Nats-Incr`, ADR-49) side by side with nats-server -js:
the config errors, increments and their PubAcks (`val`), every refused increment, the stored
`{"val":..}` messages, and counters sourced into an aggregate counter
(`Nats-Counter-Sources`)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import nats
import pytest

from support.jspair import Step, assert_same, run_both, side_by_side, stored_messages

pytestmark = pytest.mark.skipif(
    __import__("support.natsserver", fromlist=["x"]).nats_server_binary() is None,
    reason="nats-server not installed",
)

API = "$JS.API"


def stream(name: str, **cfg: Any) -> Step:
    return ("req", f"{API}.STREAM.CREATE.{name}", {"name": name, **cfg})


def last(name: str, subject: str) -> Step:
    return ("req", f"{API}.STREAM.MSG.GET.{name}", {"last_by_subj": subject})


def incr(subject: str, value: str, **more: str) -> Step:
    return ("pub", subject, "", {"Nats-Incr": value, **more})


CONFIG_AND_INCREMENTS: list[Step] = [
    stream("BAD", subjects=["bad"], allow_msg_counter=True, discard="new"),
    stream("BAD", subjects=["bad"], allow_msg_counter=True, allow_msg_ttl=True),
    stream("BAD", subjects=["bad"], allow_msg_counter=True, allow_msg_schedules=True),
    stream("BAD", subjects=["bad"], allow_msg_counter=True, retention="interest"),
    stream("C", subjects=["c.>"], allow_msg_counter=True),
    stream("M", mirror={"name": "C"}, allow_msg_counter=True),
    ("req", f"{API}.STREAM.UPDATE.C", {"name": "C", "subjects": ["c.>"]}),
    incr("c.a", "1"),
    incr("c.a", "+41"),
    incr("c.a", "-2"),
    incr("c.b", "123456789012345678901234567890"),
    incr("c.b", "-123456789012345678901234567891"),
    last("C", "c.a"),
    last("C", "c.b"),
    # Refused: no increment, an unreadable one, a payload, headers a counter cannot honour.
    ("pub", "c.a", "", None),
    ("pub", "c.a", "x", {"Other": "1"}),
    incr("c.a", ""),
    incr("c.a", "abc"),
    incr("c.a", "1.5"),
    incr("c.a", "1_000"),
    incr("c.a", " 7"),
    ("pub", "c.a", "payload", {"Nats-Incr": "1"}),
    incr("c.a", "1", **{"Nats-Expected-Stream": "C"}),
    incr("c.a", "1", **{"Nats-Expected-Last-Sequence": "3"}),
    incr("c.a", "1", **{"Nats-Expected-Last-Subject-Sequence": "3"}),
    incr("c.a", "1", **{"Nats-Expected-Last-Msg-Id": "x"}),
    incr("c.a", "1", **{"Nats-Rollup": "sub"}),
    # A message id is allowed, and deduplicated.
    incr("c.a", "10", **{"Nats-Msg-Id": "once"}),
    incr("c.a", "10", **{"Nats-Msg-Id": "once"}),
    last("C", "c.a"),
    ("req", f"{API}.STREAM.INFO.C", ""),
    # Atomic batches of increments add up in order at the commit; one message without an
    # increment fails the whole batch.
    stream("CB", subjects=["cb.>"], allow_msg_counter=True, allow_atomic=True),
    incr("cb.a", "2", **{"Nats-Batch-Id": "b1", "Nats-Batch-Sequence": "1"}),
    incr("cb.a", "3", **{"Nats-Batch-Id": "b1", "Nats-Batch-Sequence": "2"}),
    incr("cb.b", "5", **{"Nats-Batch-Id": "b1", "Nats-Batch-Sequence": "3"}),
    incr(
        "cb.a",
        "-1",
        **{"Nats-Batch-Id": "b1", "Nats-Batch-Sequence": "4", "Nats-Batch-Commit": "1"},
    ),
    last("CB", "cb.a"),
    last("CB", "cb.b"),
    incr("cb.a", "1", **{"Nats-Batch-Id": "b2", "Nats-Batch-Sequence": "1"}),
    (
        "pub",
        "cb.a",
        "",
        {"Nats-Batch-Id": "b2", "Nats-Batch-Sequence": "2", "Nats-Batch-Commit": "1"},
    ),
    incr(
        "cb.a", "x", **{"Nats-Batch-Id": "b3", "Nats-Batch-Sequence": "1", "Nats-Batch-Commit": "1"}
    ),
    ("req", f"{API}.STREAM.INFO.CB", ""),
    # A stream without counters refuses increments; an unreadable one is invalid first.
    stream("PLAIN", subjects=["p"]),
    incr("p", "1"),
    incr("p", "x"),
    ("pub", "p", "fine", None),
]


async def test_counter_config_and_increments_as_nats_server(tmp_path: Path) -> None:
    expected, got = await side_by_side(tmp_path, CONFIG_AND_INCREMENTS)
    assert_same(expected, got)


async def _aggregate_scenario(url: str) -> list[Any]:
    """Two regional counters sourced into one aggregate: the aggregate's stored messages
    (totals, increments, source totals) once it has caught up."""
    nc = await nats.connect(url)
    out: list[Any] = []

    async def req(subject: str, body: Any) -> Any:
        reply = await nc.request(subject, json.dumps(body).encode(), timeout=2)
        return json.loads(reply.data)

    try:
        for region in ("EU", "US"):
            low = region.lower()
            out.append(
                await req(
                    f"{API}.STREAM.CREATE.{region}",
                    {"name": region, "subjects": [f"{low}.>"], "allow_msg_counter": True},
                )
            )
        transform = [{"src": "*.hits", "dest": "all.hits"}]
        out.append(
            await req(
                f"{API}.STREAM.CREATE.ALL",
                {
                    "name": "ALL",
                    "allow_msg_counter": True,
                    "sources": [
                        {"name": "EU", "subject_transforms": transform},
                        {"name": "US", "subject_transforms": transform},
                    ],
                },
            )
        )
        for subject, value in (("eu.hits", "5"), ("us.hits", "7"), ("eu.hits", "-2")):
            reply = await nc.request(subject, b"", headers={"Nats-Incr": value}, timeout=2)
            out.append(json.loads(reply.data))
            await _wait_for_messages(nc, "ALL", len(out) - 3)
        out.extend(await stored_messages(nc, "ALL"))
    finally:
        await nc.close()
    return out


async def _wait_for_messages(nc: Any, name: str, count: int) -> None:
    """Poll the stream's info until it holds `count` messages (sources copy asynchronously)."""
    deadline = asyncio.get_running_loop().time() + 5
    while asyncio.get_running_loop().time() < deadline:
        reply = await nc.request(f"{API}.STREAM.INFO.{name}", b"", timeout=2)
        if json.loads(reply.data)["state"]["messages"] >= count:
            return
        await asyncio.sleep(0.02)
    raise AssertionError(f"{name} never held {count} messages")


async def test_counters_sourced_into_an_aggregate_as_nats_server(tmp_path: Path) -> None:
    expected, got = await run_both(tmp_path, _aggregate_scenario)
    for record in (expected, got):
        for item in record:
            if isinstance(item, dict) and "created" in item:
                item["created"] = item["ts"] = "<volatile>"
                # nats-server lists a stream's sources in its map's (random) order.
                item.get("sources", []).sort(key=lambda si: si["name"])
    for want, have in zip(expected, got, strict=True):
        assert have == want
