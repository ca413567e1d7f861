"""NRG as the real nats-server sends it, decoded and re-encoded by pynatsd/raft/wire.py.

Three nats-server nodes with JetStream (an R3 stream, an R3 durable consumer) and a system
account. A client of the system account subscribes to `$NRG.>`: the nodes' internal RAFT
clients publish in the system account, and the subscription's interest crosses the routes, so
one subscriber on n1 sees every group's traffic from every node. Leadership is moved once (a
stream leader stepdown: a leader transfer entry, then a vote), and a follower is SIGKILLed and
restarted behind the others (a catch-up). Every message must decode and re-encode to the same
bytes, name only the three nodes' ids, and each kind must have been seen; then the groups'
`peers.idx` and `tav.idx` files are read from each node's store and checked the same way.
"""

from __future__ import annotations

import asyncio
import json
import re
import time
import urllib.request
from collections import defaultdict
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import Any, TypeVar

import nats
import nats.errors
import nats.js.errors
import pytest
from nats.aio.client import Client
from nats.aio.msg import Msg
from nats.js.api import AckPolicy, ConsumerConfig, StreamConfig

from pynatsd.jetstream.util import go_hash
from pynatsd.raft.wire import (
    APPEND_ENTRY_RESPONSE_LEN,
    ID_LEN,
    NO_PEER,
    VOTE_RESPONSE_LEN,
    EntryType,
    ExtensionState,
    decode_append_entry,
    decode_append_entry_response,
    decode_peer_state,
    decode_term_vote,
    decode_vote_request,
    decode_vote_response,
    encode_append_entry,
    encode_append_entry_response,
    encode_peer_state,
    encode_term_vote,
    encode_vote_request,
    encode_vote_response,
)
from support.cluster import GO, ProcessCluster, wait_interest
from support.natsserver import require_nats_server
from support.ports import LOOPBACK

T = TypeVar("T")

SYSTEM_ACCOUNT = "SYS"
ACCOUNTS = f"""
accounts {{
  {SYSTEM_ACCOUNT} {{ users = [ {{ user: sys, password: sys }} ] }}
  APP {{ jetstream: enabled, users = [ {{ user: app, password: app }} ] }}
}}
system_account: {SYSTEM_ACCOUNT}
# The cluster harness's own probes connect without credentials.
no_auth_user: app
"""
STREAM = "WIRE"
DURABLE = "WIRE_D"
PUBLISHED = 50
PUBLISHED_WHILE_DOWN = 20
ACKED = 5
WAIT = 20.0  # the longest any one step may take (a meta election is 4-9 s at worst)

# Group names: `_meta_`, and `<S|C>-R<replicas><storage initial>-<getHash of a NUID>`.
STREAM_GROUP = re.compile(r"S-R3F-[0-9A-Za-z]{8}")
CONSUMER_GROUP = re.compile(r"C-R3F-[0-9A-Za-z]{8}")
META_GROUP = "_meta_"
INBOX = r"[0-9A-Za-z]{8}"


class Kind(Enum):
    VOTE_REQUEST = "vote request"
    VOTE_RESPONSE = "vote response"
    APPEND_ENTRY = "append entry"
    CATCHUP_APPEND_ENTRY = "catch-up append entry"
    APPEND_ENTRY_RESPONSE = "append entry response"
    CATCHUP_RESPONSE = "catch-up append entry response"
    PROPOSAL = "proposal"
    REMOVE_PEER_PROPOSAL = "remove peer proposal"
    UNKNOWN = "unknown"


@dataclass(frozen=True)
class Captured:
    subject: str
    reply: str
    payload: bytes

    @property
    def group(self) -> str:
        """The RAFT group of a `$NRG.V|AE|P|RP.<group>` subject (inboxes name no group)."""
        return self.subject.split(".", 2)[2]


