"""A publisher streaming one subject: its PUBs reach the server as runs of one line
(`PubRun`), delivered through the line's plan a run at a time (server/plans.py). Each
subscriber must still get every message once and in order, a queue group each message
once, and the statistics must count each message as one."""

from __future__ import annotations

import asyncio
from typing import Any

import nats
import pytest

import pynatsd
from pynatsd.protocol.runs import PubRun
from pynatsd.server.session import ClientSession

COUNT = 3000


async def _collect(sub: nats.aio.subscription.Subscription, into: list[bytes]) -> None:
    async for msg in sub.messages:
        into.append(msg.data)


def _count_runs(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The sizes of the runs the sessions are handed."""
    sizes: list[int] = []
    handle_events = ClientSession.handle_events

    def counted(self: ClientSession, events: list[Any]) -> None:
        sizes.extend(len(ev.tails) for ev in events if isinstance(ev, PubRun))
        handle_events(self, events)

    monkeypatch.setattr(ClientSession, "handle_events", counted)
    return sizes


async def test_a_stream_of_one_subject_reaches_everyone_once_in_order(
    server: pynatsd.Server, monkeypatch: pytest.MonkeyPatch
) -> None:
    runs = _count_runs(monkeypatch)
    receiver = await nats.connect(server.client_url)
    publisher = await nats.connect(server.client_url)
    try:
        plain: list[bytes] = []
        wildcard: list[bytes] = []
        members: list[list[bytes]] = [[], [], []]
        subs = [await receiver.subscribe("run.s"), await receiver.subscribe("run.*")]
        subs += [await receiver.subscribe("run.s", queue="q") for _ in members]
        tasks = [
            asyncio.create_task(_collect(sub, into))
            for sub, into in zip(subs, [plain, wildcard, *members], strict=True)
        ]
        await receiver.flush()
        sent = [b"%06d" % i for i in range(COUNT)]  # one size: one PUB line for all
        for data in sent:
            await publisher.publish("run.s", data)
        await publisher.flush()
        for _ in range(100):
            if len(plain) == len(wildcard) == sum(map(len, members)) == COUNT:
                break
            await asyncio.sleep(0.05)
        assert plain == sent
        assert wildcard == sent
        assert all(members)  # the group's load is shared
        assert sorted(d for m in members for d in m) == sent  # each message once
        for member in members:
            assert member == sorted(member)  # in the order published
        clients = list(server.clients.values())
        assert sum(c.stats.in_msgs for c in clients) == COUNT
        assert sum(c.stats.out_msgs for c in clients) == 3 * COUNT
        assert sum(c.stats.out_bytes for c in clients) == 3 * COUNT * 6
        assert max(runs) > 100  # most messages did come as runs
        for task in tasks:
            task.cancel()
    finally:
        await publisher.close()
        await receiver.close()


async def test_a_stream_nobody_listens_to_is_counted(
    server: pynatsd.Server, monkeypatch: pytest.MonkeyPatch
) -> None:
    runs = _count_runs(monkeypatch)
    publisher = await nats.connect(server.client_url)
    try:
        for _ in range(COUNT):
            await publisher.publish("nobody.here", b"x")
        await publisher.flush()
        clients = list(server.clients.values())
        assert sum(c.stats.in_msgs for c in clients) == COUNT
        assert sum(c.stats.in_bytes for c in clients) == COUNT
        assert max(runs) > 100
        # Interest that comes later is found: the plan of the line without receivers is dropped.
        late = await nats.connect(server.client_url)
        sub = await late.subscribe("nobody.here")
        await late.flush()
        await publisher.publish("nobody.here", b"y")
        await publisher.flush()
        msg = await sub.next_msg(timeout=2)
        assert msg.data == b"y"
        await late.close()
    finally:
        await publisher.close()
