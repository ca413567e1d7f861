"""QoS 1/2 state kept in JetStream, side by side with nats-server: messages waiting for a
persistent session in `$MQTT_msgs` (one durable consumer per QoS 1/2 subscription), QoS 2
messages waiting for PUBREL in `$MQTT_qos2in`, PUBRELs waiting for PUBCOMP in `$MQTT_out`, and
redeliveries (DUP) coming from the consumers, also across restarts of both servers on their
stores and a kill -9.
"""

from __future__ import annotations

import itertools
import json
import signal
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from pynatsd.mqtt import frames
from pynatsd.mqtt import packets as p
from pynatsd.mqtt.store import client_id_hash
from support.mqtt import (
    Client,
    MQTTServer,
    NATSClient,
    RawMQTT,
    accepts,
    mqtt_servers,
    wait_for,
)
from support.natsserver import require_nats_server

pytestmark = pytest.mark.timeout(180)

_ids = itertools.count()
# Restored pending deliveries go again when their ack_wait has passed (none at once).
ACK_WAIT = 'ack_wait: "2s"'


def both(servers: list[MQTTServer], scenario: Callable[[MQTTServer, str], Any]) -> Any:
    unique = f"p{next(_ids)}"
    results = {s.name: scenario(s, unique) for s in servers}
    assert results["pynatsd"] == results["nats-server"], results
    return results["pynatsd"]


def restart(s: MQTTServer, kill: bool = False) -> None:
    """Stop the server (SIGTERM, or SIGKILL when `kill`) and start it on the same store."""
    if kill:
        s.process.proc.send_signal(signal.SIGKILL)
        s.process.proc.wait(timeout=10)
    s.restart()
    wait_for(lambda: accepts(s.mqtt_port), "the restarted MQTT listener")


def raw_session(port: int, client_id: str) -> tuple[RawMQTT, p.ConnAck]:
    """A raw MQTT 3.1.1 connection with clean session 0 (it acknowledges nothing by itself)."""
    raw = RawMQTT(port)
    connect = p.Connect(
        protocol_name=b"MQTT",
        protocol_level=4,
        clean_start=False,
        keep_alive=60,
        client_id=client_id,
    )
    raw.send(frames.connect(connect))
    connack = raw.read_packets(1)[0]
    assert isinstance(connack, p.ConnAck)
    return raw, connack


def subscribe(raw: RawMQTT, topic_filter: str, qos: int) -> p.Packet:
    raw.send(frames.subscribe(p.Subscribe(1, ((topic_filter.encode(), qos),))))
    return raw.read_packets(1)[0]


def published_to_raw(s: MQTTServer, u: str, qos: int, payload: bytes) -> tuple[RawMQTT, p.Packet]:
    """A raw persistent session subscribed to `<u>/t` at `qos`, and `payload` published there
    at `qos` by another client: the raw connection and its SUBACK."""
    raw, _ = raw_session(s.mqtt_port, f"{u}-sub")
    suback = subscribe(raw, f"{u}/t", qos)
    pub = Client(s.mqtt_port, f"{u}-pub")
    pub.publish(f"{u}/t", payload, qos)
    pub.disconnect()
    return raw, suback


def publishes(packets: list[p.Packet]) -> list[tuple[bytes, bytes, int, bool]]:
    return [(x.topic, x.payload, x.qos, x.dup) for x in packets if isinstance(x, p.Publish)]


def test_messages_wait_for_a_session_across_restarts(tmp_path: Path) -> None:
    """QoS 1 and 2 messages published while a persistent session is away wait in
    `$MQTT_msgs` through two restarts of the server; QoS 0 ones are lost; nothing is DUP."""
    require_nats_server()

    def scenario(s: MQTTServer, u: str) -> Any:
        away = Client(s.mqtt_port, f"{u}-away", clean=False)
        away.subscribe((f"{u}/one/#", 1), (f"{u}/two", 2))
        away.disconnect()
        restart(s)
        pub = Client(s.mqtt_port, f"{u}-pub")
        pub.publish(f"{u}/one/a", b"zero", 0)
        pub.publish(f"{u}/one/a", b"first", 1)
        pub.publish(f"{u}/one", b"second", 2)
        pub.publish(f"{u}/two", b"third", 2)
        pub.publish(f"{u}/two", b"fourth", 1)
        pub.disconnect()
        restart(s)
        back = Client(s.mqtt_port, f"{u}-away", clean=False)
        got = back.wait_messages(4)
        back.disconnect()
        seen = sorted((m.topic.split("/", 1)[1], m.payload, m.qos, m.dup) for m in got)
        return back.connack, seen

    with mqtt_servers(tmp_path) as pair:
        connack, got = both(pair, scenario)
    assert connack == (True, 0)
    assert got == sorted(
        [
            ("one/a", b"first", 1, False),
            ("one", b"second", 1, False),
            ("two", b"third", 2, False),
            ("two", b"fourth", 1, False),
        ]
    )