# subject pattern, reply pattern, payload length (None: any) -> kind. First match wins.
CLASSES: list[tuple[str, str, int | None, Kind]] = [
    (r"\$NRG\.V\.(.+)", rf"\$NRG\.R\.{INBOX}", None, Kind.VOTE_REQUEST),
    (r"\$NRG\.AE\.(.+)", rf"\$NRG\.R\.{INBOX}", None, Kind.APPEND_ENTRY),
    # raft.go at the checkout replies to catch-up entries on the leader's `$NRG.R` inbox;
    # nats-server 2.15.1 gives each catch-up its own `$NRG.CP.<inbox>`.
    (rf"\$NRG\.CR\.{INBOX}", rf"\$NRG\.(CP|R)\.{INBOX}", None, Kind.CATCHUP_APPEND_ENTRY),
    (rf"\$NRG\.R\.{INBOX}", "", VOTE_RESPONSE_LEN, Kind.VOTE_RESPONSE),
    # A follower that cannot take an entry answers with its catch-up inbox as the reply.
    (
        rf"\$NRG\.R\.{INBOX}",
        rf"(\$NRG\.CR\.{INBOX})?",
        APPEND_ENTRY_RESPONSE_LEN,
        Kind.APPEND_ENTRY_RESPONSE,
    ),
    (rf"\$NRG\.CP\.{INBOX}", "", APPEND_ENTRY_RESPONSE_LEN, Kind.CATCHUP_RESPONSE),
    (r"\$NRG\.P\.(.+)", "", None, Kind.PROPOSAL),
    (r"\$NRG\.RP\.(.+)", "", ID_LEN, Kind.REMOVE_PEER_PROPOSAL),
]


def classify(msg: Captured) -> Kind:
    for subject, reply, size, kind in CLASSES:
        if (
            re.fullmatch(subject, msg.subject)
            and re.fullmatch(reply, msg.reply)
            and (size is None or len(msg.payload) == size)
        ):
            return kind
    return Kind.UNKNOWN


# The kinds sent on a group's own subject, carrying the sender's term.
TERMED = (Kind.APPEND_ENTRY, Kind.VOTE_REQUEST)
CODECS: dict[Kind, tuple[Callable[[bytes], Any], Callable[[Any], bytes]]] = {
    Kind.VOTE_REQUEST: (decode_vote_request, encode_vote_request),
    Kind.VOTE_RESPONSE: (decode_vote_response, encode_vote_response),
    Kind.APPEND_ENTRY: (decode_append_entry, encode_append_entry),
    Kind.CATCHUP_APPEND_ENTRY: (decode_append_entry, encode_append_entry),
    Kind.APPEND_ENTRY_RESPONSE: (decode_append_entry_response, encode_append_entry_response),
    Kind.CATCHUP_RESPONSE: (decode_append_entry_response, encode_append_entry_response),
}


@dataclass
class Run:
    """What one run of the cluster left: the traffic, the nodes' names and files."""

    messages: list[Captured]
    node_ids: dict[str, str]  # server name -> node id, as /jsz reports them
    stream_group: str
    consumer_group: str
    meta_leader: str  # server name, from /jsz
    stream_leader: str
    consumer_leader: str
    killed: str
    other_account_saw: int  # messages an APP-account subscriber to `$NRG.>` received
    files: dict[str, dict[str, dict[str, bytes]]] = field(default_factory=dict)
    # ^ node name -> group -> file name (peers.idx, tav.idx) -> bytes

    def of(self, *kinds: Kind) -> list[Captured]:
        return [m for m in self.messages if classify(m) in kinds]

    def decoded(self, *kinds: Kind) -> list[Any]:
        return [CODECS[classify(m)][0](m.payload) for m in self.of(*kinds)]

    def max_term(self, group: str) -> int:
        """The highest term any append entry or vote request of `group` carried."""
        terms: list[int] = [
            message.term
            for m, message in zip(self.of(*TERMED), self.decoded(*TERMED), strict=True)
            if m.group == group
        ]
        return max(terms)

    def leader_of(self, group: str) -> str:
        """The node id leading `group` in its highest term."""
        term = self.max_term(group)
        leaders = {
            ae.leader
            for m in self.of(Kind.APPEND_ENTRY)
            if m.group == group and (ae := decode_append_entry(m.payload)).term == term
        }
        assert len(leaders) == 1, (group, term, leaders)
        return leaders.pop()


# -- the run ---------------------------------------------------------------------------------


def _http_json(port: int, path: str) -> dict[str, Any]:
    with urllib.request.urlopen(f"http://{LOOPBACK}:{port}{path}", timeout=5) as r:
        data: dict[str, Any] = json.loads(r.read())
        return data


