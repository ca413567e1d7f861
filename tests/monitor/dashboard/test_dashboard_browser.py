"""The dashboard in a real headless Chromium, against a pynatsd process with nats-py traffic.

Set PYNATSD_DASHBOARD_SCREENSHOT=path to keep a screenshot of the live page (docs/dashboard.png
is made this way).
"""

from __future__ import annotations

import asyncio
import json
import os
import time
import urllib.request
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import nats
import pytest

from support.browser import chromium
from support.certs import loopback_server_files
from support.ports import LOOPBACK, free_port
from support.processes import PYNATSD, ServerProcess, start_server

if TYPE_CHECKING:  # playwright itself is imported once Chromium is known to be there
    from playwright.async_api import Browser, Page


NO_VALUE = "\u2013"  # what the page shows before it has a number


class Dashboard:
    """A pynatsd process with monitoring and JetStream on, and its dashboard's address."""

    def __init__(self, process: ServerProcess, http_port: int) -> None:
        self.process = process
        self.http_port = http_port
        self.url = f"http://{LOOPBACK}:{http_port}/dashboard"

    def varz(self) -> dict[str, Any]:
        with urllib.request.urlopen(f"http://{LOOPBACK}:{self.http_port}/varz", timeout=5) as r:
            data: dict[str, Any] = json.load(r)
            return data


@pytest.fixture
def dashboard(tmp_path: Path) -> Iterator[Dashboard]:
    http_port = free_port()
    process = start_server(PYNATSD, ["-m", str(http_port), "-js", "-sd", str(tmp_path)])
    try:
        yield Dashboard(process, http_port)
    finally:
        process.stop()


@pytest.fixture
async def browser() -> AsyncIterator[Browser]:
    async with chromium() as b:
        yield b


class PageLog:
    """Everything a page asks for and complains about."""

    def __init__(self, page: Page) -> None:
        self.requests: list[tuple[str, str, str]] = []  # method, url, resource type
        self.errors: list[str] = []
        page.on("request", lambda r: self.requests.append((r.method, r.url, r.resource_type)))
        page.on("console", lambda m: self.errors.append(m.text) if m.type == "error" else None)
        page.on("pageerror", lambda e: self.errors.append(str(e)))
        page.on("requestfailed", lambda r: self.errors.append(f"failed: {r.url}"))


async def text(page: Page, selector: str) -> str:
    return str(await page.inner_text(selector))


async def wait_text(page: Page, element_id: str, expected: str) -> None:
    await page.wait_for_function(
        "([id, want]) => document.getElementById(id).textContent === want",
        arg=[element_id, expected],
        timeout=15_000,
    )


