"""MQTT 3.1.1 side by side: each scenario runs against nats-server's MQTT listener and pynatsd's,
and what the clients observe must be the same (CONNACK bytes, closes, delivered QoS, flags and
payloads, retained messages, wills, sessions, topic <-> subject mapping and headers).

Clients: paho-mqtt 2.x (MQTT 3.1.1) and a raw socket for byte-level scenarios; a line-level
NATS client for the NATS side.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from pynatsd.mqtt import frames
from pynatsd.mqtt import packets as p
from support.mqtt import (
    Client,
    MQTTServer,
    NATSClient,
    RawMQTT,
    accepts,
    connect_packet,
    mqtt_servers,
    raw_exchange,
    wait_for,
)
from support.natsserver import require_nats_server

pytestmark = pytest.mark.timeout(120)

_ids = itertools.count()


@pytest.fixture(scope="module")
def servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[MQTTServer]]:
    require_nats_server()
    directory: Path = tmp_path_factory.mktemp("mqtt")
    with mqtt_servers(directory) as pair:
        yield pair


def both(servers: list[MQTTServer], scenario: Callable[[MQTTServer, str], Any]) -> Any:
    """Run `scenario(server, unique)` on each server, assert equal observations, return one.
    `unique` keeps topics and client ids apart between scenarios sharing the servers."""
    unique = f"t{next(_ids)}"
    results = {s.name: scenario(s, unique) for s in servers}
    assert results["pynatsd"] == results["nats-server"], results
    return results["pynatsd"]


# -- CONNECT / CONNACK --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "packet", "expected"),
    [
        ("accepted", connect_packet(), ([p.ConnAck(False, 0)], False)),
        (
            "protocol level 3",
            connect_packet(protocol_level=3),
            ([p.ConnAck(False, p.RC_UNACCEPTABLE_PROTOCOL_VERSION)], True),
        ),
        (
            "empty id without clean session",
            connect_packet("", clean_start=False),
            ([p.ConnAck(False, p.RC_IDENTIFIER_REJECTED)], True),
        ),
        ("empty id, clean session", connect_packet(""), ([p.ConnAck(False, 0)], False)),
        (
            "id with a dot",
            connect_packet("a.b"),
            ([p.ConnAck(False, p.RC_IDENTIFIER_REJECTED)], True),
        ),
        (
            "empty user name",
            connect_packet(username=""),
            ([p.ConnAck(False, p.RC_BAD_USER_OR_PASSWORD)], True),
        ),
        ("MQIsdp (3.1)", connect_packet(protocol_name=b"MQIsdp", protocol_level=3), ([], True)),
        ("other protocol name", connect_packet(protocol_name=b"MQTX"), ([], True)),
        ("reserved flag", bytes.fromhex("101000044d5154540405003c000472617731"), ([], True)),
        (
            "will QoS without will",
            bytes.fromhex("101000044d5154540412003c000472617731"),
            ([], True),
        ),
    ],
)
def test_connect_answers(
    servers: list[MQTTServer], name: str, packet: bytes, expected: Any
) -> None:
    del name
    assert both(servers, lambda s, u: raw_exchange(s.mqtt_port, packet)) == expected


@pytest.mark.parametrize(
    ("name", "data"),
    [
        ("PUBLISH before CONNECT", frames.publish(p.Publish(b"a/b", b"x"))),
        ("SUBSCRIBE before CONNECT", frames.subscribe(p.Subscribe(1, ((b"a", 0),)))),
        ("PINGREQ before CONNECT", frames.PINGREQ_FRAME),
        ("second CONNECT", connect_packet() + connect_packet()),
        ("SUBSCRIBE with wrong flags", connect_packet() + bytes.fromhex("8006000100016100")),
        ("PUBLISH with a wildcard", connect_packet() + frames.publish(p.Publish(b"a/+", b"x"))),
        ("PUBLISH with QoS 3", connect_packet() + bytes.fromhex("3605000161000100")),
        ("PUBACK of length 3", connect_packet() + bytes.fromhex("4003000100")),
        ("malformed length", connect_packet() + bytes.fromhex("30ffffffff01")),
        ("unknown packet type", connect_packet() + bytes.fromhex("0000")),
        ("empty topic filter", connect_packet() + bytes.fromhex("82050001000000")),
        ("SUBSCRIBE with QoS 3", connect_packet() + bytes.fromhex("8206000100016103")),
        ("packet id 0", connect_packet() + bytes.fromhex("8206000000016101")),
        ("topic with a space", connect_packet() + frames.publish(p.Publish(b"a b", b"x"))),
    ],
)
def test_bad_input_closes(servers: list[MQTTServer], name: str, data: bytes) -> None:
    """Bad input: the connection is closed, with nothing sent but the CONNACK it earned."""
    del name
    packets, closed = both(servers, lambda s, u: raw_exchange(s.mqtt_port, data))
    assert closed
    assert all(isinstance(x, p.ConnAck) for x in packets)


def test_ping_and_disconnect(servers: list[MQTTServer]) -> None:
    data = connect_packet() + frames.PINGREQ_FRAME + frames.DISCONNECT_FRAME
    packets, closed = both(servers, lambda s, u: raw_exchange(s.mqtt_port, data))
    assert packets == [p.ConnAck(False, 0), p.PingResp()] and closed


def test_bad_password_is_not_authorized(tmp_path: Path) -> None:
    require_nats_server()
    users = 'authorization { users = [ { user: "u", password: "good" } ] }'
    with mqtt_servers(tmp_path, extra=users) as pair:
        for password, code in (("bad", p.RC_NOT_AUTHORIZED), ("good", 0)):

            def attempt(s: MQTTServer, u: str, password: str = password) -> Any:
                data = connect_packet(username="u", password=password.encode())
                return raw_exchange(s.mqtt_port, data)

            packets, closed = both(pair, attempt)
            assert packets == [p.ConnAck(False, code)]
            assert closed == bool(code)


# -- delivery --------------------------------------------------------------------------------------


def test_qos_matrix(servers: list[MQTTServer]) -> None:
    """Every publish QoS to every subscription QoS: delivered at the lower of the two."""

    def scenario(s: MQTTServer, u: str) -> Any:
        subs = {qos: Client(s.mqtt_port, f"{u}-sub{qos}") for qos in range(3)}
        for qos, client in subs.items():
            assert client.subscribe((f"{u}/qos/#", qos)) == [qos]
        pub = Client(s.mqtt_port, f"{u}-pub")
        for qos in range(3):
            pub.publish(f"{u}/qos/{qos}", b"m%d" % qos, qos)
        seen = {}
        for qos, client in subs.items():
            got = client.wait_messages(3)
            seen[qos] = sorted((m.topic, m.payload, m.qos, m.retain, m.dup) for m in got)
        for client in (*subs.values(), pub):
            client.disconnect()
        return {qos: [(t.split("/", 1)[1], *rest) for t, *rest in v] for qos, v in seen.items()}

    seen = both(servers, scenario)
    assert [m[2] for m in seen[1]] == [0, 1, 1]


def test_topics_to_nats_subjects(servers: list[MQTTServer]) -> None:
    """MQTT topics as NATS subjects, with the Nmqtt-Pub header."""
    topics = ["a/b/c", "/lead", "trail/", "dou//ble", "dot.ted", "single"]

    def scenario(s: MQTTServer, u: str) -> Any:
        nats = NATSClient(s.nats_port)
        nats.sub(">")
        pub = Client(s.mqtt_port, f"{u}-pub")
        for i, topic in enumerate(topics):
            pub.publish(topic, b"%d" % i, i % 2)
        got: list[Any] = []
        while len(got) < len(topics):
            msg = nats.read_msg()
            if not msg.subject.startswith("$"):  # nats-server's own JetStream traffic
                got.append(msg)
        pub.disconnect()
        nats.close()
        return sorted((m.subject, m.header, m.payload) for m in got)

    got = both(servers, scenario)
    assert ("a.b.c", b"NATS/1.0\r\nNmqtt-Pub:0\r\n\r\n", b"0") in got


def test_nats_subjects_to_topics(servers: list[MQTTServer]) -> None:
    """NATS subjects as MQTT topics, at QoS 0; a NATS message whose header claims QoS 1 is not
    delivered to a QoS 1 subscription by nats-server (that goes through its stream)."""
    subjects = ["x.from.nats", "x./.lead", "x.dot//ted", "x"]

    def scenario(s: MQTTServer, u: str) -> Any:
        sub = Client(s.mqtt_port, f"{u}-sub")
        assert sub.subscribe(("x/#", 1)) == [1]
        nats = NATSClient(s.nats_port)
        for subject in subjects:
            nats.pub(subject, subject.encode())
        nats.pub("x.q1", b"with header", b"NATS/1.0\r\nNmqtt-Pub:1\r\n\r\n")
        nats.pub("x.q0", b"with header", b"NATS/1.0\r\nNmqtt-Pub:0\r\n\r\n")
        nats.pub("x.last", b"")
        wait_for(lambda: any(m.topic == "x/last" for m in sub.messages()), "the last message")
        got = sub.messages()
        sub.disconnect()
        nats.close()
        return sorted((m.topic, m.payload, m.qos) for m in got)

    got = both(servers, scenario)
    assert ("x/from/nats", b"x.from.nats", 0) in got


def test_wildcard_filters(servers: list[MQTTServer]) -> None:
    def scenario(s: MQTTServer, u: str) -> Any:
        sub = Client(s.mqtt_port, f"{u}-sub")
        granted = sub.subscribe(("w/+/c", 0), ("v/#", 0), ("#", 0))
        pub = Client(s.mqtt_port, f"{u}-pub")
        for topic in ("w/b/c", "w/b/d", "v", "v/1/2", "$SYS/x", "w/b/c/d"):
            pub.publish(topic, topic.encode(), 1)
        nats = NATSClient(s.nats_port)
        nats.pub("$dollar.x", b"from nats")
        marker = "z/done"
        pub.publish(marker, b"", 1)
        wait_for(lambda: any(m.topic == marker for m in sub.messages()), "marker")
        got = sorted((m.topic, m.payload) for m in sub.messages())
        sub.disconnect()
        pub.disconnect()
        nats.close()
        return granted, got

    granted, got = both(servers, scenario)
    assert granted == [0, 0, 0]
    topics = [topic for topic, _ in got]
    assert "w/b/c" in topics and "v" in topics  # `v/#` matches its parent level too
    assert "$SYS/x" not in topics  # `#` never matches a topic starting with `$`


def test_unsubscribe(servers: list[MQTTServer]) -> None:
    """nats-server leaves the parent level of a `foo/#` filter subscribed (its processUnsub
    reads the sid "foo fwc" as a sid and a count, and fails): `foo` still arrives."""

    def scenario(s: MQTTServer, u: str) -> Any:
        sub = Client(s.mqtt_port, f"{u}-sub")
        sub.subscribe((f"{u}/a/#", 0), (f"{u}/b", 0))
        sub.unsubscribe(f"{u}/a/#")
        pub = Client(s.mqtt_port, f"{u}-pub")
        pub.publish(f"{u}/a", b"1", 1)
        pub.publish(f"{u}/a/x", b"2", 1)
        pub.publish(f"{u}/b", b"3", 1)
        wait_for(lambda: any(m.payload == b"3" for m in sub.messages()), "the last message")
        got = sub.messages()
        sub.disconnect()
        pub.disconnect()
        return [(m.topic.split("/", 1)[1], m.payload) for m in got]

    assert both(servers, scenario) == [("a", b"1"), ("b", b"3")]


# -- retained messages, wills, sessions -----------------------------------------------------------


def test_retained(servers: list[MQTTServer]) -> None:
    def scenario(s: MQTTServer, u: str) -> Any:
        pub = Client(s.mqtt_port, f"{u}-pub")
        pub.publish(f"{u}/r/1", b"one", 1, retain=True)
        pub.publish(f"{u}/r/2", b"two", 0, retain=True)
        pub.publish(f"{u}/r/3", b"three", 1, retain=True)
        pub.publish(f"{u}/r/3", b"", 1, retain=True)  # clears it
        early = Client(s.mqtt_port, f"{u}-early")
        early.subscribe((f"{u}/r/#", 1))
        first = early.wait_messages(2)
        pub.publish(f"{u}/r/1", b"live", 1, retain=True)
        live = early.wait_messages(3)[2]
        late = Client(s.mqtt_port, f"{u}-late")
        late.subscribe((f"{u}/r/+", 0))
        second = late.wait_messages(2)
        for c in (pub, early, late):
            c.disconnect()

        def shown(ms: list[Any]) -> list[Any]:
            return sorted((m.topic.split("/", 1)[1], m.payload, m.qos, m.retain) for m in ms)

        return shown(first), shown([live]), shown(second)

    first, live, second = both(servers, scenario)
    assert first == [("r/1", b"one", 1, True), ("r/2", b"two", 0, True)]
    assert live == [("r/1", b"live", 1, False)]
    assert second == [("r/1", b"live", 0, True), ("r/2", b"two", 0, True)]


def test_will(servers: list[MQTTServer]) -> None:
    def scenario(s: MQTTServer, u: str) -> Any:
        watcher = Client(s.mqtt_port, f"{u}-watch")
        watcher.subscribe((f"{u}/will/#", 1))
        polite = Client(s.mqtt_port, f"{u}-polite", will=(f"{u}/will/polite", b"bye", 1, False))
        polite.disconnect()
        rude = Client(s.mqtt_port, f"{u}-rude", will=(f"{u}/will/rude", b"gone", 1, True))
        rude.drop()
        got = watcher.wait_messages(1)
        late = Client(s.mqtt_port, f"{u}-late")
        late.subscribe((f"{u}/will/#", 0))
        retained = late.wait_messages(1)
        watcher.disconnect()
        late.disconnect()
        return [(m.topic.split("/", 1)[1], m.payload, m.qos, m.retain) for m in got + retained]

    assert both(servers, scenario) == [
        ("will/rude", b"gone", 1, False),
        ("will/rude", b"gone", 0, True),
    ]


def test_persistent_session(servers: list[MQTTServer]) -> None:
    """Clean session 0: the subscription outlives the connection (CONNACK session present)."""

    def scenario(s: MQTTServer, u: str) -> Any:
        first = Client(s.mqtt_port, f"{u}-keep", clean=False)
        first.subscribe((f"{u}/keep", 0))
        first.disconnect()
        again = Client(s.mqtt_port, f"{u}-keep", clean=False)
        pub = Client(s.mqtt_port, f"{u}-pub")
        pub.publish(f"{u}/keep", b"still here", 1)
        got = again.wait_messages(1)
        again.disconnect()
        clean = Client(s.mqtt_port, f"{u}-keep", clean=True)
        clean.disconnect()
        after_clean = Client(s.mqtt_port, f"{u}-keep", clean=False)
        after_clean.disconnect()
        pub.disconnect()
        return (
            first.connack,
            again.connack,
            clean.connack,
            after_clean.connack,
            [(m.payload, m.qos) for m in got],
        )

    assert both(servers, scenario) == (
        (False, 0),
        (True, 0),
        (False, 0),
        (False, 0),
        [(b"still here", 0)],
    )


def test_persistent_session_keeps_qos1_messages(servers: list[MQTTServer]) -> None:
    """While a clean-session-0 client is away, QoS 1 messages wait for it; QoS 0 ones do not."""

    def scenario(s: MQTTServer, u: str) -> Any:
        away = Client(s.mqtt_port, f"{u}-away", clean=False)
        away.subscribe((f"{u}/q/+", 1))
        away.disconnect()
        pub = Client(s.mqtt_port, f"{u}-pub")
        pub.publish(f"{u}/q/zero", b"0", 0)
        pub.publish(f"{u}/q/one", b"1", 1)
        pub.publish(f"{u}/q/two", b"2", 2)
        back = Client(s.mqtt_port, f"{u}-away", clean=False)
        got = back.wait_messages(2)
        pub.publish(f"{u}/q/last", b"3", 0)
        wait_for(lambda: any(m.payload == b"3" for m in back.messages()), "the last message")
        back.disconnect()
        pub.disconnect()
        got = back.messages()
        return back.connack, sorted((m.topic.split("/", 1)[1], m.payload, m.qos) for m in got)

    assert both(servers, scenario) == (
        (True, 0),
        [("q/last", b"3", 0), ("q/one", b"1", 1), ("q/two", b"2", 1)],
    )


def test_same_client_id_takes_over(servers: list[MQTTServer]) -> None:
    def scenario(s: MQTTServer, u: str) -> Any:
        first = Client(s.mqtt_port, f"{u}-dup")
        second = Client(s.mqtt_port, f"{u}-dup")
        wait_for(first.disconnected.is_set, "the first connection closed")
        result = second.connack, second.disconnected.is_set()
        first.paho.loop_stop()
        second.disconnect()
        return result

    assert both(servers, scenario) == ((False, 0), False)


def test_keep_alive_closes_a_silent_client(servers: list[MQTTServer]) -> None:
    def scenario(s: MQTTServer, u: str) -> Any:
        raw = RawMQTT(s.mqtt_port)
        raw.send(connect_packet(f"{u}-silent", keep_alive=1))
        packets = raw.read_until_closed(timeout=8)
        raw.close()
        return packets, raw.closed

    assert both(servers, scenario) == ([p.ConnAck(False, 0)], True)


# -- monitoring -----------------------------------------------------------------------------------


def test_monitoring(tmp_path: Path) -> None:
    """/varz's mqtt block, and /connz?mqtt_client= showing the client with its id."""
    require_nats_server()
    import json
    import urllib.request

    def scenario(s: MQTTServer, u: str) -> Any:
        http_port = int(s.conf.read_text().split("http_port: ")[1].split()[0])
        client = Client(s.mqtt_port, f"{u}-watched")
        client.subscribe(("m/#", 0))

        def get(path: str) -> Any:
            with urllib.request.urlopen(f"http://127.0.0.1:{http_port}{path}", timeout=5) as r:
                return json.load(r)

        mqtt = get("/varz")["mqtt"]
        mqtt.pop("port")
        conns = get(f"/connz?mqtt_client={u}-watched&subs=1")["connections"]
        client.disconnect()
        keep = ("kind", "type", "ip", "subscriptions", "subscriptions_list", "mqtt_client")
        for c in conns:  # Go map order in nats-server
            c["subscriptions_list"] = sorted(c.get("subscriptions_list", []))
        return mqtt, [{k: c.get(k) for k in keep} for c in conns]

    with mqtt_servers(tmp_path, extra="http_port: {free_port}") as pair:
        mqtt, conns = both(pair, scenario)
    assert mqtt == {"host": "0.0.0.0", "tls_timeout": 2}
    assert conns[0]["type"] == "mqtt" and conns[0]["mqtt_client"].endswith("-watched")


