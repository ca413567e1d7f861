"""JetStream for the whole server and for each account: storage layout, recovery, the registry
of streams, and the helpers the API, streams and consumers use to send messages.

Layout on disk (as nats-server's): `<store_dir>/jetstream/<account>/streams/<stream>/`, holding
`meta.json` (config and creation time) and the stream's file store in `msgs/`.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import tempfile
from typing import TYPE_CHECKING, Any

from pynatsd.jetstream import advisories, errors
from pynatsd.jetstream.batching import InflightCounts
from pynatsd.jetstream.batching import limits_from as batch_limits_from
from pynatsd.jetstream.cluster.clustered import ClusteredJetStream
from pynatsd.jetstream.cluster.meta import MetaGroup
from pynatsd.jetstream.consumer import Consumer
from pynatsd.jetstream.consumer_config import ConsumerConfig
from pynatsd.jetstream.standalone import JetStreamPeers
from pynatsd.jetstream.store import open_file_store, open_memory_store
from pynatsd.jetstream.store.base import StreamStore
from pynatsd.jetstream.stream import Stream, limits_of
from pynatsd.jetstream.stream_config import StreamConfig
from pynatsd.jetstream.util import API_TYPE_PREFIX, go_json, now_ns
from pynatsd.logger import log
from pynatsd.options import JETSTREAM_SYNC_INTERVAL, JetStreamAccountLimits
from pynatsd.protocol.events import Pub
from pynatsd.server.accounts import SYSTEM_ACCOUNT
from pynatsd.server.delivery import deliver_first, deliver_stored, fan_out
from pynatsd.server.routed import (
    deliver_routed,
    has_routed_interest,
    interest_generation,
    shown,
)
from pynatsd.server.subscription import InternalClient, InternalSubscription
from pynatsd.subjects import subjects_collide

if TYPE_CHECKING:
    from pynatsd.jetstream.api import JetStreamApi
    from pynatsd.server.accounts import Account
    from pynatsd.server.server import Server


# How often the account looks for subscription changes that concern push consumers (seconds).
_INTEREST_TICK = 0.005


def default_store_dir() -> str:
    # nats-server's default: a `nats` folder in the system temporary directory.
    return os.path.join(tempfile.gettempdir(), "nats")


# A single server's streams and consumers have one replica: their limits tier (tierName).
TIER = "R1"
# What a tiered account without an R1 tier gets: no stream may be added (NoLimits).
_NO_TIER = JetStreamAccountLimits()


def _limits_json(lim: JetStreamAccountLimits) -> dict[str, Any]:
    return {
        "max_memory": lim.max_memory,
        "max_storage": lim.max_store,
        "max_streams": lim.max_streams,
        "max_consumers": lim.max_consumers,
        "max_ack_pending": lim.max_ack_pending,
        "memory_max_stream_bytes": lim.memory_max_stream_bytes,
        "storage_max_stream_bytes": lim.store_max_stream_bytes,
        "max_bytes_required": lim.max_bytes_required,
    }


class AccountJetStream:
    """JetStream inside one account."""

    def __init__(
        self,
        js: JetStream,
        account: Account,
        limits: JetStreamAccountLimits | None = None,
        enabled: bool = True,
    ) -> None:
        self.js = js
        self.account = account
        # The limits as configured (zeros beside `tiers` for a tiered account) and the ones
        # that apply: a single server's streams have one replica, so tier R1.
        self.declared = limits or JetStreamAccountLimits()
        tiers = self.declared.tiers
        self.limits = self.declared if tiers is None else tiers.get(TIER, _NO_TIER)
        lim = self.limits
        self.storage_limited = max(lim.max_memory, lim.max_store, js.max_memory, js.max_store) >= 0
        # A disabled account only answers `$JS.API.INFO` ("not enabled for account"), as
        # nats-server's info-only service import does.
        self.enabled = enabled
        self.api: JetStreamApi | None = None
        self.server: Server = js.server
        self.streams: dict[str, Stream] = {}
        self.dir = os.path.join(js.store_dir, "jetstream", account.name, "streams")
        self._api_owner = InternalClient(account, "jetstream-api")
        self._api_subs: list[InternalSubscription] = []
        self.api_total = 0
        self.api_errors = 0
        self._push: set[Consumer] = set()
        self._interest_timer: asyncio.TimerHandle | None = None
        self._interest_gen: tuple[int, ...] = ()

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        return self.server.loop

    @property
    def domain(self) -> str:
        return self.js.domain

    def api_prefixes(self) -> list[str]:
        """`$JS.API`, and with a domain also `$JS.<domain>.API` (nats-server maps the second
        onto the first in every JetStream account)."""
        if self.js.domain:
            return ["$JS.API", f"$JS.{self.js.domain}.API"]
        return ["$JS.API"]

    # -- messaging helpers -----------------------------------------------------------------------

    def reply(self, subject: str | bytes, data: bytes, header: bytes = b"") -> None:
        self.server.publish_internal(self.account, subject, "", header, data)

    def deliver(self, inbox: str, subject: str, reply: bytes, header: bytes, data: bytes) -> bool:
        """To one subscriber of `inbox` (a pull request's reply), shown under `subject`."""
        routing = inbox.encode()
        result = self.account.sublist.match_bytes(routing)
        ev = shown(subject.encode(), reply, header + data, len(header) if header else -1, routing)
        delivered = deliver_first(result, ev)
        self.server.flush_soon()
        return delivered

    def deliver_push(
        self, deliver_subject: str, subject: str, reply: bytes, header: bytes, data: bytes
    ) -> bool:
        """To a push consumer's deliver subject as a publish would go (every plain subscriber,
        one member of each queue group), the MSG line showing the stream subject; through
        stream imports as nats-server's shadow subscriptions carry it."""
        if self.account.stream_import_subs:
            ev = Pub(subject.encode(), reply, header + data, len(header) if header else -1)
            delivered = deliver_routed(self.account, deliver_subject, ev)
            self.server.flush_soon()
            return delivered
        routing = deliver_subject.encode()
        result = self.account.sublist.match_bytes(routing)
        if not result.psubs and not result.qsubs:
            return False
        payload = header + data
        ev = shown(subject.encode(), reply, payload, len(header) if header else -1, routing)
        delivered = fan_out(None, result, ev)
        self.server.flush_soon()
        return delivered

    # deliver_to(target, subject, reply, header, data) -> bool: to one known subscriber (a
    # pull request's reply, looked up once by the consumer), the pull consumers' fast path.
    # JetStream reaches the server's delivery only through this manager; this one is the
    # server's function itself, so the hot path pays no extra call per message.
    deliver_to = staticmethod(deliver_stored)

    def has_interest(self, subject: str) -> bool:
        return self.account.sublist.has_interest(subject)

    def has_delivery_interest(self, subject: str, group: str) -> bool:
        """A subscriber of a deliver subject (a member of `group` if one is named) here or in
        an account that imports it as a stream (nats-server's shadow subscriptions)."""
        return has_routed_interest(self.account, subject, group)

    # -- interest in push consumers' deliver subjects --------------------------------------------

    def watch_interest(self, consumer: Consumer) -> None:
        """nats-server registers a sublist notification per push consumer; here one timer per
        account compares the SubList's change counter and tells the push consumers when it
        moved (a few integer comparisons per tick while nothing changes)."""
        self._push.add(consumer)
        if self._interest_timer is None:
            self._interest_gen = interest_generation(self.account)
            self._interest_timer = self.loop.call_later(_INTEREST_TICK, self._interest_tick)

    def unwatch_interest(self, consumer: Consumer) -> None:
        self._push.discard(consumer)

    def _interest_tick(self) -> None:
        self._interest_timer = None
        if not self._push:
            return
        gen = interest_generation(self.account)
        if gen != self._interest_gen:
            self._interest_gen = gen
            for consumer in list(self._push):
                consumer.interest_changed()
        self._interest_timer = self.loop.call_later(_INTEREST_TICK, self._interest_tick)

    # -- streams ---------------------------------------------------------------------------------

    def _stream_dir(self, name: str) -> str:
        return os.path.join(self.dir, name)

    def open_store(self, config: StreamConfig) -> StreamStore:
        limits = limits_of(config)
        if config.storage == "memory":
            return open_memory_store(limits)
        # The file store lays out its own msgs/ and consumers/ inside the stream directory.
        path = self._stream_dir(config.name)
        os.makedirs(path, exist_ok=True)
        return open_file_store(
            path,
            limits,
            sync_always=self.js.sync_always,
            sync_interval=self.js.sync_interval,
        )

    def check_overlap(self, config: StreamConfig, ignore: str = "") -> None:
        for other in self.streams.values():
            if other.name == ignore:
                continue
            for a in config.subjects:
                for b in other.config.subjects:
                    if subjects_collide(a, b):
                        raise errors.stream_subject_overlap()

    def add_stream(self, config: StreamConfig, store: StreamStore | None = None) -> Stream:
        """A new stream; `store` is one already filled (a restore), else an empty one."""
        self.check_overlap(config)
        created = now_ns()
        if config.storage == "file":
            self._write_meta(config, created)
        if store is None:
            store = self.open_store(config)
        if config.first_seq > 1 and store.state().last_seq == 0:
            # An empty store "purged up to" first_seq starts numbering there (Go's Compact).
            store.purge(seq=config.first_seq)
        stream = Stream(self, config, store, created)
        self.streams[stream.name] = stream
        stream.start()
        # An origin may be followed from another account (`external`): every stream looks.
        for ajs in list(self.js.accounts.values()):
            for other in list(ajs.streams.values()):
                if other is not stream:
                    other.origin_created(stream.name)
        advisories.stream_action(stream, advisories.CREATE)
        return stream

    def open_replica(self, config: StreamConfig, created: int) -> Stream:
        """A clustered stream's replica here (jetstream/cluster/clustered.py): its store as a
        stream of its own would have it, kept across restarts; the caller starts it."""
        if config.storage == "file":
            self._write_meta(config, created)
        stream = Stream(self, config, self.open_store(config), created)
        stream.rebuild_msg_ids()
        self.streams[stream.name] = stream
        return stream

    def api_answer(self, reply: str, rtype: str, result: dict[str, Any]) -> None:
        """An API response sent later than its request (a clustered create or delete). A
        service import's reply (`_R_.…`, a request nats-server forwarded) is in `$SYS`."""
        data = go_json({"type": API_TYPE_PREFIX + rtype, **result})
        if reply.startswith("_R_."):
            self.server.publish_internal(self.server.system_account, reply, "", b"", data)
        else:
            self.reply(reply, data)

    def stream_configs(self) -> dict[str, StreamConfig]:
        return {name: s.config for name, s in self.streams.items()}

    def _write_meta(self, config: StreamConfig, created: int) -> None:
        path = self._stream_dir(config.name)
        os.makedirs(path, exist_ok=True)
        tmp = os.path.join(path, "meta.json.tmp")
        with open(tmp, "w") as f:
            json.dump({"config": config.to_stored(), "created": created}, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, os.path.join(path, "meta.json"))

    def update_stream(self, stream: Stream, config: StreamConfig) -> None:
        self.check_overlap(config, ignore=stream.name)
        stream.update_config(config)
        if config.storage == "file":
            self._write_meta(config, stream.created_ns)
        for consumer in list(stream.consumers.values()):
            consumer.signal()
        advisories.stream_action(stream, advisories.MODIFY)

    def delete_stream(self, stream: Stream) -> None:
        stream.delete()  # each consumer's delete advisory first, as nats-server sends them
        advisories.stream_action(stream, advisories.DELETE)
        self.streams.pop(stream.name, None)
        shutil.rmtree(self._stream_dir(stream.name), ignore_errors=True)
        for ajs in self.js.accounts.values():
            for other in ajs.streams.values():
                other.origin_deleted(stream)

    def add_consumer(self, stream: Stream, config: ConsumerConfig, name: str) -> Consumer:
        clustered = self.js.clustered
        if stream.replicator is not None and clustered is not None:
            # A clustered stream's consumer is an assignment of the meta group; its first
            # leader answers the create (jetstream/cluster/clustered.py).
            clustered.propose_consumer(stream, config.to_json(), name)
            raise errors.ResponseLater()
        consumer = Consumer(stream, config, now_ns(), name)
        stream.consumers[consumer.name] = consumer
        consumer.start()
        advisories.consumer_action(consumer, advisories.CREATE)
        return consumer

    def delete_consumer(self, stream: Stream, name: str) -> bool:
        consumer = stream.consumers.pop(name, None)
        if consumer is None:
            return False
        consumer.delete()
        stream.consumer_deleted()
        return True

    def recover(self) -> None:
        """Open every file stream found on disk, with its durable consumers."""
        if not os.path.isdir(self.dir):
            return
        for name in sorted(os.listdir(self.dir)):
            meta_path = os.path.join(self.dir, name, "meta.json")
            try:
                with open(meta_path) as f:
                    meta = json.load(f)
                stored = meta["config"]
                created = int(meta["created"])
            except (OSError, ValueError, KeyError) as e:
                log.error("JetStream: skipping stream directory %s: %s", name, e)
                continue
            try:
                config = StreamConfig.from_stored(stored)
                store = self.open_store(config)
            except Exception as e:
                log.error("JetStream: could not open stream %s: %s", name, e)
                continue
            stream = Stream(self, config, store, created)
            stream.rebuild_msg_ids()
            self.streams[stream.name] = stream
            for cname in store.consumer_names():
                state = store.consumer_state_store(cname).load()
                if not state or "config" not in state:
                    continue
                try:
                    ccfg = ConsumerConfig.from_stored(state["config"])
                    consumer = Consumer(
                        stream, ccfg, int(state.get("created", 0)), state.get("name") or cname
                    )
                    stream.consumers[consumer.name] = consumer
                    consumer.start(restored=state)
                except Exception:  # one bad consumer state must not keep the stream down
                    log.exception("JetStream: could not restore consumer %s > %s", name, cname)
            st = store.state()
            log.info(
                "  Restored %d messages for stream '%s > %s'",
                st.messages,
                self.account.name,
                stream.name,
            )
        # Subjects and sources only once every stream is back (a source may name a later one).
        for stream in list(self.streams.values()):
            stream.start()

    # -- API subscription ------------------------------------------------------------------------

    def start_api(self) -> None:
        from pynatsd.jetstream.api import API_SUBJECTS, JetStreamApi

        api = self.api = JetStreamApi(self)
        subjects = API_SUBJECTS if self.enabled else ("$JS.API.INFO",)
        self._api_subs = [
            InternalSubscription(
                self._api_owner, prefix + subject[len("$JS.API") :], api.on_request
            )
            for prefix in self.api_prefixes()
            for subject in subjects
        ]
        for sub in self._api_subs:
            self.account.sublist.insert(sub)

    def stop(self) -> None:
        if self._interest_timer is not None:
            self._interest_timer.cancel()
            self._interest_timer = None
        if self._api_subs:
            for sub in self._api_subs:
                sub.closed = True
            self.account.sublist.remove_batch(self._api_subs)
            self._api_subs = []
        for stream in list(self.streams.values()):
            stream.stop()

    # -- limits (the account's `jetstream {}` block) ---------------------------------------------

    def limit(self, key: str) -> int:
        value: int = getattr(self.limits, key)
        return value

    def limits_json(self) -> dict[str, Any]:
        return _limits_json(self.declared)

    def tiers_json(self) -> dict[str, Any] | None:
        """JetStreamUsage's `tiers` for a tiered account (None otherwise): each tier with its
        limits, and the usage of this server's streams, all of tier R1."""
        tiers = self.declared.tiers
        if tiers is None:
            return None
        memory, storage, consumers = self.usage()
        out: dict[str, Any] = {}
        for name in sorted(tiers):
            used = name == TIER
            out[name] = {
                "memory": memory if used else 0,
                "storage": storage if used else 0,
                "reserved_memory": self.reserved("memory") if used else 0,
                "reserved_storage": self.reserved("file") if used else 0,
                "streams": len(self.streams) if used else 0,
                "consumers": consumers if used else 0,
                "limits": _limits_json(tiers[name]),
            }
        return out

    def reserved(self, storage: str) -> int:
        """Bytes reserved by streams with max_bytes (nats-server's tieredReservation)."""
        return sum(
            s.config.max_bytes
            for s in self.streams.values()
            if s.config.storage == storage and s.config.max_bytes > 0
        )

    def check_stream_limits(self, config: StreamConfig) -> None:
        """nats-server's jsNonClusteredStreamLimitsCheck: stream count and storage."""
        lim = self.limits
        if lim is _NO_TIER:
            raise errors.js_error("NoLimits")
        if 0 < lim.max_streams <= len(self.streams) and config.name not in self.streams:
            raise errors.js_error("MaximumStreamsLimit")
        if config.max_consumers > 0 and 0 < lim.max_consumers < config.max_consumers:
            raise errors.js_error("MaximumConsumersLimit")
        add = config.max_bytes if config.max_bytes > 0 else 1
        current = self.reserved(config.storage)
        if config.storage == "memory":
            if lim.max_memory >= 0 and (current > lim.max_memory or add > lim.max_memory - current):
                raise errors.js_error("MemoryResourcesExceeded")
        elif lim.max_store >= 0 and (current > lim.max_store or add > lim.max_store - current):
            raise errors.js_error("StorageResourcesExceeded")

    def check_max_bytes(self, config: StreamConfig) -> None:
        """checkStreamCfg's account part: max_bytes required, and within the per-stream cap."""
        lim = self.limits
        cap = (
            lim.memory_max_stream_bytes
            if config.storage == "memory"
            else lim.store_max_stream_bytes
        )
        if lim.max_bytes_required and config.max_bytes <= 0:
            raise errors.js_error("StreamMaxBytesRequired")
        if cap > 0 and config.max_bytes > cap:
            raise errors.js_error("StreamMaxStreamBytesExceeded")

    def check_resources(self, stream: Stream) -> None:
        """Before a store: the account's and the server's storage limits."""
        if not self.storage_limited:
            return  # nothing to check (callers on the publish path look first themselves)
        lim = self.limits
        memory, storage, _ = self.usage()
        if stream.config.storage == "memory":
            if 0 <= lim.max_memory < memory or 0 < self.js.max_memory < memory:
                raise errors.insufficient_resources()
        elif 0 <= lim.max_store < storage or 0 < self.js.max_store < storage:
            raise errors.insufficient_resources()

    def usage(self) -> tuple[int, int, int]:
        """(memory bytes, file bytes, consumers)."""
        memory = storage = consumers = 0
        for stream in self.streams.values():
            size = stream.store.state().bytes
            if stream.config.storage == "memory":
                memory += size
            else:
                storage += size
            consumers += len(stream.consumers)
        return memory, storage, consumers


class JetStream:
    """The server's JetStream: enabled by `-js` or the `jetstream {}` block; a part of the
    server (`server.parts.ServerPart`)."""

    name = "jetstream"

    def __init__(self, server: Server) -> None:
        self.server = server
        opts = server.options
        self.store_dir = opts.store_dir or default_store_dir()
        self.domain = opts.jetstream_domain
        # Batch publishing: the limits and the server-wide counts of open batches.
        self.batch_limits = batch_limits_from(opts)
        self.batch_counts = InflightCounts()
        self.max_memory = opts.jetstream_max_memory
        self.max_store = opts.jetstream_max_store
        # Durability beyond nats-server's default: fsync before every ack (group commit) unless
        # the configuration picks a `sync_interval` of its own (nats-server's lazy policy).
        self.sync_interval = opts.jetstream_sync_interval
        self.sync_always = opts.jetstream_sync_always or (
            opts.jetstream_sync_interval == JETSTREAM_SYNC_INTERVAL
        )
        self.accounts: dict[str, AccountJetStream] = {}
        self.disabled: dict[str, AccountJetStream] = {}
        # In a cluster (jetstream/standalone.py): why this server stopped serving JetStream
        # (another one serves it), and what the serving one knows of another JetStream server.
        self.standing_down = ""
        self.conflict = ""
        self.peers = JetStreamPeers(self)
        # Clustered JetStream (jetstream/cluster/): the meta group, when routes are configured.
        self.meta: MetaGroup | None = None
        self.clustered: ClusteredJetStream | None = None
        cluster = opts.cluster
        if cluster is not None and cluster.port != 0 and not opts.no_system_account:
            self.meta = MetaGroup(server, os.path.join(self.store_dir, "jetstream"))
            self.clustered = ClusteredJetStream(self, self.meta)

    async def start(self) -> None:
        os.makedirs(os.path.join(self.store_dir, "jetstream"), exist_ok=True)
        log.info("Starting JetStream")
        log.info("  Store Directory: %r", self.store_dir)
        for account, limits in self._account_limits():
            self._enable(account, limits)
        # A source may follow a stream of an account recovered after its own (`external`).
        for ajs in self.accounts.values():
            for stream in ajs.streams.values():
                stream.follow_origins()
        if self._operator_mode:
            # Operator-mode accounts come into being as their first client connects.
            self.server.account_added_hooks.append(self._account_added)
        self.server.peer_hooks.append(self.peers.peer_changed)
        if self.meta is not None and self.clustered is not None:
            self.server.peer_hooks.append(self.meta.peer_changed)
            self.meta.start()
            if self.meta.was_clustered():
                self.clustered.activate("this server was in a JetStream cluster")
        self.server.leaf_registered_hooks.append(self._leaf_registered)

    def _leaf_registered(self, account: Account) -> None:
        """nats-server's checkInternalSyncConsumers: a new leaf connection may lead to the
        origin of a mirror or source of the account that has none, or a stalled one."""
        ajs = self.accounts.get(account.name)
        if ajs is not None:
            for stream in list(ajs.streams.values()):
                stream.retry_disconnected_sources()

    def stand_down(self, reason: str) -> None:
        """Stop serving JetStream because another server of the cluster serves it: every
        account's API and streams unsubscribe and the consumers stop; the store stays."""
        if self.standing_down:
            return
        self.standing_down = reason
        accounts = [*self.accounts.values(), *self.disabled.values()]
        self.accounts.clear()
        self.disabled.clear()
        for ajs in accounts:
            ajs.stop()

    @property
    def _operator_mode(self) -> bool:
        opts = self.server.options
        return bool(opts.operator_jwts or opts.trusted_keys)

    def _enable(self, account: Account, limits: JetStreamAccountLimits | None) -> None:
        if limits is None:
            # nats-server gives such an account only the info API, answering "not enabled".
            ajs = AccountJetStream(self, account, enabled=False)
            self.disabled[account.name] = ajs
            ajs.start_api()
            return
        ajs = AccountJetStream(self, account, limits)
        self.accounts[account.name] = ajs
        ajs.recover()
        ajs.start_api()

    def _account_added(self, account: Account) -> None:
        """An operator-mode account registered after start (updateAccountClaims): JetStream
        with the limits of its JWT, which enables it by storage limits at the top level or in
        a tier."""
        if (
            account is self.server.system_account
            or account.name in self.accounts
            or self.standing_down
        ):
            return
        self._enable(account, account.config.jetstream if account.config else None)

    def _account_limits(self) -> list[tuple[Account, JetStreamAccountLimits | None]]:
        """Which accounts get JetStream (nats-server's configAllJetStreamAccounts): without an
        `accounts {}` block, the global account, unlimited; with one, the accounts that have a
        `jetstream` entry, with its limits (the others answer "not enabled for account"). In
        operator mode, the accounts known so far, by their JWTs."""
        server = self.server
        if self._operator_mode:
            return [
                (account, account.config.jetstream if account.config else None)
                for account in server.accounts.values()
                if account is not server.system_account and account.name != SYSTEM_ACCOUNT
            ]
        configs = list((server.options.accounts or {}).values())
        if not configs:
            return [(server.global_account, JetStreamAccountLimits())]
        out: list[tuple[Account, JetStreamAccountLimits | None]] = []
        configured = set()
        for cfg in configs:
            account = server.accounts.get(cfg.name)
            if account is None or account is server.system_account:
                continue
            configured.add(cfg.name)
            out.append((account, cfg.jetstream))
        if server.global_account.name not in configured:
            out.append((server.global_account, None))
        return out

    async def stop(self) -> None:
        if self.clustered is not None:
            self.clustered.stop()
        if self.meta is not None:
            self.meta.stop()
        if self._leaf_registered in self.server.leaf_registered_hooks:
            self.server.leaf_registered_hooks.remove(self._leaf_registered)
        for ajs in [*self.accounts.values(), *self.disabled.values()]:
            ajs.stop()

    def totals(self) -> dict[str, int]:
        memory = storage = streams = consumers = 0
        for ajs in self.accounts.values():
            m, s, c = ajs.usage()
            memory += m
            storage += s
            consumers += c
            streams += len(ajs.streams)
        return {"memory": memory, "storage": storage, "streams": streams, "consumers": consumers}
