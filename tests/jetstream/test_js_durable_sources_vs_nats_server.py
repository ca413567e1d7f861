"""Mirrors and sources through a durable consumer of the origin (ADR-60) side by side with
nats-server: the user's push consumer with `ack_policy: flow_control` feeds a mirror and a
source; the copies, the source info and the consumer's acknowledgements (made by the
flow-control replies) are compared, and so is what a consumer with another ack policy and
one that does not exist leave in the mirror's info."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import nats
import pytest

from support.jspair import request_json, run_both, stored_messages

pytestmark = pytest.mark.skipif(
    __import__("support.natsserver", fromlist=["x"]).nats_server_binary() is None,
    reason="nats-server not installed",
)

API = "$JS.API"


async def _until(check: Any, what: str) -> Any:
    """Poll `check()` until it returns something true (copies and acks arrive on their own)."""
    deadline = asyncio.get_running_loop().time() + 10
    while asyncio.get_running_loop().time() < deadline:
        value = await check()
        if value:
            return value
        await asyncio.sleep(0.05)
    raise AssertionError(f"never: {what}")


async def _consumer(nc: Any, name: str, **cfg: Any) -> Any:
    config = {"durable_name": name, "deliver_subject": f"deliver.{name}", **cfg}
    body = {"stream_name": "O", "config": config}
    return await request_json(nc, f"{API}.CONSUMER.CREATE.O.{name}", body)


def _through(name: str) -> dict[str, Any]:
    return {"name": "O", "consumer": {"name": name, "deliver_subject": f"deliver.{name}"}}


def _acks(info: dict[str, Any]) -> Any:
    return (
        info["delivered"]["stream_seq"],
        info["ack_floor"]["stream_seq"],
        info["num_ack_pending"],
        info["num_pending"],
    )


async def _scenario(url: str) -> list[Any]:
    nc = await nats.connect(url)
    out: list[Any] = []
    try:
        await request_json(nc, f"{API}.STREAM.CREATE.O", {"name": "O", "subjects": ["o.>"]})
        for i in range(5):
            await nc.request(f"o.{i % 2}", b"early %d" % i, timeout=2)
        for name in ("m", "s"):
            created = await _consumer(nc, name, ack_policy="flow_control", max_ack_pending=100)
            config = created["config"]
            out.append({k: config.get(k) for k in ("ack_policy", "flow_control", "idle_heartbeat")})
        await _consumer(nc, "plain", ack_policy="explicit")
        await request_json(nc, f"{API}.STREAM.CREATE.M", {"name": "M", "mirror": _through("m")})
        source = {"name": "S", "subjects": ["s"], "sources": [_through("s")]}
        await request_json(nc, f"{API}.STREAM.CREATE.S", source)
        await request_json(
            nc, f"{API}.STREAM.CREATE.BAD", {"name": "BAD", "mirror": _through("plain")}
        )
        await request_json(
            nc, f"{API}.STREAM.CREATE.NONE", {"name": "NONE", "mirror": _through("x")}
        )

        async def holds(name: str, count: int) -> bool:
            info = await request_json(nc, f"{API}.STREAM.INFO.{name}")
            return bool(info["state"]["messages"] >= count)

        await _until(lambda: holds("M", 5), "M holds 5")
        await _until(lambda: holds("S", 5), "S holds 5")
        for i in range(3):
            await nc.request(f"o.{i % 2}", b"late %d" % i, timeout=2)
        await _until(lambda: holds("M", 8), "M holds 8")
        await _until(lambda: holds("S", 8), "S holds 8")
        for name in ("M", "S"):
            out.append(await stored_messages(nc, name))

        async def acked(name: str) -> Any:
            info = await request_json(nc, f"{API}.CONSUMER.INFO.O.{name}")
            return _acks(info) if info["ack_floor"]["stream_seq"] == 8 else None

        for name in ("m", "s"):
            out.append(await _until(lambda name=name: acked(name), f"{name} acked to 8"))

        async def error(name: str) -> Any:
            info = await request_json(nc, f"{API}.STREAM.INFO.{name}")
            return info.get("mirror", {}).get("error")

        out.append(await _until(lambda: error("BAD"), "BAD has an error"))
        # ... and takes nothing from that consumer, which delivers nothing (nobody listens).
        out.append(await stored_messages(nc, "BAD"))
        plain = await request_json(nc, f"{API}.CONSUMER.INFO.O.plain")
        out.append(_acks(plain))
        # Nobody answers a reset for a consumer that does not exist: no error, no copies.
        out.append((await error("NONE"), await stored_messages(nc, "NONE")))
        for name in ("M", "S"):
            info = await request_json(nc, f"{API}.STREAM.INFO.{name}")
            sources = [info["mirror"]] if "mirror" in info else info["sources"]
            out.append([{k: v for k, v in si.items() if k != "active"} for si in sources])
    finally:
        await nc.close()
    return out


async def test_durable_sources_as_nats_server(tmp_path: Path) -> None:
    expected, got = await run_both(tmp_path, _scenario)
    for want, have in zip(expected, got, strict=True):
        assert have == want
