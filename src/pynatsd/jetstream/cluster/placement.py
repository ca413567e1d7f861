"""Where a clustered stream or consumer lives, and the assignment the meta leader proposes for it.

nats-server's counterparts, all in `server/jetstream_cluster.go` unless noted:

- names: `groupNameForStream`, `groupNameForConsumer`, `groupName` (`S-R3F-<8>`), `syncSubject`
  (`$JSC.SYNC.<8>`), `createConsumerName` (consumer.go);
- peer selection: `selectPeerGroup` with its `selectPeerError`, `createGroupForStream`,
  `createGroupForConsumer`, `raftGroup.setPreferred`; the peers' facts are `nodeInfo`
  (server.go), filled from each server's STATSZ (`remoteServerUpdate`, events.go);
- the proposal's JSON: `streamAssignment`, `consumerAssignment`, `raftGroup` and `ClientInfo`
  (events.go) as `encodeAddStreamAssignment` / `encodeAddConsumerAssignment` write them, the
  client reduced by `forProposal`.

Pure functions and small value classes: no server, no I/O. Go's randomness (`math/rand`'s
`Shuffle`, `Int31n`, `Int63`, and `nuid.Next`) comes from an injectable `random.Random` and
NUID source, so a test can pin it.

The request's `reply` in an assignment is whatever the API request carried in `$SYS`; for a
request from another account it is the service-import reply nats-server made for it,
`_R_.<6 base-62>.<6 base-62>` (`createRespWildcard`, `newServiceReply`, accounts.go; a tracked
one ends `.<server hash>.T`). The meta leader copies it; it never makes one.
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pynatsd.jetstream.advisories import new_nuid
from pynatsd.jetstream.errors import ApiError, js_error
from pynatsd.jetstream.util import go_hash, rfc3339_ns

# A source of NUIDs (nats-server's `nuid.Next`); the hash of one names a group or an ephemeral.
NuidSource = Callable[[], str]

# Go's math/rand stands in for nothing secret here; the default source is seeded from the OS.
_RNG = random.Random()

FILE = "file"
MEMORY = "memory"
# StorageType.String()[:1]: "File", "Memory".
_STORAGE_LETTER = {FILE: "F", MEMORY: "M"}

# `<S|C>-R<peers><F|M>-<getHash(nuid)>`.
GROUP_NAME_PATTERN = re.compile(r"^[SC]-R[0-9]+[FM]-[0-9A-Za-z]{8}$")
# `$JSC.SYNC.` and 8 base-62 digits (replySuffixLen).
SYNC_SUBJECT_PATTERN = re.compile(r"^\$JSC\.SYNC\.[0-9A-Za-z]{8}$")

# The server tag that keeps a server out of every placement (jsExcludePlacement).
EXCLUDE_PLACEMENT_TAG = "!jetstream"

_DIGITS = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
_SUFFIX_LEN = 8  # replySuffixLen (events.go)


# --- names ----------------------------------------------------------------------------------------


def group_name_for_stream(peers: Sequence[str], storage: str, nuid: NuidSource = new_nuid) -> str:
    """groupNameForStream: `S-R<len(peers)><F|M>-<getHash(nuid)>`."""
    return _group_name("S", peers, storage, nuid)


def group_name_for_consumer(peers: Sequence[str], storage: str, nuid: NuidSource = new_nuid) -> str:
    """groupNameForConsumer: `C-R<len(peers)><F|M>-<getHash(nuid)>`."""
    return _group_name("C", peers, storage, nuid)


def _group_name(prefix: str, peers: Sequence[str], storage: str, nuid: NuidSource) -> str:
    return f"{prefix}-R{len(peers)}{storage_letter(storage)}-{go_hash(nuid())}"


def storage_letter(storage: str) -> str:
    """The first letter of Go's StorageType.String() for the JSON spelling `file`/`memory`."""
    try:
        return _STORAGE_LETTER[storage]
    except KeyError:
        raise ValueError(f"unknown storage type {storage!r}") from None


def create_consumer_name(nuid: NuidSource = new_nuid) -> str:
    """createConsumerName (consumer.go): an ephemeral consumer's name, getHash of a NUID."""
    return go_hash(nuid())


def sync_subject(prefix: str, rng: random.Random | None = None) -> str:
    """syncSubject: `<prefix>.` and 8 base-62 digits of a random non-negative int63, least
    significant digit first."""
    value = (rng or _RNG).getrandbits(63)
    digits = []
    for _ in range(_SUFFIX_LEN):
        value, digit = divmod(value, 62)
        digits.append(_DIGITS[digit])
    return f"{prefix}.{''.join(digits)}"


