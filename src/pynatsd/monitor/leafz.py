"""Leaf node monitoring: `/leafz` (nats-server's `Leafz` in server/monitor.go); the `/varz`
`leaf` section comes from the part itself (`LeafNodes.varz`)."""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from pynatsd.gofmt import rfc3339
from pynatsd.leafnode import leafnodes_of
from pynatsd.monitor.endpoints import _rtt

if TYPE_CHECKING:
    from pynatsd.server.server import Server


def leafz(server: Server, query: Mapping[str, str]) -> dict[str, Any]:
    """`/leafz` (`?subs=1` lists each connection's subscriptions, `?acc=` keeps one account)."""
    subs = query.get("subs", "").lower() in ("1", "true", "t", "detail")
    return leafz_of(server, subs, query.get("acc", ""))


def leafz_of(server: Server, subs: bool, account: str) -> dict[str, Any]:
    part = leafnodes_of(server)
    leafs = part.leafz(subs, account) if part is not None else []
    for entry in leafs:
        entry["rtt"] = _rtt(entry["rtt"])
    return {
        "server_id": server.server_id,
        "now": rfc3339(time.time()),
        "leafnodes": len(leafs),
        "leafs": leafs,
    }