def test_sessions_and_retained_survive_a_restart(tmp_path: Path) -> None:
    """Kept in JetStream: after a restart on the same store, a clean-session-0 client finds its
    session (and subscription) again, and a new subscriber gets the retained message."""
    require_nats_server()

    def before(s: MQTTServer, u: str) -> Any:
        keeper = Client(s.mqtt_port, "keeper", clean=False)
        keeper.subscribe(("kept/#", 1))
        keeper.disconnect()
        pub = Client(s.mqtt_port, "pub")
        pub.publish("ret/a", b"retained", 1, retain=True)
        pub.disconnect()
        s.restart()
        wait_for(lambda: accepts(s.mqtt_port), "the restarted MQTT listener")
        return None

    def after(s: MQTTServer, u: str) -> Any:
        keeper = Client(s.mqtt_port, "keeper", clean=False)
        late = Client(s.mqtt_port, "late")
        late.subscribe(("ret/#", 0))
        retained = late.wait_messages(1)
        pub = Client(s.mqtt_port, "pub")
        pub.publish("kept/x", b"live", 1)
        got = keeper.wait_messages(1)
        for c in (keeper, late, pub):
            c.disconnect()
        return (
            keeper.connack,
            [(m.topic, m.payload, m.qos, m.retain) for m in retained],
            [(m.topic, m.payload, m.qos) for m in got],
        )

    with mqtt_servers(tmp_path) as pair:
        both(pair, before)
        assert both(pair, after) == (
            (True, 0),
            [("ret/a", b"retained", 0, True)],
            [("kept/x", b"live", 1)],
        )


