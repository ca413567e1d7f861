"""The NATS header block of a message that came from MQTT.

Corresponds to `mqttNewDeliverableMessage` and `mqttParsePublishNATSHeader` in nats-server's
`server/mqtt.go`: a message an MQTT client publishes reaches NATS subscribers with the header
`Nmqtt-Pub:<qos>` (no space after the colon, as nats-server writes it); a NATS message with such
a header reaches MQTT subscribers at that QoS (else at QoS 0).
"""

from __future__ import annotations

# nats-server's mqttNatsHeader and friends.
PUB_HEADER = b"Nmqtt-Pub"
SUBJECT_HEADER = b"Nmqtt-Subject"
MAPPED_HEADER = b"Nmqtt-Mapped"
RETAINED_TOPIC_HEADER = b"Nmqtt-RTopic"

_HEADERS = tuple(b"NATS/1.0\r\nNmqtt-Pub:%d\r\n\r\n" % qos for qos in range(3))
_NEEDLE = b"\r\nNmqtt-Pub:"


def nats_message(qos: int, payload_size: int) -> tuple[bytes, int]:
    """The header block for a message of `qos`, and the NATS message's whole size (what
    nats-server checks against max_payload)."""
    header = _HEADERS[qos]
    return header, len(header) + payload_size


def message_qos(header: bytes) -> int:
    """The QoS in a header block's `Nmqtt-Pub` (0 when absent or unreadable)."""
    at = header.find(_NEEDLE)
    if at < 0:
        return 0
    value = header[at + len(_NEEDLE) : at + len(_NEEDLE) + 1]
    return int(value) if value in (b"1", b"2") else 0
