"""JetStream acks published by a client: a new subject for every message, whose SubList result a
connection shares across the acks of one consumer (`PlanCache.match_ack`) while no subscription
tells them apart. Whoever subscribes to ack subjects must get exactly what a match per ack would
give them, before and after subscriptions change, as with nats-server."""

from __future__ import annotations

import asyncio
import json
import random
from pathlib import Path
from typing import Any

import nats
import pytest

from pynatsd.protocol.events import Pub
from pynatsd.server.plans import PlanCache
from pynatsd.server.subscription import InternalClient, InternalSubscription
from pynatsd.sublist import SubList
from support.jspair import go_server, py_server
from support.natsserver import require_nats_server

# Patterns that collide with the acks of consumer C of stream S, or nearly: some match only
# by their prefix (shareable), some look at the sequences (`deep`, which stop the sharing).
PATTERNS = [
    ">",
    "$JS.>",
    "$JS.ACK.>",
    "$JS.ACK.S.>",
    "$JS.ACK.S.C.>",
    "$JS.ACK.*.*.>",
    "$JS.*.S.C.>",
    "$JS.ACK.T.C.>",
    "$JS.ACK.S",
    "$JS.ACK.S.C",
    "$JS.ACK.S.C.1.>",  # deep
    "$JS.ACK.S.C.1.2.2.5.0",  # deep: one ack exactly
    "$JS.ACK.*.*.*.*.*.*.*.*",  # deep
    "$JS.*.S.C.*",  # deep: five tokens exactly
    "$JS.ACK.S.C.a>",  # a literal token ending in ">", not a wildcard: deep
    "*.ACK.S.C.1.>",  # deep
]

SUBJECTS = [
    b"$JS.ACK.S.C.1.2.2.5.0",
    b"$JS.ACK.S.C.1.3.3.5.0",
    b"$JS.ACK.S.C.2.2.4.5.0",
    b"$JS.ACK.S.C.a>",
    b"$JS.ACK.S.C.x",
    b"$JS.ACK.S.C.1",
    b"$JS.ACK.T.C.1.2.2.5.0",
    b"$JS.ACK.S.C.",  # not a valid subject
    b"$JS.ACK.S.C..1",  # not a valid subject
    b"$JS.ACK.S.C.*.1",
    b"$JS.ACK.S.C.>",
    b"$JS.ACK.S.C",
    b"$JS.ACK.S",
]


def _receivers(result: Any) -> tuple[set[int], set[frozenset[int]]]:
    return {id(s) for s in result.psubs}, {frozenset(id(s) for s in g) for g in result.qsubs}


def _subscriptions_change(
    rng: random.Random, sublist: SubList[Any], present: list[InternalSubscription]
) -> None:
    """One random change: a present subscription goes, or a new one comes (plain or queue,
    shareable or deep)."""
    if present and rng.random() < 0.4:
        sublist.remove(present.pop(rng.randrange(len(present))))
        return
    queue = "q" if rng.random() < 0.25 else ""
    owner = InternalClient(None, "test")
    sub = InternalSubscription(owner, rng.choice(PATTERNS), lambda *a: None, queue)
    if rng.random() < 0.7:
        sub.run = lambda *a: None  # it takes runs, as a consumer's ack subscription
    sublist.insert(sub)
    present.append(sub)


def test_shared_results_are_what_a_match_per_ack_gives() -> None:
    """Differential: random subscriptions come and go (plain and queue, shareable and deep);
    after each change every subject gets from `match_ack` the receivers `match_bytes` gives."""
    rng = random.Random(16)
    sublist: SubList[Any] = SubList()
    plans = PlanCache()
    present: list[InternalSubscription] = []
    for _ in range(400):
        _subscriptions_change(rng, sublist, present)
        for subject in rng.sample(SUBJECTS, len(SUBJECTS)):
            for _ in range(2):  # the second time from the shared entry, if any
                expected = _receivers(sublist.match_bytes(subject))
                assert _receivers(plans.match_ack(sublist, subject)) == expected, subject


