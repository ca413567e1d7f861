"""The sans-IO MQTT decoder: bytes in, packets (`mqtt.packets`) out, any split of the stream.

Corresponds to nats-server's `mqttParse`, `mqttReader` and the `mqttParse*` functions of
`server/mqtt.go`: the same checks in the same order (fixed header flags, remaining lengths, the
CONNECT fields and the return codes they lead to), so a malformed packet is refused as
nats-server refuses it. It decodes MQTT 3.1.1 and, once a CONNECT asks for it, MQTT 5.0; it
decodes the packets a server sends too (CONNACK, SUBACK, ...), for clients and tests.

Complexity: each byte received is copied into the buffer once; a packet is decoded once, when
the whole of it is in; the consumed prefix is dropped once per `feed`. A packet split into
1-byte writes costs O(bytes), never a rescan.
"""

from __future__ import annotations

from collections.abc import Callable

from pynatsd.mqtt import packets as p
from pynatsd.mqtt.properties import (
    MAX_VARINT,
    TOPIC_ALIAS,
    MalformedError,
    decode,
    read_binary,
    read_u16,
)

_Reader = Callable[["Decoder", int, bytes, int, int], p.Packet]

# The fixed header flags nats-server requires (mqttCheckFixedHeaderFlags); PUBLISH has its own.
_EXPECTED_FLAGS = {
    p.CONNECT: 0,
    p.PUBACK: 0,
    p.PUBREC: 0,
    p.PUBCOMP: 0,
    p.PINGREQ: 0,
    p.DISCONNECT: 0,
    p.PUBREL: 2,
    p.SUBSCRIBE: 2,
    p.UNSUBSCRIBE: 2,
}

# Remaining lengths fixed by MQTT 3.1.1 (mqttCheckRemainingLength); MQTT 5 lets the
# acknowledgements and DISCONNECT carry a reason code and properties.
_FIXED_LENGTHS_311 = {
    p.PUBACK: 2,
    p.PUBREC: 2,
    p.PUBREL: 2,
    p.PUBCOMP: 2,
    p.PINGREQ: 0,
    p.DISCONNECT: 0,
}


class Decoder:
    """One connection's incoming MQTT stream."""

    __slots__ = ("_broken", "_buf", "max_packet", "version")

    def __init__(self, max_packet: int = MAX_VARINT) -> None:
        self._buf = bytearray()
        # MQTT_311 until a CONNECT asks for 5 (the packets' formats differ).
        self.version = p.MQTT_311
        # Largest packet accepted (fixed header included); nats-server bounds the first packet
        # by max_payload.
        self.max_packet = max_packet
        self._broken = False

    def feed(self, data: bytes) -> list[p.Packet]:
        """The packets completed by `data`; after a `Malformed`, nothing more."""
        if self._broken:
            return []
        buf = self._buf
        buf += data
        out: list[p.Packet] = []
        pos = 0
        size = len(buf)
        while size - pos >= 2:
            first = buf[pos]
            ptype = first & 0xF0
            flags = first & 0x0F
            expected = _EXPECTED_FLAGS.get(ptype)
            if expected is not None and flags != expected:
                out.append(
                    self._break(f"invalid fixed header flags {flags:x} for packet type {ptype:x}")
                )
                break
            length = _remaining_length(buf, pos + 1, size)
            if length is None:
                break  # the length is still arriving
            remaining, body = length
            if remaining < 0:
                out.append(self._break("malformed variable int"))
                break
            end = body + remaining
            if end - pos > self.max_packet:
                out.append(self._break("maximum payload exceeded"))
                break
            if end > size:
                break
            fixed = _FIXED_LENGTHS_311.get(ptype) if self.version == p.MQTT_311 else None
            if fixed is not None and remaining != fixed:
                out.append(
                    self._break(f"invalid remaining length {remaining} for packet type {ptype:x}")
                )
                break
            packet = self._decode(ptype, flags, bytes(buf[body:end]))
            out.append(packet)
            pos = end
            if type(packet) is p.Malformed:
                self._broken = True
                break
        del buf[:pos]
        return out

    def _break(self, reason: str) -> p.Malformed:
        self._broken = True
        self._buf.clear()
        return p.Malformed(reason)

    def _decode(self, ptype: int, flags: int, body: bytes) -> p.Packet:
        reader = _READERS.get(ptype)
        if reader is None or (ptype == p.AUTH and self.version != p.MQTT_5):
            return p.Malformed(f"received unknown packet type {ptype >> 4}")
        try:
            return reader(self, flags, body, 0, len(body))
        except MalformedError as exc:
            return p.Malformed(str(exc))

    @property
    def v5(self) -> bool:
        return self.version == p.MQTT_5

    def _properties(self, body: bytes, pos: int, end: int) -> tuple[p.Properties, int]:
        if self.version != p.MQTT_5:
            return {}, pos
        return decode(body, pos, end)


