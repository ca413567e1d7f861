"""Stream snapshots and restores side by side with nats-server: the request errors, the shape
of a snapshot's chunks (acknowledged chunks, the short last one, the closing `204`), and
backups moved between the two servers: a snapshot nats-server made restores into pynatsd, one
pynatsd made restores into nats-server and into pynatsd, with the same messages (subjects,
headers, bodies, times, the deleted sequence) and the same consumer state afterwards."""

from __future__ import annotations

import asyncio
import base64
import json
import random
from pathlib import Path
from typing import Any

import nats
import pytest

from support.jsbackup import Backup, backup, restore
from support.jspair import (
    Step,
    assert_same,
    go_server,
    py_server,
    request_json,
    run_both,
    side_by_side,
)

pytestmark = pytest.mark.skipif(
    __import__("support.natsserver", fromlist=["x"]).nats_server_binary() is None,
    reason="nats-server not installed",
)

API = "$JS.API"
CONFIG = {"name": "O", "subjects": ["o.>"]}

REQUEST_ERRORS: list[Step] = [
    ("req", f"{API}.STREAM.CREATE.O", CONFIG),
    ("req", f"{API}.STREAM.SNAPSHOT.O", ""),
    ("req", f"{API}.STREAM.SNAPSHOT.O", {}),
    ("req", f"{API}.STREAM.SNAPSHOT.NOPE", {"deliver_subject": "x"}),
    ("req", f"{API}.STREAM.SNAPSHOT.O", "{bad"),
    ("req", f"{API}.STREAM.SNAPSHOT.O", {"deliver_subject": "x", "unknown": 1}),
    ("req", f"{API}.STREAM.SNAPSHOT.O", {"deliver_subject": "x", "chunk_size": "big"}),
    ("req", f"{API}.STREAM.SNAPSHOT.O", {"no_consumers": True}),
    ("req", f"{API}.STREAM.SNAPSHOT.O", {"deliver_subject": "a.*"}),
    ("req", f"{API}.STREAM.RESTORE.R", ""),
    ("req", f"{API}.STREAM.RESTORE.R", "{bad"),
    ("req", f"{API}.STREAM.RESTORE.R", {"config": {"name": "OTHER"}}),
    ("req", f"{API}.STREAM.RESTORE.O", {"config": CONFIG}),
    ("req", f"{API}.STREAM.RESTORE.R", {"config": {"name": "R", "max_msgs": -5, "retention": "x"}}),
    ("req", f"{API}.STREAM.RESTORE.R", {"config": {"name": "R", "subjects": ["a..b"]}}),
    ("req", f"{API}.STREAM.RESTORE.R", {"config": {"name": "R", "max_age": -1}}),
]


async def test_snapshot_and_restore_request_errors_as_nats_server(tmp_path: Path) -> None:
    expected, got = await side_by_side(tmp_path, REQUEST_ERRORS)
    assert_same(expected, got)


async def _fill(nc: Any) -> None:
    """A stream with headers, a deleted message, and a consumer part-way through it."""
    await nc.request(f"{API}.STREAM.CREATE.O", json.dumps(CONFIG).encode(), timeout=2)
    for i in range(60):
        headers = {"Nats-Msg-Id": f"id{i}", "K": "v"} if i % 7 == 0 else None
        await nc.request(f"o.{i % 4}", b"payload %d " % i * 20, headers=headers, timeout=2)
    await nc.request(f"{API}.STREAM.MSG.DELETE.O", json.dumps({"seq": 5}).encode(), timeout=2)
    consumer = {"stream_name": "O", "config": {"durable_name": "d", "ack_policy": "explicit"}}
    await nc.request(f"{API}.CONSUMER.CREATE.O.d", json.dumps(consumer).encode(), timeout=2)
    js = nc.jetstream()
    sub = await js.pull_subscribe("o.>", durable="d", stream="O")
    for msg in (await sub.fetch(10, timeout=2))[:4]:
        await msg.ack_sync()


