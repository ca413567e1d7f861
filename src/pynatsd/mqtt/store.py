"""What MQTT keeps in JetStream for one account: sessions and retained messages.

Corresponds to nats-server's account session manager streams (`mqttCreateAccountSessionManager`,
`mqttSession.save`, `mqttEncodeRetainedMessage` in server/mqtt.go): on the first MQTT connection
of an account the streams `$MQTT_sess`, `$MQTT_msgs`, `$MQTT_rmsgs`, `$MQTT_qos2in` and
`$MQTT_out` exist (made if missing); a persistent session is the last message on
`$MQTT.sess.<hash of the client id>` (JSON as nats-server's mqttPersistedSession: origin, id,
clean, subs), a retained message the last on `$MQTT.rmsgs.<subject>` (headers
`Nmqtt-RTopic`, `Nmqtt-RFlags`, `Nmqtt-ROrigin`; the body is the payload). QoS 1/2 messages
from MQTT clients are stored on `$MQTT.msgs.<subject>` (`mqttInitiateMsgDelivery`), each QoS 1/2
subscription reads them through a durable consumer delivering to `$MQTT.sub.<nuid>`
(`processJSConsumer`), a QoS 2 message waits for its PUBREL on `$MQTT.qos2.in.<client id>.<packet
id>` (`mqttStoreQoS2MsgOnce`) and an outgoing PUBREL on `$MQTT.out.pubrel.<hash>`, read by the
session's `$MQTT_PUBREL_<hash>` consumer. So all of it survives a restart on the same store.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pynatsd.jetstream import jetstream_of
from pynatsd.jetstream.consumer_checks import check_consumer_config
from pynatsd.jetstream.consumer_config import ConsumerConfig, set_consumer_defaults
from pynatsd.jetstream.errors import ApiError, replicas_not_supported
from pynatsd.jetstream.stream_checks import check_stream_config
from pynatsd.jetstream.stream_config import StreamConfig, set_static_stream_metadata
from pynatsd.logger import log
from pynatsd.mqtt import packets as p
from pynatsd.mqtt import properties as props
from pynatsd.mqtt.nats_headers import SUBJECT_HEADER

if TYPE_CHECKING:
    from pynatsd.jetstream.manager import AccountJetStream
    from pynatsd.jetstream.stream import Stream
    from pynatsd.options import Options
    from pynatsd.server.accounts import Account
    from pynatsd.server.server import Server

SESSIONS = "$MQTT_sess"
SESSIONS_PREFIX = "$MQTT.sess."
RETAINED = "$MQTT_rmsgs"
RETAINED_PREFIX = "$MQTT.rmsgs."
MESSAGES = "$MQTT_msgs"
MESSAGES_PREFIX = "$MQTT.msgs."
QOS2_IN = "$MQTT_qos2in"
QOS2_IN_PREFIX = "$MQTT.qos2.in."
OUT = "$MQTT_out"
PUBREL_PREFIX = "$MQTT.out.pubrel."
# Deliver subjects of the consumers: one per QoS 1/2 subscription, one per session for PUBRELs.
SUB_DELIVER_PREFIX = "$MQTT.sub."
PUBREL_DELIVER_PREFIX = "$MQTT.deliver.pubrel."
PUBREL_DURABLE_PREFIX = "$MQTT_PUBREL_"
PUBREL_HEADER = b"Nmqtt-PubRel"
# pynatsd's: an MQTT 5 QoS 2 message's properties (base64 of their MQTT encoding) and when it
# came (Unix ms), while it waits for PUBREL in `$MQTT_qos2in`.
PROPERTIES_HEADER = b"Nmqtt-Props"
RECEIVED_HEADER = b"Nmqtt-Received"
# pynatsd's: the consumer of an MQTT 5 shared subscription (one per group and filter).
SHARED_DURABLE_PREFIX = "$MQTT_SHARE_"

# (name, subjects, retention, one message per subject, what nats-server's messages call it),
# in the order nats-server looks them up and makes them.
STREAMS = (
    (SESSIONS, "", "limits", True, "sessions"),  # its subjects name the domain (below)
    (MESSAGES, f"{MESSAGES_PREFIX}>", "interest", False, "messages"),
    (QOS2_IN, f"{QOS2_IN_PREFIX}>", "limits", True, "QoS2 incoming messages"),
    (OUT, "$MQTT.out.>", "interest", False, "QoS2 outgoing PUBREL"),
    (RETAINED, f"{RETAINED_PREFIX}>", "limits", True, "retained messages"),
)


class StoreError(Exception):
    """An account's MQTT streams cannot be made; the text is nats-server's, and the client
    that needed them is refused with it ("unable to connect: ...")."""


_DIGITS = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"


def mqtt_domain(opts: Options) -> str:
    """The JetStream domain MQTT's requests go to: the block's `js_domain`, else this server's
    JetStream domain ("" for none), as mqttCreateAccountSessionManager picks it."""
    mqtt = opts.mqtt
    if mqtt is not None and mqtt.js_domain:
        return mqtt.js_domain
    return opts.jetstream_domain


def client_id_hash(client_id: str) -> str:
    """nats-server's getHash: eight base-62 characters of the id's SHA-256."""
    digest = hashlib.sha256(client_id.encode()).digest()
    return "".join(_DIGITS[b % 62] for b in digest[:8])


class AccountStore:
    """One account's MQTT streams; without JetStream for the account, nothing is kept."""

    def __init__(self, server: Server, account: Account, local: bool = True) -> None:
        self.server = server
        self.account = account
        self.origin = server.options.server_name
        self.domain = mqtt_domain(server.options)
        # Session records are on `$MQTT.sess.<domain>.<hash>` when there is a domain
        # (nats-server's domainTk), else `$MQTT.sess.<hash>`.
        self.sessions_prefix = SESSIONS_PREFIX + (f"{self.domain}." if self.domain else "")
        # Shared subscriptions' consumers -> the client ids of their members.
        self.shared_members: dict[str, set[str]] = {}
        js = jetstream_of(server) if local else None
        self._ajs: AccountJetStream | None = None if js is None else js.accounts.get(account.name)
        if self._ajs is not None:
            self._make_streams(self._ajs)

    def replicas(self) -> tuple[int, int]:
        """The block's `stream_replicas` and the replicas the streams get (1 when unset),
        logged as mqttCreateAccountSessionManager logs them."""
        mqtt = self.server.options.mqtt
        configured = mqtt.stream_replicas if mqtt is not None else 0
        replicas = configured if configured > 0 else 1
        name = self.account.name
        text = f'Creating MQTT streams/consumers with replicas {replicas} for account "{name}"'
        if mqtt is not None and mqtt.js_domain:
            text += f' in domain "{mqtt.js_domain}"'
        log.info("%s", text)
        return configured, replicas

    def _make_streams(self, ajs: AccountJetStream) -> None:
        """The five streams, made when missing, with the block's `stream_replicas` (1 when
        unset: this server is never a clustered JetStream), as mqttCreateAccountSessionManager;
        StoreError with nats-server's text when one cannot be made."""
        configured, replicas = self.replicas()
        name = self.account.name
        for stream, subject, retention, last_only, what in STREAMS:
            subject = subject or f"{self.sessions_prefix}>"
            existing = ajs.streams.get(stream)
            if existing is not None:
                current = max(existing.config.num_replicas, 1)
                if configured > 0 and current != replicas:
                    log.warning(
                        "MQTT %s stream replicas mismatch: current is %d but configuration is "
                        "%d for '%s > %s'",
                        what,
                        current,
                        replicas,
                        name,
                        stream,
                    )
                continue
            config = StreamConfig(name=stream, subjects=[subject], retention=retention)
            config.num_replicas = replicas
            if last_only:
                config.max_msgs_per_subject = 1
            try:
                config = check_stream_config(config, False, ajs.stream_configs())
                if config.num_replicas > 1:
                    raise replicas_not_supported()
            except ApiError as e:
                detail = f"{e.description} ({e.err_code})"
                raise StoreError(f'create {what} stream for account "{name}": {detail}') from None
            set_static_stream_metadata(config)
            ajs.add_stream(config)

    def _stream(self, name: str) -> Stream | None:
        return None if self._ajs is None else self._ajs.streams.get(name)

    def take_pending(self) -> list[asyncio.Future[Any]]:
        """Replies of a remote JetStream the session waits for before it answers its client;
        none here: this server's JetStream does each operation at once."""
        return []

    def fetch_session(self, client_id: str) -> None:
        """Read what `load_session` returns for `client_id` (a remote JetStream's reply);
        nothing to read ahead here."""

    def fetch_qos2(self, client_id: str, packet_id: int) -> None:
        """Read what `take_qos2` returns (a remote JetStream's reply); nothing to read ahead
        here."""

    def close(self) -> None:
        """The server stops."""

    # -- sessions --------------------------------------------------------------------------------

    @property
    def enabled(self) -> bool:
        """JetStream is there for the account: QoS 1/2 goes through the streams."""
        return self._ajs is not None

    def load_session(self, client_id: str) -> StoredSession | None:
        """The subscriptions (NATS subject -> QoS) and consumers (sid -> durable, deliver
        subject) of a stored session, None when there is none."""
        stream = self._stream(SESSIONS)
        if stream is None:
            return None
        stored = stream.store.load_last_msg(self.sessions_prefix + client_id_hash(client_id))
        return None if stored is None else session_record(client_id, stored.data)

    def take_loaded_retained(self) -> dict[bytes, p.Publish]:
        """Retained messages loaded since the account's state was made (a remote
        JetStream's, once its reply is in); none here: `load_retained` had them."""
        return {}

    def save_session(self, client_id: str, session: StoredSession) -> None:
        record: dict[str, object] = {"origin": self.origin, "id": client_id}
        if session.subs:
            record["subs"] = {subject.decode(): qos for subject, qos in session.subs.items()}
        # pynatsd's fields (nats-server has no MQTT 5): shared subscriptions (group, subject,
        # QoS), and the subscription options and identifiers beyond the QoS, by sid.
        if session.shared:
            record["shared"] = [
                {"group": group.decode(), "subject": subject.decode(), "qos": qos}
                for (group, subject), qos in session.shared.items()
            ]
        if session.options:
            record["v5"] = {sid.decode(): list(kept) for sid, kept in session.options.items()}
        if session.cons:
            record["cons"] = {
                sid.decode(): self._consumer_json(MESSAGES, durable, deliver)
                for sid, (durable, deliver) in session.cons.items()
            }
        pubrel = PUBREL_DURABLE_PREFIX + client_id_hash(client_id)
        if self.has_consumer(OUT, pubrel):
            record["pubrel"] = self._consumer_json(OUT, pubrel, "")
        subject = self.sessions_prefix + client_id_hash(client_id)
        self._publish(subject, b"", json.dumps(record).encode())

    def delete_session(self, client_id: str) -> None:
        stream = self._stream(SESSIONS)
        if stream is not None:
            stream.purge(subject=self.sessions_prefix + client_id_hash(client_id))

    # -- retained messages -----------------------------------------------------------------------

    def load_retained(self) -> dict[bytes, p.Publish]:
        stream = self._stream(RETAINED)
        if stream is None:
            return {}
        out: dict[bytes, p.Publish] = {}
        for subject in stream.store.subjects_state(f"{RETAINED_PREFIX}>"):
            stored = stream.store.load_last_msg(subject)
            if stored is not None:
                add_retained(out, subject, stored.header, stored.data)
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

    # -- QoS 1/2 messages ------------------------------------------------------------------------

    def store_message(self, subject: bytes, header: bytes, payload: bytes) -> None:
        """A QoS 1/2 message from an MQTT client, for the consumers of QoS 1/2
        subscriptions."""
        key = MESSAGES_PREFIX + subject.decode("utf-8", "surrogateescape")
        self._publish(key, header, payload)

    def consumer(
        self, stream_name: str, durable: str, deliver: str, filter_subject: str
    ) -> ConsumerConfig | None:
        """The durable push consumer `durable` (made when missing) as nats-server's MQTT makes
        it: explicit acks, new messages only, the mqtt block's ack_wait and
        max_ack_pending. None when JetStream refuses it."""
        stream = self._stream(stream_name)
        if stream is None or self._ajs is None:
            return None
        existing = stream.consumers.get(durable)
        if existing is not None:
            return existing.config
        mqtt = self.server.options.mqtt
        assert mqtt is not None
        config = ConsumerConfig(
            durable_name=durable,
            deliver_subject=deliver,
            ack_policy="explicit",
            deliver_policy="new",
            filter_subject=filter_subject,
            ack_wait=int(mqtt.ack_wait * 1e9),
            max_ack_pending=mqtt.max_ack_pending,
            mem_storage=mqtt.consumer_memory_storage,
        )
        if mqtt.consumer_inactive_threshold > 0:
            config.inactive_threshold = int(mqtt.consumer_inactive_threshold * 1e9)
        limit = self._ajs.limit("max_ack_pending")
        try:
            set_consumer_defaults(config, stream.config, False, limit)
            check_consumer_config(config, stream.config, limit)
        except ApiError:
            return None
        consumer = self._ajs.add_consumer(stream, config, durable)
        consumer.save_at_once()
        return consumer.config

    def consumer_interest(self, stream_name: str, durable: str) -> None:
        """The consumer's deliver subject was just subscribed to (or dropped): tell it now
        rather than at the interest watcher's next tick."""
        stream = self._stream(stream_name)
        consumer = None if stream is None else stream.consumers.get(durable)
        if consumer is not None:
            consumer.interest_changed()

    def _consumer_json(self, stream_name: str, durable: str, deliver: str) -> dict[str, Any]:
        """A consumer's config as the session record keeps it (nats-server's `cons`)."""
        stream = self._stream(stream_name)
        consumer = None if stream is None else stream.consumers.get(durable)
        if consumer is not None:
            return consumer.config.to_json()
        return {"durable_name": durable, "deliver_subject": deliver}

    def has_consumer(self, stream_name: str, durable: str) -> bool:
        stream = self._stream(stream_name)
        return stream is not None and durable in stream.consumers

    def delete_consumer(self, stream_name: str, durable: str) -> None:
        stream = self._stream(stream_name)
        if stream is not None and self._ajs is not None and durable in stream.consumers:
            self._ajs.delete_consumer(stream, durable)

    def ack(self, reply: bytes) -> None:
        """Acknowledge a consumer's delivery (nats-server's jsa.sendAck)."""
        if reply:
            self.server.publish_internal(self.account, reply, "", b"", b"")

    def store_qos2(self, client_id: str, packet_id: int, header: bytes, payload: bytes) -> None:
        """A QoS 2 message until its PUBREL, once per packet id: a DUP of one not released
        yet is not stored again (nats-server's DiscardNewPer on the stream)."""
        stream = self._stream(QOS2_IN)
        key = f"{QOS2_IN_PREFIX}{client_id}.{packet_id}"
        if stream is not None and stream.store.load_last_msg(key) is None:
            self._publish(key, header, payload)

    def take_qos2(self, client_id: str, packet_id: int) -> p.Publish | None:
        """The QoS 2 message a PUBREL releases (its topic as a NATS subject, retain flag,
        payload and MQTT 5 properties), removed."""
        stream = self._stream(QOS2_IN)
        if stream is None:
            return None
        key = f"{QOS2_IN_PREFIX}{client_id}.{packet_id}"
        stored = stream.store.load_last_msg(key)
        if stored is None:
            return None
        stream.purge(subject=key)
        fields = header_fields(stored.header)
        subject = fields.get(SUBJECT_HEADER, b"")
        flags = fields.get(b"Nmqtt-Pub", b"2")
        if not subject:
            return None
        retain = bool(int(flags[1:2] or b"0", 16) & 1)
        properties = stored_properties(fields)
        return p.Publish(subject, stored.data, 2, retain, False, packet_id, properties)

    def store_pubrel(self, id_hash: str, packet_id: int) -> None:
        """A PUBREL to send until PUBCOMP (nats-server's mqttNewDeliverablePubRel)."""
        header = b"NATS/1.0\r\n%s:%d\r\n\r\n" % (PUBREL_HEADER, packet_id)
        self._publish(PUBREL_PREFIX + id_hash, header, b"")

    def _publish(self, subject: str, header: bytes, data: bytes) -> None:
        if self._ajs is not None:
            self.server.publish_internal(self.account, subject, "", header, data)