@pytest.mark.parametrize("kill", [False, True], ids=["restart", "kill-9"])
def test_unacknowledged_message_is_redelivered_after_restart(tmp_path: Path, kill: bool) -> None:
    """A QoS 1 message sent and not acknowledged (no PUBACK) before the server stops, or is
    killed, comes again after the restart to the reconnecting session (once its ack_wait has
    passed, as the consumer's pending state says), with DUP."""
    require_nats_server()

    def scenario(s: MQTTServer, u: str) -> Any:
        raw, suback = published_to_raw(s, u, 1, b"unacked")
        # Before a kill -9, the redelivery too (DUP, after ack_wait): the consumer's state
        # is on disk by then in both servers (each writes it a few milliseconds after a
        # delivery; a crash within that window gives at-least-once without the DUP).
        first = raw.read_packets(2 if kill else 1)
        raw.close()
        restart(s, kill)
        raw, connack = raw_session(s.mqtt_port, f"{u}-sub")
        again = raw.read_packets(1)
        for x in again:
            if isinstance(x, p.Publish):
                raw.send(frames.pub_response(p.PUBACK, x.packet_id))
        raw.close()
        # Acknowledged now: a third connection gets nothing more.
        raw, _ = raw_session(s.mqtt_port, f"{u}-sub")
        raw.send(frames.PINGREQ_FRAME)
        rest = raw.read_packets(1)
        raw.close()
        return suback, publishes(first), connack, publishes(again), rest

    with mqtt_servers(tmp_path, mqtt_extra=ACK_WAIT) as pair:
        suback, first, connack, again, rest = both(pair, scenario)
    assert suback == p.SubAck(1, (1,))
    sent = [(b"unacked", 1, False), (b"unacked", 1, True)]
    assert [x[1:] for x in first] == sent[: 2 if kill else 1]
    assert connack == p.ConnAck(True, 0)
    assert [x[1:] for x in again] == [(b"unacked", 1, True)]
    assert rest == [p.PingResp()]


def test_redelivery_after_ack_wait(tmp_path: Path) -> None:
    """Not acknowledged within ack_wait: the consumer delivers it again, same packet id, DUP."""
    require_nats_server()

    def scenario(s: MQTTServer, u: str) -> Any:
        raw, _ = published_to_raw(s, u, 1, b"late")
        packets = raw.read_packets(2)
        raw.send(frames.pub_response(p.PUBACK, packets[-1].packet_id))  # type: ignore[attr-defined]
        raw.send(frames.PINGREQ_FRAME)
        packets += raw.read_packets(1)
        raw.close()
        ids = {x.packet_id for x in packets if isinstance(x, p.Publish)}
        return publishes(packets), len(ids), packets[-1]

    with mqtt_servers(tmp_path, mqtt_extra=ACK_WAIT) as pair:
        got, ids, last = both(pair, scenario)
    assert [x[1:] for x in got] == [(b"late", 1, False), (b"late", 1, True)]
    assert ids == 1 and last == p.PingResp()


def test_qos2_incoming_waits_for_pubrel_across_a_restart(tmp_path: Path) -> None:
    """A QoS 2 message received (PUBREC) and not released is kept in `$MQTT_qos2in`: after a
    restart the PUBREL releases it, once."""
    require_nats_server()

    def scenario(s: MQTTServer, u: str) -> Any:
        watcher = Client(s.mqtt_port, f"{u}-watch", clean=False)
        watcher.subscribe((f"{u}/q2", 2))
        watcher.disconnect()
        raw, _ = raw_session(s.mqtt_port, f"{u}-pub")
        raw.send(frames.publish(p.Publish(f"{u}/q2".encode(), b"held", 2, packet_id=7)))
        answers = raw.read_packets(1)
        raw.close()
        restart(s)
        raw, _ = raw_session(s.mqtt_port, f"{u}-pub")
        raw.send(frames.pub_response(p.PUBREL, 7))
        answers += raw.read_packets(1)
        raw.send(frames.pub_response(p.PUBREL, 7))  # again: nothing left to release
        answers += raw.read_packets(1)
        raw.close()
        watcher = Client(s.mqtt_port, f"{u}-watch", clean=False)
        got = watcher.wait_messages(1)
        watcher.paho.publish(f"{u}/q2", b"end", 2).wait_for_publish(10)
        got = watcher.wait_messages(2)
        watcher.disconnect()
        return answers, [(m.payload, m.qos) for m in got]

    with mqtt_servers(tmp_path) as pair:
        answers, got = both(pair, scenario)
    assert answers == [p.PubRec(7), p.PubComp(7), p.PubComp(7)]
    assert got == [(b"held", 2), (b"end", 2)]


