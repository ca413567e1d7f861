"""One replica of a clustered consumer on this server (nats-server's `monitorConsumer`,
`applyConsumerEntries`, `processReplicatedAck`).

The consumer's group (`C-R<n><F|M>-…`, its peers those of the stream) elects the leader that
runs the consumer: it delivers, takes the acks and answers the consumer's requests. Its state
reaches the other replicas as nats-server's entries: an `updateDeliveredOp` for each message
delivered (or delivered again) and an `updateAcksOp` for each one acked. A replica keeps that
state in the same form the consumer saves it (`Consumer.snapshot()`), on disk through the
consumer's own state store, and a replica that becomes leader starts the consumer from it, as
a restart would: what was pending is redelivered once its ack wait runs out, nothing acked is
delivered again.

The leader finds what to replicate where the consumer persists its state: each save (at most
one per `_SAVE_DELAY`) is compared with the last state replicated. A leader that dies loses at
most that interval of deliveries and acks, which the consumer's at-least-once delivery covers.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from pynatsd.jetstream.cluster.assignments import created_ns
from pynatsd.jetstream.cluster.entries import (
    AckUpdate,
    ConsumerOp,
    DeliveredUpdate,
    EntryError,
    decode_consumer_entry,
    encode_consumer_entry,
)
from pynatsd.jetstream.cluster.peers import cluster_block
from pynatsd.jetstream.consumer import Consumer
from pynatsd.jetstream.consumer_config import ConsumerConfig
from pynatsd.jetstream.util import now_ns
from pynatsd.logger import log
from pynatsd.raft.node import Committed, RaftNode
from pynatsd.raft.transport import NrgTransport
from pynatsd.raft.wire import Entry, EntryType

if TYPE_CHECKING:
    from pynatsd.jetstream.store.base import ConsumerStateStore
    from pynatsd.jetstream.stream import Stream


class ReplicatingStateStore:
    """The consumer's state store on the leader: saves go to disk as before and to the group
    as entries."""

    def __init__(self, inner: ConsumerStateStore | None, on_save: Callable[[dict[str, Any]], None]):
        self.inner = inner
        self.on_save = on_save

    def save(self, state: dict[str, Any]) -> None:
        self.on_save(state)
        if self.inner is not None:
            self.inner.save(state)

    def load(self) -> dict[str, Any] | None:
        return self.inner.load() if self.inner is not None else None

    def flush(self) -> None:
        if self.inner is not None:
            self.inner.flush()

    def delete(self) -> None:
        if self.inner is not None:
            self.inner.delete()


def _empty_state(name: str, config: ConsumerConfig, created: int) -> dict[str, Any]:
    return {
        "name": name,
        "config": config.to_stored(),
        "created": created,
        "delivered": [0, 0],
        "ack_floor": [0, 0],
        "pending": {},
        "redelivered": {},
    }


def state_changes(before: dict[str, Any], after: dict[str, Any]) -> list[bytes]:
    """The entries that take a replica from `before` to `after`: a delivered update for each
    message now pending (or pending again) and for the delivered position, an ack update for
    each message no longer pending, and one for the ack floor when it moved (a message may be
    delivered and acked between two saves, leaving nothing else behind)."""
    entries: list[bytes] = []
    old_pending = before.get("pending") or {}
    new_pending = after.get("pending") or {}
    redelivered = after.get("redelivered") or {}
    for sseq, (dseq, ts) in new_pending.items():
        if list(old_pending.get(sseq) or ()) != [dseq, ts]:
            count = int(redelivered.get(sseq, 0)) + 1
            entries.append(encode_consumer_entry(DeliveredUpdate(dseq, int(sseq), count, ts)))
    delivered = list(after.get("delivered") or [0, 0])
    if delivered != list(before.get("delivered") or [0, 0]) and delivered[1]:
        dseq, sseq = delivered
        if str(sseq) not in new_pending:
            entries.append(encode_consumer_entry(DeliveredUpdate(dseq, sseq, 1, now_ns())))
            entries.append(encode_consumer_entry(AckUpdate(dseq, sseq)))
    for sseq, (dseq, _) in old_pending.items():
        if sseq not in new_pending:
            entries.append(encode_consumer_entry(AckUpdate(dseq, int(sseq))))
    floor = list(after.get("ack_floor") or [0, 0])
    if floor != list(before.get("ack_floor") or [0, 0]) and floor[1]:
        entries.append(encode_consumer_entry(AckUpdate(floor[0], floor[1])))
    return entries


def apply_change(state: dict[str, Any], entry: bytes) -> None:
    """A replicated delivered or ack update applied to a saved consumer state."""
    update = decode_consumer_entry(entry)
    pending: dict[str, list[int]] = state.setdefault("pending", {})
    redelivered: dict[str, int] = state.setdefault("redelivered", {})
    if isinstance(update, DeliveredUpdate):
        key = str(update.stream_seq)
        pending[key] = [update.consumer_seq, update.timestamp]
        if update.delivery_count > 1:
            redelivered[key] = update.delivery_count - 1
        dseq, sseq = state.get("delivered") or [0, 0]
        state["delivered"] = [max(dseq, update.consumer_seq), max(sseq, update.stream_seq)]
        state["next_dseq"] = state["delivered"][0] + 1
        state["next_sseq"] = max(int(state.get("next_sseq", 1)), update.stream_seq + 1)
    elif isinstance(update, AckUpdate):
        key = str(update.stream_seq)
        pending.pop(key, None)
        redelivered.pop(key, None)
        floor = list(state.get("ack_floor") or [0, 0])
        lowest = min((int(s) for s in pending), default=None)
        if lowest is None:
            candidates = [list(state.get("delivered") or [0, 0])]
        else:
            candidates = [[pending[str(lowest)][0] - 1, lowest - 1]]
            if update.stream_seq < lowest:
                candidates.append([update.consumer_seq, update.stream_seq])
        for candidate in candidates:
            floor = [max(floor[0], candidate[0]), max(floor[1], candidate[1])]
        state["ack_floor"] = floor


class ConsumerReplica:
    """The replica: its assignment, the consumer's state, its group's node (None for R1) and,
    while leading, the running consumer."""

    def __init__(
        self,
        assignment: dict[str, Any],
        stream: Stream,
        node_id: str,
        names: Callable[[], dict[str, str]],
    ) -> None:
        self.assignment = assignment
        self.stream = stream
        self.node_id = node_id
        self.names = names
        self.name = str(assignment.get("name", ""))
        self.config = ConsumerConfig.from_json(dict(assignment.get("consumer") or {}))
        self.created = created_ns(assignment.get("created"))
        self.node: RaftNode | None = None
        self.transport: NrgTransport | None = None
        self.consumer: Consumer | None = None
        self.create_reply = ""
        self.recovering = False
        store = stream.store.consumer_state_store(self.name) if self.config.durable_name else None
        self._store = store
        saved = store.load() if store is not None else None
        self.state: dict[str, Any] = saved or _empty_state(self.name, self.config, self.created)
        self._replicated: dict[str, Any] = _copy(self.state)
        self._save_pending = False

    @property
    def group(self) -> dict[str, Any]:
        group = self.assignment.get("group")
        return group if isinstance(group, dict) else {}

    @property
    def is_leader(self) -> bool:
        return self.consumer is not None

    # ----- leadership
    def leader_changed(self, is_leader: bool) -> None:
        if is_leader and self.consumer is None:
            self._start_consumer()
        elif not is_leader and self.consumer is not None:
            consumer, self.consumer = self.consumer, None
            self.state = consumer.snapshot()
            self._replicated = _copy(self.state)
            consumer.stop()
            self.stream.consumers.pop(self.name, None)

    def _start_consumer(self) -> None:
        stream = self.stream
        consumer = Consumer(stream, self.config, self.created, self.name)
        consumer._state_store = ReplicatingStateStore(self._store, self._replicate)
        consumer.save_delay = 0.0
        stream.consumers[self.name] = consumer
        fresh = not self.state.get("next_sseq") and not self.state.get("pending")
        consumer.start(restored=None if fresh else self.state)
        self.consumer = consumer
        self._replicated = _copy(consumer.snapshot())
        if self.create_reply:
            reply, self.create_reply = self.create_reply, ""
            out = consumer.info_reply()
            out["cluster"] = self.cluster_info()
            stream.ajs.api_answer(reply, "consumer_create_response", out)
        log.info(
            "JetStream cluster new consumer leader for '%s > %s > %s'",
            stream.ajs.account.name,
            stream.name,
            self.name,
        )

    # ----- the leader's side
    def _replicate(self, state: dict[str, Any]) -> None:
        changes = state_changes(self._replicated, state)
        self._replicated = _copy(state)
        if not changes or self.node is None:
            return
        self.node.propose(tuple(Entry(EntryType.NORMAL, change) for change in changes))
        if self.transport is not None:
            self.transport.pump()

    # ----- every replica
    def apply_entries(self, committed: Committed) -> None:
        changed = False
        if self.consumer is None:
            for entry in committed.entries:
                if entry.type != EntryType.NORMAL or not entry.data:
                    continue
                if entry.data[0] not in (ConsumerOp.UPDATE_DELIVERED, ConsumerOp.UPDATE_ACKS):
                    continue
                try:
                    apply_change(self.state, entry.data)
                    changed = True
                except EntryError as e:
                    log.error("JetStream cluster could not apply consumer entry: %s", e)
        if changed:
            self._save_soon()
        if self.node is not None and committed.index:
            self.node.on_applied(committed.index)

    def _save_soon(self) -> None:
        if self._store is None or self._save_pending:
            return
        self._save_pending = True

        def save() -> None:
            self._save_pending = False
            if self._store is not None and self.consumer is None:
                self._store.save(self.state)

        self.stream.ajs.loop.call_later(0.1, save)

    def stop(self, delete: bool = False) -> None:
        if self.transport is not None:
            self.transport.close()
        if self.node is not None:
            self.node.log.close()
        consumer, self.consumer = self.consumer, None
        if consumer is not None:
            self.stream.consumers.pop(self.name, None)
            if delete:
                consumer.delete()
            else:
                consumer.stop()
        elif delete and self._store is not None:
            self._store.delete()

    # ----- monitoring
    def cluster_info(self) -> dict[str, Any]:
        """The `cluster` block of consumer info (clusterInfo)."""
        return cluster_block(
            self.stream.ajs.server,
            self.node,
            str(self.group.get("name", "")),
            self.group.get("peers") or [],
            self.node_id,
            self.names(),
        )


def _copy(state: dict[str, Any]) -> dict[str, Any]:
    out = dict(state)
    out["pending"] = dict(state.get("pending") or {})
    out["redelivered"] = dict(state.get("redelivered") or {})
    return out
