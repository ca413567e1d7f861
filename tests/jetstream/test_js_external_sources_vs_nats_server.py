"""Mirrors and sources through `external` side by side with nats-server: a stream in account
AGG mirrors and sources a stream of account ORIG through ORIG's imported JetStream API (a
service import of `$JS.API.>` under another prefix) and deliver prefix (a stream import),
mirrors it through a durable consumer of ORIG's (ADR-60) across the same imports, and
a stream tries to mirror another of its own account through the server's domain API prefix
(`$JS.<domain>.API`), which nats-server leaves empty. Compared: what the mirror and the
source hold (subjects, headers with the external hash in `Nats-Stream-Source`, bodies) and
their source info."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import nats
import pytest

from support.jspair import request_json, run_configured, stored_messages
from support.natsserver import NATS_SERVER, nats_server_binary
from support.processes import PYNATSD

pytestmark = pytest.mark.skipif(nats_server_binary() is None, reason="nats-server not installed")

API = "$JS.API"

ACCOUNTS = """
accounts {
  ORIG {
    jetstream: enabled
    users: [{user: orig, password: orig}]
    exports: [
      {service: "$JS.API.>"}
      {service: "$JS.FC.>"}
      {stream: "deliver.orig.>"}
    ]
  }
  AGG {
    jetstream: enabled
    users: [{user: agg, password: agg}]
    imports: [
      {service: {account: ORIG, subject: "$JS.API.>"}, to: "orig.api.>"}
      {service: {account: ORIG, subject: "$JS.FC.>"}}
      {stream: {account: ORIG, subject: "deliver.orig.>"}}
    ]
  }
}
"""

DOMAIN = """
jetstream { domain: hub }
"""

EXTERNAL = {"api": "orig.api", "deliver": "deliver.orig"}


async def _wait_for(nc: Any, name: str, count: int) -> None:
    """Poll the stream until it holds `count` messages (copies arrive asynchronously)."""
    deadline = asyncio.get_running_loop().time() + 10
    while asyncio.get_running_loop().time() < deadline:
        info = await request_json(nc, f"{API}.STREAM.INFO.{name}", {})
        if info.get("state", {}).get("messages", 0) >= count:
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"{name} never held {count} messages")


def _source_info(info: dict[str, Any]) -> Any:
    def strip(si: dict[str, Any]) -> dict[str, Any]:
        return {k: v for k, v in si.items() if k != "active"}

    return (
        strip(info["mirror"]) if "mirror" in info else None,
        [strip(si) for si in info.get("sources", [])],
        info["config"].get("mirror"),
        info["config"].get("sources"),
    )


async def _across_accounts(url: str) -> list[Any]:
    orig = await nats.connect(url, user="orig", password="orig")
    agg = await nats.connect(url, user="agg", password="agg")
    out: list[Any] = []
    try:
        await request_json(orig, f"{API}.STREAM.CREATE.O", {"name": "O", "subjects": ["o.>"]})
        for i in range(5):
            await orig.request(f"o.{i % 2}", b"early %d" % i, timeout=2)
        out.append(
            await request_json(
                agg,
                f"{API}.STREAM.CREATE.M",
                {"name": "M", "mirror": {"name": "O", "external": EXTERNAL}},
            )
        )
        # A mirror through ORIG's durable consumer (ADR-60), its deliveries imported.
        durable = {
            "durable_name": "xs",
            "deliver_subject": "deliver.orig.xs",
            "ack_policy": "flow_control",
            "max_ack_pending": 100,
        }
        body = {"stream_name": "O", "config": durable}
        await request_json(orig, f"{API}.CONSUMER.CREATE.O.xs", body)
        consumer = {"name": "xs", "deliver_subject": "deliver.orig.xs"}
        mirror = {"name": "O", "external": EXTERNAL, "consumer": consumer}
        await request_json(agg, f"{API}.STREAM.CREATE.D", {"name": "D", "mirror": mirror})
        source = {"name": "O", "filter_subject": "o.1", "external": EXTERNAL}
        out.append(
            await request_json(
                agg,
                f"{API}.STREAM.CREATE.S",
                {"name": "S", "subjects": ["s"], "sources": [source]},
            )
        )
        await _wait_for(agg, "M", 5)
        await _wait_for(agg, "S", 2)
        for i in range(3):
            await orig.request(f"o.{i % 2}", b"late %d" % i, timeout=2)
        await _wait_for(agg, "M", 8)
        await _wait_for(agg, "S", 3)
        await _wait_for(agg, "D", 8)
        for name in ("M", "S", "D"):
            out.append(await stored_messages(agg, name))
            out.append(_source_info(await request_json(agg, f"{API}.STREAM.INFO.{name}", {})))
    finally:
        await orig.close()
        await agg.close()
    for item in out:
        if isinstance(item, dict):
            item.pop("created", None)
            item.pop("ts", None)
            item["config"].pop("metadata", None)
    return out


async def _through_domain(url: str) -> list[Any]:
    nc = await nats.connect(url)
    out: list[Any] = []
    try:
        await request_json(nc, f"{API}.STREAM.CREATE.O", {"name": "O", "subjects": ["o.>"]})
        for i in range(4):
            await nc.request(f"o.{i}", b"m%d" % i, timeout=2)
        # nats-server does not answer a stream's requests on its own domain's prefix: the
        # mirror stays empty (and so does one whose prefix leads nowhere).
        for name, api in (("M", "$JS.hub.API"), ("N", "nowhere.api")):
            mirror = {"name": "O", "external": {"api": api, "deliver": ""}}
            await request_json(nc, f"{API}.STREAM.CREATE.{name}", {"name": name, "mirror": mirror})
        await _wait_for(nc, "O", 4)
        await asyncio.sleep(1)
        out.append(await stored_messages(nc, "M"))
        out.append(await stored_messages(nc, "N"))
        for name in ("M", "N"):
            out.append(_source_info(await request_json(nc, f"{API}.STREAM.INFO.{name}", {})))
    finally:
        await nc.close()
    return out


@pytest.mark.parametrize(
    ("config", "scenario"),
    [(ACCOUNTS, _across_accounts), (DOMAIN, _through_domain)],
    ids=["service-and-stream-imports", "domain-api-prefix"],
)
async def test_external_sources_as_nats_server(tmp_path: Path, config: str, scenario: Any) -> None:
    expected = await run_configured([str(NATS_SERVER)], tmp_path / "go", config, scenario)
    got = await run_configured(PYNATSD, tmp_path / "py", config, scenario)
    for want, have in zip(expected, got, strict=True):
        assert have == want
