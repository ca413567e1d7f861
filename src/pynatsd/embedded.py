"""pynatsd inside a Python program or test: an async context manager and a threaded runner.

async with pynatsd.Server(port=0) as server:      # in the caller's event loop
    ...
with pynatsd.ThreadedServer(port=0) as server:    # in a background thread with its own loop
    ...
"""

from __future__ import annotations

import asyncio
import dataclasses
import threading
from typing import Any

from pynatsd.assembly import attach_parts
from pynatsd.options import Options
from pynatsd.server.server import Server as _CoreServer


def _options(options: Options | None, overrides: dict[str, Any]) -> Options:
    opts = dataclasses.replace(options) if options is not None else Options(port=0)
    if options is None and "host" not in overrides:
        opts.host = "127.0.0.1"
    for key, value in overrides.items():
        if not hasattr(opts, key):
            raise TypeError(f"unknown server option {key!r}")
        setattr(opts, key, value)
    return opts


class Server(_CoreServer):
    """The server for embedding: `Server(port=0, max_payload=..., ...)` takes any `Options` field
    as a keyword. Binds 127.0.0.1 on a random port unless told otherwise."""

    def __init__(self, options: Options | None = None, **overrides: Any) -> None:
        super().__init__(_options(options, overrides))
        attach_parts(self)


class ThreadedServer:
    """Runs a server in a daemon thread; usable from synchronous code and any event loop."""

    def __init__(self, options: Options | None = None, **overrides: Any) -> None:
        self.server = Server(options, **overrides)
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._started = threading.Event()
        self._error: BaseException | None = None

    @property
    def client_url(self) -> str:
        return self.server.client_url

    @property
    def port(self) -> int:
        return self.server.port

    @property
    def http_port(self) -> int:
        return self.server.http_port

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="pynatsd", daemon=True)
        self._thread.start()
        self._started.wait(30)
        if self._error is not None:
            raise self._error

    def _run(self) -> None:
        loop = asyncio.new_event_loop()
        self._loop = loop
        try:
            loop.run_until_complete(self.server.start())
        except BaseException as e:  # reported to the starting thread
            self._error = e
            self._started.set()
            loop.close()
            return
        self._started.set()
        loop.run_until_complete(self.server.wait_for_shutdown())
        loop.run_until_complete(asyncio.sleep(0))
        loop.close()

    def stop(self) -> None:
        loop = self._loop
        if loop is None or self._thread is None:
            return
        if self.server.running:
            fut = asyncio.run_coroutine_threadsafe(self.server.shutdown(), loop)
            fut.result(30)
        self._thread.join(30)
        self._thread = None

    def __enter__(self) -> ThreadedServer:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
