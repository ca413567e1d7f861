"""Whether anyone still uses a consumer: a push consumer's interest in its deliver subject,
and the timer that deletes a consumer nobody used for its inactive threshold.

From nats-server's `server/consumer.go`: updateDeliveryInterest, deleteNotActive and the
activity that restarts the countdown (a pull request, a delivery to one, an ack). What this
needs of its consumer is a `LivenessOwner`; it reads the `PullQueue` and the `Redelivery`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

from pynatsd.jetstream.consumer.ports import ConsumerHost
from pynatsd.jetstream.consumer.state import NS
from pynatsd.jetstream.util import now_ns
from pynatsd.logger import log

if TYPE_CHECKING:
    import asyncio

    from pynatsd.jetstream.consumer.ports import ConsumedStream
    from pynatsd.jetstream.consumer.redelivery import Redelivery
    from pynatsd.jetstream.consumer.state import ConsumerState
    from pynatsd.jetstream.consumer.waiting import PullQueue
    from pynatsd.jetstream.consumer_config import ConsumerConfig


class InterestHost(ConsumerHost, Protocol):
    """What liveness uses of the account's JetStream beyond a `ConsumerHost`."""

    def has_delivery_interest(self, subject: str, group: str) -> bool: ...

    def delete_consumer(self, stream: Any, name: str) -> bool: ...


class LivenessOwner(Protocol):
    """What liveness uses of its consumer."""

    active: bool  # a push consumer's deliver subject has interest (set here, read by others)

    @property
    def name(self) -> str: ...

    @property
    def closed(self) -> bool: ...

    @property
    def config(self) -> ConsumerConfig: ...

    @property
    def push(self) -> bool: ...

    @property
    def dthresh(self) -> int:
        """The inactive threshold (ns, 0: never deleted for it)."""

    @property
    def stream(self) -> ConsumedStream: ...

    @property
    def ajs(self) -> InterestHost: ...

    @property
    def state(self) -> ConsumerState: ...

    def signal(self) -> None: ...


class Liveness:
    """Interest in the deliver subject and the delete-when-inactive timer."""

    def __init__(self, owner: LivenessOwner, queue: PullQueue, redelivery: Redelivery) -> None:
        self._owner = owner
        self._queue = queue
        self._redelivery = redelivery
        self._dtmr: asyncio.TimerHandle | None = None  # Go's dtmr: delete-when-inactive timer

    def start(self) -> None:
        """Start following interest (push) or the inactivity countdown (pull)."""
        owner = self._owner
        if owner.push:
            owner.active = self.has_delivery_interest()
            if not owner.active:
                self.update_delivery_interest(False)
        elif owner.dthresh > 0:
            self._count_down(owner.dthresh)

    def _count_down(self, ns: int) -> None:
        self._dtmr = self._owner.ajs.loop.call_later(ns / NS, self._delete_not_active)

    def has_delivery_interest(self) -> bool:
        """Interest as nats-server's sublist notification sees it: a plain subscriber on the
        deliver subject, or a member of the deliver group when there is one, here or behind
        a stream import."""
        owner = self._owner
        ajs = owner.ajs
        config = owner.config
        group = config.deliver_group
        if ajs.account.stream_import_subs:
            return ajs.has_delivery_interest(config.deliver_subject, group)
        result = ajs.account.sublist.match(config.deliver_subject)
        if group:
            return any(g and g[0].queue == group for g in result.qsubs)
        return bool(result.psubs) or bool(result.qsubs)

    def interest_changed(self) -> None:
        """The account's subscriptions changed; called by the account's interest watcher."""
        owner = self._owner
        if owner.closed or not owner.push:
            return
        interest = self.has_delivery_interest()
        if interest != owner.active:
            self.update_delivery_interest(interest)

    def interest_lost(self) -> None:
        """A push delivery reached nobody: the consumer is not active after all."""
        self.update_delivery_interest(self.has_delivery_interest())

    def deliver_subject_changed(self) -> None:
        self._owner.active = self.has_delivery_interest()
        self.update_delivery_interest(self._owner.active)

    def update_delivery_interest(self, interest: bool) -> None:
        """Go's updateDeliveryInterest: track activity, run the delete timer meanwhile."""
        owner = self._owner
        was = owner.active
        owner.active = interest
        if self._dtmr is not None and owner.dthresh > 0 and not interest:
            return
        self.stop()
        if not interest and owner.dthresh > 0:
            self._count_down(owner.dthresh)
        if interest and not was:
            owner.signal()

    def threshold_changed(self) -> None:
        """The inactive threshold changed: count down afresh (not while a push consumer has
        interest)."""
        owner = self._owner
        self.stop()
        if owner.dthresh > 0 and not (owner.push and owner.active):
            self._count_down(owner.dthresh)

    def ack_activity(self) -> None:
        """Acks show activity: a pull consumer's delete countdown restarts from here."""
        owner = self._owner
        if not owner.push and owner.dthresh > 0 and self._dtmr is not None:
            self._dtmr.cancel()
            self._count_down(owner.dthresh)

    def _delete_not_active(self) -> None:
        """Go's deleteNotActive: an ephemeral (or a durable with inactive_threshold) that nobody
        used for the threshold goes away."""
        self._dtmr = None
        owner = self._owner
        if owner.closed:
            return
        dthresh = owner.dthresh
        if owner.push:
            if owner.active:
                return
        else:
            queue = self._queue
            elapsed = now_ns() - queue.waiting_last
            if elapsed < dthresh:
                self._count_down(dthresh - elapsed)
                return
            queue.process_waiting(eos=True)
            if queue.requests:
                self._count_down(dthresh)
                return
            now = now_ns()
            delay = 0
            for seq, p in owner.state.pending.items():
                due = p.ts + self._redelivery.ack_wait_for(seq) + dthresh
                delay = max(delay, due - now)
            if delay > 0:
                self._count_down(delay)
                return
        stream = owner.stream
        log.debug("JetStream consumer %s > %s inactive, deleting", stream.name, owner.name)
        owner.ajs.delete_consumer(stream, owner.name)

    def stop(self) -> None:
        if self._dtmr is not None:
            self._dtmr.cancel()
        self._dtmr = None
