"""Cross-account JetStream side by side with nats-server: account U imports account JS's
`$JS.API.>` (a service, streamed responses), its acks and flow-control replies, the stream
subjects (services, for the PubAcks) and the delivery subjects (a stream); through them it
creates streams, watches and reads a KV bucket, fetches from a pull consumer with idle
heartbeats and subscribes to a durable push consumer. `push_bound` appears in consumer info
only while a subscriber in U is really bound."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import nats
import pytest

from support.jspair import run_configured
from support.natsserver import NATS_SERVER, nats_server_binary
from support.processes import PYNATSD

pytestmark = pytest.mark.skipif(nats_server_binary() is None, reason="nats-server not installed")

CONFIG = """
accounts {
  JS {
    jetstream: enabled
    users: [{user: js, password: js}]
    exports: [
      {service: "$JS.API.>", response: stream}
      {service: "$JS.ACK.>"}
      {service: "$JS.FC.>"}
      {service: "s.>"}
      {service: "$KV.>"}
      {stream: "deliver.>"}
    ]
  }
  U {
    users: [{user: u, password: u}]
    imports: [
      {service: {account: JS, subject: "$JS.API.>"}}
      {service: {account: JS, subject: "$JS.ACK.>"}}
      {service: {account: JS, subject: "$JS.FC.>"}}
      {service: {account: JS, subject: "s.>"}}
      {service: {account: JS, subject: "$KV.>"}}
      {stream: {account: JS, subject: "deliver.>"}}
    ]
  }
}
"""


async def scenario(url: str) -> list[Any]:
    seen: list[Any] = []
    nc = await nats.connect(url, user="u", password="u", inbox_prefix=b"deliver")
    try:
        js = nc.jetstream()
        info = await js.add_stream(name="S", subjects=["s.>"])
        seen.append(("stream", info.config.name, info.state.messages))
        for i in range(3):
            ack = await js.publish(f"s.{i}", f"m{i}".encode())
            seen.append(("puback", ack.stream, ack.seq))

        # KV: put, history, watch (ordered push consumers with flow control and heartbeats).
        kv = await js.create_key_value(bucket="B", history=5)
        await kv.put("k", b"1")
        await kv.put("k", b"2")
        seen.append(("history", [e.value for e in await kv.history("k")]))
        watcher = await kv.watchall()
        first = await watcher.updates(timeout=2)
        seen.append(("watch", first.key if first else None, first.value if first else None))
        await watcher.updates(timeout=2)  # the end of the initial values (None)
        await kv.put("k", b"3")
        update = await watcher.updates(timeout=2)
        seen.append(("watch", update.key if update else None, update.value if update else None))
        await watcher.stop()
        seen.append(("keys", await kv.keys()))

        # Pull with idle heartbeats.
        psub = await js.pull_subscribe("s.>", durable="p")
        msgs = await psub.fetch(2, timeout=2, heartbeat=0.2)
        for m in msgs:
            await m.ack()
        seen.append(("fetch", [m.data for m in msgs]))
        try:
            await psub.fetch(5, timeout=1, heartbeat=0.2)
        except Exception as e:  # what the client makes of the last message and the expiry
            seen.append(("fetch rest", type(e).__name__))
        else:
            seen.append(("fetch rest", "ok"))

        # A durable push consumer: bound only while someone in U listens.
        await js.add_consumer(
            "S", durable_name="d", deliver_subject="deliver.d", ack_policy="explicit"
        )
        seen.append(("push_bound before", (await js.consumer_info("S", "d")).push_bound))
        got: list[bytes] = []

        async def keep(msg: Any) -> None:
            got.append(msg.data)

        sub = await js.subscribe("s.>", durable="d", cb=keep, manual_ack=True)
        await asyncio.sleep(0.3)
        seen.append(("push_bound after", (await js.consumer_info("S", "d")).push_bound))
        seen.append(("pushed", sorted(got)))
        await sub.unsubscribe()
        await asyncio.sleep(0.3)
        seen.append(("push_bound gone", (await js.consumer_info("S", "d")).push_bound))
        sub = await js.subscribe("s.>", durable="d", cb=keep)
        await sub.unsubscribe()
    finally:
        await nc.close()
    return seen


async def test_cross_account_as_nats_server(tmp_path: Path) -> None:
    expected = await run_configured([str(NATS_SERVER)], tmp_path / "go", CONFIG, scenario)
    got = await run_configured(PYNATSD, tmp_path / "py", CONFIG, scenario)
    assert got == expected