def sync_subject_for_stream(rng: random.Random | None = None) -> str:
    """syncSubjForStream: a stream's catch-up subject, `$JSC.SYNC.<8>`, made once at create."""
    return sync_subject("$JSC.SYNC", rng)


# --- what the meta leader knows of each peer ------------------------------------------------------


@dataclass(frozen=True, slots=True)
class PeerCandidate:
    """One peer of the meta group as placement sees it: its `nodeInfo` (server.go).

    `js` is not here: selectPeerGroup takes the meta group's peers and never reads it."""

    id: str  # node ID: getHash(server name)
    name: str = ""
    cluster: str = ""  # from STATSZ `server.cluster` (the gateway name when gateways are on)
    tags: tuple[str, ...] = ()  # server tags, matched exactly (jwt.TagList.Contains)
    offline: bool = False  # shut down, lame duck or silent for 150 s: sorted last
    known: bool = True  # has an entry in nodeToInfo at all (otherwise a "misc" miss)
    selectable: bool = True  # a STATSZ with a jetstream block arrived (cfg and stats set)
    max_memory: int = 0  # cfg.MaxMemory
    max_storage: int = 0  # cfg.MaxStore
    memory: int = 0  # stats.Memory, bytes used
    storage: int = 0  # stats.Store
    reserved_memory: int = 0  # stats.ReservedMemory
    reserved_storage: int = 0  # stats.ReservedStore
    ha_assets: int = 0  # stats.HAAssets (counts _meta_ too)

    @classmethod
    def from_statsz(cls, msg: Mapping[str, Any], *, offline: bool = False) -> PeerCandidate:
        """From a `$SYS.SERVER.<id>.STATSZ` body (`ServerStatsMsg`), as remoteServerUpdate
        fills nodeInfo: selectable only when `statsz.jetstream` has `config` and `stats`."""
        server = msg.get("server") or {}
        jetstream = (msg.get("statsz") or {}).get("jetstream") or {}
        config, stats = jetstream.get("config"), jetstream.get("stats")
        name = str(server.get("name", ""))
        return cls(
            id=go_hash(name),
            name=name,
            cluster=str(server.get("cluster", "")),
            tags=tuple(server.get("tags") or ()),
            offline=offline,
            selectable=config is not None and stats is not None,
            max_memory=int((config or {}).get("max_memory", 0)),
            max_storage=int((config or {}).get("max_storage", 0)),
            memory=int((stats or {}).get("memory", 0)),
            storage=int((stats or {}).get("storage", 0)),
            reserved_memory=int((stats or {}).get("reserved_memory", 0)),
            reserved_storage=int((stats or {}).get("reserved_storage", 0)),
            ha_assets=int((stats or {}).get("ha_assets", 0)),
        )

    def available(self, storage: str) -> int:
        """Bytes free for `storage`: the configured maximum less the larger of used and
        reserved, never below 0."""
        if storage == MEMORY:
            used = max(self.memory, self.reserved_memory)
            return max(self.max_memory - used, 0)
        if storage == FILE:
            used = max(self.storage, self.reserved_storage)
            return max(self.max_storage - used, 0)
        return 0


@dataclass(slots=True)
class PeerLoad:
    """How many streams, and how many replicated (R>1) streams, each peer has assigned, counted
    from the meta state at selection time (selectPeerGroup's peerStreams and peerHA)."""

    streams: dict[str, int] = field(default_factory=dict)
    ha: dict[str, int] = field(default_factory=dict)

    @classmethod
    def of_groups(cls, groups: Iterable[Sequence[str]]) -> PeerLoad:
        """From the peer lists of every supported stream assignment's group."""
        load = cls()
        for peers in groups:
            for peer in peers:
                load.streams[peer] = load.streams.get(peer, 0) + 1
                if len(peers) > 1:
                    load.ha[peer] = load.ha.get(peer, 0) + 1
        return load

    @classmethod
    def of_assignments(cls, assignments: Iterable[Mapping[str, Any]]) -> PeerLoad:
        """From stream assignments as JSON objects (their `group.peers`)."""
        return cls.of_groups(list((sa.get("group") or {}).get("peers") or ()) for sa in assignments)


