"""A JetStream consumer: the one face of its parts, its lifecycle and its state on disk.

A port of nats-server's `server/consumer.go` to one event loop. `Consumer` holds its parts,
each a small object with one job that gets from the consumer only what the protocol in its
module names: `state` (state.py: the sequences, the ack floor and what is pending, saved and
reported), `acks` (acks.py: what an ack does), `redelivery` (redelivery.py: the ack wait,
the redelivery queue, max_deliver), `queue` (waiting.py: pull
requests), `priority` (priority.py: priority groups of pull requests), `count` (count.py: the
messages not yet delivered), `reader` (reader.py: which message next), `flow` (flow.py: a push
consumer's flow control and heartbeats), `pump` (pump.py: the delivery loop), `reset`
(reset.py: CONSUMER.RESET) and `liveness` (liveness.py: interest in a push consumer's deliver
subject, deletion when inactive); `start.py` picks where a new consumer starts and
`consumer_config.py` says what the configuration means. This module starts and stops a
consumer, restores and saves its state, and answers for it (info, updates, pause, stream
purges).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from pynatsd.jetstream import advisories
from pynatsd.jetstream.consumer.acks import AckTracker
from pynatsd.jetstream.consumer.count import PendingCount
from pynatsd.jetstream.consumer.flow import PushFlow
from pynatsd.jetstream.consumer.liveness import Liveness
from pynatsd.jetstream.consumer.pacing import Pacing
from pynatsd.jetstream.consumer.priority import PriorityGroups
from pynatsd.jetstream.consumer.pump import DeliveryPump
from pynatsd.jetstream.consumer.reader import StreamReader
from pynatsd.jetstream.consumer.redelivery import Redelivery
from pynatsd.jetstream.consumer.reset import ConsumerReset
from pynatsd.jetstream.consumer.start import select_starting_seq
from pynatsd.jetstream.consumer.state import NS, ConsumerState
from pynatsd.jetstream.consumer.status import status
from pynatsd.jetstream.consumer.waiting import PullQueue
from pynatsd.jetstream.consumer_config import delete_threshold
from pynatsd.jetstream.store.base import StoreError
from pynatsd.jetstream.util import now_ns, parse_go_time, rfc3339_ns
from pynatsd.logger import log
from pynatsd.server.subscription import InternalClient, InternalSubscription
from pynatsd.subjects import match_literal

if TYPE_CHECKING:
    import asyncio

    from pynatsd.jetstream.consumer.waiting import PriorityRequest, PullRequest
    from pynatsd.jetstream.consumer_config import ConsumerConfig
    from pynatsd.jetstream.store.base import StoredMsg
    from pynatsd.jetstream.stream import Stream

# Consumer state is written at most this often (seconds); see Consumer.save.
_SAVE_DELAY = 0.05


class Consumer:
    """One consumer of a stream (Go's `consumer`)."""

    # How long a change waits before the state is saved; a clustered consumer's leader saves
    # (and so replicates, jetstream/cluster/consumer_replica.py) at the end of the turn.
    save_delay = _SAVE_DELAY

    # What the consumer answers for and a part does: the part's own method, handed out as it
    # is (no call in between; some run per message).
    signal: Callable[[], None]  # something may let messages out (Go's signalNewMessages)
    pump_round: Callable[[], None]  # deliver what may go now (one round of the pump)
    on_new_message: Callable[[int, str], None]  # the stream stored a message
    on_new_messages: Callable[[int, list[str]], None]  # ... several at once
    num_pending: Callable[[], int]  # messages not yet delivered (Go's npc)
    forget_pending_count: Callable[[], None]  # the stream changed under that count
    needs_ack: Callable[[int, str], bool]  # Go's needAck
    ack: Callable[..., bool]  # Go's processAckMsg
    process_next_request: Callable[[str, bytes], None]  # a pull request (MSG.NEXT, +NXT)
    accept_priority_request: Callable[[str, PriorityRequest], bool]
    add_prioritized: Callable[[PullRequest], None]
    load_next: Callable[[int], StoredMsg | None]  # the next message the filters take
    unpin: Callable[[str], None]  # $JS.API.CONSUMER.UNPIN
    interest_changed: Callable[[], None]  # the account's subscriptions changed
    interest_lost: Callable[[], None]  # a push delivery reached nobody
    ack_activity: Callable[[], None]  # acks restart the inactivity countdown

    def __init__(self, stream: Stream, config: ConsumerConfig, created_ns: int, name: str) -> None:
        self.stream = stream
        self.ajs = stream.ajs
        self.config = config
        self.name = name
        self.created_ns = created_ns
        self.durable = bool(config.durable_name)
        self.filters = config.filters()
        self.closed = False
        self.state = ConsumerState()
        self.active = False  # a push consumer's deliver subject has interest
        self.dthresh = 0  # Go's dthresh: delete after this long inactive (ns, 0 = never)
        self._update_inactive_threshold()
        self._pause_tmr: asyncio.TimerHandle | None = None
        self._client = InternalClient(self.ajs.account, f"consumer:{self.name}")
        self._subs: list[InternalSubscription] = []
        self._save_handle: asyncio.Handle | None = None
        self._state_store = stream.store.consumer_state_store(self.name) if self.durable else None
        # replay_policy original and rate_limit_bps; None for the usual consumer.
        self.pacing: Pacing | None = None
        if Pacing.wanted(config):
            self.pacing = Pacing(config, stream.store.state().last_seq, self._burst())

        ack_prefix = f"$JS.ACK.{stream.name}.{name}.".encode()
        self.redelivery = Redelivery(self, self.state)
        self.acks = AckTracker(self, self.state, self.redelivery, ack_prefix)
        self.queue = PullQueue(self)
        self.waiting = self.queue.requests  # Go's waiting: the pull requests, in order
        self.priority = PriorityGroups(self, self.queue)
        self.count = PendingCount(self)
        self.flow = PushFlow(self)
        self.reader = StreamReader(self, self.acks, self.redelivery, self.count, self.waiting)
        self.pump = DeliveryPump(
            self, self.redelivery, self.reader, self.queue, self.priority, self.count, self.flow,
            ack_prefix,
        )  # fmt: skip
        self.reset = ConsumerReset(self)
        self.liveness = Liveness(self, self.queue, self.redelivery)

        self.signal = self.pump.signal
        self.pump_round = self.pump.pump
        self.on_new_message = self.pump.on_new_message
        self.on_new_messages = self.pump.on_new_messages
        self.num_pending = self.count.num_pending
        self.forget_pending_count = self.count.forget
        self.needs_ack = self.acks.needs_ack
        self.ack = self.acks.ack
        self.process_next_request = self.queue.process_next_request
        self.accept_priority_request = self.priority.accept_priority_request
        self.add_prioritized = self.priority.add_prioritized
        self.load_next = self.reader.load_next
        self.unpin = self.priority.unpin
        self.interest_changed = self.liveness.interest_changed
        self.interest_lost = self.liveness.interest_lost
        self.ack_activity = self.liveness.ack_activity

    @property
    def push(self) -> bool:
        return bool(self.config.deliver_subject)

    def wants(self, subject: str) -> bool:
        return not self.filters or any(match_literal(subject, f) for f in self.filters)

    def paused(self) -> bool:
        until = self.config.pause_until
        if not until:
            return False
        try:
            return now_ns() < parse_go_time(until)[0]
        except ValueError:
            return False

    def _burst(self) -> int:
        """Pacing's burst: the largest message the stream may hold."""
        max_size = self.stream.config.max_msg_size
        return max_size if max_size > 0 else self.ajs.server.options.max_payload

    def _update_inactive_threshold(self) -> None:
        self.dthresh = delete_threshold(self.config, self.durable, self.push)

    # -- lifecycle ---------------------------------------------------------------------------------

    def start(self, restored: dict[str, Any] | None = None) -> None:
        if restored is not None:
            # As nats-server's applyState: what was pending at shutdown is redelivered when
            # its ack wait runs out (the timer below), not at once; a reconnecting client's
            # acks for it are still welcome.
            self.state.restore(restored)
        else:
            store, max_per_subject = self.stream.store, self.stream.config.max_msgs_per_subject
            select_starting_seq(self.state, store, self.config, self.filters, max_per_subject)
        sl = self.ajs.account.sublist
        stream, name = self.stream.name, self.name
        client, subs = self._client, self._subs
        if self.config.ack_policy != "none":
            # As nats-server: an ack-none consumer does not listen for acks at all (an ack sent
            # as a request then gets "no responders").
            acks = InternalSubscription(client, f"$JS.ACK.{stream}.{name}.>", self.acks.on_ack)
            acks.run = self.acks.on_acks
            subs.append(acks)
        for api in self.ajs.api_prefixes():
            subject = f"{api}.CONSUMER.MSG.NEXT.{stream}.{name}"
            subs.append(InternalSubscription(client, subject, self.queue.on_next_request))
            subject = f"{api}.CONSUMER.RESET.{stream}.{name}"
            subs.append(InternalSubscription(client, subject, self.reset.on_reset))
        if self.config.flow_control:
            subject = f"$JS.FC.{stream}.{name}.*"
            subs.append(InternalSubscription(client, subject, self.flow.on_flow_control))
        for sub in subs:
            sl.insert(sub)
        self.liveness.start()
        if self.push:
            self.ajs.watch_interest(self)
            self.flow.reset_heartbeat()
        self._update_pause_timer()
        self.redelivery.schedule_pending_check()
        self.save()
        self.signal()

    def stop(self, save: bool = True) -> None:
        if self._save_handle is not None:
            self._save_handle.cancel()
            self._save_handle = None
        if save and self._state_store is not None and not self.closed:
            # Write the final state now, in this thread: a debounced write still waiting (or
            # not yet started) must not be what a restart finds.
            try:
                self._state_store.save(self.snapshot())
                self._state_store.flush()
            except (OSError, StoreError):
                log.exception("saving consumer %s state", self.name)
        self.closed = True
        if self._pause_tmr is not None:
            self._pause_tmr.cancel()
        self._pause_tmr = None
        self.liveness.stop()
        self.redelivery.stop()
        self.queue.stop()
        self.flow.stop()
        self.priority.stop()
        self.pump.stop()
        if self.pacing is not None and self.pacing.timer is not None:
            self.pacing.timer.cancel()
        if self.push:
            self.ajs.unwatch_interest(self)
        if self._subs:
            for sub in self._subs:
                sub.closed = True
            self.ajs.account.sublist.remove_batch(self._subs)
            self._subs = []

    def delete(self) -> None:
        self.stop(save=False)
        advisories.consumer_action(self, advisories.DELETE)
        self.queue.end_all(status(409, "Consumer Deleted"))
        if self._state_store is not None:
            self._state_store.delete()

    # -- the state on disk -------------------------------------------------------------------------

    def snapshot(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "config": self.config.to_stored(),
            "created": self.created_ns,
            **self.state.stored(),
        }

    def save(self) -> None:
        """Persist the state soon: at most one snapshot per `_SAVE_DELAY`, as nats-server's
        consumer store flushes about ten times a second under load. An ack storm then costs a
        few writes, not one JSON encoding of the pending map per read; a crash loses at most
        that interval, and the consumer redelivers, which at-least-once delivery allows."""
        if self._state_store is None or self._save_handle is not None or self.closed:
            return
        self._save_handle = self.ajs.loop.call_later(self.save_delay, self._save_now)

    def save_at_once(self) -> None:
        """Persist the state now, not after `_SAVE_DELAY`: a durable made on a client's behalf
        (MQTT's) is on disk before the client is answered, as nats-server writes a consumer's
        meta when it creates it."""
        if self._save_handle is not None:
            self._save_handle.cancel()
            self._save_handle = None
        self._save_now()

    def _save_now(self) -> None:
        self._save_handle = None
        if self._state_store is not None and not self.closed:
            try:
                self._state_store.save(self.snapshot())
            except OSError:
                log.exception("saving consumer %s state", self.name)

    # -- the stream changed ------------------------------------------------------------------------

    def on_purge(self, first_seq: int) -> None:
        """The stream was purged up to (not including) `first_seq`; Go's consumer.purge."""
        state = self.state
        self.count.forget()
        state.sseq = max(state.sseq, first_seq)
        self.acks.purged(first_seq)
        if state.lss:
            store = self.stream.store
            state.lss = [s for s in state.lss if store.msg_ts(s) is not None]
        self.save()

    def on_msg_removed(self, seq: int) -> None:
        """A message was deleted: it no longer waits for an ack from this consumer."""
        self.count.forget()
        if self.acks.removed(seq):
            self.save()
            self.signal()

    # -- pause, updates, info ----------------------------------------------------------------------

    def set_pause(self, until: str) -> None:
        changed = until != self.config.pause_until
        self.config.pause_until = until
        self._update_pause_timer()
        if changed:
            advisories.consumer_pause(self)
        self.save()
        self.signal()

    def _update_pause_timer(self) -> None:
        if self._pause_tmr is not None:
            self._pause_tmr.cancel()
        self._pause_tmr = None
        until = self.config.pause_until
        if not until:
            return
        try:
            delay = parse_go_time(until)[0] - now_ns()
        except ValueError:
            return
        if delay > 0:
            self._pause_tmr = self.ajs.loop.call_later(delay / NS, self._pause_ended)

    def _pause_ended(self) -> None:
        self._pause_tmr = None
        advisories.consumer_pause(self)
        self.signal()

    def update_config(self, cfg: ConsumerConfig) -> None:
        """Go's updateConfig, after check_consumer_update allowed it."""
        old = self.config
        self.config = cfg
        if cfg.deliver_subject != old.deliver_subject:
            self.liveness.deliver_subject_changed()
        if cfg.inactive_threshold != old.inactive_threshold:
            self._update_inactive_threshold()
            self.liveness.threshold_changed()
        if cfg.pause_until != old.pause_until:
            self._update_pause_timer()
            advisories.consumer_pause(self)
        if cfg.filters() != self.filters:
            self.filters = cfg.filters()
            self.count.refilter()
        if cfg.ack_wait != old.ack_wait:
            self.redelivery.ack_wait_changed()
        if cfg.rate_limit_bps != old.rate_limit_bps:
            if self.pacing is None and Pacing.wanted(cfg):
                self.pacing = Pacing(cfg, self.stream.store.state().last_seq, self._burst())
            elif self.pacing is not None:
                self.pacing.set_rate(cfg.rate_limit_bps, self._burst())
        self.save()
        self.signal()

    def info(self, full_metadata: bool = True) -> dict[str, Any]:
        self.count.forget()  # count afresh, as Go's checkNumPending does for info
        state = self.state
        delivered = state.delivered_json()
        ack_floor = state.ack_floor_json()
        if not self.push:
            self.queue.process_waiting(eos=False)
        out: dict[str, Any] = {
            "stream_name": self.stream.name,
            "name": self.name,
            "created": rfc3339_ns(self.created_ns),
            "config": self.config.to_reply(full_metadata),
            "delivered": delivered,
            "ack_floor": ack_floor,
            "num_ack_pending": len(state.pending),
            "num_redelivered": 0 if self.config.max_deliver == 1 else len(state.rdc),
            "num_waiting": len(self.waiting),
            "num_pending": self.num_pending(),
        }
        if self.push and self.active:
            out["push_bound"] = True
        until = self.config.pause_until
        if until:
            remaining = parse_go_time(until)[0] - now_ns()
            if remaining > 0:
                out["paused"] = True
                out["pause_remaining"] = remaining
        return out

    def info_reply(self, full_metadata: bool = True) -> dict[str, Any]:
        """The consumer info an API reply carries (Go's ConsumerInfo): `info()`, the time, and
        the priority groups' state."""
        out = self.info(full_metadata)
        out["ts"] = rfc3339_ns(now_ns())
        groups = self.priority.info()
        if groups:
            out["priority_groups"] = groups
        return out

    # -- what the parts ask of the consumer --------------------------------------------------------

    def backlog(self) -> int:
        return self.num_pending() + len(self.redelivery.rdq)

    def forget_delivered(self) -> None:
        self.redelivery.clear()
        self.reader.ahead.clear()
        self.count.forget()

    def new_pin_id(self) -> str:
        return advisories.new_nuid()

    def advise_ack(self, dseq: int, sseq: int, dc: int, delivered_ns: int) -> None:
        advisories.ack_metric(self, dseq, sseq, dc, delivered_ns)

    def advise_nak(self, dseq: int, sseq: int, dc: int) -> None:
        advisories.nak(self, dseq, sseq, dc)

    def advise_terminated(self, dseq: int, sseq: int, dc: int, reason: str) -> None:
        advisories.terminated(self, dseq, sseq, dc, reason)

    def advise_max_deliver(self, sseq: int, dc: int) -> None:
        advisories.max_deliver(self, sseq, dc)

    def advise_pinned(self, group: str, pin_id: str) -> None:
        advisories.group_pinned(self, group, pin_id)

    def advise_unpinned(self, group: str, reason: str) -> None:
        advisories.group_unpinned(self, group, reason)


if TYPE_CHECKING:
    from pynatsd.jetstream.consumer.acks import AckOwner
    from pynatsd.jetstream.consumer.count import CountOwner
    from pynatsd.jetstream.consumer.flow import FlowOwner
    from pynatsd.jetstream.consumer.liveness import LivenessOwner
    from pynatsd.jetstream.consumer.priority import PriorityOwner
    from pynatsd.jetstream.consumer.pump import PumpOwner
    from pynatsd.jetstream.consumer.reader import ReaderOwner
    from pynatsd.jetstream.consumer.redelivery import RedeliveryOwner
    from pynatsd.jetstream.consumer.reset import ResetOwner
    from pynatsd.jetstream.consumer.waiting import PullOwner

    def _owns_every_part(c: Consumer) -> tuple[
        AckOwner, CountOwner, FlowOwner, LivenessOwner, PriorityOwner, PumpOwner,
        ReaderOwner, RedeliveryOwner, ResetOwner, PullOwner,
    ]:  # fmt: skip
        """For mypy: the consumer is what each of its parts takes it for."""
        return c, c, c, c, c, c, c, c, c, c
