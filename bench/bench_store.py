"""Benchmarks of the JetStream stream stores (pynatsd.jetstream.store).

    python bench/bench_store.py                 # everything, about a minute
    python bench/bench_store.py --restart-msgs 1000000 --only restart
    python bench/bench_store.py --nats-server   # also nats-server -js, publish with acks

Sections:

- ``store``: store_msg rate without waiting for durability (memory store, file store).
- ``durable``: store + wait for durability on an asyncio loop, as the API layer acks a
  publish: one message in flight, and a window of 1000. ``always`` is the default policy
  (fsync before the ack, group commit); ``lazy`` is nats-server's default (ack at once, fsync
  every sync_interval).
- ``load``: load_msg by sequence and load_next_msg walks (all, literal filter, wildcard).
- ``kv``: overwrites of 1,000 keys with max_msgs_per_subject=1 (tombstones and compaction).
- ``restart``: open (recover) a file store holding N messages, after a clean close.
- ``nats-server`` (opt in): the Go server's publish-with-ack rate over the wire, default sync
  and ``sync_interval: always``, for the same windows. It includes the network round trip, so
  compare it with the end-to-end figures of bench_server.py rather than with ``durable``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from pynatsd.jetstream.store import (
    FileStore,
    MemoryStore,
    StreamLimits,
    open_file_store,
    open_memory_store,
)

Store = MemoryStore | FileStore


def rate(n: int, seconds: float) -> str:
    return f"{n / seconds:>12,.0f} /s"


def bench_store(workdir: Path, n: int) -> None:
    print(f"\n## store_msg, {n:,} messages, no durability wait")
    for size in (16, 1024):
        data = b"x" * size
        makers: list[tuple[str, Callable[[], Store]]] = [
            ("memory", lambda: open_memory_store(StreamLimits())),
            ("file", lambda: open_file_store(str(workdir / "s"), StreamLimits())),
        ]
        for name, make in makers:
            shutil.rmtree(workdir / "s", ignore_errors=True)
            store = make()
            t = time.perf_counter()
            for i in range(n):
                store.store_msg(f"orders.{i % 100}", b"", data)
            el = time.perf_counter() - t
            store.close()
            print(f"  {name:8} {size:>5} B  {rate(n, el)}   {el / n * 1e6:6.2f} us/msg")


async def _durable_run(directory: Path, sync_always: bool, window: int, n: int, size: int) -> float:
    shutil.rmtree(directory, ignore_errors=True)
    store = open_file_store(str(directory), StreamLimits(), sync_always=sync_always)
    loop = asyncio.get_running_loop()
    sem = asyncio.Semaphore(window)
    done = loop.create_future()
    acked = 0
    data = b"x" * size

    def ack() -> None:
        nonlocal acked
        acked += 1
        sem.release()
        if acked == n:
            done.set_result(None)

    t = time.perf_counter()
    for i in range(n):
        await sem.acquire()
        seq, _ = store.store_msg(f"orders.{i % 100}", b"", data)
        store.when_durable(seq, ack)
    await done
    el = time.perf_counter() - t
    store.close()
    return el


def bench_durable(workdir: Path, n: int) -> None:
    print("\n## store + durable ack (asyncio), file store")
    for size in (16, 1024):
        for window in (1, 1000):
            for policy in ("always", "lazy"):
                count = n if window > 1 or policy == "lazy" else min(n, 3000)
                el = asyncio.run(
                    _durable_run(workdir / "d", policy == "always", window, count, size)
                )
                print(
                    f"  {size:>5} B  window {window:>4}  {policy:6}  {rate(count, el)}"
                    f"   {el / count * 1e6:8.1f} us/msg"
                )


def bench_load(workdir: Path, n: int) -> None:
    print(f"\n## load, {n:,} stored messages of 128 B on 100 subjects")
    for name in ("memory", "file"):
        shutil.rmtree(workdir / "l", ignore_errors=True)
        store: Store = (
            open_memory_store(StreamLimits())
            if name == "memory"
            else open_file_store(str(workdir / "l"), StreamLimits())
        )
        data = b"y" * 128
        for i in range(n):
            store.store_msg(f"orders.{i % 100}", b"", data)
        t = time.perf_counter()
        for seq in range(1, n + 1):
            store.load_msg(seq)
        el = time.perf_counter() - t
        print(f"  {name:8} load_msg               {rate(n, el)}")
        for filt in (">", "orders.7", "orders.*"):
            count = 0
            t = time.perf_counter()
            m = store.load_next_msg(filt, 0)
            while m is not None:
                count += 1
                m = store.load_next_msg(filt, m.seq + 1)
            el = time.perf_counter() - t
            print(f"  {name:8} load_next_msg {filt:9} {rate(count, el)}  ({count:,} msgs)")
        store.close()


def bench_kv(workdir: Path, n: int) -> None:
    print(f"\n## KV pattern: {n:,} updates of 1,000 keys, max_msgs_per_subject=1")
    for name in ("memory", "file"):
        shutil.rmtree(workdir / "kv", ignore_errors=True)
        lim = StreamLimits(max_msgs_per_subject=1)
        store: Store = (
            open_memory_store(lim)
            if name == "memory"
            else open_file_store(str(workdir / "kv"), lim)
        )
        data = b"v" * 100
        t = time.perf_counter()
        for i in range(n):
            store.store_msg(f"kv.{i % 1000}", b"", data)
        el = time.perf_counter() - t
        disk = ""
        if name == "file":
            size = sum(p.stat().st_size for p in (workdir / "kv" / "msgs").iterdir())
            disk = f"   {size / 1e6:.1f} MB on disk for {store.state().messages:,} live messages"
        store.close()
        print(f"  {name:8} {rate(n, el)}{disk}")


def bench_restart(workdir: Path, n: int) -> None:
    print(f"\n## restart of a {n:,}-message stream (16 B payloads, 100 subjects)")
    directory = workdir / "r"
    shutil.rmtree(directory, ignore_errors=True)
    store = open_file_store(str(directory), StreamLimits(), sync_always=False)
    data = b"z" * 16
    for i in range(n):
        store.store_msg(f"orders.{i % 100}", b"", data)
    store.close()
    disk = sum(p.stat().st_size for p in (directory / "msgs").iterdir())
    best = float("inf")
    for _ in range(3):
        t = time.perf_counter()
        store = open_file_store(str(directory), StreamLimits())
        el = time.perf_counter() - t
        assert store.state().messages == n
        store.close()
        best = min(best, el)
    print(f"  open + recover: {best:.2f} s (best of 3), {disk / 1e6:.0f} MB of segments")


# -- nats-server reference ----------------------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


async def _nats_publish_with_acks(port: int, window: int, n: int, size: int) -> float:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    await reader.readline()  # INFO
    writer.write(b'CONNECT {"verbose":false,"headers":true}\r\nSUB _A.* 1\r\nPING\r\n')
    await writer.drain()
    while (await reader.readline()).strip() != b"PONG":
        pass
    cfg = json.dumps({"name": "BENCH", "subjects": ["orders.>"], "storage": "file"}).encode()
    writer.write(b"PUB $JS.API.STREAM.CREATE.BENCH _A.c %d\r\n%s\r\n" % (len(cfg), cfg))
    await writer.drain()
    await reader.readline()
    await reader.readline()
    data = b"x" * size
    sem = asyncio.Semaphore(window)

    async def read_acks() -> None:
        got = 0
        while got < n:
            line = await reader.readline()
            if line.startswith(b"MSG"):
                await reader.readline()
                got += 1
                sem.release()

    t = time.perf_counter()
    task = asyncio.create_task(read_acks())
    for i in range(n):
        await sem.acquire()
        writer.write(b"PUB orders.%d _A.%d %d\r\n%s\r\n" % (i % 100, i, size, data))
        if sem.locked() or i % 64 == 0:
            await writer.drain()
    await writer.drain()
    await task
    el = time.perf_counter() - t
    writer.close()
    return el


def bench_nats_server(workdir: Path, n: int) -> None:
    binary = Path(sys.executable).parent / "nats-server"
    if not binary.exists():
        found = shutil.which("nats-server")
        if found is None:
            print("\n## nats-server: not found, skipped")
            return
        binary = Path(found)
    print(f"\n## nats-server -js ({binary}), publish with acks over TCP")
    for policy in ("default", "always"):
        for size in (16, 1024):
            for window in (1, 1000):
                sd = workdir / "ns"
                shutil.rmtree(sd, ignore_errors=True)
                sd.mkdir()
                port = _free_port()
                conf = sd / "js.conf"
                sync = "\n  sync_interval: always" if policy == "always" else ""
                conf.write_text(f'port: {port}\njetstream {{\n  store_dir: "{sd}"{sync}\n}}\n')
                proc = subprocess.Popen(
                    [str(binary), "-c", str(conf)],
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                )
                try:
                    deadline = time.monotonic() + 10
                    while time.monotonic() < deadline:
                        try:
                            socket.create_connection(("127.0.0.1", port), 0.2).close()
                            break
                        except OSError:
                            time.sleep(0.05)
                    count = n if window > 1 or policy == "default" else min(n, 3000)
                    el = asyncio.run(_nats_publish_with_acks(port, window, count, size))
                    print(f"  sync {policy:7} {size:>5} B  window {window:>4}  {rate(count, el)}")
                finally:
                    proc.terminate()
                    proc.wait()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--msgs", type=int, default=200_000, help="messages per store/load run")
    ap.add_argument("--durable-msgs", type=int, default=100_000)
    ap.add_argument("--restart-msgs", type=int, default=1_000_000)
    ap.add_argument("--only", choices=["store", "durable", "load", "kv", "restart", "nats-server"])
    ap.add_argument("--nats-server", action="store_true", help="also measure nats-server -js")
    ap.add_argument("--dir", default=None, help="work directory (default: a temporary one)")
    args = ap.parse_args()
    workdir = Path(args.dir or tempfile.mkdtemp(prefix="bench-store-"))
    print(
        f"# bench_store: Python {platform.python_version()} on {platform.machine()}, "
        f"{os.cpu_count()} CPUs, work dir {workdir}"
    )
    try:
        if args.only in (None, "store"):
            bench_store(workdir, args.msgs)
        if args.only in (None, "durable"):
            bench_durable(workdir, args.durable_msgs)
        if args.only in (None, "load"):
            bench_load(workdir, args.msgs)
        if args.only in (None, "kv"):
            bench_kv(workdir, args.msgs)
        if args.only in (None, "restart"):
            bench_restart(workdir, args.restart_msgs)
        if args.only == "nats-server" or args.nats_server:
            bench_nats_server(workdir, args.durable_msgs)
    finally:
        if args.dir is None:
            shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