async def test_live_page_with_real_traffic(dashboard: Dashboard, browser: Browser) -> None:
    clients = [await nats.connect(dashboard.process.url, name=f"client-{i}") for i in range(4)]
    publisher = clients[1]
    js = clients[0].jetstream()
    await js.add_stream(name="ORDERS", subjects=["orders.>"])
    await js.pull_subscribe("orders.>", durable="billing")
    await clients[2].subscribe("orders.>")
    page = await browser.new_page(viewport={"width": 1280, "height": 1600})
    log = PageLog(page)
    try:
        await page.goto(dashboard.url)
        await wait_text(page, "connections-count", "4")
        assert await text(page, "#server-id") == dashboard.varz()["server_id"]
        names = await page.eval_on_selector_all(
            "#connections tbody tr td:nth-child(2)", "cells => cells.map(c => c.textContent)"
        )
        assert names == [f"client-{i}" for i in range(4)]

        # Traffic flows: the totals and the rate change on the page, with no reload.
        before = await text(page, "#in-msgs-total")
        deadline = time.monotonic() + 20
        for _ in range(400):  # bounded in count and time
            for n in range(250):
                await publisher.publish(f"orders.{n % 5}", b"x" * 64)
            await publisher.flush()
            rate = await text(page, "#in-msgs-rate")
            if await text(page, "#in-msgs-total") != before and rate not in (NO_VALUE, "0/s"):
                break
            assert time.monotonic() < deadline, "the page's numbers did not change"
            # The page refreshes on its own clock: 400 quick rounds must not end before it
            # had its chance to (in a loaded run they ended with the total
            # still unchanged, well inside the 20 s budget).
            await asyncio.sleep(0.05)
        assert await text(page, "#in-msgs-total") != before
        await page.wait_for_function(
            "() => !['\\u2013', '0'].includes("
            "document.querySelector('#streams tbody tr td:nth-child(3)').textContent)",
            timeout=15_000,
        )

        # The table sorts by a column the user clicks: the publisher sent the most.
        await page.click("#connections th[data-key=in_msgs]")
        first = await text(page, "#connections tbody tr:first-child td:nth-child(2)")
        assert first == "client-1"

        # A connection that goes shows as an event, and the count follows.
        await clients[3].close()
        await wait_text(page, "connections-count", "3")
        await page.wait_for_function(
            "() => document.getElementById('events').textContent"
            ".includes('client-3) closed: Client Closed')",
            timeout=15_000,
        )
        if shot := os.environ.get("PYNATSD_DASHBOARD_SCREENSHOT"):
            await page.screenshot(path=shot, full_page=True)
    finally:
        await page.close()
        for nc in clients[:3]:
            await nc.close()

    assert log.errors == []
    documents = [url for _, url, kind in log.requests if kind == "document"]
    assert documents == [dashboard.url]  # one load, every update came over the stream
    for method, url, _ in log.requests:
        parts = urlsplit(url)
        assert (parts.hostname, parts.port) == (LOOPBACK, dashboard.http_port), url
        assert method == "GET", url  # the page reads; it never changes the server
    paths = {urlsplit(url).path for _, url, _ in log.requests}
    assert "/dashboard/events" in paths
    assert not paths & {"/varz", "/connz", "/jsz"}  # no polling of the JSON endpoints


@pytest.mark.parametrize(("width", "height"), [(360, 740), (1920, 1080)])
async def test_fits_narrow_and_wide_screens(
    dashboard: Dashboard, browser: Browser, width: int, height: int
) -> None:
    url = dashboard.process.url
    clients = [await nats.connect(url, name=f"a-long-client-name-{i}") for i in range(3)]
    page = await browser.new_page(viewport={"width": width, "height": height})
    log = PageLog(page)
    try:
        await page.goto(dashboard.url)
        await wait_text(page, "connections-count", "3")
        overflow = await page.evaluate(
            "() => document.documentElement.scrollWidth - document.documentElement.clientWidth"
        )
        assert overflow <= 0
        chart = await page.eval_on_selector("#chart-msgs", "c => c.getBoundingClientRect().width")
        assert 0 < chart <= width
    finally:
        await page.close()
        for nc in clients:
            await nc.close()
    assert log.errors == []


async def test_over_the_https_monitoring_port(tmp_path: Path, browser: Browser) -> None:
    # The dashboard is served like every endpoint: on an HTTPS monitoring port, over TLS only.
    cert, key, ca = loopback_server_files(tmp_path)
    https_port = free_port()
    conf = tmp_path / "https.conf"
    conf.write_text(
        f"https: {LOOPBACK}:{https_port}\n"
        f'tls {{ cert_file: "{cert}", key_file: "{key}", ca_file: "{ca}" }}\n'
    )
    process = start_server(PYNATSD, ["-c", str(conf)])
    context = await browser.new_context(ignore_https_errors=True)  # the test CA is not trusted
    page = await context.new_page()
    log = PageLog(page)
    try:
        await page.goto(f"https://{LOOPBACK}:{https_port}/dashboard")
        await wait_text(page, "status", "live")
        assert len(await text(page, "#server-id")) == 56
        # Over plain HTTP the port answers 400, which Chromium reports as a failed load.
        plain = await context.new_page()
        try:
            response = await plain.goto(f"http://{LOOPBACK}:{https_port}/dashboard")
            outcome = str(response.status if response else None)
        except Exception as e:
            outcome = str(e)
        assert "400" in outcome or "ERR_HTTP_RESPONSE_CODE_FAILURE" in outcome, outcome
    finally:
        await context.close()
        process.stop()
    https_requests = [url for _, url, _ in log.requests if url.startswith("https://")]
    assert f"https://{LOOPBACK}:{https_port}/dashboard/events" in https_requests