@dataclass(frozen=True, slots=True)
class PlacementSpec:
    """What selectPeerGroup reads of a StreamConfig (defaults already applied)."""

    replicas: int = 1  # cfg.Replicas: above 1, peers with fewer HA assets go first
    storage: str = FILE
    max_bytes: int = 0  # cfg.MaxBytes; -1 or 0 asks for no room
    cluster: str = ""  # placement.cluster
    tags: tuple[str, ...] = ()  # placement.tags; `!tag` excludes

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> PlacementSpec:
        """From the stream config's JSON (`num_replicas`, `storage`, `max_bytes`,
        `placement`)."""
        placement = config.get("placement") or {}
        return cls(
            replicas=int(config.get("num_replicas") or 1),
            storage=str(config.get("storage") or FILE),
            max_bytes=int(config.get("max_bytes") or 0),
            cluster=str(placement.get("cluster") or ""),
            tags=tuple(placement.get("tags") or ()),
        )


@dataclass(frozen=True, slots=True)
class PlacementLimits:
    """The server options placement obeys."""

    unique_tag: str = ""  # jetstream.unique_tag (JetStreamUniqueTag)
    max_ha_assets: int = 0  # jetstream.limits.max_ha_assets (JetStreamLimits.MaxHAAssets)


# --- the error ------------------------------------------------------------------------------------


class SelectPeerError(Exception):
    """selectPeerError: why no peer set was found. Each flag records that at least one peer
    was discarded for that reason. Tag sets keep first-seen order (Go's map order is random)."""

    def __init__(
        self,
        *,
        offline: bool = False,
        exclude_tag: bool = False,
        no_storage: bool = False,
        unique_tag: bool = False,
        misc: bool = False,
        no_js_cluster: bool = False,
    ) -> None:
        super().__init__()
        self.offline = offline
        self.exclude_tag = exclude_tag  # excludeTag: the server has `!jetstream`
        self.no_storage = no_storage
        self.unique_tag = unique_tag
        self.misc = misc
        self.no_js_cluster = no_js_cluster  # noJsClust: the meta group has no peers at all
        self.missing_tags: dict[str, None] = {}  # noMatchTags
        self.excluded_tags: dict[str, None] = {}  # excludeTags

    @property
    def text(self) -> str:
        """Error(): the reasons in nats-server's fixed order."""
        parts = ["no suitable peers for placement"]
        for flag, reason in (
            (self.offline, "peer offline"),
            (self.exclude_tag, "exclude tag set"),
            (self.no_storage, "insufficient storage"),
            (self.unique_tag, "server tag not unique"),
            (self.misc, "miscellaneous issue"),
            (self.no_js_cluster, "jetstream not enabled in cluster"),
        ):
            if flag:
                parts.append(reason)
        for label, tags in (
            ("tags not matched", self.missing_tags),
            ("tags excluded", self.excluded_tags),
        ):
            if tags:
                quoted = ", ".join(f"'{t}'" for t in tags)
                parts.append(f"{label} [{quoted}]")
        return ", ".join(parts)

    def __str__(self) -> str:
        return self.text

    def accumulate(self, other: SelectPeerError | None) -> None:
        """accumulate: merge the reasons of another cluster's attempt."""
        if other is None:
            return
        self.offline |= other.offline
        self.exclude_tag |= other.exclude_tag
        self.no_storage |= other.no_storage
        self.unique_tag |= other.unique_tag
        self.misc |= other.misc
        self.no_js_cluster |= other.no_js_cluster
        self.missing_tags.update(other.missing_tags)
        self.excluded_tags.update(other.excluded_tags)


def stream_placement_error(err: SelectPeerError) -> ApiError:
    """What a stream create/update answers when placement fails: 400, 10005, the reasons
    (NewJSClusterNoPeersError)."""
    return js_error("ClusterNoPeers", err=err.text)


def consumer_placement_error() -> ApiError:
    """What a consumer create answers when its group cannot be formed (or a peer is over the HA
    asset limit): 503, 10023 `insufficient resources` (NewJSInsufficientResourcesError)."""
    return js_error("InsufficientResources")


# --- selectPeerGroup ------------------------------------------------------------------------------


@dataclass(slots=True)
class _Node:
    """selectPeerGroup's `wn`: a peer that passed every filter."""

    id: str
    available: int
    offline: bool
    ha: int
    streams: int


