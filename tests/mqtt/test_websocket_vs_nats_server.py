"""MQTT over WebSocket side by side: the websocket listener takes an MQTT client on a path
ending in `/mqtt` (nats-server's mqttWSPath) and answers with `Sec-Websocket-Protocol: mqtt`;
paho-mqtt's `transport="websockets"` then sees the same as on the MQTT port, on nats-server
and pynatsd alike.
"""

from __future__ import annotations

import base64
import itertools
import os
import re
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from support.certs import loopback_server_files
from support.mqtt import (
    Client,
    MQTTServer,
    NATSClient,
    TLSFiles,
    accepts,
    mqtt_servers,
    wait_for,
)
from support.natsserver import NATS_SERVER, require_nats_server
from support.ports import LOOPBACK, free_port
from support.processes import PYNATSD, start_server, wait_for_log_line

pytestmark = pytest.mark.timeout(120)

WEBSOCKET = "websocket { listen: 127.0.0.1:{free_port}, no_tls: true }"
_ids = itertools.count()


@pytest.fixture(scope="module")
def servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[MQTTServer]]:
    require_nats_server()
    directory: Path = tmp_path_factory.mktemp("mqtt-ws")
    with mqtt_servers(directory, extra=WEBSOCKET) as pair:
        yield pair


def ws_port(server: MQTTServer) -> int:
    found = re.search(r"websocket \{ listen: 127\.0\.0\.1:(\d+)", server.conf.read_text())
    assert found is not None
    return int(found.group(1))


def upgrade(port: int, path: str, protocol: str | None = "mqtt") -> tuple[str, list[str], bytes]:
    """A raw websocket upgrade: the status line, the header lines (no Date: it differs) and
    the first bytes after the head (a NATS client's INFO frame, nothing for MQTT)."""
    key = base64.b64encode(os.urandom(16)).decode()
    request = (
        f"GET {path} HTTP/1.1\r\nHost: {LOOPBACK}:{port}\r\nUpgrade: websocket\r\n"
        f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n"
    )
    if protocol is not None:
        request += f"Sec-WebSocket-Protocol: {protocol}\r\n"
    with socket.create_connection((LOOPBACK, port), timeout=5) as sock:
        sock.sendall((request + "\r\n").encode())
        data = b""
        sock.settimeout(1.0)
        try:
            while len(data) < 65536:
                chunk = sock.recv(4096)
                if not chunk:
                    break
                data += chunk
        except TimeoutError:
            pass
    head, _, rest = data.partition(b"\r\n\r\n")
    status, *lines = head.decode().split("\r\n")
    return status, lines, rest


def test_upgrade_answer_names_mqtt(servers: list[MQTTServer]) -> None:
    """An upgrade on `/mqtt` (offered the subprotocol or not, or under a longer path, or with
    a query) is MQTT: the answer carries `Sec-Websocket-Protocol: mqtt` and no INFO follows;
    `/mqttx` and `/` are NATS clients, whatever subprotocol they offer."""
    cases = [("/mqtt", "mqtt"), ("/mqtt", None), ("/a/b/mqtt", None), ("/mqtt?x=1", "mqtt")]
    nats_cases = [("/mqttx", None), ("/", "mqtt")]
    results = {}
    for server in servers:
        port = ws_port(server)
        seen = []
        for path, protocol in cases:
            status, lines, rest = upgrade(port, path, protocol)
            seen.append((status, "Sec-Websocket-Protocol: mqtt" in lines, rest))
        for path, protocol in nats_cases:
            status, lines, rest = upgrade(port, path, protocol)
            protocol_lines = [x for x in lines if x.lower().startswith("sec-websocket-protocol")]
            seen.append((status, protocol_lines, b"INFO {" in rest))
        results[server.name] = seen
    assert results["pynatsd"] == results["nats-server"]
    assert results["pynatsd"][0] == ("HTTP/1.1 101 Switching Protocols", True, b"")
    assert results["pynatsd"][-1] == ("HTTP/1.1 101 Switching Protocols", [], True)


