"""Waiting for a condition instead of sleeping and hoping: `eventually(check, timeout)` calls
`check` until it returns something true and gives that back, or fails with what it saw last."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

T = TypeVar("T")


def eventually(check: Callable[[], T], timeout: float, what: str = "", interval: float = 0.25) -> T:
    """`check()`'s first true result within `timeout` seconds; an exception from `check`
    counts as not yet (a server still starting)."""
    deadline = time.monotonic() + timeout
    last: object = None
    while True:
        try:
            result = check()
            if result:
                return result
            last = result
        except Exception as e:  # retried until the deadline, then reported
            last = e
        if time.monotonic() >= deadline:
            raise AssertionError(f"not within {timeout} s: {what or check!r}; last: {last!r}")
        time.sleep(interval)


async def eventually_async(
    check: Callable[[], Awaitable[T]], timeout: float, what: str = "", interval: float = 0.1
) -> T:
    """The same for an async check."""
    deadline = time.monotonic() + timeout
    last: object = None
    while True:
        try:
            result = await check()
            if result:
                return result
            last = result
        except Exception as e:  # the same
            last = e
        if time.monotonic() >= deadline:
            raise AssertionError(f"not within {timeout} s: {what or check!r}; last: {last!r}")
        await asyncio.sleep(interval)
