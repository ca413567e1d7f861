"""Placement and the meta leader's assignments (jetstream/cluster/placement.py): table-driven
tests of nats-server's selectPeerGroup rules, the shapes of group names and sync subjects, the
assignment JSON, and a differential test against a real 3-node nats-server cluster whose meta
entries are read off `$NRG.AE._meta_`."""

from __future__ import annotations

import asyncio
import json
import random
import re
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import nats
import nats.errors
import pytest

from pynatsd.gofmt import parse_go_time
from pynatsd.jetstream.cluster.assignments import MetaOp, decode_entry
from pynatsd.jetstream.cluster.placement import (
    GROUP_NAME_PATTERN,
    SYNC_SUBJECT_PATTERN,
    PeerCandidate,
    PeerLoad,
    PlacementLimits,
    PlacementSpec,
    SelectPeerError,
    client_info_for_proposal,
    consumer_assignment,
    consumer_placement_error,
    consumer_replicas,
    create_consumer_name,
    create_group_for_consumer,
    create_group_for_stream,
    group_name_for_consumer,
    group_name_for_stream,
    preferred_peer,
    raft_group,
    select_peer_group,
    stream_assignment,
    stream_placement_error,
    sync_subject_for_stream,
)
from pynatsd.jetstream.util import go_hash
from pynatsd.raft.wire import EntryType, decode_append_entry
from support.cluster import GO, ProcessCluster, _http_json

GiB = 1 << 30


def peer(node: str, **kw: Any) -> PeerCandidate:
    """A selectable online peer in cluster C1 with 10 GiB of each storage, unless told."""
    base: dict[str, Any] = {"cluster": "C1", "max_memory": 10 * GiB, "max_storage": 10 * GiB}
    return PeerCandidate(id=node, name=node, **(base | kw))


THREE = [peer("A"), peer("B"), peer("C")]


def outcomes(select: Callable[[random.Random], Any], tries: int = 200) -> set[Any]:
    """Every result `select` gives over `tries` seeded random sources."""
    return {select(random.Random(seed)) for seed in range(tries)}


def fixed_nuid(value: str = "n1") -> Callable[[], str]:
    return lambda: value


# --- names -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("make", "peers", "storage", "expected"),
    [
        (group_name_for_stream, ["a", "b", "c"], "file", "S-R3F-"),
        (group_name_for_stream, ["a"], "memory", "S-R1M-"),
        (group_name_for_consumer, ["a", "b", "c", "d", "e"], "file", "C-R5F-"),
        (group_name_for_consumer, ["a"], "memory", "C-R1M-"),
    ],
)
def test_group_names_are_prefix_peers_storage_and_the_hash_of_a_nuid(
    make: Callable[..., str], peers: list[str], storage: str, expected: str
) -> None:
    # getHash("n1") is the node ID of a server named n1 (docs/jetstream-cluster.md §1).
    assert make(peers, storage, fixed_nuid("n1")) == expected + "fjFyEjc1"
    fresh = make(peers, storage)
    assert GROUP_NAME_PATTERN.match(fresh) and fresh.startswith(expected)
    assert len({make(peers, storage) for _ in range(50)}) == 50


def test_group_name_refuses_an_unknown_storage() -> None:
    with pytest.raises(ValueError):
        group_name_for_stream(["a"], "disk")


def test_consumer_name_is_the_hash_of_a_nuid() -> None:
    assert create_consumer_name(fixed_nuid("n2")) == "44jzkV9D" == go_hash("n2")


class FixedBits(random.Random):
    def __init__(self, value: int) -> None:
        super().__init__(0)
        self.value = value

    def getrandbits(self, k: int) -> int:
        assert k == 63
        return self.value


@pytest.mark.parametrize(
    ("value", "suffix"),
    [(0, "00000000"), (61, "z0000000"), (62, "01000000"), (62**8 + 1, "10000000")],
)
def test_sync_subject_is_eight_base62_digits_of_an_int63_low_first(value: int, suffix: str) -> None:
    assert sync_subject_for_stream(FixedBits(value)) == "$JSC.SYNC." + suffix
    assert SYNC_SUBJECT_PATTERN.match(sync_subject_for_stream())