def test_pubrel_waits_for_pubcomp_across_a_restart(tmp_path: Path) -> None:
    """QoS 2 to a subscriber: after its PUBREC the PUBREL is kept in `$MQTT_out` until
    PUBCOMP; after a restart the consumer sends it again (after ack_wait) to the reconnecting
    session, not the message."""
    require_nats_server()

    def scenario(s: MQTTServer, u: str) -> Any:
        raw, _ = published_to_raw(s, u, 2, b"two")
        packets = raw.read_packets(1)
        packet_id = packets[0].packet_id  # type: ignore[attr-defined]
        raw.send(frames.pub_response(p.PUBREC, packet_id))
        packets += raw.read_packets(1)
        raw.close()
        restart(s)
        raw, connack = raw_session(s.mqtt_port, f"{u}-sub")
        again = raw.read_packets(1)
        raw.send(frames.pub_response(p.PUBCOMP, packet_id))
        raw.send(frames.PINGREQ_FRAME)
        again += raw.read_packets(1)
        raw.close()
        shape = [type(x).__name__ for x in packets + again]
        same_id = [getattr(x, "packet_id", packet_id) == packet_id for x in packets + again]
        return publishes(packets), shape, same_id, connack

    with mqtt_servers(tmp_path, mqtt_extra=ACK_WAIT) as pair:
        got, shape, same_id, connack = both(pair, scenario)
    assert [x[1:] for x in got] == [(b"two", 2, False)]
    assert shape == ["Publish", "PubRel", "PubRel", "PingResp"]
    assert all(same_id) and connack == p.ConnAck(True, 0)


def js_api(s: MQTTServer, subject: str) -> Any:
    """A JetStream API request over NATS and its decoded reply."""
    nats = NATSClient(s.nats_port)
    nats.sub("_INBOX.mqtt", 9)
    nats.send(f"PUB {subject} _INBOX.mqtt 0\r\n\r\n")
    reply = json.loads(nats.read_msg().payload)
    nats.close()
    return reply


def consumers_of(s: MQTTServer, stream: str) -> list[dict[str, Any]]:
    return sorted(
        (c["config"] for c in js_api(s, f"$JS.API.CONSUMER.LIST.{stream}")["consumers"]),
        key=lambda c: c["filter_subject"],
    )


def consumer_shape(config: dict[str, Any], id_hash: str) -> tuple[Any, ...]:
    """What nats-server's MQTT consumers have in common, names reduced to their form."""
    durable = config["durable_name"]
    deliver = config["deliver_subject"]
    prefix, _, token = durable.partition("_")
    return (
        (prefix == id_hash and len(token) == 22) or durable == f"$MQTT_PUBREL_{id_hash}",
        deliver.rsplit(".", 1)[0] if prefix == id_hash else deliver,
        config["filter_subject"],
        config["ack_policy"],
        config["deliver_policy"],
        config["ack_wait"],
        config["max_ack_pending"],
    )


def test_consumers_of_sessions(tmp_path: Path) -> None:
    """One durable consumer per QoS 1/2 subscription (sid: `a/#` has two) on `$MQTT_msgs`, a
    PUBREL consumer for a session with QoS 2; an unsubscribed filter's goes, a persistent
    session's stay while it is away, a clean session's go when it ends; a message nobody
    subscribes to at QoS 1/2 is not kept (interest retention)."""
    require_nats_server()

    def scenario(s: MQTTServer, u: str) -> Any:
        id_hash = client_id_hash(f"{u}-kept")
        kept = Client(s.mqtt_port, f"{u}-kept", clean=False)
        kept.subscribe((f"{u}/a/#", 1), (f"{u}/b", 2), (f"{u}/c", 0), (f"{u}/d", 1))
        kept.unsubscribe(f"{u}/d")
        kept.disconnect()
        clean = Client(s.mqtt_port, f"{u}-clean")
        clean.subscribe((f"{u}/e", 1))
        while_clean = len(consumers_of(s, "$MQTT_msgs"))
        clean.disconnect()
        wait_for(lambda: len(consumers_of(s, "$MQTT_msgs")) == while_clean - 1, "clean's gone")
        msgs = [consumer_shape(c, id_hash) for c in consumers_of(s, "$MQTT_msgs")]
        out = [consumer_shape(c, id_hash) for c in consumers_of(s, "$MQTT_out")]
        pub = Client(s.mqtt_port, f"{u}-pub")
        pub.publish(f"{u}/nobody", b"x", 1)
        pub.publish(f"{u}/a/x", b"y", 1)
        pub.disconnect()
        stored = js_api(s, "$JS.API.STREAM.INFO.$MQTT_msgs")["state"]["messages"]
        Client(s.mqtt_port, f"{u}-kept").disconnect()  # clean session: all of it goes
        wait_for(lambda: not consumers_of(s, "$MQTT_msgs"), "the consumers deleted")
        return msgs, out, stored, len(consumers_of(s, "$MQTT_out"))

    with mqtt_servers(tmp_path) as pair:
        msgs, out, stored, out_left = both(pair, scenario)
    assert [m[2].split(".", 3)[-1] for m in msgs] == ["a", "a.>", "b"]
    assert all(m[0] and m[1] == "$MQTT.sub" and m[3:5] == ("explicit", "new") for m in msgs)
    assert msgs[0][5:] == (30_000_000_000, 1024)
    assert len(out) == 1 and out[0][0] and out[0][1].startswith("$MQTT.deliver.pubrel.")
    assert (stored, out_left) == (1, 0)