def _flow(server: MQTTServer, unique: str) -> object:
    """A websocket subscriber at QoS 1 gets a TCP client's QoS 0 and QoS 1 messages and a NATS
    message; a websocket publisher reaches a NATS subscriber with its `Nmqtt-Pub` header."""
    port = ws_port(server)
    sub = Client(port, f"{unique}ws", websocket=True)
    pub = Client(server.mqtt_port, f"{unique}tcp")
    nats = NATSClient(server.nats_port)
    try:
        assert sub.connack == (False, 0)
        assert sub.subscribe((f"{unique}/#", 1)) == [1]
        nats.sub(f"{unique}.from.ws")
        pub.publish(f"{unique}/a", b"zero", 0)
        pub.publish(f"{unique}/b", b"one", 1)
        nats.pub(f"{unique}.c", b"nats")
        got = sub.wait_messages(3)
        sub.publish(f"{unique}/from/ws", b"up", 1)
        msg = nats.read_msg()
        return (
            sorted((m.topic.split("/", 1)[1], m.payload, m.qos, m.retain) for m in got),
            (msg.subject.split(".", 1)[1], msg.header, msg.payload),
        )
    finally:
        sub.disconnect()
        pub.disconnect()
        nats.close()


def test_paho_over_websocket(servers: list[MQTTServer]) -> None:
    unique = f"w{next(_ids)}"
    results = {s.name: _flow(s, unique) for s in servers}
    assert results["pynatsd"] == results["nats-server"], results
    received, to_nats = results["pynatsd"]
    assert received == [("a", b"zero", 0, False), ("b", b"one", 1, False), ("c", b"nats", 0, False)]
    assert to_nats == ("from.ws", b"NATS/1.0\r\nNmqtt-Pub:1\r\n\r\n", b"up")


def test_websocket_session_resumes_on_tcp(servers: list[MQTTServer]) -> None:
    """A session is the client id's, whichever transport: made over the websocket with clean
    session 0, resumed on the MQTT port with session present and its subscription."""

    def scenario(server: MQTTServer, unique: str) -> object:
        first = Client(ws_port(server), f"{unique}s", websocket=True, clean=False)
        first.subscribe((f"{unique}/x", 1))
        first.disconnect()
        again = Client(server.mqtt_port, f"{unique}s", clean=False)
        pub = Client(server.mqtt_port, f"{unique}p")
        try:
            pub.publish(f"{unique}/x", b"later", 1)
            got = again.wait_messages(1)
            return again.connack, [(m.payload, m.qos) for m in got]
        finally:
            again.disconnect()
            pub.disconnect()
            Client(server.mqtt_port, f"{unique}s").disconnect()  # clean: drop the session

    unique = f"r{next(_ids)}"
    results = {s.name: scenario(s, unique) for s in servers}
    assert results["pynatsd"] == results["nats-server"], results
    assert results["pynatsd"] == ((True, 0), [(b"later", 1)])


def test_mqtt_path_without_mqtt_is_not_found(tmp_path: Path) -> None:
    """Without an MQTT listener, an upgrade on `/mqtt` gets 404 and the reason is logged."""
    require_nats_server()
    results = {}
    for name, cmd in (("nats-server", [str(NATS_SERVER)]), ("pynatsd", list(PYNATSD))):
        port = free_port()
        conf = tmp_path / f"{name}.conf"
        conf.write_text(f"websocket {{ listen: 127.0.0.1:{port}, no_tls: true }}\n")
        server = start_server(cmd, ["-c", str(conf)])
        try:
            wait_for(lambda: accepts(port), "websocket listener")  # noqa: B023
            status, lines, rest = upgrade(port, "/mqtt")
            headers = sorted(x for x in lines if not x.startswith("Date:"))
            line = wait_for_log_line(server.log_text, "websocket handshake error")
            results[name] = (status, headers, rest, line)
        finally:
            server.stop()
    assert results["pynatsd"] == results["nats-server"], results
    assert results["pynatsd"][0] == "HTTP/1.1 404 Not Found"


def test_paho_over_secure_websocket(tmp_path: Path) -> None:
    """The same over `wss://`: TLS is the websocket listener's."""
    require_nats_server()
    cert, key, ca = loopback_server_files(tmp_path)
    websocket = (
        "websocket { listen: 127.0.0.1:{free_port}, "
        f'tls {{ cert_file: "{cert}", key_file: "{key}" }} }}'
    )

    def scenario(server: MQTTServer, unique: str) -> object:
        sub = Client(ws_port(server), f"{unique}wss", websocket=True, tls=TLSFiles(ca))
        pub = Client(server.mqtt_port, f"{unique}tcp")
        try:
            sub.subscribe((f"{unique}/#", 1))
            pub.publish(f"{unique}/x", b"secure", 1)
            return sub.connack, [(m.payload, m.qos) for m in sub.wait_messages(1)]
        finally:
            sub.disconnect()
            pub.disconnect()

    with mqtt_servers(tmp_path, extra=websocket) as servers:
        unique = f"s{next(_ids)}"
        results = {s.name: scenario(s, unique) for s in servers}
    assert results["pynatsd"] == results["nats-server"], results
    assert results["pynatsd"] == ((False, 0), [(b"secure", 1)])
