#!/usr/bin/env python3
"""Stream snapshot and restore throughput: pynatsd -js side by side with nats-server -js.

    python bench/bench_snapshot.py                  # 20,000 messages of 1 KiB
    python bench/bench_snapshot.py --msgs 100000 --size 512

For each server (started fresh in a temporary store directory): fill a stream, take a
snapshot as `nats stream backup` does (chunks of 128 KiB, each acknowledged), delete the
stream, restore the backup (each chunk a request), and report the stream's megabytes per
second both ways and the backup's size. pynatsd writes its backups uncompressed (S2's
uncompressed chunks) and computes their CRC-32C in pure Python, which is what bounds it.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import nats

HOST = "127.0.0.1"
REPO = Path(__file__).resolve().parent.parent
CHUNK = 128 * 1024


def free_port() -> int:
    with socket.socket() as s:
        s.bind((HOST, 0))
        return int(s.getsockname()[1])


def start(kind: str, store: str) -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    if kind == "pynatsd":
        env = {**os.environ, "PYTHONPATH": str(REPO / "src")}
        cmd = [sys.executable, "-m", "pynatsd", "-js", "-sd", store, "-a", HOST, "-p", str(port)]
    else:
        binary = shutil.which("nats-server") or str(Path(sys.executable).parent / "nats-server")
        env = dict(os.environ)
        cmd = [binary, "-js", "-sd", store, "-a", HOST, "-p", str(port)]
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        try:
            with socket.create_connection((HOST, port), timeout=0.2):
                return proc, f"nats://{HOST}:{port}"
        except OSError:
            time.sleep(0.05)
    proc.kill()
    raise RuntimeError(f"{kind} did not start")


async def run(url: str, msgs: int, size: int) -> dict[str, float]:
    nc = await nats.connect(url)
    js = nc.jetstream()
    await js.add_stream(name="B", subjects=["b.>"])
    payload = os.urandom(size)
    for start_at in range(0, msgs, 1000):
        futures = [
            nc.request(f"b.{i % 16}", payload, timeout=10)
            for i in range(start_at, min(start_at + 1000, msgs))
        ]
        await asyncio.gather(*futures)
    info = await js.stream_info("B")
    stream_mb = info.state.bytes / 1e6
    inbox = nc.new_inbox()
    parts: list[bytes] = []
    done = asyncio.Event()

    async def on_chunk(msg: nats.aio.msg.Msg) -> None:
        if msg.data:
            parts.append(msg.data)
            if msg.reply:
                await nc.publish(msg.reply, b"")
        else:
            done.set()

    sub = await nc.subscribe(inbox, cb=on_chunk)
    t0 = time.perf_counter()
    body = json.dumps({"deliver_subject": inbox, "chunk_size": CHUNK}).encode()
    reply = json.loads((await nc.request("$JS.API.STREAM.SNAPSHOT.B", body, timeout=10)).data)
    await asyncio.wait_for(done.wait(), 600)
    snap_s = time.perf_counter() - t0
    await sub.unsubscribe()
    data = b"".join(parts)
    await js.delete_stream("B")
    t0 = time.perf_counter()
    request = json.dumps({"config": reply["config"], "state": reply["state"]}).encode()
    accepted = json.loads((await nc.request("$JS.API.STREAM.RESTORE.B", request, 10)).data)
    for pos in range(0, len(data), CHUNK):
        await nc.request(accepted["deliver_subject"], data[pos : pos + CHUNK], timeout=60)
    final = json.loads((await nc.request(accepted["deliver_subject"], b"", timeout=600)).data)
    restore_s = time.perf_counter() - t0
    await nc.close()
    assert final["state"]["messages"] == info.state.messages, final
    return {
        "stream MB": stream_mb,
        "backup MB": len(data) / 1e6,
        "snapshot MB/s": stream_mb / snap_s,
        "restore MB/s": stream_mb / restore_s,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--msgs", type=int, default=20_000)
    parser.add_argument("--size", type=int, default=1024)
    args = parser.parse_args()
    results = {}
    for kind in ("pynatsd", "nats-server"):
        store = tempfile.mkdtemp(prefix=f"bench-snap-{kind}-")
        proc, url = start(kind, store)
        try:
            results[kind] = asyncio.run(run(url, args.msgs, args.size))
        finally:
            proc.terminate()
            proc.wait(timeout=10)
            shutil.rmtree(store, ignore_errors=True)
    keys = list(next(iter(results.values())))
    print(f"{args.msgs} messages of {args.size} B")
    print("| | " + " | ".join(keys) + " |")
    print("|---|" + "---|" * len(keys))
    for kind, row in results.items():
        print(f"| {kind} | " + " | ".join(f"{row[k]:.1f}" for k in keys) + " |")


if __name__ == "__main__":
    main()
