#!/usr/bin/env python3
"""MQTT messages per second, nats-server's MQTT listener and pynatsd's side by side.

Four flows, each on a fresh pair of servers (JetStream on, as nats-server's MQTT needs):
QoS 0 and QoS 1, MQTT -> MQTT (an MQTT subscriber at that QoS) and MQTT -> NATS (a NATS
subscriber; the message carries the `Nmqtt-Pub` header). The clients are raw-socket processes
built on pynatsd's own MQTT codec (no client library in the way): the publisher keeps at most
`--window` QoS 1 messages unacknowledged, the MQTT subscriber acknowledges each QoS 1 message.
On both servers QoS 1 goes through JetStream: each message is stored in `$MQTT_msgs` and
reaches a QoS 1 subscriber from its subscription's durable consumer.

    python bench/bench_mqtt.py                        # ~1 minute
    python bench/bench_mqtt.py --count 20000 --size 16 --flows qos0-mqtt,qos1-mqtt

Printed: one line per flow and server, then the pynatsd / nats-server ratios.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import socket
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))
sys.path.insert(0, str(REPO / "src"))
# The pynatsd server processes run this checkout's source.
os.environ["PYTHONPATH"] = os.pathsep.join(
    x for x in (str(REPO / "src"), os.environ.get("PYTHONPATH", "")) if x
)

from pynatsd.mqtt import frames  # noqa: E402
from pynatsd.mqtt import packets as p  # noqa: E402
from pynatsd.mqtt.codec import Decoder  # noqa: E402
from support.mqtt import mqtt_servers  # noqa: E402
from support.ports import LOOPBACK  # noqa: E402

FLOWS = ("qos0-mqtt", "qos1-mqtt", "qos0-nats", "qos1-nats")
TOPIC = b"bench/mqtt"
RUN_LIMIT = 120.0  # seconds any one run may take
# A subscriber that hears nothing for this long reports what it got (a server may drop QoS 0
# messages it cannot deliver in time: nats-server and pynatsd both close slow consumers).
IDLE_LIMIT = 5.0


def _mqtt_connect(port: int, client_id: str) -> tuple[socket.socket, Decoder]:
    sock = socket.create_connection((LOOPBACK, port))
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    sock.sendall(frames.connect(p.Connect(b"MQTT", 4, True, 0, client_id)))
    decoder = Decoder()
    _read(sock, decoder, p.ConnAck)
    return sock, decoder


def _read(sock: socket.socket, decoder: Decoder, kind: type) -> list[p.Packet]:
    """Packets until one of `kind` arrives (bounded by the socket timeout)."""
    sock.settimeout(RUN_LIMIT)
    out: list[p.Packet] = []
    while not any(isinstance(x, kind) for x in out):
        data = sock.recv(1 << 16)
        if not data:
            raise ConnectionError("closed")
        out += decoder.feed(data)
    return out


def mqtt_subscriber(port: int, qos: int, count: int, ready: Any, result: Any) -> None:
    sock, decoder = _mqtt_connect(port, f"bench-sub-{qos}")
    sock.sendall(frames.subscribe(p.Subscribe(1, ((TOPIC, qos),))))
    _read(sock, decoder, p.SubAck)
    ready.set()
    got = 0
    last = time.time()
    sock.settimeout(IDLE_LIMIT)
    deadline = time.monotonic() + RUN_LIMIT
    while got < count and time.monotonic() < deadline:
        try:
            data = sock.recv(1 << 20)
        except TimeoutError:
            break
        if not data:
            break
        last = time.time()
        acks = []
        for packet in decoder.feed(data):
            if isinstance(packet, p.Publish):
                got += 1
                if packet.qos:
                    acks.append(frames.pub_response(p.PUBACK, packet.packet_id))
        if acks:
            sock.sendall(b"".join(acks))
    result.put(("sub", got, last))


def nats_subscriber(port: int, count: int, ready: Any, result: Any) -> None:
    sock = socket.create_connection((LOOPBACK, port))
    sock.recv(4096)  # INFO
    sock.sendall(b'CONNECT {"verbose":false,"headers":true}\r\nSUB bench.mqtt 1\r\nPING\r\n')
    buf = b""
    while b"PONG" not in buf:
        buf += sock.recv(4096)
    ready.set()
    got = 0
    last = time.time()
    sock.settimeout(IDLE_LIMIT)
    deadline = time.monotonic() + RUN_LIMIT
    tail = b""
    while got < count and time.monotonic() < deadline:
        try:
            data = sock.recv(1 << 20)
        except TimeoutError:
            break
        if not data:
            break
        last = time.time()
        chunk = tail + data
        got += chunk.count(b"HMSG ")
        tail = chunk[-4:]
        if b"PING\r\n" in data:
            sock.sendall(b"PONG\r\n")
    result.put(("sub", got, last))


def publisher(port: int, qos: int, count: int, size: int, window: int, result: Any) -> None:
    sock, decoder = _mqtt_connect(port, f"bench-pub-{qos}")
    payload = bytes(size)
    start = time.time()
    if qos == 0:
        one = frames.publish(p.Publish(TOPIC, payload))
        batch = 1000
        for done in range(0, count, batch):
            sock.sendall(one * min(batch, count - done))
        sock.sendall(frames.PINGREQ_FRAME)
        _read(sock, decoder, p.PingResp)
    else:
        sent = acked = 0
        sock.settimeout(IDLE_LIMIT)
        while acked < count:
            burst = []
            while sent < count and sent - acked < window:
                sent += 1
                pid = (sent - 1) % 0xFFFF + 1
                burst.append(frames.publish(p.Publish(TOPIC, payload, 1, packet_id=pid)))
            if burst:
                sock.sendall(b"".join(burst))
            try:
                data = sock.recv(1 << 16)
            except TimeoutError:
                break  # no PUBACK for a while: the subscriber's count tells what got through
            if not data:
                break
            acked += sum(isinstance(x, p.PubAck) for x in decoder.feed(data))
    result.put(("pub", start, time.time()))


def run_flow(flow: str, server: Any, count: int, size: int, window: int) -> tuple[float, int]:
    """Messages per second of one flow on one server (received / time from the first publish
    to the last message received), and how many were received."""
    qos = 1 if flow.startswith("qos1") else 0
    ctx = mp.get_context("spawn")
    ready = ctx.Event()
    result: Any = ctx.Queue()
    if flow.endswith("mqtt"):
        sub = ctx.Process(
            target=mqtt_subscriber, args=(server.mqtt_port, qos, count, ready, result)
        )
    else:
        sub = ctx.Process(target=nats_subscriber, args=(server.nats_port, count, ready, result))
    sub.start()
    if not ready.wait(30):
        sub.kill()
        raise RuntimeError("subscriber not ready")
    pub = ctx.Process(target=publisher, args=(server.mqtt_port, qos, count, size, window, result))
    pub.start()
    records = {}
    for _ in range(2):
        kind, *values = result.get(timeout=RUN_LIMIT)
        records[kind] = values
    pub.join(10)
    sub.join(10)
    got, end = records["sub"]
    start = records["pub"][0]
    return got / max(end - start, 1e-9), got


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=20_000)
    parser.add_argument("--qos1-count", type=int, default=5_000)
    parser.add_argument("--size", type=int, default=16)
    parser.add_argument("--window", type=int, default=256)
    parser.add_argument("--flows", default=",".join(FLOWS))
    args = parser.parse_args()
    rates: dict[tuple[str, str], float] = {}
    for flow in args.flows.split(","):
        count = args.qos1_count if flow.startswith("qos1") else args.count
        with tempfile.TemporaryDirectory() as tmp, mqtt_servers(Path(tmp)) as servers:
            for server in servers:
                rate, got = run_flow(flow, server, count, args.size, args.window)
                rates[(flow, server.name)] = rate
                short = "" if got >= count else f"  (received {got} of {count})"
                print(f"{flow:10} {server.name:12} {count:>8} msgs  {rate:>12,.0f} msgs/s{short}")
    print()
    for flow in args.flows.split(","):
        go, py = rates.get((flow, "nats-server")), rates.get((flow, "pynatsd"))
        if go and py:
            print(f"{flow:10} pynatsd / nats-server = {py / go:.2f}")


if __name__ == "__main__":
    main()
