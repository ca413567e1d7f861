"""Stream snapshots and catch-up across real pynatsd processes (jetstream/cluster/catchup.py,
replica_sync.py).

An R3 stream loses a follower (SIGKILL) while many messages are published and some deleted;
the others snapshot and compact their group's log past everything the follower had (the
thresholds lowered for the test through PYNATSD_TEST_STREAM_SNAPSHOTS), so when it comes back,
with its store kept or wiped, the leader sends it a snapshot and it catches up over
`$JSC.SYNC`. It must then hold every acknowledged message at its sequence with its contents,
and the deleted ones not. Then the two others die, one comes back with nothing, and the
caught-up node, now the leader, serves every message to clients and catches the wiped one up
in turn.

And with nats-server on the other side: a nats-server leader (its own snapshot policy, past
8 MiB of log) catches a pynatsd follower up, compressed records included, and hands it the
lead; a pynatsd leader's snapshot and records catch a nats-server follower up, which then
serves the same messages.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import random
import shutil
import time
import urllib.request
from pathlib import Path
from typing import Any

import nats
import nats.errors
import nats.js.errors
import pytest
from nats.aio.client import Client
from nats.js.api import StreamConfig

from pynatsd.jetstream.cluster.replica_sync import SNAPSHOT_ENV
from support.cluster import GO, PY, ProcessCluster
from support.eventually import eventually_async

STREAM = "CATCH"
PUBLISHED = 1200  # while the follower is down: many snapshots at 200 entries each
DELETED = {7, 60, 61, 62, 63, 64, 65, 66, 400, 401, 777}
WAIT = 60.0
Sent = tuple[str, bytes, dict[str, str] | None]  # subject, data, headers


def js_dir(tmp_path: Path, index: int) -> Path:
    return tmp_path / f"js{index}"


def stream_state(cluster: ProcessCluster, index: int) -> dict[str, Any] | None:
    """The stream's state in node `index`'s own store (its /jsz, not the leader's answer)."""
    port = cluster.nodes[index].http_port
    url = f"http://127.0.0.1:{port}/jsz?streams=true"
    with urllib.request.urlopen(url, timeout=2) as r:
        jsz = json.loads(r.read())
    for account in jsz.get("account_details") or []:
        for stream in account.get("stream_detail") or []:
            if stream["name"] == STREAM:
                state: dict[str, Any] = stream["state"]
                return state
    return None


def snapshot_indexes(tmp_path: Path, index: int, since: float = 0.0) -> list[int]:
    """The RAFT indexes of node `index`'s stream group snapshots (`snap.<term>.<index>`), of
    those written after `since` (a time.time())."""
    found = js_dir(tmp_path, index).glob("**/S-R3F-*/snapshots/snap.*")
    return sorted(int(p.name.split(".")[2]) for p in found if p.stat().st_mtime > since)


def compacted_since(tmp_path: Path, index: int, since: float) -> bool:
    """Node `index` snapshotted (and so compacted its group's log) after `since`: past every
    entry a follower that died before then can have (publishes are batched into few entries,
    so an index says little)."""
    return bool(snapshot_indexes(tmp_path, index, since))


async def info_from(nc: Client) -> nats.js.api.StreamInfo | None:
    try:
        return await nc.jetstream(timeout=2).stream_info(STREAM)
    except (nats.errors.TimeoutError, nats.errors.NoRespondersError, nats.js.errors.Error):
        return None


async def leader_name(nc: Client) -> str:
    info = await info_from(nc)
    if info is None or info.cluster is None or not info.cluster.leader:
        return ""
    return info.cluster.leader


async def publish_many(nc: Client, start: int, count: int, sent: dict[int, Sent]) -> None:
    """Publish with acks, 50 in flight; remember what went at which sequence."""
    js = nc.jetstream(timeout=20)
    for base in range(start, start + count, 50):
        batch = range(base, min(base + 50, start + count))
        subjects = [f"c.{i % 5}" for i in batch]
        datas = [b"msg-%d-" % i + bytes(i % 200) for i in batch]
        headers = [{"K": str(i)} if i % 3 == 0 else None for i in batch]
        acks = await asyncio.gather(
            *(js.publish(s, d, headers=h) for s, d, h in zip(subjects, datas, headers, strict=True))
        )
        for ack, s, d, h in zip(acks, subjects, datas, headers, strict=True):
            sent[ack.seq] = (s, d, h)


async def check_every_message(nc: Client, sent: dict[int, Sent]) -> None:
    js = nc.jetstream(timeout=10)
    for seq in sorted(sent):
        if seq in DELETED:
            with pytest.raises(nats.js.errors.NotFoundError):
                await js.get_msg(STREAM, seq)
            continue
        msg = await js.get_msg(STREAM, seq)
        subject, data, headers = sent[seq]
        assert (msg.seq, msg.subject, msg.data) == (seq, subject, data), seq
        assert (msg.headers or None) == headers, seq


@pytest.mark.parametrize("store", ["kept", "wiped"])
async def test_a_follower_catches_up_and_then_serves(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, store: str
) -> None:
    monkeypatch.setenv(SNAPSHOT_ENV, "entries=200,interval=2,jitter=0")
    stores = {i: f'jetstream {{ store_dir: "{js_dir(tmp_path, i)}" }}\n' for i in range(3)}
    cluster = ProcessCluster([PY, PY, PY], tmp_path, node_config=stores)
    cluster.start()
    clients: dict[int, Client] = {}
    try:
        for i in range(3):
            clients[i] = await nats.connect(cluster.nodes[i].url, allow_reconnect=False)

        async def created() -> object:
            try:
                return (
                    await clients[0]
                    .jetstream(timeout=5)
                    .add_stream(StreamConfig(name=STREAM, subjects=["c.>"], num_replicas=3))
                )
            except (nats.errors.TimeoutError, nats.js.errors.ServiceUnavailableError):
                return None

        await eventually_async(created, 40, "the stream created", interval=0.5)
        leader = await eventually_async(lambda: leader_name(clients[0]), 20, "a stream leader")
        sent: dict[int, Sent] = {}
        await publish_many(clients[0], 0, 50, sent)

        # A follower goes down; the others go on and compact their logs past it.
        follower = next(n.index for n in cluster.nodes if n.name != leader)
        others = [i for i in range(3) if i != follower]
        await clients.pop(follower).close()
        cluster.kill(follower)
        await publish_many(clients[others[0]], 50, PUBLISHED, sent)
        js = clients[others[0]].jetstream(timeout=10)
        for seq in sorted(DELETED):
            assert await js.delete_msg(STREAM, seq)
        published = time.time()
        assert sorted(sent) == list(range(1, PUBLISHED + 51))
        for i in others:
            await eventually_async(
                _async(lambda i=i: compacted_since(tmp_path, i, published)),
                WAIT,
                f"a snapshot after the publishes on node {i}",
            )
        expected = stream_state(cluster, others[0])
        assert expected is not None and expected["messages"] == PUBLISHED + 50 - len(DELETED)

        if store == "wiped":
            shutil.rmtree(js_dir(tmp_path, follower))
        cluster.restart(follower)

        def same_as_leader() -> bool:
            got = stream_state(cluster, follower)
            keys = ("messages", "first_seq", "last_seq", "num_deleted")
            return got is not None and all(got.get(k) == expected.get(k) for k in keys)

        await eventually_async(_async(same_as_leader), WAIT, "the follower caught up")
        assert "Catchup for stream" in cluster.nodes[follower].log_text()

        # The two others die; one comes back with nothing. The caught-up node leads (the
        # other's log is empty) and serves clients and the wiped node's catch-up.
        for i in others:
            await clients.pop(i).close()
            cluster.kill(i)
        back = others[0]
        shutil.rmtree(js_dir(tmp_path, back))
        cluster.restart(back)
        clients[follower] = await nats.connect(cluster.nodes[follower].url, allow_reconnect=False)
        name = cluster.nodes[follower].name
        await eventually_async(
            lambda: _is(leader_name(clients[follower]), name), WAIT, "the caught-up node leads"
        )
        await check_every_message(clients[follower], sent)
        await eventually_async(
            _async(lambda: stream_state(cluster, back) == stream_state(cluster, follower)),
            WAIT,
            "the wiped node caught up from the new leader",
        )
        assert "Catchup for stream" in cluster.nodes[back].log_text()
        # New messages go on at the next sequence on both.
        ack = await clients[follower].jetstream(timeout=10).publish("c.new", b"after")
        assert ack.seq == PUBLISHED + 51
    finally:
        for nc in clients.values():
            if nc.is_connected:
                await nc.close()
        cluster.stop()


def _async(check: Any) -> Any:
    async def run() -> Any:
        return check()

    return run


async def _is(value: Any, expected: str) -> bool:
    return await value == expected


# -- with nats-server: one side Go, the other pynatsd ---------------------------------------------


async def create_stream(nc: Client, **config: Any) -> object:
    async def attempt() -> object:
        try:
            return await nc.jetstream(timeout=5).add_stream(
                StreamConfig(name=STREAM, subjects=["c.>"], num_replicas=3, **config)
            )
        except (nats.errors.TimeoutError, nats.js.errors.APIError):
            return None  # no meta leader yet, or a peer not selectable yet

    return await eventually_async(attempt, 40, "the stream created", interval=0.5)


async def publish_until_acked(nc: Client, subject: str, data: bytes) -> int:
    async def attempt() -> int:
        try:
            return (await nc.jetstream(timeout=3).publish(subject, data)).seq
        except (nats.errors.TimeoutError, nats.errors.NoRespondersError, nats.js.errors.Error):
            return 0

    return await eventually_async(attempt, WAIT, "a publish acked")


def same_state(cluster: ProcessCluster, a: int, b: int) -> bool:
    x, y = stream_state(cluster, a), stream_state(cluster, b)
    keys = ("messages", "bytes", "first_seq", "last_seq", "num_deleted")
    return x is not None and y is not None and all(x.get(k) == y.get(k) for k in keys)


async def test_a_nats_server_leader_catches_up_a_pynatsd_follower(tmp_path: Path) -> None:
    """nats-server snapshots once 8 MiB went through its log, compacts it, and catches the
    pynatsd follower up with its records: compressed ones (op 14) for large compressible
    messages, skips and delete ranges for the deleted ones."""
    stores = {i: f'jetstream {{ store_dir: "{js_dir(tmp_path, i)}" }}\n' for i in range(3)}
    cluster = ProcessCluster([GO, GO, PY], tmp_path, node_config=stores)
    cluster.start()
    nc = await nats.connect(cluster.nodes[0].url, allow_reconnect=False)
    try:
        await create_stream(nc)
        first = await publish_until_acked(nc, "c.first", b"before")
        cluster.kill(2)  # pynatsd; a nats-server node leads now or did already
        sent: dict[int, bytes] = {first: b"before"}
        rng = random.Random(7)
        for i in range(130):
            # Random bytes fill nats-server's log past 8 MiB; every fourth compresses well.
            data = bytes([i % 251]) * 65536 if i % 4 == 0 else rng.randbytes(100_000)
            sent[await publish_until_acked(nc, f"c.{i % 3}", data)] = data
        js = nc.jetstream(timeout=10)
        deleted = {5, 20, 21, 22, 23, 60}
        for seq in sorted(deleted):
            assert await js.delete_msg(STREAM, seq)
        await eventually_async(
            _async(lambda: all(snapshot_indexes(tmp_path, i) for i in (0, 1))),
            WAIT,
            "nats-server's snapshots",
        )
        cluster.restart(2)
        await eventually_async(_async(lambda: same_state(cluster, 2, 0)), WAIT, "caught up")
        assert "Catchup for stream" in cluster.nodes[2].log_text()
        # The pynatsd node takes the lead (nats-server hands it over) and serves it all.
        nc2 = await nats.connect(cluster.nodes[2].url, allow_reconnect=False)
        try:

            async def pynatsd_leads() -> bool:
                if await leader_name(nc2) == "n3":
                    return True
                with contextlib.suppress(nats.errors.TimeoutError):
                    await nc.request(
                        f"$JS.API.STREAM.LEADER.STEPDOWN.{STREAM}",
                        b'{"placement":{"preferred":"n3"}}',
                        timeout=2,
                    )
                return False

            await eventually_async(pynatsd_leads, WAIT, "pynatsd leads", interval=2.0)
            js2 = nc2.jetstream(timeout=10)
            for seq, data in sorted(sent.items()):
                if seq in deleted:
                    with pytest.raises(nats.js.errors.NotFoundError):
                        await js2.get_msg(STREAM, seq)
                else:
                    assert (await js2.get_msg(STREAM, seq)).data == data, seq
        finally:
            await nc2.close()
    finally:
        if nc.is_connected:
            await nc.close()
        cluster.stop()


async def test_a_pynatsd_leader_catches_up_a_nats_server_follower(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """pynatsd's snapshot (nats-server's binary stream state) and records are what
    nats-server's follower takes: it ends with the same state, and serves the same messages."""
    monkeypatch.setenv(SNAPSHOT_ENV, "entries=200,interval=2,jitter=0")
    stores = {i: f'jetstream {{ store_dir: "{js_dir(tmp_path, i)}" }}\n' for i in range(3)}
    cluster = ProcessCluster([PY, PY, GO], tmp_path, node_config=stores)
    cluster.start()
    nc = await nats.connect(cluster.nodes[0].url, allow_reconnect=False)
    try:
        await create_stream(nc, allow_direct=True)
        await publish_until_acked(nc, "c.first", b"before")
        cluster.kill(2)  # nats-server; a pynatsd node leads now or did already
        await publish_until_acked(nc, "c.again", b"again")
        sent: dict[int, Sent] = {}
        await publish_many(nc, 0, PUBLISHED, sent)
        js = nc.jetstream(timeout=10)
        for seq in sorted(DELETED):
            assert await js.delete_msg(STREAM, seq)
        published = time.time()
        for i in (0, 1):
            await eventually_async(
                _async(lambda i=i: compacted_since(tmp_path, i, published)),
                WAIT,
                f"a snapshot after the publishes on node {i}",
            )
        cluster.restart(2)
        await eventually_async(_async(lambda: same_state(cluster, 2, 0)), WAIT, "caught up")
        assert "Catchup for stream '$G > CATCH' complete" in cluster.nodes[2].log_text()
        # nats-server's replica answers direct gets from its own clients.
        nc2 = await nats.connect(cluster.nodes[2].url, allow_reconnect=False)
        try:
            js2 = nc2.jetstream(timeout=10)
            for seq in (3, 100, 401, 402, 999, PUBLISHED + 2):
                if seq in DELETED:
                    continue
                msg = await eventually_async(
                    lambda seq=seq: js2.get_msg(STREAM, seq, direct=True), 20, f"direct {seq}"
                )
                assert (msg.subject, msg.data) == sent[seq][:2], seq
        finally:
            await nc2.close()
    finally:
        if nc.is_connected:
            await nc.close()
        cluster.stop()
