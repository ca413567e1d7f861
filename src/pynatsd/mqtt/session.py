"""One MQTT connection: the MQTT protocol over the server's client machinery.

Corresponds to the `client.mqtt` half of nats-server's `server/mqtt.go`: `createMQTTClient`,
`mqttParse` (the packets' handling), `mqttProcessConnect`, `mqttProcessPub`,
`mqttProcessSubs`, `mqttDeliverMsgCbQoS0/QoS12` and `mqttHandleWill`. As in nats-server an
MQTT connection *is* a client (here a `server.client.Client`): it authenticates through the
server's users, binds to an account, its subscriptions sit in the account's SubList and its
messages go through the one delivery path, so NATS and MQTT clients see each other. What
differs is the wire: packets come from `mqtt.codec.Decoder`, frames from `mqtt.frames`, and
`deliver` writes a PUBLISH instead of a MSG.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from pynatsd.logger import log
from pynatsd.mqtt import frames, v5
from pynatsd.mqtt import packets as p
from pynatsd.mqtt import properties as props
from pynatsd.mqtt.codec import Decoder
from pynatsd.mqtt.consumers import ConsumerSubscription, SessionConsumers
from pynatsd.mqtt.inflight import InFlight
from pynatsd.mqtt.nats_headers import message_qos, nats_message
from pynatsd.mqtt.store import (
    MESSAGES_PREFIX,
    PUBREL_HEADER,
    StoreError,
    header_fields,
    qos2_header,
)
from pynatsd.mqtt.topics import (
    TopicError,
    filter_to_subject,
    is_reserved_filter,
    level_up_subject,
    subject_to_topic,
    topic_to_subject,
)
from pynatsd.protocol.errors import CloseReason
from pynatsd.protocol.events import Pub
from pynatsd.server.client import Client
from pynatsd.server.events import client_connected, conns_changed
from pynatsd.server.reserved import RESERVED_FIRST_BYTES, is_reserved_subject
from pynatsd.server.subscription import Subscription
from pynatsd.sublist import InvalidSubjectError

if TYPE_CHECKING:
    from pynatsd.auth import AuthResult
    from pynatsd.mqtt.part import MQTT
    from pynatsd.server.delivery import Receiver
    from pynatsd.server.server import Server

# nats-server's sid suffix of the extra subscription a `foo/#` filter makes on `foo`.
LEVEL_UP_SID_SUFFIX = b" fwc"
# Subjects MQTT clients may not subscribe to (nats-server's mqttPrefix).
INTERNAL_PREFIX = b"$MQTT."
DUPLICATE_CLIENT_ID = "Duplicate Client ID"

# MQTT 3.1.1 CONNACK return codes -> the MQTT 5 reason codes of the same meaning.
_V5_CONNACK = {
    p.RC_UNACCEPTABLE_PROTOCOL_VERSION: 0x84,
    p.RC_IDENTIFIER_REJECTED: 0x85,
    p.RC_SERVER_UNAVAILABLE: 0x88,
    p.RC_BAD_USER_OR_PASSWORD: 0x86,
    p.RC_NOT_AUTHORIZED: 0x87,
}


class MQTTSubscription(Subscription):
    """A subscription of an MQTT client: its granted QoS, and whether it starts with a
    wildcard (such a filter never matches a topic starting with `$`, [MQTT-4.7.2-1])."""

    __slots__ = ("backed", "identifier", "options", "qos", "reserved")

    def __init__(
        self, owner: Receiver, subject: bytes, sid: bytes, qos: int, group: bytes = b""
    ) -> None:
        super().__init__(owner, subject, group, sid)
        self.qos = qos
        self.reserved = is_reserved_filter(subject)
        # MQTT 5: the subscription options byte (no local, retain as published, retain
        # handling) and the Subscription Identifier (0: none).
        self.options = qos
        self.identifier = 0
        # QoS 1/2 messages from MQTT reach it through its JetStream consumer, not here.
        self.backed = False


class MQTTSession(Client):
    """An MQTT client connection (3.1.1 as nats-server speaks it; 5.0 as `mqtt.v5` adds)."""

    __slots__ = (
        "_keep_alive_timer",
        "client_id",
        "consumers",
        "decoder",
        "held",
        "inflight",
        "keep_alive",
        "keep_session",
        "mqtt",
        "publishing_retain",
        "qos2_in",
        "server_aliases",
        "session_expiry",
        "topic_aliases",
        "version",
        "will",
    )

    def __init__(self, server: Server, mqtt: MQTT) -> None:
        super().__init__(server)
        self.mqtt = mqtt
        opts = server.options
        # nats-server bounds the first packet (the CONNECT) by max_payload.
        self.decoder = Decoder(max_packet=opts.max_payload)
        self.version = p.MQTT_311
        self.client_id = ""
        self.will: p.Will | None = None
        self.keep_alive = 0.0
        self._keep_alive_timer: asyncio.TimerHandle | None = None
        # MQTT has no +OK and no subject checks; deliveries carry headers to decode.
        self.verbose = self.pedantic = False
        self.headers = True
        self.inflight = InFlight(mqtt.options.max_ack_pending)
        # QoS 2 messages received and not yet released (PUBREL): packet id -> message.
        self.qos2_in: dict[int, p.Publish] = {}
        # The JetStream consumers of QoS 1/2 subscriptions; None without JetStream (QoS 1/2
        # then stays in memory, `inflight` alone).
        self.consumers: SessionConsumers | None = None
        # MQTT 5: topic aliases the client set (alias -> topic); the session outlives the
        # connection (3.1.1: clean session 0; 5: a session expiry interval).
        self.topic_aliases: dict[int, bytes] = {}
        # MQTT 5: the aliases this server gives topics toward the client (its CONNECT's Topic
        # Alias Maximum above 0), None otherwise.
        self.server_aliases: v5.ServerAliases | None = None
        self.keep_session = False
        # MQTT 5's Session Expiry Interval (seconds; 0xFFFFFFFF: never), None under 3.1.1.
        self.session_expiry: int | None = None
        # The retain flag of the message being published (retain_as_published).
        self.publishing_retain = False
        # Packets read while the session waits for a remote JetStream's replies
        # (`after_store`), None when it does not wait.
        self.held: list[p.Packet] | None = None

    # -- the asyncio adapter ---------------------------------------------------------------------

    def greeting(self) -> bytes:
        return b""  # an MQTT server speaks second

    def admit(self, transport: asyncio.Transport) -> bool:
        """Take the connection on; on the websocket listener's TLS keep the client
        certificate, for verify_and_map (the MQTT port's TLS is `mqtt.tls`)."""
        ssl_object = transport.get_extra_info("ssl_object")
        if ssl_object is not None:
            self.peer_cert = ssl_object.getpeercert(binary_form=True)
        return super().admit(transport)

    def start_timers(self) -> None:
        """The authentication timer, always (nats-server's createMQTTClient); no PING timer:
        MQTT clients ping the server."""
        mqtt_opts = self.mqtt.options
        timeout = mqtt_opts.auth_timeout or self.server.options.auth_timeout
        self._auth_timer = self.server.loop.call_later(timeout, self._auth_timeout)

    def data_received(self, data: bytes) -> None:
        if self.closed:
            return
        self.last_in = time.monotonic()
        self._handle_all(self.decoder.feed(data))
        self._write_touched()

    def _handle_all(self, packets: list[p.Packet]) -> None:
        for packet in packets:
            if self.held is not None:
                self.held.append(packet)  # an earlier packet waits for replies: after it
                continue
            self._handle(packet)
            if self.closed:
                break

    def after_store(
        self, then: Callable[[], None], failed: Callable[[BaseException], None] | None = None
    ) -> None:
        """Answer the client (`then`) once a remote JetStream (`js_domain`) replied to what
        this packet asked of it, as nats-server waits for each JetStream reply before its
        CONNACK, SUBACK or PUBACK; the packets read meanwhile wait too. At once when MQTT's
        state is in this server's JetStream."""
        pending = self.mqtt.take_pending(self)
        if not pending:
            then()
            return
        self.held = []
        self.server.loop.create_task(self._wait_store(pending, then, failed))

    async def _wait_store(
        self,
        pending: list[asyncio.Future[Any]],
        then: Callable[[], None],
        failed: Callable[[BaseException], None] | None,
    ) -> None:
        results = await asyncio.gather(*pending, return_exceptions=True)
        if self.closed:
            return
        held, self.held = self.held or [], None
        error = next((r for r in results if isinstance(r, BaseException)), None)
        if error is not None and failed is not None:
            failed(error)
        else:
            if error is not None:
                log.warning("%s - MQTT JetStream request failed: %s", self.label, error)
            then()
            self._handle_all(held)
        self._write_touched()

    def close(self, reason: str = CloseReason.SERVER_SHUTDOWN, abort: bool = False) -> None:
        if self.closed:
            return
        if self._keep_alive_timer is not None:
            self._keep_alive_timer.cancel()
            self._keep_alive_timer = None
        self.inflight.stop()
        will, self.will = self.will, None
        if will is not None and self.connected:
            self._publish_will(will)
        self.mqtt.session_closed(self)
        super().close(reason, abort)
        if self.consumers is not None:
            self.consumers.interest_all()

    # -- packets ---------------------------------------------------------------------------------

    def _handle(self, packet: p.Packet) -> None:
        if isinstance(packet, p.Publish):  # first: the common packet
            self._process_publish(packet)
        elif isinstance(packet, p.PubAck | p.PubComp):
            ack = self.inflight.acked(packet.packet_id)
            if ack and self.consumers is not None:
                self.consumers.store.ack(ack)
            self._send_backlog()
        elif isinstance(packet, p.Connect | p.ConnectRefused):
            if self.connected:
                self._protocol_error("received a second CONNECT packet")
            elif isinstance(packet, p.Connect):
                self._process_mqtt_connect(packet)
            else:
                self._connect_refused(packet)
        elif isinstance(packet, p.Malformed):
            self._protocol_error(packet.reason, v5.MALFORMED_PACKET)
        elif not self.connected:
            self._not_connect(packet)
        elif isinstance(packet, p.Subscribe):
            self._process_subscribe(packet)
        elif isinstance(packet, p.Unsubscribe):
            self._process_unsubscribe(packet)
        elif isinstance(packet, p.PingReq):
            self.outbound.push(frames.PINGRESP_FRAME)
        elif isinstance(packet, p.PubRec):
            self._process_pubrec(packet.packet_id)
        elif isinstance(packet, p.PubRel):
            self._process_pubrel(packet)
        elif isinstance(packet, p.Disconnect):
            self.will = None  # a normal disconnect discards the will [MQTT-3.1.2-8]
            self.close(CloseReason.CLIENT_CLOSED)
        else:
            self._protocol_error(f"received unknown packet type {_type_of(packet)}")

    def _not_connect(self, packet: p.Packet) -> None:
        self._protocol_error(f"the first packet should be a CONNECT (16), got {_type_of(packet)}")

    def _protocol_error(self, reason: str, code: int = v5.PROTOCOL_ERROR) -> None:
        """nats-server logs the parse error and closes the connection, sending nothing; an
        MQTT 5 client is told why with a DISCONNECT first."""
        log.error("%s - %s", self.label, reason)
        self.disconnect_v5(code)
        self.close(CloseReason.PROTOCOL_VIOLATION)

    def disconnect_v5(self, code: int) -> None:
        """A server DISCONNECT with a reason code, for a connected MQTT 5 client."""
        if self.connected and self.version == p.MQTT_5 and not self.closed:
            self.outbound.push(frames.disconnect(code, {}))

    # -- CONNECT ---------------------------------------------------------------------------------

    def _connect_refused(self, refused: p.ConnectRefused) -> None:
        if refused.client_id:
            self.client_id = refused.client_id
        if refused.return_code:
            self.outbound.push(self._connack(False, refused.return_code))
        self._protocol_error(refused.reason)

    def _connack(
        self, session_present: bool, code: int, properties: p.Properties | None = None
    ) -> bytes:
        if self.version == p.MQTT_5:
            return frames.connack(session_present, _V5_CONNACK.get(code, code), properties or {})
        return frames.connack(session_present, code)

    def _process_mqtt_connect(self, connect: p.Connect) -> None:
        self.connect_started()
        self.version = connect.protocol_level
        client_id = connect.client_id or self.mqtt.new_client_id()
        self.client_id = client_id
        self.label = f'{self.label} - "{client_id}"'
        opts: dict[str, Any] = {"lang": "mqtt"}
        if connect.username is not None:
            opts["user"] = connect.username
        if connect.password is not None:
            password = connect.password.decode("utf-8", "surrogateescape")
            opts["pass"] = opts["auth_token"] = password  # nats-server: Token = Password
        self.connect_opts = opts
        result = self.authenticate(opts)
        if result is None:
            log.error("%s - Authorization Error", self.label)
            self.outbound.push(self._connack(False, p.RC_NOT_AUTHORIZED))
            self.close(CloseReason.AUTHENTICATION_VIOLATION)
            return
        if not self.bind(result):
            return
        self.label_set = True
        self.connected = True
        self.will = connect.will
        if connect.keep_alive:
            # nats-server's read deadline: one and a half keep-alive periods [MQTT-3.1.2-24].
            self.keep_alive = connect.keep_alive * 1.5
            self._arm_keep_alive()
        connack_props: p.Properties | None = None
        if self.version == p.MQTT_5:
            connack_props = self._v5_connect(connect)
        else:
            self.keep_session = not connect.clean_start
        try:
            self.mqtt.fetch_session(self)
        except StoreError as e:
            self._unable_to_connect(e)
            return
        self.after_store(lambda: self._attach(connect, connack_props), self._unable_to_connect)

    def _unable_to_connect(self, error: BaseException) -> None:
        """The account's streams cannot be made (or looked up): no CONNACK
        (mqttProcessConnect's error)."""
        log.error("%s - unable to connect: %s", self.label, error)
        self.will = None
        self.close(CloseReason.PROTOCOL_VIOLATION)

    def _attach(self, connect: p.Connect, connack_props: p.Properties | None) -> None:
        try:
            session_present = self.mqtt.attach_session(self, connect.clean_start)
        except StoreError as e:
            self._unable_to_connect(e)
            return
        self.after_store(lambda: self._connected(session_present, connack_props))

    def _connected(self, session_present: bool, connack_props: p.Properties | None) -> None:
        self.outbound.push(self._connack(session_present, p.RC_ACCEPTED, connack_props))
        if log.isEnabledFor(logging.DEBUG):
            log.debug("%s - Client connected", self.label)
        conns_changed(self.server, self.account)
        if self.account is not self.server.system_account:
            client_connected(self.server, self)
        self.mqtt.restore_subscriptions(self)

    def _v5_connect(self, connect: p.Connect) -> p.Properties:
        """MQTT 5's CONNECT properties, and the CONNACK's."""
        asked = connect.properties
        self.session_expiry = asked.get(props.SESSION_EXPIRY_INTERVAL, 0)
        self.keep_session = self.session_expiry > 0
        alias_maximum = asked.get(props.TOPIC_ALIAS_MAXIMUM, 0)
        if alias_maximum:
            self.server_aliases = v5.ServerAliases(alias_maximum)
        receive_maximum = asked.get(props.RECEIVE_MAXIMUM)
        if receive_maximum:
            self.inflight.max_pending = min(self.inflight.max_pending, receive_maximum)
        answer: p.Properties = dict(v5.SERVER_PROPERTIES)
        if not connect.client_id:
            answer[props.ASSIGNED_CLIENT_IDENTIFIER] = self.client_id
        return answer

    def authenticate(self, opts: dict[str, Any]) -> AuthResult | None:
        """MQTT's credentials check, at CONNECT and again on every configuration reload."""
        return self.mqtt.authenticate(self, opts)

    def _arm_keep_alive(self) -> None:
        remaining = self.keep_alive - (time.monotonic() - self.last_in)
        self._keep_alive_timer = self.server.loop.call_later(
            max(remaining, 0.0), self._keep_alive_check
        )

    def _keep_alive_check(self) -> None:
        self._keep_alive_timer = None
        if self.closed:
            return
        if time.monotonic() - self.last_in >= self.keep_alive:
            # nats-server's read deadline expires: a read error closes the connection.
            log.error("%s - read error: i/o timeout", self.label)
            self.disconnect_v5(v5.KEEP_ALIVE_TIMEOUT)
            self.close(CloseReason.READ_ERROR)
            return
        self._arm_keep_alive()

    # -- PUBLISH from the client -----------------------------------------------------------------

    def _process_publish(self, packet: p.Publish) -> None:
        if not self.connected:
            self._not_connect(packet)
            return
        if packet.properties:
            aliased = self._resolve_alias(packet)
            if aliased is None:
                return
            packet = aliased
        try:
            subject = topic_to_subject(packet.topic)
        except TopicError as exc:
            self._protocol_error(str(exc))
            return
        qos = packet.qos
        if qos == 2 and self.mqtt.options.reject_qos2_publish:
            self._protocol_error("QoS=2 is disabled for PUBLISH messages")
            return
        header, size = self._nats_header(packet)
        max_payload = self.server.options.max_payload
        if 0 < max_payload < size:
            log.error("%s - Maximum Payload Violation", self.label)
            self.close(CloseReason.MAX_PAYLOAD_EXCEEDED)
            return
        if qos == 2:
            # Kept until the client releases it (PUBREL), once per packet id: a DUP of a
            # message not released yet is not delivered twice. In `$MQTT_qos2in` as
            # nats-server keeps it, with an MQTT 5 message's properties.
            consumers = self.consumers
            if consumers is not None:
                qos2 = qos2_header(subject, packet.retain, packet.properties)
                consumers.store.store_qos2(self.client_id, packet.packet_id, qos2, packet.payload)
            else:
                self.qos2_in.setdefault(packet.packet_id, packet)
            self._answer_stored(frames.pub_response(p.PUBREC, packet.packet_id))
            return
        self.publish_to_nats(subject, packet, header)
        if qos == 1:
            self._answer_stored(frames.pub_response(p.PUBACK, packet.packet_id))

    def _answer_stored(self, frame: bytes) -> None:
        """PUBACK or PUBREC, once the message is stored (the PubAck of a remote
        JetStream)."""
        if self.consumers is None:
            self.outbound.push(frame)
        else:
            self.after_store(lambda: self.outbound.push(frame))

    def _process_pubrel(self, packet: p.PubRel) -> None:
        if packet.packet_id not in self.qos2_in and self.consumers is not None:
            # In a remote JetStream the message is read first (after a restart of this
            # server it is not in memory).
            self.consumers.store.fetch_qos2(self.client_id, packet.packet_id)
            self.after_store(lambda: self._release(packet))
            return
        self._release(packet)

    def _release(self, packet: p.PubRel) -> None:
        message = self.qos2_in.pop(packet.packet_id, None)
        if message is None and self.consumers is not None:
            stored = self.consumers.store.take_qos2(self.client_id, packet.packet_id)
            if stored is not None:
                message = dataclasses.replace(stored, topic=subject_to_topic(stored.topic))
        if message is not None:
            header, _ = self._nats_header(message)
            self.publish_to_nats(topic_to_subject(message.topic), message, header)
        self.outbound.push(frames.pub_response(p.PUBCOMP, packet.packet_id))

    def publish_to_nats(self, subject: bytes, packet: p.Publish, header: bytes) -> None:
        """Send an MQTT message on as a NATS message with its `Nmqtt-Pub` header, through the
        client's publish checks and the delivery path (mqttInitiateMsgDelivery); a retained
        message is stored (or cleared) once the publish is allowed."""
        stats = self.stats
        stats.in_msgs += 1
        stats.in_bytes += len(packet.payload)
        if packet.retain:
            # Kept only when the publish is allowed (nats-server checks the permissions
            # first); the delivery path checks again for every message.
            if not self._may_publish(subject):
                return
            self.mqtt.retain(self.account, subject, packet, header)
        reply = b""
        response_topic = packet.properties.get(props.RESPONSE_TOPIC)
        if response_topic:
            try:
                reply = topic_to_subject(response_topic.encode())
            except TopicError:
                reply = b""
        msg = Pub(subject, reply, header + packet.payload, len(header))
        self.publishing_retain = packet.retain
        self._process_pub_slow(msg)
        self.publishing_retain = False
        consumers = self.consumers
        if packet.qos and consumers is not None and self._may_publish(subject, False):
            # QoS 1/2 subscriptions read it from `$MQTT_msgs` (mqttInitiateMsgDelivery).
            if self.version == p.MQTT_5:
                response_topic = packet.properties.get(props.RESPONSE_TOPIC, "")
                header = v5.stored_header(header, self.client_id, packet.retain, response_topic)
            consumers.store.store_message(subject, header, packet.payload)

    def _nats_header(self, packet: p.Publish) -> tuple[bytes, int]:
        """The NATS header block of an MQTT message and the NATS message's size."""
        if not packet.properties:
            return nats_message(packet.qos, len(packet.payload))
        header = v5.header_block(packet.qos, packet.properties)
        return header, len(header) + len(packet.payload)

    def _resolve_alias(self, packet: p.Publish) -> p.Publish | None:
        """MQTT 5 topic aliases: a topic with an alias sets it, an empty topic uses it."""
        alias = packet.properties.get(props.TOPIC_ALIAS)
        if alias is None:
            return packet
        if alias == 0 or alias > v5.TOPIC_ALIAS_MAXIMUM:
            self._protocol_error(f"topic alias {alias} out of range", v5.TOPIC_ALIAS_INVALID)
            return None
        if packet.topic:
            self.topic_aliases[alias] = packet.topic
            return packet
        topic = self.topic_aliases.get(alias)
        if topic is None:
            self._protocol_error(f"unknown topic alias {alias}")
            return None
        return dataclasses.replace(packet, topic=topic)

    def _may_publish(self, subject: bytes, report: bool = True) -> bool:
        if (
            subject
            and subject[0] in RESERVED_FIRST_BYTES
            and is_reserved_subject(subject, self.account is self.server.system_account)
        ) or (
            self.perms.publish_restricted
            and not self.perms.can_publish(subject.decode("utf-8", "surrogateescape"))
        ):
            if report:
                self.publish_violation(subject)
            return False
        return True

    def _publish_will(self, will: p.Will) -> None:
        """The will, published as if the client had sent it (mqttHandleWill)."""
        try:
            subject = topic_to_subject(will.topic)
        except TopicError:
            return
        packet = p.Publish(
            will.topic, will.payload, will.qos, will.retain, False, 0, will.properties
        )
        header, _ = self._nats_header(packet)
        self.publish_to_nats(subject, packet, header)
        self._write_touched()

    # -- SUBSCRIBE, UNSUBSCRIBE ------------------------------------------------------------------

    def _process_subscribe(self, packet: p.Subscribe) -> None:
        codes: list[int] = []
        v5_client = self.version == p.MQTT_5
        identifier = 0
        if v5_client:
            identifiers = packet.properties.get(props.SUBSCRIPTION_IDENTIFIER)
            identifier = identifiers[0] if identifiers else 0
        retained: list[MQTTSubscription] = []
        for topic_filter, options in packet.filters:
            added: list[MQTTSubscription] = []
            qos = self._subscribe(topic_filter, options if v5_client else options & 3, added)
            codes.append(qos)
            for sub in added:
                sub.identifier = identifier
                handling = (sub.options & p.SUB_RETAIN_HANDLING) >> 4
                if not sub.queue and (handling == 0 or (handling == 1 and sub.delivered == -1)):
                    retained.append(sub)
                sub.delivered = max(sub.delivered, 0)
        self.mqtt.subscriptions_changed(self)
        suback = frames.suback(packet.packet_id, codes, {} if v5_client else None)

        def answer() -> None:
            self.outbound.push(suback)
            for sub in retained:
                self.mqtt.send_retained(self, sub)

        self.after_store(answer)

    def _subscribe(self, topic_filter: bytes, options: int, added: list[MQTTSubscription]) -> int:
        """One filter of a SUBSCRIBE: the granted QoS, or the failure code. `options` is the
        MQTT 5 options byte (the QoS alone under 3.1.1)."""
        qos = options & p.SUB_QOS
        if qos == 2 and self.mqtt.options.downgrade_qos2_subscribe:
            qos = 1
        group = b""
        shared = v5.shared_filter(topic_filter) if self.version == p.MQTT_5 else None
        if shared is not None:
            group, topic_filter = shared
        try:
            subject = filter_to_subject(topic_filter)
        except TopicError as exc:
            log.error("%s - invalid topic %r: %s", self.label, topic_filter, exc)
            return p.SUBACK_FAILURE
        if subject.startswith(INTERNAL_PREFIX):
            return p.SUBACK_FAILURE
        if not self.subscribe_subject(subject, qos, added, group):
            return p.SUBACK_FAILURE
        for sub in added:
            sub.options = options
        return qos

    def subscribe_subject(
        self, subject: bytes, qos: int, added: list[MQTTSubscription], group: bytes = b""
    ) -> bool:
        """The subscriptions of one filter as a NATS subject: itself and, for `foo/#`, the
        parent level `foo` (sid "foo fwc"); an MQTT 5 shared subscription is a queue
        subscription of its group. False when refused."""
        prefix = b"$share " + group + b" " if group else b""
        sub = self.add_subscription(subject, prefix + subject, qos, group)
        if sub is None:
            return False
        level_up = level_up_subject(subject)
        if level_up is not None:
            sid = prefix + level_up + LEVEL_UP_SID_SUFFIX
            parent = self.add_subscription(level_up, sid, qos, group)
            if parent is None:
                return False
            added.append(parent)
        added.append(sub)
        return True

    def filters(self) -> dict[bytes, int]:
        """The filters subscribed to, as NATS subjects with their QoS (a session's record)."""
        return {
            sub.subject_bytes: sub.qos
            for sid, sub in self.subs.items()
            if isinstance(sub, MQTTSubscription)
            and not sid.endswith(LEVEL_UP_SID_SUFFIX)
            and not sub.queue
        }

    def shared_filters(self) -> dict[tuple[bytes, bytes], int]:
        """MQTT 5 shared subscriptions: (group, NATS subject) -> QoS (a session's record)."""
        return {
            (sub.queue_bytes, sub.subject_bytes): sub.qos
            for sid, sub in self.subs.items()
            if isinstance(sub, MQTTSubscription)
            and not sid.endswith(LEVEL_UP_SID_SUFFIX)
            and sub.queue
        }

    def subscription_options(self) -> dict[bytes, tuple[int, int]]:
        """MQTT 5: sid -> (options byte, Subscription Identifier) of the subscriptions whose
        options say more than their QoS (a session's record)."""
        return {
            sid: (sub.options, sub.identifier)
            for sid, sub in self.subs.items()
            if isinstance(sub, MQTTSubscription)
            and not sid.endswith(LEVEL_UP_SID_SUFFIX)
            and (sub.options != sub.qos or sub.identifier)
        }

    def resubscribe(
        self, subject: bytes, qos: int, group: bytes, options: dict[bytes, tuple[int, int]]
    ) -> None:
        """A resumed session's subscription, with the MQTT 5 options it had."""
        added: list[MQTTSubscription] = []
        if not self.subscribe_subject(subject, qos, added, group):
            return
        sid = (b"$share " + group + b" " if group else b"") + subject
        kept = options.get(sid)
        for sub in added:
            sub.delivered = max(sub.delivered, 0)
            if kept is not None:
                sub.options, sub.identifier = kept

    def add_subscription(
        self, subject: bytes, sid: bytes, qos: int, group: bytes = b""
    ) -> MQTTSubscription | None:
        """A NATS subscription for a filter (nats-server's processSub for MQTT): None when
        permissions, limits or the subject refuse it. A filter subscribed again keeps its
        subscription with the new QoS [MQTT-3.8.4-3]."""
        existing = self.subs.get(sid)
        if isinstance(existing, MQTTSubscription):
            existing.qos = qos
            return existing if self._back(existing) else None
        text = subject.decode("utf-8", "surrogateescape")
        queue = group.decode("utf-8", "surrogateescape") if group else None
        perms = self.perms
        if (perms.sub_restricted or queue) and not perms.can_subscribe(text, queue):
            log.error(
                '%s - Subscription Violation - Subject "%s", SID %s',
                self.label,
                text,
                sid.decode(errors="replace"),
            )
            return None
        if 0 <= self.max_subs <= len(self.subs):
            return None
        sub = MQTTSubscription(self, subject, sid, qos, group)
        sub.delivered = -1  # new: MQTT 5 retain handling 1 sends retained messages
        try:
            self.account.sublist.insert(sub)
        except InvalidSubjectError:
            return None
        self.subs[sid] = sub
        if not self._back(sub):
            self.unsubscribe(sub)
            return None
        return sub

    def _back(self, sub: MQTTSubscription) -> bool:
        """A QoS 1/2 subscription's JetStream consumer and the subscription on its deliver
        subject (processJSConsumer); a subscription at QoS 0 now loses them. False when
        JetStream refuses the consumer. An MQTT 5 shared subscription reads its group's
        consumer, as a member of the group on its deliver subject."""
        consumers = self.consumers
        if consumers is None:
            return True
        if sub.qos == 0:
            self._unback(sub.sid)
            sub.backed = False
            return True
        if sub.qos == 2 and not consumers.pubrel and not self.subscribe_pubrel():
            return False
        if sub.queue:
            made = consumers.ensure_shared(sub.sid, sub.queue_bytes, sub.subject_bytes)
        else:
            made = consumers.ensure(sub.sid, sub.subject_bytes)
        if made is None:
            return False
        durable, deliver = made
        existing = self.subs.get(deliver.encode())
        if isinstance(existing, ConsumerSubscription):
            existing.filter = sub
        else:
            self._subscribe_deliver(ConsumerSubscription(self, deliver, durable, sub))
            consumers.interest(durable)
        sub.backed = True
        return True

    def _unback(self, sid: bytes) -> None:
        consumers = self.consumers
        if consumers is None:
            return
        known = consumers.by_sid.get(sid) or consumers.shared_by_sid.get(sid)
        if known is None:
            return
        deliver = known[1].encode()
        durable = consumers.drop(sid)
        self.inflight.forget(durable)
        delivery = self.subs.get(deliver)
        if delivery is not None:
            self.unsubscribe(delivery)

    def leave_shared(self) -> None:
        """A persistent session's connection ends: it leaves its shared subscriptions' groups
        (their consumers serve the members still here, and it joins again when it resumes),
        and what reaches it while away waits in memory."""
        consumers = self.consumers
        if consumers is None:
            return
        for sid in list(consumers.shared_by_sid):
            self._unback(sid)
            sub = self.subs.get(sid)
            if isinstance(sub, MQTTSubscription):
                sub.backed = False

    def _subscribe_deliver(self, sub: ConsumerSubscription) -> None:
        self.account.sublist.insert(sub)
        self.subs[sub.sid] = sub

    def subscribe_pubrel(self) -> bool:
        """The session's PUBREL consumer and the subscription on its deliver subject
        (ensurePubRelConsumerSubscription)."""
        consumers = self.consumers
        if consumers is None or not consumers.ensure_pubrel():
            return False
        deliver = consumers.pubrel_deliver
        if deliver.encode() not in self.subs:
            self._subscribe_deliver(
                ConsumerSubscription(self, deliver, consumers.pubrel_durable, None)
            )
            consumers.interest(consumers.pubrel_durable, pubrel=True)
        return True

    def _process_unsubscribe(self, packet: p.Unsubscribe) -> None:
        codes: list[int] = []
        for topic_filter in packet.filters:
            removed = len(self.subs)
            shared = v5.shared_filter(topic_filter) if self.version == p.MQTT_5 else None
            prefix = b""
            if shared is not None:
                prefix = b"$share " + shared[0] + b" "
                topic_filter = shared[1]
            try:
                subject = filter_to_subject(topic_filter)
            except TopicError:
                codes.append(v5.NO_SUBSCRIPTION_EXISTED)
                continue
            sids = [prefix + subject]
            level_up = level_up_subject(subject)
            if level_up is not None and self.version == p.MQTT_5:
                # nats-server 2.15.1 hands "foo fwc" to processUnsub, which reads it as a sid
                # and a count and fails: under MQTT 3.1.1 the parent level stays subscribed,
                # as there. MQTT 5 is ours: the whole filter goes.
                sids.append(prefix + level_up + LEVEL_UP_SID_SUFFIX)
            for sid in sids:
                sub = self.subs.get(sid)
                if sub is not None:
                    self.unsubscribe(sub)
                    self._unback(sid)
            codes.append(0 if len(self.subs) < removed else v5.NO_SUBSCRIPTION_EXISTED)
        self.mqtt.subscriptions_changed(self)
        if self.version == p.MQTT_5:
            self.outbound.push(frames.unsuback(packet.packet_id, codes, {}))
        else:
            self.outbound.push(frames.unsuback(packet.packet_id))

    # -- delivery (server.delivery.Receiver) -----------------------------------------------------

    @property
    def plain(self) -> bool:
        return False  # frames are PUBLISH packets, never planned MSG lines

    def deliver(self, sub: Subscription, msg: Pub, publisher: Receiver | None) -> None:
        if type(sub) is ConsumerSubscription:
            self._deliver_stored(sub, msg)
            return
        assert isinstance(sub, MQTTSubscription)
        delivery = as_publish(sub, msg, publisher)
        if delivery is None:
            return
        if self.version != p.MQTT_5:
            self.send_publish(*delivery, False)
            return
        if sub.options & p.SUB_NO_LOCAL and publisher is self:
            return
        topic, payload, qos = delivery
        header = msg.payload[: msg.header_size] if msg.header_size > 0 else b""
        reply = msg.reply
        properties = v5.delivery_properties(
            header, reply, subject_to_topic(reply) if reply else b""
        )
        if properties is None:
            return  # its message expiry interval has passed
        if sub.identifier:
            properties[props.SUBSCRIPTION_IDENTIFIER] = [sub.identifier]
        retain = (
            bool(sub.options & p.SUB_RETAIN_AS_PUBLISHED)
            and isinstance(publisher, MQTTSession)
            and publisher.publishing_retain
        )
        self.send_publish(topic, payload, qos, retain, properties)

    def _deliver_stored(self, sub: ConsumerSubscription, msg: Pub) -> None:
        """A consumer's delivery: a QoS 1/2 message from `$MQTT_msgs`, sent with the packet
        id it had and DUP when JetStream delivers it again (mqttDeliverMsgCbQoS12); or a
        PUBREL waiting for PUBCOMP (mqttDeliverPubRelCb)."""
        consumers = self.consumers
        if consumers is None or not msg.reply:
            return
        header_size = msg.header_size
        header = msg.payload[:header_size] if header_size > 0 else b""
        target = sub.filter
        if target is None:
            packet_id = int(header_fields(header).get(PUBREL_HEADER, b"0") or b"0")
            if packet_id:
                self.inflight.pubrel[packet_id] = msg.reply
                self.outbound.push(frames.pub_response(p.PUBREL, packet_id))
            return
        if target.queue and not consumers.takes_shared(sub.durable, msg.reply):
            return  # another member of the shared subscription's group takes it
        subject = msg.subject[len(MESSAGES_PREFIX) :]
        qos = min(message_qos(header), target.qos) if header else 0
        if not subject or not qos:
            return
        if target.reserved and subject[:1] == b"$":
            consumers.store.ack(msg.reply)
            return
        properties: p.Properties | None = None
        retain = False
        if self.version == p.MQTT_5:
            origin, retained, response_topic = v5.stored_origin(header)
            properties = v5.delivery_properties(header, b"", response_topic)
            if properties is None or (
                target.options & p.SUB_NO_LOCAL and origin == self.client_id.encode()
            ):
                consumers.store.ack(msg.reply)  # expired, or its own message under No Local
                return
            retain = retained and bool(target.options & p.SUB_RETAIN_AS_PUBLISHED)
            if target.identifier:
                properties[props.SUBSCRIPTION_IDENTIFIER] = [target.identifier]
        packet_id, dup = self.inflight.track_stored(sub.durable, msg.reply)
        if not packet_id:
            return  # max_ack_pending in flight: the consumer sends it again later
        payload = msg.payload[header_size:] if header_size > 0 else msg.payload
        self.stats.sent(1, len(payload))
        topic = subject_to_topic(subject)
        head = self._publish_head(topic, len(payload), qos, retain, dup, packet_id, properties)
        self.outbound.push(head + payload)

    def _process_pubrec(self, packet_id: int) -> None:
        """PUBREC: a consumer's delivery is acknowledged and its PUBREL stored in
        `$MQTT_out` for the PUBREL consumer to send (mqttProcessPublishReceived); a message
        tracked in memory gets its PUBREL now."""
        ack = self.inflight.received(packet_id)
        consumers = self.consumers
        if ack is None or consumers is None:
            self.outbound.push(frames.pub_response(p.PUBREL, packet_id))
            return
        consumers.store.store_pubrel(consumers.id_hash, packet_id)
        consumers.store.ack(ack)

    def send_retained(
        self, subject: bytes, packet: p.Publish, header: bytes, sub: MQTTSubscription
    ) -> None:
        """A retained message for a new subscription, with the retain flag."""
        properties = None
        if self.version == p.MQTT_5:
            properties = v5.delivery_properties(header, b"", b"")
            if properties is None:
                return
            if sub.identifier:
                properties[props.SUBSCRIPTION_IDENTIFIER] = [sub.identifier]
        qos = min(packet.qos, sub.qos)
        self.send_publish(subject_to_topic(subject), packet.payload, qos, True, properties)

    def send_publish(
        self,
        topic: bytes,
        payload: bytes,
        qos: int,
        retain: bool,
        properties: p.Properties | None = None,
    ) -> None:
        """Write one PUBLISH to the client; QoS 1 and 2 are tracked until acknowledged."""
        self.stats.sent(1, len(payload))
        if properties is None and self.version == p.MQTT_5:
            properties = {}
        if qos == 0:
            head = self._publish_head(topic, len(payload), 0, retain, False, 0, properties)
            self.outbound.push(head + payload)
            return
        packet_id = self.inflight.track(topic, payload, qos, retain, properties)
        if packet_id:
            head = self._publish_head(
                topic, len(payload), qos, retain, False, packet_id, properties
            )
            self.outbound.push(head + payload)
            self._arm_redelivery()

    def _publish_head(
        self,
        topic: bytes,
        size: int,
        qos: int,
        retain: bool,
        dup: bool,
        packet_id: int,
        properties: p.Properties | None,
    ) -> bytes:
        """A PUBLISH head for this client: toward an MQTT 5 client that accepts topic
        aliases, the topic goes once with an alias and then as the alias alone."""
        aliases = self.server_aliases
        if aliases is not None and properties is not None:
            topic, properties = aliases.apply(topic, properties)
        return frames.publish_head(topic, size, qos, retain, dup, packet_id, properties)

    def _send_backlog(self) -> None:
        for packet_id, entry in self.inflight.release_backlog():
            head = self._publish_head(
                entry.topic,
                len(entry.payload),
                entry.qos,
                entry.retain,
                False,
                packet_id,
                entry.properties,
            )
            self.outbound.push(head + entry.payload)
        self._arm_redelivery()

    def _arm_redelivery(self) -> None:
        if not self.inflight.timer_armed and self.inflight.pending:
            self.inflight.arm(self.server.loop, self.mqtt.options.ack_wait, self._redeliver)

    def _redeliver(self) -> None:
        """Messages not acknowledged within ack_wait go again with DUP set, as nats-server's
        JetStream consumers redeliver them."""
        if self.closed:
            return
        for packet_id, entry in self.inflight.expired(self.mqtt.options.ack_wait):
            if entry.released:
                self.outbound.push(frames.pub_response(p.PUBREL, packet_id))
            else:
                head = self._publish_head(
                    entry.topic,
                    len(entry.payload),
                    entry.qos,
                    entry.retain,
                    True,
                    packet_id,
                    entry.properties,
                )
                self.outbound.push(head + entry.payload)
        self._arm_redelivery()
        self._write_touched()

    # -- errors go nowhere: MQTT has no -ERR -----------------------------------------------------

    def send_err(self, text: str) -> None:
        pass

    def close_with_error(self, text: str, reason: str) -> None:
        self.close(reason)

    @property
    def mqtt_client(self) -> str:
        """The client id, /connz's `mqtt_client`."""
        return self.client_id


def as_publish(
    sub: MQTTSubscription, msg: Pub, publisher: Receiver | None
) -> tuple[bytes, bytes, int] | None:
    """A NATS message as the topic, payload and QoS of a PUBLISH to `sub`'s client
    (mqttDeliverMsgCbQoS0/QoS12), or None when nats-server would not deliver it: at the lower
    of the message's QoS (its `Nmqtt-Pub` header; 0 for NATS publishers) and the
    subscription's, never to a wildcard-first filter when the topic starts with `$`."""
    subject = msg.subject
    if sub.reserved and subject[:1] == b"$":
        return None
    payload = msg.payload
    header_size = msg.header_size
    qos = 0
    if header_size > 0:
        if sub.qos:
            qos = min(message_qos(payload[:header_size]), sub.qos)
            if qos and (sub.backed or not isinstance(publisher, MQTTSession)):
                # nats-server delivers QoS 1/2 from its `$MQTT_msgs` stream, where only MQTT
                # publishes are stored (a backed subscription's consumer brings them): a NATS
                # message claiming QoS 1 reaches no QoS 1 subscription.
                return None
        payload = payload[header_size:]
    return subject_to_topic(subject), payload, qos


def _type_of(packet: p.Packet) -> int:
    for code, name in _PACKET_TYPES.items():
        if isinstance(packet, name):
            return code >> 4
    return 0


_PACKET_TYPES: dict[int, type] = {
    p.CONNECT: p.Connect,
    p.CONNACK: p.ConnAck,
    p.PUBLISH: p.Publish,
    p.PUBACK: p.PubAck,
    p.PUBREC: p.PubRec,
    p.PUBREL: p.PubRel,
    p.PUBCOMP: p.PubComp,
    p.SUBSCRIBE: p.Subscribe,
    p.SUBACK: p.SubAck,
    p.UNSUBSCRIBE: p.Unsubscribe,
    p.UNSUBACK: p.UnsubAck,
    p.PINGREQ: p.PingReq,
    p.PINGRESP: p.PingResp,
    p.DISCONNECT: p.Disconnect,
}