def _remaining_length(buf: bytearray, pos: int, size: int) -> tuple[int, int] | None:
    """The fixed header's Remaining Length at `pos` and where the body starts; None while it is
    incomplete, a negative length when it runs over four bytes (nats-server's readVarInt)."""
    value = 0
    for i in range(4):
        if pos + i >= size:
            return None
        byte = buf[pos + i]
        value |= (byte & 0x7F) << (7 * i)
        if not byte & 0x80:
            return value, pos + i + 1
    return -1, pos


# -- CONNECT (mqttParseConnect) ------------------------------------------------------------------


def _read_connect(dec: Decoder, flags: int, body: bytes, pos: int, end: int) -> p.Packet:
    name, pos = read_binary(body, pos, end, "protocol name")
    if name != b"MQTT":
        shown = name.decode(errors="replace")
        if name == b"MQIsdp":
            raise MalformedError(f'older protocol "{shown}" not supported')
        raise MalformedError(f'expected connect packet with protocol name "MQTT", got "{shown}"')
    if pos >= end:
        raise MalformedError("error reading protocol level: EOF")
    level = body[pos]
    pos += 1
    if level not in (p.MQTT_311, p.MQTT_5):
        return p.ConnectRefused(
            p.RC_UNACCEPTABLE_PROTOCOL_VERSION, f"unacceptable protocol version of {level}"
        )
    v5 = level == p.MQTT_5
    if pos >= end:
        raise MalformedError("error reading flags: EOF")
    cflags = body[pos]
    pos += 1
    if cflags & p.FLAG_RESERVED:
        raise MalformedError("connect flags reserved bit not set to 0")
    will_qos = (cflags & p.FLAG_WILL_QOS) >> 3
    will_retain = bool(cflags & p.FLAG_WILL_RETAIN)
    has_will = bool(cflags & p.FLAG_WILL)
    if not has_will:
        if will_qos:
            raise MalformedError(
                f"if Will flag is set to 0, Will QoS must be 0 too, got {will_qos}"
            )
        if will_retain:
            raise MalformedError("if Will flag is set to 0, Will Retain flag must be 0 too")
    elif will_qos == 3:
        raise MalformedError("if Will flag is set to 1, Will QoS can be 0, 1 or 2, got 3")
    has_user = bool(cflags & p.FLAG_USERNAME)
    has_password = bool(cflags & p.FLAG_PASSWORD)
    if has_password and not has_user and not v5:
        raise MalformedError("password flag set but username flag is not")
    keep_alive, pos = read_u16(body, pos, end, "keep alive")
    props: p.Properties = {}
    if v5:
        props, pos = decode(body, pos, end)
    raw_id, pos = read_binary(body, pos, end, "client ID")
    client_id = raw_id.decode("utf-8", "surrogateescape")
    clean = bool(cflags & p.FLAG_CLEAN)
    if not client_id and not clean and not v5:
        return p.ConnectRefused(
            p.RC_IDENTIFIER_REJECTED,
            "when client ID is empty, clean session flag must be set to 1",
        )
    refused = _check_string(raw_id, "client ID")
    if refused:
        return p.ConnectRefused(p.RC_IDENTIFIER_REJECTED, refused, client_id)
    if any(c in client_id for c in " \t\r\n\f.*>"):
        # nats-server's isValidName: the id names subjects and streams.
        return p.ConnectRefused(
            p.RC_IDENTIFIER_REJECTED, f'invalid character in client ID "{client_id}"', client_id
        )
    will = None
    if has_will:
        will_props: p.Properties = {}
        if v5:
            will_props, pos = decode(body, pos, end)
        topic, pos = _read_topic(body, pos, end, "Will topic", "empty Will topic not allowed")
        payload, pos = read_binary(body, pos, end, "Will message")
        will = p.Will(topic, payload, will_qos, will_retain, will_props)
    username = None
    if has_user:
        raw_user, pos = read_binary(body, pos, end, "user name")
        if not raw_user:
            return p.ConnectRefused(
                p.RC_BAD_USER_OR_PASSWORD, "empty user name not allowed", client_id
            )
        refused = _check_string(raw_user, "user name")
        if refused:
            return p.ConnectRefused(p.RC_BAD_USER_OR_PASSWORD, refused, client_id)
        username = raw_user.decode("utf-8")
    password = None
    if has_password:
        password, pos = read_binary(body, pos, end, "password")
    dec.version = level
    return p.Connect(b"MQTT", level, clean, keep_alive, client_id, will, username, password, props)


