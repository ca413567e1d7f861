"""MQTT test support: nats-server and pynatsd with the same MQTT configuration side by side, a raw
MQTT client for byte-level scenarios, and a paho-mqtt client that records what it receives.

nats-server's MQTT listener needs JetStream and `server_name` (see the MQTT section of the
cluster facts); both servers get them, each its own store directory.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import paho.mqtt.client as paho
from paho.mqtt.enums import CallbackAPIVersion
from paho.mqtt.properties import Properties

from pynatsd.mqtt import frames
from pynatsd.mqtt import packets as p
from pynatsd.mqtt.codec import Decoder
from support.lineclient import LineClient
from support.natsserver import NATS_SERVER
from support.ports import LOOPBACK, free_port
from support.processes import PYNATSD, ServerProcess, start_server

WAIT = 10.0  # seconds any single expectation may take


@dataclass
class MQTTServer:
    """One server with an MQTT listener: which implementation, and its ports."""

    name: str  # "nats-server" or "pynatsd"
    nats_port: int
    mqtt_port: int
    process: ServerProcess
    conf: Path

    def restart(self) -> None:
        """Stop and start the same server on the same ports and store."""
        self.process.stop()
        self.process.start()


def mqtt_conf(
    store: Path, mqtt_port: int, extra: str = "", mqtt_extra: str = "", js_extra: str = ""
) -> str:
    return (
        f"server_name: mqtt_{mqtt_port}\n"
        f'jetstream {{ store_dir: "{store}"\n{js_extra}\n}}\n'
        f"mqtt {{ port: {mqtt_port}\n{mqtt_extra}\n}}\n"
        f"{extra}\n"
    )


def start_mqtt_server(
    cmd: list[str],
    directory: Path,
    name: str,
    extra: str = "",
    mqtt_extra: str = "",
    js_extra: str = "",
) -> MQTTServer:
    """One server (`cmd`: nats-server's or pynatsd's command) with an MQTT listener;
    `mqtt_extra` and `js_extra` go into its `mqtt {}` and `jetstream {}` blocks."""
    mqtt_port = free_port()
    store = directory / f"{name}-store"
    conf = directory / f"{name}.conf"
    # "{free_port}" in `extra` becomes a port of this server's own (an http_port, ...).
    extra = extra.replace("{free_port}", str(free_port()))
    conf.write_text(mqtt_conf(store, mqtt_port, extra, mqtt_extra, js_extra))
    process = start_server(cmd, ["-c", str(conf)])
    wait_for(lambda: accepts(mqtt_port), f"{name} MQTT listener")
    return MQTTServer(name, process.port, mqtt_port, process, conf)


@contextmanager
def mqtt_servers(
    directory: Path, extra: str = "", mqtt_extra: str = "", js_extra: str = ""
) -> Iterator[list[MQTTServer]]:
    """nats-server and pynatsd, each with an MQTT listener and the same configuration."""
    servers: list[MQTTServer] = []
    try:
        for name, cmd in (("nats-server", [str(NATS_SERVER)]), ("pynatsd", list(PYNATSD))):
            servers.append(start_mqtt_server(cmd, directory, name, extra, mqtt_extra, js_extra))
        yield servers
    finally:
        for server in servers:
            server.process.stop()


def accepts(port: int) -> bool:
    """True when something listens on the loopback `port`."""
    try:
        with socket.create_connection((LOOPBACK, port), timeout=1.0):
            return True
    except OSError:
        return False


def wait_for(condition: Callable[[], bool], what: str, timeout: float = WAIT) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.02)


# -- a raw client: bytes in, packets and the close observed ------------------------------------


class RawMQTT:
    """A socket to an MQTT listener: send bytes, read packets, see whether the server closed."""

    def __init__(self, port: int) -> None:
        self.sock = socket.create_connection((LOOPBACK, port), timeout=WAIT)
        self.decoder = Decoder()
        self.raw = b""
        self.closed = False

    def send(self, data: bytes) -> None:
        self.sock.sendall(data)

    def read_packets(self, count: int = 1, timeout: float = WAIT) -> list[p.Packet]:
        """At least `count` packets, fewer if the server closes first."""
        out: list[p.Packet] = []
        deadline = time.monotonic() + timeout
        while len(out) < count and not self.closed and time.monotonic() < deadline:
            out += self._recv(deadline)
        return out

    def read_until_closed(self, timeout: float = WAIT) -> list[p.Packet]:
        """Everything the server sends until it closes the connection (bounded in time)."""
        out: list[p.Packet] = []
        deadline = time.monotonic() + timeout
        while not self.closed and time.monotonic() < deadline:
            out += self._recv(deadline)
        return out

    def _recv(self, deadline: float) -> list[p.Packet]:
        self.sock.settimeout(max(deadline - time.monotonic(), 0.01))
        try:
            data = self.sock.recv(65536)
        except TimeoutError:
            return []
        except ConnectionResetError:
            data = b""
        if not data:
            self.closed = True
            return []
        self.raw += data
        return self.decoder.feed(data)

    def close(self) -> None:
        self.sock.close()


def connect_packet(client_id: str = "raw", **fields: Any) -> bytes:
    values: dict[str, Any] = {
        "protocol_name": b"MQTT",
        "protocol_level": 4,
        "clean_start": True,
        "keep_alive": 30,
        "client_id": client_id,
        **fields,
    }
    return frames.connect(p.Connect(**values))


def raw_exchange(port: int, data: bytes) -> tuple[list[p.Packet], bool]:
    """Send `data` on a new connection: the packets back and whether the server closed."""
    raw = RawMQTT(port)
    try:
        raw.send(data)
        packets = raw.read_until_closed(timeout=1.5)
        return packets, raw.closed
    finally:
        raw.close()


# -- paho-mqtt ----------------------------------------------------------------------------------

# The path MQTT clients upgrade on at a websocket listener (nats-server's mqttWSPath).
WEBSOCKET_PATH = "/mqtt"


@dataclass(frozen=True)
class TLSFiles:
    """What a TLS client trusts (the CA file) and, for `verify`, the certificate it shows."""

    ca: str
    cert: str | None = None
    key: str | None = None


@dataclass
class Received:
    topic: str
    payload: bytes
    qos: int
    retain: bool
    dup: bool = False
    properties: dict[str, Any] = field(default_factory=dict)


class Client:
    """A paho-mqtt client (MQTT 3.1.1 unless `v5`) on a loop thread, recording messages."""

    def __init__(
        self,
        port: int,
        client_id: str,
        *,
        clean: bool = True,
        v5: bool = False,
        keepalive: int = 60,
        will: tuple[str, bytes, int, bool] | None = None,
        username: str | None = None,
        password: str | None = None,
        connect_properties: Properties | None = None,
        websocket: bool = False,
        tls: TLSFiles | None = None,
    ) -> None:
        protocol = paho.MQTTv5 if v5 else paho.MQTTv311
        kwargs: dict[str, Any] = {"protocol": protocol}
        if websocket:
            kwargs["transport"] = "websockets"
        if not v5:
            kwargs["clean_session"] = clean
        self.paho = paho.Client(CallbackAPIVersion.VERSION2, client_id=client_id, **kwargs)
        self.v5 = v5
        self.received: list[Received] = []
        self.connack: tuple[bool, int] | None = None
        self.connack_properties: Any = None
        self.disconnect_reason: int | None = None  # MQTT 5: a server DISCONNECT's code
        self.disconnected = threading.Event()
        self.lock = threading.Lock()
        self.paho.on_message = self._on_message
        self.paho.on_connect = self._on_connect
        self.paho.on_disconnect = self._on_disconnect
        if will is not None:
            self.paho.will_set(*will)
        if username is not None:
            self.paho.username_pw_set(username, password)
        self.paho.reconnect_delay_set(60, 120)  # a test reconnects on purpose only
        if websocket:
            self.paho.ws_set_options(path=WEBSOCKET_PATH)
        if tls is not None:
            self.paho.tls_set(ca_certs=tls.ca, certfile=tls.cert, keyfile=tls.key)
        extra: dict[str, Any] = {}
        if v5:
            extra["clean_start"] = clean
            extra["properties"] = connect_properties
        self.paho.connect(LOOPBACK, port, keepalive, **extra)
        self.paho.loop_start()
        wait_for(lambda: self.connack is not None or self.disconnected.is_set(), "CONNACK")

    def _on_connect(self, client: Any, userdata: Any, flags: Any, reason: Any, props: Any) -> None:
        self.connack_properties = props
        self.connack = (bool(flags.session_present), int(reason.value))

    def _on_disconnect(
        self, client: Any, userdata: Any, flags: Any, reason: Any, props: Any
    ) -> None:
        self.disconnect_reason = int(reason.value)
        self.disconnected.set()

    def _on_message(self, client: Any, userdata: Any, msg: Any) -> None:
        props: dict[str, Any] = {}
        if self.v5 and msg.properties is not None:
            props = msg.properties.json()
        with self.lock:
            self.received.append(
                Received(msg.topic, msg.payload, msg.qos, bool(msg.retain), bool(msg.dup), props)
            )

    def subscribe(
        self, *filters: tuple[str, Any], properties: Properties | None = None
    ) -> list[int]:
        """Subscribe and wait for the SUBACK; the granted QoS (or failure codes). A filter's
        second element is its QoS, or (MQTT 5) paho's SubscribeOptions."""
        granted: list[int] = []
        done = threading.Event()

        def on_subscribe(client: Any, userdata: Any, mid: int, codes: Any, props: Any) -> None:
            granted.extend(int(c.value) for c in codes)
            done.set()

        self.paho.on_subscribe = on_subscribe
        self.paho.subscribe(list(filters), properties=properties)
        wait_for(done.is_set, "SUBACK")
        return granted

    def unsubscribe(self, *filters: str) -> list[int]:
        """Unsubscribe and wait for the UNSUBACK; its reason codes under MQTT 5."""
        done = threading.Event()
        codes: list[int] = []

        def on_unsubscribe(client: Any, userdata: Any, mid: int, reasons: Any, props: Any) -> None:
            codes.extend(int(r.value) for r in reasons or [])
            done.set()

        self.paho.on_unsubscribe = on_unsubscribe
        self.paho.unsubscribe(list(filters))
        wait_for(done.is_set, "UNSUBACK")
        return codes

    def publish(
        self,
        topic: str,
        payload: bytes,
        qos: int = 0,
        retain: bool = False,
        properties: Properties | None = None,
    ) -> None:
        """Publish and, at QoS 1 and 2, wait until the server acknowledged it."""
        info = self.paho.publish(topic, payload, qos, retain, properties)
        if qos:
            info.wait_for_publish(WAIT)

    def wait_messages(self, count: int) -> list[Received]:
        wait_for(lambda: len(self.received) >= count, f"{count} messages")
        with self.lock:
            return list(self.received)

    def messages(self) -> list[Received]:
        with self.lock:
            return list(self.received)

    def disconnect(self) -> None:
        self.paho.disconnect()
        self.paho.loop_stop()

    def drop(self) -> None:
        """End the connection without DISCONNECT (the will is published)."""
        self.paho.loop_stop()
        sock = self.paho.socket()
        if sock is not None:
            sock.close()