async def _until(what: str, check: Callable[[], Awaitable[T | None]], timeout: float = WAIT) -> T:
    """Poll `check` until it returns something (a NATS or socket error counts as not yet)."""
    deadline = time.monotonic() + timeout
    last: BaseException | None = None
    while True:
        try:
            value = await check()
            if value is not None and value is not False:
                return value
        except (OSError, nats.errors.Error, nats.js.errors.Error) as e:
            last = e
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {timeout}s: {what} (last error: {last!r})")
        await asyncio.sleep(0.1)


async def _request_json(nc: Client, subject: str, body: object = None) -> dict[str, Any]:
    payload = b"" if body is None else json.dumps(body).encode()
    msg = await nc.request(subject, payload, timeout=2)
    data: dict[str, Any] = json.loads(msg.data)
    return data


def _store_files(store: Path) -> dict[str, dict[str, bytes]]:
    """group -> {peers.idx, tav.idx} -> bytes, for each group directory of the system account."""
    groups: dict[str, dict[str, bytes]] = defaultdict(dict)
    for path in (store / "jetstream" / SYSTEM_ACCOUNT / "_js_").glob("*/*.idx"):
        if path.name in ("peers.idx", "tav.idx"):
            groups[path.parent.name][path.name] = path.read_bytes()
    return dict(groups)


@dataclass
class Leadership:
    """One group's leader as the JetStream API reports it, and how to move it elsewhere."""

    what: str
    nc: Client
    stepdown: str  # the API subject
    leader: Callable[[], Awaitable[str | None]]

    async def move_to(self, name: str) -> None:
        """Step the leader down naming `name` as the preferred successor (a leader transfer
        entry to it, then its vote request), and wait until it leads."""
        reply = await _request_json(self.nc, self.stepdown, {"placement": {"preferred": name}})
        assert reply.get("success") is True, reply

        async def leads() -> bool:
            return await self.leader() == name

        await _until(f"{name} leads the {self.what}", leads)


def _leaderships(cluster: ProcessCluster, app: Client, sys: Client) -> list[Leadership]:
    async def from_info(subject: str) -> str | None:
        leader: str | None = (await _request_json(app, subject))["cluster"].get("leader")
        return leader

    async def stream() -> str | None:
        return await from_info(f"$JS.API.STREAM.INFO.{STREAM}")

    async def consumer() -> str | None:
        return await from_info(f"$JS.API.CONSUMER.INFO.{STREAM}.{DURABLE}")

    async def meta() -> str | None:
        leader: str | None = _http_json(cluster.nodes[0].http_port, "/jsz")["meta_cluster"].get(
            "leader"
        )
        return leader

    return [
        Leadership("stream", app, f"$JS.API.STREAM.LEADER.STEPDOWN.{STREAM}", stream),
        Leadership(
            "consumer", app, f"$JS.API.CONSUMER.LEADER.STEPDOWN.{STREAM}.{DURABLE}", consumer
        ),
        Leadership("meta group", sys, "$JS.API.META.LEADER.STEPDOWN", meta),
    ]


async def _meta_view(cluster: ProcessCluster) -> tuple[str, dict[str, str]] | None:
    """The meta leader every node names, and server name -> node id from their /jsz:
    `meta_cluster.peer` is the meta leader's id (not the node's own), `replicas` name the
    others."""
    leaders: set[str] = set()
    ids: dict[str, str] = {}
    for node in cluster.nodes:
        view = _http_json(node.http_port, "/jsz")["meta_cluster"]
        leaders.add(view.get("leader", ""))
        ids[view.get("leader", "")] = view.get("peer", "")
        ids.update((r["name"], r["peer"]) for r in view.get("replicas") or [])
    if len(leaders) != 1 or "" in leaders or "" in ids or len(ids) != len(cluster.nodes):
        return None
    return leaders.pop(), ids


