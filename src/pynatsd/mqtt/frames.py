"""MQTT frame builders: every packet the server (or a test client) writes is built here.

Corresponds to nats-server's `mqttWriter`, `mqttEnqueueConnAck`, `mqttMakePublishHeader`,
`mqttEnqueuePubResponse`, `mqttEnqueueSubAck`, `mqttEnqueueUnsubAck` and `mqttPingResponse`
(server/mqtt.go). `properties=None` writes the MQTT 3.1.1 form of a packet; a dict (even an
empty one) writes the MQTT 5 form with its property block.
"""

from __future__ import annotations

import struct

from pynatsd.mqtt import packets as p
from pynatsd.mqtt.properties import binary, encode, utf8_string, varint

PINGREQ_FRAME = bytes((p.PINGREQ, 0))
PINGRESP_FRAME = bytes((p.PINGRESP, 0))
DISCONNECT_FRAME = bytes((p.DISCONNECT, 0))


def _frame(first: int, body: bytes) -> bytes:
    return bytes((first,)) + varint(len(body)) + body


def connack(session_present: bool, code: int, properties: p.Properties | None = None) -> bytes:
    """CONNACK; the session-present flag only with an accepted connection [MQTT-3.2.2-4]."""
    flags = 1 if session_present and code == 0 else 0
    if properties is None:
        return bytes((p.CONNACK, 2, flags, code))
    return _frame(p.CONNACK, bytes((flags, code)) + encode(properties))


def publish_head(
    topic: bytes,
    size: int,
    qos: int = 0,
    retain: bool = False,
    dup: bool = False,
    packet_id: int = 0,
    properties: p.Properties | None = None,
) -> bytes:
    """A PUBLISH up to its payload of `size` bytes (the payload is written after it as is)."""
    first = p.PUBLISH | (qos << 1) | (1 if retain else 0) | (8 if dup else 0)
    head = struct.pack(">H", len(topic)) + topic
    if qos:
        head += struct.pack(">H", packet_id)
    if properties is not None:
        head += encode(properties)
    return bytes((first,)) + varint(len(head) + size) + head


def publish(packet: p.Publish, v5: bool = False) -> bytes:
    props = packet.properties if v5 else None
    head = publish_head(
        packet.topic,
        len(packet.payload),
        packet.qos,
        packet.retain,
        packet.dup,
        packet.packet_id,
        props,
    )
    return head + packet.payload


def pub_response(
    packet_type: int, packet_id: int, code: int = 0, properties: p.Properties | None = None
) -> bytes:
    """PUBACK, PUBREC, PUBREL (flags 0x2) or PUBCOMP; MQTT 5 leaves out a success code without
    properties, as the specification allows."""
    first = packet_type | (2 if packet_type == p.PUBREL else 0)
    pid = struct.pack(">H", packet_id)
    if properties is None or (code == 0 and not properties):
        return bytes((first, 2)) + pid
    if not properties:
        return bytes((first, 3)) + pid + bytes((code,))
    return _frame(first, pid + bytes((code,)) + encode(properties))


def suback(packet_id: int, codes: list[int], properties: p.Properties | None = None) -> bytes:
    props = b"" if properties is None else encode(properties)
    return _frame(p.SUBACK, struct.pack(">H", packet_id) + props + bytes(codes))


def unsuback(
    packet_id: int, codes: list[int] | None = None, properties: p.Properties | None = None
) -> bytes:
    if properties is None:
        return bytes((p.UNSUBACK, 2)) + struct.pack(">H", packet_id)
    return _frame(
        p.UNSUBACK, struct.pack(">H", packet_id) + encode(properties) + bytes(codes or ())
    )


def disconnect(code: int = 0, properties: p.Properties | None = None) -> bytes:
    if properties is None and code == 0:
        return DISCONNECT_FRAME
    return _frame(p.DISCONNECT, bytes((code,)) + encode(properties or {}))


# -- what clients send (tests, benchmarks) -------------------------------------------------------


def connect(packet: p.Connect) -> bytes:
    v5 = packet.protocol_level == p.MQTT_5
    flags = p.FLAG_CLEAN if packet.clean_start else 0
    will = packet.will
    if will is not None:
        flags |= p.FLAG_WILL | (will.qos << 3) | (p.FLAG_WILL_RETAIN if will.retain else 0)
    if packet.username is not None:
        flags |= p.FLAG_USERNAME
    if packet.password is not None:
        flags |= p.FLAG_PASSWORD
    body = binary(packet.protocol_name) + bytes((packet.protocol_level, flags))
    body += struct.pack(">H", packet.keep_alive)
    if v5:
        body += encode(packet.properties)
    body += utf8_string(packet.client_id)
    if will is not None:
        if v5:
            body += encode(will.properties)
        body += binary(will.topic) + binary(will.payload)
    if packet.username is not None:
        body += utf8_string(packet.username)
    if packet.password is not None:
        body += binary(packet.password)
    return _frame(p.CONNECT, body)


def subscribe(packet: p.Subscribe, v5: bool = False) -> bytes:
    body = struct.pack(">H", packet.packet_id) + (encode(packet.properties) if v5 else b"")
    for topic, options in packet.filters:
        body += binary(topic) + bytes((options,))
    return _frame(p.SUBSCRIBE | 2, body)


def unsubscribe(packet: p.Unsubscribe, v5: bool = False) -> bytes:
    body = struct.pack(">H", packet.packet_id) + (encode(packet.properties) if v5 else b"")
    for topic in packet.filters:
        body += binary(topic)
    return _frame(p.UNSUBSCRIBE | 2, body)


def encode_packet(packet: p.Packet, v5: bool = False) -> bytes:
    """Any packet, in the form of the protocol version (round trips, test clients)."""
    props = getattr(packet, "properties", None) if v5 else None
    if isinstance(packet, p.Connect):
        return connect(packet)
    if isinstance(packet, p.ConnAck):
        return connack(packet.session_present, packet.return_code, props)
    if isinstance(packet, p.Publish):
        return publish(packet, v5)
    if isinstance(packet, p.PubAck | p.PubRec | p.PubRel | p.PubComp):
        kind = _ACK_TYPES[type(packet)]
        return pub_response(kind, packet.packet_id, packet.reason_code, props)
    if isinstance(packet, p.Subscribe):
        return subscribe(packet, v5)
    if isinstance(packet, p.SubAck):
        return suback(packet.packet_id, list(packet.return_codes), props)
    if isinstance(packet, p.Unsubscribe):
        return unsubscribe(packet, v5)
    if isinstance(packet, p.UnsubAck):
        return unsuback(packet.packet_id, list(packet.reason_codes), props)
    if isinstance(packet, p.PingReq):
        return PINGREQ_FRAME
    if isinstance(packet, p.PingResp):
        return PINGRESP_FRAME
    if isinstance(packet, p.Disconnect):
        return disconnect(packet.reason_code, props)
    if isinstance(packet, p.Auth):
        return _frame(p.AUTH, bytes((packet.reason_code,)) + encode(packet.properties))
    raise TypeError(f"no frame for {packet!r}")


_ACK_TYPES = {p.PubAck: p.PUBACK, p.PubRec: p.PUBREC, p.PubRel: p.PUBREL, p.PubComp: p.PUBCOMP}
