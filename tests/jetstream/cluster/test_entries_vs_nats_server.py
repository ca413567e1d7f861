"""Stream and consumer group entries as the real nats-server writes them, decoded (and re-encoded)
by pynatsd/jetstream/cluster/entries.py and snapshots.py.

Three nats-server nodes with JetStream and a system account. A system-account client subscribes
to `$NRG.AE.>` (every group's append entries, from whichever node leads it); an app client makes
an R3 file stream and an R3 memory stream, publishes messages (some with headers, one large
enough to be compressed), purges by subject, deletes two messages (erased and not), and pulls
from an R3 durable consumer, acking some and nak-ing one. Every entry of the stream and consumer
groups must decode, say what was done, and re-encode to nats-server's bytes. Then the cluster
is stopped: the stream groups' snapshots written on shutdown and the consumer's state file
(`o.dat`, the encoding of its group's snapshot) must decode to the streams' and consumer's last
state and re-encode to the same bytes.
"""

from __future__ import annotations

import asyncio
import json
import struct
import time
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import nats
import nats.js.errors
import pytest
from nats.aio.client import Client
from nats.aio.msg import Msg
from nats.js.api import AckPolicy, ConsumerConfig, StorageType, StreamConfig

from pynatsd.jetstream.cluster.entries import (
    AckUpdate,
    AddPendingRequest,
    DeliveredUpdate,
    MsgDelete,
    RemovePendingRequest,
    StreamMsg,
    StreamPurge,
    decode_consumer_entry,
    decode_stream_entry,
    encode_consumer_entry,
    encode_stream_entry,
)
from pynatsd.jetstream.cluster.snapshots import (
    decode_consumer_state,
    decode_stream_snapshot,
    encode_consumer_state,
    encode_stream_snapshot,
)
from pynatsd.raft.wire import EntryType, decode_append_entry, read_uvarint
from pynatsd.s2 import decode_block
from support.cluster import GO, ProcessCluster, wait_interest
from support.eventually import eventually_async
from support.natsserver import require_nats_server

ACCOUNTS = """
accounts {
  SYS { users = [ { user: sys, password: sys } ] }
  APP { jetstream: enabled, users = [ { user: app, password: app } ] }
}
system_account: SYS
no_auth_user: app
"""
FILE_STREAM, MEMORY_STREAM, EMPTY_STREAM, DURABLE = "ENT", "ENTM", "ENTE", "D"
PUBLISHED = 30
LARGE = 10  # the i of the message with a 10 KiB payload (compressed: op 14)
PURGE_FILTER = "ent.p.>"
ERASED, REMOVED = 3, 5  # sequences deleted with and without no_erase
FETCHED, ACKED = 8, 4
WAIT = 20.0


def subject_of(i: int) -> str:
    return f"ent.p.{i}" if i % 4 == 1 else f"ent.{i}"


def payload_of(i: int) -> bytes:
    return b"x" * 10240 if i == LARGE else f"message {i}".encode()


def headers_of(i: int) -> dict[str, str] | None:
    return {"K": f"v{i}"} if i % 3 == 0 else None


@dataclass
class Run:
    """What one run of the cluster left."""

    # (group, RAFT index, position) -> data of an EntryNormal (one index holds many entries)
    entries: dict[tuple[str, int, int], bytes]
    groups: dict[str, str]  # file / memory / consumer -> group name
    seqs: dict[int, int]  # i -> stream sequence (from the PubAck)
    started_ns: int
    delivered: list[tuple[int, int, int]]  # (consumer seq, stream seq, delivery count)
    acked: set[tuple[int, int]]
    nacked: int  # the stream sequence nak-ed once
    too_large_header: dict[str, Any]
    infos: dict[str, dict[str, Any]] = field(default_factory=dict)  # after everything
    snapshots: dict[str, list[bytes]] = field(default_factory=dict)  # group -> data per node
    consumer_files: list[bytes] = field(default_factory=list)  # o.dat per node

    def of(self, group: str) -> list[bytes]:
        return [data for (g, _, _), data in sorted(self.entries.items()) if g == group]

    def stream_entries(self, which: str) -> list[Any]:
        return [decode_stream_entry(data) for data in self.of(self.groups[which])]


async def _request(nc: Client, subject: str, body: object = None) -> dict[str, Any]:
    payload = b"" if body is None else json.dumps(body).encode()
    reply: dict[str, Any] = json.loads((await nc.request(subject, payload, timeout=5)).data)
    return reply


