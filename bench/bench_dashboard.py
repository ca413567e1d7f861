#!/usr/bin/env python3
"""What the dashboard's update stream costs the server: CPU with no page open vs one page open.

A pynatsd process (monitoring on) carries a paced load (one raw-socket publisher, one
subscriber; `--rate` messages a second). Its CPU (user + system, from /proc) is measured over
four phases of `--seconds` each: idle without a page, idle with one page, under load without a
page, under load with one page. The page is the update stream read as a browser's EventSource
reads it (`--browser`: a real headless Chromium showing /dashboard instead). The difference a
page makes is the stream's cost; issue 19's target is under 2% of one core at 100k msgs/s, and
nothing measurable with no page open.

The same run also times one update directly (build and encode, in this process, for a server
with `--connections` clients), the figure the end-to-end difference should agree with.

    python bench/bench_dashboard.py                        # ~25 s
    python bench/bench_dashboard.py --seconds 10 --rate 100000 --browser
    python bench/bench_dashboard.py --screenshot docs/dashboard.png   # a minute of history

See docs/dashboard.md ("What it costs") for the method and the figures.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import shutil
import socket
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))
sys.path.insert(0, str(REPO / "src"))

from support.ports import LOOPBACK, free_port  # noqa: E402
from support.processes import PYNATSD, ServerProcess, start_server  # noqa: E402
from support.sse import EventStream  # noqa: E402

TICK = 0.01  # the publisher sends one batch every 10 ms
PAYLOAD = b"x" * 16
# A stream and a durable consumer, created over the JetStream API before the load starts.
JETSTREAM_SETUP = (
    (
        b"$JS.API.STREAM.CREATE.ORDERS",
        b'{"name":"ORDERS","subjects":["orders.>"],"storage":"memory","max_msgs":100000}',
    ),
    (
        b"$JS.API.CONSUMER.DURABLE.CREATE.ORDERS.billing",
        b'{"stream_name":"ORDERS","config":{"durable_name":"billing","ack_policy":"explicit"}}',
    ),
)


def cpu_seconds(pid: int) -> float:
    """User + system CPU of a process, from /proc/<pid>/stat."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def varz(http_port: int) -> dict[str, Any]:
    with urllib.request.urlopen(f"http://{LOOPBACK}:{http_port}/varz", timeout=5) as r:
        data: dict[str, Any] = json.load(r)
        return data


