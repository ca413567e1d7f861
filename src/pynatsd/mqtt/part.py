"""The MQTT part: its listener, and what MQTT keeps per account (sessions, retained messages).

Corresponds to nats-server's `startMQTT`, `createMQTTClient` and the account session manager
(`mqttAccountSessionManager`) of `server/mqtt.go`. The server core knows it as a `ServerPart`
attached by `pynatsd.assembly`; its connections are `mqtt.session.MQTTSession`s.
"""

from __future__ import annotations

import asyncio
import hmac
import ssl
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from pynatsd.auth import AuthResult
from pynatsd.logger import log
from pynatsd.mqtt import packets as p
from pynatsd.mqtt import v5
from pynatsd.mqtt.consumers import SessionConsumers, delete_session_consumers, nuid
from pynatsd.mqtt.offline import OfflineSession
from pynatsd.mqtt.remote_store import RemoteAccountStore, remote_domain
from pynatsd.mqtt.session import DUPLICATE_CLIENT_ID, MQTTSession, MQTTSubscription
from pynatsd.mqtt.store import AccountStore, StoredSession
from pynatsd.mqtt.tls import TLSMQTTSession
from pynatsd.options import DEFAULT_HOST
from pynatsd.server.listen import bound_port, listen
from pynatsd.subjects import match_literal_bytes
from pynatsd.tls import listener_context

if TYPE_CHECKING:
    from pynatsd.options import MQTTOptions
    from pynatsd.server.accounts import Account
    from pynatsd.server.server import Server

