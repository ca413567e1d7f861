"""JetStream advisories and metrics side by side with nats-server -js: a client listens on
`$JS.EVENT.>` while another runs the same API calls and consumer actions on each server; the
events (subjects and JSON, key order included) must be the same after normalising ids, times,
server names and the client's connection details."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import nats
import pytest

import pynatsd
from pynatsd.gofmt import format_go_time
from pynatsd.jetstream import advisories
from support.jspair import _normalize, go_server
from support.natsserver import nats_server_binary

pytestmark = pytest.mark.skipif(nats_server_binary() is None, reason="nats-server not installed")

API = "$JS.API"
API_AUDIT = "$JS.EVENT.ADVISORY.API"
# Values that differ between two runs or two servers without saying anything about
# compatibility: the event's own id and time, the requester's connection, measured durations.
_EVENT_VOLATILE = {"id", "timestamp", "ack_time", "start", "end"}
_CLIENT_VOLATILE = {"start", "id", "rtt", "server", "ver", "host"}


@asynccontextmanager
async def _py_server(store_dir: Path, domain: str) -> AsyncIterator[str]:
    async with pynatsd.Server(
        port=0, jetstream=True, store_dir=str(store_dir), jetstream_domain=domain
    ) as srv:
        yield srv.client_url


def _normalise_event(subject: str, data: bytes, soon: str) -> dict[str, Any]:
    event = json.loads(data.replace(soon.encode(), b"<soon>"))
    for key in _EVENT_VOLATILE & event.keys():
        event[key] = "<volatile>"
    if "server" in event:
        event["server"] = "<server>"
    client = event.get("client")
    if isinstance(client, dict):
        # nats-server knows a client's RTT from its first PONG; pynatsd from its first ping.
        event["client"] = {k: v for k, v in client.items() if k != "rtt"}
        for key in _CLIENT_VOLATILE & event["client"].keys():
            event["client"][key] = "<volatile>"
    if "response" in event:
        event["response"] = _normalize(json.loads(event["response"]))
    name = event.get("consumer")
    if isinstance(name, str) and len(name) == 8 and name not in ("C", "P", "LC"):
        event["consumer"] = "<generated>"  # an ephemeral's generated name
        subject = subject.replace(name, "<generated>")
    return {"subject": subject, "event": event}


async def _scenario(url: str, domain: str) -> list[dict[str, Any]]:
    """The same calls on either server; returns the events seen, in order per subject."""
    watcher = await nats.connect(url, name="watcher")
    seen: list[tuple[str, bytes]] = []

    async def keep(msg: Any) -> None:
        seen.append((msg.subject, msg.data))

    await watcher.subscribe("$JS.EVENT.>", cb=keep)
    await watcher.flush()
    nc = await nats.connect(url, name="actor")

    async def req(subject: str, body: Any = "") -> Any:
        data = body.encode() if isinstance(body, str) else json.dumps(body).encode()
        msg = await nc.request(subject, data, timeout=2)
        return json.loads(msg.data)

    async def fetch(n: int, expires: float = 0.5, consumer: str = "S.C") -> list[Any]:
        inbox = nc.new_inbox()
        sub = await nc.subscribe(inbox)
        body = {"batch": n, "expires": int(expires * 1e9)}
        subject = f"{API}.CONSUMER.MSG.NEXT.{consumer}"
        await nc.publish(subject, json.dumps(body).encode(), reply=inbox)
        got = []
        deadline = time.monotonic() + expires
        while len(got) < n and time.monotonic() < deadline:
            try:
                msg = await sub.next_msg(timeout=max(deadline - time.monotonic(), 0.01))
            except Exception:
                break
            if msg.reply:
                got.append(msg)
        await sub.unsubscribe()
        return got

    try:
        stream = {"name": "S", "subjects": ["s.>"], "storage": "memory"}
        await req(f"{API}.STREAM.CREATE.S", stream)
        await req(f"{API}.STREAM.CREATE.S", stream)  # identical: no second CREATED
        await req(f"{API}.STREAM.UPDATE.S", {**stream, "max_msgs": 100})
        await req(f"{API}.STREAM.UPDATE.S", {**stream, "storage": "file"})  # refused
        await req(f"{API}.STREAM.INFO.NOPE")
        await req(f"{API}.STREAM.INFO.S")  # the replies of info, list and update carry a domain
        await req(f"{API}.STREAM.LIST")
        if domain:  # audited under the $JS.API subject it is mapped onto
            await req(f"$JS.{domain}.API.STREAM.INFO.S")
        durable = {
            "durable_name": "C",
            "ack_policy": "explicit",
            "max_deliver": 2,
            "ack_wait": 300_000_000,
            "sample_freq": "100%",
        }
        await req(f"{API}.CONSUMER.CREATE.S.C", {"stream_name": "S", "config": durable})
        # An update sends no consumer advisory, only the audit.
        update = {**durable, "description": "updated"}
        await req(f"{API}.CONSUMER.CREATE.S.C", {"stream_name": "S", "config": update})
        paused = {"durable_name": "P", "pause_until": "2099-01-01T00:00:00Z"}
        await req(f"{API}.CONSUMER.CREATE.S.P", {"stream_name": "S", "config": paused})
        await req(f"{API}.CONSUMER.PAUSE.S.P", {})
        # Paused until shortly: the pause advisory again when that time comes (the steps below
        # take more than a second).
        soon = format_go_time(time.time_ns() + 600_000_000)
        await req(f"{API}.CONSUMER.PAUSE.S.P", {"pause_until": soon})
        await req(f"{API}.CONSUMER.PAUSE.S.P", {"pause_until": soon})  # unchanged: no advisory
        for i in range(1, 6):
            await nc.request(f"s.{i}", b"m%d" % i, timeout=2)
        msgs = await fetch(5)
        assert len(msgs) == 5
        await msgs[0].ack_sync()  # sampled: the metric
        await msgs[1].nak()
        await nc.publish(msgs[2].reply, b"+TERM bad")
        await nc.publish(msgs[3].reply, b"+TERM")  # no reason: left out
        await nc.flush()
        await asyncio.sleep(0.1)
        # Seq 2 (naked) and 5 come again, then reach max_deliver once their ack wait ends.
        again = await fetch(2)
        assert len(again) == 2
        await asyncio.sleep(0.45)
        assert await fetch(1, expires=0.3) == []
        # A pending message deleted from the stream: the server terminates it itself.
        await nc.request("s.6", b"m6", timeout=2)
        assert len(await fetch(1)) == 1
        await req(f"{API}.STREAM.MSG.DELETE.S", {"seq": 6})
        # A pending message pushed out by the stream's limits: terminated too (nats-server at
        # once, pynatsd when the consumer's ack wait next looks).
        limited = {"name": "L", "subjects": ["l"], "storage": "memory", "max_msgs": 1}
        await req(f"{API}.STREAM.CREATE.L", limited)
        cfg = {"durable_name": "LC", "ack_policy": "explicit", "ack_wait": 300_000_000}
        await req(f"{API}.CONSUMER.CREATE.L.LC", {"stream_name": "L", "config": cfg})
        await nc.request("l", b"1", timeout=2)
        assert len(await fetch(1, consumer="L.LC")) == 1
        await nc.request("l", b"2", timeout=2)
        # An ephemeral push consumer nobody listens to goes away after its inactive threshold.
        eph = {"deliver_subject": "nobody.here", "inactive_threshold": 200_000_000}
        await req(f"{API}.CONSUMER.CREATE.S", {"stream_name": "S", "config": eph})
        await asyncio.sleep(0.5)
        await req(f"{API}.CONSUMER.DELETE.S.C")
        await req(f"{API}.CONSUMER.DELETE.S.C")  # not found: an error audit
        await req(f"{API}.STREAM.DELETE.S")  # P goes first, then the stream
        await req(f"{API}.INFO")
        await nc.flush()
        # The stream's delete advisory leaves from its own queue on nats-server: wait for it
        # (not for a fixed time, which a loaded machine outruns), then for stragglers.
        deleted = "$JS.EVENT.ADVISORY.STREAM.DELETED.S"
        for _ in range(100):
            if any(subject == deleted for subject, _ in seen):
                break
            await asyncio.sleep(0.05)
        await asyncio.sleep(0.2)
    finally:
        await nc.close()
        await watcher.close()
    events = [_normalise_event(s, d, soon) for s, d in seen]
    # nats-server sends stream and consumer events and the API audit from different queues,
    # so only the order within one subject is fixed; and it answers API requests from a pool
    # of workers, each sending its audit after its reply, so one request's audit can overtake
    # the previous one's: audits are compared as a set.
    return sorted(
        events,
        key=lambda e: (e["subject"], json.dumps(e) if e["subject"] == API_AUDIT else ""),
    )


def _compare(expected: list[dict[str, Any]], got: list[dict[str, Any]]) -> None:
    # nats-server sends a stream's delete advisory from the stream's own send queue, which the
    # delete itself stops: on a loaded machine the advisory is sometimes never sent. pynatsd
    # always sends it; when nats-server's is missing, the rest is compared without it.
    deleted = "$JS.EVENT.ADVISORY.STREAM.DELETED."
    if not any(e["subject"].startswith(deleted) for e in expected):
        assert any(e["subject"].startswith(deleted) for e in got)
        got = [e for e in got if not e["subject"].startswith(deleted)]
    want = [json.dumps(e) for e in expected]
    have = [json.dumps(e) for e in got]
    assert have == want, "\n".join(
        f"{'==' if a == b else '!='} ns: {a}\n   py: {b}"
        for a, b in zip(want + [""] * len(have), have + [""] * len(want), strict=False)
        if a or b
    )


@pytest.mark.parametrize("domain", ["", "hub"])
async def test_advisories_side_by_side(tmp_path: Path, domain: str) -> None:
    (tmp_path / "go").mkdir()
    (tmp_path / "py").mkdir()
    config = f"jetstream {{ domain: {domain} }}\n" if domain else ""
    async with go_server(tmp_path / "go", config) as url:
        expected = await _scenario(url, domain)
    async with _py_server(tmp_path / "py", domain) as url:
        got = await _scenario(url, domain)
    kinds = {e["event"]["type"].rsplit(".", 1)[1] for e in expected}
    assert {
        "api_audit",
        "stream_action",
        "consumer_action",
        "consumer_pause",
        "consumer_ack",
        "nak",
        "terminated",
        "max_deliver",
    } <= kinds
    _compare(expected, got)


class _CountingNuid:
    def __init__(self) -> None:
        self.calls = 0

    def next(self) -> str:
        self.calls += 1
        return "X" * 22


async def test_nothing_built_without_a_listener(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without a subscriber on the event's subject no event is built (no id drawn), not for
    the API audit, stream and consumer actions, nor a sampled ack; with one, they are."""
    counter = _CountingNuid()
    monkeypatch.setattr(advisories, "_nuid", counter)

    async def run(nc: Any, stream: str) -> None:
        body = {"name": stream, "subjects": [stream.lower()], "storage": "memory"}
        await nc.request(f"{API}.STREAM.CREATE.{stream}", json.dumps(body).encode())
        cfg = {"durable_name": "D", "ack_policy": "explicit", "sample_freq": "100%"}
        body = {"stream_name": stream, "config": cfg}
        await nc.request(f"{API}.CONSUMER.CREATE.{stream}.D", json.dumps(body).encode())
        await nc.request(stream.lower(), b"x")
        inbox = nc.new_inbox()
        sub = await nc.subscribe(inbox)
        await nc.publish(f"{API}.CONSUMER.MSG.NEXT.{stream}.D", b'{"batch":1}', reply=inbox)
        msg = await sub.next_msg(timeout=2)
        await msg.ack_sync()
        await sub.unsubscribe()

    async with _py_server(tmp_path, "") as url:
        nc = await nats.connect(url)
        await nc.subscribe("$JS.EVENT.ADVISORY.STREAM.DELETED.>")  # another event's subject
        await run(nc, "T")
        assert counter.calls == 0
        events = await nc.subscribe("$JS.EVENT.>")
        await nc.flush()
        await run(nc, "U")
        # stream created, consumer created, two audits (MSG.NEXT has none), one ack metric
        assert counter.calls == 5
        assert (await events.next_msg(timeout=1)).subject == "$JS.EVENT.ADVISORY.STREAM.CREATED.U"
        await nc.close()