# --- selectPeerGroup ---------------------------------------------------------------------------

NO_PEERS = "no suitable peers for placement"

# (r, cluster, spec, candidates, limits, expected error text or None for success)
SELECTION: list[tuple[str, int, str, PlacementSpec, list[PeerCandidate], PlacementLimits, str]] = [
    ("replicas > peers", 5, "C1", PlacementSpec(replicas=5), THREE, PlacementLimits(), NO_PEERS),
    ("other cluster", 1, "C2", PlacementSpec(), THREE, PlacementLimits(), NO_PEERS),
    (
        "no cluster",
        1,
        "",
        PlacementSpec(),
        THREE,
        PlacementLimits(),
        NO_PEERS + ", miscellaneous issue",
    ),
    (
        "no meta peers at all",
        1,
        "C1",
        PlacementSpec(),
        [],
        PlacementLimits(),
        NO_PEERS + ", jetstream not enabled in cluster",
    ),
    (
        "unknown to nodeToInfo",
        3,
        "C1",
        PlacementSpec(replicas=3),
        [*THREE[:2], PeerCandidate("C", known=False)],
        PlacementLimits(),
        NO_PEERS + ", miscellaneous issue",
    ),
    (
        "no STATSZ yet",
        3,
        "C1",
        PlacementSpec(replicas=3),
        [*THREE[:2], peer("C", selectable=False)],
        PlacementLimits(),
        NO_PEERS + ", peer offline",
    ),
    (
        "two of three offline: no quorum",
        3,
        "C1",
        PlacementSpec(replicas=3),
        [peer("A"), peer("B", offline=True), peer("C", offline=True)],
        PlacementLimits(),
        NO_PEERS + ", peer offline",
    ),
    (
        "!jetstream server tag",
        3,
        "C1",
        PlacementSpec(replicas=3),
        [*THREE[:2], peer("C", tags=("!jetstream",))],
        PlacementLimits(),
        NO_PEERS + ", exclude tag set",
    ),
    (
        "tag not matched",
        1,
        "C1",
        PlacementSpec(tags=("ssd", "fast")),
        [peer("A", tags=("fast",)), peer("B")],
        PlacementLimits(),
        NO_PEERS + ", tags not matched ['ssd']",  # the first tag a peer fails is named
    ),
    (
        "tag excluded",
        1,
        "C1",
        PlacementSpec(tags=("!hdd",)),
        [peer("A", tags=("hdd",))],
        PlacementLimits(),
        NO_PEERS + ", tags excluded ['hdd']",
    ),
    (
        "tags are case-sensitive",
        1,
        "C1",
        PlacementSpec(tags=("SSD",)),
        [peer("A", tags=("ssd",))],
        PlacementLimits(),
        NO_PEERS + ", tags not matched ['SSD']",
    ),
    (
        "max_bytes above what is free",
        1,
        "C1",
        PlacementSpec(max_bytes=10 * GiB, storage="memory"),
        [peer("A", memory=1), peer("B", reserved_memory=GiB)],
        PlacementLimits(),
        NO_PEERS + ", insufficient storage",
    ),
    (
        "over the HA asset limit",
        1,
        "C1",
        PlacementSpec(),
        [peer("A", ha_assets=3)],
        PlacementLimits(max_ha_assets=2),
        NO_PEERS + ", miscellaneous issue",
    ),
    (
        "unique tag taken",
        2,
        "C1",
        PlacementSpec(replicas=2),
        [peer("A", tags=("az:1",)), peer("B", tags=("az:1",))],
        PlacementLimits(unique_tag="az:"),
        NO_PEERS + ", server tag not unique",
    ),
    (
        "unique tag missing",
        1,
        "C1",
        PlacementSpec(),
        [peer("A")],
        PlacementLimits(unique_tag="az:"),
        NO_PEERS + ", server tag not unique",
    ),
    (
        "every reason in nats-server's order",
        9,
        "C1",
        PlacementSpec(replicas=9, max_bytes=GiB, tags=("ssd", "!hdd")),
        [
            PeerCandidate("U", known=False),
            peer("A", selectable=False),
            peer("B", tags=("!jetstream",)),
            peer("C", tags=("ssd",), max_storage=1),
            peer("D", tags=("ssd", "az:1")),
            peer("E", tags=("ssd", "az:1")),
            peer("F", tags=("ssd", "hdd")),
            peer("G"),
        ],
        PlacementLimits(unique_tag="az:"),
        NO_PEERS
        + ", peer offline, exclude tag set, insufficient storage, server tag not unique"
        + ", miscellaneous issue, tags not matched ['ssd'], tags excluded ['hdd']",
    ),
    ("R3 on three", 3, "C1", PlacementSpec(replicas=3), THREE, PlacementLimits(), ""),
    (
        "one offline of three still has a quorum",
        3,
        "C1",
        PlacementSpec(replicas=3),
        [peer("A"), peer("B"), peer("C", offline=True)],
        PlacementLimits(),
        "",
    ),
    (
        "unique tag off when the placement names it",
        2,
        "C1",
        PlacementSpec(replicas=2, tags=("az:1",)),
        [peer("A", tags=("az:1",)), peer("B", tags=("az:1",))],
        PlacementLimits(unique_tag="az:"),
        "",
    ),
]