# MQTT 5: a Session Expiry Interval of 0xFFFFFFFF never expires.
NEVER_EXPIRES = 0xFFFFFFFF


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
        # What MQTT keeps per account, made on an account's first MQTT connection.
        self.accounts: dict[str, AccountState] = {}

    # -- ServerPart ------------------------------------------------------------------------------

    async def start(self) -> None:
        opts = self.options
        context = tls_context(opts)
        port = 0 if opts.port == -1 else opts.port
        self._listener = await listen(
            self.server.loop,
            self._session_factory(context),
            self.host,
            port,
            lambda err: f"Unable to listen for MQTT connections: {err}",
        )
        self.port = bound_port(self._listener, port)
        scheme = "mqtts" if context is not None else "mqtt"
        log.info("Listening for MQTT clients on %s://%s:%d", scheme, self.host, self.port)
        self.server.websocket_mqtt = self._websocket_session

    async def stop(self) -> None:
        if self.server.websocket_mqtt == self._websocket_session:
            self.server.websocket_mqtt = None
        if self._listener is not None:
            self._listener.close()
            self._listener = None
        for state in self.accounts.values():
            state.store.close()

    def _session_factory(self, context: ssl.SSLContext | None) -> Callable[[], MQTTSession]:
        """What each connection to the MQTT port is: a session, with its own TLS when the
        block has a `tls {}`."""
        if context is None:
            return lambda: MQTTSession(self.server, self)
        return lambda: TLSMQTTSession(self.server, self, context)

    def _websocket_session(self) -> MQTTSession:
        """An MQTT client on the websocket listener's `/mqtt` path: TLS, if any, is that
        listener's (nats-server's createMQTTClient with a websocket)."""
        session = MQTTSession(self.server, self)
        session.websocket = True
        return session

    # -- connecting ------------------------------------------------------------------------------

    def authenticate(self, session: MQTTSession, connect: dict[str, Any]) -> AuthResult | None:
        """MQTT's own credentials when the block sets them (nats-server's authOverride), else
        the server's users, nkeys and tokens for the MQTT connection type (MQTT_WS over a
        websocket), with the MQTT listener's verify_and_map in place of the client
        listener's."""
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
        conn_type = "MQTT_WS" if session.websocket else "MQTT"
        return self.server.authenticator.check(
            connect, "", session.peer_cert, conn_type, session.host, tls_map=opts.tls_map
        )

    def new_client_id(self) -> str:
        """An id for a client that sent none (nats-server's nuid.Next())."""
        return nuid()

    def _state(self, account: Account) -> AccountState:
        """The account's MQTT state, its streams made (or found) on first use."""
        state = self.accounts.get(account.name)
        if state is None:
            domain = remote_domain(self.server)
            store = (
                RemoteAccountStore(self.server, account, domain)
                if domain
                else AccountStore(self.server, account)
            )
            state = self.accounts[account.name] = AccountState(store)
        return state

    def take_pending(self, session: MQTTSession) -> list[asyncio.Future[Any]]:
        """The replies of a remote JetStream the session waits for (`after_store`)."""
        state = self.accounts.get(session.account.name)
        return [] if state is None else state.store.take_pending()

    def fetch_session(self, session: MQTTSession) -> None:
        """A client connects: what `attach_session` reads of its account's and its own
        stored state is read ahead when it is in a remote JetStream (`js_domain`)."""
        self._state(session.account).store.fetch_session(session.client_id)

    def attach_session(self, session: MQTTSession, clean: bool) -> bool:
        """Bind the client id to this connection: an older connection with the same id is
        closed without its will [MQTT-3.1.4-2]; a clean session drops the stored one. True
        when a stored session is resumed (CONNACK's session present)."""
        state = self._state(session.account)
        client_id = session.client_id
        store = state.store
        for subject, packet in store.take_loaded_retained().items():
            state.retained.setdefault(subject, (packet, b""))
        if store.enabled:
            session.consumers = SessionConsumers(store, client_id)
        old = state.connected.get(client_id)
        if old is not None and old is not session:
            if old.consumers is not None and not old.keep_session:
                old.consumers.drop_all()  # a clean session's consumers end with it
            old.will = None
            old.disconnect_v5(v5.SESSION_TAKEN_OVER)
            log.warning(
                '%s - Replacing old client %s since both have the same client ID "%s"',
                session.label,
                old.label,
                client_id,
            )
            old.close(DUPLICATE_CLIENT_ID)
        state.connected[client_id] = session
        offline = state.offline.pop(client_id, None)
        waiting = offline.resume() if offline is not None else []
        if offline is not None and offline.expiry is not None:
            offline.expiry.cancel()
        stored = state.persistent.pop(client_id, None)
        if stored is None:
            stored = store.load_session(client_id)
        if clean and stored is not None:
            delete_session_consumers(store, client_id, stored.cons)
            store.delete_session(client_id)
            stored, waiting = None, []
        if stored is not None and session.consumers is not None:
            session.consumers.by_sid = dict(stored.cons)
        if session.keep_session:
            kept = state.persistent[client_id] = stored or StoredSession()
            store.save_session(client_id, kept)
        elif stored is not None:
            # MQTT 5, resumed without a session expiry: the session ends with the connection.
            store.delete_session(client_id)
        state.resumed[client_id] = (stored or StoredSession(), waiting)
        return stored is not None

    def restore_subscriptions(self, session: MQTTSession) -> None:
        """A resumed session's subscriptions, made again on the new connection."""
        state = self._state(session.account)
        stored, waiting = state.resumed.pop(session.client_id, (StoredSession(), []))
        consumers = session.consumers
        if consumers is not None and consumers.has_pubrel_consumer():
            session.subscribe_pubrel()  # PUBRELs waiting for PUBCOMP go again
        for subject, qos in stored.subs.items():
            session.resubscribe(subject, qos, b"", stored.options)
        for (group, subject), qos in stored.shared.items():
            session.resubscribe(subject, qos, group, stored.options)
        for topic, payload, qos in waiting:
            session.send_publish(topic, payload, qos, False)
        if stored.subs or stored.shared:
            self.subscriptions_changed(session)

    def subscriptions_changed(self, session: MQTTSession) -> None:
        state = self._state(session.account)
        if session.client_id in state.persistent:
            consumers = session.consumers
            cons = {} if consumers is None else consumers.by_sid
            kept = StoredSession(
                session.filters(), cons, session.shared_filters(), session.subscription_options()
            )
            state.persistent[session.client_id] = kept
            state.store.save_session(session.client_id, kept)

    def session_closed(self, session: MQTTSession) -> None:
        state = self.accounts.get(session.account.name)
        if state is not None and state.connected.get(session.client_id) is session:
            del state.connected[session.client_id]
            if session.client_id not in state.persistent and session.consumers is not None:
                session.consumers.drop_all()  # a clean session's consumers end with it
            if session.client_id in state.persistent:
                session.leave_shared()
                offline = state.offline[session.client_id] = OfflineSession(session)
                expiry = session.session_expiry
                if expiry is not None and expiry < NEVER_EXPIRES:
                    offline.expiry = self.server.loop.call_later(
                        expiry, self._session_expired, state, session.client_id, offline
                    )

    def _session_expired(
        self, state: AccountState, client_id: str, offline: OfflineSession
    ) -> None:
        """An MQTT 5 session whose client stayed away longer than its Session Expiry Interval
        ends: its subscriptions, waiting messages and record go."""
        if state.offline.get(client_id) is not offline:
            return  # the client came back
        del state.offline[client_id]
        offline.resume()
        stored = state.persistent.pop(client_id, None)
        if stored is not None:
            delete_session_consumers(state.store, client_id, stored.cons)
        state.store.delete_session(client_id)

    # -- retained messages -----------------------------------------------------------------------

    def retain(self, account: Account, subject: bytes, packet: p.Publish, header: bytes) -> None:
        """Keep `packet` (and its NATS header block, for MQTT 5 properties) as the subject's
        retained message; an empty one clears it."""
        state = self._state(account)
        if packet.payload:
            state.retained[subject] = (packet, header)
        else:
            state.retained.pop(subject, None)
        state.store.store_retained(subject, packet)

    def send_retained(self, session: MQTTSession, sub: MQTTSubscription) -> None:
        """The retained messages a new subscription matches, with the retain flag."""
        for subject, (packet, header) in self._state(session.account).retained.items():
            if sub.reserved and subject[:1] == b"$":
                continue
            if match_literal_bytes(subject, sub.subject_bytes):
                session.send_retained(subject, packet, header, sub)


