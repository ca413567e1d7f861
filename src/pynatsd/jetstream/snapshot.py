"""Stream snapshots and restores (`$JS.API.STREAM.SNAPSHOT.<stream>`,
`$JS.API.STREAM.RESTORE.<stream>`): nats-server's `jsStreamSnapshotRequest`,
`streamSnapshot`, `processStreamRestore` (`server/jetstream_api.go`) and its V2 backup
(`server/stream_backup.go`).

The snapshot is nats-server's own V2 format: a `NATSARC1` archive (`archive.py`) of the
stream's state, its consumers and its messages, in an S2 stream (`s2.py`). It describes
messages, not store files, so a snapshot pynatsd makes restores into nats-server and one
nats-server makes restores into pynatsd.

Snapshot: the reply carries the stream's config and state; then the archive goes to the
requester's deliver subject in chunks of `chunk_size` bytes, each with a reply subject
`$JS.SNAPSHOT.ACK.<stream>.<id>.<size>.<index>` the client acknowledges; at most
`window_size / chunk_size` chunks are unacknowledged. The last, short chunk has no reply; an
empty message ends the snapshot (with a `204` status header once a full chunk was sent),
or a `408 No Interest` / `408 No Flow Response` one stops it.

Restore: the reply names a deliver subject `$JS.SNAPSHOT.RESTORE.<stream>.<id>`; the client
sends the archive there in chunks, each as a request (answered with an empty message, or the
error that ended the restore), and an empty message last, answered with the new stream's info.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pynatsd.jetstream import advisories
from pynatsd.jetstream.archive import END, MAGIC, ArchiveError, ArchiveReader, Entry, encode_entry
from pynatsd.jetstream.consumer_config import ConsumerConfig
from pynatsd.jetstream.errors import ApiError, js_error
from pynatsd.jetstream.util import go_json, now_ns, rfc3339_ns
from pynatsd.logger import log
from pynatsd.protocol.events import Pub
from pynatsd.s2 import MAGIC_CHUNK, S2Error, S2Reader, encode_chunks
from pynatsd.server.subscription import InternalClient, InternalSubscription

if TYPE_CHECKING:
    from pynatsd.jetstream.consumer import Consumer
    from pynatsd.jetstream.manager import AccountJetStream
    from pynatsd.jetstream.store.base import StreamStore
    from pynatsd.jetstream.stream import Stream
    from pynatsd.jetstream.stream_config import StreamConfig
    from pynatsd.server.client import Client
    from pynatsd.server.session import ClientSession

# nats-server's defaults and bounds (defaultSnapshotChunkSize, defaultSnapshotWindowSize).
_CHUNK_SIZE = 128 * 1024
_WINDOW_SIZE = 8 * 1024 * 1024
_ACK_TIMEOUT = 5.0  # defaultSnapshotAckTimeout
_INTEREST_WAIT = 2.0  # how long a snapshot waits for its deliver subject to have interest
_RESTORE_IDLE = 5.0  # a restore with no chunk for this long is stalled
# Archive bytes gathered into one S2 chunk.
_S2_BLOCK = 64 * 1024


# -- snapshot --------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class SnapshotRequest:
    """Go's JSApiStreamSnapshotRequest, as checked by the API."""

    deliver_subject: str
    chunk_size: int = 0
    window_size: int = 0
    no_consumers: bool = False


def start_snapshot(
    stream: Stream, req: SnapshotRequest, client: ClientSession | None
) -> dict[str, Any]:
    """The reply to a snapshot request; the chunks follow once it is sent."""
    state = stream.state_json()
    task = _Snapshot(stream, req, client)
    stream.ajs.loop.call_soon(task.start, state)
    return {"config": stream.config.to_reply(False), "state": state}