async def _scenario(cluster: ProcessCluster) -> Run:
    entries: dict[tuple[str, int, int], bytes] = {}

    async def record(msg: Msg) -> None:
        group = msg.subject.split(".", 2)[2]
        ae = decode_append_entry(msg.data)
        for i, entry in enumerate(ae.entries):
            if entry.type == EntryType.NORMAL:
                entries[(group, ae.index, i)] = entry.data

    sys_clients = [await nats.connect(n.url, user="sys", password="sys") for n in cluster.nodes]
    app = await nats.connect(cluster.nodes[0].url, user="app", password="app")
    try:
        await sys_clients[0].subscribe("$NRG.AE.>", cb=record)
        await wait_interest(sys_clients[0], sys_clients)
        js = app.jetstream()
        file_config = StreamConfig(name=FILE_STREAM, subjects=["ent.>"], num_replicas=3)
        await eventually_async(lambda: js.add_stream(file_config), WAIT, "the R3 stream")
        memory_config = StreamConfig(
            name=MEMORY_STREAM, subjects=["entm.>"], num_replicas=3, storage=StorageType.MEMORY
        )
        await js.add_stream(memory_config)
        await js.add_stream(replace(memory_config, name=EMPTY_STREAM, subjects=["ente.>"]))
        started_ns = time.time_ns()
        seqs = {}
        for i in range(PUBLISHED):
            ack = await js.publish(subject_of(i), payload_of(i), headers=headers_of(i))
            seqs[i] = ack.seq
        big_header = await app.request("ent.big", b"", timeout=5, headers={"K": "v" * 70000})
        too_large = json.loads(big_header.data)
        for i in range(3):
            await js.publish(f"entm.{i}", b"m")
        assert await js.delete_msg(MEMORY_STREAM, 2)
        assert await js.purge_stream(FILE_STREAM, subject=PURGE_FILTER)
        assert await js.delete_msg(FILE_STREAM, ERASED)
        delete = f"$JS.API.STREAM.MSG.DELETE.{FILE_STREAM}"
        assert (await _request(app, delete, {"seq": REMOVED, "no_erase": True}))["success"]

        config = ConsumerConfig(durable_name=DURABLE, num_replicas=3, ack_policy=AckPolicy.EXPLICIT)
        await js.add_consumer(FILE_STREAM, config)
        pull = await js.pull_subscribe_bind(DURABLE, FILE_STREAM)
        fetched = await eventually_async(lambda: pull.fetch(FETCHED, timeout=2), WAIT, "fetch")
        for msg in fetched[:ACKED]:
            await msg.ack_sync()
        await fetched[ACKED].nak()

        async def redelivered() -> bool:
            """Fetch one at a time until the nak-ed message comes again (a nak is handled on
            the consumer leader after the fetch that follows it may have been)."""
            fetched.extend(await pull.fetch(1, timeout=2))
            return fetched[-1].metadata.num_delivered == 2

        await eventually_async(redelivered, WAIT, "the nak-ed message redelivered")
        nacked = fetched[ACKED].metadata.sequence.stream
        delivered = [
            (m.metadata.sequence.consumer, m.metadata.sequence.stream, m.metadata.num_delivered)
            for m in fetched
        ]
        acked = {
            (m.metadata.sequence.consumer, m.metadata.sequence.stream) for m in fetched[:ACKED]
        }

        infos = {
            FILE_STREAM: await _request(app, f"$JS.API.STREAM.INFO.{FILE_STREAM}"),
            MEMORY_STREAM: await _request(app, f"$JS.API.STREAM.INFO.{MEMORY_STREAM}"),
            EMPTY_STREAM: await _request(app, f"$JS.API.STREAM.INFO.{EMPTY_STREAM}"),
            DURABLE: await _request(app, f"$JS.API.CONSUMER.INFO.{FILE_STREAM}.{DURABLE}"),
        }
        groups = {
            "file": infos[FILE_STREAM]["cluster"]["raft_group"],
            "memory": infos[MEMORY_STREAM]["cluster"]["raft_group"],
            "empty": infos[EMPTY_STREAM]["cluster"]["raft_group"],
            "consumer": infos[DURABLE]["cluster"]["raft_group"],
        }
        run = Run(entries, groups, seqs, started_ns, delivered, acked, nacked, too_large, infos)

        async def all_seen() -> bool:
            stream = [data[0] for data in run.of(groups["file"])]
            consumer = [decode_consumer_entry(d) for d in run.of(groups["consumer"])]
            return (
                stream.count(4) + stream.count(14) == PUBLISHED
                and stream.count(5) == 1
                and stream.count(6) == 2
                and sum(isinstance(e, AckUpdate) for e in consumer) == ACKED
                and sum(isinstance(e, DeliveredUpdate) for e in consumer) == len(delivered)
                and sum(isinstance(e, AddPendingRequest) for e in consumer)
                == sum(isinstance(e, RemovePendingRequest) for e in consumer)
            )

        await eventually_async(all_seen, WAIT, "every entry captured")
        return run
    finally:
        for nc in [app, *sys_clients]:
            await nc.close()