class AccountState:
    """MQTT in one account (nats-server's mqttAccountSessionManager)."""

    def __init__(self, store: AccountStore) -> None:
        self.store = store
        # Connected sessions by client id.
        self.connected: dict[str, MQTTSession] = {}
        # Persistent sessions (clean session 0): client id -> its filters and consumers.
        self.persistent: dict[str, StoredSession] = {}
        # Persistent sessions whose client is away, and what they kept for it
        # (mqtt.offline), until the client's CONNACK is out.
        self.offline: dict[str, OfflineSession] = {}
        # A session being resumed: its record and waiting messages, until restored.
        self.resumed: dict[str, tuple[StoredSession, list[tuple[bytes, bytes, int]]]] = {}
        # Retained messages: subject -> the PUBLISH that set it and its NATS header block.
        self.retained: dict[bytes, tuple[p.Publish, bytes]] = {
            subject: (packet, b"") for subject, packet in store.load_retained().items()
        }


def tls_context(opts: MQTTOptions) -> ssl.SSLContext | None:
    """The MQTT listener's TLS (its `tls {}` block, None without one): `verify` and
    `verify_and_map` require a client certificate the CA file verifies (Go's
    RequireAndVerifyClientCert), as nats-server's GenTLSConfig."""
    if not opts.tls_cert:
        return None
    context = listener_context(opts.tls_cert, opts.tls_key, opts.tls_ca_cert)
    if opts.tls_verify or opts.tls_map:
        context.verify_mode = ssl.CERT_REQUIRED
        if not opts.tls_ca_cert:
            context.load_default_certs(ssl.Purpose.CLIENT_AUTH)
    return context


def _same(given: str, expected: str) -> bool:
    return hmac.compare_digest(given.encode(), expected.encode())
