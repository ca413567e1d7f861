"""A stream: captures its subjects into a store, acknowledges publishers, feeds consumers.

Corresponds to nats-server's `server/stream.go` (`processJetStreamMsg`): the input subject
transform, the header checks in Go's order (`Nats-Expected-*`, `Nats-TTL`, `Nats-Msg-Id`
duplicates, `Nats-Rollup`), the size limits, per-message TTLs with subject delete markers, the
rollup purge, republish, and the PubAck, which is sent only once the record is durable (see
`StreamStore.when_durable`). Mirrors and sources follow other streams of the same account
(`sourcing.py`); message schedules are `schedules.py`'s, and a stream with per-message TTLs
ages its messages with `ttl.py`.
"""

from __future__ import annotations

import asyncio
import heapq
import json
from collections import deque
from functools import partial
from typing import TYPE_CHECKING, Any, Protocol

from pynatsd.jetstream import errors
from pynatsd.jetstream.batching import FAST_SUFFIX, Batching, recover_partial_batch
from pynatsd.jetstream.counters import apply_increment, check_increment
from pynatsd.jetstream.durable_source import DurableSource
from pynatsd.jetstream.errors import ApiError, js_error
from pynatsd.jetstream.remote_source import RemoteSource, served_elsewhere
from pynatsd.jetstream.schedules import MsgScheduling, check_publish
from pynatsd.jetstream.sourcing import Source
from pynatsd.jetstream.store.base import StoredMsg, StoreError, StreamLimits, StreamStore
from pynatsd.jetstream.ttl import age_out, is_delete_marker, parse_message_ttl, ttl_or_zero
from pynatsd.jetstream.util import (
    go_duration,
    go_hash,
    go_json,
    now_ns,
    rfc3339_ns,
)
from pynatsd.logger import log
from pynatsd.protocol.events import Pub
from pynatsd.protocol.frames import stored_msg_frame
from pynatsd.protocol.headers import append_headers, header_value
from pynatsd.server.delivery import plain_stored_outbound, settle_stored
from pynatsd.server.msgtrace import TRACE_DEST, TRACE_DEST_DISABLED, set_header
from pynatsd.server.subscription import InternalClient, InternalSubscription
from pynatsd.subjects import match_literal
from pynatsd.transform import SubjectTransform

if TYPE_CHECKING:
    from pynatsd.jetstream.consumer import Consumer
    from pynatsd.jetstream.manager import AccountJetStream
    from pynatsd.jetstream.stream_config import StreamConfig, StreamSource
    from pynatsd.server.client import Client
    from pynatsd.server.delivery import Receiver
    from pynatsd.server.msgtrace import MsgTrace
    from pynatsd.server.outbound import Outbound
    from pynatsd.server.subscription import Subscription

NS = 1_000_000_000
_MAX_HEADER = 65535
# Publishes stored in one write at most (more in one turn make several writes).
_PENDING_MAX = 4096
# The queue group of direct get subscriptions (nats-server's dgetGroup, its sysGroup).
_DIRECT_GET_GROUP = "_sys_"


class Replicator(Protocol):
    """Where a clustered stream's captured publishes go (jetstream/cluster/replica.py)."""

    def propose_message(self, subject: bytes, reply: bytes, header: bytes, data: bytes) -> None: ...


def limits_of(config: StreamConfig) -> StreamLimits:
    return StreamLimits(
        max_msgs=config.max_msgs,
        max_bytes=config.max_bytes,
        # A stream with per-message TTLs ages its messages itself (ttl.age_out): a message
        # with `Nats-TTL: never` stays, and the last of a subject may leave a marker.
        max_age=0 if config.allow_msg_ttl else config.max_age,
        max_msgs_per_subject=config.max_msgs_per_subject,
        max_msg_size=config.max_msg_size,
        discard=config.discard,
        discard_new_per_subject=config.discard_new_per_subject,
    )


