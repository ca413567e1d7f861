"""A publisher's PUB line to a subject a stream captures: the line's delivery plan holds the
stream's subscription (`InternalSubscription.take_line`), which takes the line's messages a run
at a time (`Stream._on_line`) instead of one `fan_out` per message. What the publisher gets
back (each PubAck, the "no responders" of a request nobody receives, every message once, in
order) and what the stream holds must be what nats-server gives for the same writes."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import nats
import pytest

from pynatsd.jetstream.stream import Stream
from support.jspair import go_server, py_server
from support.natsserver import require_nats_server

RUN = 400  # publishes of one line written at once


async def _replies(nc: Any, subject: str, into: list[tuple[bytes, str]]) -> Any:
    async def keep(msg: Any) -> None:
        into.append((msg.data, (msg.headers or {}).get("Status", "")))

    return await nc.subscribe(subject, cb=keep)


async def _wait_for(into: list[Any], count: int) -> None:
    for _ in range(250):
        if len(into) >= count:
            return
        await asyncio.sleep(0.02)


async def _publish_runs(url: str) -> dict[str, Any]:
    """Runs of one PUB line with one reply subject (as a benchmark publishes) to a stream
    without limits, to a stream with a limit (each message the long way), to a subject
    nobody receives (a request: "no responders" each time), then the first line again once
    its stream is deleted."""
    nc = await nats.connect(url)  # headers and no_responders, as nats-py connects
    try:
        js = nc.jetstream()
        await js.add_stream(name="S", subjects=["s", "s2"])
        await js.add_stream(name="L", subjects=["l"], max_msgs=5)
        acks: list[tuple[bytes, str]] = []
        limited: list[tuple[bytes, str]] = []
        nobody: list[tuple[bytes, str]] = []
        for subject, into in (("_R.ack", acks), ("_R.l", limited), ("_R.no", nobody)):
            await _replies(nc, subject, into)
        for i in range(RUN):
            await nc.publish("s", b"%04d" % i, reply="_R.ack")  # one line: one run per read
        for i in range(RUN):
            await nc.publish("s2" if i % 3 else "s", b"m%d" % i, reply="_R.ack")  # lines in turn
        for i in range(20):
            await nc.publish("l", b"l%02d" % i, reply="_R.l")
        for i in range(5):
            await nc.publish("nobody", b"n%d" % i, reply="_R.no")
        await nc.flush()
        await _wait_for(acks, 2 * RUN)
        await _wait_for(limited, 20)
        await _wait_for(nobody, 5)
        info = await js.stream_info("S")
        limited_info = await js.stream_info("L")
        first = await js.get_msg("S", 1)
        last = await js.get_msg("S", 2 * RUN)
        await js.delete_stream("S")
        for i in range(3):  # the line planned before: nobody receives it now
            await nc.publish("s", b"%04d" % i, reply="_R.ack")
        await nc.flush()
        await _wait_for(acks, 2 * RUN + 3)
        await asyncio.sleep(0.2)
        return {
            "acks": acks,
            "limited": limited,
            "nobody": nobody,
            "stored": (info.state.messages, info.state.bytes, info.state.last_seq),
            "limited_stored": (limited_info.state.messages, limited_info.state.first_seq),
            "first": (first.subject, first.data),
            "last": (last.subject, last.data),
        }
    finally:
        await nc.close()


async def test_runs_to_a_stream_do_what_they_do_on_nats_server(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    require_nats_server()
    async with go_server(tmp_path / "go") as url:
        expected = await _publish_runs(url)
    taken: list[int] = []
    on_line = Stream._on_line

    def counted(self: Stream, sub: Any, subject: bytes, reply: bytes, tails: list[bytes]) -> None:
        taken.append(len(tails))
        on_line(self, sub, subject, reply, tails)

    monkeypatch.setattr(Stream, "_on_line", counted)
    async with py_server(tmp_path / "py") as url:
        got = await _publish_runs(url)
    assert [json.loads(data) for data, _ in expected["acks"][:2]] == [
        {"stream": "S", "seq": 1},
        {"stream": "S", "seq": 2},
    ]
    assert [status for _, status in expected["nobody"]] == ["503"] * 5
    assert [status for _, status in expected["acks"][-4:]] == ["", "503", "503", "503"]
    assert got == expected
    # The planned way was taken, a run at a time: most messages came in runs of more than one.
    assert sum(taken) > RUN and max(taken) > 10