async def _contents(nc: Any) -> list[Any]:
    out: list[Any] = []
    info = json.loads((await nc.request(f"{API}.STREAM.INFO.O", b"", timeout=2)).data)
    state = info["state"]
    out.append({k: state.get(k) for k in ("messages", "first_seq", "last_seq", "num_deleted")})
    for seq in range(state["first_seq"], state["last_seq"] + 1):
        body = json.dumps({"seq": seq}).encode()
        reply = json.loads((await nc.request(f"{API}.STREAM.MSG.GET.O", body, timeout=2)).data)
        message = reply.get("message")
        if message is None:
            out.append((seq, reply["error"]["err_code"]))
            continue
        hdrs = base64.b64decode(message.get("hdrs", "")).decode()
        out.append((seq, message["subject"], hdrs, message["data"], message["time"]))
    reply = await nc.request(f"{API}.CONSUMER.INFO.O.d", b"", timeout=2)
    info = json.loads(reply.data)
    keys = ("delivered", "ack_floor", "num_ack_pending", "num_redelivered", "num_pending")
    out.append({k: info.get(k) for k in keys})
    return out


async def _backup_from(url: str, **options: Any) -> tuple[Backup, list[Any]]:
    nc = await nats.connect(url)
    try:
        await _fill(nc)
        return await backup(nc, "O", **options), await _contents(nc)
    finally:
        await nc.close()


async def _restore_into(url: str, made: Backup) -> tuple[list[Any], list[Any]]:
    nc = await nats.connect(url)
    try:
        request = {"config": made.reply["config"], "state": made.reply["state"]}
        accepted, answers, final = await restore(nc, "O", made.data, request)
        shape = [sorted(accepted), answers, final.get("error"), final.get("type")]
        return shape, await _contents(nc)
    finally:
        await nc.close()


def _active_free(contents: list[Any]) -> list[Any]:
    """Consumer info's `last_active` times differ between two servers by nature."""
    out = list(contents)
    consumer = dict(out[-1])
    for key in ("delivered", "ack_floor"):
        if isinstance(consumer.get(key), dict):
            consumer[key] = {k: v for k, v in consumer[key].items() if k != "last_active"}
    out[-1] = consumer
    return out


async def test_backups_move_between_the_servers(tmp_path: Path) -> None:
    dirs = {name: tmp_path / name for name in ("go1", "go2", "py1", "py2")}
    for d in dirs.values():
        d.mkdir()
    async with go_server(dirs["go1"]) as go_url:
        go_backup, go_original = await _backup_from(go_url, chunk_size=1024)
    async with py_server(dirs["py1"]) as py_url:
        py_backup, py_original = await _backup_from(py_url, chunk_size=1024)
    # The snapshot replies and the shape of the chunks agree.
    for made in (go_backup, py_backup):
        made.reply["state"] = {
            k: v for k, v in made.reply["state"].items() if not k.endswith("_ts")
        }
    assert py_backup.reply == go_backup.reply
    assert py_backup.shape == go_backup.shape == ["chunk+ack", "chunk", "end 204"]
    async with py_server(dirs["py2"]) as py_url:
        from_go = await _restore_into(py_url, go_backup)
    async with go_server(dirs["go2"]) as go_url:
        from_py = await _restore_into(go_url, py_backup)
    async with py_server(tmp_path / "py1") as py_url:
        nc = await nats.connect(py_url)
        try:
            await nc.request(f"{API}.STREAM.DELETE.O", b"", timeout=2)
        finally:
            await nc.close()
        from_py_to_py = await _restore_into(py_url, py_backup)
    created = "io.nats.jetstream.api.v1.stream_create_response"
    accepted = [["deliver_subject", "type"], [b""], None, created]
    assert from_go[0] == from_py[0] == from_py_to_py[0] == accepted
    assert _active_free(from_go[1]) == _active_free(go_original)
    assert _active_free(from_py[1]) == _active_free(py_original)
    assert _active_free(from_py_to_py[1]) == _active_free(py_original)


