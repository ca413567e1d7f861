"""Fault test: pynatsd -js killed with SIGKILL at random moments while a client publishes with
acks; after every restart, every acknowledged message is there, in order, with its exact bytes,
and no message that is served is damaged (each payload carries its own checksum)."""

from __future__ import annotations

import asyncio
import json
import os
import random
import signal
import sys
import zlib
from pathlib import Path
from typing import Any

import nats
import pytest
from nats.aio.client import Client as NATS

from support.ports import free_port
from support.processes import PYNATSD, start_server

ROUNDS = 5
STREAM = "FAULT"


def make_payload(rng: random.Random, n: int) -> bytes:
    body = rng.randbytes(rng.randrange(0, 3000))
    head = f"{n}:{zlib.crc32(body):08x}:".encode()
    return head + body


def payload_ok(data: bytes) -> bool:
    try:
        n, crc, body = data.split(b":", 2)
        int(n)
        return int(crc, 16) == zlib.crc32(body)
    except ValueError:
        return False


async def publish_until_killed(
    nc: NATS, rng: random.Random, acked: list[tuple[int, bytes]], counter: list[int]
) -> None:
    """Publish with acks, sometimes one at a time and sometimes a window of 50 in flight;
    record each acknowledgement as it arrives (in arrival order)."""

    def record(payload: bytes, fut: asyncio.Future[Any]) -> None:
        if fut.cancelled() or fut.exception() is not None:
            return
        ack = json.loads(fut.result().data)
        assert "error" not in ack, ack
        acked.append((int(ack["seq"]), payload))

    while not nc.is_closed:
        window = 1 if rng.random() < 0.5 else 50
        tasks = []
        for _ in range(window):
            counter[0] += 1
            payload = make_payload(rng, counter[0])
            task = asyncio.ensure_future(nc.request("fault.x", payload, timeout=5))
            task.add_done_callback(lambda f, p=payload: record(p, f))
            tasks.append(task)
        try:
            await asyncio.gather(*tasks)
        except Exception:
            for task in tasks:
                task.cancel()
            return


async def read_all(url: str) -> dict[int, bytes]:
    nc = await nats.connect(url)
    js = nc.jetstream()
    info = await js.stream_info(STREAM)
    sub = await js.pull_subscribe("fault.x", stream=STREAM)
    got: dict[int, bytes] = {}
    while len(got) < info.state.messages:
        msgs = await sub.fetch(1000, timeout=5)
        for m in msgs:
            got[m.metadata.sequence.stream] = m.data
            await m.ack()
    await nc.close()
    return got


@pytest.mark.skipif(sys.platform != "linux", reason="SIGKILL semantics")
async def test_acknowledged_messages_survive_sigkill(tmp_path: Path) -> None:
    rng = random.Random(int.from_bytes(os.urandom(4)))
    port = free_port()
    url = f"nats://127.0.0.1:{port}"
    acked: list[tuple[int, bytes]] = []
    counter = [0]
    for round_ in range(ROUNDS):
        proc = start_server(PYNATSD, ["-js", "-sd", str(tmp_path)], port=port).proc
        try:
            closed = asyncio.Event()

            async def on_closed(event: asyncio.Event = closed) -> None:
                event.set()

            nc = await nats.connect(url, allow_reconnect=False, closed_cb=on_closed)
            if round_ == 0:
                await nc.jetstream().add_stream(name=STREAM, subjects=["fault.>"])
            task = asyncio.create_task(publish_until_killed(nc, rng, acked, counter))
            await asyncio.sleep(rng.uniform(0.3, 1.0))
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait()
            # The connection drops at once; requests still in flight will never be answered.
            await asyncio.wait_for(closed.wait(), 10)
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    proc = start_server(PYNATSD, ["-js", "-sd", str(tmp_path)], port=port).proc
    try:
        stored = await read_all(url)
    finally:
        proc.kill()
        proc.wait()
    assert len(acked) > 100, "the publisher barely ran"
    seqs = [seq for seq, _ in acked]
    assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs), "acks out of order"
    for seq, payload in acked:
        assert stored.get(seq) == payload, f"acknowledged message {seq} lost or changed"
    assert all(payload_ok(data) for data in stored.values()), "a damaged message was served"
