"""MQTT 5 on pynatsd's MQTT listener, with paho-mqtt's MQTTv5 client.

Behaviour that does not involve NATS is cross-checked against mosquitto (an MQTT 5 broker from
the system's packages) when it is installed: the same scenario on both, the same observations.
What bridges MQTT 5 and NATS (properties as headers, response topics as reply subjects, a 3.1.1
and a 5 client together) has no reference and is checked on pynatsd alone.
"""

from __future__ import annotations

import itertools
import shutil
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from paho.mqtt.packettypes import PacketTypes
from paho.mqtt.properties import Properties
from paho.mqtt.subscribeoptions import SubscribeOptions

from pynatsd.mqtt import frames
from pynatsd.mqtt import packets as p
from pynatsd.mqtt import properties as props_ids
from support.mqtt import (
    Client,
    MQTTServer,
    NATSClient,
    RawMQTT,
    accepts,
    start_mqtt_server,
    wait_for,
)
from support.ports import free_port
from support.processes import PYNATSD

pytestmark = pytest.mark.timeout(120)

_ids = itertools.count()


@pytest.fixture(scope="module")
def pynatsd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MQTTServer]:
    server = start_mqtt_server(list(PYNATSD), tmp_path_factory.mktemp("mqtt5"), "pynatsd")
    try:
        yield server
    finally:
        server.process.stop()


