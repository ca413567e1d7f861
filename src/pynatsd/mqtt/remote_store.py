"""An account's MQTT state in another server's JetStream (the mqtt block's `js_domain`).

The same operations as `AccountStore`, made as requests to `$JS.<domain>.API` through
`RemoteJetStream` (nats-server's mqttJSA): on the account's first MQTT connection the five
streams are looked up and made when missing (STREAM.INFO, STREAM.CREATE) and the retained
messages read (STREAM.INFO with a subjects filter, then STREAM.MSG.GET of the last message of
each subject); a connecting client's session record is read with STREAM.MSG.GET; records,
retained messages and QoS 1/2 messages are published with a reply subject for their PubAck;
consumers are made and deleted with CONSUMER.DURABLE.CREATE and CONSUMER.DELETE, and deliver
across the leaf connection to the session's subscriptions on their deliver subjects.

The session code is synchronous: each operation starts its request and adds the reply's future
to `pending`; the session (`MQTTSession.after_store`) waits for them before it answers its
client and reads its next packet, as nats-server waits for each reply. What the session reads
back synchronously (the session record, the retained messages, the QoS 2 messages waiting for
PUBREL, the consumers it made) is what the replies brought in or what this server sent.
"""

from __future__ import annotations

import asyncio
import base64
import json
from typing import TYPE_CHECKING, Any

from pynatsd.jetstream.consumer_config import ConsumerConfig
from pynatsd.logger import log
from pynatsd.mqtt import packets as p
from pynatsd.mqtt.nats_headers import SUBJECT_HEADER
from pynatsd.mqtt.remote import RemoteJetStream, RemoteTimeout, Reply, reply_json
from pynatsd.mqtt.store import (
    OUT,
    QOS2_IN,
    QOS2_IN_PREFIX,
    RETAINED,
    RETAINED_PREFIX,
    SESSIONS,
    STREAMS,
    AccountStore,
    StoredSession,
    StoreError,
    add_retained,
    client_id_hash,
    header_fields,
    session_record,
    stored_properties,
)

if TYPE_CHECKING:
    from pynatsd.server.accounts import Account
    from pynatsd.server.server import Server

# JetStream's error codes the store tells apart.
STREAM_NOT_FOUND = 10059
NO_MESSAGE_FOUND = 10037


def remote_domain(server: Server) -> str:
    """The domain whose JetStream keeps MQTT's state when it is not this server's own: the
    block's `js_domain` when this server runs no JetStream or one of another domain, else
    "" (the state is local)."""
    opts = server.options
    mqtt = opts.mqtt
    domain = "" if mqtt is None else mqtt.js_domain
    if domain and (not opts.jetstream or domain != opts.jetstream_domain):
        return domain
    return ""