# Events a read may hold where acks are expected: acks with every subject above, and what
# stops a run of them (a header, a planned PUB line, a reserved reply, another subject).
EVENTS = [
    *(Pub(subject, b"", b"") for subject in SUBJECTS),
    Pub(b"$JS.ACK.S.C.1.4.4.5.0", b"", b"+ACK"),
    Pub(b"$JS.ACK.S.C.1.5.5.5.0", b"inbox", b""),
    Pub(b"$JS.ACK.S.C.1.6.6.5.", b"", b""),  # its tail ends in a dot: not shareable
    Pub(b"$JS.ACK.S.C.1.6*.6.5.0", b"", b""),
    Pub(b"$JS.ACK.S.C.1.7.7.5.0", b"$JS.ACK.S.C.1.1.1.1.0", b""),  # a reserved reply
    Pub(b"$JS.ACK.S.C.1.8.8.5.0", b"_R_.x", b""),
    Pub(b"$JS.ACK.S.C.1.9.9.5.0", b"", b"NATS/1.0\r\n\r\n", 12),  # with headers
    Pub(b"$JS.ACK.S.C.1.9.9.5.0", b"", b"", -1, b"$JS.ACK.S.C.1.9.9.5.0 0"),  # a PUB line
    Pub(b"s", b"", b"x"),
]


def _reference_run(sublist: SubList[Any], events: list[Any], start: int) -> tuple[int, Any, int]:
    """What `PlanCache.ack_run` must give, with a match per ack (the loop it replaced)."""
    j, target, nbytes = start, None, 0
    while j < len(events):
        ev = events[j]
        if ev.line or ev.header_size > 0 or not ev.subject.startswith(b"$JS.ACK."):
            break
        if ev.reply.startswith((b"_R_.", b"$JS.ACK.", b"_GR_.")):
            break
        result = sublist.match_bytes(ev.subject)
        if result.qsubs or len(result.psubs) != 1 or target not in (None, result.psubs[0]):
            break
        if result.psubs[0].run is None:
            break  # the first ack's receiver takes no runs
        target = result.psubs[0]
        nbytes += len(ev.payload)
        j += 1
    return j, target, nbytes


def test_runs_of_acks_are_what_a_match_per_ack_gives() -> None:
    """Differential: as subscriptions come and go, `ack_run` ends each run of random events
    where a match per ack would, with the same one receiver and byte count; runs of one
    consumer's plain acks (the usual case, taken from the shared result) among them."""
    rng = random.Random(17)
    sublist: SubList[Any] = SubList()
    plans = PlanCache()
    present: list[InternalSubscription] = []
    plain = [Pub(b"$JS.ACK.S.C.1.%d.%d.5.0" % (i, i), b"", b"") for i in range(1, 40)]
    long_runs = 0
    for _ in range(300):
        _subscriptions_change(rng, sublist, present)
        for _ in range(20):
            events = [rng.choice(plain if rng.random() < 0.8 else EVENTS) for _ in range(12)]
            start = rng.randrange(3)
            expected = _reference_run(sublist, events, start)
            if expected[1] is None:
                expected = (start, None, 0)
            assert plans.ack_run(sublist, events, start) == expected, events
            long_runs += expected[0] - start >= 5
    assert long_runs > 100


def test_a_shared_result_belongs_to_its_sublist() -> None:
    """A connection bound to another account (another SubList) never reuses the first one's
    results, whatever their generations."""
    owner = InternalClient(None, "test")
    first: SubList[Any] = SubList()
    second: SubList[Any] = SubList()
    sub = InternalSubscription(owner, "$JS.ACK.S.C.>", lambda *a: None)
    first.insert(sub)
    second.insert(InternalSubscription(owner, "$JS.ACK.T.C.>", lambda *a: None))
    assert first.genid == second.genid
    plans = PlanCache()
    assert plans.match_ack(first, b"$JS.ACK.S.C.1.1.1.1.0").psubs == (sub,)
    assert plans.match_ack(second, b"$JS.ACK.S.C.1.2.2.1.0").psubs == ()


async def _fetched(js: Any, count: int) -> list[Any]:
    """`count` messages stored in stream S and fetched by its pull consumer C."""
    await js.add_stream(name="S", subjects=["s"])
    for i in range(count):
        await js.publish("s", b"m%d" % i)
    psub = await js.pull_subscribe("s", durable="C")
    msgs: list[Any] = await psub.fetch(count, timeout=5)
    return msgs


async def _acks_seen(url: str) -> dict[str, Any]:
    """Watch every ack, fetch five messages, ack two, subscribe to one message's ack alone,
    ack the other three: what each watcher saw and where the consumer stands."""
    nc = await nats.connect(url)
    watcher = await nats.connect(url)
    try:
        every: list[str] = []
        fourth: list[str] = []

        async def keep_all(msg: Any) -> None:
            every.append(msg.subject)

        async def keep_fourth(msg: Any) -> None:
            fourth.append(msg.subject)

        await watcher.subscribe("$JS.ACK.>", cb=keep_all)
        await watcher.flush()
        js = nc.jetstream()
        msgs = await _fetched(js, 5)
        for msg in msgs[:2]:
            await msg.ack()
        await nc.flush()
        # A subscription that tells the acks apart, after the first acks were matched.
        await watcher.subscribe("$JS.ACK.S.C.1.4.>", cb=keep_fourth)
        await watcher.flush()
        for msg in msgs[2:]:
            await msg.ack()
        await nc.flush()
        for _ in range(100):
            if len(every) >= 5 and fourth:
                break
            await asyncio.sleep(0.02)
        await asyncio.sleep(0.1)
        info = await js.consumer_info("S", "C")
        return {
            "every": [s.split(".")[4:7] for s in every],
            "fourth": [s.split(".")[4:7] for s in fourth],
            "pending": info.num_ack_pending,
            "floor": json.loads(json.dumps(info.ack_floor.stream_seq)),
        }
    finally:
        await watcher.close()
        await nc.close()


