"""Several pull requests waiting on one consumer when a batch of messages is stored: the
messages go round-robin (Go's waitQueue: a request that wants more goes to the back, a served
one leaves), each in the frame and with the ack reply nats-server gives, headers kept for a
client that takes them and stripped for one that does not. Side by side with nats-server, on
the wire (pynatsd hands such a batch out in one run: jetstream/consumer/pullrun.py)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import nats
import pytest

from support.jspair import go_server, py_server
from support.natsserver import nats_server_binary
from support.normalise import split_frames
from support.rawclient import RawClient

pytestmark = pytest.mark.skipif(nats_server_binary() is None, reason="nats-server not installed")

# (inbox, batch) of the requests, sent in this order before any message is stored.
REQUESTS = [("_I.a", 5), ("_I.b", 2), ("_I.c", 4), ("_I.d", 1)]
STORED = 14  # more than the requests want (12): the last two wait for the next request


def _publishes() -> bytes:
    """One write of `STORED` messages, every third with a header."""
    out = b""
    for i in range(STORED):
        body = b"m%d" % i
        if i % 3 == 1:
            hdr = b"NATS/1.0\r\nK: %d\r\n\r\n" % i
            out += b"HPUB s.%d %d %d\r\n%s%s\r\n" % (
                i % 4,
                len(hdr),
                len(hdr) + len(body),
                hdr,
                body,
            )
        else:
            out += b"PUB s.%d %d\r\n%s\r\n" % (i % 4, len(body), body)
    return out


def _comparable(frame: bytes) -> bytes:
    """A delivery with the two tokens of its ack reply that depend on timing blanked: the
    stored time, and the count of messages left (nats-server may deliver before the whole
    batch is stored)."""
    line, sep, rest = frame.partition(b"\r\n")
    words = line.split(b" ")
    for j, word in enumerate(words):
        if word.startswith(b"$JS.ACK."):
            tokens = word.split(b".")
            tokens[7] = tokens[8] = b"_"
            words[j] = b".".join(tokens)
    return b" ".join(words) + sep + rest


async def _run(url: str, ack_policy: str, headers: bool) -> tuple[list[bytes], dict[str, int]]:
    nc = await nats.connect(url)
    js = nc.jetstream()
    await js.add_stream(name="S", subjects=["s.>"])
    await js.add_consumer("S", durable_name="c", ack_policy=ack_policy)
    port = int(url.rsplit(":", 1)[1])
    reader = await RawClient.connect(port)
    connect = {"verbose": False, "pedantic": False, "protocol": 1, "headers": headers}
    requests = b"".join(
        b"PUB $JS.API.CONSUMER.MSG.NEXT.S.c %s %d\r\n%s\r\n" % (inbox.encode(), len(body), body)
        for inbox, batch in REQUESTS
        for body in [json.dumps({"batch": batch}).encode()]
    )
    # A subscription per inbox: the sid of each delivery says which request took it.
    subs = b"".join(
        b"SUB %s %d\r\n" % (inbox.encode(), k + 1) for k, (inbox, _) in enumerate(REQUESTS)
    )
    await reader.send(
        b"CONNECT %s\r\n%s%sPING\r\n" % (json.dumps(connect).encode(), subs, requests)
    )
    await reader.read_until(b"PONG\r\n")
    for _ in range(100):  # nats-server queues the requests for the consumer's goroutine
        if (await js.consumer_info("S", "c")).num_waiting == len(REQUESTS):
            break
        await asyncio.sleep(0.02)
    writer = await RawClient.connect(port)
    await writer.send(b'CONNECT {"verbose":false,"headers":true}\r\n' + _publishes() + b"PING\r\n")
    await writer.read_until(b"PONG\r\n")
    got, _ = await reader.read_all(quiet=0.3)
    info = await js.consumer_info("S", "c")
    state = {
        "delivered": info.delivered.consumer_seq,
        "stream_seq": info.delivered.stream_seq,
        "ack_pending": info.num_ack_pending,
        "pending": info.num_pending,
        "waiting": info.num_waiting,
        "ack_floor": info.ack_floor.consumer_seq,
    }
    await writer.close()
    await reader.close()
    await nc.close()
    frames = [_comparable(f) for f in split_frames(got) if not f.startswith(b"INFO ")]
    return frames, state


@pytest.mark.parametrize("headers", [True, False], ids=["headers", "no-headers"])
@pytest.mark.parametrize("ack_policy", ["none", "explicit"])
async def test_waiting_requests_take_a_batch_round_robin_as_on_nats_server(
    tmp_path: Path, ack_policy: str, headers: bool
) -> None:
    (tmp_path / "go").mkdir()
    (tmp_path / "py").mkdir()
    async with go_server(tmp_path / "go") as url:
        expected = await _run(url, ack_policy, headers)
    async with py_server(tmp_path / "py") as url:
        got = await _run(url, ack_policy, headers)
    assert got == expected
    frames, state = got
    # What the comparison stands for: all 12 wanted were delivered, round-robin.
    assert len(frames) == 12 and state["delivered"] == 12 and state["waiting"] == 0
    assert [f.split(b" ")[2] for f in frames] == [
        b"%d" % sid for sid in (1, 2, 3, 4, 1, 2, 3, 1, 3, 1, 3, 1)
    ]
