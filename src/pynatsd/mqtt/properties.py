"""MQTT 5 properties: the identifiers, their value types, and their encoding.

nats-server has no counterpart (it speaks MQTT 3.1.1 only); the table follows OASIS MQTT 5.0
section 2.2.2.2. Values: integers for Byte / Two Byte / Four Byte / Variable Byte Integer
properties, `str` for UTF-8 strings, `bytes` for binary data, `(name, value)` for a User
Property. User Property and Subscription Identifier may repeat: their value is a list.
"""

from __future__ import annotations

import struct
from typing import Any

PAYLOAD_FORMAT_INDICATOR = 0x01
MESSAGE_EXPIRY_INTERVAL = 0x02
CONTENT_TYPE = 0x03
RESPONSE_TOPIC = 0x08
CORRELATION_DATA = 0x09
SUBSCRIPTION_IDENTIFIER = 0x0B
SESSION_EXPIRY_INTERVAL = 0x11
ASSIGNED_CLIENT_IDENTIFIER = 0x12
SERVER_KEEP_ALIVE = 0x13
AUTHENTICATION_METHOD = 0x15
AUTHENTICATION_DATA = 0x16
REQUEST_PROBLEM_INFORMATION = 0x17
WILL_DELAY_INTERVAL = 0x18
REQUEST_RESPONSE_INFORMATION = 0x19
RESPONSE_INFORMATION = 0x1A
SERVER_REFERENCE = 0x1C
REASON_STRING = 0x1F
RECEIVE_MAXIMUM = 0x21
TOPIC_ALIAS_MAXIMUM = 0x22
TOPIC_ALIAS = 0x23
MAXIMUM_QOS = 0x24
RETAIN_AVAILABLE = 0x25
USER_PROPERTY = 0x26
MAXIMUM_PACKET_SIZE = 0x27
WILDCARD_SUBSCRIPTION_AVAILABLE = 0x28
SUBSCRIPTION_IDENTIFIER_AVAILABLE = 0x29
SHARED_SUBSCRIPTION_AVAILABLE = 0x2A

# Value types.
BYTE, U16, U32, VARINT, STRING, BINARY, PAIR = range(7)

KINDS: dict[int, int] = {
    PAYLOAD_FORMAT_INDICATOR: BYTE,
    MESSAGE_EXPIRY_INTERVAL: U32,
    CONTENT_TYPE: STRING,
    RESPONSE_TOPIC: STRING,
    CORRELATION_DATA: BINARY,
    SUBSCRIPTION_IDENTIFIER: VARINT,
    SESSION_EXPIRY_INTERVAL: U32,
    ASSIGNED_CLIENT_IDENTIFIER: STRING,
    SERVER_KEEP_ALIVE: U16,
    AUTHENTICATION_METHOD: STRING,
    AUTHENTICATION_DATA: BINARY,
    REQUEST_PROBLEM_INFORMATION: BYTE,
    WILL_DELAY_INTERVAL: U32,
    REQUEST_RESPONSE_INFORMATION: BYTE,
    RESPONSE_INFORMATION: STRING,
    SERVER_REFERENCE: STRING,
    REASON_STRING: STRING,
    RECEIVE_MAXIMUM: U16,
    TOPIC_ALIAS_MAXIMUM: U16,
    TOPIC_ALIAS: U16,
    MAXIMUM_QOS: BYTE,
    RETAIN_AVAILABLE: BYTE,
    USER_PROPERTY: PAIR,
    MAXIMUM_PACKET_SIZE: U32,
    WILDCARD_SUBSCRIPTION_AVAILABLE: BYTE,
    SUBSCRIPTION_IDENTIFIER_AVAILABLE: BYTE,
    SHARED_SUBSCRIPTION_AVAILABLE: BYTE,
}

# Properties that may appear more than once.
REPEATABLE = frozenset({USER_PROPERTY, SUBSCRIPTION_IDENTIFIER})

MAX_VARINT = 268_435_455


class MalformedError(ValueError):
    """Bytes that break the packet format; the message is what nats-server would log."""