@pytest.mark.parametrize(
    ("r", "cluster", "spec", "candidates", "limits", "error"),
    [row[1:] for row in SELECTION],
    ids=[row[0] for row in SELECTION],
)
def test_select_peer_group(
    r: int,
    cluster: str,
    spec: PlacementSpec,
    candidates: list[PeerCandidate],
    limits: PlacementLimits,
    error: str,
) -> None:
    for seed in range(20):  # the same answer whatever the shuffle
        rng = random.Random(seed)
        if error:
            with pytest.raises(SelectPeerError) as e:
                select_peer_group(r, cluster, spec, candidates, limits=limits, rng=rng)
            assert str(e.value) == error
        else:
            peers = select_peer_group(r, cluster, spec, candidates, limits=limits, rng=rng)
            assert len(peers) == r == len(set(peers))


def test_order_is_most_available_then_fewest_streams_with_offline_last() -> None:
    candidates = [
        peer("small", max_storage=GiB),
        peer("busy"),
        peer("idle"),
        peer("down", offline=True, max_storage=100 * GiB),
    ]
    load = PeerLoad(streams={"busy": 4, "idle": 1})
    results = outcomes(
        lambda rng: tuple(
            select_peer_group(4, "C1", PlacementSpec(), candidates, load=load, rng=rng)
        )
    )
    assert results == {("idle", "busy", "small", "down")}


def test_replicated_streams_go_to_the_peers_with_fewest_ha_assets_first() -> None:
    load = PeerLoad.of_groups([["A", "B"], ["A"], ["C"]])
    assert load.streams == {"A": 2, "B": 1, "C": 1} and load.ha == {"A": 1, "B": 1}
    candidates = [peer("A", max_storage=20 * GiB), peer("B"), peer("C")]
    r1 = outcomes(
        lambda rng: tuple(
            select_peer_group(1, "C1", PlacementSpec(), candidates, load=load, rng=rng)
        )
    )
    assert r1 == {("A",)}  # R1: the most room wins
    spec = PlacementSpec(replicas=2)
    r2 = outcomes(
        lambda rng: tuple(select_peer_group(2, "C1", spec, candidates, load=load, rng=rng))
    )
    assert r2 == {("C", "A")}  # no HA asset on C; then A (more room) before B


def test_ties_are_left_to_the_shuffle() -> None:
    assert outcomes(
        lambda rng: tuple(select_peer_group(1, "C1", PlacementSpec(), THREE, rng=rng))
    ) == {
        ("A",),
        ("B",),
        ("C",),
    }


def test_existing_peers_come_first_and_are_not_picked_again() -> None:
    spec = PlacementSpec(replicas=3)
    assert select_peer_group(2, "C1", spec, THREE, existing=["C", "B", "A"]) == ["C", "B"]
    got = outcomes(
        lambda rng: tuple(select_peer_group(3, "C1", spec, THREE, existing=["B"], rng=rng))
    )
    assert got == {("B", "A", "C"), ("B", "C", "A")}
    got = outcomes(
        lambda rng: tuple(
            select_peer_group(2, "C1", spec, THREE, existing=["B"], ignore=["A"], rng=rng)
        )
    )
    assert got == {("B", "C")}


