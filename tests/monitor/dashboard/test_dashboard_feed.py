"""The dashboard feed: an update loop that exists only while pages listen."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from pynatsd.monitor.dashboard.feed import DUTY, DashboardFeed, next_delay, sse_event


class Builder:
    def __init__(self) -> None:
        self.calls = 0

    def __call__(self) -> dict[str, Any]:
        self.calls += 1
        return {"n": self.calls}


def decode(update: bytes | None) -> Any:
    assert update is not None and update.startswith(b"data: ") and update.endswith(b"\n\n")
    return json.loads(update[6:-2])


def test_sse_event_is_one_message_event() -> None:
    assert sse_event(b'{"a":1}') == b'data: {"a":1}\n\n'


@pytest.mark.parametrize(
    ("build_seconds", "delay"),
    [(0.0, 1.0), (0.001, 1.0), (1.0 * DUTY, 1.0), (0.1, 0.1 / DUTY), (0.5, 0.5 / DUTY)],
)
def test_updates_take_at_most_their_share_of_the_loop(build_seconds: float, delay: float) -> None:
    assert next_delay(1.0, build_seconds) == pytest.approx(delay)


async def test_no_page_no_work() -> None:
    build = Builder()
    feed = DashboardFeed(build, interval=0.01)
    await asyncio.sleep(0.05)
    assert (feed.running, build.calls) == (False, 0)


async def test_first_page_starts_the_loop_last_page_stops_it() -> None:
    build = Builder()
    feed = DashboardFeed(build, interval=0.01)
    page = feed.subscribe()
    assert feed.running
    assert decode(await asyncio.wait_for(page.get(), 2)) == {"n": 1}
    assert decode(await asyncio.wait_for(page.get(), 2)) == {"n": 2}
    feed.unsubscribe(page)
    assert not feed.running
    calls = build.calls
    await asyncio.sleep(0.05)
    assert build.calls == calls


async def test_one_build_per_tick_for_every_page() -> None:
    build = Builder()
    feed = DashboardFeed(build, interval=3600)
    first = feed.subscribe()
    await asyncio.wait_for(first.get(), 2)
    pages = [feed.subscribe() for _ in range(5)]
    # A page that arrives between ticks gets its own first update at once.
    for page in pages:
        assert decode(page.get_nowait())["n"] >= 2
    assert build.calls == 6
    feed.close()
    assert not feed.running and feed.pages == 0
    assert all(page.get_nowait() is None for page in pages)


async def test_a_slow_page_misses_updates_instead_of_queueing_them() -> None:
    build = Builder()
    feed = DashboardFeed(build, interval=0.005)
    page = feed.subscribe()
    deadline = asyncio.get_running_loop().time() + 5
    while build.calls < 10 and asyncio.get_running_loop().time() < deadline:
        await asyncio.sleep(0.01)
    assert build.calls >= 10
    assert page.qsize() <= 2
    feed.close()
    # Even a page with a full queue learns that the feed is over.
    while (update := page.get_nowait()) is not None:
        decode(update)


async def test_a_failing_build_is_logged_and_the_feed_goes_on() -> None:
    calls = 0

    def build() -> dict[str, Any]:
        nonlocal calls
        calls += 1
        if calls == 1:
            raise RuntimeError("boom")
        return {"ok": calls}

    feed = DashboardFeed(build, interval=0.01)
    page = feed.subscribe()
    assert decode(await asyncio.wait_for(page.get(), 2)) == {"ok": 2}
    feed.close()
