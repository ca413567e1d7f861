"""`replay_policy: original` and `rate_limit_bps` side by side with nats-server: a push
consumer replays messages stored 0.4 s apart at least that far apart, and one limited to
1,000 bytes a second (with a 1 KiB burst, the stream's largest message) spreads four 500-byte
messages over more than a second; what arrives is the same on both servers. Only lower bounds
are asserted: a busy machine makes deliveries later, never earlier."""

from __future__ import annotations

import asyncio
import itertools
import json
from pathlib import Path
from typing import Any

import nats
import pytest

from support.jspair import go_server, py_server, request_json

pytestmark = pytest.mark.skipif(
    __import__("support.natsserver", fromlist=["x"]).nats_server_binary() is None,
    reason="nats-server not installed",
)

API = "$JS.API"
GAP = 0.4


async def _receive(nc: Any, subject: str, count: int) -> list[tuple[float, Any]]:
    """(arrival time, record) of the first `count` messages on `subject`."""
    got: list[tuple[float, Any]] = []
    done = asyncio.Event()
    loop = asyncio.get_running_loop()

    async def keep(msg: Any) -> None:
        got.append((loop.time(), (msg.subject, msg.data[:12], msg.reply.split(".")[4:7])))
        if len(got) >= count:
            done.set()

    sub = await nc.subscribe(subject, cb=keep)
    await asyncio.wait_for(done.wait(), 20)
    await sub.unsubscribe()
    return got


async def _scenario(url: str) -> dict[str, Any]:
    nc = await nats.connect(url)
    out: dict[str, Any] = {}
    try:
        stream = {"name": "O", "subjects": ["o.>"], "max_msg_size": 1024}
        await request_json(nc, f"{API}.STREAM.CREATE.O", stream)
        for i in range(3):
            if i:
                await asyncio.sleep(GAP)
            await nc.request("o.slow", b"m%d" % i, timeout=2)
        for i in range(4):
            await nc.request("o.big", b"%d" % i + b"x" * 499, timeout=2)
        consumers = {
            "replay": {"filter_subject": "o.slow", "replay_policy": "original"},
            "rate": {"filter_subject": "o.big", "rate_limit_bps": 8_000},
            "pull": {"rate_limit_bps": 8_000},
        }
        receivers = {}
        for name, cfg in consumers.items():
            config: dict[str, Any] = {"durable_name": name, "ack_policy": "none", **cfg}
            if name != "pull":
                config["deliver_subject"] = f"in.{name}"
                count = 3 if name == "replay" else 4
                receivers[name] = asyncio.create_task(_receive(nc, f"in.{name}", count))
                await asyncio.sleep(0.1)  # the subscription is in place first
            body = json.dumps({"stream_name": "O", "config": config}).encode()
            subject = f"{API}.CONSUMER.CREATE.O.{name}"
            reply = json.loads((await nc.request(subject, body, 2)).data)
            out[f"{name} created"] = reply.get("error") or reply["config"].get("replay_policy")
        for name, task in receivers.items():
            got = await task
            out[name] = [record for _, record in got]
            out[f"{name} times"] = [t for t, _ in got]
    finally:
        await nc.close()
    return out


async def test_pacing_as_nats_server(tmp_path: Path) -> None:
    (tmp_path / "go").mkdir()
    (tmp_path / "py").mkdir()

    async def run(server: Any, directory: Path) -> dict[str, Any]:
        async with server(directory) as url:
            return await _scenario(url)

    expected, got = await asyncio.gather(
        run(go_server, tmp_path / "go"), run(py_server, tmp_path / "py")
    )
    for result in (expected, got):
        replay = result.pop("replay times")
        assert all(b - a >= GAP * 0.9 for a, b in itertools.pairwise(replay))
        rate = result.pop("rate times")
        # About 560 bytes a delivery (with subject and reply) at 1,000 bytes a second, after
        # a burst of 1 KiB: the last arrives at least 1.2 s after the first.
        assert rate[-1] - rate[0] >= 1.1
    assert got == expected
