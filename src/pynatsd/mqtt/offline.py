"""A persistent session while its client is away: its subscriptions stay, and the QoS 1 and 2
messages they match wait for the client to come back.

nats-server keeps them in its `$MQTT_msgs` stream through a durable consumer per QoS 1/2
subscription (`processJSConsumer` in server/mqtt.go) and delivers them when the session
resumes. pynatsd keeps them in memory: they wait for a reconnection, not for a restart.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from pynatsd.auth import PermissionChecker
from pynatsd.mqtt.session import MQTTSession, MQTTSubscription, as_publish
from pynatsd.server.delivery import Stats

if TYPE_CHECKING:
    from pynatsd.protocol.events import Pub
    from pynatsd.server.accounts import Account
    from pynatsd.server.delivery import Receiver
    from pynatsd.server.outbound import Outbound
    from pynatsd.server.subscription import Subscription


class OfflineSession:
    """The receiver of a persistent session's subscriptions between two connections."""

    cid = 0
    outbound: Outbound | None = None
    plain = False

    def __init__(self, session: MQTTSession) -> None:
        self.account: Account = session.account
        self.perms: PermissionChecker = session.perms
        self.closed = False
        self.echo = True
        self.headers = True
        self.stats = Stats()
        # (topic, payload, QoS) waiting for the client, oldest first.
        self.queued: list[tuple[bytes, bytes, int]] = []
        self.subs: list[MQTTSubscription] = []
        # MQTT 5: the timer that ends the session when its expiry interval passes.
        self.expiry: asyncio.TimerHandle | None = None
        for sid, sub in session.subs.items():
            if isinstance(sub, MQTTSubscription):
                kept = MQTTSubscription(self, sub.subject_bytes, sid, sub.qos, sub.queue_bytes)
                self.account.sublist.insert(kept)
                self.subs.append(kept)

    def deliver(self, sub: Subscription, msg: Pub, publisher: Receiver | None) -> None:
        assert isinstance(sub, MQTTSubscription)
        delivery = as_publish(sub, msg, publisher)
        if delivery is not None and delivery[2] > 0:
            self.queued.append(delivery)

    def unsubscribe(self, sub: Subscription) -> None:
        if not sub.closed:
            sub.closed = True
            self.account.sublist.remove(sub)

    def resume(self) -> list[tuple[bytes, bytes, int]]:
        """The client is back: the subscriptions go, the queued messages are handed over."""
        self.closed = True
        for sub in self.subs:
            sub.closed = True
        if self.subs:
            self.account.sublist.remove_batch(self.subs)
        queued, self.queued = self.queued, []
        return queued