@pytest.fixture(scope="module")
def mosquitto_port() -> Iterator[int | None]:
    """A mosquitto broker on a free loopback port, or None when it is not installed."""
    binary = shutil.which("mosquitto") or (
        "/usr/sbin/mosquitto" if Path("/usr/sbin/mosquitto").exists() else None
    )
    if binary is None:
        yield None
        return
    port = free_port()
    proc = subprocess.Popen(
        [binary, "-p", str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        wait_for(lambda: accepts(port), "mosquitto")
        yield port
    finally:
        proc.terminate()
        proc.wait(10)


def same_on_mosquitto(
    pynatsd: MQTTServer, mosquitto_port: int | None, scenario: Callable[[int, str], Any]
) -> Any:
    """Run `scenario(mqtt_port, unique)` on pynatsd and, when installed, on mosquitto: the
    observations must be equal."""
    unique = f"v{next(_ids)}"
    ours = scenario(pynatsd.mqtt_port, unique)
    if mosquitto_port is not None:
        assert scenario(mosquitto_port, unique) == ours
    return ours


def v5(port: int, client_id: str, **kwargs: Any) -> Client:
    return Client(port, client_id, v5=True, **kwargs)


def kept_session(port: int, client_id: str) -> Client:
    """An MQTT 5 client whose session outlives the connection (expiry 300 s, clean start 0)."""
    expiry = Properties(PacketTypes.CONNECT)
    expiry.SessionExpiryInterval = 300
    return v5(port, client_id, clean=False, connect_properties=expiry)


def publish_properties(**fields: Any) -> Properties:
    props = Properties(PacketTypes.PUBLISH)
    for name, value in fields.items():
        setattr(props, name, value)
    return props


# -- MQTT 5 alone (cross-checked with mosquitto) ------------------------------------------------


def test_shared_subscription_delivers_each_message_once(
    pynatsd: MQTTServer, mosquitto_port: int | None
) -> None:
    def scenario(port: int, u: str) -> Any:
        members = [v5(port, f"{u}-m{i}") for i in range(2)]
        for member in members:
            assert member.subscribe((f"$share/g/{u}/work", 1)) == [1]
        pub = v5(port, f"{u}-pub")
        for i in range(20):
            pub.publish(f"{u}/work", b"%d" % i, 1)
        wait_for(lambda: sum(len(m.messages()) for m in members) >= 20, "20 messages")
        got = sorted(int(x.payload) for m in members for x in m.messages())
        for c in (*members, pub):
            c.disconnect()
        return got

    assert same_on_mosquitto(pynatsd, mosquitto_port, scenario) == list(range(20))


def test_subscription_options(pynatsd: MQTTServer, mosquitto_port: int | None) -> None:
    """no_local, retain_as_published, retain handling 1 and 2, subscription identifiers."""

    def scenario(port: int, u: str) -> Any:
        pub = v5(port, f"{u}-pub")
        pub.publish(f"{u}/r", b"retained", 1, retain=True)
        me = v5(port, f"{u}-me")
        ids = Properties(PacketTypes.SUBSCRIBE)
        ids.SubscriptionIdentifier = 7
        me.subscribe((f"{u}/local", SubscribeOptions(1, noLocal=True)))
        me.subscribe((f"{u}/r", SubscribeOptions(1, retainAsPublished=True)), properties=ids)
        never = v5(port, f"{u}-never")
        never.subscribe((f"{u}/r", SubscribeOptions(1, retainHandling=2)))
        once = v5(port, f"{u}-once")
        once.subscribe((f"{u}/r", SubscribeOptions(1, retainHandling=1)))
        once.subscribe((f"{u}/r", SubscribeOptions(1, retainHandling=1)))  # exists: none
        me.publish(f"{u}/local", b"mine", 1)
        pub.publish(f"{u}/r", b"live", 1, retain=True)
        for c in (me, never, once):
            wait_for(lambda c=c: any(m.payload == b"live" for m in c.messages()), "live")

        def seen(c: Client) -> list[Any]:
            return [
                (
                    m.topic.split("/", 1)[1],
                    m.payload,
                    m.retain,
                    m.properties.get("SubscriptionIdentifier"),
                )
                for m in c.messages()
            ]

        result = seen(me), seen(never), seen(once)
        pub.publish(f"{u}/r", b"", 1, retain=True)
        for c in (pub, me, never, once):
            c.disconnect()
        return result

    me, never, once = same_on_mosquitto(pynatsd, mosquitto_port, scenario)
    assert me == [("r", b"retained", True, [7]), ("r", b"live", True, [7])]
    assert never == [("r", b"live", False, None)]
    assert once == [("r", b"retained", True, None), ("r", b"live", False, None)]


def test_topic_alias(pynatsd: MQTTServer, mosquitto_port: int | None) -> None:
    def scenario(port: int, u: str) -> Any:
        sub = v5(port, f"{u}-sub")
        sub.subscribe((f"{u}/aliased", 0))
        pub = v5(port, f"{u}-pub")
        alias = publish_properties(TopicAlias=3)
        pub.publish(f"{u}/aliased", b"set", 1, properties=alias)
        pub.publish("", b"used", 1, properties=alias)
        got = sub.wait_messages(2)
        pub.disconnect()
        sub.disconnect()
        maximum = getattr(pub.connack_properties, "TopicAliasMaximum", 0) > 0
        return maximum, [(m.topic.split("/", 1)[1], m.payload) for m in got]

    assert same_on_mosquitto(pynatsd, mosquitto_port, scenario) == (
        True,
        [("aliased", b"set"), ("aliased", b"used")],
    )


def test_server_topic_aliases(pynatsd: MQTTServer, mosquitto_port: int | None) -> None:
    """A client whose CONNECT allows 2 topic aliases gets each of its first two topics once
    in full with an alias, then as the alias alone (an empty topic: paho 2 does not resolve
    aliases it receives, so the test sees them as sent); a third topic goes in full without
    one. A client that allows none gets full topics."""

    def scenario(port: int, u: str) -> Any:
        allow = Properties(PacketTypes.CONNECT)
        allow.TopicAliasMaximum = 2
        aliased = v5(port, f"{u}-aliased", connect_properties=allow)
        plain = v5(port, f"{u}-plain")
        for client in (aliased, plain):
            client.subscribe((f"{u}/#", 1))
        pub = v5(port, f"{u}-pub")
        for topic in ("a", "b", "a", "c", "b", "c"):
            pub.publish(f"{u}/{topic}", topic.encode(), 1)
        seen = []
        for client in (aliased, plain):
            got = client.wait_messages(6)
            seen.append(
                [(m.topic.replace(u, "U"), m.payload, m.properties.get("TopicAlias")) for m in got]
            )
        for c in (aliased, plain, pub):
            c.disconnect()
        return seen

    aliased, plain = scenario(pynatsd.mqtt_port, f"v{next(_ids)}")
    assert aliased == [
        ("U/a", b"a", 1),
        ("U/b", b"b", 2),
        ("", b"a", 1),
        ("U/c", b"c", None),
        ("", b"b", 2),
        ("U/c", b"c", None),
    ]
    assert plain == [(f"U/{t}", t.encode(), None) for t in ("a", "b", "a", "c", "b", "c")]
    if mosquitto_port is not None:
        # mosquitto 2.0.11 sends no topic aliases: both clients see full topics.
        theirs = scenario(mosquitto_port, f"v{next(_ids)}")
        assert theirs == [plain, plain]


def test_session_expiry_and_take_over(pynatsd: MQTTServer, mosquitto_port: int | None) -> None:
    def scenario(port: int, u: str) -> Any:
        first = kept_session(port, f"{u}-s")
        first.subscribe((f"{u}/kept", 1))
        first.disconnect()
        pub = v5(port, f"{u}-pub")
        pub.publish(f"{u}/kept", b"while away", 1)
        again = kept_session(port, f"{u}-s")
        got = again.wait_messages(1)
        thief = v5(port, f"{u}-s", clean=True)
        wait_for(again.disconnected.is_set, "the taken-over connection closed")
        codes = thief.unsubscribe(f"{u}/never")
        for c in (pub, thief):
            c.disconnect()
        again.paho.loop_stop()
        return (
            first.connack,
            again.connack,
            [(m.payload, m.qos) for m in got],
            thief.connack,
            codes,
        )

    assert same_on_mosquitto(pynatsd, mosquitto_port, scenario) == (
        (False, 0),
        (True, 0),
        [(b"while away", 1)],
        (False, 0),
        [0x11],
    )


def test_take_over_disconnect_reason(pynatsd: MQTTServer) -> None:
    """The connection a new one takes over gets DISCONNECT 0x8E, Session taken over
    [MQTT-3.1.4-3] (mosquitto 2.0.11 closes it without one, so this is pynatsd's alone)."""
    first = v5(pynatsd.mqtt_port, "taken")
    second = v5(pynatsd.mqtt_port, "taken")
    wait_for(first.disconnected.is_set, "the first connection closed")
    assert first.disconnect_reason == 0x8E
    first.paho.loop_stop()
    second.disconnect()


def test_assigned_client_identifier(pynatsd: MQTTServer, mosquitto_port: int | None) -> None:
    def scenario(port: int, u: str) -> Any:
        client = v5(port, "")
        assigned = getattr(client.connack_properties, "AssignedClientIdentifier", "")
        client.disconnect()
        return client.connack, bool(assigned)

    assert same_on_mosquitto(pynatsd, mosquitto_port, scenario) == ((False, 0), True)


# -- MQTT 5 and NATS (pynatsd alone) -------------------------------------------------------------


def test_user_properties_are_nats_headers(pynatsd: MQTTServer) -> None:
    nats = NATSClient(pynatsd.nats_port)
    nats.sub("props.>")
    pub = v5(pynatsd.mqtt_port, "props-pub")
    props = publish_properties(
        UserProperty=[("site", "north"), ("unit", "C")],
        ContentType="text/plain",
        MessageExpiryInterval=120,
    )
    pub.publish("props/in", b"21.5", 1, properties=props)
    msg = nats.read_msg()
    header = msg.header.decode()
    assert msg.subject == "props.in" and msg.payload == b"21.5"
    assert "Nmqtt-Pub:1\r\n" in header and "site: north\r\n" in header and "unit: C\r\n" in header
    assert "Nmqtt-Content-Type: text/plain\r\n" in header and "Nmqtt-Expires: " in header
    pub.disconnect()

    sub = v5(pynatsd.mqtt_port, "props-sub")
    sub.subscribe(("props/out", 0))
    nats.pub("props.out", b"x", b"NATS/1.0\r\nTrace-Id: abc\r\nNmqtt-Expires: 1\r\n\r\n")  # expired
    nats.pub("props.out", b"y", b"NATS/1.0\r\nTrace-Id: def\r\n\r\n")
    nats.pub("props.out", b"z")
    got = sub.wait_messages(2)
    assert [(m.payload, m.properties.get("UserProperty")) for m in got] == [
        (b"y", [("Trace-Id", "def")]),
        (b"z", None),
    ]
    assert got[0].topic == "props/out"
    sub.disconnect()
    nats.close()


def test_request_response_with_nats(pynatsd: MQTTServer) -> None:
    """A NATS request answered by an MQTT 5 client (the reply subject is its Response Topic),
    and an MQTT 5 request (Response Topic, Correlation Data) seen from NATS."""
    responder = v5(pynatsd.mqtt_port, "responder")
    responder.subscribe(("service/time", 0))
    nats = NATSClient(pynatsd.nats_port)
    nats.sub("_INBOX.me", 1)
    nats.send("PUB service.time _INBOX.me 2\r\nhi\r\n")
    request = responder.wait_messages(1)[0]
    assert request.properties["ResponseTopic"] == "_INBOX/me"
    responder.publish(request.properties["ResponseTopic"], b"noon", 1)
    reply = nats.read_msg()
    assert (reply.subject, reply.payload) == ("_INBOX.me", b"noon")

    nats.sub("service.>", 2)
    props = publish_properties(ResponseTopic="replies/me", CorrelationData=b"\x01\x02")
    responder.publish("service/ask", b"?", 1, properties=props)
    asked = nats.read_msg()
    assert asked.subject == "service.ask" and asked.reply == "replies.me"
    assert b"Nmqtt-Correlation: AQI=\r\n" in asked.header
    responder.disconnect()
    nats.close()


def test_mqtt311_and_mqtt5_clients_together(pynatsd: MQTTServer) -> None:
    old = Client(pynatsd.mqtt_port, "mix-311")
    new = v5(pynatsd.mqtt_port, "mix-5")
    old.subscribe(("mix/#", 1))
    new.subscribe(("mix/#", 1))
    old.publish("mix/from311", b"a", 1)
    new.publish("mix/from5", b"b", 1, properties=publish_properties(UserProperty=[("k", "v")]))
    for client in (old, new):
        got = client.wait_messages(2)
        assert sorted((m.topic, m.payload, m.qos) for m in got) == [
            ("mix/from311", b"a", 1),
            ("mix/from5", b"b", 1),
        ]
    assert [m.properties.get("UserProperty") for m in new.messages() if m.payload == b"b"] == [
        [("k", "v")]
    ]
    old.disconnect()
    new.disconnect()


def test_session_expires(pynatsd: MQTTServer) -> None:
    """A session with a Session Expiry Interval of 1 s ends that long after its client left:
    its record leaves `$MQTT_sess` and a reconnection finds no session."""
    import json

    def stored_sessions() -> int:
        nats = NATSClient(pynatsd.nats_port)
        nats.sub("_INBOX.sess", 9)
        nats.send("PUB $JS.API.STREAM.INFO.$MQTT_sess _INBOX.sess 0\r\n\r\n")
        info = json.loads(nats.read_msg().payload)
        nats.close()
        return int(info["state"]["messages"])

    expiry = Properties(PacketTypes.CONNECT)
    expiry.SessionExpiryInterval = 1
    client = v5(pynatsd.mqtt_port, "expiring", clean=False, connect_properties=expiry)
    client.subscribe(("expiring/#", 1))
    client.disconnect()
    before = stored_sessions()
    wait_for(lambda: stored_sessions() < before, "the session record to go")
    again = v5(pynatsd.mqtt_port, "expiring", clean=False)
    assert again.connack == (False, 0)
    again.disconnect()


def test_shared_subscription_redelivers_to_another_member(tmp_path: Path) -> None:
    """A shared subscription at QoS 1 reads its group's JetStream consumer, as other QoS 1
    subscriptions do: a member that leaves without acknowledging its messages does not lose
    them, they come again (with DUP) to the member that stays, once `ack_wait` has passed.
    (mosquitto 2.0.11 drops them with the member, so this is pynatsd's alone.)"""
    server = start_mqtt_server(list(PYNATSD), tmp_path, "pynatsd", mqtt_extra='ack_wait: "1s"')
    try:
        port = server.mqtt_port
        silent = RawMQTT(port)
        silent.decoder.version = p.MQTT_5  # it reads what an MQTT 5 server sends
        silent.send(
            frames.connect(p.Connect(b"MQTT", 5, True, 30, "silent"))
            + frames.subscribe(p.Subscribe(1, ((b"$share/g/work/#", 1),)), v5=True)
        )
        assert [type(x) for x in silent.read_packets(2)] == [p.ConnAck, p.SubAck]
        stays = v5(port, "stays")
        assert stays.subscribe(("$share/g/work/#", 1)) == [1]
        pub = v5(port, "pub")
        for i in range(20):
            pub.publish(f"work/{i}", b"%d" % i, 1)
        held = silent.read_packets(1)
        assert held and all(isinstance(x, p.Publish) for x in held)
        silent.close()  # never acknowledged
        got = stays.wait_messages(20)
        assert sorted(int(m.payload) for m in got) == list(range(20))
        held_ids = {int(x.payload) for x in held if isinstance(x, p.Publish)}
        assert all(m.dup for m in got if int(m.payload) in held_ids)
        stays.disconnect()
        pub.disconnect()
    finally:
        server.process.stop()


def test_qos2_properties_survive_a_restart(tmp_path: Path) -> None:
    """An MQTT 5 QoS 2 message received (PUBREC) and not yet released waits in
    `$MQTT_qos2in` with its properties: released after a restart, it reaches a NATS
    subscriber with its headers and reply subject, and an MQTT 5 subscriber with its
    properties."""
    server = start_mqtt_server(list(PYNATSD), tmp_path, "pynatsd")
    try:
        expiry = {props_ids.SESSION_EXPIRY_INTERVAL: 300}
        connect = frames.connect(p.Connect(b"MQTT", 5, False, 30, "held", properties=expiry))
        properties = {
            props_ids.USER_PROPERTY: [("site", "north")],
            props_ids.CONTENT_TYPE: "text/plain",
            props_ids.RESPONSE_TOPIC: "held/answers",
            props_ids.MESSAGE_EXPIRY_INTERVAL: 600,
        }
        publish = p.Publish(b"held/in", b"21.5", 2, False, False, 7, properties)
        raw = RawMQTT(server.mqtt_port)
        raw.decoder.version = p.MQTT_5
        raw.send(connect + frames.publish(publish, v5=True))
        assert [type(x) for x in raw.read_packets(2)] == [p.ConnAck, p.PubRec]
        raw.close()
        server.restart()
        nats = NATSClient(server.nats_port)
        nats.sub("held.in")
        sub = v5(server.mqtt_port, "held-sub")
        sub.subscribe(("held/in", 2))
        raw = RawMQTT(server.mqtt_port)
        raw.decoder.version = p.MQTT_5
        raw.send(connect + frames.pub_response(p.PUBREL, 7, 0, {}))
        assert [type(x) for x in raw.read_packets(2)] == [p.ConnAck, p.PubComp]
        msg = nats.read_msg()
        header = msg.header.decode()
        assert (msg.subject, msg.reply, msg.payload) == ("held.in", "held.answers", b"21.5")
        assert "Nmqtt-Pub:2\r\n" in header and "site: north\r\n" in header
        assert "Nmqtt-Content-Type: text/plain\r\n" in header
        got = sub.wait_messages(1)
        assert (got[0].payload, got[0].qos) == (b"21.5", 2)
        assert got[0].properties["UserProperty"] == [("site", "north")]
        assert got[0].properties["ContentType"] == "text/plain"
        assert got[0].properties["ResponseTopic"] == "held/answers"
        assert 590 <= got[0].properties["MessageExpiryInterval"] <= 600
        raw.close()
        sub.disconnect()
        nats.close()
    finally:
        server.process.stop()


def test_shared_subscription_is_part_of_the_session(
    pynatsd: MQTTServer, mosquitto_port: int | None
) -> None:
    """A session with a Session Expiry Interval keeps its shared subscription: resumed, it
    gets the group's messages without subscribing again."""

    def scenario(port: int, u: str) -> Any:
        first = kept_session(port, f"{u}-member")
        first.subscribe((f"$share/g/{u}/jobs", 1))
        first.disconnect()
        again = kept_session(port, f"{u}-member")
        pub = v5(port, f"{u}-pub")
        pub.publish(f"{u}/jobs", b"after", 1)
        got = again.wait_messages(1)
        pub.disconnect()
        again.disconnect()
        v5(port, f"{u}-member").disconnect()  # clean: the session goes
        return again.connack, [(m.payload, m.qos) for m in got]

    assert same_on_mosquitto(pynatsd, mosquitto_port, scenario) == ((True, 0), [(b"after", 1)])


def test_shared_subscription_survives_a_restart(tmp_path: Path) -> None:
    """The session record keeps its shared subscriptions (pynatsd's `shared` field): after a
    restart the resumed member gets the group's QoS 1 messages from its consumer."""
    server = start_mqtt_server(list(PYNATSD), tmp_path, "pynatsd")
    try:
        first = kept_session(server.mqtt_port, "member")
        first.subscribe(("$share/g/jobs", 1))
        first.disconnect()
        server.restart()
        again = kept_session(server.mqtt_port, "member")
        pub = v5(server.mqtt_port, "pub")
        pub.publish("jobs", b"after restart", 1)
        got = again.wait_messages(1)
        assert again.connack == (True, 0)
        assert [(m.payload, m.qos) for m in got] == [(b"after restart", 1)]
        pub.disconnect()
        again.disconnect()
    finally:
        server.process.stop()


def test_resumed_session_keeps_subscription_options(
    pynatsd: MQTTServer, mosquitto_port: int | None
) -> None:
    """A resumed session's subscriptions keep their options: No Local still holds, and the
    Subscription Identifier still comes with each message."""

    def scenario(port: int, u: str) -> Any:
        first = kept_session(port, f"{u}-me")
        ids = Properties(PacketTypes.SUBSCRIBE)
        ids.SubscriptionIdentifier = 9
        first.subscribe((f"{u}/local", SubscribeOptions(1, noLocal=True)))
        first.subscribe((f"{u}/tagged", SubscribeOptions(1)), properties=ids)
        first.disconnect()
        again = kept_session(port, f"{u}-me")
        pub = v5(port, f"{u}-pub")
        again.publish(f"{u}/local", b"mine", 1)
        pub.publish(f"{u}/local", b"theirs", 1)
        pub.publish(f"{u}/tagged", b"tagged", 1)
        got = again.wait_messages(2)
        pub.disconnect()
        again.disconnect()
        v5(port, f"{u}-me").disconnect()  # clean: the session goes
        return sorted((m.payload, m.properties.get("SubscriptionIdentifier")) for m in got)

    assert same_on_mosquitto(pynatsd, mosquitto_port, scenario) == [
        (b"tagged", [9]),
        (b"theirs", None),
    ]