# -- the NATS side ------------------------------------------------------------------------------


@dataclass
class NATSMessage:
    subject: str
    reply: str
    header: bytes  # the header block as sent, b"" for MSG
    payload: bytes


class NATSClient(LineClient):
    """A NATS connection (headers on) that subscribes, publishes and reads MSG/HMSG frames."""

    def __init__(self, port: int) -> None:
        super().__init__(port)
        assert self.connect() == "PONG"

    def sub(self, subject: str, sid: int = 1) -> None:
        assert self.exchange(f"SUB {subject} {sid}\r\n") == "PONG"

    def pub(self, subject: str, payload: bytes, header: bytes = b"") -> None:
        if header:
            size = len(header) + len(payload)
            data = f"HPUB {subject} {len(header)} {size}\r\n".encode() + header + payload
        else:
            data = f"PUB {subject} {len(payload)}\r\n".encode() + payload
        self.sock.sendall(data + b"\r\nPING\r\n")
        assert self.read_until_pong() == "PONG"

    def read_msg(self, timeout: float = WAIT) -> NATSMessage:
        line = self.read_line(timeout)
        while line in ("PING", "PONG") or line.startswith("INFO "):
            if line == "PING":
                self.send("PONG\r\n")
            line = self.read_line(timeout)
        parts = line.split()
        op, subject = parts[0], parts[1]
        reply = parts[3] if len(parts) == (6 if op == "HMSG" else 5) else ""
        size = int(parts[-1])
        header_size = int(parts[-2]) if op == "HMSG" else 0
        while len(self.buf) < size + 2:
            self.sock.settimeout(timeout)
            chunk = self.sock.recv(65536)
            if not chunk:
                raise ConnectionError("closed")
            self.buf += chunk
        data, self.buf = self.buf[:size], self.buf[size + 2 :]
        return NATSMessage(subject, reply, data[:header_size], data[header_size:])