async def test_ack_watchers_see_what_they_see_on_nats_server(tmp_path: Path) -> None:
    require_nats_server()
    async with go_server(tmp_path / "go") as url:
        expected = await _acks_seen(url)
    async with py_server(tmp_path / "py") as url:
        got = await _acks_seen(url)
    assert len(expected["every"]) == 5
    assert expected["fourth"] == [["1", "4", "4"]]
    assert (expected["pending"], expected["floor"]) == (0, 5)
    assert got == expected


@pytest.mark.parametrize("body", [b"", b"+ACK"])
async def test_acks_reach_the_consumer_through_a_shared_result(tmp_path: Path, body: bytes) -> None:
    """Many acks on one connection: each reaches the consumer once (none lost, none twice),
    and the ack floor ends at the last."""
    async with py_server(tmp_path) as url:
        nc = await nats.connect(url)
        try:
            js = nc.jetstream()
            for msg in await _fetched(js, 300):
                await nc.publish(msg.reply, body)
            await nc.flush()
            info = await js.consumer_info("S", "C")
            assert (info.num_ack_pending, info.ack_floor.stream_seq) == (0, 300)
        finally:
            await nc.close()


async def _mixed_acks_in_one_write(url: str) -> dict[str, Any]:
    """Ten fetched messages answered in one burst that the server reads at once (a consumer
    then takes the acks as a run): +ACK, an empty body, -NAK, +WPI, +TERM, an ack twice,
    acks that ask for a reply (one beyond what was delivered), and one left pending. What
    the replies, the consumer's state and the next fetch show."""
    nc = await nats.connect(url)
    try:
        js = nc.jetstream()
        msgs = await _fetched(js, 10)
        replies: list[bytes] = []

        async def keep(msg: Any) -> None:
            replies.append(msg.data)

        inbox = "answers"
        await nc.subscribe(inbox, cb=keep)
        await nc.flush()
        tokens = msgs[9].reply.split(".")
        tokens[5] = tokens[6] = "99"  # stream and delivery sequence 99: never delivered
        beyond = ".".join(tokens)
        # No await that yields between these: nats-py sends them in one write.
        bodies = [b"+ACK", b"", b"-NAK", b"+WPI", b"+TERM gone", b"+ACK", b"+ACK"]
        for msg, body in zip(msgs, bodies, strict=False):
            await nc.publish(msg.reply, body)
        await nc.publish(msgs[5].reply, b"+ACK")  # again
        await nc.publish(msgs[8].reply, b"+ACK", reply=inbox)
        await nc.publish(beyond, b"+ACK", reply=inbox)
        await nc.publish(msgs[9].reply, b"", reply=inbox)
        await nc.flush()
        for _ in range(50):
            if len(replies) >= 2:
                break
            await asyncio.sleep(0.02)
        await asyncio.sleep(0.1)
        info = await js.consumer_info("S", "C")
        state = {
            "replies": replies,
            "pending": info.num_ack_pending,
            "floor": (info.ack_floor.stream_seq, info.ack_floor.consumer_seq),
            "redelivered": info.num_redelivered,
        }
        psub = await js.pull_subscribe("s", durable="C")
        again = await psub.fetch(5, timeout=1)
        state["again"] = sorted(m.data for m in again)
        return state
    finally:
        await nc.close()


async def test_a_run_of_mixed_acks_does_what_it_does_on_nats_server(tmp_path: Path) -> None:
    require_nats_server()
    async with go_server(tmp_path / "go") as url:
        expected = await _mixed_acks_in_one_write(url)
    async with py_server(tmp_path / "py") as url:
        got = await _mixed_acks_in_one_write(url)
    assert expected["replies"] == [b"", b""]  # the ack beyond what was delivered: silent
    assert expected["again"] == [b"m2"]  # the NAK'd one; m3 (+WPI) and m7 still wait
    assert got == expected