def test_qos2_delivered_once_despite_dup(servers: list[MQTTServer]) -> None:
    """A QoS 2 PUBLISH sent again with DUP before its PUBREL is delivered once, when released;
    the packet id is free again after PUBCOMP."""

    def scenario(s: MQTTServer, u: str) -> Any:
        sub = Client(s.mqtt_port, f"{u}-sub")
        sub.subscribe((f"{u}/q2", 2))
        raw = RawMQTT(s.mqtt_port)
        raw.send(connect_packet(f"{u}-raw"))
        answers = raw.read_packets(1)
        first = p.Publish(f"{u}/q2".encode(), b"once", 2, packet_id=5)
        again = p.Publish(f"{u}/q2".encode(), b"once", 2, dup=True, packet_id=5)
        raw.send(frames.publish(first) + frames.publish(again))
        answers += raw.read_packets(2)
        early = list(sub.messages())
        raw.send(frames.pub_response(p.PUBREL, 5))
        answers += raw.read_packets(1)
        raw.send(frames.publish(p.Publish(f"{u}/q2".encode(), b"reused", 2, packet_id=5)))
        answers += raw.read_packets(1)
        raw.send(frames.pub_response(p.PUBREL, 5))
        answers += raw.read_packets(1)
        got = sub.wait_messages(2)
        raw.close()
        sub.disconnect()
        return answers, early, [(m.payload, m.qos, m.dup) for m in got]

    answers, early, got = both(servers, scenario)
    assert answers == [
        p.ConnAck(False, 0),
        p.PubRec(5),
        p.PubRec(5),
        p.PubComp(5),
        p.PubRec(5),
        p.PubComp(5),
    ]
    assert early == [] and got == [(b"once", 2, False), (b"reused", 2, False)]


