"""A peer's stream of RMSGs with the same line (taken as runs on the receiving route) reaches
a local subscriber whole and in wire order, with other lines and ops in between, before and
after the line has a delivery plan, and counted in the route's statistics."""

from __future__ import annotations

import asyncio
import re

from cluster.test_bad_peers import _handshake, _server
from support.rawclient import RawClient

COUNT = 300


async def test_runs_of_one_line_arrive_whole_and_in_order() -> None:
    async with _server() as server:
        reader, writer = await _handshake(server)
        client = await RawClient.connect(server.port)
        await client.send(b"CONNECT {}\r\nSUB foo 1\r\nSUB bar 2\r\nPING\r\n")
        await client.read_until(b"PONG\r\n")
        seen = b""
        while b"RS+ $G bar" not in seen or b"RS+ $G foo" not in seen:
            seen += await asyncio.wait_for(reader.read(65536), 5)
        sent: list[tuple[bytes, bytes]] = []
        data = b""
        for i in range(COUNT):
            payload = b"%03d" % i
            subject = b"bar" if i % 50 == 49 else b"foo"
            data += b"RMSG $G %s 3\r\n%s\r\n" % (subject, payload)
            sent.append((subject, payload))
            if i == 120:
                data += b"PING\r\n"
        for chunk in (data[:1000], data[1000:1007], data[1007:]):  # runs split across reads
            writer.write(chunk)
            await writer.drain()
        subject, payload = sent[-1]
        sid = b"2" if subject == b"bar" else b"1"
        received = await client.read_until(b"MSG %s %s 3\r\n%s\r\n" % (subject, sid, payload))
        got = re.findall(rb"MSG (\w+) \d 3\r\n(\d{3})\r\n", received)
        assert got == sent
        route = next(iter(server.parts["cluster"].connections()))  # type: ignore[attr-defined]
        assert (route.stats.in_msgs, route.stats.in_bytes) == (COUNT, 3 * COUNT)
        await client.close()
        writer.close()
