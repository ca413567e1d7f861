"""Packet ids of QoS 1/2 deliveries from JetStream consumers (mqtt.inflight), as nats-server's
trackPublish / untrackPublish / trackAsPubRel hand them out."""

from __future__ import annotations

from pynatsd.mqtt.inflight import InFlight, ack_reply_info


def ack(seq: int, count: int = 1, durable: str = "d") -> bytes:
    return f"$JS.ACK.$MQTT_msgs.{durable}.{count}.{seq}.{seq}.1700000000000000000.0".encode()


def test_ack_reply_info_reads_both_forms() -> None:
    assert ack_reply_info(ack(7, 3)) == (7, 3)
    domain = b"$JS.ACK.hub.ACCHASH.$MQTT_msgs.d.2.9.4.1700000000000000000.0.tok"
    assert ack_reply_info(domain) == (9, 2)
    assert ack_reply_info(b"not.an.ack") == (0, 0)


def test_a_redelivery_keeps_its_packet_id_and_is_dup() -> None:
    inflight = InFlight(10)
    first, dup = inflight.track_stored("d", ack(1))
    assert (first, dup) == (1, False)
    assert inflight.track_stored("d", ack(2)) == (2, False)
    assert inflight.track_stored("d", ack(1, 2)) == (first, True)
    assert inflight.acked(first) == ack(1, 2)  # the latest delivery's ack subject
    assert inflight.acked(first) == b""  # once
    # Another consumer's sequence 1 is another message.
    assert inflight.track_stored("e", ack(1)) == (3, False)


def test_max_pending_leaves_the_rest_to_the_consumer() -> None:
    inflight = InFlight(2)
    assert inflight.track_stored("d", ack(1))[0] == 1
    assert inflight.track_stored("d", ack(2))[0] == 2
    assert inflight.track_stored("d", ack(3)) == (0, False)
    inflight.acked(1)
    assert inflight.track_stored("d", ack(3, 2)) == (3, True)


def test_qos2_pubrel_holds_the_packet_id_until_pubcomp() -> None:
    inflight = InFlight(10)
    packet_id, _ = inflight.track_stored("d", ack(1))
    assert inflight.received(packet_id) == ack(1)  # PUBREC: acknowledge the message
    assert inflight.track_stored("d", ack(1, 2)) == (2, True)  # not the PUBREL's id
    inflight.pubrel[packet_id] = b"$JS.ACK.$MQTT_out.p.1.1.1.1.0"
    assert inflight.acked(packet_id) == b"$JS.ACK.$MQTT_out.p.1.1.1.1.0"  # PUBCOMP
    assert packet_id not in inflight.pubrel


def test_forget_frees_a_deleted_consumers_ids() -> None:
    inflight = InFlight(1)
    inflight.track_stored("d", ack(1))
    inflight.forget("d")
    assert inflight.pending == {}
    assert inflight.track_stored("e", ack(1))[0] == 2