def _snapshot_data(path: Path) -> bytes:
    """A RAFT snapshot file's data: term u64, index u64, peer state (u32 length), data, then an
    8-byte checksum (raft.go `encodeSnapshot`)."""
    raw = path.read_bytes()
    (size,) = struct.unpack_from("<I", raw, 16)
    return raw[20 + size : -8]


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Run]:
    require_nats_server()
    directory = tmp_path_factory.mktemp("entries")
    stores = [directory / f"store-n{i}" for i in range(3)]
    node_config = {i: f'jetstream {{ store_dir: "{stores[i]}" }}\n' for i in range(3)}
    cluster = ProcessCluster(
        (GO, GO, GO), directory, extra_config=ACCOUNTS, node_config=node_config
    )
    with cluster:
        cluster.start()
        result = asyncio.run(_scenario(cluster))
        cluster.stop()  # a clean shutdown: each stream group writes a snapshot
    for store in stores:
        groups = store / "jetstream" / "SYS" / "_js_"
        for group in (result.groups[which] for which in ("file", "memory", "empty")):
            for path in sorted((groups / group / "snapshots").glob("snap.*"))[-1:]:
                result.snapshots.setdefault(group, []).append(_snapshot_data(path))
        state = store / "jetstream" / "APP" / "streams" / FILE_STREAM / "obs" / DURABLE / "o.dat"
        result.consumer_files.append(state.read_bytes())
    yield result


# -- stream groups ------------------------------------------------------------------------------


def test_every_stream_entry_decodes_and_re_encodes_to_the_same_bytes(run: Run) -> None:
    for which in ("file", "memory"):
        datas = run.of(run.groups[which])
        assert datas
        for data in datas:
            entry = decode_stream_entry(data)
            if data[0] == 14:  # never compressed by us: compare with the body it holds
                assert encode_stream_entry(entry) == b"\x04" + decode_block(data[1:])
            else:
                assert encode_stream_entry(entry) == data, data[:200]


def test_messages_decode_to_what_was_published(run: Run) -> None:
    msgs = {m.lseq + 1: m for m in run.stream_entries("file") if isinstance(m, StreamMsg)}
    assert sorted(msgs) == sorted(run.seqs.values())
    now = time.time_ns()
    for i, seq in run.seqs.items():
        msg = msgs[seq]
        assert (msg.subject, msg.payload, msg.sourced) == (subject_of(i), payload_of(i), False)
        assert msg.reply.startswith("_INBOX.")
        assert run.started_ns - 10**9 <= msg.ts <= now
        if (headers := headers_of(i)) is not None:
            assert msg.header.startswith(b"NATS/1.0\r\n")
            assert f"K: {headers['K']}\r\n".encode() in msg.header
        else:
            assert msg.header == b""


def test_only_the_large_message_is_compressed(run: Run) -> None:
    compressed = [data for data in run.of(run.groups["file"]) if data[0] == 14]
    assert len(compressed) == 1
    msg = decode_stream_entry(compressed[0])
    assert isinstance(msg, StreamMsg) and msg.payload == payload_of(LARGE)
    assert len(compressed[0]) < 200


def test_purge_and_deletes_decode(run: Run) -> None:
    entries = run.stream_entries("file")
    (purge,) = [e for e in entries if isinstance(e, StreamPurge)]
    assert (purge.stream, purge.last_seq) == (FILE_STREAM, max(run.seqs.values()))
    assert purge.request is not None and purge.request.filter == PURGE_FILTER
    assert purge.subject == f"$JS.API.STREAM.PURGE.{FILE_STREAM}"
    assert purge.client is not None and purge.client["acc"] == "APP"
    deletes = [(e.stream, e.seq, e.no_erase) for e in entries if isinstance(e, MsgDelete)]
    assert deletes == [(FILE_STREAM, ERASED, False), (FILE_STREAM, REMOVED, True)]
    memory = run.stream_entries("memory")
    assert [(e.stream, e.seq) for e in memory if isinstance(e, MsgDelete)] == [(MEMORY_STREAM, 2)]
    assert sum(isinstance(e, StreamMsg) for e in memory) == 3