def session_record(client_id: str, data: bytes) -> StoredSession | None:
    """A session record's subscriptions (NATS subject -> QoS), consumers (sid -> durable,
    deliver subject), shared subscriptions and MQTT 5 options; None when it is not a
    persistent session of `client_id`."""
    if not data:
        return None
    try:
        record = json.loads(data)
        if record.get("id") != client_id or record.get("clean"):
            return None
        subs = {subject.encode(): int(qos) for subject, qos in record.get("subs", {}).items()}
        cons = {
            sid.encode(): (str(cc["durable_name"]), str(cc["deliver_subject"]))
            for sid, cc in (record.get("cons") or {}).items()
        }
        shared = {
            (str(x["group"]).encode(), str(x["subject"]).encode()): int(x["qos"])
            for x in record.get("shared") or []
        }
        options = {
            sid.encode(): (int(kept[0]), int(kept[1]))
            for sid, kept in (record.get("v5") or {}).items()
        }
        return StoredSession(subs, cons, shared, options)
    except (ValueError, AttributeError, TypeError, KeyError):
        return None  # not a session record pynatsd or nats-server wrote


def add_retained(out: dict[bytes, p.Publish], subject: str, header: bytes, data: bytes) -> None:
    """A message of `$MQTT_rmsgs` (on `subject`) as the retained PUBLISH it keeps."""
    headers = header_fields(header)
    flags = int(headers.get(b"Nmqtt-RFlags", b"0").lstrip(b"-") or b"0", 16)
    topic = headers.get(b"Nmqtt-RTopic", b"")
    if data and topic:
        key = subject[len(RETAINED_PREFIX) :].encode()
        out[key] = p.Publish(topic, data, (flags >> 1) & 3, True)