class Stream:
    def __init__(
        self,
        ajs: AccountJetStream,
        config: StreamConfig,
        store: StreamStore,
        created_ns: int,
    ) -> None:
        self.ajs = ajs
        self.config = config
        self.name: str = config.name
        self._mstore = store
        # Publishes of this turn of the event loop, stored together (_store_pending):
        # (subject, reply, header, data, Nats-Msg-Id), and the ids among them.
        self._pending: list[tuple[bytes, bytes, bytes, bytes, str]] = []
        self._pending_ids: set[str] = set()
        self._batchable = False
        self.created_ns = created_ns
        self.consumers: dict[str, Consumer] = {}
        self._owner = InternalClient(ajs.account, f"stream:{config.name}")
        self._subs: list[InternalSubscription] = []
        # Nats-Msg-Id -> (seq, ts) inside the duplicate window, oldest first in `_msg_id_order`.
        self._msg_ids: dict[str, tuple[int, int]] = {}
        self._msg_id_order: deque[tuple[int, str]] = deque()
        self.last_msg_id = ""
        # The background rebuild of the duplicate window after a restart: next seq, last seq.
        self._dedupe_next = 0
        self._dedupe_last = 0
        self._dedupe_owns_last = True
        self.closed = False
        self._expiry_timer: asyncio.TimerHandle | None = None
        self._expiry_at = 0
        # Per-message TTLs: (expires ns, seq), soonest first.
        self._ttls: list[tuple[int, int]] = []
        self._ttl_timer: asyncio.TimerHandle | None = None
        self._ttl_at = 0
        # With per-message TTLs: no max_age check before this (ns), see _next_age_check.
        self._age_next = 0
        # Message schedules (schedules.py), only for streams with allow_msg_schedules.
        self.scheduling: MsgScheduling | None = None
        self._transform: SubjectTransform | None = None
        self._republish: SubjectTransform | None = None
        self.sources: list[Source] = []
        self.mirror: Source | None = None
        # Streams sourcing from or mirroring this one (told about new messages).
        self.followers: set[Source] = set()
        self._ack_prefix = b""
        self._acks: list[tuple[bytes, bytes, int]] = []  # PubAcks of this turn: reply, ack, seq
        self._max_payload = ajs.server.options.max_payload
        self._batching: Batching | None = None  # open batch publishes, once there is one
        # A counter stream's total after the last increment (the PubAck's `val`).
        self.counter_total = ""
        # A clustered stream's replica (jetstream/cluster/replica.py): publishes go to it, to
        # be proposed to the stream's group and stored when they commit; None on one server.
        self.replicator: Replicator | None = None

    @property
    def store(self) -> StreamStore:
        """The stream's store, with every publish received so far in it: whatever looks at
        the store (a consumer, the API, a direct get) first stores the publishes of this
        turn still pending (see `_on_message`), so nothing sees them missing."""
        if self._pending:
            self._store_pending()
        return self._mstore

    @store.setter
    def store(self, store: StreamStore) -> None:
        self._mstore = store

    # -- set-up ----------------------------------------------------------------------------------

    def start(self) -> None:
        """Capture the subjects, follow the origins, arm the timers."""
        self._setup_transforms()
        if self.config.allow_atomic:
            recover_partial_batch(self)
        if self.replicator is None:
            self.subscribe()  # a replica captures only while it leads
        self._setup_sourcing()
        if self.config.allow_msg_ttl:
            self._rebuild_ttls()
        if self.config.allow_msg_schedules:
            self._start_scheduling()
        self.schedule_expiry()

    def _start_scheduling(self) -> None:
        self.scheduling = MsgScheduling(self)
        self.scheduling.rebuild()

    def _setup_transforms(self) -> None:
        cfg = self.config
        tr = cfg.subject_transform
        self._transform = SubjectTransform(tr.src, tr.dest) if tr and tr.dest else None
        rp = cfg.republish
        self._republish = SubjectTransform(rp.src or ">", rp.dest) if rp else None
        # Whether a publish may wait for the end of the turn to be stored with the others
        # (_store_pending): only when storing it involves nothing but the store appending it
        # (no limit, transform, counter, TTL, schedule, republish, interest check, mirror or
        # seal); its headers are looked at as it arrives (_pending_entry).
        self._batchable = (
            self._transform is None
            and self._republish is None
            and cfg.mirror is None
            and not cfg.sealed
            and not cfg.allow_msg_counter
            and not cfg.allow_msg_ttl
            and not cfg.allow_msg_schedules
            and cfg.retention != "interest"
            and self._mstore.unlimited
        )

    def _setup_sourcing(self) -> None:
        cfg = self.config
        for src in self._all_sources():
            if isinstance(src, RemoteSource) and src.cfg not in [cfg.mirror, *cfg.sources]:
                src.forget()  # a mirror promoted, a source removed
            src.stop()
        self.mirror = _source(self, cfg.mirror, mirror=True) if cfg.mirror else None
        self.sources = [_source(self, s, mirror=False) for s in cfg.sources if s is not None]
        for src in self._all_sources():
            src.start()

    def _all_sources(self) -> list[Source]:
        return [self.mirror, *self.sources] if self.mirror is not None else list(self.sources)

    def origin_created(self, name: str) -> None:
        for src in self._all_sources():
            if src.origin_name == name:
                src.start()

    def follow_origins(self) -> None:
        """Start every source whose origin was not found yet."""
        for src in self._all_sources():
            src.start()

    def retry_disconnected_sources(self) -> None:
        for src in self._all_sources():
            if isinstance(src, RemoteSource):
                src.retry_if_disconnected()

    def origin_deleted(self, origin: Stream) -> None:
        for src in self._all_sources():
            if src.origin is origin:
                src.detach()

    def subscribe(self) -> None:
        sublist = self.ajs.account.sublist
        for subject in self.config.subjects:
            sub = InternalSubscription(self._owner, subject, self._on_message)
            sub.traced = self._on_traced_message
            if self.replicator is None:
                sub.take_line = self._on_line
            sublist.insert(sub)
            self._subs.append(sub)
        # As nats-server: the stream itself answers its direct gets, so a get for a stream
        # without them (or that does not exist) finds no responders. A mirror with
        # `mirror_direct` answers its origin's too; all of them in one queue group, so one
        # answers each request.
        direct = [self.name] if self.config.allow_direct else []
        if self.config.mirror_direct and self.config.mirror is not None:
            direct.append(self.config.mirror.name)
        for name in direct:
            for api in self.ajs.api_prefixes():
                prefix = f"{api}.DIRECT.GET.{name}"
                for subject in (prefix, prefix + ".>"):
                    sub = InternalSubscription(
                        self._owner, subject, self._on_direct_get, _DIRECT_GET_GROUP
                    )
                    sublist.insert(sub)
                    self._subs.append(sub)

    def _on_direct_get(self, sub: InternalSubscription, publisher: Client | None, ev: Pub) -> None:
        api = self.ajs.api
        if api is None or self.closed:
            return
        hs = ev.header_size
        body = ev.payload[hs:] if hs > 0 else ev.payload
        subject = ev.subject.decode("utf-8", "surrogateescape")
        # The subscription names the stream asked for (this one, or a mirror's origin).
        marker = sub.subject.removesuffix(".>")
        tail = subject[len(marker) + 1 :]
        header = ev.payload[:hs] if hs > 0 else b""
        api.direct_get(self, tail, body, ev.reply.decode("utf-8", "surrogateescape"), header)

    def unsubscribe(self) -> None:
        if self._subs:
            for sub in self._subs:
                sub.closed = True
            self.ajs.account.sublist.remove_batch(self._subs)
            self._subs = []

    def update_config(self, config: StreamConfig) -> None:
        old = self.config
        subjects_changed = (
            config.subjects != old.subjects
            or config.allow_direct != old.allow_direct
            or config.mirror_direct != old.mirror_direct
        )
        self.config = config
        self.store.update_limits(limits_of(config))  # (stores what is pending first)
        self._setup_transforms()
        self._cancel_expiry()
        self._expiry_at = 0
        self.schedule_expiry()
        if subjects_changed:
            self.unsubscribe()
            self.subscribe()
        if config.mirror != old.mirror or config.sources != old.sources:
            self._setup_sourcing()
        if config.allow_msg_ttl and not old.allow_msg_ttl:
            self._rebuild_ttls()
        if self._batching is not None:
            self._batching.config_changed()
        if config.allow_msg_schedules and self.scheduling is None:
            self._start_scheduling()

    # -- max_age ---------------------------------------------------------------------------------

    def schedule_expiry(self) -> None:
        """max_age: remove messages when they age out, not only when the next one arrives."""
        when = self._next_age_check() if self.config.allow_msg_ttl else self.store.next_expiry()
        if when is None or self.closed:
            return
        if self._expiry_at and self._expiry_timer is not None and self._expiry_at <= when:
            return
        if self._expiry_timer is not None:
            self._expiry_timer.cancel()
        self._expiry_at = when
        delay = max((when - now_ns()) / NS, 0.0)
        self._expiry_timer = self.ajs.loop.call_later(delay, self._on_expiry)

    def _on_expiry(self) -> None:
        self._expiry_timer = None
        self._expiry_at = 0
        if self.closed:
            return
        if self.config.allow_msg_ttl:
            next_check = age_out(self)
            self._age_next = next_check or now_ns() + self.config.max_age
            self.schedule_expiry()
            return
        before = self.store.state().first_seq
        self.store.expire()
        if self.store.state().first_seq != before:
            for consumer in list(self.consumers.values()):
                consumer.forget_pending_count()
                consumer.signal()
        self.schedule_expiry()

    def _next_age_check(self) -> int | None:
        max_age = self.config.max_age
        if max_age <= 0:
            return None
        st = self.store.state()
        if not st.messages:
            return None
        return max(st.first_ts + max_age, self._age_next)

    def place_marker(self, subject: str) -> None:
        # Go writes the TTL as time.Duration(seconds)*time.Second: "3s", "1m0s".
        marker_ttl = go_duration(self.config.subject_delete_marker_ttl // NS * NS)
        header = (
            f"NATS/1.0\r\nNats-Marker-Reason: MaxAge\r\nNats-TTL: {marker_ttl}\r\n"
            "Nats-Rollup: sub\r\n\r\n"
        ).encode()
        try:
            self.process_message(subject, header, b"", sourced=True)
        except ApiError as e:
            log.warning("JetStream %s: subject delete marker: %s", self.name, e.description)

    # -- per-message TTL -------------------------------------------------------------------------

    def _rebuild_ttls(self) -> None:
        """After a restart: the TTLs are read back from the stored headers."""
        self._ttls = []
        seq = self.store.state().first_seq
        while True:
            msg = self.store.load_next_msg("", max(seq, 1))
            if msg is None:
                break
            seq = msg.seq + 1
            ttl = ttl_or_zero(msg.header) if msg.header else 0
            if ttl > 0:
                self._ttls.append((msg.ts + ttl * NS, msg.seq))
        heapq.heapify(self._ttls)
        self._schedule_ttl()

    def _track_ttl(self, seq: int, ts: int, ttl: int) -> None:
        heapq.heappush(self._ttls, (ts + ttl * NS, seq))
        self._schedule_ttl()

    def _schedule_ttl(self) -> None:
        if not self._ttls or self.closed:
            return
        when = self._ttls[0][0]
        if self._ttl_timer is not None and self._ttl_at <= when:
            return
        if self._ttl_timer is not None:
            self._ttl_timer.cancel()
        self._ttl_at = when
        self._ttl_timer = self.ajs.loop.call_later(max((when - now_ns()) / NS, 0.0), self._on_ttl)

    def _on_ttl(self) -> None:
        """Messages past their Nats-TTL go; with subject delete markers, the last message of a
        subject is replaced by a marker instead (nats-server's handleRemovalOrSdm)."""
        self._ttl_timer = None
        self._ttl_at = 0
        if self.closed:
            return
        now = now_ns()
        sdm = self.config.subject_delete_marker_ttl > 0
        while self._ttls and self._ttls[0][0] <= now:
            _, seq = heapq.heappop(self._ttls)
            msg = self.store.load_msg(seq)
            if msg is None:
                continue
            if sdm and not is_delete_marker(msg.header):
                last = self.store.load_last_msg(msg.subject)
                if last is not None and last.seq == seq:
                    self.place_marker(msg.subject)
                    continue
            self.remove_msg(seq)
        self._schedule_ttl()

    # -- publishing ------------------------------------------------------------------------------

    def _on_traced_message(
        self, sub: Subscription, publisher: Receiver | None, ev: Pub, trace: MsgTrace
    ) -> None:
        """A traced message (server/msgtrace.py): the stream says in the trace whether it
        stored it or why not. Trace only, it makes every check and stores nothing; otherwise
        it stores the message with its trace destination switched off, so that consumers do
        not trace it again (processInboundJetStreamMsg)."""
        if self.closed:
            return
        trace.jetstream(self.name)
        if not trace.only:
            hs = ev.header_size
            header = set_header(ev.payload[:hs], TRACE_DEST, TRACE_DEST_DISABLED)
            ev = Pub(ev.subject, ev.reply, header + ev.payload[hs:], len(header))
        self._on_message(sub, publisher, ev, trace)  # type: ignore[arg-type]

    def _on_message(
        self,
        sub: InternalSubscription,
        publisher: Client | None,
        ev: Pub,
        trace: MsgTrace | None = None,
    ) -> None:
        if self.closed:
            return
        hs = ev.header_size
        payload = ev.payload
        reply = ev.reply  # answered as it came, never decoded
        if self.replicator is not None:
            header = payload[:hs] if hs > 0 else b""
            self.replicator.propose_message(
                ev.subject, reply, header, payload[hs:] if hs > 0 else payload
            )
            return
        if (
            self._batchable
            and trace is None
            and len(payload) <= self._max_payload
            # A fast-ingest batch (its reply ends in ".$FI", 73 is "I") takes the long way.
            and not (reply and reply[-1] == 73)
            and not self._dedupe_next
            and not self.ajs.storage_limited
        ):
            entry: tuple[bytes, bytes, bytes, bytes, str] | None = (
                (ev.subject, reply, b"", payload, "")
                if hs <= 0
                else self._pending_entry(ev.subject, reply, payload, hs)
            )
            if entry is not None:
                # The common publish: stored with the others of this turn in one write.
                pending = self._pending
                pending.append(entry)
                if len(pending) == 1:
                    self.ajs.loop.call_soon(self._store_pending)
                elif len(pending) >= _PENDING_MAX:
                    self._store_pending()
                return
        if self._pending:
            self._store_pending()
        header = payload[:hs] if hs > 0 else b""
        data = payload[hs:] if hs > 0 else payload
        subject = ev.subject.decode("utf-8", "surrogateescape")
        if self._transform is not None:
            subject = self._transform.apply(subject) or subject
        # Batch publishes: a fast-ingest reply ends in ".$FI" (73 is "I"), an atomic batch has
        # its header; two cheap tests for every other message.
        if (reply and reply[-1] == 73 and reply[-4:] == FAST_SUFFIX) or (
            hs > 0 and b"\r\nNats-Batch-Id:" in header
        ):
            self._on_batch_message(subject, reply, header, data)
            return
        can_respond = bool(reply) and not self.config.no_ack
        try:
            seq, duplicate = self.process_message(subject, header, data, trace=trace)
        except ApiError as e:
            if trace is not None:
                trace.jetstream_failed(e.trace_text or f"{e.description} ({e.err_code})")
            if can_respond:
                self.reply_error(reply, e)
            return
        if not can_respond or seq == 0:
            return
        ack = self.ack_prefix() + b"%d" % seq
        if duplicate:
            if trace is not None:
                trace.jetstream_failed("msgid is duplicate")
            # nats-server writes this one by hand, with the space.
            self.ajs.reply(reply, ack + b',"duplicate": true}')
            return
        # Only a counter stream has a total: one cheap test for every other PubAck.
        self.queue_ack(reply, ack + (self._counter_ack_end() if self.counter_total else b"}"), seq)

    def _on_line(
        self, sub: InternalSubscription, subject: bytes, reply: bytes, tails: list[bytes]
    ) -> None:
        """Messages of one PUB line (no header; each payload with its CRLF), handed over by a
        publisher's delivery plan: what `_on_message` does with each, in order. Those it
        would keep for the turn's group are kept at once."""
        if self.closed:
            return
        if (
            self._batchable
            and len(tails[0]) - 2 <= self._max_payload  # a line's payloads are one size
            and not (reply and reply[-1] == 73)  # a fast-ingest batch (".$FI")
            and not self._dedupe_next
            and not self.ajs.storage_limited
        ):
            pending = self._pending
            if not pending:
                self.ajs.loop.call_soon(self._store_pending)
            pending.extend([(subject, reply, b"", tail[:-2], "") for tail in tails])
            if len(pending) >= _PENDING_MAX:
                self._store_pending()
            return
        for tail in tails:
            self._on_message(sub, None, Pub(subject, reply, tail[:-2]))
            if self.closed:
                return

    def _pending_entry(
        self, subject: bytes, reply: bytes, payload: bytes, hs: int
    ) -> tuple[bytes, bytes, bytes, bytes, str] | None:
        """A publish with headers may join the turn's group when nats-server would do
        nothing with them but the duplicate check and the expected stream (the Spark writer's
        `Nats-Msg-Id` and `Nats-Expected-Stream`); None sends it the long way (the pending
        group is stored first), as does an id seen before or already in the group: the long
        way answers it as a duplicate with the sequence it got."""
        if hs > _MAX_HEADER:
            return None
        header = payload[:hs]
        msg_id = ""
        seen_id = seen_stream = False
        # One pass over the nats-server keys; each value as header_value reads it (the
        # first of its key, stripped).
        i = header.find(b"\r\nNats-")
        while i >= 0:
            key = i + 7
            end = header.find(b"\r\n", key)
            if end < 0:
                end = len(header)
            if header.startswith(b"Msg-Id:", key):
                if not seen_id:
                    seen_id = True
                    msg_id = header[key + 7 : end].decode("utf-8", "replace").strip()
            elif header.startswith(b"Expected-Stream:", key):
                if not seen_stream:
                    seen_stream = True
                    expected = header[key + 16 : end].decode("utf-8", "replace").strip()
                    if expected and expected != self.name:
                        return None
            else:
                return None
            i = header.find(b"\r\nNats-", end)
        if msg_id:
            if msg_id in self._msg_ids or msg_id in self._pending_ids:
                return None
            self._pending_ids.add(msg_id)
        return (subject, reply, header, payload[hs:], msg_id)

    def _store_pending(self) -> None:
        """Store the publishes of this turn that `_on_message` kept aside in one write and
        one index update, and queue their PubAcks for one durability wait. The same as
        `process_message` for each, in order, given what `_batchable` and `_pending_entry`
        rule out; all or nothing: a failed write answers each with the store's error."""
        pending = self._pending
        if not pending:
            return
        self._pending = []
        ids = self._pending_ids  # every Nats-Msg-Id of the group: none, no id to remember
        self._pending_ids = set()
        # One str per distinct subject, the same object for each of its messages (the
        # store's index then looks each subject up once per run of it).
        decoded: dict[bytes, str] = {}
        subjects = [
            decoded.get(p[0]) or decoded.setdefault(p[0], p[0].decode("utf-8", "surrogateescape"))
            for p in pending
        ]
        ack = not self.config.no_ack
        try:
            first, ts = self._mstore.store_msgs(
                subjects, [p[2] for p in pending], [p[3] for p in pending]
            )
        except StoreError as e:
            if ack:
                error = errors.stream_store_failed(e.description)
                for p in pending:
                    if p[1]:
                        self.reply_error(p[1], error)
            return
        self.last_msg_id = pending[-1][4]
        if ids:
            seq = first
            for p in pending:
                if p[4]:
                    self._msg_ids[p[4]] = (seq, ts)
                    self._msg_id_order.append((ts, p[4]))
                seq += 1
        order = self._msg_id_order
        if order and order[0][0] + self.config.duplicate_window < ts:
            self._expire_msg_ids(ts)
        if ack:
            acks = self._acks
            waiting = bool(acks)
            # The PubAck from its template: `{"stream":..,"seq":` N `}`.
            head = self.ack_prefix() + b"%d}"
            seq = first
            for p in pending:
                if p[1]:
                    acks.append((p[1], head % seq, seq))
                seq += 1
            if acks and not waiting:
                self._wait_for_acks()
        if self.consumers:
            for consumer in list(self.consumers.values()):
                consumer.on_new_messages(first, subjects)
        if self.followers:
            for follower in list(self.followers):
                follower.signal()

    def _counter_ack_end(self) -> bytes:
        """The end of a counter stream's PubAck: the new total."""
        return b',"val":' + go_json(self.counter_total) + b"}"

    # -- batch publishing (batching.py) ----------------------------------------------------------

    def _on_batch_message(self, subject: str, reply: bytes, header: bytes, data: bytes) -> None:
        """A message of a fast-ingest batch (its reply ends in `.$FI`) or of an atomic batch
        (`Nats-Batch-Id`), in Go's order of the two."""
        batching = self._batching
        if batching is None:
            batching = self._batching = Batching(self)
        if reply[-4:] == FAST_SUFFIX:
            batching.on_fast(subject, reply, header, data)
            return
        batch_id = header_value(header, "Nats-Batch-Id")
        if batch_id:
            batching.on_atomic(batch_id, subject, reply, header, data)
            return
        # An empty batch id: a plain publish, as nats-server takes it.
        try:
            seq, duplicate = self.process_message(subject, header, data)
        except ApiError as e:
            if reply and not self.config.no_ack:
                self.reply_error(reply, e)
            return
        if reply and not self.config.no_ack and seq:
            ack = self.ack_prefix() + b"%d" % seq
            if duplicate:
                self.ajs.reply(reply, ack + b',"duplicate": true}')
            else:
                end = self._counter_ack_end() if self.counter_total else b"}"
                self.queue_ack(reply, ack + end, seq)

    def seen_msg_id(self, msg_id: str) -> int:
        """The sequence of `msg_id` inside the duplicate window, 0 when not seen."""
        self._finish_dedupe()
        order = self._msg_id_order
        if order and order[0][0] + self.config.duplicate_window < now_ns():
            self._expire_msg_ids(now_ns())
        seen = self._msg_ids.get(msg_id)
        return seen[0] if seen is not None else 0

    def reply_error(self, reply: bytes, e: ApiError) -> None:
        self.ajs.reply(reply, go_json({"error": e.to_json(), "stream": self.name, "seq": 0}))

    def ack_prefix(self) -> bytes:
        """`{"stream":..,["domain":..,]"seq":` (Go's mset.pubAck)."""
        prefix = self._ack_prefix
        if not prefix:
            prefix = b'{"stream":%s,' % go_json(self.name)
            if self.ajs.domain:
                prefix += b'"domain":' + go_json(self.ajs.domain) + b","
            self._ack_prefix = prefix = prefix + b'"seq":'
        return prefix

    def queue_ack(self, reply: bytes, ack: bytes, seq: int) -> None:
        """Send `ack` once `seq` (and all before) is durable."""
        acks = self._acks
        acks.append((reply, ack, seq))
        if len(acks) == 1:
            # One durability wait for every PubAck of this turn of the loop, registered
            # after the last of their writes.
            self.ajs.loop.call_soon(self._wait_for_acks)

    def _wait_for_acks(self) -> None:
        acks, self._acks = self._acks, []
        if not acks:  # already waited for by _store_pending
            return
        self._mstore.when_durable(acks[-1][2], partial(self._send_acks, acks))

    def _send_acks(self, acks: list[tuple[bytes, bytes, int]]) -> None:
        """What `ajs.reply` does for each, with the receiver looked up once for a run of
        PubAcks to one reply subject (a publisher with one inbox for its acks) while the
        subscriptions stay as they are; a plain receiver's frames go straight into its queue,
        counted once for the run (`deliver_stored`, inlined)."""
        ajs = self.ajs
        sublist = ajs.account.sublist
        deliver_to = ajs.deliver_to
        last = b""
        genid = -1
        sub: Subscription | None = None
        outbound: Outbound | None = None
        count = nbytes = 0
        for subject, ack, _ in acks:
            if subject != last or sublist.genid != genid:
                if outbound is not None and sub is not None:
                    settle_stored(sub, outbound, count, nbytes)
                    count = nbytes = 0
                last, genid = subject, sublist.genid
                result = sublist.match_bytes(subject)
                psubs = result.psubs
                sub = psubs[0] if len(psubs) == 1 and not result.qsubs else None
                outbound = plain_stored_outbound(sub) if sub is not None else None
            if outbound is not None and sub is not None and not sub.client.closed:
                outbound.frames.append(stored_msg_frame(subject, sub.sid, b"", b"", ack))
                count += 1
                nbytes += len(ack)
            elif sub is not None:
                deliver_to(sub, subject, b"", b"", ack)
            else:
                ajs.reply(subject, ack)
        if outbound is not None and sub is not None:
            settle_stored(sub, outbound, count, nbytes)
        ajs.server.flush_soon()

    def process_message(
        self,
        subject: str,
        header: bytes,
        data: bytes,
        sourced: bool = False,
        trace: MsgTrace | None = None,
    ) -> tuple[int, bool]:
        """Store one message; returns (seq, duplicate). Raises ApiError for a rejected one.
        `sourced` is for messages the server itself places (sources, mirrors, markers). A
        traced message is reported once it passed every check; trace only, it stops there
        (seq 0: no ack)."""
        if self._pending:
            self._store_pending()
        cfg = self.config
        if cfg.sealed:
            raise errors.stream_sealed()
        msg_id = ""
        rollup = ""
        if self._dedupe_next:
            if header and (b"Nats-Msg-Id" in header or b"Nats-Expected-Last-Msg-Id" in header):
                self._finish_dedupe()
            else:
                # This message's (empty) id becomes the last one, whatever the rebuild finds.
                self._dedupe_owns_last = False
        if header:
            # Most headers carry only an id (and an expected stream): each lookup below only
            # when its key is there at all, which one scan of the block says cheaply.
            if not sourced and (
                b"\r\nNats-Expected-" in header
                or b"\r\nNats-TTL:" in header
                or b"\r\nNats-Incr:" in header
                or b"\r\nNats-Schedule" in header
            ):
                # Only when the header has something to check.
                header = self._check_headers(subject, header, data)
            msg_id = header_value(header, "Nats-Msg-Id") or ""
            if msg_id and cfg.mirror is None:
                order = self._msg_id_order
                if order and order[0][0] + cfg.duplicate_window < now_ns():
                    self._expire_msg_ids(now_ns())
                seen = self._msg_ids.get(msg_id)
                if seen is not None:
                    return seen[0], True
            if b"\r\nNats-Expected-Last-Msg-Id:" in header:
                expected_id = header_value(header, "Nats-Expected-Last-Msg-Id")
                if expected_id and not sourced and expected_id != self.last_msg_id:
                    raise errors.wrong_last_msg_id(self.last_msg_id).traced_as(
                        f"last msgid mismatch: {_quote(expected_id)} vs {_quote(self.last_msg_id)}"
                    )
            if b"\r\nNats-Rollup:" in header:
                rollup = header_value(header, "Nats-Rollup") or ""
                if rollup:
                    if not sourced and not (cfg.allow_rollup_hdrs and not cfg.deny_purge):
                        raise errors.rollup_failed("rollup not permitted").traced_as(
                            "rollup not permitted"
                        )
                    if rollup not in ("sub", "all"):
                        invalid = f"rollup value invalid: {_quote(rollup)}"
                        raise errors.rollup_failed(invalid).traced_as(invalid)
        if cfg.allow_msg_counter:
            header, data, self.counter_total = apply_increment(self, subject, header, data)
        hlen = len(header)
        max_payload = self._max_payload
        if hlen > max_payload or len(data) > max_payload - hlen:
            raise errors.message_size_exceeds().traced_as(_MAX_PAYLOAD_TEXT)
        max_size = cfg.max_msg_size
        if max_size >= 0 and (hlen > max_size or len(data) > max_size - hlen):
            raise errors.message_size_exceeds().traced_as(_MAX_PAYLOAD_TEXT)
        if hlen > _MAX_HEADER:
            raise js_error("StreamHeaderExceedsMaximum").traced_as(_MAX_PAYLOAD_TEXT)
        if self.ajs.storage_limited:
            self.ajs.check_resources(self)
        ttl = 0
        if header and b"\r\nNats-TTL:" in header:
            text = header_value(header, "Nats-TTL")
            if text:
                ttl = parse_message_ttl(text)
                marker_ttl = cfg.subject_delete_marker_ttl // NS
                if 0 < ttl < marker_ttl and cfg.max_msgs_per_subject != 1:
                    # Subject delete markers: a message lives at least as long as a marker.
                    ttl = marker_ttl
                    header = _replace_header(header, "Nats-TTL", str(ttl))
        if trace is not None:
            no_interest = cfg.retention == "interest" and not any(
                c.wants(subject) for c in self.consumers.values()
            )
            trace.jetstream_reached(subject, no_interest)
            if trace.only:
                return 0, False
        if cfg.retention == "interest" and not any(
            c.wants(subject) for c in self.consumers.values()
        ):
            # Nobody would ever consume it: the sequence is used up, nothing is kept.
            seq, _ = self._store(subject, header, data)
            self.store.remove_msg(seq)
            self._after_id(msg_id, seq)
            return seq, False
        before = self._mstore.change_mark()[1] if self.consumers else 0
        seq, ts = self._store(subject, header, data)
        if self.consumers and self._mstore.change_mark()[1] != before + 1:
            # Limits dropped older messages: the consumers count what is pending afresh.
            for consumer in self.consumers.values():
                consumer.forget_pending_count()
        self._after_id(msg_id, seq, ts)
        if rollup and cfg.allow_rollup_hdrs and not cfg.deny_purge:
            if rollup == "sub":
                self.purge(subject=subject, keep=1)
            else:
                self.purge(keep=1)
        if self.scheduling is not None:
            self.scheduling.stored(seq, subject, header, ts)
        if ttl > 0 and cfg.allow_msg_ttl:
            self._track_ttl(seq, ts, ttl)
        if self._republish is not None:
            self._do_republish(subject, header, data, seq, ts)
        if self.consumers:
            for consumer in list(self.consumers.values()):
                consumer.on_new_message(seq, subject)
        if self.followers:
            for follower in list(self.followers):
                follower.signal()
        if self._expiry_timer is None and cfg.max_age > 0:
            self.schedule_expiry()
        return seq, False

    def _store(self, subject: str, header: bytes, data: bytes) -> tuple[int, int]:
        try:
            return self._mstore.store_msg(subject, header, data)
        except StoreError as e:
            raise errors.stream_store_failed(e.description) from None

    def _after_id(self, msg_id: str, seq: int, ts: int = 0) -> None:
        self.last_msg_id = msg_id
        if msg_id:
            ts = ts or now_ns()
            self._msg_ids[msg_id] = (seq, ts)
            self._msg_id_order.append((ts, msg_id))

    def _check_headers(self, subject: str, header: bytes, data: bytes) -> bytes:
        """The publish expectations, in nats-server's order; the header to store."""
        # Each lookup only when its key is there at all (a scan is cheaper than a lookup).
        cfg = self.config
        if b"\r\nNats-Incr:" in header:
            check_increment(self, header, data)
        expected_stream = header_value(header, "Nats-Expected-Stream")
        if expected_stream and expected_stream != self.name:
            raise errors.stream_not_match().traced_as("expected stream does not match")
        if b"\r\nNats-TTL:" in header and ttl_or_zero(header) != 0 and not cfg.allow_msg_ttl:
            raise js_error("MessageTTLDisabled").traced_as("message TTL disabled")
        if b"\r\nNats-Expected-Last-" not in header:
            subject_seq = for_subject = expected_last = None
        else:
            subject_seq = header_value(header, "Nats-Expected-Last-Subject-Sequence")
            for_subject = header_value(header, "Nats-Expected-Last-Subject-Sequence-Subject")
            expected_last = header_value(header, "Nats-Expected-Last-Sequence")
        if subject_seq is not None:
            last_msg = self.store.load_last_msg(for_subject or subject)
            last = last_msg.seq if last_msg is not None else 0
            if _as_int(subject_seq) != last:
                raise errors.wrong_last_sequence(last).traced_as(
                    f"last sequence by subject mismatch: {_as_int(subject_seq)} vs {last}"
                )
        elif for_subject:
            raise js_error("StreamExpectedLastSeqPerSubjectInvalid")
        if expected_last is not None:
            last = self.store.state().last_seq
            if _as_int(expected_last) != last:
                raise errors.wrong_last_sequence(last).traced_as(
                    f"last sequence mismatch: {_as_int(expected_last)} vs {last}"
                )
        if b"\r\nNats-Schedule" in header:
            return check_publish(self, subject, header)
        return header

    def _do_republish(self, subject: str, header: bytes, data: bytes, seq: int, ts: int) -> None:
        assert self._republish is not None
        dest = self._republish.apply(subject)
        if dest is None:
            return
        last = self.store.load_prev_msg(subject, seq - 1) if seq > 1 else None
        extra = [
            ("Nats-Stream", self.name),
            ("Nats-Subject", subject),
            ("Nats-Sequence", str(seq)),
            ("Nats-Time-Stamp", rfc3339_ns(ts)),
            ("Nats-Last-Sequence", str(last.seq if last is not None else 0)),
        ]
        body = data
        if self.config.republish is not None and self.config.republish.headers_only:
            extra.append(("Nats-Msg-Size", str(len(data))))
            body = b""
        self.ajs.server.publish_internal(
            self.ajs.account, dest, "", append_headers(header, extra), body
        )

    def _expire_msg_ids(self, now: int) -> None:
        window = self.config.duplicate_window
        order = self._msg_id_order
        while order and order[0][0] + window < now:
            _, msg_id = order.popleft()
            entry = self._msg_ids.get(msg_id)
            if entry is not None and entry[1] + window < now:
                del self._msg_ids[msg_id]

    def rebuild_msg_ids(self) -> None:
        """After a restart: the duplicate window is rebuilt from the stored headers (Go's
        rebuildDedupe). It runs in the background, a slice per turn of the event loop, so a
        large stream does not delay the start; a publish that needs it finishes it first."""
        window = self.config.duplicate_window
        st = self.store.state()
        if st.messages == 0:
            return
        self._dedupe_next = max(self.store.seq_for_time(now_ns() - window), st.first_seq, 1)
        self._dedupe_last = st.last_seq
        self._dedupe_slice()

    def _dedupe_slice(self, limit: int = 20_000) -> None:
        seq = self._dedupe_next
        last = self._dedupe_last
        store = self.store
        budget = limit
        while seq and seq <= last and budget > 0:
            msg = store.load_next_msg("", seq)
            if msg is None or msg.seq > last:
                seq = last + 1
                break
            budget -= 1
            msg_id = header_value(msg.header, "Nats-Msg-Id") if msg.header else None
            if msg_id and msg_id not in self._msg_ids:
                self._msg_ids[msg_id] = (msg.seq, msg.ts)
                self._msg_id_order.append((msg.ts, msg_id))
            if msg.seq == last and self._dedupe_owns_last:
                self.last_msg_id = msg_id or ""
            seq = msg.seq + 1
        if seq and seq <= last:
            self._dedupe_next = seq
            if not self.closed:
                self.ajs.loop.call_soon(self._dedupe_slice)
            return
        self._dedupe_next = 0

    def _finish_dedupe(self) -> None:
        if self._dedupe_next:
            self._dedupe_slice(limit=1 << 62)

    # -- removal ---------------------------------------------------------------------------------

    def purge(self, subject: str = "", seq: int = 0, keep: int = 0) -> int:
        """Purge the store and bring the consumers along (Go's purgeLocked)."""
        purged = self.store.purge(subject=subject, seq=seq, keep=keep)
        if purged or seq:
            first = self.store.state().first_seq
            for consumer in list(self.consumers.values()):
                consumer.on_purge(first)
        return purged

    def remove_msg(self, seq: int, erase: bool = False) -> bool:
        if not self.store.remove_msg(seq, erase=erase):
            return False
        for consumer in list(self.consumers.values()):
            consumer.on_msg_removed(seq)
        return True

    def on_acked(self, consumer: Consumer, seq: int) -> None:
        """A consumer acknowledged (or, with ack none, was handed) `seq`: work-queue and
        interest streams drop it once no consumer needs it any more (Go's ackMsg)."""
        retention = self.config.retention
        if retention == "limits":
            return
        if retention == "workqueue":
            self.store.remove_msg(seq)
            return
        subject = getattr(self.store, "msg_subject", None)
        subj = subject(seq) if subject is not None else None
        if subj is None:
            msg = self.store.load_msg(seq)
            if msg is None:
                return
            subj = msg.subject
        if not any(c.needs_ack(seq, subj) for c in self.consumers.values() if c is not consumer):
            self.store.remove_msg(seq)

    def consumer_deleted(self) -> None:
        """A consumer went: on an interest stream, what no remaining consumer still needs goes
        too (Go's checkInterestState after a consumer delete)."""
        if self.config.retention != "interest" or self.closed:
            return
        consumers = list(self.consumers.values())
        seq = self.store.state().first_seq
        while True:
            msg = self.store.load_next_msg("", seq)
            if msg is None:
                return
            if not any(c.needs_ack(msg.seq, msg.subject) for c in consumers):
                self.store.remove_msg(msg.seq)
            seq = msg.seq + 1

    # -- sourcing --------------------------------------------------------------------------------

    def store_sourced(self, msg: StoredMsg, subject: str, header: bytes) -> int:
        """A message copied from an origin stream (Go's processInboundSourceMsg path)."""
        seq, _ = self.process_message(subject, header, msg.data, sourced=True)
        return seq

    # -- reporting -------------------------------------------------------------------------------

    def state_json(
        self, subjects_filter: str = "", deleted_details: bool = False
    ) -> dict[str, Any]:
        st = self.store.state()
        out: dict[str, Any] = {
            "messages": st.messages,
            "bytes": st.bytes,
            "first_seq": st.first_seq,
            "first_ts": rfc3339_ns(st.first_ts),
            "last_seq": st.last_seq,
            "last_ts": rfc3339_ns(st.last_ts),
        }
        if st.num_subjects:
            out["num_subjects"] = st.num_subjects
        if subjects_filter:
            subjects = self.store.subjects_state(subjects_filter)
            if subjects:
                out["subjects"] = subjects
        if deleted_details and st.num_deleted:
            deleted = getattr(self.store, "deleted_seqs", None)
            if deleted is not None:
                out["deleted"] = deleted()
        if st.num_deleted:
            out["num_deleted"] = st.num_deleted
        # Direct consumers (other streams' mirrors and sources) are not counted.
        out["consumer_count"] = sum(1 for c in self.consumers.values() if not c.config.direct)
        return out

    def info(
        self, full_metadata: bool = True, subjects_filter: str = "", deleted_details: bool = False
    ) -> dict[str, Any]:
        out: dict[str, Any] = {
            "config": self.config.to_reply(full_metadata),
            "created": rfc3339_ns(self.created_ns),
            "state": self.state_json(subjects_filter, deleted_details),
        }
        if self.mirror is not None:
            out["mirror"] = self.mirror.info()
        if self.sources:
            out["sources"] = [s.info() for s in self.sources]
        return out

    def identity(self) -> str:
        """nats-server's stream identity: a hash of the creation time (tells a recreated
        stream from the original, in source headers)."""
        return go_hash(rfc3339_ns(self.created_ns))

    def matches(self, subject: str) -> bool:
        return any(match_literal(subject, s) for s in self.config.subjects)

    # -- lifecycle -------------------------------------------------------------------------------

    def _cancel_expiry(self) -> None:
        if self._expiry_timer is not None:
            self._expiry_timer.cancel()
            self._expiry_timer = None

    def _stop_common(self) -> None:
        if self._pending:
            self._store_pending()
        self.closed = True
        if self._batching is not None:
            self._batching.stop()
        self._cancel_expiry()
        if self._ttl_timer is not None:
            self._ttl_timer.cancel()
            self._ttl_timer = None
        if self.scheduling is not None:
            self.scheduling.stop()
        for src in self._all_sources():
            src.stop()
        self.unsubscribe()

    def stop(self) -> None:
        """Stop capturing and close the store (server shutdown); data stays on disk."""
        self._stop_common()
        for consumer in list(self.consumers.values()):
            consumer.stop()
        try:
            self.store.close()
        except Exception:  # a failing disk must not stop the shutdown of the rest
            log.exception("closing stream %s", self.name)

    def delete(self) -> None:
        for src in self._all_sources():
            if isinstance(src, RemoteSource):
                src.forget()
        self._stop_common()
        for consumer in list(self.consumers.values()):
            consumer.delete()
        self.store.delete()


def _source(stream: Stream, cfg: StreamSource, mirror: bool) -> Source:
    """A mirror or source: through the origin's durable consumer when it names one (ADR-60),
    through a consumer it has created when the origin is in another server (an `external` API
    prefix not answered here), else read from the origin's store."""
    if cfg.consumer is not None and cfg.consumer.name:
        return DurableSource(stream, cfg, mirror)
    if served_elsewhere(stream.ajs, cfg.external):
        return RemoteSource(stream, cfg, mirror)
    return Source(stream, cfg, mirror)


def _replace_header(header: bytes, key: str, value: str) -> bytes:
    lines = header.split(b"\r\n")
    prefix = key.encode() + b":"
    kept = [ln for ln in lines[1:] if ln and not ln.startswith(prefix)]
    return b"\r\n".join([lines[0], *kept, prefix + b" " + value.encode(), b"", b""])


# The error a message trace shows for a message over a size limit (Go's ErrMaxPayload).
_MAX_PAYLOAD_TEXT = "maximum payload exceeded"


def _quote(text: str) -> str:
    """Go's %q of a header value."""
    return json.dumps(text, ensure_ascii=False)


def _as_int(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        return -1
