"""Fault tests: an atomic batch is stored whole or not at all after pynatsd is killed with
SIGKILL, also while it commits.

- A partial batch left on disk (what a kill in the middle of a commit leaves: messages with a
  batch id and no commit header at the end of the stream) is completed from its staging file
  at the restart, or removed when there is none.
- A publisher commits batches of a few hundred messages while the server is killed at random
  moments; after each restart every stored batch is complete and every acknowledged batch is
  there.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import signal
import sys
from collections import defaultdict
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import nats
import pytest

from pynatsd.jetstream.batching import _stage
from pynatsd.jetstream.store import open_file_store
from pynatsd.jetstream.store.base import StreamLimits
from support.ports import free_port
from support.processes import PYNATSD, start_server

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="SIGKILL semantics")

STREAM = "BATCH"
ROUNDS = 3


def batch_headers(batch_id: str, seq: int, commit: bool) -> dict[str, str]:
    headers = {"Nats-Batch-Id": batch_id, "Nats-Batch-Sequence": str(seq)}
    if commit:
        headers["Nats-Batch-Commit"] = "1"
    return headers


async def publish_batch(nc: Any, batch_id: str, size: int) -> dict[str, Any]:
    for seq in range(1, size):
        await nc.publish("batch.x", b"%d" % seq, headers=batch_headers(batch_id, seq, False))
    msg = await nc.request(
        "batch.x", b"%d" % size, headers=batch_headers(batch_id, size, True), timeout=10
    )
    ack: dict[str, Any] = json.loads(msg.data)
    return ack


async def read_all(url: str) -> list[tuple[int, dict[str, str]]]:
    nc = await nats.connect(url)
    js = nc.jetstream()
    info = await js.stream_info(STREAM)
    sub = await js.pull_subscribe("batch.>", stream=STREAM)
    got: list[tuple[int, dict[str, str]]] = []
    while len(got) < info.state.messages:
        for m in await sub.fetch(1000, timeout=5):
            got.append((m.metadata.sequence.stream, dict(m.headers or {})))
            await m.ack()
    await nc.close()
    return sorted(got)


def check_whole(stored: list[tuple[int, dict[str, str]]]) -> dict[str, int]:
    """Every batch in the stream is complete: sequences 1..N in a row, the last with the
    commit header. Returns batch id -> size."""
    batches: dict[str, list[tuple[int, dict[str, str]]]] = defaultdict(list)
    for seq, headers in stored:
        batches[headers["Nats-Batch-Id"]].append((seq, headers))
    sizes = {}
    for batch_id, msgs in batches.items():
        seqs = [int(h["Nats-Batch-Sequence"]) for _, h in msgs]
        assert seqs == list(range(1, len(msgs) + 1)), f"batch {batch_id} is partial: {seqs[:5]}"
        stream_seqs = [s for s, _ in msgs]
        assert stream_seqs == list(range(stream_seqs[0], stream_seqs[0] + len(msgs)))
        assert msgs[-1][1].get("Nats-Batch-Commit") == "1", f"batch {batch_id} has no commit"
        sizes[batch_id] = len(msgs)
    return sizes


def leave_partial_batch(
    stream_dir: Path, batch_id: str, size: int, stored: int, staged: bool
) -> None:
    """What a kill in the middle of a commit leaves behind: the first `stored` messages of the
    batch in the stream and, when `staged`, the staging file with all of them."""
    msgs = []
    for seq in range(1, size + 1):
        commit = "Nats-Batch-Commit: 1\r\n" if seq == size else ""
        hdr = f"NATS/1.0\r\nNats-Batch-Id: {batch_id}\r\nNats-Batch-Sequence: {seq}\r\n{commit}\r\n"
        msgs.append(("batch.x", hdr.encode(), b"%d" % seq))
    store = open_file_store(str(stream_dir), StreamLimits())
    for subject, hdr, data in msgs[:stored]:
        store.store_msg(subject, hdr, data)
    if staged:
        _stage(SimpleNamespace(store=store, name=STREAM), batch_id, msgs)  # type: ignore[arg-type]
    store.close()


async def test_partial_batch_is_completed_or_removed_at_restart(tmp_path: Path) -> None:
    port = free_port()
    url = f"nats://127.0.0.1:{port}"
    stream_dir = tmp_path / "jetstream" / "$G" / "streams" / STREAM
    server = start_server(PYNATSD, ["-js", "-sd", str(tmp_path)], port=port)
    try:
        nc = await nats.connect(url)
        await nc.request(
            f"$JS.API.STREAM.CREATE.{STREAM}",
            json.dumps({"name": STREAM, "subjects": ["batch.>"], "allow_atomic": True}).encode(),
        )
        ack = await publish_batch(nc, "whole", 3)
        assert ack == {"stream": STREAM, "seq": 3, "batch": "whole", "count": 3}
        await nc.close()
    finally:
        os.kill(server.proc.pid, signal.SIGKILL)
        server.proc.wait()
    # Without a staging file the stored part goes.
    leave_partial_batch(stream_dir, "cut", 4, 2, staged=False)
    server = start_server(PYNATSD, ["-js", "-sd", str(tmp_path)], port=port)
    try:
        assert check_whole(await read_all(url)) == {"whole": 3}
    finally:
        os.kill(server.proc.pid, signal.SIGKILL)
        server.proc.wait()
    # With it the batch is completed, as nats-server does.
    leave_partial_batch(stream_dir, "fwd", 5, 2, staged=True)
    server = start_server(PYNATSD, ["-js", "-sd", str(tmp_path)], port=port)
    try:
        assert check_whole(await read_all(url)) == {"whole": 3, "fwd": 5}
        assert not (stream_dir / "batches").exists()
    finally:
        server.stop()


async def test_batches_whole_after_sigkill_during_commits(tmp_path: Path) -> None:
    rng = random.Random(int.from_bytes(os.urandom(4)))
    port = free_port()
    url = f"nats://127.0.0.1:{port}"
    acked: dict[str, int] = {}
    counter = 0
    for round_ in range(ROUNDS):
        server = start_server(PYNATSD, ["-js", "-sd", str(tmp_path)], port=port)
        try:
            nc = await nats.connect(url, allow_reconnect=False)
            if round_ == 0:
                await nc.request(
                    f"$JS.API.STREAM.CREATE.{STREAM}",
                    json.dumps(
                        {"name": STREAM, "subjects": ["batch.>"], "allow_atomic": True}
                    ).encode(),
                )

            async def publish(nc: Any = nc) -> None:
                nonlocal counter
                while not nc.is_closed:
                    counter += 1
                    batch_id = f"b{counter}"
                    size = rng.randrange(100, 400)
                    try:
                        ack = await publish_batch(nc, batch_id, size)
                    except Exception:
                        return
                    assert ack.get("count") == size, ack
                    acked[batch_id] = size

            task = asyncio.create_task(publish())
            await asyncio.sleep(rng.uniform(0.3, 1.2))
            os.kill(server.proc.pid, signal.SIGKILL)
            server.proc.wait()
            # A commit in flight will never be answered: its batch may or may not be stored.
            await asyncio.sleep(0.2)
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
            await nc.close()
        finally:
            if server.proc.poll() is None:
                server.proc.kill()
                server.proc.wait()
    server = start_server(PYNATSD, ["-js", "-sd", str(tmp_path)], port=port)
    try:
        sizes = check_whole(await read_all(url))
    finally:
        server.stop()
    assert len(acked) >= ROUNDS, "the publisher barely ran"
    for batch_id, size in acked.items():
        assert sizes.get(batch_id) == size, f"acknowledged batch {batch_id} lost"
