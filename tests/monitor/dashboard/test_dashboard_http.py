"""The dashboard over HTTP: its files, its update stream, and what it leaves alone."""

from __future__ import annotations

import asyncio
import re
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from typing import Any

import nats
import pytest

import pynatsd
from pynatsd.monitor.http import MonitorServer
from support.sse import EventStream


def request(port: int, path: str, method: str = "GET") -> tuple[int, dict[str, str], bytes]:
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", method=method)
    try:
        with urllib.request.urlopen(req, timeout=5) as r:
            return r.status, dict(r.headers), r.read()
    except urllib.error.HTTPError as e:
        return e.code, dict(e.headers), e.read()


async def get(port: int, path: str, method: str = "GET") -> tuple[int, dict[str, str], bytes]:
    return await asyncio.to_thread(request, port, path, method)


def monitor_of(server: pynatsd.Server) -> MonitorServer:
    part = server.parts["monitor"]
    assert isinstance(part, MonitorServer)
    return part


async def wait_until(check: Callable[[], bool], timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "condition not met in time"
        await asyncio.sleep(0.02)


async def first_update(port: int, path: str = "/dashboard/events") -> tuple[EventStream, Any]:
    stream = await asyncio.to_thread(EventStream, port, path)
    return stream, await asyncio.to_thread(stream.next_update)


@pytest.fixture
async def monitored() -> Any:
    async with pynatsd.Server(port=0, http_port=-1) as srv:
        yield srv


async def test_page_and_files_come_from_the_server_itself(monitored: pynatsd.Server) -> None:
    status, headers, body = await get(monitored.http_port, "/dashboard")
    assert status == 200
    assert headers["Content-Type"] == "text/html; charset=utf-8"
    assert "default-src 'none'" in headers["Content-Security-Policy"]
    assert "Access-Control-Allow-Origin" not in headers
    page = body.decode()
    refs = re.findall(r'(?:src|href)="([^"]*)"', page)
    assert sorted(refs) == [
        "/dashboard/dashboard.css",
        "/dashboard/dashboard.js",
        "/dashboard/favicon.svg",
    ]
    types = {}
    for ref in refs:
        status, headers, body = await get(monitored.http_port, ref)
        assert status == 200 and body
        types[ref.rsplit(".", 1)[1]] = headers["Content-Type"]
        assert b"http://" not in body.replace(b'xmlns="http://www.w3.org/2000/svg"', b"")
        assert b"https://" not in body
    assert types == {
        "css": "text/css; charset=utf-8",
        "js": "text/javascript; charset=utf-8",
        "svg": "image/svg+xml",
    }


async def test_index_links_the_dashboard(monitored: pynatsd.Server) -> None:
    _, _, body = await get(monitored.http_port, "/")
    assert b'<a href="/dashboard">/dashboard</a>' in body


async def test_base_path_prefixes_the_page_and_its_stream() -> None:
    async with pynatsd.Server(port=0, http_port=-1, http_base_path="/mon") as srv:
        status, _, body = await get(srv.http_port, "/mon/dashboard")
        assert status == 200
        assert b'src="/mon/dashboard/dashboard.js"' in body
        assert b'data-events="/mon/dashboard/events"' in body
        assert (await get(srv.http_port, "/mon/dashboard/dashboard.js"))[0] == 200
        assert (await get(srv.http_port, "/dashboard"))[0] == 404
        stream, update = await first_update(srv.http_port, "/mon/dashboard/events")
        stream.close()
        assert update["varz"]["server_id"] == srv.server_id


async def test_stream_sends_the_endpoints_data(monitored: pynatsd.Server) -> None:
    clients = [await nats.connect(monitored.client_url, name=f"c{i}") for i in range(3)]
    sub = await clients[0].subscribe("orders")
    await clients[1].publish("orders", b"12345")
    await sub.next_msg(timeout=2)
    stream, update = await first_update(monitored.http_port)
    try:
        assert stream.status == 200
        assert stream.headers["content-type"] == "text/event-stream"
        varz = update["varz"]
        assert varz["server_id"] == monitored.server_id
        assert (varz["connections"], varz["in_msgs"], varz["out_msgs"]) == (3, 1, 1)
        conns = update["connz"]["connections"]
        assert [(c["name"], c["account"]) for c in conns] == [(f"c{i}", "$G") for i in range(3)]
        assert update["subsz"]["num_subscriptions"] == varz["subscriptions"]
        assert {a["name"] for a in update["accounts"]} == {"$G", "$SYS"}
        # Sections for parts this server has not got are left out, so the page hides them.
        for absent in ("jsz", "routez", "leafz", "gatewayz", "mqtt"):
            assert absent not in update
        await clients[2].close()
        later = await asyncio.to_thread(stream.next_update)
        assert later["varz"]["connections"] == 2
        assert [c["name"] for c in later["closed"]] == ["c2"]
        assert later["closed"][0]["reason"] == "Client Closed"
    finally:
        stream.close()
        for nc in clients[:2]:
            await nc.close()


async def test_updates_run_only_while_a_page_listens(monitored: pynatsd.Server) -> None:
    feed = monitor_of(monitored).feed
    assert not feed.running
    stream, _ = await first_update(monitored.http_port)
    second, _ = await first_update(monitored.http_port)
    assert feed.running and feed.pages == 2
    stream.close()
    await wait_until(lambda: feed.pages == 1)
    assert feed.running
    second.close()
    await wait_until(lambda: not feed.running)


async def test_dashboard_requests_leave_varz_request_counts_alone(
    monitored: pynatsd.Server,
) -> None:
    await get(monitored.http_port, "/dashboard")
    stream, _ = await first_update(monitored.http_port)
    stream.close()
    _, _, body = await get(monitored.http_port, "/varz")
    assert b'"/dashboard' not in body


@pytest.mark.parametrize("method", ["POST", "PUT", "DELETE"])
@pytest.mark.parametrize("path", ["/dashboard", "/dashboard/events", "/dashboard/dashboard.js"])
async def test_nothing_on_the_dashboard_changes_the_server(
    monitored: pynatsd.Server, method: str, path: str
) -> None:
    status, _, _ = await get(monitored.http_port, path, method)
    assert status == 405
    assert not monitor_of(monitored).feed.running


async def test_jetstream_streams_and_consumers(tmp_path: Any) -> None:
    async with pynatsd.Server(port=0, http_port=-1, jetstream=True, store_dir=str(tmp_path)) as srv:
        nc = await nats.connect(srv.client_url)
        js = nc.jetstream()
        await js.add_stream(name="ORDERS", subjects=["orders.>"])
        for i in range(5):
            await js.publish("orders.new", str(i).encode())
        await js.pull_subscribe("orders.>", durable="proc")
        stream, update = await first_update(srv.http_port)
        stream.close()
        await nc.close()
    (account,) = update["jsz"]["account_details"]
    (detail,) = account["stream_detail"]
    assert (detail["name"], detail["state"]["messages"]) == ("ORDERS", 5)
    (consumer,) = detail["consumer_detail"]
    assert (consumer["name"], consumer["num_pending"]) == ("proc", 5)


async def test_routes_appear_in_a_cluster() -> None:
    async with pynatsd.Cluster(2, http_port=-1) as cluster:
        first = cluster.servers[0]
        stream, update = await first_update(first.http_port)
        stream.close()
    assert update["routez"]["num_routes"] >= 1
    assert {r["remote_id"] for r in update["routez"]["routes"]} == {cluster.servers[1].server_id}


async def test_stopping_the_server_ends_open_streams() -> None:
    srv = pynatsd.Server(port=0, http_port=-1)
    await srv.start()
    stream, _ = await first_update(srv.http_port)
    try:
        await srv.shutdown()

        def read_to_end() -> bool:
            try:
                while True:
                    stream.next_update()
            except (ConnectionError, OSError):
                return True

        assert await asyncio.to_thread(read_to_end)
    finally:
        stream.close()