class _Snapshot:
    def __init__(self, stream: Stream, req: SnapshotRequest, client: ClientSession | None) -> None:
        self.stream = stream
        self.ajs = stream.ajs
        self.deliver = req.deliver_subject
        self.chunk_size = min(max(1024, req.chunk_size or _CHUNK_SIZE), 1024 * 1024)
        window = min(max(1024, req.window_size or _WINDOW_SIZE), 32 * 1024 * 1024)
        self.slots = max(window, self.chunk_size) // self.chunk_size
        self.consumers = not req.no_consumers
        self.client = client
        self.start_ns = now_ns()
        self.acked = asyncio.Event()

    def start(self, state: dict[str, Any]) -> None:
        advisories.snapshot_create(self.stream, state, self.client)
        self.ajs.loop.create_task(self._run())

    async def _run(self) -> None:
        ack_subject = f"$JS.SNAPSHOT.ACK.{self.stream.name}.{advisories.new_nuid()}"
        owner = InternalClient(self.ajs.account, f"snapshot:{self.stream.name}")
        sub = InternalSubscription(owner, ack_subject + ".>", self._on_ack)
        sublist = self.ajs.account.sublist
        sublist.insert(sub)
        error = ""
        try:
            error = await self._send(ack_subject)
        except Exception as e:  # a store failure ends the snapshot with a 500
            log.exception("Snapshot of stream %s failed", self.stream.name)
            error = str(e)
            self._publish("", f"NATS/1.0 500 {e}\r\n\r\n".encode(), b"")
        finally:
            sub.closed = True
            sublist.remove(sub)
        advisories.snapshot_complete(self.stream, self.start_ns, now_ns(), self.client, error)

    def _on_ack(self, sub: InternalSubscription, publisher: Client | None, ev: Pub) -> None:
        self.slots += 1
        self.acked.set()

    async def _send(self, ack_subject: str) -> str:
        """Stream the chunks; the error text that stopped them, or ''."""
        # As nats-server: up to 2 s for a subscriber to show up, then on regardless; any
        # change of interest after that (the receiver gone) stops the snapshot.
        interest = await self._wait_for_interest()
        end = b""
        index = 1
        pending = bytearray()
        for piece in _snapshot_bytes(self.stream, self.consumers):
            pending += piece
            while len(pending) >= self.chunk_size:
                stopped = await self._next_slot(interest)
                if stopped:
                    return stopped
                chunk = bytes(pending[: self.chunk_size])
                del pending[: self.chunk_size]
                self._publish(f"{ack_subject}.{len(chunk)}.{index}", b"", chunk)
                index += 1
                end = b"NATS/1.0 204\r\n\r\n"
            await asyncio.sleep(0)  # other clients' turn between S2 chunks
        if pending:
            stopped = await self._next_slot(interest)
            if stopped:
                return stopped
            self._publish("", b"", bytes(pending))
        self._publish("", end, b"")
        return ""

    def _publish(self, reply: str, header: bytes, data: bytes) -> None:
        self.ajs.server.publish_internal(self.ajs.account, self.deliver, reply, header, data)
        self.ajs.server.flush_soon()

    def _stop(self, status: str, error: str) -> str:
        self._publish("", f"NATS/1.0 {status}\r\n\r\n".encode(), b"")
        return error

    def _has_interest(self) -> bool:
        return self.ajs.has_interest(self.deliver)

    async def _wait_for_interest(self) -> bool:
        deadline = self.ajs.loop.time() + _INTEREST_WAIT
        while not self._has_interest():
            if self.ajs.loop.time() >= deadline:
                return False
            await asyncio.sleep(0.05)
        return True

    async def _next_slot(self, interest: bool) -> str:
        """Wait for room in the window; '' once there is, else the error that stopped the
        snapshot (after its status message): the receiver's interest changed, or no
        acknowledgement came for 5 s."""
        deadline = self.ajs.loop.time() + _ACK_TIMEOUT
        while True:
            if self._has_interest() != interest:
                return self._stop("408 No Interest", "no interest")
            if self.slots > 0:
                self.slots -= 1
                return ""
            left = deadline - self.ajs.loop.time()
            if left <= 0:
                return self._stop("408 No Flow Response", "no flow response")
            self.acked.clear()
            # Woken by an ack, or soon enough to notice the receiver leaving.
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.acked.wait(), min(left, 0.05))


def _snapshot_bytes(stream: Stream, with_consumers: bool) -> Iterator[bytes]:
    """The S2-framed archive, a chunk of S2 at a time (nats-server's streamSnapshotV2)."""
    store = stream.store
    st = store.state()
    consumers = list(stream.consumers.values()) if with_consumers else []
    state = stream.state_json()
    state["consumer_count"] = len(consumers)
    now = now_ns()
    out = bytearray(MAGIC)
    out += encode_entry("state.json", now, 0, b"", go_json(state))
    for consumer in consumers:
        body = go_json(_consumer_snapshot(consumer, st.last_seq))
        out += encode_entry(f"consumers/{consumer.name}", now, 0, b"", body)
    first = True
    seq = max(st.first_seq, 1)
    while st.last_seq and seq <= st.last_seq:
        msg = store.load_next_msg("", seq)
        if msg is None or msg.seq > st.last_seq:
            break
        out += encode_entry(msg.subject, msg.ts, msg.seq, msg.header, msg.data)
        seq = msg.seq + 1
        if len(out) >= _S2_BLOCK:
            yield encode_chunks(bytes(out), MAGIC_CHUNK if first else b"")
            first = False
            out.clear()
    out += END
    yield encode_chunks(bytes(out), MAGIC_CHUNK if first else b"")