def _check_string(raw: bytes, field: str) -> str:
    """nats-server's mqttValidateString: the error, or "" when `raw` is acceptable."""
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError:
        return f"invalid utf8 for {field} {raw!r}"
    if b"\x00" in raw:
        return f"invalid null character in {field} {raw!r}"
    return ""


def _read_connack(dec: Decoder, flags: int, body: bytes, pos: int, end: int) -> p.Packet:
    if end - pos < 2:
        raise MalformedError("error reading CONNACK: unexpected EOF")
    present, code = body[pos] & 1, body[pos + 1]
    props, pos = dec._properties(body, pos + 2, end)
    return p.ConnAck(bool(present), code, props)


# -- PUBLISH (mqttParsePub) ----------------------------------------------------------------------


def _read_publish(dec: Decoder, flags: int, body: bytes, pos: int, end: int) -> p.Packet:
    qos = (flags >> 1) & 3
    if qos > 2:
        raise MalformedError(f"QoS={qos} is invalid in MQTT")
    topic, pos = read_binary(body, pos, end, "topic")
    packet_id = 0
    if qos:
        packet_id, pos = read_u16(body, pos, end, "packet identifier")
        if packet_id == 0:
            raise MalformedError(f"with QoS={qos}, packet identifier cannot be 0")
    props, pos = dec._properties(body, pos, end)
    if not topic and TOPIC_ALIAS not in props:
        raise MalformedError("topic cannot be empty")
    refused = _check_string(topic, "topic")
    if refused:
        raise MalformedError(refused)
    return p.Publish(topic, body[pos:end], qos, bool(flags & 1), bool(flags & 8), packet_id, props)


def _ack_reader(cls: type[p.PubAck | p.PubRec | p.PubRel | p.PubComp]) -> _Reader:
    def read(dec: Decoder, flags: int, body: bytes, pos: int, end: int) -> p.Packet:
        packet_id, pos = read_u16(body, pos, end, "packet identifier")
        if packet_id == 0:
            raise MalformedError("packet identifier cannot be 0")
        code, props = _reason_and_properties(dec.v5, body, pos, end)
        return cls(packet_id, code, props)

    return read


# -- SUBSCRIBE, UNSUBSCRIBE (mqttParseSubsOrUnsubs) ----------------------------------------------


def _read_subscribe(dec: Decoder, flags: int, body: bytes, pos: int, end: int) -> p.Packet:
    packet_id, pos = read_u16(body, pos, end, "packet identifier")
    if packet_id == 0:
        raise MalformedError("packet identifier cannot be 0")
    props, pos = dec._properties(body, pos, end)
    filters: list[tuple[bytes, int]] = []
    while pos < end:
        topic, pos = _read_filter(body, pos, end)
        if pos >= end:
            raise MalformedError("error reading QoS: EOF")
        options = body[pos]
        pos += 1
        if dec.v5:
            if options & 0xC0 or options & 3 == 3 or options & p.SUB_RETAIN_HANDLING == 0x30:
                raise MalformedError(f"invalid subscription options {options:#x}")
        elif options > 2:
            raise MalformedError(f"subscribe QoS value must be 0, 1 or 2, got {options}")
        filters.append((topic, options))
    if not filters:
        raise MalformedError("subscribe protocol must contain at least 1 topic filter")
    return p.Subscribe(packet_id, tuple(filters), props)


