"""A restart on the same store directory, side by side with nats-server: a nats.py client
reconnects, and its durable push consumer's subscriber gets the messages published after the
restart, its KV watcher the new values and its pull consumer the rest of the stream, as with
nats-server (the server process is stopped, with SIGTERM or SIGKILL, and started again on the
same port and `-sd`)."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import nats
import pytest

from support.natsserver import NATS_SERVER, nats_server_binary
from support.ports import free_port
from support.processes import PYNATSD, ServerProcess, start_server

pytestmark = pytest.mark.skipif(nats_server_binary() is None, reason="nats-server not installed")


async def _until(check: Any, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return True
        await asyncio.sleep(0.05)
    return False


async def scenario(cmd: Sequence[str], store: Path, kill: bool = False) -> list[Any]:
    port = free_port()
    args = ["-js", "-sd", str(store)]
    server: ServerProcess = start_server(cmd, args, port=port)
    seen: list[Any] = []
    reconnected = asyncio.Event()

    async def on_reconnect() -> None:
        reconnected.set()

    nc = await nats.connect(
        server.url,
        max_reconnect_attempts=-1,
        reconnect_time_wait=0.1,
        reconnected_cb=on_reconnect,
    )
    try:
        js = nc.jetstream()
        await js.add_stream(name="S", subjects=["s.>"])
        pushed: list[bytes] = []

        async def on_push(msg: Any) -> None:
            pushed.append(msg.data)
            await msg.ack()

        await js.subscribe("s.>", durable="d", cb=on_push, manual_ack=True)
        psub = await js.pull_subscribe("s.>", durable="p")
        kv = await js.create_key_value(bucket="B")
        await kv.put("k", b"1")
        watcher = await kv.watchall()
        first = await watcher.updates(timeout=2)
        seen.append(("watch", first.value if first else None))
        await watcher.updates(timeout=2)  # end of the initial values
        for i in range(3):
            await js.publish("s.a", f"before{i}".encode())
        seen.append(("pushed before", await _until(lambda: len(pushed) == 3, 5), list(pushed)))
        msgs = await psub.fetch(2, timeout=2)
        await msgs[0].ack()  # the second stays pending: redelivered after its ack wait only
        seen.append(("fetched before", [m.data for m in msgs]))
        pushed.clear()
        await nc.flush()

        if kill:
            # SIGKILL: what was written is what a restart finds (both servers write consumer
            # state within a fraction of a second).
            await asyncio.sleep(0.5)
            server.proc.kill()
            server.proc.wait()
        server.stop()
        server = start_server(cmd, args, port=port)
        await asyncio.wait_for(reconnected.wait(), 10)
        seen.append(("stream", (await js.stream_info("S")).state.messages))
        for i in range(3):
            await js.publish("s.a", f"after{i}".encode())
        seen.append(("pushed after", await _until(lambda: len(pushed) == 3, 10), list(pushed)))
        msgs = await psub.fetch(5, timeout=2)
        seen.append(("fetched after", [m.data for m in msgs]))
        await kv.put("k", b"2")
        # nats.py's watcher is an ordered consumer in memory: gone with the restart, on both
        # servers (nats.py does not recreate it); a new watcher sees the new value.
        update = None
        with contextlib.suppress(nats.errors.TimeoutError):
            update = await watcher.updates(timeout=1.5)
        seen.append(("old watcher", update.value if update else None))
        watcher = await kv.watchall()
        update = await watcher.updates(timeout=2)
        seen.append(("new watcher", update.value if update else None))
        await watcher.updates(timeout=2)  # end of the initial values
        await kv.put("k", b"3")
        update = await watcher.updates(timeout=2)
        seen.append(("new watcher", update.value if update else None))
        for name in ("d", "p"):
            info = await js.consumer_info("S", name)
            seen.append(
                (name, info.delivered.stream_seq, info.ack_floor.stream_seq, info.num_ack_pending)
            )
    finally:
        await nc.close()
        server.stop()
    return seen


@pytest.mark.parametrize("kill", [False, True], ids=["sigterm", "sigkill"])
async def test_restart_as_nats_server(tmp_path: Path, kill: bool) -> None:
    expected = await scenario([str(NATS_SERVER)], tmp_path / "go", kill)
    got = await scenario(PYNATSD, tmp_path / "py", kill)
    assert got == expected
