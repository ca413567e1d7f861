"""Monitoring endpoints over HTTP, in nats-server's JSON shape."""

from __future__ import annotations

import asyncio
import json
import urllib.error
import urllib.request
from typing import Any

import nats
import pytest

import pynatsd


def _get(port: int, path: str) -> tuple[int, dict[str, str], bytes]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as r:
            return r.status, dict(r.headers), r.read()
    except urllib.error.HTTPError as e:
        return e.code, dict(e.headers), e.read()


async def fetch(port: int, path: str) -> tuple[int, dict[str, str], bytes]:
    return await asyncio.to_thread(_get, port, path)


async def fetch_json(port: int, path: str) -> Any:
    status, _, body = await fetch(port, path)
    assert status == 200
    return json.loads(body)


@pytest.fixture
async def monitored() -> Any:
    async with pynatsd.Server(port=0, http_port=-1) as srv:
        yield srv


async def test_varz_shape_and_counters(monitored: pynatsd.Server) -> None:
    # The server's own subscriptions (system services) count too, as in nats-server.
    base = monitored.num_subscriptions()
    nc = await nats.connect(monitored.client_url)
    sub = await nc.subscribe("c")
    await nc.publish("c", b"12345")
    await sub.next_msg(timeout=2)
    status, headers, body = await fetch(monitored.http_port, "/varz")
    assert status == 200
    assert headers["Content-Type"] == "application/json"
    assert headers["Access-Control-Allow-Origin"] == "*"
    assert body.startswith(b'{\n  "server_id": ')  # 2-space indent, like Go's encoder
    varz = json.loads(body)
    assert varz["connections"] == 1
    assert varz["subscriptions"] == base + 1
    assert (varz["in_msgs"], varz["in_bytes"]) == (1, 5)
    assert (varz["out_msgs"], varz["out_bytes"]) == (1, 5)
    assert varz["max_payload"] == 1048576
    assert varz["http_req_stats"]["/varz"] == 1
    await nc.close()


async def test_connz_with_subs(monitored: pynatsd.Server) -> None:
    nc = await nats.connect(monitored.client_url, name="watcher")
    await nc.subscribe("foo.>", queue="q1")
    await nc.subscribe("bar")
    await nc.flush()
    connz = await fetch_json(monitored.http_port, "/connz?subs=1")
    assert connz["num_connections"] == 1
    conn = connz["connections"][0]
    assert conn["name"] == "watcher"
    assert conn["lang"] == "python3"
    assert sorted(conn["subscriptions_list"]) == ["bar", "foo.>"]
    detail = await fetch_json(monitored.http_port, "/connz?subs=detail")
    subs = detail["connections"][0]["subscriptions_list_detail"]
    assert {"subject": "foo.>", "qgroup": "q1", "sid": "1", "msgs": 0, "cid": conn["cid"]} in subs
    _status, _, raw = await fetch(monitored.http_port, "/connz?subs=1")
    assert b'"foo.\\u003e"' in raw  # Go escapes '>' in JSON strings
    await nc.close()


async def test_connz_closed_state(monitored: pynatsd.Server) -> None:
    nc = await nats.connect(monitored.client_url, name="gone")
    await nc.close()
    await asyncio.sleep(0.1)
    closed = await fetch_json(monitored.http_port, "/connz?state=closed")
    assert [c["name"] for c in closed["connections"]] == ["gone"]
    assert closed["connections"][0]["reason"] == "Client Closed"


async def test_subsz_and_healthz(monitored: pynatsd.Server) -> None:
    base = monitored.num_subscriptions()
    nc = await nats.connect(monitored.client_url)
    await nc.subscribe("a.*")
    await nc.flush()
    subsz = await fetch_json(monitored.http_port, "/subsz?subs=1")
    assert subsz["num_subscriptions"] == base + 1
    client_subs = [s for s in subsz["subscriptions_list"] if s["cid"]]
    assert [s["subject"] for s in client_subs] == ["a.*"]
    tested = await fetch_json(monitored.http_port, "/subsz?test=a.b")
    assert tested["total"] == 1
    assert await fetch_json(monitored.http_port, "/healthz") == {"status": "ok"}
    await nc.close()


async def test_bad_query_is_400(monitored: pynatsd.Server) -> None:
    status, _, body = await fetch(monitored.http_port, "/connz?limit=abc")
    assert status == 400
    assert body == b"Error decoding int for 'limit': strconv.Atoi: parsing \"abc\": invalid syntax"


async def test_unknown_path_is_404(monitored: pynatsd.Server) -> None:
    status, _, _ = await fetch(monitored.http_port, "/nope")
    assert status == 404


