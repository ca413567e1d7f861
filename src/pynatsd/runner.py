"""Running the server as a process: event loop, signals, logging set-up, exit status."""

from __future__ import annotations

import asyncio
import ctypes
import gc
import signal
import sys
from collections.abc import Coroutine
from typing import Any

from pynatsd import logger
from pynatsd.assembly import attach_parts
from pynatsd.logger import log
from pynatsd.options import Options
from pynatsd.reload import reload
from pynatsd.server.listen import ListenError
from pynatsd.server.server import Server


def install_event_loop_policy() -> None:
    """Use uvloop when installed: it roughly doubles throughput over the default loop."""
    if sys.platform == "win32":
        return
    try:
        import uvloop
    except ImportError:
        return
    asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())


async def serve(opts: Options, warnings: list[str], flags: dict[str, Any], digest: str = "") -> int:
    server = Server(opts)
    attach_parts(server)
    server.config_digest = digest
    for w in warnings:
        log.warning("%s", w)
    loop = asyncio.get_running_loop()
    tasks: set[asyncio.Task[None]] = set()

    def spawn(coro: Coroutine[Any, Any, None]) -> None:
        task = loop.create_task(coro)
        tasks.add(task)
        task.add_done_callback(tasks.discard)

    def on_term(name: str) -> None:
        log.info('Trapped "%s" signal', name)
        # As nats-server: SIGTERM leaves a lame duck shutdown in progress to finish on its
        # own; SIGINT cuts it short.
        if name == "terminated" and server.lame_duck:
            return
        spawn(server.shutdown())

    # Before the listeners open, as nats-server's handleSignals: a SIGHUP sent once "Server is
    # ready" is logged must reload, never meet the default action and end the process.
    loop.add_signal_handler(signal.SIGINT, on_term, "interrupt")
    loop.add_signal_handler(signal.SIGTERM, on_term, "terminated")
    loop.add_signal_handler(signal.SIGUSR2, lambda: spawn(server.lame_duck_mode()))
    loop.add_signal_handler(signal.SIGUSR1, lambda: reopen_log(opts))
    loop.add_signal_handler(signal.SIGHUP, lambda: reload_config(server, flags))
    try:
        await server.start()
    except ListenError as e:
        # nats-server logs the listener's error as fatal and exits with status 1.
        log.critical("%s", e)
        return 1
    except OSError as e:
        log.critical("%s", e)
        return 1
    await server.wait_for_shutdown()
    return 0


def reopen_log(opts: Options) -> None:
    log.info('Trapped "user defined signal 1" signal')
    logger.configure_from_options(opts)
    log.info("File log re-opened")


def reload_config(server: Server, flags: dict[str, Any]) -> None:
    """SIGHUP: the configuration file again, with the start-up flags over it."""
    log.info('Trapped "hangup" signal')
    reload(server, flags)


def tune_gc() -> None:
    """Every message allocates a few short-lived objects but creates no cycles; the default
    gen-0 threshold (700) would run the cycle collector thousands of times a second under
    load. Collect rarely, and keep start-up objects out of every collection."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(50_000, 50, 100)


# glibc's mallopt parameters (malloc.h).
_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3


def tune_malloc() -> None:
    """Each read of a fast publisher is a block of up to 256 KiB, and so is each receiver's
    frame: with glibc's defaults those come from the top of the heap, which is given back to
    the system when they are freed and taken again at the next read (two `brk` calls and 64
    fresh zeroed pages per block: strace showed four `brk` per read, and a 1 KiB message cost
    3.7 us of server CPU against 0.3 us in process). Keep up to 32 MiB of freed heap, and
    blocks under 4 MiB on the heap. A C library without `mallopt` (musl) is left as it is."""
    if not sys.platform.startswith("linux"):
        return
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return
    mallopt(_M_MMAP_THRESHOLD, 4 << 20)
    mallopt(_M_TRIM_THRESHOLD, 32 << 20)


def run(opts: Options, warnings: list[str], flags: dict[str, Any], digest: str = "") -> int:
    from pynatsd.config import startup_errors

    problems = startup_errors(opts)
    if problems:
        for problem in problems:
            print(f"pynatsd: {problem}", file=sys.stderr)
        return 1
    logger.configure_from_options(opts)
    install_event_loop_policy()
    tune_gc()
    tune_malloc()
    try:
        return asyncio.run(serve(opts, warnings, flags, digest))
    except KeyboardInterrupt:
        return 0