def _consumer_snapshot(consumer: Consumer, last_seq: int) -> dict[str, Any]:
    """Go's SnapshotConsumerState: the config and ConsumerState, bounded by the stream's last
    sequence at the start of the snapshot."""
    cs = consumer.state
    delivered_seq = min(cs.delivered_sseq, last_seq)
    state: dict[str, Any] = {
        "delivered": {"consumer_seq": cs.dseq - 1, "stream_seq": delivered_seq},
        "ack_floor": {"consumer_seq": cs.adflr, "stream_seq": min(cs.asflr, last_seq)},
    }
    pending = {
        str(seq): {"sequence": p.dseq, "ts": p.ts}
        for seq, p in sorted(cs.pending.items())
        if seq <= last_seq
    }
    if pending:
        state["pending"] = pending
    redelivered = {str(seq): n for seq, n in sorted(cs.rdc.items()) if seq <= last_seq}
    if redelivered:
        state["redelivered"] = redelivered
    return {"config": consumer.config.to_reply(False), "state": state}


# -- restore ---------------------------------------------------------------------------------


def start_restore(
    ajs: AccountJetStream, config: StreamConfig, client: ClientSession | None
) -> dict[str, Any]:
    """Accept a restore: the reply names where the chunks go."""
    advisories.restore_create(ajs, config.name, client)
    restore = _Restore(ajs, config, client)
    return {"deliver_subject": restore.subject}


