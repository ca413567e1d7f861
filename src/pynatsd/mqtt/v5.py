"""MQTT 5 over NATS: how an MQTT 5 message's properties travel as NATS headers and back.

nats-server has no counterpart (it refuses MQTT 5 clients). A message from an MQTT 5 client
reaches NATS with its properties as headers, and any NATS message reaches an MQTT 5 client with
its headers as properties:

| MQTT 5 property | NATS |
|---|---|
| User Property `name: value` | header `name: value` |
| Response Topic | the reply subject (topic -> subject as for any topic) |
| Correlation Data | header `Nmqtt-Correlation` (base64) |
| Content Type | header `Nmqtt-Content-Type` |
| Payload Format Indicator | header `Nmqtt-Format` |
| Message Expiry Interval | header `Nmqtt-Expires` (the deadline, Unix ms); sent as the time left |

Header names NATS cannot carry (with `:`, whitespace or control characters) are left out.
"""

from __future__ import annotations

import base64
import contextlib
import math
import time
from typing import Any

from pynatsd.mqtt import properties as props
from pynatsd.mqtt.nats_headers import PUB_HEADER

CORRELATION = b"Nmqtt-Correlation"
CONTENT_TYPE = b"Nmqtt-Content-Type"
FORMAT = b"Nmqtt-Format"
EXPIRES = b"Nmqtt-Expires"
_INTERNAL = b"nmqtt-"

# CONNACK properties pynatsd announces (what it supports beyond the defaults).
TOPIC_ALIAS_MAXIMUM = 1024
SERVER_PROPERTIES: dict[int, Any] = {props.TOPIC_ALIAS_MAXIMUM: TOPIC_ALIAS_MAXIMUM}

# Reason codes (OASIS MQTT 5.0, 2.4).
NO_SUBSCRIPTION_EXISTED = 0x11
MALFORMED_PACKET = 0x81
PROTOCOL_ERROR = 0x82
NOT_AUTHORIZED = 0x87
KEEP_ALIVE_TIMEOUT = 0x8D
SESSION_TAKEN_OVER = 0x8E
TOPIC_ALIAS_INVALID = 0x94

SHARE_PREFIX = b"$share/"

props_dict = dict[int, Any]


def _valid_name(name: str) -> bool:
    return bool(name) and all(33 <= ord(c) <= 126 and c != ":" for c in name)


def header_block(qos: int, properties: props_dict, now: float | None = None) -> bytes:
    """The NATS header block of an MQTT 5 PUBLISH: `Nmqtt-Pub` and its properties."""
    lines = [b"NATS/1.0", b"%s:%d" % (PUB_HEADER, qos)]
    for name, value in properties.get(props.USER_PROPERTY, ()):
        if _valid_name(name) and "\r" not in value and "\n" not in value:
            lines.append(f"{name}: {value}".encode())
    data = properties.get(props.CORRELATION_DATA)
    if data is not None:
        lines.append(CORRELATION + b": " + base64.b64encode(data))
    content_type = properties.get(props.CONTENT_TYPE)
    if content_type is not None and "\r" not in content_type and "\n" not in content_type:
        lines.append(CONTENT_TYPE + b": " + content_type.encode())
    if props.PAYLOAD_FORMAT_INDICATOR in properties:
        lines.append(FORMAT + b": %d" % properties[props.PAYLOAD_FORMAT_INDICATOR])
    expiry = properties.get(props.MESSAGE_EXPIRY_INTERVAL)
    if expiry is not None:
        deadline = int(((time.time() if now is None else now) + expiry) * 1000)
        lines.append(EXPIRES + b": %d" % deadline)
    return b"\r\n".join(lines) + b"\r\n\r\n"