async def _advisories(url: str) -> list[Any]:
    """The stream advisories of a snapshot, the stream's delete and its restore, without what
    differs by nature (ids, times, the client's round trip; the restore's byte count, since
    pynatsd's backup is not compressed)."""
    nc = await nats.connect(url)
    events: list[Any] = []

    async def keep(msg: Any) -> None:
        event = json.loads(msg.data)
        for key in ("id", "timestamp", "start", "end", "bytes"):
            event.pop(key, None)
        client = event.pop("client", None)
        events.append((msg.subject, event, sorted(set(client or {}) - {"rtt"})))

    try:
        await nc.subscribe("$JS.EVENT.ADVISORY.STREAM.>", cb=keep)
        await request_json(nc, f"{API}.STREAM.CREATE.O", CONFIG)
        await nc.request("o.1", b"x", timeout=2)
        made = await backup(nc, "O")
        await request_json(nc, f"{API}.STREAM.DELETE.O")
        request = {"config": made.reply["config"], "state": made.reply["state"]}
        await restore(nc, "O", made.data, request)
        deadline = asyncio.get_running_loop().time() + 15
        while len(events) < 7 and asyncio.get_running_loop().time() < deadline:
            await asyncio.sleep(0.02)
    finally:
        await nc.close()
    for _, event, _ in events:
        if isinstance(event.get("state"), dict):
            event["state"] = {k: v for k, v in event["state"].items() if not k.endswith("_ts")}
    return events


async def test_snapshot_and_restore_advisories_as_nats_server(tmp_path: Path) -> None:
    expected, got = await run_both(tmp_path, _advisories)
    assert len(expected) == 7

    def key(item: Any) -> str:
        return json.dumps(item, sort_keys=True)

    # nats-server sends the restored stream's CREATED and the RESTORE_COMPLETE advisories
    # from two goroutines, in either order: compared as a set, not a sequence.
    assert sorted(got, key=key) == sorted(expected, key=key)


async def _receiver_leaves(url: str) -> list[Any]:
    """A receiver that takes the first chunk without acknowledging it and unsubscribes: the
    snapshot stops ("no interest" in its completion advisory)."""
    nc = await nats.connect(url)
    got: list[Any] = []
    done = asyncio.Event()
    try:

        async def completed(msg: Any) -> None:
            got.append(json.loads(msg.data).get("error"))
            done.set()

        await nc.subscribe("$JS.EVENT.ADVISORY.STREAM.SNAPSHOT_COMPLETE.O", cb=completed)
        await request_json(nc, f"{API}.STREAM.CREATE.O", CONFIG)
        for i in range(8):  # incompressible, so nats-server's backup needs several chunks too
            await nc.request("o.1", random.Random(i).randbytes(1000), timeout=2)
        inbox = nc.new_inbox()
        sub = await nc.subscribe(inbox)
        body = {"deliver_subject": inbox, "chunk_size": 1024, "window_size": 1024}
        reply = await request_json(nc, f"{API}.STREAM.SNAPSHOT.O", body)
        got.append(sorted(reply))
        first = await sub.next_msg(timeout=5)
        got.append(bool(first.reply))
        await sub.unsubscribe()
        await asyncio.wait_for(done.wait(), 10)
    finally:
        await nc.close()
    return got


async def test_a_snapshot_stops_when_its_receiver_leaves(tmp_path: Path) -> None:
    expected, got = await run_both(tmp_path, _receiver_leaves)
    assert expected == [["config", "state", "type"], True, "no interest"]
    assert got == expected


async def _restore_overlapping(url: str) -> list[Any]:
    """A backup restored while another stream has taken its subjects: refused at the first
    chunk, with nats-server's text."""
    nc = await nats.connect(url)
    try:
        await request_json(nc, f"{API}.STREAM.CREATE.O", CONFIG)
        await nc.request("o.1", b"x", timeout=2)
        made = await backup(nc, "O")
        await request_json(nc, f"{API}.STREAM.DELETE.O")
        await request_json(nc, f"{API}.STREAM.CREATE.P", {"name": "P", "subjects": ["o.>"]})
        request = {"config": made.reply["config"], "state": made.reply["state"]}
        accepted, _, final = await restore(nc, "O", made.data, request)
        names = await request_json(nc, f"{API}.STREAM.NAMES")
        return [sorted(accepted), final, names["streams"]]
    finally:
        await nc.close()


async def test_a_restore_onto_taken_subjects_fails_as_nats_server(tmp_path: Path) -> None:
    expected, got = await run_both(tmp_path, _restore_overlapping)
    assert got == expected
