"""`/routez` and `/varz` of a two-node cluster, pynatsd and nats-server: each side's view of
the other, in the same JSON shape and with the same counts."""

from __future__ import annotations

import asyncio
import json
import urllib.request
from typing import Any

from cluster.nodes import connect, plan_nodes, wait_routed
from support.ports import free_port


def _get(port: int, path: str) -> dict[str, Any]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as r:
        data: dict[str, Any] = json.loads(r.read())
        return data


async def test_routez_and_varz() -> None:
    py, go = plan_nodes("pg", full_mesh=True)
    py.http_port, go.http_port = free_port(), free_port()
    try:
        await py.start()
        await go.start()
        cp, cg = await connect(py), await connect(go)
        await wait_routed(cp, cg)
        await wait_routed(cg, cp)
        await cg.subscribe("watched.subject")
        await cg.flush()
        await asyncio.sleep(1.5)  # a PING round: both sides know the RTT
        views = {}
        for node in (py, go):
            views[node.kind] = (
                await asyncio.to_thread(_get, node.http_port, "/routez?subs=detail"),
                await asyncio.to_thread(_get, node.http_port, "/varz"),
            )
        await cp.close()
        await cg.close()
    finally:
        await go.stop()
        await py.stop()

    (py_routez, py_varz), (go_routez, go_varz) = views["py"], views["go"]
    # A pool of three connections and one pinned to $SYS, seen from both sides.
    assert py_routez["num_routes"] == go_routez["num_routes"] == 4
    for routez in (py_routez, go_routez):
        assert sorted(r.get("account", "") for r in routez["routes"]) == ["", "", "", "$SYS"]
    py_pinned = next(r for r in py_routez["routes"] if "account" in r)
    go_pinned = next(r for r in go_routez["routes"] if "account" in r)
    assert list(py_pinned) == list(go_pinned)
    # The pooled connection that carries $G (the one with the client's subscription).
    py_route = next(
        r
        for r in py_routez["routes"]
        if "subscriptions_list_detail" in r
        and any(d["subject"] == "watched.subject" for d in r["subscriptions_list_detail"])
    )
    go_route = next(
        r for r in go_routez["routes"] if "account" not in r and r.get("subscriptions_list_detail")
    )
    assert set(py_route) == set(go_route)
    assert list(py_route) == list(go_route)
    assert py_route["remote_id"] == go_varz["server_id"]
    assert go_route["remote_id"] == py_varz["server_id"]
    assert py_route["is_configured"] == go_route["is_configured"]
    detail = {d["subject"]: d for d in py_route["subscriptions_list_detail"]}
    # nats-server's key for a peer that announced `lnocu`: the kind, account and subject.
    assert detail["watched.subject"]["sid"] == "R $G watched.subject"
    go_sids = {
        d["sid"] for r in go_routez["routes"] for d in r.get("subscriptions_list_detail", [])
    }
    assert "R $G $SYS.REQ.USER.INFO" in go_sids

    for varz in (py_varz, go_varz):
        assert varz["routes"] == 4
        assert varz["remotes"] == 1
    assert set(py_varz["cluster"]) == set(go_varz["cluster"])
    assert py_varz["cluster"]["name"] == go_varz["cluster"]["name"] == "TC"
    assert sorted(py_varz["connect_urls"]) == sorted(go_varz["connect_urls"])