class _Restore:
    def __init__(
        self, ajs: AccountJetStream, config: StreamConfig, client: ClientSession | None
    ) -> None:
        self.ajs = ajs
        self.config = config
        self.client = client
        self.subject = f"$JS.SNAPSHOT.RESTORE.{config.name}.{advisories.new_nuid()}"
        self.start_ns = now_ns()
        self.total = 0
        self.s2 = S2Reader()
        self.archive = ArchiveReader()
        self.state: dict[str, Any] | None = None
        self.consumers_left = 0
        self.consumers: list[tuple[str, dict[str, Any]]] = []
        self.store: StreamStore | None = None
        self.last_seq = 0
        self.ended = False  # the restore is over (done or failed)
        self.ended_archive = False  # the archive's end-of-backup entry was read
        owner = InternalClient(ajs.account, f"restore:{config.name}")
        self.sub = InternalSubscription(owner, self.subject, self._on_chunk)
        ajs.account.sublist.insert(self.sub)
        self.idle = ajs.loop.call_later(_RESTORE_IDLE, self._stalled)

    def _on_chunk(self, sub: InternalSubscription, publisher: Client | None, ev: Pub) -> None:
        if self.ended:
            return
        reply = ev.reply.decode("utf-8", "surrogateescape")
        data = ev.payload[ev.header_size :] if ev.header_size > 0 else ev.payload
        name = f"'{self.ajs.account.name} > {self.config.name}'"
        if not reply:
            self._finish("", f"restore for stream {name} requires reply subject for each chunk")
            return
        self.idle.cancel()
        if not data:
            self._complete(reply)
            return
        self.total += len(data)
        try:
            for piece in self.s2.feed(data):
                for entry in self.archive.feed(piece):
                    self._apply(entry)
        except (S2Error, ArchiveError, ApiError, ValueError) as e:
            text = _go_error(e) if isinstance(e, ApiError) else str(e)
            self._finish(reply, text)
            return
        self.ajs.reply(reply, b"")
        self.idle = self.ajs.loop.call_later(_RESTORE_IDLE, self._stalled)

    def _apply(self, entry: Entry) -> None:
        if self.state is None:
            if entry.name != "state.json":
                raise ValueError("expected state.json first")
            self.state = json.loads(entry.payload)
            self.consumers_left = int(self.state.get("consumer_count") or 0)
            self._open_store()
            return
        if self.consumers_left:
            name = entry.name.removeprefix("consumers/")
            if name == entry.name:
                raise ValueError(f"expected consumer, found {json.dumps(entry.name)}")
            self.consumers.append((name, json.loads(entry.payload)))
            self.consumers_left -= 1
            return
        if entry.sequence == 0:
            if entry.is_end:
                self.ended_archive = True
                return
            raise ValueError("expected message sequence")
        self._store_message(entry)

    def _open_store(self) -> None:
        assert self.state is not None
        if self.config.name in self.ajs.streams:
            raise js_error("StreamNameExistRestoreFailed")
        try:
            self.ajs.check_overlap(self.config)
        except ApiError as e:
            raise ValueError(f"error adding stream: {_go_error(e)}") from None
        self.store = self.ajs.open_store(self.config)
        first = int(self.state.get("first_seq") or 0)
        if first > 1:
            self.store.purge(seq=first)
        self.last_seq = max(first - 1, 0)

    def _store_message(self, entry: Entry) -> None:
        store = self.store
        assert store is not None
        if entry.sequence <= self.last_seq:
            raise ValueError(f"message sequence {entry.sequence} out of order")
        _skip(store, self.last_seq, entry.sequence)
        seq, _ = store.store_msg(entry.name, entry.header, entry.payload, entry.timestamp)
        if seq != entry.sequence:
            raise ValueError(f"failed to store message sequence {entry.sequence}")
        self.last_seq = seq

    def _complete(self, reply: str) -> None:
        if not self.ended_archive:
            self._finish(reply, "backup was truncated")
            return
        assert self.state is not None and self.store is not None
        _skip(self.store, self.last_seq, int(self.state.get("last_seq") or 0) + 1)
        try:
            stream = self.ajs.add_stream(self.config, self.store)
        except ApiError as e:  # a stream made meanwhile on the same subjects
            self._finish(reply, f"error adding stream: {_go_error(e)}")
            return
        for name, data in self.consumers:
            _restore_consumer(stream, name, data)
        self._finish(reply, "", stream=stream)

    def _stalled(self) -> None:
        name = f"'{self.ajs.account.name} > {self.config.name}'"
        log.warning("restore for stream %s is stalled", name)
        self._finish("", f"restore for stream {name} is stalled", advise=False)

    def _finish(
        self,
        reply: str,
        error: str,
        stream: Stream | None = None,
        advise: bool = True,
    ) -> None:
        self.ended = True
        self.idle.cancel()
        self.sub.closed = True
        self.ajs.account.sublist.remove(self.sub)
        if error and self.store is not None and stream is None:
            self.store.delete()
        if advise:
            advisories.restore_complete(
                self.ajs, self.config.name, self.start_ns, now_ns(), self.total, self.client
            )
        if not reply:
            return
        response: dict[str, Any] = {"type": "io.nats.jetstream.api.v1.stream_create_response"}
        if error:
            response["error"] = js_error("StreamRestore", err=error).to_json()
        elif stream is not None:
            info = stream.info()
            response.update(info)
            response["ts"] = rfc3339_ns(now_ns())
        self.ajs.reply(reply, go_json(response))


def _go_error(e: ApiError) -> str:
    """An API error as Go's ApiError.Error() words it inside another error's text."""
    return f"{e.description} ({e.err_code})"


def _skip(store: StreamStore, last: int, upto: int) -> None:
    """Leave the sequences between `last` and `upto` (exclusive) unused, as deleted."""
    for _ in range(upto - last - 1):
        s, _ = store.store_msg("_skip_", b"", b"")
        store.remove_msg(s)


def _restore_consumer(stream: Stream, name: str, data: dict[str, Any]) -> None:
    from pynatsd.jetstream.consumer import Consumer

    config = ConsumerConfig.from_stored(data.get("config") or {})
    state = data.get("state") or {}
    delivered = state.get("delivered") or {}
    ack_floor = state.get("ack_floor") or {}
    dseq = int(delivered.get("consumer_seq") or 0)
    sseq = int(delivered.get("stream_seq") or 0)
    restored = {
        "next_sseq": sseq + 1,
        "next_dseq": dseq + 1,
        "delivered": [dseq, sseq],
        "ack_floor": [
            int(ack_floor.get("consumer_seq") or 0),
            int(ack_floor.get("stream_seq") or 0),
        ],
        "pending": {
            s: [int(p.get("sequence") or 0), int(p.get("ts") or 0)]
            for s, p in (state.get("pending") or {}).items()
        },
        "redelivered": dict(state.get("redelivered") or {}),
    }
    consumer = Consumer(stream, config, now_ns(), name)
    stream.consumers[consumer.name] = consumer
    consumer.start(restored=restored)