async def test_metrics_prometheus_text(monitored: pynatsd.Server) -> None:
    nc = await nats.connect(monitored.client_url)
    await nc.publish("m", b"abc")
    await nc.flush()
    status, headers, body = await fetch(monitored.http_port, "/metrics")
    assert status == 200
    assert headers["Content-Type"].startswith("text/plain; version=0.0.4")
    lines = body.decode().splitlines()
    samples = {
        line.split("{")[0]: float(line.rsplit(" ", 1)[1])
        for line in lines
        if line and not line.startswith("#")
    }
    assert samples["gnatsd_varz_connections"] == 1
    assert samples["gnatsd_varz_in_msgs"] == 1
    assert samples["gnatsd_varz_in_bytes"] == 3
    assert "# TYPE gnatsd_varz_in_msgs counter" in lines
    await nc.close()


async def test_accountz(monitored: pynatsd.Server) -> None:
    listed = await fetch_json(monitored.http_port, "/accountz")
    assert listed["accounts"] == ["$G", "$SYS"]
    base = monitored.global_account.sublist.count()
    nc = await nats.connect(monitored.client_url)
    await nc.subscribe("x")
    await nc.flush()
    detail = (await fetch_json(monitored.http_port, "/accountz?acc=$G"))["account_detail"]
    assert (detail["client_connections"], detail["subscriptions"]) == (1, base + 1)
    await nc.close()


@pytest.mark.parametrize(
    "query", ["", "?js-enabled-only=true", "?js-server-only=true", "?js-enabled=true"]
)
async def test_healthz_options(monitored: pynatsd.Server, query: str) -> None:
    assert await fetch_json(monitored.http_port, "/healthz" + query) == {"status": "ok"}


async def test_healthz_bad_flag_is_400(monitored: pynatsd.Server) -> None:
    status, _, body = await fetch(monitored.http_port, "/healthz?js-enabled-only=bogus")
    assert status == 400
    assert body.startswith(b"Error decoding boolean for 'js-enabled-only'")


async def test_counters_after_planned_deliveries(monitored: pynatsd.Server) -> None:
    """Repeated PUB lines take the planned path, whose counts are settled once per read."""
    pub = await nats.connect(monitored.client_url)
    sub_nc = await nats.connect(monitored.client_url)
    s1 = await sub_nc.subscribe("many")
    s2 = await sub_nc.subscribe("many", queue="q")
    await sub_nc.flush()
    for _ in range(50):
        await pub.publish("many", b"0123456789")
    await pub.flush()
    for _ in range(50):
        await s1.next_msg(timeout=2)
        await s2.next_msg(timeout=2)
    varz = await fetch_json(monitored.http_port, "/varz")
    assert (varz["in_msgs"], varz["out_msgs"]) == (50, 100)
    assert (varz["in_bytes"], varz["out_bytes"]) == (500, 1000)
    connz = await fetch_json(monitored.http_port, "/connz?subs=detail")
    detail = next(c for c in connz["connections"] if c["subscriptions"] == 2)
    assert sorted(s["msgs"] for s in detail["subscriptions_list_detail"]) == [50, 50]
    await pub.close()
    await sub_nc.close()


async def test_connz_sorting_paging_and_auth() -> None:
    async with pynatsd.Server(port=0, http_port=-1, username="u", password="p") as srv:
        clients = []
        for n in range(3):
            nc = await nats.connect(srv.client_url, user="u", password="p", name=f"c{n}")
            for _ in range(n):
                await nc.publish("x", b"1")
            await nc.flush()
            clients.append(nc)
        page = await fetch_json(srv.http_port, "/connz?sort=msgs_from&limit=2")
        assert [c["name"] for c in page["connections"]] == ["c2", "c1"]
        assert (page["total"], page["limit"], page["num_connections"]) == (3, 2, 2)
        rest = await fetch_json(srv.http_port, "/connz?sort=msgs_from&limit=2&offset=2")
        assert [c["name"] for c in rest["connections"]] == ["c0"]
        plain = await fetch_json(srv.http_port, "/connz")
        assert "authorized_user" not in plain["connections"][0]
        auth = await fetch_json(srv.http_port, "/connz?auth=1")
        assert {c["authorized_user"] for c in auth["connections"]} == {"u"}
        assert {c["account"] for c in auth["connections"]} == {"$G"}
        status, _, body = await fetch(srv.http_port, "/connz?sort=bogus")
        assert (status, body) == (400, b"invalid sorting option: bogus")
        for nc in clients:
            await nc.close()