def test_an_existing_peer_holds_its_unique_tag() -> None:
    candidates = [peer("A", tags=("az:1",)), peer("B", tags=("az:1",)), peer("C", tags=("az:2",))]
    limits = PlacementLimits(unique_tag="az:")
    got = outcomes(
        lambda rng: tuple(
            select_peer_group(
                2,
                "C1",
                PlacementSpec(replicas=2),
                candidates,
                existing=["A"],
                limits=limits,
                rng=rng,
            )
        )
    )
    assert got == {("A", "C")}


# --- createGroupForStream, setPreferred -------------------------------------------------------


def test_stream_group_has_a_name_the_peers_the_cluster_and_a_preferred_online_peer() -> None:
    candidates = [peer("A"), peer("B"), peer("C", offline=True)]
    group = create_group_for_stream(
        {"cluster": "C1"},
        PlacementSpec(replicas=3, storage="memory"),
        candidates,
        nuid=fixed_nuid(),
    )
    assert list(group) == ["name", "peers", "store", "cluster", "preferred"]
    assert group["name"] == "S-R3M-fjFyEjc1" and group["store"] == "memory"
    assert group["peers"][2] == "C" and group["cluster"] == "C1"
    preferred = outcomes(lambda rng: preferred_peer(group["peers"], candidates, rng))
    assert preferred == {"A", "B"}


@pytest.mark.parametrize(
    ("peers", "candidates", "expected"),
    [
        (["A"], [peer("A", offline=True)], {"A"}),
        (["A", "B", "C"], [peer("A", offline=True), peer("B"), peer("C", offline=True)], {"B"}),
        (["A", "B"], [peer("A", offline=True), peer("B", offline=True)], {"A", "B"}),
        (["A", "B"], [PeerCandidate("A", known=False), peer("B", offline=True)], {"A", "B"}),
        ([], [], {""}),
    ],
)
def test_preferred_peer(
    peers: list[str], candidates: list[PeerCandidate], expected: set[str]
) -> None:
    assert outcomes(lambda rng: preferred_peer(peers, candidates, rng)) == expected


def test_a_stream_tries_the_requesters_cluster_then_its_alternates_and_merges_the_errors() -> None:
    candidates = [
        peer("A", cluster="C1", offline=True),
        peer("B", cluster="C2"),
        peer("C", cluster="C3"),
    ]
    client = {"cluster": "C1", "alts": ["C2", "C3"]}
    spec = PlacementSpec(tags=("x",))
    with pytest.raises(SelectPeerError) as e:
        create_group_for_stream(client, spec, candidates)
    assert str(e.value) == NO_PEERS + ", tags not matched ['x']"
    group = create_group_for_stream(client, PlacementSpec(), candidates)
    assert group["peers"] == ["B"] and group["cluster"] == "C2"
    group = create_group_for_stream(client, PlacementSpec(cluster="C3"), candidates)
    assert group["peers"] == ["C"] and group["cluster"] == "C3"
    with pytest.raises(SelectPeerError):
        create_group_for_stream({"cluster": "C1"}, PlacementSpec(), candidates)  # no alternates


def test_placement_errors_are_nats_servers_api_errors() -> None:
    err = SelectPeerError(offline=True)
    assert stream_placement_error(err).to_json() == {
        "code": 400,
        "err_code": 10005,
        "description": "no suitable peers for placement, peer offline",
    }
    assert consumer_placement_error().to_json() == {
        "code": 503,
        "err_code": 10023,
        "description": "insufficient resources",
    }


def test_placement_spec_from_a_stream_config() -> None:
    config = {
        "num_replicas": 3,
        "storage": "memory",
        "max_bytes": -1,
        "placement": {"cluster": "X", "tags": ["a"]},
    }
    assert PlacementSpec.from_config(config) == PlacementSpec(3, "memory", -1, "X", ("a",))
    assert PlacementSpec.from_config({"name": "S"}) == PlacementSpec()


