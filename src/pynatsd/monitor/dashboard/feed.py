"""The dashboard's Server-Sent Events feed: one update a second, built once for every open page.

No nats-server counterpart. The feed's task exists only while at least one page listens: the
first page starts it, the last one to leave stops it, so a server nobody watches does no
dashboard work at all. Each update is built and encoded once per tick, however many pages
listen; a page too slow to take it misses that update rather than queueing them. Updates
take at most `DUTY` of the loop's time: a very big server is updated less often.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable
from typing import Any

from pynatsd.logger import log

INTERVAL = 1.0  # seconds between updates
# The share of the event loop's time updates may take: a server so big that one update takes
# longer than INTERVAL * DUTY gets updates less often, never a busier loop.
DUTY = 0.02
_BACKLOG = 2  # updates a page may have waiting before it misses one

# What a page's queue holds: an encoded event, or None when the feed closes.
Update = bytes | None


def next_delay(interval: float, build_seconds: float) -> float:
    """Seconds until the next update, after one that took `build_seconds` to build."""
    return max(interval, build_seconds / DUTY)


def sse_event(data: bytes) -> bytes:
    """One `message` event in the text/event-stream format (the JSON has no newlines)."""
    return b"data: " + data + b"\n\n"


class DashboardFeed:
    """Builds an update with `build` every `interval` seconds while pages are subscribed."""

    def __init__(self, build: Callable[[], dict[str, Any]], interval: float = INTERVAL) -> None:
        self._build = build
        self._interval = interval
        self._pages: set[asyncio.Queue[Update]] = set()
        self._task: asyncio.Task[None] | None = None

    @property
    def running(self) -> bool:
        """Whether the update loop exists (it should exactly while pages listen)."""
        return self._task is not None

    @property
    def pages(self) -> int:
        return len(self._pages)

    def subscribe(self) -> asyncio.Queue[Update]:
        """A new page's queue; it gets an update at once, then one every interval."""
        queue: asyncio.Queue[Update] = asyncio.Queue(maxsize=_BACKLOG)
        self._pages.add(queue)
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run())
        else:
            encoded = self._encode()
            if encoded is not None:
                queue.put_nowait(encoded)
        return queue

    def unsubscribe(self, queue: asyncio.Queue[Update]) -> None:
        self._pages.discard(queue)
        if not self._pages and self._task is not None:
            self._task.cancel()
            self._task = None

    def close(self) -> None:
        """Ends every page's stream (the monitoring port stops)."""
        for queue in self._pages:
            # The end must arrive even at a page whose queue is full: drop what it has waiting.
            while queue.full():
                queue.get_nowait()
            queue.put_nowait(None)
        self._pages.clear()
        if self._task is not None:
            self._task.cancel()
            self._task = None

    async def _run(self) -> None:
        while self._pages:
            started = time.perf_counter()
            encoded = self._encode()
            if encoded is not None:
                for queue in self._pages:
                    if not queue.full():
                        queue.put_nowait(encoded)
            await asyncio.sleep(next_delay(self._interval, time.perf_counter() - started))

    def _encode(self) -> bytes | None:
        try:
            data = json.dumps(self._build(), separators=(",", ":"), default=str).encode()
        except Exception:  # a monitoring bug must never take the server down
            log.exception("dashboard update failed")
            return None
        return sse_event(data)