async def _scenario(cluster: ProcessCluster, stores: dict[str, Path]) -> Run:
    n1, n2, n3 = cluster.nodes
    messages: list[Captured] = []
    other_account: list[Msg] = []

    async def record(msg: Msg) -> None:
        messages.append(Captured(msg.subject, msg.reply, msg.data))

    async def count(msg: Msg) -> None:
        other_account.append(msg)

    sys_clients = [
        await nats.connect(node.url, user="sys", password="sys") for node in cluster.nodes
    ]
    sys = sys_clients[0]
    app = await nats.connect(n1.url, user="app", password="app")
    try:
        await sys.subscribe("$NRG.>", cb=record)
        await app.subscribe("$NRG.>", cb=count)
        # The system account's interest in `$NRG.>` has reached n2 and n3.
        await wait_interest(sys, sys_clients)
        for nc in sys_clients[1:]:
            await nc.close()
        js = app.jetstream()

        await _until("a meta leader", js.account_info)
        await _until(
            "the R3 stream",
            lambda: js.add_stream(StreamConfig(name=STREAM, subjects=["wire.>"], num_replicas=3)),
        )
        for i in range(PUBLISHED):
            await js.publish(f"wire.{i}", f"message {i}".encode())
        config = ConsumerConfig(durable_name=DURABLE, num_replicas=3, ack_policy=AckPolicy.EXPLICIT)
        await _until("the R3 consumer", lambda: js.add_consumer(STREAM, config))
        pull = await js.pull_subscribe_bind(DURABLE, STREAM)
        # A fetch before the consumer's first leader is elected is answered 503.
        for msg in await _until("a fetch", lambda: pull.fetch(ACKED, timeout=2)):
            await msg.ack_sync()

        # n3 will be killed: first every group's leadership moves off it, and the stream's
        # moves in any case (a leader transfer entry and a vote, seen live).
        stream, *others = _leaderships(cluster, app, sys)
        leader = await _until("the stream leader", stream.leader)
        await stream.move_to(n2.name if leader == n1.name else n1.name)
        for leadership in others:
            if await _until(f"the {leadership.what} leader", leadership.leader) == n3.name:
                await leadership.move_to(n1.name)

        # A follower left behind: killed, the stream moves on, restarted, caught up.
        cluster.kill(n3.index)
        for i in range(PUBLISHED, PUBLISHED + PUBLISHED_WHILE_DOWN):
            await js.publish(f"wire.{i}", f"message {i}".encode())
        cluster.restart(n3.index)

        async def caught_up() -> bool:
            info = await _request_json(app, f"$JS.API.STREAM.INFO.{STREAM}")
            replica = {r["name"]: r for r in info["cluster"].get("replicas", [])}.get(n3.name)
            catchup = any(classify(m) is Kind.CATCHUP_APPEND_ENTRY for m in messages)
            return catchup and replica is not None and replica["current"] and not replica.get("lag")

        await _until(f"{n3.name} caught up", caught_up)

        meta_leader, node_ids = await _until(
            "every node's meta group view", lambda: _meta_view(cluster)
        )
        stream_info = await _request_json(app, f"$JS.API.STREAM.INFO.{STREAM}")
        consumer_info = await _request_json(app, f"$JS.API.CONSUMER.INFO.{STREAM}.{DURABLE}")
        run = Run(
            messages=messages,
            node_ids=node_ids,
            stream_group=stream_info["cluster"]["raft_group"],
            consumer_group=consumer_info["cluster"]["raft_group"],
            meta_leader=meta_leader,
            stream_leader=stream_info["cluster"]["leader"],
            consumer_leader=consumer_info["cluster"]["leader"],
            killed=n3.name,
            other_account_saw=0,
        )

        # Every node's term files have reached the terms the wire shows (they are written
        # before a node acts on a new term, so this is quick).
        async def files_settled() -> bool:
            groups = {META_GROUP, run.stream_group, run.consumer_group}
            run.files = {name: _store_files(store) for name, store in stores.items()}
            return all(
                set(files) == groups
                and all(
                    decode_term_vote(files[g].get("tav.idx", b""))[0] == run.max_term(g)
                    for g in groups
                )
                for files in run.files.values()
            )

        await _until("term files matching the wire", files_settled)
        run.other_account_saw = len(other_account)
        return run
    finally:
        for nc in [app, *sys_clients]:
            await nc.close()


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Run]:
    require_nats_server()
    directory = tmp_path_factory.mktemp("nrg")
    stores = {f"n{i}": directory / f"store-n{i}" for i in (1, 2, 3)}
    node_config = {i: f'jetstream {{ store_dir: "{stores[f"n{i + 1}"]}" }}\n' for i in range(3)}
    with ProcessCluster(
        (GO, GO, GO), directory, extra_config=ACCOUNTS, node_config=node_config
    ) as cluster:
        cluster.start()
        yield asyncio.run(_scenario(cluster, stores))


