"""The MQTT part: its listener, and what MQTT keeps per account (sessions, retained messages).

Corresponds to nats-server's `startMQTT`, `createMQTTClient` and the account session manager
(`mqttAccountSessionManager`) of `server/mqtt.go`. The server core knows it as a `ServerPart`
attached by `pynatsd.assembly`; its connections are `mqtt.session.MQTTSession`s.
"""

from __future__ import annotations

import asyncio
import hmac
import os
from typing import TYPE_CHECKING, Any

from pynatsd.auth import AuthResult
from pynatsd.logger import log
from pynatsd.mqtt import packets as p
from pynatsd.mqtt.session import DUPLICATE_CLIENT_ID, MQTTSession, MQTTSubscription
from pynatsd.mqtt.topics import subject_to_topic
from pynatsd.options import DEFAULT_HOST
from pynatsd.server.listen import bound_port, listen
from pynatsd.subjects import match_literal_bytes
from pynatsd.tls import listener_context

if TYPE_CHECKING:
    from pynatsd.options import MQTTOptions
    from pynatsd.server.accounts import Account
    from pynatsd.server.server import Server

_NUID_ALPHABET = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"


class MQTT:
    """The MQTT listener and its per-account state."""

    name = "mqtt"

    def __init__(self, server: Server) -> None:
        self.server = server
        options = server.options.mqtt
        assert options is not None
        self.options: MQTTOptions = options
        # nats-server's default, whatever the client listener's host (setBaselineOptions).
        self.host = options.host or DEFAULT_HOST
        self.port = 0
        self._listener: asyncio.Server | None = None
        # Connected sessions: (account, client id) -> session.
        self.sessions: dict[tuple[str, str], MQTTSession] = {}
        # Persistent sessions (clean session 0): (account, client id) -> {filter: QoS}.
        self.persistent: dict[tuple[str, str], dict[bytes, int]] = {}
        # Retained messages: account -> subject -> the PUBLISH that set it.
        self.retained: dict[str, dict[bytes, p.Publish]] = {}

    # -- ServerPart ------------------------------------------------------------------------------

    async def start(self) -> None:
        opts = self.options
        context = None
        if opts.tls_cert:
            context = listener_context(opts.tls_cert, opts.tls_key, opts.tls_ca_cert)
        port = 0 if opts.port == -1 else opts.port
        self._listener = await listen(
            self.server.loop,
            lambda: MQTTSession(self.server, self),
            self.host,
            port,
            lambda err: f"Unable to listen for MQTT connections: {err}",
            ssl=context,
        )
        self.port = bound_port(self._listener, port)
        scheme = "mqtts" if context is not None else "mqtt"
        log.info("Listening for MQTT clients on %s://%s:%d", scheme, self.host, self.port)

    async def stop(self) -> None:
        if self._listener is not None:
            self._listener.close()
            self._listener = None

    # -- connecting ------------------------------------------------------------------------------

    def authenticate(self, session: MQTTSession, connect: dict[str, Any]) -> AuthResult | None:
        """MQTT's own credentials when the block sets them (nats-server's authOverride), else
        the server's users, nkeys and tokens for the MQTT connection type."""
        opts = self.options
        user, password = connect.get("user", ""), connect.get("pass", "")
        if opts.username:
            ok = _same(user, opts.username) and _same(password, opts.password)
            return AuthResult(user, "$G", None, None, None, method="user") if ok else None
        if opts.token:
            ok = _same(password, opts.token)
            return AuthResult("[REDACTED]", "$G", None, None, None, method="token") if ok else None
        if opts.no_auth_user and not user and not password:
            connect = {**connect, "user": opts.no_auth_user}
            for configured in self.server.options.users:
                if configured.username == opts.no_auth_user:
                    connect["pass"] = configured.password
        return self.server.authenticator.check(connect, "", session.peer_cert, "MQTT", session.host)

    def new_client_id(self) -> str:
        """An id for a client that sent none (nats-server's nuid.Next())."""
        raw = os.urandom(22)
        return "".join(_NUID_ALPHABET[b % len(_NUID_ALPHABET)] for b in raw)

    def attach_session(self, session: MQTTSession, clean: bool) -> bool:
        """Bind the client id to this connection: an older connection with the same id is
        closed without its will [MQTT-3.1.4-2]; a clean session drops the stored one. True
        when a stored session is resumed (CONNACK's session present)."""
        key = (session.account.name, session.client_id)
        old = self.sessions.get(key)
        if old is not None and old is not session:
            old.will = None
            log.warning(
                '%s - Replacing old client %s since both have the same client ID "%s"',
                session.label,
                old.label,
                session.client_id,
            )
            old.close(DUPLICATE_CLIENT_ID)
        self.sessions[key] = session
        if clean:
            self.persistent.pop(key, None)
            return False
        present = key in self.persistent
        self.persistent.setdefault(key, {})
        return present

    def restore_subscriptions(self, session: MQTTSession) -> None:
        """A resumed session's subscriptions, made again on the new connection."""
        filters = self.persistent.get((session.account.name, session.client_id))
        if not filters:
            return
        packet = p.Subscribe(1, tuple(filters.items()))
        added: list[MQTTSubscription] = []
        for topic_filter, qos in packet.filters:
            session._subscribe(topic_filter, qos, added)

    def subscriptions_changed(self, session: MQTTSession) -> None:
        key = (session.account.name, session.client_id)
        if key in self.persistent:
            self.persistent[key] = {
                sub.topic_filter: sub.qos
                for sub in session.subs.values()
                if isinstance(sub, MQTTSubscription)
            }

    def session_closed(self, session: MQTTSession) -> None:
        key = (session.account.name, session.client_id)
        if self.sessions.get(key) is session:
            del self.sessions[key]

    # -- retained messages -----------------------------------------------------------------------

    def retain(self, account: Account, subject: bytes, packet: p.Publish) -> None:
        """Keep `packet` as the subject's retained message; an empty one clears it."""
        retained = self.retained.setdefault(account.name, {})
        if packet.payload:
            retained[subject] = packet
        else:
            retained.pop(subject, None)

    def send_retained(self, session: MQTTSession, sub: MQTTSubscription) -> None:
        """The retained messages a new subscription matches, with the retain flag."""
        retained = self.retained.get(session.account.name)
        if not retained:
            return
        for subject, packet in retained.items():
            if sub.reserved and subject[:1] == b"$":
                continue
            if match_literal_bytes(subject, sub.subject_bytes):
                qos = min(packet.qos, sub.qos)
                session.send_publish(subject_to_topic(subject), packet.payload, qos, True)


def _same(given: str, expected: str) -> bool:
    return hmac.compare_digest(given.encode(), expected.encode())
