"""MQTT control packets as events: what `mqtt.codec.Decoder` yields and `mqtt.frames` writes.

Corresponds to the packet constants and the `mqttConnectProto`, `mqttPublish` and `mqttFilter`
structures of nats-server's `server/mqtt.go`, extended to MQTT 5.0 (OASIS, 2019): every packet
carries its properties (`mqtt.properties`), empty under MQTT 3.1.1. Packets are small frozen
classes named as the specification names them; fields are raw bytes where the wire has bytes.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

# Packet types (the high nibble of the fixed header's first byte).
CONNECT = 0x10
CONNACK = 0x20
PUBLISH = 0x30
PUBACK = 0x40
PUBREC = 0x50
PUBREL = 0x60
PUBCOMP = 0x70
SUBSCRIBE = 0x80
SUBACK = 0x90
UNSUBSCRIBE = 0xA0
UNSUBACK = 0xB0
PINGREQ = 0xC0
PINGRESP = 0xD0
DISCONNECT = 0xE0
AUTH = 0xF0

# Protocol levels in CONNECT.
MQTT_311 = 4
MQTT_5 = 5

# CONNECT flags.
FLAG_RESERVED = 0x01
FLAG_CLEAN = 0x02
FLAG_WILL = 0x04
FLAG_WILL_QOS = 0x18
FLAG_WILL_RETAIN = 0x20
FLAG_PASSWORD = 0x40
FLAG_USERNAME = 0x80

# CONNACK return codes of MQTT 3.1.1 (nats-server's mqttConnAckRC*).
RC_ACCEPTED = 0x00
RC_UNACCEPTABLE_PROTOCOL_VERSION = 0x01
RC_IDENTIFIER_REJECTED = 0x02
RC_SERVER_UNAVAILABLE = 0x03
RC_BAD_USER_OR_PASSWORD = 0x04
RC_NOT_AUTHORIZED = 0x05

# SUBACK failure (3.1.1); MQTT 5's reason codes of the same meaning are in `mqtt.reasons`.
SUBACK_FAILURE = 0x80

# Subscription options byte of MQTT 5 (3.1.1 uses only the QoS bits).
SUB_QOS = 0x03
SUB_NO_LOCAL = 0x04
SUB_RETAIN_AS_PUBLISHED = 0x08
SUB_RETAIN_HANDLING = 0x30

# Properties: property id -> value; User Property (0x26) and Subscription Identifier (0x0B)
# may repeat and are kept as lists.
Properties = dict[int, Any]


def _no_properties() -> Properties:
    return {}


@dataclass(frozen=True, slots=True)
class Will:
    topic: bytes
    payload: bytes
    qos: int
    retain: bool
    properties: Properties = field(default_factory=_no_properties)


@dataclass(frozen=True, slots=True)
class Connect:
    protocol_name: bytes
    protocol_level: int
    clean_start: bool
    keep_alive: int  # seconds, 0 for none
    client_id: str
    will: Will | None = None
    username: str | None = None
    password: bytes | None = None
    properties: Properties = field(default_factory=_no_properties)


@dataclass(frozen=True, slots=True)
class ConnectRefused:
    """A CONNECT that nats-server refuses while reading it: `return_code` is the CONNACK's
    (0: no CONNACK, the connection is closed), `reason` the error it logs."""

    return_code: int
    reason: str
    client_id: str = ""


@dataclass(frozen=True, slots=True)
class ConnAck:
    session_present: bool
    return_code: int  # the reason code under MQTT 5
    properties: Properties = field(default_factory=_no_properties)


@dataclass(frozen=True, slots=True)
class Publish:
    topic: bytes
    payload: bytes
    qos: int = 0
    retain: bool = False
    dup: bool = False
    packet_id: int = 0  # 0 at QoS 0
    properties: Properties = field(default_factory=_no_properties)


@dataclass(frozen=True, slots=True)
class _Acknowledgement:
    packet_id: int
    reason_code: int = 0  # MQTT 5
    properties: Properties = field(default_factory=_no_properties)


@dataclass(frozen=True, slots=True)
class PubAck(_Acknowledgement):
    pass


@dataclass(frozen=True, slots=True)
class PubRec(_Acknowledgement):
    pass


@dataclass(frozen=True, slots=True)
class PubRel(_Acknowledgement):
    pass


@dataclass(frozen=True, slots=True)
class PubComp(_Acknowledgement):
    pass


@dataclass(frozen=True, slots=True)
class Subscribe:
    packet_id: int
    # (topic filter, options byte: the QoS under 3.1.1, QoS and MQTT 5 flags under 5)
    filters: tuple[tuple[bytes, int], ...]
    properties: Properties = field(default_factory=_no_properties)


@dataclass(frozen=True, slots=True)
class SubAck:
    packet_id: int
    return_codes: tuple[int, ...]
    properties: Properties = field(default_factory=_no_properties)


@dataclass(frozen=True, slots=True)
class Unsubscribe:
    packet_id: int
    filters: tuple[bytes, ...]
    properties: Properties = field(default_factory=_no_properties)


@dataclass(frozen=True, slots=True)
class UnsubAck:
    packet_id: int
    reason_codes: tuple[int, ...] = ()  # MQTT 5 only
    properties: Properties = field(default_factory=_no_properties)


@dataclass(frozen=True, slots=True)
class PingReq:
    pass


@dataclass(frozen=True, slots=True)
class PingResp:
    pass


@dataclass(frozen=True, slots=True)
class Disconnect:
    reason_code: int = 0
    properties: Properties = field(default_factory=_no_properties)


@dataclass(frozen=True, slots=True)
class Auth:
    reason_code: int = 0
    properties: Properties = field(default_factory=_no_properties)


@dataclass(frozen=True, slots=True)
class Malformed:
    """Bytes that are no valid packet: nats-server logs `reason` and closes the connection
    without a reply. The decoder yields nothing after it."""

    reason: str


Packet = (
    Connect
    | ConnectRefused
    | ConnAck
    | Publish
    | PubAck
    | PubRec
    | PubRel
    | PubComp
    | Subscribe
    | SubAck
    | Unsubscribe
    | UnsubAck
    | PingReq
    | PingResp
    | Disconnect
    | Auth
    | Malformed
)
