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

from pynatsd.mqtt.inflight import ack_reply_info
from pynatsd.mqtt.store import (
    MESSAGES,
    MESSAGES_PREFIX,
    OUT,
    PUBREL_DELIVER_PREFIX,
    PUBREL_DURABLE_PREFIX,
    PUBREL_PREFIX,
    SHARED_DURABLE_PREFIX,
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

    __slots__ = ("by_sid", "client_id", "id_hash", "pubrel", "shared_by_sid", "store")

    def __init__(self, store: AccountStore, client_id: str) -> None:
        self.store = store
        self.client_id = client_id
        self.id_hash = client_id_hash(client_id)
        self.by_sid: dict[bytes, tuple[str, str]] = {}
        # MQTT 5 shared subscriptions this session is a member of: sid -> the group's
        # consumer (durable name, deliver subject), which it shares with the other members.
        self.shared_by_sid: dict[bytes, tuple[str, str]] = {}
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

    def ensure_shared(self, sid: bytes, group: bytes, subject: bytes) -> tuple[str, str] | None:
        """The consumer of an MQTT 5 shared subscription at QoS 1/2: one per group and filter
        in the account, named after both, delivering to a subject every member subscribes
        to; each delivery is taken by one of them (`takes_shared`). None when JetStream
        refuses it."""
        key = client_id_hash(f"{group.decode(errors='replace')} {subject.decode(errors='replace')}")
        durable = SHARED_DURABLE_PREFIX + key
        deliver = SUB_DELIVER_PREFIX + SHARED_DURABLE_PREFIX + key
        filter_subject = MESSAGES_PREFIX + subject.decode("utf-8", "surrogateescape")
        if self.store.consumer(MESSAGES, durable, deliver, filter_subject) is None:
            return None
        self.store.shared_members.setdefault(durable, set()).add(self.client_id)
        self.shared_by_sid[sid] = (durable, deliver)
        return durable, deliver

    def takes_shared(self, durable: str, reply: bytes) -> bool:
        """Whether this member takes a shared consumer's delivery (its ack subject `reply`):
        the members in turn by stream sequence, and a redelivery goes to the next one (so a
        member that does not acknowledge does not keep the message)."""
        members = self.store.shared_members.get(durable)
        if not members or len(members) < 2:
            return True
        seq, count = ack_reply_info(reply)
        return sorted(members)[(seq + count) % len(members)] == self.client_id

    def leave_shared(self, sid: bytes) -> str:
        """This session leaves a shared subscription: the group's consumer goes with its last
        member; its durable name."""
        known = self.shared_by_sid.pop(sid, None)
        if known is None:
            return ""
        durable = known[0]
        members = self.store.shared_members.get(durable, set())
        members.discard(self.client_id)
        if not members:
            self.store.shared_members.pop(durable, None)
            self.store.delete_consumer(MESSAGES, durable)
        return durable

    def ensure_pubrel(self) -> bool:
        durable = self.pubrel_durable
        made = self.store.consumer(OUT, durable, self.pubrel_deliver, PUBREL_PREFIX + self.id_hash)
        self.pubrel = made is not None
        return self.pubrel

    def drop(self, sid: bytes) -> str:
        """The subscription is gone or QoS 0 now: its consumer goes; its durable name."""
        if sid in self.shared_by_sid:
            return self.leave_shared(sid)
        known = self.by_sid.pop(sid, None)
        if known is None:
            return ""
        self.store.delete_consumer(MESSAGES, known[0])
        return known[0]

    def drop_all(self) -> None:
        """The session ends: every consumer goes (nats-server's mqttSession.clear)."""
        for sid in [*self.by_sid, *self.shared_by_sid]:
            self.drop(sid)
        self.store.delete_consumer(OUT, self.pubrel_durable)
        self.pubrel = False

    def interest(self, durable: str, pubrel: bool = False) -> None:
        self.store.consumer_interest(OUT if pubrel else MESSAGES, durable)

    def interest_all(self) -> None:
        """The connection ended: its consumers learn now that nobody reads their deliver
        subjects (a message they pushed meanwhile would wait out its ack_wait)."""
        for durable, _ in self.by_sid.values():
            self.store.consumer_interest(MESSAGES, durable)
        self.store.consumer_interest(OUT, self.pubrel_durable)

    def has_pubrel_consumer(self) -> bool:
        return self.store.has_consumer(OUT, self.pubrel_durable)


def delete_session_consumers(
    store: AccountStore, client_id: str, cons: dict[bytes, tuple[str, str]]
) -> None:
    """A stored session ends (clean session, expiry): its consumers go."""
    consumers = SessionConsumers(store, client_id)
    consumers.by_sid = dict(cons)
    consumers.drop_all()