def test_permissions(tmp_path: Path) -> None:
    """A denied publish is dropped (QoS 1 still acknowledged), a denied filter fails in the
    SUBACK; the connection stays."""
    require_nats_server()
    users = (
        'authorization { users = [ { user: "u", password: "p", permissions: {'
        ' publish: { deny: ["secret.>"] }, subscribe: { deny: ["hidden.>"] } } } ] }'
    )

    def scenario(s: MQTTServer, u: str) -> Any:
        c = Client(s.mqtt_port, f"{u}-perm", username="u", password="p")
        granted = c.subscribe(("hidden/#", 1), ("secret/#", 1), ("open/#", 1))
        c.publish("secret/x", b"no", 1)
        c.publish("open/x", b"yes", 1)
        got = c.wait_messages(1)
        c.disconnect()
        return granted, [(m.topic, m.payload) for m in got]

    with mqtt_servers(tmp_path, extra=users) as pair:
        assert both(pair, scenario) == ([0x80, 1, 1], [("open/x", b"yes")])


def test_jetstream_streams(servers: list[MQTTServer]) -> None:
    """After an MQTT connection, the account has nats-server's MQTT streams."""
    import json

    def scenario(s: MQTTServer, u: str) -> Any:
        Client(s.mqtt_port, f"{u}-any").disconnect()
        nats = NATSClient(s.nats_port)
        nats.sub("_INBOX.streams", 9)
        nats.send("PUB $JS.API.STREAM.NAMES _INBOX.streams 0\r\n\r\n")
        reply = json.loads(nats.read_msg().payload)
        nats.close()
        return sorted(name for name in reply["streams"] if name.startswith("$MQTT"))

    assert both(servers, scenario) == [
        "$MQTT_msgs",
        "$MQTT_out",
        "$MQTT_qos2in",
        "$MQTT_rmsgs",
        "$MQTT_sess",
    ]


def test_qos2_options(tmp_path: Path) -> None:
    """reject_qos2_publish closes a client publishing at QoS 2; downgrade_qos2_subscribe grants
    QoS 1 for QoS 2 filters."""
    require_nats_server()
    options = "reject_qos2_publish: true\ndowngrade_qos2_subscribe: true"

    def scenario(s: MQTTServer, u: str) -> Any:
        c = Client(s.mqtt_port, f"{u}-q2")
        granted = c.subscribe(("q2/#", 2))
        c.disconnect()
        data = connect_packet(f"{u}-raw") + frames.publish(p.Publish(b"q2/x", b"x", 2, packet_id=1))
        return granted, raw_exchange(s.mqtt_port, data)

    with mqtt_servers(tmp_path, mqtt_extra=options) as pair:
        assert both(pair, scenario) == ([1], ([p.ConnAck(False, 0)], True))