def varint(value: int) -> bytes:
    """A Variable Byte Integer (remaining lengths, property lengths, subscription ids)."""
    if value < 0 or value > MAX_VARINT:
        raise ValueError(f"variable byte integer out of range: {value}")
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def read_varint(data: bytes | bytearray | memoryview, pos: int, end: int) -> tuple[int, int]:
    """The Variable Byte Integer at `pos` and the position after it."""
    value = 0
    shift = 0
    while True:
        if pos >= end:
            raise MalformedError("error reading variable int: unexpected EOF")
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, pos
        shift += 7
        if shift > 21:
            raise MalformedError("malformed variable int")


def utf8_string(value: str) -> bytes:
    raw = value.encode("utf-8", "surrogateescape")
    return struct.pack(">H", len(raw)) + raw


def binary(value: bytes) -> bytes:
    return struct.pack(">H", len(value)) + value


def encode(props: dict[int, Any]) -> bytes:
    """The property block: its length, then each property."""
    body = bytearray()
    for pid, value in props.items():
        values = value if pid in REPEATABLE else (value,)
        for item in values:
            body += varint(pid)
            body += _encode_value(KINDS[pid], item)
    return varint(len(body)) + bytes(body)


def _encode_value(kind: int, value: Any) -> bytes:
    if kind == BYTE:
        return bytes((value,))
    if kind == U16:
        return struct.pack(">H", value)
    if kind == U32:
        return struct.pack(">I", value)
    if kind == VARINT:
        return varint(value)
    if kind == STRING:
        return utf8_string(value)
    if kind == BINARY:
        return binary(value)
    name, text = value
    return utf8_string(name) + utf8_string(text)


def decode(data: bytes, pos: int, end: int) -> tuple[dict[int, Any], int]:
    """The property block at `pos` and the position after it."""
    length, pos = read_varint(data, pos, end)
    stop = pos + length
    if stop > end:
        raise MalformedError("property length exceeds the packet")
    props: dict[int, Any] = {}
    while pos < stop:
        pid, pos = read_varint(data, pos, stop)
        kind = KINDS.get(pid)
        if kind is None:
            raise MalformedError(f"unknown property {pid:#x}")
        value, pos = _decode_value(kind, data, pos, stop)
        if pid in REPEATABLE:
            props.setdefault(pid, []).append(value)
        elif pid in props:
            raise MalformedError(f"property {pid:#x} included more than once")
        else:
            props[pid] = value
    return props, stop


def _decode_value(kind: int, data: bytes, pos: int, end: int) -> tuple[Any, int]:
    if kind == VARINT:
        return read_varint(data, pos, end)
    if kind == STRING:
        return read_string(data, pos, end, "property")
    if kind == BINARY:
        return read_binary(data, pos, end, "property")
    if kind == PAIR:
        name, pos = read_string(data, pos, end, "user property")
        value, pos = read_string(data, pos, end, "user property")
        return (name, value), pos
    size = 1 if kind == BYTE else 2 if kind == U16 else 4
    if pos + size > end:
        raise MalformedError("error reading property: unexpected EOF")
    return int.from_bytes(data[pos : pos + size], "big"), pos + size


def read_u16(data: bytes, pos: int, end: int, name: str) -> tuple[int, int]:
    if end - pos < 2:
        raise MalformedError(f"error reading {name}: unexpected EOF")
    return (data[pos] << 8) | data[pos + 1], pos + 2


def read_binary(data: bytes, pos: int, end: int, name: str) -> tuple[bytes, int]:
    size, pos = read_u16(data, pos, end, name)
    if pos + size > end:
        raise MalformedError(f"error reading {name}: unexpected EOF")
    return bytes(data[pos : pos + size]), pos + size


def read_string(data: bytes, pos: int, end: int, name: str) -> tuple[str, int]:
    raw, pos = read_binary(data, pos, end, name)
    try:
        return raw.decode("utf-8"), pos
    except UnicodeDecodeError:
        raise MalformedError(f"invalid utf8 for {name} {raw!r}") from None
