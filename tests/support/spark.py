"""Test data in and out of NATS through nats-py: an independent client, so what the data source
reads and writes is checked by code that shares nothing with it."""

from __future__ import annotations

import asyncio
import os
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import nats
from nats.js.api import StreamConfig

from support.cluster import Node, ProcessCluster
from support.natsserver import require_nats_server
from support.processes import PYNATSD, ServerProcess, start_server

# Where JetStream tests run: pynatsd by default; PYNATSD_SPARK_JS_SERVER=nats-server runs them
# against the real server (the data source must work with both).
JS_SERVER = os.environ.get("PYNATSD_SPARK_JS_SERVER", "pynatsd")


def _wait_for_jetstream(url: str, timeout: float = 15.0) -> None:
    from pynatsd.spark.errors import NatsSparkError
    from pynatsd.spark.options import ConnectOptions, parse_servers
    from pynatsd.spark.wire import Connection

    deadline = time.monotonic() + timeout
    while True:
        try:
            with Connection.open(ConnectOptions(servers=parse_servers(url))) as conn:
                conn.request("$JS.API.INFO", b"", timeout=1.0)
                return
        except NatsSparkError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)


def start_js_server(store: str, extra: list[str] | None = None) -> ServerProcess:
    """A JetStream-enabled server (see JS_SERVER) on a free port, once its JetStream answers."""
    cmd = list(PYNATSD) if JS_SERVER == "pynatsd" else [require_nats_server()]
    server = start_server(cmd, ["-js", "-sd", store, *(extra or [])], store=store)
    # JetStream answers a little after the listener opens.
    _wait_for_jetstream(server.url)
    return server


def unique(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex[:8]}"


def create_stream(url: str, name: str, subjects: Sequence[str], **config: Any) -> None:
    async def go() -> None:
        nc = await nats.connect(url)
        try:
            await nc.jetstream().add_stream(
                StreamConfig(name=name, subjects=list(subjects), **config)
            )
        finally:
            await nc.close()

    asyncio.run(go())


def publish(
    url: str,
    count: int,
    subject: Callable[[int], str] | str,
    data: Callable[[int], bytes] | None = None,
    start: int = 0,
    headers: Callable[[int], dict[str, str] | None] | None = None,
) -> list[int]:
    """Publish `count` messages with JetStream acks; message i (from `start`) gets
    subject(i), data(i) (default `msg-<i>`), headers(i). Returns the stored sequences."""

    async def go() -> list[int]:
        nc = await nats.connect(url)
        js = nc.jetstream()
        seqs: list[int] = []
        try:
            futures = []
            for i in range(start, start + count):
                subj = subject(i) if callable(subject) else subject
                payload = data(i) if data else f"msg-{i}".encode()
                hdrs = headers(i) if headers else None
                futures.append(await js.publish_async(subj, payload, headers=hdrs))
                if len(futures) >= 1000:
                    seqs += [a.seq for a in await asyncio.wait_for(asyncio.gather(*futures), 30)]
                    futures = []
            seqs += [a.seq for a in await asyncio.wait_for(asyncio.gather(*futures), 30)]
        finally:
            await nc.close()
        return seqs

    return asyncio.run(go())


def stream_state(url: str, name: str) -> tuple[int, int, int]:
    """(messages, first_seq, last_seq)."""

    async def go() -> tuple[int, int, int]:
        nc = await nats.connect(url)
        try:
            info = await nc.jetstream().stream_info(name)
            return info.state.messages, info.state.first_seq, info.state.last_seq
        finally:
            await nc.close()

    return asyncio.run(go())


def stream_messages(url: str, name: str) -> list[tuple[int, str, bytes, dict[str, str] | None]]:
    """Every stored message as (seq, subject, data, headers), via a nats-py pull consumer."""

    async def go() -> list[tuple[int, str, bytes, dict[str, str] | None]]:
        nc = await nats.connect(url)
        js = nc.jetstream()
        out: list[tuple[int, str, bytes, dict[str, str] | None]] = []
        try:
            info = await js.stream_info(name)
            total = info.state.messages
            sub = await js.pull_subscribe(
                "",
                stream=name,
                durable=None,
                config=nats.js.api.ConsumerConfig(ack_policy="none", filter_subject=None),
            )
            deadline = time.monotonic() + 60
            while len(out) < total and time.monotonic() < deadline:
                for m in await sub.fetch(min(1000, total - len(out)), timeout=5):
                    out.append((m.metadata.sequence.stream, m.subject, m.data, m.headers))
            await sub.unsubscribe()
        finally:
            await nc.close()
        return out

    return asyncio.run(go())


def core_collect(
    url: str, subject: str, expected: int, timeout: float, action: Callable[[], None]
) -> list[tuple[str, bytes, dict[str, str] | None]]:
    """Subscribe (in a background thread), run `action()` in this thread (Spark looks Python data
    sources up through the thread's active session), collect `expected` messages."""
    got: list[tuple[str, bytes, dict[str, str] | None]] = []
    ready = threading.Event()
    done = threading.Event()
    errors: list[BaseException] = []

    async def go() -> None:
        nc = await nats.connect(url)
        finished = asyncio.Event()

        async def cb(msg: Any) -> None:
            got.append((msg.subject, msg.data, msg.headers))
            if len(got) >= expected:
                finished.set()

        try:
            await nc.subscribe(subject, cb=cb)
            await nc.flush()
            ready.set()
            await asyncio.wait_for(finished.wait(), timeout)
        finally:
            await nc.close()

    def thread() -> None:
        try:
            asyncio.run(go())
        except BaseException as e:
            errors.append(e)
        finally:
            ready.set()
            done.set()

    worker = threading.Thread(target=thread, daemon=True)
    worker.start()
    assert ready.wait(30), "subscriber did not start"
    action()
    worker.join(timeout + 5)
    if errors:
        raise errors[0]
    return got


def core_publish(url: str, subject: str, count: int, start: int = 0) -> None:
    async def go() -> None:
        nc = await nats.connect(url)
        try:
            for i in range(start, start + count):
                await nc.publish(subject, f"live-{i}".encode())
            await nc.flush()
        finally:
            await nc.close()

    asyncio.run(go())


def delete_stream(url: str, name: str) -> None:
    async def go() -> None:
        nc = await nats.connect(url)
        try:
            await nc.jetstream().delete_stream(name)
        finally:
            await nc.close()

    asyncio.run(go())


class JetStreamCluster(ProcessCluster):
    """A `ProcessCluster` whose nodes in `js_nodes` run JetStream, each in its own store
    directory under the cluster's (nats-server clusters JetStream across them; pynatsd, until it
    replicates, serves it from the one node that has it)."""

    def __init__(
        self, kinds: Sequence[str], directory: Path, js_nodes: Sequence[int], **kw: Any
    ) -> None:
        super().__init__(kinds, directory, **kw)
        self.js_nodes = frozenset(js_nodes)

    def config_text(self, node: Node) -> str:
        text = super().config_text(node)
        if node.index in self.js_nodes:
            text += f'jetstream {{ store_dir: "{self.directory / node.name}" }}\n'
        return text


def retry_until(action: Callable[[], Any], timeout: float, what: str) -> Any:
    """`action()`'s result once it stops raising (a cluster electing its JetStream leaders
    answers requests with errors or not at all for a few seconds)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            return action()
        except Exception as e:
            if time.monotonic() > deadline:
                raise AssertionError(f"{what}: still failing after {timeout} s: {e!r}") from e
            time.sleep(0.25)
