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

from pynatsd.jetstream import errors
from pynatsd.jetstream.consumer import Consumer
from pynatsd.jetstream.store import open_file_store, open_memory_store
from pynatsd.jetstream.store.base import StreamStore
from pynatsd.jetstream.stream import Stream, limits_of
from pynatsd.jetstream.util import now_ns
from pynatsd.logger import log
from pynatsd.options import JETSTREAM_SYNC_INTERVAL
from pynatsd.server.subscription import InternalClient, InternalSubscription
from pynatsd.subjects import subjects_collide

if TYPE_CHECKING:
    from pynatsd.server.accounts import Account
    from pynatsd.server.server import Server


def default_store_dir() -> str:
    # nats-server's default: a `nats` folder in the system temporary directory.
    return os.path.join(tempfile.gettempdir(), "nats")


class AccountJetStream:
    """JetStream inside one account."""

    def __init__(self, js: JetStream, account: Account) -> None:
        self.js = js
        self.account = account
        self.server = js.server
        self.streams: dict[str, Stream] = {}
        self.dir = os.path.join(js.store_dir, "jetstream", account.name, "streams")
        self._api_owner = InternalClient(account, "jetstream-api")
        self._api_sub: InternalSubscription | None = None
        self.api_total = 0
        self.api_errors = 0

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        return self.server.loop

    @property
    def domain(self) -> str:
        return self.js.domain

    # -- messaging helpers -----------------------------------------------------------------------

    def reply(self, subject: str, data: bytes, header: bytes = b"") -> None:
        self.server.publish_internal(self.account, subject, "", header, data)

    def deliver(self, inbox: str, subject: str, reply: str, header: bytes, data: bytes) -> None:
        self.server.deliver_to_inbox(self.account, inbox, subject, reply, header, data)

    def has_interest(self, subject: str) -> bool:
        return self.account.sublist.has_interest(subject)

    # -- streams ---------------------------------------------------------------------------------

    def _stream_dir(self, name: str) -> str:
        return os.path.join(self.dir, name)

    def open_store(self, config: dict[str, Any]) -> StreamStore:
        limits = limits_of(config)
        if config["storage"] == "memory":
            return open_memory_store(limits)
        # The file store lays out its own msgs/ and consumers/ inside the stream directory.
        path = self._stream_dir(config["name"])
        os.makedirs(path, exist_ok=True)
        return open_file_store(
            path,
            limits,
            sync_always=self.js.sync_always,
            sync_interval=self.js.sync_interval,
        )

    def check_overlap(self, config: dict[str, Any], ignore: str = "") -> None:
        for other in self.streams.values():
            if other.name == ignore:
                continue
            for a in config["subjects"]:
                for b in other.config["subjects"]:
                    if subjects_collide(a, b):
                        raise errors.stream_subject_overlap()

    def add_stream(self, config: dict[str, Any]) -> Stream:
        self.check_overlap(config)
        created = now_ns()
        if config["storage"] == "file":
            self._write_meta(config, created)
        store = self.open_store(config)
        stream = Stream(self, config, store, created)
        self.streams[stream.name] = stream
        stream.subscribe()
        return stream

    def _write_meta(self, config: dict[str, Any], created: int) -> None:
        path = self._stream_dir(config["name"])
        os.makedirs(path, exist_ok=True)
        tmp = os.path.join(path, "meta.json.tmp")
        with open(tmp, "w") as f:
            json.dump({"config": config, "created": created}, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, os.path.join(path, "meta.json"))

    def update_stream(self, stream: Stream, config: dict[str, Any]) -> None:
        self.check_overlap(config, ignore=stream.name)
        stream.update_config(config)
        if config["storage"] == "file":
            self._write_meta(config, stream.created_ns)
        for consumer in list(stream.consumers.values()):
            consumer.pump()

    def delete_stream(self, stream: Stream) -> None:
        stream.delete()
        self.streams.pop(stream.name, None)
        shutil.rmtree(self._stream_dir(stream.name), ignore_errors=True)

    def add_consumer(self, stream: Stream, config: dict[str, Any]) -> Consumer:
        consumer = Consumer(stream, config, now_ns())
        stream.consumers[consumer.name] = consumer
        consumer.start()
        return consumer

    def delete_consumer(self, stream: Stream, name: str) -> bool:
        consumer = stream.consumers.pop(name, None)
        if consumer is None:
            return False
        consumer.delete()
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
                config = meta["config"]
                created = int(meta["created"])
            except (OSError, ValueError, KeyError) as e:
                log.error("JetStream: skipping stream directory %s: %s", name, e)
                continue
            try:
                store = self.open_store(config)
            except Exception as e:
                log.error("JetStream: could not open stream %s: %s", name, e)
                continue
            stream = Stream(self, config, store, created)
            stream.rebuild_msg_ids()
            self.streams[stream.name] = stream
            stream.subscribe()
            for cname in store.consumer_names():
                state = store.consumer_state_store(cname).load()
                if not state or "config" not in state:
                    continue
                consumer = Consumer(stream, state["config"], int(state.get("created", 0)))
                stream.consumers[consumer.name] = consumer
                consumer.start(restored=state)
            st = store.state()
            log.info(
                "  Restored %d messages for stream '%s > %s'",
                st.messages,
                self.account.name,
                stream.name,
            )

    # -- API subscription ------------------------------------------------------------------------

    def start_api(self) -> None:
        from pynatsd.jetstream.api import JetStreamApi

        api = JetStreamApi(self)
        self._api_sub = InternalSubscription(self._api_owner, "$JS.API.>", api.on_request)
        self.account.sublist.insert(self._api_sub)

    def stop(self) -> None:
        if self._api_sub is not None:
            self._api_sub.closed = True
            self.account.sublist.remove(self._api_sub)
            self._api_sub = None
        for stream in list(self.streams.values()):
            stream.stop()

    def usage(self) -> tuple[int, int, int]:
        """(memory bytes, file bytes, consumers)."""
        memory = storage = consumers = 0
        for stream in self.streams.values():
            size = stream.store.state().bytes
            if stream.config["storage"] == "memory":
                memory += size
            else:
                storage += size
            consumers += len(stream.consumers)
        return memory, storage, consumers


class JetStream:
    """The server's JetStream: enabled by `-js` or the `jetstream {}` block."""

    def __init__(self, server: Server) -> None:
        self.server = server
        opts = server.options
        self.store_dir = opts.store_dir or default_store_dir()
        self.domain = opts.jetstream_domain
        self.max_memory = opts.jetstream_max_memory
        self.max_store = opts.jetstream_max_store
        # Durability beyond nats-server's default: fsync before every ack (group commit) unless
        # the configuration picks a `sync_interval` of its own (nats-server's lazy policy).
        self.sync_interval = opts.jetstream_sync_interval
        self.sync_always = opts.jetstream_sync_always or (
            opts.jetstream_sync_interval == JETSTREAM_SYNC_INTERVAL
        )
        self.accounts: dict[str, AccountJetStream] = {}

    def start(self) -> None:
        os.makedirs(os.path.join(self.store_dir, "jetstream"), exist_ok=True)
        log.info("Starting JetStream")
        log.info("  Store Directory: %r", self.store_dir)
        for account in (self.server.global_account,):
            ajs = AccountJetStream(self, account)
            self.accounts[account.name] = ajs
            ajs.recover()
            ajs.start_api()

    def stop(self) -> None:
        for ajs in self.accounts.values():
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