def test_peer_candidate_from_statsz() -> None:
    msg = {
        "server": {"name": "n1", "cluster": "C1", "tags": ["az:1"]},
        "statsz": {
            "jetstream": {
                "config": {"max_memory": 100, "max_storage": 1000},
                "stats": {
                    "memory": 10,
                    "storage": 5,
                    "reserved_memory": 20,
                    "reserved_storage": 1,
                    "ha_assets": 2,
                },
            }
        },
    }
    c = PeerCandidate.from_statsz(msg)
    assert (c.id, c.name, c.cluster, c.tags, c.selectable) == (
        "fjFyEjc1",
        "n1",
        "C1",
        ("az:1",),
        True,
    )
    assert (c.available("memory"), c.available("file"), c.ha_assets) == (80, 995, 2)
    assert not PeerCandidate.from_statsz({"server": {"name": "n1"}, "statsz": {}}).selectable


# --- createGroupForConsumer --------------------------------------------------------------------


def stream_sa(
    peers: list[str], storage: str = "file", replicas: int = 0, **config: Any
) -> dict[str, Any]:
    stream = {"name": "S", "storage": storage, "num_replicas": replicas or len(peers), **config}
    return {"stream": stream, "group": raft_group("S-R3F-xxxxxxxx", peers, storage, "C1", peers[0])}


@pytest.mark.parametrize(
    ("config", "stream_config", "expected"),
    [
        ({"durable_name": "D"}, {"num_replicas": 3}, 3),
        ({}, {"num_replicas": 3}, 1),  # old-style ephemeral on a limits stream
        ({}, {"num_replicas": 3, "retention": "interest"}, 3),
        ({"num_replicas": 2}, {"num_replicas": 3}, 2),
        ({"num_replicas": 5, "durable_name": "D"}, {"num_replicas": 3}, 3),
        ({"num_replicas": 5}, {"num_replicas": 3}, 3),
    ],
)
def test_consumer_replicas(
    config: dict[str, Any], stream_config: dict[str, Any], expected: int
) -> None:
    assert consumer_replicas(config, stream_config) == expected


def test_consumer_group_takes_the_streams_peers_in_order_or_a_random_online_subset() -> None:
    sa = stream_sa(["A", "B", "C"])
    group = create_group_for_consumer({"durable_name": "D"}, sa, THREE, nuid=fixed_nuid())
    assert group["name"] == "C-R3F-fjFyEjc1" and group["peers"] == ["A", "B", "C"]
    assert list(group) == ["name", "peers", "store", "cluster", "preferred"]
    candidates = [peer("A"), peer("B", offline=True), peer("C")]
    picked = outcomes(
        lambda rng: tuple(create_group_for_consumer({}, sa, candidates, rng=rng)["peers"])
    )
    assert picked == {("A",), ("C",)}
    mem = create_group_for_consumer({"mem_storage": True}, sa, THREE)
    assert mem["store"] == "memory" and mem["name"].startswith("C-R1M-")


@pytest.mark.parametrize(
    ("config", "candidates", "limits", "error"),
    [
        ({"num_replicas": 4}, THREE, PlacementLimits(), NO_PEERS + ", miscellaneous issue"),
        (
            {"durable_name": "D"},
            [peer("A"), peer("B", offline=True), peer("C", offline=True)],
            PlacementLimits(),
            NO_PEERS + ", peer offline",
        ),
        (
            {"durable_name": "D", "num_replicas": 2},
            [peer("A"), peer("B", offline=True), peer("C", offline=True)],
            PlacementLimits(),
            NO_PEERS + ", peer offline",
        ),
        (
            {"durable_name": "D"},
            [peer("A"), peer("B", ha_assets=5), peer("C")],
            PlacementLimits(max_ha_assets=4),
            NO_PEERS + ", miscellaneous issue",
        ),
    ],
)
def test_consumer_group_errors(
    config: dict[str, Any], candidates: list[PeerCandidate], limits: PlacementLimits, error: str
) -> None:
    with pytest.raises(SelectPeerError) as e:
        create_group_for_consumer(config, stream_sa(["A", "B", "C"]), candidates, limits=limits)
    assert str(e.value) == error


# --- assignments -------------------------------------------------------------------------------

