"""What MQTT keeps in JetStream for one account: sessions and retained messages.

Corresponds to nats-server's account session manager streams (`mqttCreateAccountSessionManager`,
`mqttSession.save`, `mqttEncodeRetainedMessage` in server/mqtt.go): on the first MQTT connection
of an account the streams `$MQTT_sess`, `$MQTT_msgs`, `$MQTT_rmsgs`, `$MQTT_qos2in` and
`$MQTT_out` exist (made if missing); a persistent session is the last message on
`$MQTT.sess.<hash of the client id>` (JSON as nats-server's mqttPersistedSession: origin, id,
clean, subs), a retained message the last on `$MQTT.rmsgs.<subject>` (headers
`Nmqtt-RTopic`, `Nmqtt-RFlags`, `Nmqtt-ROrigin`; the body is the payload). So both survive a
restart on the same store. pynatsd keeps QoS 1/2 messages in flight in memory
(`mqtt.inflight`): `$MQTT_msgs`, `$MQTT_qos2in` and `$MQTT_out` are made for parity only.
"""

from __future__ import annotations

import hashlib
import json
from typing import TYPE_CHECKING

from pynatsd.jetstream import jetstream_of
from pynatsd.jetstream.stream_checks import check_stream_config
from pynatsd.jetstream.stream_config import StreamConfig, set_static_stream_metadata
from pynatsd.mqtt import packets as p

if TYPE_CHECKING:
    from pynatsd.jetstream.manager import AccountJetStream
    from pynatsd.jetstream.stream import Stream
    from pynatsd.server.accounts import Account
    from pynatsd.server.server import Server

SESSIONS = "$MQTT_sess"
SESSIONS_PREFIX = "$MQTT.sess."
RETAINED = "$MQTT_rmsgs"
RETAINED_PREFIX = "$MQTT.rmsgs."

# (name, subjects, retention, one message per subject), as nats-server makes them.
_STREAMS = (
    (SESSIONS, f"{SESSIONS_PREFIX}>", "limits", True),
    ("$MQTT_msgs", "$MQTT.msgs.>", "interest", False),
    (RETAINED, f"{RETAINED_PREFIX}>", "limits", True),
    ("$MQTT_qos2in", "$MQTT.qos2.in.>", "limits", True),
    ("$MQTT_out", "$MQTT.out.>", "interest", False),
)

_DIGITS = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"


def client_id_hash(client_id: str) -> str:
    """nats-server's getHash: eight base-62 characters of the id's SHA-256."""
    digest = hashlib.sha256(client_id.encode()).digest()
    return "".join(_DIGITS[b % 62] for b in digest[:8])


class AccountStore:
    """One account's MQTT streams; without JetStream for the account, nothing is kept."""

    def __init__(self, server: Server, account: Account) -> None:
        self.server = server
        self.account = account
        self.origin = server.options.server_name
        js = jetstream_of(server)
        self._ajs: AccountJetStream | None = None if js is None else js.accounts.get(account.name)
        if self._ajs is not None:
            for name, subject, retention, last_only in _STREAMS:
                if name not in self._ajs.streams:
                    config = StreamConfig(name=name, subjects=[subject], retention=retention)
                    if last_only:
                        config.max_msgs_per_subject = 1
                    config = check_stream_config(config, False, self._ajs.stream_configs())
                    set_static_stream_metadata(config)
                    self._ajs.add_stream(config)

    def _stream(self, name: str) -> Stream | None:
        return None if self._ajs is None else self._ajs.streams.get(name)

    # -- sessions --------------------------------------------------------------------------------

    def load_session(self, client_id: str) -> dict[bytes, int] | None:
        """The subscriptions (NATS subject -> QoS) of a stored session, None when there is
        none."""
        stream = self._stream(SESSIONS)
        if stream is None:
            return None
        stored = stream.store.load_last_msg(SESSIONS_PREFIX + client_id_hash(client_id))
        if stored is None or not stored.data:
            return None
        try:
            record = json.loads(stored.data)
            if record.get("id") != client_id or record.get("clean"):
                return None
            return {subject.encode(): int(qos) for subject, qos in record.get("subs", {}).items()}
        except (ValueError, AttributeError, TypeError):
            return None  # not a session record pynatsd or nats-server wrote

    def save_session(self, client_id: str, subs: dict[bytes, int]) -> None:
        record: dict[str, object] = {"origin": self.origin, "id": client_id}
        if subs:
            record["subs"] = {subject.decode(): qos for subject, qos in subs.items()}
        self._publish(SESSIONS_PREFIX + client_id_hash(client_id), b"", json.dumps(record).encode())

    def delete_session(self, client_id: str) -> None:
        stream = self._stream(SESSIONS)
        if stream is not None:
            stream.purge(subject=SESSIONS_PREFIX + client_id_hash(client_id))

    # -- retained messages -----------------------------------------------------------------------

    def load_retained(self) -> dict[bytes, p.Publish]:
        stream = self._stream(RETAINED)
        if stream is None:
            return {}
        out: dict[bytes, p.Publish] = {}
        for subject in stream.store.subjects_state(f"{RETAINED_PREFIX}>"):
            stored = stream.store.load_last_msg(subject)
            if stored is None:
                continue
            headers = _header_fields(stored.header)
            flags = int(headers.get(b"Nmqtt-RFlags", b"0").lstrip(b"-") or b"0", 16)
            topic = headers.get(b"Nmqtt-RTopic", b"")
            if stored.data and topic:
                key = subject[len(RETAINED_PREFIX) :].encode()
                out[key] = p.Publish(topic, stored.data, (flags >> 1) & 3, True)
        return out

    def store_retained(self, subject: bytes, packet: p.Publish) -> None:
        key = RETAINED_PREFIX + subject.decode("utf-8", "surrogateescape")
        if not packet.payload:
            stream = self._stream(RETAINED)
            if stream is not None:
                stream.purge(subject=key)
            return
        flags = (packet.qos << 1) | 1
        header = b"NATS/1.0\r\nNmqtt-RTopic:%s\r\nNmqtt-RFlags:%x\r\nNmqtt-ROrigin:%s\r\n\r\n" % (
            packet.topic,
            flags,
            self.origin.encode(),
        )
        self._publish(key, header, packet.payload)

    def _publish(self, subject: str, header: bytes, data: bytes) -> None:
        if self._ajs is not None:
            self.server.publish_internal(self.account, subject, "", header, data)


def _header_fields(header: bytes) -> dict[bytes, bytes]:
    fields: dict[bytes, bytes] = {}
    for line in header.split(b"\r\n")[1:]:
        name, sep, value = line.partition(b":")
        if sep:
            fields[name.strip()] = value.strip()
    return fields
