"""A real headless Chromium for the dashboard's browser tests, driven by Playwright.

The browser is Debian's `chromium` (./test installs it); Playwright's own browser download
(`playwright install`) is never used. Outside CI a machine without Chromium skips these tests
with the reason; in CI a missing browser is a failure, since ./test installs it there.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from playwright.async_api import Browser

CHROMIUM = os.environ.get("PYNATSD_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
)


def require_chromium() -> str:
    """The Chromium binary; skips the test (fails it in CI) when there is none."""
    found = CHROMIUM if os.access(CHROMIUM, os.X_OK) else shutil.which("chromium")
    if found is None:
        reason = f"Chromium is not installed ({CHROMIUM}); ./test installs Debian's chromium"
        if os.environ.get("CI"):
            pytest.fail(reason)
        pytest.skip(reason)
    return found


@asynccontextmanager
async def chromium() -> AsyncIterator[Browser]:
    """A headless Chromium, closed on exit."""
    binary = require_chromium()
    from playwright.async_api import async_playwright

    async with async_playwright() as playwright:
        browser = await playwright.chromium.launch(executable_path=binary, args=list(CHROMIUM_ARGS))
        try:
            yield browser
        finally:
            await browser.close()
