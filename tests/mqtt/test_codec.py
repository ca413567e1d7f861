"""The sans-IO MQTT codec: packets survive a round trip through `frames` and `Decoder` in both
protocol versions, at any split of the stream; garbage never raises; malformed packets are
refused with nats-server's reasons; topics map to subjects as nats-server maps them."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pynatsd.mqtt import frames
from pynatsd.mqtt import packets as p
from pynatsd.mqtt import properties as props
from pynatsd.mqtt.codec import Decoder
from pynatsd.mqtt.topics import (
    TopicError,
    filter_to_subject,
    subject_to_topic,
    topic_to_subject,
)

_text = st.text(
    st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), max_size=12
)
_topic = (
    st.binary(min_size=1, max_size=20).filter(lambda b: b"\x00" not in b).filter(lambda b: _utf8(b))
)
_u16 = st.integers(1, 0xFFFF)


def _utf8(raw: bytes) -> bool:
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


_properties = st.fixed_dictionaries(
    {},
    optional={
        props.MESSAGE_EXPIRY_INTERVAL: st.integers(0, 2**32 - 1),
        props.CONTENT_TYPE: _text,
        props.RESPONSE_TOPIC: _text,
        props.CORRELATION_DATA: st.binary(max_size=10),
        props.TOPIC_ALIAS: _u16,
        props.USER_PROPERTY: st.lists(st.tuples(_text, _text), min_size=1, max_size=3),
    },
)


def _v5_props(v5: bool) -> st.SearchStrategy[dict[int, object]]:
    return _properties if v5 else st.just({})


@st.composite
def packets(draw: st.DrawFn, v5: bool) -> p.Packet:
    kind = draw(st.sampled_from(["publish", "ack", "subscribe", "unsubscribe", "ping", "suback"]))
    properties = draw(_v5_props(v5))
    if kind == "publish":
        qos = draw(st.integers(0, 2))
        return p.Publish(
            draw(_topic),
            draw(st.binary(max_size=50)),
            qos,
            draw(st.booleans()),
            draw(st.booleans()),
            draw(_u16) if qos else 0,
            properties,
        )
    if kind == "ack":
        cls = draw(st.sampled_from([p.PubAck, p.PubRec, p.PubRel, p.PubComp]))
        code = draw(st.sampled_from([0, 0x10, 0x80])) if v5 else 0
        return cls(draw(_u16), code, properties if code else {})
    if kind == "subscribe":
        options = st.integers(0, 2) if not v5 else st.integers(0, 0x2E).filter(_valid_options)
        filters = draw(st.lists(st.tuples(_topic, options), min_size=1, max_size=4))
        return p.Subscribe(draw(_u16), tuple(filters), properties)
    if kind == "unsubscribe":
        return p.Unsubscribe(
            draw(_u16), tuple(draw(st.lists(_topic, min_size=1, max_size=4))), properties
        )
    if kind == "suback":
        codes = tuple(draw(st.lists(st.sampled_from([0, 1, 2, 0x80]), min_size=1, max_size=4)))
        return p.SubAck(draw(_u16), codes, properties)
    return p.PingReq()


def _valid_options(options: int) -> bool:
    return options & 3 != 3 and options & 0x30 != 0x30


def _connect(v5: bool) -> p.Connect:
    return p.Connect(b"MQTT", p.MQTT_5 if v5 else p.MQTT_311, True, 30, "client")


def _decode_split(data: bytes, cuts: list[int]) -> list[p.Packet]:
    decoder = Decoder()
    out: list[p.Packet] = []
    last = 0
    for cut in sorted(set(cuts)):
        out += decoder.feed(data[last:cut])
        last = cut
    return out + decoder.feed(data[last:])


@pytest.mark.parametrize("v5", [False, True])
@settings(max_examples=150, deadline=None)
@given(data=st.data())
def test_round_trip_at_any_split(v5: bool, data: st.DataObject) -> None:
    connect = _connect(v5)
    sent = data.draw(st.lists(packets(v5), min_size=1, max_size=6))
    wire = frames.connect(connect) + b"".join(frames.encode_packet(x, v5) for x in sent)
    cuts = data.draw(st.lists(st.integers(0, len(wire)), max_size=8))
    assert _decode_split(wire, cuts) == [connect, *sent]


@settings(max_examples=300, deadline=None)
@given(garbage=st.binary(max_size=200), v5=st.booleans())
def test_garbage_never_raises(garbage: bytes, v5: bool) -> None:
    decoder = Decoder()
    decoder.feed(frames.connect(_connect(v5)))
    out = decoder.feed(garbage)
    assert all(not isinstance(x, p.Malformed) for x in out[:-1])


def test_byte_by_byte_is_linear() -> None:
    """A large PUBLISH fed one byte at a time is decoded once, whole."""
    payload = bytes(200_000)
    wire = frames.publish(p.Publish(b"t", payload, 1, packet_id=7))
    decoder = Decoder()
    out: list[p.Packet] = []
    for i in range(len(wire)):
        out += decoder.feed(wire[i : i + 1])
    assert out == [p.Publish(b"t", payload, 1, packet_id=7)]


@pytest.mark.parametrize(
    ("wire", "reason"),
    [
        ("101000044d5154540405003c000472617731", "connect flags reserved bit not set to 0"),
        ("820500010000", None),  # incomplete: waits
        ("8006000100016100", "invalid fixed header flags 0 for packet type 80"),
        ("30ffffffff01", "malformed variable int"),
        ("4003000100", "invalid remaining length 3 for packet type 40"),
        ("3605000161000100", "QoS=3 is invalid in MQTT"),
        ("82050001000000", "topic filter cannot be empty"),
        ("8206000000016101", "packet identifier cannot be 0"),
    ],
)
def test_malformed_reasons(wire: str, reason: str | None) -> None:
    out = Decoder().feed(bytes.fromhex(wire))
    assert out == ([] if reason is None else [p.Malformed(reason)])


def test_connect_refusals() -> None:
    level3 = frames.connect(p.Connect(b"MQTT", 3, True, 0, "x"))
    assert Decoder().feed(level3) == [
        p.ConnectRefused(p.RC_UNACCEPTABLE_PROTOCOL_VERSION, "unacceptable protocol version of 3")
    ]
    no_id = frames.connect(p.Connect(b"MQTT", 4, False, 0, ""))
    refused = Decoder().feed(no_id)[0]
    assert isinstance(refused, p.ConnectRefused)
    assert refused.return_code == p.RC_IDENTIFIER_REJECTED


@pytest.mark.parametrize(
    ("topic", "subject"),
    [
        (b"foo/bar", b"foo.bar"),
        (b"/foo", b"/.foo"),
        (b"foo/", b"foo./"),
        (b"foo//bar", b"foo./.bar"),
        (b"foo.bar", b"foo//bar"),
        (b"/", b"/./"),
        (b"single", b"single"),
    ],
)
def test_topic_subject_mapping(topic: bytes, subject: bytes) -> None:
    assert topic_to_subject(topic) == subject
    assert subject_to_topic(subject) == topic


def test_filters_and_refusals() -> None:
    assert filter_to_subject(b"a/+/#") == b"a.*.>"
    for bad in (b"a/+", b"a#", b"a b", b"a\x7f"):
        with pytest.raises(TopicError):
            topic_to_subject(bad)


@settings(max_examples=300, deadline=None)
@given(topic=_topic.filter(lambda t: not any(c in t for c in b"+# \t\r\n\x0c\x7f")))
def test_topics_round_trip(topic: bytes) -> None:
    assert subject_to_topic(topic_to_subject(topic)) == topic


@settings(max_examples=200, deadline=None)
@given(
    lines=st.lists(
        st.tuples(
            st.sampled_from(
                [
                    b"Nmqtt-Expires",
                    b"Nmqtt-Correlation",
                    b"Nmqtt-Format",
                    b"Nmqtt-Content-Type",
                    b"X",
                ]
            ),
            st.binary(max_size=20).filter(lambda b: b"\r" not in b and b"\n" not in b),
        ),
        max_size=5,
    )
)
def test_any_nats_header_becomes_properties_or_nothing(lines: list[tuple[bytes, bytes]]) -> None:
    """Whatever a NATS client puts in these headers, the MQTT 5 properties are built (or the
    message is found expired) without an error, and they encode."""
    from pynatsd.mqtt.v5 import delivery_properties

    header = b"NATS/1.0\r\n" + b"".join(n + b": " + v + b"\r\n" for n, v in lines) + b"\r\n"
    found = delivery_properties(header, b"", b"")
    if found is not None:
        props.encode(found)
