"""The sleeps of a module's dial loops, recorded and made instant: a test reads the waits the
loop asked for instead of timing them."""

from __future__ import annotations

import asyncio
from types import ModuleType, SimpleNamespace
from typing import Any

import pytest

REAL_SLEEP = asyncio.sleep


def record_sleeps(monkeypatch: pytest.MonkeyPatch, module: ModuleType) -> list[float]:
    """Give `module` an asyncio whose `sleep` records its delay and sleeps 10 ms (everything
    else is asyncio's); the delays, as they come."""
    slept: list[float] = []

    async def sleep(delay: float, *args: Any) -> None:
        slept.append(delay)
        await REAL_SLEEP(0.01)

    shim = SimpleNamespace(**{name: getattr(asyncio, name) for name in dir(asyncio)})
    shim.sleep = sleep
    monkeypatch.setattr(module, "asyncio", shim)
    return slept