def _read_unsubscribe(dec: Decoder, flags: int, body: bytes, pos: int, end: int) -> p.Packet:
    packet_id, pos = read_u16(body, pos, end, "packet identifier")
    if packet_id == 0:
        raise MalformedError("packet identifier cannot be 0")
    props, pos = dec._properties(body, pos, end)
    filters: list[bytes] = []
    while pos < end:
        topic, pos = _read_filter(body, pos, end)
        filters.append(topic)
    if not filters:
        raise MalformedError("unsubscribe protocol must contain at least 1 topic filter")
    return p.Unsubscribe(packet_id, tuple(filters), props)


def _read_filter(body: bytes, pos: int, end: int) -> tuple[bytes, int]:
    return _read_topic(body, pos, end, "topic filter", "topic filter cannot be empty")


def _read_topic(body: bytes, pos: int, end: int, field: str, empty: str) -> tuple[bytes, int]:
    """A topic or filter: not empty, UTF-8 without NUL (mqttValidateTopic)."""
    topic, pos = read_binary(body, pos, end, field)
    if not topic:
        raise MalformedError(empty)
    refused = _check_string(topic, field)
    if refused:
        raise MalformedError(refused)
    return topic, pos


def _read_suback(dec: Decoder, flags: int, body: bytes, pos: int, end: int) -> p.Packet:
    packet_id, pos = read_u16(body, pos, end, "packet identifier")
    props, pos = dec._properties(body, pos, end)
    return p.SubAck(packet_id, tuple(body[pos:end]), props)


def _read_unsuback(dec: Decoder, flags: int, body: bytes, pos: int, end: int) -> p.Packet:
    packet_id, pos = read_u16(body, pos, end, "packet identifier")
    props, pos = dec._properties(body, pos, end)
    return p.UnsubAck(packet_id, tuple(body[pos:end]), props)


# -- the rest ------------------------------------------------------------------------------------


def _read_pingreq(dec: Decoder, flags: int, body: bytes, pos: int, end: int) -> p.Packet:
    return p.PingReq()


def _read_pingresp(dec: Decoder, flags: int, body: bytes, pos: int, end: int) -> p.Packet:
    return p.PingResp()


def _read_disconnect(dec: Decoder, flags: int, body: bytes, pos: int, end: int) -> p.Packet:
    return p.Disconnect(*_reason_and_properties(dec.v5, body, pos, end))


def _read_auth(dec: Decoder, flags: int, body: bytes, pos: int, end: int) -> p.Packet:
    return p.Auth(*_reason_and_properties(True, body, pos, end))


def _reason_and_properties(v5: bool, body: bytes, pos: int, end: int) -> tuple[int, p.Properties]:
    """MQTT 5's optional reason code and properties at the end of a packet (absent: success
    and none)."""
    if not v5 or pos >= end:
        return 0, {}
    if pos + 1 >= end:
        return body[pos], {}
    props, _ = decode(body, pos + 1, end)
    return body[pos], props


_READERS: dict[int, _Reader] = {
    p.CONNECT: _read_connect,
    p.CONNACK: _read_connack,
    p.PUBLISH: _read_publish,
    p.PUBACK: _ack_reader(p.PubAck),
    p.PUBREC: _ack_reader(p.PubRec),
    p.PUBREL: _ack_reader(p.PubRel),
    p.PUBCOMP: _ack_reader(p.PubComp),
    p.SUBSCRIBE: _read_subscribe,
    p.SUBACK: _read_suback,
    p.UNSUBSCRIBE: _read_unsubscribe,
    p.UNSUBACK: _read_unsuback,
    p.PINGREQ: _read_pingreq,
    p.PINGRESP: _read_pingresp,
    p.DISCONNECT: _read_disconnect,
    p.AUTH: _read_auth,
}