def delivery_properties(header: bytes, reply: bytes, response_topic: bytes) -> props_dict | None:
    """The properties of a PUBLISH to an MQTT 5 client for a NATS message with this header
    block and reply subject (already a topic: `response_topic`); None when it has expired."""
    out: props_dict = {}
    if response_topic:
        out[props.RESPONSE_TOPIC] = response_topic.decode("utf-8", "replace")
    if not header:
        return out
    users: list[tuple[str, str]] = []
    for line in header.split(b"\r\n")[1:]:
        name, sep, value = line.partition(b":")
        if not sep:
            continue
        name, value = name.strip(), value.strip()
        if len(name) > 0xFFFF or len(value) > 0xFFFF:
            continue  # more than an MQTT string holds
        lowered = name.lower()
        if not lowered.startswith(_INTERNAL):
            users.append((name.decode("utf-8", "replace"), value.decode("utf-8", "replace")))
        elif lowered == EXPIRES.lower():
            # Any NATS client may write these headers: unreadable ones are left out.
            if value.isdigit():
                left = int(value) / 1000 - time.time()
                if left <= 0:
                    return None
                out[props.MESSAGE_EXPIRY_INTERVAL] = min(math.ceil(left), 0xFFFFFFFF)
        elif lowered == CORRELATION.lower():
            with contextlib.suppress(ValueError):
                out[props.CORRELATION_DATA] = base64.b64decode(value, validate=True)[:0xFFFF]
        elif lowered == CONTENT_TYPE.lower():
            out[props.CONTENT_TYPE] = value.decode("utf-8", "replace")
        elif lowered == FORMAT.lower() and value in (b"0", b"1"):
            out[props.PAYLOAD_FORMAT_INDICATOR] = int(value)
    if users:
        out[props.USER_PROPERTY] = users
    return out


def shared_filter(topic_filter: bytes) -> tuple[bytes, bytes] | None:
    """`$share/<group>/<filter>`: the group and the filter; None for any other filter."""
    if not topic_filter.startswith(SHARE_PREFIX):
        return None
    group, sep, rest = topic_filter[len(SHARE_PREFIX) :].partition(b"/")
    if not sep or not group or not rest or any(c in group for c in b"+#/"):
        return None
    return group, rest


# Kept with a message from an MQTT 5 client in `$MQTT_msgs` (never sent to NATS subscribers):
# who published it (No Local), whether it was retained (Retain As Published) and its Response
# Topic (a stored message has no reply subject).
ORIGIN_CLIENT = b"Nmqtt-Origin-Client"
RETAINED = b"Nmqtt-Retained"
RESPONSE = b"Nmqtt-Response"


def stored_header(header: bytes, client_id: str, retain: bool, response_topic: str = "") -> bytes:
    """The header block of an MQTT 5 client's QoS 1/2 message as `$MQTT_msgs` keeps it."""
    extra = b"%s:%s\r\n" % (ORIGIN_CLIENT, client_id.encode())
    if retain:
        extra += b"%s:1\r\n" % RETAINED
    if response_topic and "\r" not in response_topic and "\n" not in response_topic:
        extra += b"%s:%s\r\n" % (RESPONSE, response_topic.encode())
    return header[:-2] + extra + b"\r\n"


def stored_origin(header: bytes) -> tuple[bytes, bool, bytes]:
    """The publisher's client id, retain flag and response topic kept by `stored_header`."""
    origin = response = b""
    retained = False
    for line in header.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name == ORIGIN_CLIENT:
            origin = value
        elif name == RETAINED:
            retained = value == b"1"
        elif name == RESPONSE:
            response = value
    return origin, retained, response


class ServerAliases:
    """Topic aliases toward one MQTT 5 connection [MQTT-3.3.2-8]: the first PUBLISH of a topic
    carries it with a new alias, the next ones an empty topic and the alias, up to the
    client's Topic Alias Maximum; topics beyond it go in full. The mapping lives as long as
    the connection."""

    __slots__ = ("by_topic", "maximum")

    def __init__(self, maximum: int) -> None:
        self.maximum = maximum
        self.by_topic: dict[bytes, int] = {}

    def apply(self, topic: bytes, properties: props_dict) -> tuple[bytes, props_dict]:
        """The topic to write and the properties with the alias (a copy: the caller's may be
        kept for a redelivery)."""
        alias = self.by_topic.get(topic)
        if alias is not None:
            return b"", {**properties, props.TOPIC_ALIAS: alias}
        if len(self.by_topic) >= self.maximum:
            return topic, properties
        alias = self.by_topic[topic] = len(self.by_topic) + 1
        return topic, {**properties, props.TOPIC_ALIAS: alias}
