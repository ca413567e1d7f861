"""The JetStream consumers behind one MQTT session's QoS 1/2 subscriptions.

Corresponds to nats-server's `mqttSession.processJSConsumer`, `ensurePubRelConsumerSubscription`
and `deleteConsumer` (server/mqtt.go): every QoS 1/2 subscription (its sid, so `foo/#` has two)
reads `$MQTT_msgs` through a durable consumer named `<client id hash>_<nuid>` that delivers to
`$MQTT.sub.<nuid>`; a session with a QoS 2 subscription has one more, `$MQTT_PUBREL_<hash>` on
`$MQTT_out`, delivering to `$MQTT.deliver.pubrel.<hash>` the PUBRELs waiting for PUBCOMP. The
consumers outlive the connection of a persistent session (their names are in its record) and
go with a clean one. The connection subscribes to the deliver subjects with a
`ConsumerSubscription`, which `MQTTSession.deliver` tells apart from a filter's subscription.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from pynatsd.mqtt.store import (
    MESSAGES,
    MESSAGES_PREFIX,
    OUT,
    PUBREL_DELIVER_PREFIX,
    PUBREL_DURABLE_PREFIX,
    PUBREL_PREFIX,
    SUB_DELIVER_PREFIX,
    client_id_hash,
)
from pynatsd.server.subscription import Subscription

if TYPE_CHECKING:
    from pynatsd.mqtt.session import MQTTSubscription
    from pynatsd.mqtt.store import AccountStore
    from pynatsd.server.delivery import Receiver

_NUID_ALPHABET = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"


def nuid() -> str:
    """22 base-62 characters, as nats-server's nuid.Next()."""
    return "".join(_NUID_ALPHABET[b % 62] for b in os.urandom(22))


class ConsumerSubscription(Subscription):
    """The connection's subscription on a consumer's deliver subject: `filter` is the
    subscription whose messages it delivers (its QoS, identifier), None for the PUBREL
    consumer's."""

    __slots__ = ("durable", "filter")

    def __init__(
        self, owner: Receiver, deliver: str, durable: str, filter_sub: MQTTSubscription | None
    ) -> None:
        subject = deliver.encode()
        super().__init__(owner, subject, b"", subject)
        self.durable = durable
        self.filter = filter_sub


class SessionConsumers:
    """One session's consumers: sid -> (durable name, deliver subject)."""

    __slots__ = ("by_sid", "id_hash", "pubrel", "store")

    def __init__(self, store: AccountStore, client_id: str) -> None:
        self.store = store
        self.id_hash = client_id_hash(client_id)
        self.by_sid: dict[bytes, tuple[str, str]] = {}
        self.pubrel = False

    @property
    def pubrel_durable(self) -> str:
        return PUBREL_DURABLE_PREFIX + self.id_hash

    @property
    def pubrel_deliver(self) -> str:
        return PUBREL_DELIVER_PREFIX + self.id_hash

    def ensure(self, sid: bytes, subject: bytes) -> tuple[str, str] | None:
        """The consumer of a QoS 1/2 subscription (made when missing, under the name its
        session had): None when JetStream refuses it."""
        known = self.by_sid.get(sid)
        if known is None:
            known = (f"{self.id_hash}_{nuid()}", SUB_DELIVER_PREFIX + nuid())
        durable, deliver = known
        filter_subject = MESSAGES_PREFIX + subject.decode("utf-8", "surrogateescape")
        if self.store.consumer(MESSAGES, durable, deliver, filter_subject) is None:
            return None
        self.by_sid[sid] = known
        return known

    def ensure_pubrel(self) -> bool:
        durable = self.pubrel_durable
        made = self.store.consumer(OUT, durable, self.pubrel_deliver, PUBREL_PREFIX + self.id_hash)
        self.pubrel = made is not None
        return self.pubrel

    def drop(self, sid: bytes) -> str:
        """The subscription is gone or QoS 0 now: its consumer goes; its durable name."""
        known = self.by_sid.pop(sid, None)
        if known is None:
            return ""
        self.store.delete_consumer(MESSAGES, known[0])
        return known[0]

    def drop_all(self) -> None:
        """The session ends: every consumer goes (nats-server's mqttSession.clear)."""
        for sid in list(self.by_sid):
            self.drop(sid)
        self.store.delete_consumer(OUT, self.pubrel_durable)
        self.pubrel = False

    def interest(self, durable: str, pubrel: bool = False) -> None:
        self.store.consumer_interest(OUT if pubrel else MESSAGES, durable)

    def has_pubrel_consumer(self) -> bool:
        return self.store.has_consumer(OUT, self.pubrel_durable)


def delete_session_consumers(
    store: AccountStore, client_id: str, cons: dict[bytes, tuple[str, str]]
) -> None:
    """A stored session ends (clean session, expiry): its consumers go."""
    consumers = SessionConsumers(store, client_id)
    consumers.by_sid = dict(cons)
    consumers.drop_all()