class _UniqueTags:
    """The unique-tag rule: each value of the `unique_tag` prefix (an availability zone, say)
    holds at most one peer of the group, and a peer without such a tag is not placeable."""

    def __init__(self, prefix: str) -> None:
        self.prefix = prefix
        self.owners: dict[str, str] = {}

    def claim(self, peer: PeerCandidate) -> bool:
        """checkUniqueTag: the peer's first tag with the prefix decides."""
        for tag in peer.tags:
            if tag.startswith(self.prefix):
                if tag in self.owners:
                    return False
                self.owners[tag] = peer.id
                return True
        return False


def select_peer_group(
    r: int,
    cluster: str,
    spec: PlacementSpec,
    candidates: Sequence[PeerCandidate],
    *,
    existing: Sequence[str] = (),
    replace_first_existing: int = 0,
    ignore: Iterable[str] = (),
    load: PeerLoad | None = None,
    limits: PlacementLimits = PlacementLimits(),
    rng: random.Random | None = None,
) -> list[str]:
    """selectPeerGroup: `r` node IDs from the meta group's peers (`candidates`) in `cluster`,
    `existing` ones first; raises SelectPeerError.

    The candidates are shuffled, then filtered (cluster, selectable, ignore/existing,
    `!jetstream`, placement tags, room for `max_bytes`, HA asset limit, unique tag). Offline
    survivors count as nodes but sort last and do not count towards the quorum (`r/2+1`,
    existing peers included) that must be online. The rest are sorted by most available
    storage, then fewest streams; for a replicated stream (`spec.replicas > 1`) a stable
    re-sort puts fewest HA assets first (both counts from `load`, the assignments, not from
    STATSZ)."""
    if not cluster:
        raise SelectPeerError(misc=True)
    tags = [(t.removeprefix("!"), t.startswith("!")) for t in spec.tags]
    unique_prefix = limits.unique_tag
    if unique_prefix and any(tag.startswith(unique_prefix) for tag, _ in tags):
        unique_prefix = ""  # the placement names such a tag itself: no uniqueness check
    unique = _UniqueTags(unique_prefix)
    by_id = {c.id: c for c in candidates}

    if existing:
        if len(existing) >= r:
            return list(existing[:r])
        if unique_prefix:
            for i, peer_id in enumerate(existing):
                known = by_id.get(peer_id)
                if known is not None and known.known and i >= replace_first_existing:
                    unique.claim(known)  # taken, though not required of a sitting member
    skip = set(existing) | set(ignore)
    load = load or PeerLoad()

    err = SelectPeerError()
    nodes: list[_Node] = []
    online = 0
    peers = list(candidates)
    (rng or _RNG).shuffle(peers)
    for peer in peers:
        if not peer.known:
            err.misc = True
            continue
        if peer.cluster != cluster:
            continue
        if not peer.selectable:
            err.offline = True
            continue
        if peer.id in skip:
            continue
        if not _tags_allow(peer, tags, err):
            continue
        available = peer.available(spec.storage)
        if spec.max_bytes > 0 and spec.max_bytes > available:
            err.no_storage = True
            continue
        if limits.max_ha_assets > 0 and peer.ha_assets > limits.max_ha_assets:
            err.misc = True  # `>`: ha_assets counts _meta_
            continue
        if unique_prefix and not unique.claim(peer):
            err.unique_tag = True
            continue
        ha, streams = load.ha.get(peer.id, 0), load.streams.get(peer.id, 0)
        nodes.append(_Node(peer.id, available, peer.offline, ha, streams))
        online += not peer.offline

    missing_nodes = len(nodes) < r - len(existing)
    missing_quorum = online + len(existing) < r // 2 + 1
    if missing_nodes or missing_quorum:
        if not peers:
            err.no_js_cluster = True
        elif missing_quorum and not missing_nodes:
            err.offline = True
        raise err

    # Go's SortFunc is stable only up to 12 elements (insertion sort); ties among more come
    # out in an order of the shuffled input either way.
    nodes.sort(key=lambda n: (n.offline, -n.available, n.streams))
    if spec.replicas > 1:
        nodes.sort(key=lambda n: (n.offline, n.ha))
    return [*existing, *(n.id for n in nodes[: r - len(existing)])]


def _tags_allow(peer: PeerCandidate, tags: list[tuple[str, bool]], err: SelectPeerError) -> bool:
    """The `!jetstream` server tag, then the placement tags in order: the first `!tag` the peer
    has or `tag` it lacks discards it (and is the one the error names)."""
    if EXCLUDE_PLACEMENT_TAG in peer.tags:
        err.exclude_tag = True
        return False
    for tag, exclude in tags:
        has = tag in peer.tags
        if exclude and has:
            err.excluded_tags[tag] = None
            return False
        if not exclude and not has:
            err.missing_tags[tag] = None
            return False
    return True