def test_a_header_over_64k_is_refused_before_it_is_proposed(run: Run) -> None:
    """So the encoder's clipping at 65535 bytes is never reached from a publish."""
    assert run.too_large_header["error"]["err_code"] == 10097
    assert run.infos[FILE_STREAM]["state"]["last_seq"] == PUBLISHED


# -- the consumer group -------------------------------------------------------------------------


def test_every_consumer_entry_decodes_and_re_encodes_to_the_same_bytes(run: Run) -> None:
    datas = run.of(run.groups["consumer"])
    assert {data[0] for data in datas} >= {7, 8, 12, 13}
    for data in datas:
        assert encode_consumer_entry(decode_consumer_entry(data)) == data


def test_consumer_entries_say_what_was_delivered_and_acked(run: Run) -> None:
    entries = [decode_consumer_entry(d) for d in run.of(run.groups["consumer"])]
    delivered = [
        (e.consumer_seq, e.stream_seq, e.delivery_count)
        for e in entries
        if isinstance(e, DeliveredUpdate)
    ]
    assert sorted(delivered) == sorted(run.delivered)
    assert (run.nacked, 2) in {(s, dc) for _, s, dc in delivered}
    acks = {(e.consumer_seq, e.stream_seq) for e in entries if isinstance(e, AckUpdate)}
    assert acks == run.acked
    added = {e.reply for e in entries if isinstance(e, AddPendingRequest)}
    removed = {e.reply for e in entries if isinstance(e, RemovePendingRequest)}
    assert added and added == removed and all(r.startswith("_INBOX.") for r in added)


# -- snapshots ----------------------------------------------------------------------------------


def test_stream_snapshots_decode_to_the_stream_state_and_re_encode(run: Run) -> None:
    purged = {seq for i, seq in run.seqs.items() if subject_of(i).startswith("ent.p.")}
    expected = {"file": purged | {ERASED, REMOVED}, "memory": {2}}
    streams = {"file": FILE_STREAM, "memory": MEMORY_STREAM}
    for which, stream in streams.items():
        group = run.groups[which]
        info = run.infos[stream]["state"]
        assert len(run.snapshots[group]) == 3
        for data in run.snapshots[group]:
            state = decode_stream_snapshot(data)
            counts = (state.msgs, state.total_bytes, state.first_seq, state.last_seq)
            assert counts == (info["messages"], info["bytes"], info["first_seq"], info["last_seq"])
            assert set(state.deleted_sequences()) == expected[which]
            assert state.interior_deletes() == state.deleted_count() == len(expected[which])
            assert encode_stream_snapshot(state) == data


def test_consumer_state_files_decode_to_the_consumer_state(run: Run) -> None:
    info = run.infos[DURABLE]
    acked_streams = {s for _, s in run.acked}
    unacked = {s for _, s, _ in run.delivered} - acked_streams
    for data in run.consumer_files:
        state = decode_consumer_state(data)
        assert (state.delivered.consumer_seq, state.delivered.stream_seq) == (
            info["delivered"]["consumer_seq"],
            info["delivered"]["stream_seq"],
        )
        assert (state.ack_floor.consumer_seq, state.ack_floor.stream_seq) == (
            info["ack_floor"]["consumer_seq"],
            info["ack_floor"]["stream_seq"],
        )
        assert set(state.pending) == unacked
        assert state.redelivered == {run.nacked: 1}  # deliveries - 1
        # The same bytes but for the order of the pending and redelivered entries (a Go map's).
        base = _pending_base(data)
        again = encode_consumer_state(state, now_ns=base * 1_000_000_000)
        assert len(again) == len(data) and decode_consumer_state(again) == state


def _pending_base(data: bytes) -> int:
    """The base timestamp (`mints`) after the header, four sequences and the pending count."""
    pos = 2
    for _ in range(5):
        pos += read_uvarint(data, pos)[1]
    zigzag, _ = read_uvarint(data, pos)
    return zigzag >> 1 if not zigzag & 1 else ~(zigzag >> 1)


def test_an_empty_memory_stream_counts_one_interior_delete(run: Run) -> None:
    """The memory store's count has no `last > first` guard: first = last = 0 with no
    messages makes 1, and an empty sequence set follows (the file store writes 0)."""
    empty_set = bytes.fromhex("1602 00000000 00000000")
    assert (
        run.snapshots[run.groups["empty"]]
        == [bytes.fromhex("2a01 00 00 00 00 00 01") + empty_set] * 3
    )
    state = decode_stream_snapshot(run.snapshots[run.groups["empty"]][0])
    assert state.num_deleted == 1 and state.deleted_count() == 0
    assert encode_stream_snapshot(state) == run.snapshots[run.groups["empty"]][0]