CLIENT = {
    "reply": "r",
    "jwt": "eyJ...",
    "issuer_key": "AXXX",
    "acc": "APP",
    "start": "2026-01-02T03:04:05.5Z",
    "host": "127.0.0.1",
    "id": 7,
    "user": "",
    "rtt": 0,
    "cluster": "C1",
    "alts": [],
    "kind": "Client",
    "unknown": 1,
}


def test_client_info_for_proposal_drops_credentials_and_empty_keys_in_go_order() -> None:
    proposed = client_info_for_proposal(CLIENT)
    assert proposed is not None
    assert list(proposed) == ["start", "host", "id", "acc", "cluster", "kind", "reply"]
    assert client_info_for_proposal(None) is None


def test_stream_assignment_json() -> None:
    group = raft_group("S-R1F-fjFyEjc1", ["A"], "file", "C1", "A")
    sa = stream_assignment(
        CLIENT, 1_700_000_000_123_456_000, {"name": "S"}, group, "$JSC.SYNC.x", "subj", "rep"
    )
    assert list(sa) == ["client", "created", "stream", "group", "sync", "subject", "reply"]
    assert sa["created"] == "2023-11-14T22:13:20.123456Z"
    assert "jwt" not in sa["client"]
    bare = stream_assignment(
        None, 1, {"name": "S"}, raft_group("n", ["A"], "memory"), "$JSC.SYNC.x"
    )
    assert list(bare) == ["created", "stream", "group", "sync"]
    assert list(bare["group"]) == ["name", "peers", "store"]


def test_consumer_assignment_json() -> None:
    group = raft_group("C-R1F-fjFyEjc1", ["A"], "file", "C1", "A")
    ca = consumer_assignment(CLIENT, 5, "D", "S", {"durable_name": "D"}, group, "subj", "rep")
    assert list(ca) == [
        "client",
        "created",
        "name",
        "stream",
        "consumer",
        "group",
        "subject",
        "reply",
    ]
    assert ca["created"] == "1970-01-01T00:00:00.000000005Z"
    assert list(consumer_assignment(None, 5, "D", "S", {}, group)) == [
        "created",
        "name",
        "stream",
        "consumer",
        "group",
    ]


# --- against nats-server -----------------------------------------------------------------------

SYSTEM_USERS = """
accounts {
  SYS { users = [{user: sys, password: sys}] }
  APP { jetstream: enabled, users = [{user: app, password: app}] }
}
system_account: SYS
no_auth_user: app
"""
# The service-import reply nats-server gives a request crossing into $SYS (accounts.go).
SERVICE_REPLY = re.compile(r"^_R_\.[0-9A-Za-z]{6}\.[0-9A-Za-z]{6}$")
STREAMS = [("F1", "file", 1), ("F3", "file", 3), ("M1", "memory", 1), ("M3", "memory", 3)]
# Placement failures nats-server answers the same way whatever the shuffle; node i has server
# tags az:<i%2> and t<i>.
PLACEMENT_ERRORS: list[dict[str, Any]] = [
    {"name": "R5", "num_replicas": 5},
    {"name": "TAG", "num_replicas": 3, "placement": {"tags": ["foo", "bar"]}},
    {"name": "NOT1", "num_replicas": 3, "placement": {"tags": ["!t1"]}},
    {"name": "AZ0", "num_replicas": 3, "placement": {"tags": ["az:0"]}},
    {"name": "ELSEWHERE", "placement": {"cluster": "nope"}},
    {"name": "HUGE", "num_replicas": 3, "max_bytes": 1 << 60},
    {"name": "HUGEMEM", "storage": "memory", "max_bytes": 1 << 60},
]
DEADLINE = 30.0


