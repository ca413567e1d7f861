"""Per-message TTLs and subject delete markers side by side with nats-server -js: the config
and header errors, the TTL a marker's minimum imposes, and what nats-py's KV watchers see
when a key's TTL ends or max_age removes the last message of a subject (a marker with
`Nats-Marker-Reason: MaxAge`), compared after normalising the times."""

from __future__ import annotations

import asyncio
import base64
import json
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import nats
import pytest
from nats.js.kv import KeyValue

from support.jspair import Step, assert_same, go_server, py_server, side_by_side

pytestmark = pytest.mark.skipif(
    __import__("support.natsserver", fromlist=["x"]).nats_server_binary() is None,
    reason="nats-server not installed",
)

API = "$JS.API"
SECOND = 1_000_000_000


def stream(name: str, pedantic: bool = False, **cfg: Any) -> Step:
    body: dict[str, Any] = {"name": name, **cfg}
    if pedantic:
        body["pedantic"] = True
    return ("req", f"{API}.STREAM.CREATE.{name}", body)


CONFIG_AND_HEADERS: list[Step] = [
    stream("A", subjects=["a"], subject_delete_marker_ttl=SECOND // 2),
    stream("A", subjects=["a"], subject_delete_marker_ttl=-1),
    stream("A", pedantic=True, subjects=["a"], subject_delete_marker_ttl=SECOND),
    stream(
        "A", pedantic=True, subjects=["a"], allow_msg_ttl=True, subject_delete_marker_ttl=SECOND
    ),
    stream(
        "A",
        pedantic=True,
        subjects=["a"],
        allow_msg_ttl=True,
        allow_rollup_hdrs=True,
        deny_purge=True,
        subject_delete_marker_ttl=SECOND,
    ),
    # Without pedantic the server switches on what markers need.
    stream("A", subjects=["a.>"], subject_delete_marker_ttl=5 * SECOND, deny_purge=True),
    stream("M", mirror={"name": "A"}, subject_delete_marker_ttl=SECOND),
    ("req", f"{API}.STREAM.UPDATE.A", {"name": "A", "subjects": ["a.>"], "allow_msg_ttl": False}),
    stream("PLAIN", subjects=["p"]),
    ("pub", "p", "x", {"Nats-TTL": "5s"}),
    ("pub", "p", "x", {"Nats-TTL": "junk"}),
    ("pub", "p", "x", {"Nats-TTL": "0"}),
    ("pub", "a.x", "x", {"Nats-TTL": "junk"}),
    ("pub", "a.x", "x", {"Nats-TTL": "500ms"}),
    ("pub", "a.x", "x", {"Nats-TTL": "-1"}),
    # Shorter than the marker TTL: raised to it (in seconds), as nats-server rewrites it.
    ("pub", "a.x", "x", {"Nats-TTL": "1s"}),
    ("pub", "a.y", "x", {"Nats-TTL": "never"}),
    ("pub", "a.z", "x", {"Nats-TTL": "1h"}),
    ("req", f"{API}.STREAM.MSG.GET.A", {"last_by_subj": "a.x"}),
    ("req", f"{API}.STREAM.MSG.GET.A", {"last_by_subj": "a.y"}),
    ("req", f"{API}.STREAM.MSG.GET.A", {"last_by_subj": "a.z"}),
    # With one message per subject the TTL is kept as sent.
    stream("ONE", subjects=["one"], max_msgs_per_subject=1, subject_delete_marker_ttl=5 * SECOND),
    ("pub", "one", "x", {"Nats-TTL": "1s"}),
    ("req", f"{API}.STREAM.MSG.GET.ONE", {"last_by_subj": "one"}),
]


async def test_ttl_config_and_header_errors_as_nats_server(tmp_path: Path) -> None:
    expected, got = await side_by_side(tmp_path, CONFIG_AND_HEADERS)
    assert_same(expected, got)


async def _kv_scenario(url: str) -> list[Any]:
    """Two buckets with markers: one key with a TTL, one bucket with max_age; what a watcher
    sees, what is stored afterwards."""
    nc = await nats.connect(url)
    out: list[Any] = []
    try:
        js = nc.jetstream()
        ttl_kv = await js.create_key_value(bucket="T", limit_marker_ttl=1.0)
        age_kv = await js.create_key_value(bucket="A", ttl=1.0, limit_marker_ttl=1.0)

        async def watch(kv: KeyValue) -> list[Any]:
            seen: list[Any] = []
            watcher = await kv.watchall()
            deadline = asyncio.get_running_loop().time() + 3.0
            while (left := deadline - asyncio.get_running_loop().time()) > 0:
                try:
                    entry = await watcher.updates(timeout=left)
                except Exception:  # nats-py's timeout
                    break
                if entry is not None:
                    seen.append((entry.key, entry.value, entry.operation, entry.revision))
            await watcher.stop()
            return seen

        ttl_watch = asyncio.create_task(watch(ttl_kv))
        age_watch = asyncio.create_task(watch(age_kv))
        await asyncio.sleep(0.2)
        await ttl_kv.create("short", b"v1", msg_ttl=1.0)
        await ttl_kv.put("stays", b"v2")
        await age_kv.put("k", b"v3")
        out.append(("ttl bucket", await ttl_watch))
        out.append(("age bucket", await age_watch))
        for stream_name, subject in (("KV_T", "$KV.T.short"), ("KV_A", "$KV.A.k")):
            reply = await nc.request(
                f"{API}.STREAM.MSG.GET.{stream_name}",
                json.dumps({"last_by_subj": subject}).encode(),
                timeout=2,
            )
            body = json.loads(reply.data)
            message = body.get("message", {})
            hdrs = base64.b64decode(message.get("hdrs", "")).decode()
            out.append((stream_name, body.get("error"), message.get("seq"), hdrs))
        # The markers have a TTL of their own.
        await asyncio.sleep(1.5)
        for name in ("KV_T", "KV_A"):
            info = await js.stream_info(name)
            out.append((name, info.state.messages, info.state.first_seq, info.state.last_seq))
    finally:
        await nc.close()
    return out


async def _run_both(tmp_path: Path, scenario: Callable[[str], Awaitable[list[Any]]]) -> None:
    (tmp_path / "go").mkdir()
    (tmp_path / "py").mkdir()

    async def go() -> list[Any]:
        async with go_server(tmp_path / "go") as url:
            return await scenario(url)

    async def py() -> list[Any]:
        async with py_server(tmp_path / "py") as url:
            return await scenario(url)

    expected, got = await asyncio.gather(go(), py())
    assert got == expected


async def test_kv_watchers_see_markers_as_with_nats_server(tmp_path: Path) -> None:
    await _run_both(tmp_path, _kv_scenario)
