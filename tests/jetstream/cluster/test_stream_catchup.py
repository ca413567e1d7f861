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
"""

from __future__ import annotations

import asyncio
import json
import shutil
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
from support.cluster import PY, ProcessCluster
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


def snapshot_indexes(tmp_path: Path, index: int) -> list[int]:
    """The RAFT indexes of node `index`'s stream group snapshots (`snap.<term>.<index>`)."""
    found = js_dir(tmp_path, index).glob("**/S-R3F-*/snapshots/snap.*")
    return sorted(int(p.name.split(".")[2]) for p in found)


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
        assert sorted(sent) == list(range(1, PUBLISHED + 51))
        for i in others:
            await eventually_async(
                _async(lambda i=i: max(snapshot_indexes(tmp_path, i), default=0) > 1000),
                WAIT,
                f"a snapshot past index 1000 on node {i}",
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