class RemoteAccountStore(AccountStore):
    """One account's MQTT streams in the JetStream of domain `domain`, across a leaf."""

    def __init__(self, server: Server, account: Account, domain: str) -> None:
        super().__init__(server, account, local=False)
        mqtt = server.options.mqtt
        assert mqtt is not None
        self.jsa = RemoteJetStream(server, account, domain, mqtt.js_api_timeout)
        # Replies the session waits for before it answers its client.
        self.pending: list[asyncio.Future[Any]] = []
        self._ready: asyncio.Task[None] | None = None
        # Session records read (client id -> record), the retained messages read at start,
        # QoS 2 messages waiting for PUBREL, the consumers made (their config's JSON).
        self._records: dict[str, StoredSession | None] = {}
        self._retained: dict[bytes, p.Publish] = {}
        self._qos2: dict[str, tuple[bytes, bytes]] = {}
        self._consumers: dict[tuple[str, str], dict[str, Any]] = {}

    @property
    def enabled(self) -> bool:
        return True

    def take_pending(self) -> list[asyncio.Future[Any]]:
        pending, self.pending = self.pending, []
        return pending

    def close(self) -> None:
        self.jsa.close()

    # -- the streams, once per account -----------------------------------------------------------

    def fetch_session(self, client_id: str) -> None:
        """A client connects: the streams (made once) and its session record, read before
        `load_session` (mqttCreateAccountSessionManager, then the session's lookup)."""
        if self._ready is None:
            self._ready = self.server.loop.create_task(self._prepare())
        task = self.server.loop.create_task(self._fetch_session(client_id, self._ready))
        self.pending.append(task)

    async def _prepare(self) -> None:
        _, replicas = self.replicas()
        name = self.account.name
        for stream, subject, retention, last_only, what in STREAMS:
            try:
                info = reply_json(await self.jsa.request("SL", f"STREAM.INFO.{stream}"))
            except RemoteTimeout as e:
                raise StoreError(f'lookup {what} stream for account "{name}": {e}') from None
            error = info.get("error")
            if not error:
                continue
            if error.get("err_code") != STREAM_NOT_FOUND:
                raise StoreError(f'create {what} stream for account "{name}": {_text(error)}')
            config: dict[str, Any] = {
                "name": stream,
                "subjects": [subject or f"{self.sessions_prefix}>"],
                "retention": retention,
                "storage": "file",
                "num_replicas": replicas,
            }
            if last_only:
                config["max_msgs_per_subject"] = 1
            made = reply_json(await self.jsa.request("SC", f"STREAM.CREATE.{stream}", config))
            error = made.get("error")
            if error:
                raise StoreError(f'create {what} stream for account "{name}": {_text(error)}')
        await self._load_retained()

    async def _load_retained(self) -> None:
        api = f"STREAM.INFO.{RETAINED}"
        info = reply_json(
            await self.jsa.request("SL", api, {"subjects_filter": f"{RETAINED_PREFIX}>"})
        )
        subjects = (info.get("state") or {}).get("subjects") or {}
        for subject in subjects:
            message = await self._last_message(RETAINED, subject)
            if message is not None:
                add_retained(self._retained, subject, message[0], message[1])

    async def _last_message(self, stream: str, subject: str) -> tuple[bytes, bytes] | None:
        """The last message of `subject` in `stream` (its header block and body)."""
        reply = reply_json(
            await self.jsa.request("ML", f"STREAM.MSG.GET.{stream}", {"last_by_subj": subject})
        )
        message = reply.get("message")
        if not isinstance(message, dict):
            return None
        header = base64.b64decode(message.get("hdrs") or "")
        return header, base64.b64decode(message.get("data") or "")

    async def _fetch_session(self, client_id: str, ready: asyncio.Task[None]) -> None:
        await ready
        message = await self._last_message(
            SESSIONS, self.sessions_prefix + client_id_hash(client_id)
        )
        record = None if message is None else session_record(client_id, message[1])
        self._records[client_id] = record
        if record is not None and message is not None:
            self._known_consumers(message[1])

    def _known_consumers(self, data: bytes) -> None:
        """The PUBREL consumer a session record names (`pubrel`) exists in the remote
        JetStream: a resumed session subscribes to it again (nats-server reads the record's
        `pubrel` the same way). Its QoS 1/2 consumers (`cons`) are made again, in case the
        remote JetStream dropped them meanwhile."""
        try:
            record = json.loads(data)
            pubrel = record.get("pubrel")
            if isinstance(pubrel, dict):
                self._consumers[(OUT, str(pubrel["durable_name"]))] = dict(pubrel)
        except (ValueError, AttributeError, TypeError, KeyError):
            pass  # session_record read what it could

    def take_loaded_retained(self) -> dict[bytes, p.Publish]:
        loaded, self._retained = self._retained, {}
        return loaded

    def load_retained(self) -> dict[bytes, p.Publish]:
        return {}  # read with the streams, on the first connection (take_loaded_retained)

    # -- sessions --------------------------------------------------------------------------------

    def load_session(self, client_id: str) -> StoredSession | None:
        return self._records.pop(client_id, None)

    def delete_session(self, client_id: str) -> None:
        self._purge(SESSIONS, self.sessions_prefix + client_id_hash(client_id))

    def _purge(self, stream: str, subject: str) -> None:
        self.pending.append(self.jsa.request("MD", f"STREAM.PURGE.{stream}", {"filter": subject}))

    # -- retained and QoS 1/2 messages -----------------------------------------------------------

    def store_retained(self, subject: bytes, packet: p.Publish) -> None:
        if packet.payload:
            super().store_retained(subject, packet)
        else:
            self._purge(RETAINED, RETAINED_PREFIX + subject.decode("utf-8", "surrogateescape"))

    def store_qos2(self, client_id: str, packet_id: int, header: bytes, payload: bytes) -> None:
        key = f"{QOS2_IN_PREFIX}{client_id}.{packet_id}"
        if key not in self._qos2:
            self._qos2[key] = (header, payload)
            self._publish(key, header, payload)

    def fetch_qos2(self, client_id: str, packet_id: int) -> None:
        """A PUBREL for a QoS 2 message this server does not hold (it restarted since):
        read from `$MQTT_qos2in`, as nats-server loads it."""
        key = f"{QOS2_IN_PREFIX}{client_id}.{packet_id}"
        if key not in self._qos2:
            self.pending.append(self.server.loop.create_task(self._fetch_qos2(key)))

    async def _fetch_qos2(self, key: str) -> None:
        message = await self._last_message(QOS2_IN, key)
        if message is not None:
            self._qos2.setdefault(key, message)

    def take_qos2(self, client_id: str, packet_id: int) -> p.Publish | None:
        key = f"{QOS2_IN_PREFIX}{client_id}.{packet_id}"
        kept = self._qos2.pop(key, None)
        if kept is None:
            return None
        self._purge(QOS2_IN, key)
        fields = header_fields(kept[0])
        subject = fields.get(SUBJECT_HEADER, b"")
        if not subject:
            return None
        retain = bool(int(fields.get(b"Nmqtt-Pub", b"2")[1:2] or b"0", 16) & 1)
        return p.Publish(subject, kept[1], 2, retain, False, packet_id, stored_properties(fields))

    def _publish(self, subject: str, header: bytes, data: bytes) -> None:
        kind = "SP" if subject.startswith(self.sessions_prefix) else "MS"
        self.pending.append(self.jsa.publish(kind, subject, header, data))

    # -- consumers -------------------------------------------------------------------------------

    def consumer(
        self, stream_name: str, durable: str, deliver: str, filter_subject: str
    ) -> ConsumerConfig | None:
        """The durable push consumer, made (or found, with the same config) by the remote
        JetStream; the session waits for its reply before the SUBACK."""
        key = (stream_name, durable)
        if key not in self._consumers:
            mqtt = self.server.options.mqtt
            assert mqtt is not None
            config: dict[str, Any] = {
                "durable_name": durable,
                "deliver_policy": "new",
                "ack_policy": "explicit",
                "ack_wait": int(mqtt.ack_wait * 1e9),
                "max_ack_pending": mqtt.max_ack_pending,
                "filter_subject": filter_subject,
                "deliver_subject": deliver,
            }
            if mqtt.consumer_memory_storage:
                config["mem_storage"] = True
            if mqtt.consumer_inactive_threshold > 0:
                config["inactive_threshold"] = int(mqtt.consumer_inactive_threshold * 1e9)
            self._consumers[key] = config
            body = {"stream_name": stream_name, "config": config}
            future = self.jsa.request(
                "CC", f"CONSUMER.DURABLE.CREATE.{stream_name}.{durable}", body
            )
            future.add_done_callback(lambda f: self._consumer_made(key, f))
            self.pending.append(future)
        return ConsumerConfig(durable_name=durable, deliver_subject=deliver)

    def _consumer_made(self, key: tuple[str, str], future: asyncio.Future[Reply]) -> None:
        error = None if future.cancelled() or future.exception() else reply_json(future.result())
        if error is None or error.get("error"):
            self._consumers.pop(key, None)
            why = _text(error.get("error", {})) if error else "no reply"
            log.warning("MQTT consumer %s > %s not made: %s", key[0], key[1], why)

    def consumer_interest(self, stream_name: str, durable: str) -> None:
        """The remote JetStream learns the deliver subject's interest across the leaf."""

    def _consumer_json(self, stream_name: str, durable: str, deliver: str) -> dict[str, Any]:
        known = self._consumers.get((stream_name, durable))
        return dict(known) if known else {"durable_name": durable, "deliver_subject": deliver}

    def has_consumer(self, stream_name: str, durable: str) -> bool:
        return (stream_name, durable) in self._consumers

    def delete_consumer(self, stream_name: str, durable: str) -> None:
        self._consumers.pop((stream_name, durable), None)
        self.pending.append(self.jsa.request("CD", f"CONSUMER.DELETE.{stream_name}.{durable}"))


def _text(error: dict[str, Any]) -> str:
    return f"{error.get('description', '')} ({error.get('err_code', 0)})"