def test_assignments_and_placement_match_nats_server(tmp_path: Path) -> None:
    """Streams and consumers created on a 3-node nats-server cluster: every meta entry its
    leader proposes is what our builders make from the same inputs (key for key, in order),
    its peers are a selection ours could make from the same peers, and its placement errors
    are ours."""
    node_config = {
        i: f'jetstream {{ store_dir: "{tmp_path}/js{i}" }}\nserver_tags: ["az:{i % 2}", "t{i}"]\n'
        for i in range(3)
    }
    cluster = ProcessCluster(
        [GO, GO, GO], tmp_path, node_config=node_config, extra_config=SYSTEM_USERS
    )
    cluster.start()
    with cluster:
        entries, errors = asyncio.run(asyncio.wait_for(drive(cluster), DEADLINE))
        candidates = [candidate(cluster, i) for i in range(3)]

    streams = [a for op, a in entries if op is MetaOp.ASSIGN_STREAM]
    consumers = [a for op, a in entries if op is MetaOp.ASSIGN_CONSUMER]
    assert [s["stream"]["name"] for s in streams] == [name for name, _, _ in STREAMS]
    assert [c["stream"] for c in consumers] == ["F3", "M3"]
    for index, sa in enumerate(streams):
        check_stream_assignment(sa, candidates, PeerLoad.of_assignments(streams[:index]))
    by_name = {sa["stream"]["name"]: sa for sa in streams}
    for ca in consumers:
        check_consumer_assignment(ca, by_name[ca["stream"]], candidates)

    client = streams[0]["client"]
    for config, answer in zip(PLACEMENT_ERRORS, errors, strict=True):
        spec = PlacementSpec.from_config(config)
        with pytest.raises(SelectPeerError) as e:
            create_group_for_stream(client, spec, candidates)
        assert answer == {
            "type": "io.nats.jetstream.api.v1.stream_create_response",
            "error": stream_placement_error(e.value).to_json(),
        }, config


def check_stream_assignment(
    sa: dict[str, Any], candidates: list[PeerCandidate], load: PeerLoad
) -> None:
    group, config = sa["group"], sa["stream"]
    assert GROUP_NAME_PATTERN.match(group["name"]) and SYNC_SUBJECT_PATTERN.match(sa["sync"])
    assert (
        SERVICE_REPLY.match(sa["reply"])
        and sa["subject"] == "$JS.API.STREAM.CREATE." + config["name"]
    )
    created, _ = parse_go_time(sa["created"])
    same = stream_assignment(
        sa["client"],
        created,
        config,
        raft_group(
            group["name"], group["peers"], group["store"], group["cluster"], group["preferred"]
        ),
        sa["sync"],
        sa["subject"],
        sa["reply"],
    )
    assert json.dumps(same) == json.dumps(sa)

    spec = PlacementSpec.from_config(config)
    ours = create_group_for_stream(sa["client"], spec, candidates, load=load, nuid=fixed_nuid())
    fresh = stream_assignment(
        sa["client"],
        time.time_ns(),
        config,
        ours,
        sync_subject_for_stream(),
        sa["subject"],
        sa["reply"],
    )
    assert shape(fresh) == shape(sa)
    assert ours["name"][:-8] == group["name"][:-8]

    def select(rng: random.Random) -> tuple[str, ...]:
        return tuple(select_peer_group(spec.replicas, "C1", spec, candidates, load=load, rng=rng))

    assert tuple(group["peers"]) in outcomes(select), (group, candidates, load)
    assert group["preferred"] in group["peers"]


def check_consumer_assignment(
    ca: dict[str, Any], sa: dict[str, Any], candidates: list[PeerCandidate]
) -> None:
    group, config = ca["group"], ca["consumer"]
    assert GROUP_NAME_PATTERN.match(group["name"]) and ca["name"] == config.get("name", ca["name"])
    created, _ = parse_go_time(ca["created"])
    same = consumer_assignment(
        ca["client"],
        created,
        ca["name"],
        ca["stream"],
        config,
        raft_group(
            group["name"], group["peers"], group["store"], group["cluster"], group["preferred"]
        ),
        ca["subject"],
        ca["reply"],
    )
    assert json.dumps(same) == json.dumps(ca)

    ours = create_group_for_consumer(config, sa, candidates)
    fresh = consumer_assignment(
        ca["client"],
        time.time_ns(),
        create_consumer_name(),
        sa["stream"]["name"],
        config,
        ours,
        ca["subject"],
        ca["reply"],
    )
    assert shape(fresh) == shape(ca)
    assert ours["name"][:-8] == group["name"][:-8]
    assert tuple(group["peers"]) in outcomes(
        lambda rng: tuple(create_group_for_consumer(config, sa, candidates, rng=rng)["peers"])
    )
    assert group["preferred"] in group["peers"]