def qos2_header(
    subject: bytes, retain: bool, properties: p.Properties | None = None, now: float = 0.0
) -> bytes:
    """The header of a QoS 2 message waiting for PUBREL: the QoS and the PUBLISH flags, and
    the subject it goes to (nats-server's mqttNewDeliverableMessage with encodePP); an MQTT 5
    message's properties too, as their MQTT encoding and the time they came (pynatsd's,
    so they survive a restart as the message does)."""
    flags = 4 | int(retain)
    header = b"NATS/1.0\r\nNmqtt-Pub:2%x\r\n%s:%s\r\n" % (flags, SUBJECT_HEADER, subject)
    kept = {k: v for k, v in (properties or {}).items() if k != props.TOPIC_ALIAS}
    if kept:
        encoded = base64.b64encode(props.encode(kept))
        received = int((now or time.time()) * 1000)
        header += b"%s:%s\r\n%s:%d\r\n" % (PROPERTIES_HEADER, encoded, RECEIVED_HEADER, received)
    return header + b"\r\n"


def stored_properties(fields: dict[bytes, bytes], now: float = 0.0) -> p.Properties:
    """The MQTT 5 properties `qos2_header` kept, the Message Expiry Interval less the time
    the message waited (0 left: expired)."""
    encoded = fields.get(PROPERTIES_HEADER)
    if not encoded:
        return {}
    try:
        block = base64.b64decode(encoded)  # the property block, its length first
        properties, _ = props.decode(block, 0, len(block))
    except ValueError:  # not what qos2_header wrote (MalformedError is one)
        return {}
    expiry = properties.get(props.MESSAGE_EXPIRY_INTERVAL)
    if expiry is not None:
        received = int(fields.get(RECEIVED_HEADER, b"0") or b"0") / 1000
        waited = int((now or time.time()) - received) if received else 0
        properties[props.MESSAGE_EXPIRY_INTERVAL] = max(expiry - waited, 0)
    return properties


@dataclass(slots=True)
class StoredSession:
    """A persistent session's record: its filters, its QoS 1/2 subscriptions' consumers, its
    shared subscriptions and MQTT 5 subscription options."""

    subs: dict[bytes, int] = field(default_factory=dict)
    # sid -> (durable name, deliver subject)
    cons: dict[bytes, tuple[str, str]] = field(default_factory=dict)
    # MQTT 5 shared subscriptions: (group, NATS subject) -> QoS
    shared: dict[tuple[bytes, bytes], int] = field(default_factory=dict)
    # MQTT 5: sid -> (subscription options byte, Subscription Identifier), where they say
    # more than the QoS
    options: dict[bytes, tuple[int, int]] = field(default_factory=dict)


def header_fields(header: bytes) -> dict[bytes, bytes]:
    fields: dict[bytes, bytes] = {}
    for line in header.split(b"\r\n")[1:]:
        name, sep, value = line.partition(b":")
        if sep:
            fields[name.strip()] = value.strip()
    return fields