# -- the traffic -----------------------------------------------------------------------------


def test_every_message_is_of_a_known_kind(run: Run) -> None:
    unknown = [(m.subject, m.reply, len(m.payload)) for m in run.of(Kind.UNKNOWN)]
    assert not unknown, unknown[:10]


def test_groups_are_the_meta_stream_and_consumer_groups(run: Run) -> None:
    assert STREAM_GROUP.fullmatch(run.stream_group)
    assert CONSUMER_GROUP.fullmatch(run.consumer_group)
    on_the_wire = {m.group for m in run.of(Kind.APPEND_ENTRY, Kind.VOTE_REQUEST)}
    assert on_the_wire == {META_GROUP, run.stream_group, run.consumer_group}


def test_every_message_decodes_and_re_encodes_to_the_same_bytes(run: Run) -> None:
    checked = 0
    for msg in run.messages:
        kind = classify(msg)
        if kind not in CODECS:
            continue
        decode, encode = CODECS[kind]
        assert encode(decode(msg.payload)) == msg.payload, (msg.subject, msg.payload)
        checked += 1
    assert checked > 100


def test_peer_state_entries_decode_and_re_encode(run: Run) -> None:
    states = [
        e.data
        for ae in run.decoded(Kind.APPEND_ENTRY, Kind.CATCHUP_APPEND_ENTRY)
        for e in ae.entries
        if e.type == EntryType.PEER_STATE
    ]
    assert states, "a new leader's first entry is its peer state"
    for data in states:
        ps = decode_peer_state(data)
        assert encode_peer_state(ps) == data
        assert set(ps.known_peers) <= set(run.node_ids.values())
        assert ps.domain_ext == ExtensionState.UNDETERMINED


def _peer_ids(run: Run) -> set[str]:
    ids: set[str] = set()
    for ae in run.decoded(Kind.APPEND_ENTRY, Kind.CATCHUP_APPEND_ENTRY):
        ids.add(ae.leader)
        for e in ae.entries:
            if e.type in (EntryType.ADD_PEER, EntryType.REMOVE_PEER, EntryType.LEADER_TRANSFER):
                ids.add(e.data.decode("latin-1"))
            elif e.type == EntryType.PEER_STATE:
                ids.update(decode_peer_state(e.data).known_peers)
    for ar in run.decoded(Kind.APPEND_ENTRY_RESPONSE, Kind.CATCHUP_RESPONSE):
        ids.add(ar.peer)
    ids.update(vr.candidate for vr in run.decoded(Kind.VOTE_REQUEST))
    ids.update(vr.peer for vr in run.decoded(Kind.VOTE_RESPONSE))
    ids.update(m.payload.decode("latin-1") for m in run.of(Kind.REMOVE_PEER_PROPOSAL))
    return ids


def test_every_peer_id_is_a_node_of_the_cluster(run: Run) -> None:
    # A node id is getHash(server name), the same for every group the server is in.
    assert run.node_ids == {name: go_hash(name) for name in ("n1", "n2", "n3")}
    assert _peer_ids(run) == set(run.node_ids.values())


def test_every_kind_was_seen(run: Run) -> None:
    aes = run.decoded(Kind.APPEND_ENTRY)
    assert any(ae.entries for ae in aes), "append entries with entries"
    assert any(ae.is_heartbeat for ae in aes), "heartbeats"
    assert run.of(Kind.VOTE_REQUEST)
    assert any(vr.granted for vr in run.decoded(Kind.VOTE_RESPONSE))
    assert any(ar.success for ar in run.decoded(Kind.APPEND_ENTRY_RESPONSE))
    assert run.of(Kind.CATCHUP_APPEND_ENTRY)
    # The stepdown: the old leader names its successor, who then asks for votes.
    transfers = [
        e.data.decode()
        for m in run.of(Kind.APPEND_ENTRY)
        if m.group == run.stream_group
        for e in decode_append_entry(m.payload).entries
        if e.type == EntryType.LEADER_TRANSFER
    ]
    assert transfers == [run.node_ids[run.stream_leader]]
    candidates = {
        decode_vote_request(m.payload).candidate
        for m in run.of(Kind.VOTE_REQUEST)
        if m.group == run.stream_group
    }
    assert run.node_ids[run.stream_leader] in candidates