def shape(value: Any) -> Any:
    """Keys in order and the types of the values, recursively; lists by their first element."""
    if isinstance(value, dict):
        return [(k, shape(v)) for k, v in value.items()]
    if isinstance(value, list):
        return ["list", shape(value[0]) if value else None]
    return type(value).__name__


def candidate(cluster: ProcessCluster, index: int) -> PeerCandidate:
    """A node as the meta leader's nodeToInfo has it: config from its /jsz (usage is zero: no
    stream holds a message)."""
    jsz = _http_json(cluster.nodes[index].http_port, "/jsz")
    name = cluster.nodes[index].name
    return PeerCandidate(
        id=go_hash(name),
        name=name,
        cluster=cluster.cluster_name,
        tags=(f"az:{index % 2}", f"t{index}"),
        max_memory=jsz["config"]["max_memory"],
        max_storage=jsz["config"]["max_storage"],
        memory=jsz["memory"],
        storage=jsz["storage"],
        reserved_memory=jsz["reserved_memory"],
        reserved_storage=jsz["reserved_storage"],
    )


async def drive(
    cluster: ProcessCluster,
) -> tuple[list[tuple[MetaOp, dict[str, Any]]], list[dict[str, Any]]]:
    """Listen to the meta group's append entries as the system user while the app user creates
    the streams, two consumers and the failing placements; the decoded assignments (each once)
    and the error answers."""
    entries: list[tuple[MetaOp, dict[str, Any]]] = []
    seen: set[bytes] = set()

    async def on_append_entry(msg: Any) -> None:
        for entry in decode_append_entry(msg.data).entries:
            if entry.type == EntryType.NORMAL and entry.data not in seen:
                seen.add(entry.data)
                entries.append(decode_entry(entry.data))

    sys = await nats.connect(cluster.nodes[0].url, user="sys", password="sys")
    app = await nats.connect(cluster.nodes[1].url)
    try:
        await sys.subscribe("$NRG.AE._meta_", cb=on_append_entry)
        await sys.flush()
        await wait_for_meta_leader(app)
        for name, storage, replicas in STREAMS:
            config = {
                "name": name,
                "subjects": [f"{name.lower()}.>"],
                "storage": storage,
                "num_replicas": replicas,
            }
            answer = await api(app, f"STREAM.CREATE.{name}", config)
            assert "error" not in answer, answer
        durable = {"stream_name": "F3", "config": {"durable_name": "D", "ack_policy": "explicit"}}
        assert "error" not in await api(app, "CONSUMER.CREATE.F3.D", durable)
        ephemeral = {"stream_name": "M3", "config": {"ack_policy": "none", "mem_storage": True}}
        assert "error" not in await api(app, "CONSUMER.CREATE.M3", ephemeral)
        errors = [await api(app, f"STREAM.CREATE.{c['name']}", c) for c in PLACEMENT_ERRORS]
        await sys.flush()
    finally:
        await app.close()
        await sys.close()
    return entries, errors


async def wait_for_meta_leader(nc: Any) -> None:
    """Until $JS.API.INFO answers without error and every peer is selectable: an R3 placement
    fails with `peer offline` until the leader has every server's STATSZ."""
    while True:
        try:
            info = await api(nc, "INFO", None, timeout=1)
        except (TimeoutError, nats.errors.Error):
            await asyncio.sleep(0.2)
            continue
        if "error" in info:
            await asyncio.sleep(0.2)
            continue
        probe = await api(
            nc, "STREAM.CREATE.PROBE", {"name": "PROBE", "num_replicas": 3, "max_bytes": 1 << 62}
        )
        if "peer offline" not in probe.get("error", {}).get("description", ""):
            return
        await asyncio.sleep(0.2)


async def api(
    nc: Any, suffix: str, body: dict[str, Any] | None, timeout: float = 5
) -> dict[str, Any]:
    data = b"" if body is None else json.dumps(body).encode()
    msg = await nc.request(f"$JS.API.{suffix}", data, timeout=timeout)
    answer = json.loads(msg.data)
    assert isinstance(answer, dict)
    return answer