# --- groups ---------------------------------------------------------------------------------------


def raft_group(
    name: str, peers: Sequence[str], storage: str, cluster: str = "", preferred: str = ""
) -> dict[str, Any]:
    """raftGroup's JSON for a new group: `name`, `peers`, `store`, then `cluster` and
    `preferred` when set (the other keys, `scale_up`, `excluded`, `desired`, are empty at a
    create and omitted)."""
    group: dict[str, Any] = {"name": name, "peers": list(peers), "store": storage}
    if cluster:
        group["cluster"] = cluster
    if preferred:
        group["preferred"] = preferred
    return group


def preferred_peer(
    peers: Sequence[str], candidates: Iterable[PeerCandidate], rng: random.Random | None = None
) -> str:
    """setPreferred: the only peer of an R1 group; else a random online peer (one known to
    nodeToInfo and not offline), or any peer when none is online."""
    if not peers:
        return ""
    if len(peers) == 1:
        return peers[0]
    online = _online(peers, candidates)
    if len(online) == 1:
        return online[0]
    pool = online or list(peers)
    return pool[(rng or _RNG).randrange(len(pool))]


def _online(peers: Sequence[str], candidates: Iterable[PeerCandidate]) -> list[str]:
    by_id = {c.id: c for c in candidates}
    return [p for p in peers if (c := by_id.get(p)) is not None and c.known and not c.offline]


def placement_clusters(client: Mapping[str, Any] | None, spec: PlacementSpec) -> list[str]:
    """The clusters createGroupForStream tries in turn: `placement.cluster` alone, or the
    requester's `cluster` then its `alts` (its gateways' clusters, nearest first)."""
    if spec.cluster:
        return [spec.cluster]
    client = client or {}
    return [str(client.get("cluster") or ""), *(str(a) for a in client.get("alts") or ())]


def create_group_for_stream(
    client: Mapping[str, Any] | None,
    spec: PlacementSpec,
    candidates: Sequence[PeerCandidate],
    *,
    load: PeerLoad | None = None,
    limits: PlacementLimits = PlacementLimits(),
    rng: random.Random | None = None,
    nuid: NuidSource = new_nuid,
) -> dict[str, Any]:
    """createGroupForStream and setPreferred, as a stream create does them: the raftGroup JSON
    of the first cluster (placement_clusters) with room for `spec.replicas` peers. Raises
    SelectPeerError with every cluster's reasons merged (the API answers
    stream_placement_error)."""
    replicas = spec.replicas or 1
    errors = SelectPeerError()
    for cluster in placement_clusters(client, spec):
        try:
            peers = select_peer_group(
                replicas, cluster, spec, candidates, load=load, limits=limits, rng=rng
            )
        except SelectPeerError as e:
            errors.accumulate(e)
            continue
        name = group_name_for_stream(peers, spec.storage, nuid)
        preferred = preferred_peer(peers, candidates, rng)
        return raft_group(name, peers, spec.storage, cluster, preferred)
    raise errors


def consumer_replicas(config: Mapping[str, Any], stream_config: Mapping[str, Any]) -> int:
    """ConsumerConfig.replicas: its own `num_replicas` if set and not above the stream's, else
    the stream's; an old-style ephemeral (no durable name, no replicas) on a limits stream is
    R1."""
    own = int(config.get("num_replicas") or 0)
    streams = int(stream_config.get("num_replicas") or 1)
    if own == 0 or own > streams:
        durable = bool(config.get("durable_name"))
        limits = (stream_config.get("retention") or "limits") == "limits"
        if not durable and limits and own == 0:
            return 1
        return streams
    return own