def test_heartbeats_are_43_bytes_and_only_catch_ups_carry_lterm(run: Run) -> None:
    for m in run.of(Kind.APPEND_ENTRY):
        ae = decode_append_entry(m.payload)
        assert ae.lterm == 0
        if ae.is_heartbeat:
            assert len(m.payload) == 43
    for ae in run.decoded(Kind.CATCHUP_APPEND_ENTRY):
        if ae.entries[0].type == EntryType.SNAPSHOT:
            # sendSnapshotToFollower: the snapshot and the peer state, no lterm.
            assert ae.lterm == 0
            assert [e.type for e in ae.entries] == [EntryType.SNAPSHOT, EntryType.PEER_STATE]
        else:
            # The leader's term when the catch-up began, re-encoded onto every stored entry.
            assert ae.lterm >= ae.term > 0


def test_a_failed_response_starts_the_catch_up(run: Run) -> None:
    """The follower answers `success: false` with its catch-up inbox as the reply subject, and
    the catch-up entries go to that inbox."""
    inboxes = {m.reply for m in run.of(Kind.APPEND_ENTRY_RESPONSE) if m.reply}
    failed = [
        decode_append_entry_response(m.payload)
        for m in run.of(Kind.APPEND_ENTRY_RESPONSE)
        if m.reply
    ]
    assert failed and not any(ar.success for ar in failed)
    # The restarted node, and maybe a node that joined the meta group late at start-up.
    assert run.node_ids[run.killed] in {ar.peer for ar in failed}
    assert {m.subject for m in run.of(Kind.CATCHUP_APPEND_ENTRY)} <= inboxes


def test_votes_answer_on_the_candidates_inbox(run: Run) -> None:
    replies = {m.reply for m in run.of(Kind.VOTE_REQUEST)}
    answered = [m for m in run.of(Kind.VOTE_RESPONSE) if m.subject in replies]
    assert answered
    for m in answered:
        request = next(
            decode_vote_request(r.payload)
            for r in run.of(Kind.VOTE_REQUEST)
            if r.reply == m.subject
        )
        vote = decode_vote_response(m.payload)
        assert vote.peer != request.candidate  # a candidate votes for itself without a message


def test_no_other_account_sees_nrg(run: Run) -> None:
    assert run.messages
    assert run.other_account_saw == 0


# -- the files -------------------------------------------------------------------------------


def test_peers_idx_names_the_three_nodes(run: Run) -> None:
    for node, groups in run.files.items():
        for group, files in groups.items():
            buf = files["peers.idx"]
            ps = decode_peer_state(buf)
            assert encode_peer_state(ps) == buf, (node, group)
            assert sorted(ps.known_peers) == sorted(run.node_ids.values()), (node, group)
            assert ps.cluster_size == 3
            assert ps.domain_ext == ExtensionState.UNDETERMINED


def test_tav_idx_holds_the_term_and_vote(run: Run) -> None:
    ids = set(run.node_ids.values())
    for node, groups in run.files.items():
        for group, files in groups.items():
            buf = files["tav.idx"]
            term, vote = decode_term_vote(buf)
            assert encode_term_vote(term, vote) == buf, (node, group)
            assert term == run.max_term(group), (node, group)
            assert vote in ids | {NO_PEER}, (node, group)


def test_each_leader_voted_for_itself(run: Run) -> None:
    leaders = {
        META_GROUP: run.meta_leader,
        run.stream_group: run.stream_leader,
        run.consumer_group: run.consumer_leader,
    }
    for group, name in leaders.items():
        leader_id = run.node_ids[name]
        assert run.leader_of(group) == leader_id, group
        assert decode_term_vote(run.files[name][group]["tav.idx"]) == (
            run.max_term(group),
            leader_id,
        )