class Load:
    """A paced publisher and a draining subscriber on raw sockets, in two threads."""

    def __init__(self, port: int, rate: int) -> None:
        self.port = port
        self.rate = rate
        self.running = threading.Event()
        self.stopped = threading.Event()
        self._threads = [
            threading.Thread(target=self._subscribe, daemon=True),
            threading.Thread(target=self._publish, daemon=True),
        ]

    def _connect(self) -> socket.socket:
        sock = socket.create_connection((LOOPBACK, self.port))
        sock.recv(4096)  # INFO
        sock.sendall(b'CONNECT {"verbose":false,"pedantic":false}\r\n')
        return sock

    def _subscribe(self) -> None:
        sock = self._connect()
        sock.sendall(b"SUB bench 1\r\nPING\r\n")
        sock.settimeout(0.5)
        while not self.stopped.is_set():
            with contextlib.suppress(TimeoutError):
                if not sock.recv(1 << 16):
                    break
        sock.close()

    def _publish(self) -> None:
        sock = self._connect()
        for subject, body in JETSTREAM_SETUP:
            sock.sendall(b"PUB %s _INBOX.bench %d\r\n%s\r\n" % (subject, len(body), body))
        # One message in a hundred goes to a stream, so JetStream's numbers move too.
        plain = b"PUB bench %d\r\n%s\r\n" % (len(PAYLOAD), PAYLOAD)
        stored = b"PUB orders.new %d\r\n%s\r\n" % (len(PAYLOAD), PAYLOAD)
        per_tick = max(1, round(self.rate * TICK))
        batch = plain * (per_tick - per_tick // 100) + stored * (per_tick // 100)
        next_tick = time.monotonic()
        while not self.stopped.is_set():
            if self.running.is_set():
                sock.sendall(batch)
            next_tick += TICK
            time.sleep(max(0.0, next_tick - time.monotonic()))
        sock.close()

    def start(self) -> None:
        for thread in self._threads:
            thread.start()

    def stop(self) -> None:
        self.stopped.set()
        for thread in self._threads:
            thread.join(timeout=5)


class StreamPage:
    """One page: the update stream, read in a thread as EventSource would."""

    def __init__(self, http_port: int) -> None:
        self.stream = EventStream(http_port)
        self.updates = 0
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def _read(self) -> None:
        with contextlib.suppress(OSError, ConnectionError):
            while True:
                self.stream.next_update()
                self.updates += 1

    def close(self) -> None:
        self.stream.close()
        self._thread.join(timeout=5)


class BrowserPage:
    """One page: /dashboard in a headless Chromium (Debian's), in a thread of its own."""

    def __init__(self, http_port: int, screenshot: str = "") -> None:
        self.url = f"http://{LOOPBACK}:{http_port}/dashboard"
        self.screenshot = screenshot
        self.ready = threading.Event()
        self.done = threading.Event()
        self.updates = 0
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        if not self.ready.wait(30):
            raise RuntimeError("Chromium did not show the dashboard")

    def _run(self) -> None:
        from playwright.sync_api import sync_playwright

        from support.browser import CHROMIUM_ARGS, require_chromium

        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(
                executable_path=require_chromium(), args=list(CHROMIUM_ARGS)
            )
            page = browser.new_page(viewport={"width": 1280, "height": 1000})
            page.goto(self.url)
            page.wait_for_function("document.getElementById('status').textContent === 'live'")
            self.ready.set()
            while not self.done.wait(0.5):
                pass
            if self.screenshot:
                page.screenshot(path=self.screenshot, full_page=True)
            browser.close()

    def close(self) -> None:
        self.done.set()
        self._thread.join(timeout=30)


@contextlib.contextmanager
def pynatsd_server() -> Iterator[tuple[ServerProcess, int]]:
    http_port = free_port()
    env = {**os.environ, "PYTHONPATH": str(REPO / "src")}
    store = tempfile.mkdtemp(prefix="bench-dashboard-")
    server = start_server(PYNATSD, ["-m", str(http_port), "-js", "-sd", store], env=env)
    try:
        yield server, http_port
    finally:
        server.stop()
        shutil.rmtree(store, ignore_errors=True)


def measure(pid: int, http_port: int, seconds: float) -> tuple[float, float]:
    """(server CPU in % of one core, messages in per second) over `seconds`."""
    before_msgs = varz(http_port)["in_msgs"]
    before_cpu, t0 = cpu_seconds(pid), time.monotonic()
    time.sleep(seconds)
    cpu, elapsed = cpu_seconds(pid) - before_cpu, time.monotonic() - t0
    msgs = varz(http_port)["in_msgs"] - before_msgs
    return 100 * cpu / elapsed, msgs / elapsed


def update_cost(connections: int, repeat: int = 50) -> float:
    """Milliseconds of CPU to build and encode one update for a server with `connections`
    clients (in this process)."""
    import nats

    import pynatsd
    from pynatsd.monitor.http import MonitorServer

    async def run() -> float:
        async with pynatsd.Server(port=0, http_port=-1) as srv:
            clients = [await nats.connect(srv.client_url) for _ in range(connections)]
            part = srv.parts["monitor"]
            assert isinstance(part, MonitorServer)
            encode = part.feed._encode
            encode()
            start = time.process_time()
            for _ in range(repeat):
                encode()
            cost = (time.process_time() - start) / repeat
            for nc in clients:
                await nc.close()
            return cost * 1000

    return asyncio.run(run())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seconds", type=float, default=5.0, help="length of each phase")
    ap.add_argument("--rate", type=int, default=100_000, help="messages a second under load")
    ap.add_argument("--browser", action="store_true", help="a real Chromium as the page")
    ap.add_argument("--connections", type=int, default=100, help="clients for the direct cost")
    ap.add_argument(
        "--screenshot", default="", help="keep a screenshot of the page (implies --browser)"
    )
    args = ap.parse_args()
    browser = args.browser or bool(args.screenshot)

    with pynatsd_server() as (server, http_port):
        pid = server.proc.pid
        load = Load(server.port, args.rate)
        load.start()
        rows = []
        for loaded in (False, True):
            if loaded:
                load.running.set()
            for with_page in (False, True):
                page: StreamPage | BrowserPage | None = None
                if with_page:
                    page = BrowserPage(http_port) if browser else StreamPage(http_port)
                cpu, rate = measure(pid, http_port, args.seconds)
                if page is not None:
                    if args.screenshot and loaded and isinstance(page, BrowserPage):
                        page.screenshot = args.screenshot
                    page.close()
                rows.append((loaded, with_page, cpu, rate))
        load.stop()

    kind = "Chromium page" if browser else "update stream"
    print(f"server CPU, % of one core, {args.seconds:g} s per phase ({kind} as the page)")
    print(f"{'phase':<28} {'msgs/s in':>12} {'CPU %':>8}")
    for loaded, with_page, cpu, rate in rows:
        name = ("load" if loaded else "idle") + (", one page" if with_page else ", no page")
        print(f"{name:<28} {rate:>12,.0f} {cpu:>8.2f}")
    for loaded in (False, True):
        without, with_ = (r[2] for r in rows if r[0] == loaded)
        label = "under load" if loaded else "idle"
        print(f"one page costs {with_ - without:+.2f}% of a core {label}")
    ms = update_cost(args.connections)
    print(
        f"one update, built and encoded, {args.connections} connections: {ms:.2f} ms "
        f"= {ms / 10:.2f}% of a core at one update a second"
    )


if __name__ == "__main__":
    main()