def create_group_for_consumer(
    config: Mapping[str, Any],
    stream: Mapping[str, Any],
    candidates: Sequence[PeerCandidate],
    *,
    limits: PlacementLimits = PlacementLimits(),
    rng: random.Random | None = None,
    nuid: NuidSource = new_nuid,
) -> dict[str, Any]:
    """createGroupForConsumer and what the consumer create does next (setPreferred, the
    stream's cluster, the HA asset limit for R>1): the raftGroup JSON for a new consumer of the
    stream assignment `stream`. The peers are the stream's, all of them in the stream's order,
    or for fewer replicas a random subset of the online ones. Raises SelectPeerError (the API
    answers consumer_placement_error)."""
    group = stream.get("group") or {}
    stream_config = stream.get("stream") or {}
    stream_peers = [str(p) for p in group.get("peers") or ()]
    if not stream_peers or int(config.get("num_replicas") or 0) > len(stream_peers):
        raise SelectPeerError(misc=True)
    replicas = consumer_replicas(config, stream_config)
    active = _online(stream_peers, candidates)
    if replicas // 2 + 1 > len(active):
        raise SelectPeerError(offline=True)
    peers = stream_peers
    if 0 < replicas < len(stream_peers):
        if len(active) < replicas:
            raise SelectPeerError(offline=True)
        (rng or _RNG).shuffle(active)
        peers = active[:replicas]
    if len(peers) > 1 and limits.max_ha_assets:
        by_id = {c.id: c for c in candidates}
        over = [c for p in peers if (c := by_id.get(p)) is not None and c.selectable]
        if any(c.ha_assets > limits.max_ha_assets for c in over):
            raise SelectPeerError(misc=True)
    storage = MEMORY if config.get("mem_storage") else str(stream_config.get("storage") or FILE)
    name = group_name_for_consumer(peers, storage, nuid)
    preferred = preferred_peer(peers, candidates, rng)
    return raft_group(name, peers, storage, str(group.get("cluster") or ""), preferred)


# --- assignments ----------------------------------------------------------------------------------

# ClientInfo's JSON keys in struct order (events.go); every one is omitempty.
CLIENT_INFO_KEYS = (
    "start",
    "host",
    "id",
    "acc",
    "svc",
    "user",
    "name",
    "lang",
    "ver",
    "rtt",
    "server",
    "cluster",
    "alts",
    "stop",
    "jwt",
    "issuer_key",
    "name_tag",
    "tags",
    "kind",
    "client_type",
    "client_id",
    "nonce",
    "reply",
)
# What forProposal leaves out.
_NOT_PROPOSED = frozenset({"jwt", "issuer_key"})


def client_info_for_proposal(client: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """ClientInfo.forProposal as JSON: the requester without `jwt` and `issuer_key`, keys in
    Go's order, empty ones left out; keys ClientInfo does not have are dropped as Go's decoder
    drops them. None stays None (the assignment then has no `client`)."""
    if client is None:
        return None
    return {
        key: client[key]
        for key in CLIENT_INFO_KEYS
        if key not in _NOT_PROPOSED and not _empty(client.get(key))
    }


def _empty(value: Any) -> bool:
    return value is None or value == "" or value == 0 or value == [] or value == ()


def stream_assignment(
    client_info: Mapping[str, Any] | None,
    created_ns: int,
    config_json: Mapping[str, Any],
    group: Mapping[str, Any],
    sync_subject: str,
    subject: str = "",
    reply: str = "",
) -> dict[str, Any]:
    """streamAssignment's JSON as encodeAddStreamAssignment writes a create: `client`
    (forProposal, omitted when None), `created` (RFC 3339, nanoseconds, UTC), `stream` (the
    config as the API shows it), `group`, `sync`, then `subject` and `reply` when set.
    (`restore_state` belongs to restores.)"""
    assignment: dict[str, Any] = {}
    client = client_info_for_proposal(client_info)
    if client is not None:
        assignment["client"] = client
    assignment["created"] = rfc3339_ns(created_ns)
    assignment["stream"] = dict(config_json)
    assignment["group"] = dict(group)
    assignment["sync"] = sync_subject
    _add_request(assignment, subject, reply)
    return assignment


def consumer_assignment(
    client_info: Mapping[str, Any] | None,
    created_ns: int,
    name: str,
    stream: str,
    config_json: Mapping[str, Any],
    group: Mapping[str, Any],
    subject: str = "",
    reply: str = "",
) -> dict[str, Any]:
    """consumerAssignment's JSON as encodeAddConsumerAssignment writes a create: `client`,
    `created`, `name`, `stream` (its name), `consumer` (the config), `group`, then `subject`
    and `reply` when set. (`state` belongs to restores.)"""
    assignment: dict[str, Any] = {}
    client = client_info_for_proposal(client_info)
    if client is not None:
        assignment["client"] = client
    assignment["created"] = rfc3339_ns(created_ns)
    assignment["name"] = name
    assignment["stream"] = stream
    assignment["consumer"] = dict(config_json)
    assignment["group"] = dict(group)
    _add_request(assignment, subject, reply)
    return assignment


def _add_request(assignment: dict[str, Any], subject: str, reply: str) -> None:
    if subject:
        assignment["subject"] = subject
    if reply:
        assignment["reply"] = reply
