"""A stream backup and restore client, as the `nats stream backup` / `restore` commands (jsm.go)
speak the protocol: `$JS.API.STREAM.SNAPSHOT.<stream>` with a deliver subject, every chunk
acknowledged through its reply; `$JS.API.STREAM.RESTORE.<stream>` with the config and state,
then the chunks as requests to the deliver subject it names, and an empty one to finish."""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass, field
from typing import Any

from nats.aio.client import Client as NATS

API = "$JS.API"


@dataclass
class Backup:
    reply: dict[str, Any]
    data: bytes = b""
    # The shape of what arrived: "chunk+ack" (a chunk with an ack reply), "chunk" (one
    # without), then the closing message's status ("end" plus its header, if any).
    shape: list[str] = field(default_factory=list)


async def backup(nc: NATS, stream: str, **options: Any) -> Backup:
    inbox = nc.new_inbox()
    done = asyncio.Event()
    got = Backup(reply={})
    parts: list[bytes] = []

    async def on_chunk(msg: Any) -> None:
        if msg.data:
            kind = "chunk+ack" if msg.reply else "chunk"
            if not got.shape or got.shape[-1] != kind:
                got.shape.append(kind)
            parts.append(msg.data)
            if msg.reply:
                await nc.publish(msg.reply, b"")
            return
        status = msg.header.get("Status", "") if msg.header else ""
        got.shape.append(f"end {status}".strip())
        done.set()

    sub = await nc.subscribe(inbox, cb=on_chunk)
    try:
        body = {"deliver_subject": inbox, **options}
        reply = await nc.request(f"{API}.STREAM.SNAPSHOT.{stream}", json.dumps(body).encode(), 2)
        got.reply = json.loads(reply.data)
        if "error" not in got.reply:
            await asyncio.wait_for(done.wait(), 10)
    finally:
        await sub.unsubscribe()
    got.data = b"".join(parts)
    return got


async def restore(
    nc: NATS, stream: str, data: bytes, request: dict[str, Any], chunk_size: int = 1024
) -> tuple[dict[str, Any], list[bytes], dict[str, Any]]:
    """(the restore request's reply, the distinct chunk replies, the final reply)."""
    reply = await nc.request(
        f"{API}.STREAM.RESTORE.{stream}", json.dumps(request).encode(), timeout=2
    )
    accepted = json.loads(reply.data)
    if "error" in accepted:
        return accepted, [], {}
    deliver = accepted["deliver_subject"]
    answers: list[bytes] = []
    for start in range(0, len(data), chunk_size):
        answer = await nc.request(deliver, data[start : start + chunk_size], timeout=2)
        if answer.data not in answers:
            answers.append(answer.data)
        if answer.data:
            return accepted, answers, json.loads(answer.data)
    final = await nc.request(deliver, b"", timeout=5)
    return accepted, answers, json.loads(final.data)
