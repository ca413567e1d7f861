"""Replicated streams across real server processes, the same scenario on a 3-node nats-server
cluster and on a 3-node pynatsd cluster: what nats-py clients on every node observe must be the
same. Creating R1 and R3 streams from any node, publishing with acks from every node, reading
from every node, and the stream leader killed (SIGKILL) in the middle: nothing acknowledged is
lost, duplicated or reordered, a new leader takes over, and the restarted node has it all."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import nats
import nats.errors
import nats.js.errors
import pytest
from nats.aio.client import Client
from nats.js.api import StreamConfig

from support.cluster import GO, PY, ProcessCluster
from support.eventually import eventually_async

KINDS = [pytest.param([GO, GO, GO], id="nats-server"), pytest.param([PY, PY, PY], id="pynatsd")]
# A kill, nats-server's election timeout (4-9 s) and the news reaching a client.
FAILOVER = 40.0


@asynccontextmanager
async def cluster_of(kinds: list[str], tmp_path: Path) -> AsyncIterator[ProcessCluster]:
    stores = {i: f'jetstream {{ store_dir: "{tmp_path}/js{i}" }}\n' for i in range(3)}
    cluster = ProcessCluster(kinds, tmp_path, node_config=stores)
    cluster.start()
    try:
        yield cluster
    finally:
        cluster.stop()


async def connect(cluster: ProcessCluster, index: int) -> Client:
    return await nats.connect(cluster.nodes[index].url, allow_reconnect=False)


async def meta_ready(nc: Client) -> bool:
    await nc.jetstream(timeout=2).account_info()
    return True


async def add_stream(nc: Client, config: StreamConfig) -> object:
    """As an application does it: retried while the cluster is not ready (no meta leader yet,
    a peer still starting: nats-server answers 503 or 10005 then)."""

    async def attempt() -> object:
        try:
            return await nc.jetstream(timeout=5).add_stream(config)
        except (nats.errors.TimeoutError, nats.js.errors.ServiceUnavailableError):
            return None

    return await eventually_async(attempt, 30, "stream created", interval=0.5)


async def publish(nc: Client, subject: str, data: bytes) -> nats.js.api.PubAck:
    """An acked publish as an application makes it: a new stream's subjects reach the other
    servers a moment after its creation is answered (both servers), so "no responders" (the
    message was not stored) is tried again for a while."""
    deadline = asyncio.get_running_loop().time() + 10
    while True:
        try:
            return await nc.jetstream(timeout=10).publish(subject, data)
        except nats.js.errors.NoStreamResponseError:
            if asyncio.get_running_loop().time() > deadline:
                raise
            await asyncio.sleep(0.1)


async def info_from(nc: Client, name: str) -> nats.js.api.StreamInfo | None:
    try:
        return await nc.jetstream(timeout=2).stream_info(name)
    except (nats.errors.TimeoutError, nats.errors.NoRespondersError):
        return None


@pytest.mark.parametrize("kinds", KINDS)
async def test_r3_stream_survives_its_leader(tmp_path: Path, kinds: list[str]) -> None:
    async with cluster_of(kinds, tmp_path) as cluster:
        clients = [await connect(cluster, i) for i in range(3)]
        try:
            await eventually_async(lambda: meta_ready(clients[1]), 30, "a meta leader")
            created = await add_stream(
                clients[1], StreamConfig(name="ORDERS", subjects=["orders.>"], num_replicas=3)
            )
            assert created is not None
            info = await eventually_async(lambda: info_from(clients[0], "ORDERS"), 20)
            assert info.cluster is not None and info.cluster.leader
            assert len(info.cluster.replicas or []) == 2

            acked = []
            for i in range(60):
                ack = await publish(clients[i % 3], f"orders.{i % 7}", b"order-%d" % i)
                acked.append(ack.seq)
            assert acked == list(range(1, 61))
            for nc in clients:
                seen = await info_from(nc, "ORDERS")
                assert seen is not None and seen.state.messages == 60

            leader = info.cluster.leader
            dead = next(n.index for n in cluster.nodes if n.name == leader)
            cluster.kill(dead)
            alive = [nc for i, nc in enumerate(clients) if i != dead]

            async def new_leader() -> str:
                seen = await info_from(alive[0], "ORDERS")
                if seen is None or seen.cluster is None or seen.cluster.leader in (None, leader):
                    return ""
                return seen.cluster.leader

            await eventually_async(new_leader, FAILOVER, "a new stream leader")
            for i in range(60, 90):
                ack = await alive[i % 2].jetstream(timeout=10).publish("orders.x", b"order-%d" % i)
                assert ack.seq == i + 1
            cluster.restart(dead)
            clients[dead] = await connect(cluster, dead)
            # Every acknowledged message, once, in order, read through any node.
            js = clients[dead].jetstream(timeout=10)
            for seq in (1, 30, 60, 61, 90):
                msg = await js.get_msg("ORDERS", seq)
                assert msg.data == b"order-%d" % (seq - 1)
            final = await info_from(clients[dead], "ORDERS")
            assert final is not None and (final.state.messages, final.state.last_seq) == (90, 90)
        finally:
            for nc in clients:
                if nc.is_connected:
                    await nc.close()


@pytest.mark.parametrize("kinds", KINDS)
async def test_r1_streams_names_and_delete_from_any_node(tmp_path: Path, kinds: list[str]) -> None:
    async with cluster_of(kinds, tmp_path) as cluster:
        clients = [await connect(cluster, i) for i in range(3)]
        try:
            await eventually_async(lambda: meta_ready(clients[0]), 30, "a meta leader")
            for i in range(3):
                created = await add_stream(
                    clients[i], StreamConfig(name=f"S{i}", subjects=[f"s{i}.>"], num_replicas=1)
                )
                assert created is not None
            for i, nc in enumerate(clients):
                ack = await publish(nc, f"s{(i + 1) % 3}.a", b"x")
                assert ack.stream == f"S{(i + 1) % 3}" and ack.seq == 1
            names = await clients[2].jetstream(timeout=5).streams_info()
            assert sorted(s.config.name for s in names) == ["S0", "S1", "S2"]
            assert await clients[1].jetstream(timeout=5).delete_stream("S0")
            with pytest.raises(nats.js.errors.NotFoundError):
                await clients[0].jetstream(timeout=5).stream_info("S0")
        finally:
            for nc in clients:
                await nc.close()


@pytest.mark.parametrize("kinds", KINDS)
async def test_purge_and_delete_reach_every_replica(tmp_path: Path, kinds: list[str]) -> None:
    """A purge and a message delete answered by the leader are on every replica: after the
    leader dies, the new one reports the same messages and has not the deleted one."""
    async with cluster_of(kinds, tmp_path) as cluster:
        clients = [await connect(cluster, i) for i in range(3)]
        try:
            await eventually_async(lambda: meta_ready(clients[0]), 30, "a meta leader")
            config = StreamConfig(name="EVENTS", subjects=["ev.>"], num_replicas=3)
            assert await add_stream(clients[0], config) is not None
            js = clients[0].jetstream(timeout=10)
            for i in range(20):
                await publish(clients[0], f"ev.{i % 4}", b"e%d" % i)
            assert await js.delete_msg("EVENTS", 6)
            assert await js.purge_stream("EVENTS", subject="ev.1") is True
            before = await info_from(clients[0], "EVENTS")
            assert before is not None and before.cluster is not None
            # Seq 6 is one of the five ev.1 messages: 20 - 5 remain.
            expected = before.state.messages
            assert expected == 15
            leader = before.cluster.leader
            dead = next(n.index for n in cluster.nodes if n.name == leader)
            cluster.kill(dead)
            alive = next(nc for i, nc in enumerate(clients) if i != dead)

            async def new_leader_info() -> nats.js.api.StreamInfo | None:
                seen = await info_from(alive, "EVENTS")
                if seen is None or seen.cluster is None or seen.cluster.leader in (None, leader):
                    return None
                return seen

            after = await eventually_async(new_leader_info, FAILOVER, "a new stream leader")
            assert after.state.messages == expected
            with pytest.raises(nats.js.errors.NotFoundError):
                await alive.jetstream(timeout=10).get_msg("EVENTS", 2)  # ev.1, purged
            msg = await alive.jetstream(timeout=10).get_msg("EVENTS", 3)
            assert msg.data == b"e2"
        finally:
            for nc in clients:
                if nc.is_connected:
                    await nc.close()


@pytest.mark.parametrize("kinds", KINDS)
async def test_durable_consumer_survives_its_leader(tmp_path: Path, kinds: list[str]) -> None:
    """An R3 durable pull consumer: its acks and its deliveries are on every replica, so when
    its leader dies the new one neither delivers an acknowledged message again nor loses one."""
    async with cluster_of(kinds, tmp_path) as cluster:
        clients = [await connect(cluster, i) for i in range(3)]
        try:
            await eventually_async(lambda: meta_ready(clients[0]), 30, "a meta leader")
            config = StreamConfig(name="JOBS", subjects=["jobs.>"], num_replicas=3)
            assert await add_stream(clients[0], config) is not None
            js = clients[0].jetstream(timeout=10)
            for i in range(20):
                await publish(clients[0], "jobs.new", b"job-%d" % i)
            consumer_config = nats.js.api.ConsumerConfig(
                durable_name="WORKER", ack_policy="explicit", ack_wait=2.0
            )
            info = await js.add_consumer("JOBS", consumer_config)
            assert info.cluster is not None and info.cluster.leader
            sub = await js.pull_subscribe_bind("WORKER", "JOBS")
            done = []
            for msg in await sub.fetch(10, timeout=5):
                done.append(msg.data)
                await msg.ack_sync()
            held = await sub.fetch(3, timeout=5)  # delivered, never acked
            assert [m.data for m in held] == [b"job-%d" % i for i in range(10, 13)]
            await sub.unsubscribe()

            leader = info.cluster.leader
            dead = next(n.index for n in cluster.nodes if n.name == leader)
            cluster.kill(dead)
            alive = next(nc for i, nc in enumerate(clients) if i != dead)

            async def new_leader_info() -> nats.js.api.ConsumerInfo | None:
                try:
                    seen = await alive.jetstream(timeout=2).consumer_info("JOBS", "WORKER")
                except (nats.errors.TimeoutError, nats.errors.NoRespondersError):
                    return None
                if seen.cluster is None or seen.cluster.leader in (None, leader):
                    return None
                return seen

            after = await eventually_async(new_leader_info, FAILOVER, "a new consumer leader")
            assert after.ack_floor.stream_seq == 10
            # nats-server holds a delivery until the group has it (delivered is then 13);
            # pynatsd replicates it right after, so a leader killed at once may leave 10.
            assert after.delivered.stream_seq >= 10
            sub = await alive.jetstream(timeout=10).pull_subscribe_bind("WORKER", "JOBS")
            rest: list[bytes] = []
            while len(rest) < 10:
                try:
                    msgs = await sub.fetch(10 - len(rest), timeout=5)
                except nats.errors.TimeoutError:
                    continue
                for msg in msgs:
                    rest.append(msg.data)
                    await msg.ack_sync()
            assert sorted(rest) == sorted(b"job-%d" % i for i in range(10, 20))
            assert not set(rest) & set(done)
        finally:
            for nc in clients:
                if nc.is_connected:
                    await nc.close()


@pytest.mark.parametrize("kinds", KINDS)
async def test_kv_and_object_buckets_on_r3(tmp_path: Path, kinds: list[str]) -> None:
    """Key-value and object store buckets with three replicas, used from every node (their
    watchers find the stream by its subject: STREAM.NAMES with a subject filter)."""
    async with cluster_of(kinds, tmp_path) as cluster:
        clients = [await connect(cluster, i) for i in range(3)]
        try:
            await eventually_async(lambda: meta_ready(clients[0]), 30, "a meta leader")

            async def bucket() -> object:
                try:
                    js = clients[0].jetstream(timeout=5)
                    return await js.create_key_value(bucket="CFG", replicas=3)
                except (nats.errors.TimeoutError, nats.js.errors.APIError):
                    return None

            await eventually_async(bucket, 30, "a KV bucket")
            for i, nc in enumerate(clients):
                kv = await nc.jetstream(timeout=10).key_value("CFG")
                assert await kv.put(f"k{i}", b"v%d" % i) == i + 1
            for nc in clients:
                kv = await nc.jetstream(timeout=10).key_value("CFG")
                assert [(await kv.get(f"k{i}")).value for i in range(3)] == [b"v0", b"v1", b"v2"]
            kv = await clients[1].jetstream(timeout=10).key_value("CFG")
            await kv.delete("k0")
            assert sorted(await kv.keys()) == ["k1", "k2"]

            js = clients[2].jetstream(timeout=10)
            store = await js.create_object_store(
                "FILES", config=nats.js.api.ObjectStoreConfig(replicas=3)
            )
            blob = bytes(range(256)) * 1000  # several chunks
            await store.put("blob", blob)
            other = await clients[0].jetstream(timeout=10).object_store("FILES")
            assert (await other.get("blob")).data == blob
        finally:
            for nc in clients:
                await nc.close()


@pytest.mark.parametrize("kinds", KINDS)
async def test_stream_leader_stepdown(tmp_path: Path, kinds: list[str]) -> None:
    """`$JS.API.STREAM.LEADER.STEPDOWN.<stream>`: the leader answers and hands over; the
    stream goes on under a new leader with nothing lost."""
    async with cluster_of(kinds, tmp_path) as cluster:
        clients = [await connect(cluster, i) for i in range(3)]
        try:
            await eventually_async(lambda: meta_ready(clients[0]), 30, "a meta leader")
            config = StreamConfig(name="STEP", subjects=["step.>"], num_replicas=3)
            assert await add_stream(clients[0], config) is not None
            for i in range(5):
                await publish(clients[1], "step.a", b"s%d" % i)
            before = await info_from(clients[0], "STEP")
            assert before is not None and before.cluster is not None
            reply = await clients[2].request("$JS.API.STREAM.LEADER.STEPDOWN.STEP", b"", timeout=10)
            assert json.loads(reply.data) == {
                "type": "io.nats.jetstream.api.v1.stream_leader_stepdown_response",
                "success": True,
            }

            async def new_leader() -> str:
                seen = await info_from(clients[0], "STEP")
                if seen is None or seen.cluster is None:
                    return ""
                leader = seen.cluster.leader or ""
                return leader if leader != before.cluster.leader else ""

            await eventually_async(new_leader, FAILOVER, "a new stream leader")
            ack = await eventually_async(
                lambda: _publish(clients[2], "step.b"), FAILOVER, "a publish after"
            )
            assert ack == 6
        finally:
            for nc in clients:
                await nc.close()


async def _publish(nc: Client, subject: str) -> int:
    try:
        return (await nc.jetstream(timeout=3).publish(subject, b"after")).seq
    except (nats.errors.TimeoutError, nats.errors.NoRespondersError, nats.js.errors.APIError):
        return 0
