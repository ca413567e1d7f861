"""Clustered JetStream on this server: who answers which API request, and the replicas this
server holds (nats-server's `jetstream_cluster.go`: `jsClusteredStreamRequest`,
`processStreamAssignment`, `processStreamRemoval`; `jetstream_api.go` for who answers).

Every JetStream server of the cluster receives every `$JS.API` request (each subscribes in the
account, and the routes carry the interest); exactly one answers, as in nats-server:
- the meta leader answers what changes or lists the assignments: account info, stream
  create, delete, names and list. A create becomes an assignment proposed to the meta group;
  the new stream's first leader answers it (an R1 stream's one member, at once);
- the stream's leader answers what reads or changes one stream's data (info, get, and the
  consumer requests, whose consumers live on the stream leader for now);
- with no meta leader, every server answers 503 "JetStream system temporarily unavailable".

Clustered mode starts when a second JetStream server shows up on the routes, or at start-up
when the meta group's files say this server was in one (a single JetStream server in a cluster
keeps serving every stream itself, which nats-server cannot). Streams this server held alone
before then stop (their files stay), as they would on a nats-server that joins a cluster.
"""

from __future__ import annotations

import json
import random
from typing import TYPE_CHECKING, Any, Protocol

from pynatsd.jetstream import errors
from pynatsd.jetstream.api import names_matching
from pynatsd.jetstream.cluster.assignments import (
    MetaOp,
    StreamAssignment,
    created_ns,
    encode_entry,
)
from pynatsd.jetstream.cluster.consumer_replica import ConsumerReplica
from pynatsd.jetstream.cluster.placement import (
    PeerCandidate,
    PeerLoad,
    PlacementSpec,
    SelectPeerError,
    consumer_assignment,
    consumer_replicas,
    create_group_for_stream,
    group_name_for_consumer,
    raft_group,
    stream_assignment,
    stream_placement_error,
    sync_subject_for_stream,
)
from pynatsd.jetstream.cluster.replica import StreamReplica
from pynatsd.jetstream.cluster.system_api import SystemApi
from pynatsd.jetstream.stream_config import StreamConfig, decode_stream_request
from pynatsd.jetstream.util import now_ns
from pynatsd.logger import log
from pynatsd.raft.group import open_group
from pynatsd.raft.node import Committed, RaftNode
from pynatsd.raft.transport import NrgTransport
from pynatsd.raft.wire import Entry, EntryType
from pynatsd.server.session import ClientSession

if TYPE_CHECKING:
    from pynatsd.jetstream.api import Handler, JetStreamApi
    from pynatsd.jetstream.cluster.meta import MetaGroup
    from pynatsd.jetstream.manager import AccountJetStream, JetStream
    from pynatsd.jetstream.stream import Stream
    from pynatsd.protocol.events import Pub
    from pynatsd.server.client import Client
    from pynatsd.server.server import Server

# What only the meta leader answers, and what only a stream's leader answers (by API key).
META_REQUESTS = frozenset(
    {
        ("INFO",),
        ("STREAM", "CREATE"),
        ("STREAM", "DELETE"),
        ("STREAM", "NAMES"),
        ("STREAM", "LIST"),
    }
)
_EMPTY_STATE = {
    "messages": 0,
    "bytes": 0,
    "first_seq": 0,
    "first_ts": "0001-01-01T00:00:00Z",
    "last_seq": 0,
    "last_ts": "0001-01-01T00:00:00Z",
    "consumer_count": 0,
}
# A peer not heard from for this long is placed last (nats-server marks a server offline
# after 150 s without its STATSZ; the meta group's heartbeats tell sooner).
OFFLINE_AFTER = 10.0


class GroupMember(Protocol):
    """A stream or consumer replica as its RAFT group runs it."""

    node: RaftNode | None
    transport: NrgTransport | None
    recovering: bool

    def apply_entries(self, committed: Committed) -> None: ...
    def leader_changed(self, is_leader: bool) -> None: ...


class ClusteredJetStream:
    """The clustered side of this server's JetStream."""

    def __init__(self, js: JetStream, meta: MetaGroup) -> None:
        self.js = js
        self.meta = meta
        self.active = False
        self.replicas: dict[tuple[str, str], StreamReplica] = {}
        self.consumers: dict[tuple[str, str, str], ConsumerReplica] = {}
        self.system_api = SystemApi(js)
        self.rng = random.Random()
        meta.on_assignment = self._on_assignment

    # ----- mode
    def activate(self, why: str) -> None:
        """Serve JetStream the clustered way from now on."""
        if self.active:
            return
        self.active = True
        self.system_api.start()
        log.info("JetStream cluster mode: %s", why)
        for ajs in self.js.accounts.values():
            for name, stream in list(ajs.streams.items()):
                if stream.replicator is None:
                    log.error(
                        "JetStream stream '%s > %s' was created on this server alone and is "
                        "not in the cluster's assignments: it stops (its files stay)",
                        ajs.account.name,
                        name,
                    )
                    stream.stop()
                    del ajs.streams[name]
        # Assignments applied before the mode started (a replay of the meta log).
        for account_streams in self.meta.state.streams.values():
            for sa in list(account_streams.values()):
                self._place(sa, answer=False)
                for assignment in list(sa.consumers.values()):
                    self._place_consumer(assignment, answer=False)

    def forward(self, ajs: AccountJetStream, msg: Pub, publisher: Client | None) -> None:
        """A request this server leaves to another: one of its own clients' goes on into
        `$SYS` too, where nats-server nodes take the API (cluster/system_api.py)."""
        if isinstance(publisher, ClientSession):
            self.system_api.forward(ajs, msg, publisher)

    # ----- who answers
    def handler(
        self, api: JetStreamApi, key: tuple[str, ...], rest: list[str], local: Handler
    ) -> Handler | None:
        """The handler this server runs for a request, or None to stay silent."""
        meta = self.meta
        leaderless = meta.leaderless()
        if key in META_REQUESTS:
            if meta.is_leader:
                return self._meta_handlers(api).get(key, local)
            return _unavailable if leaderless else None
        if key[0] not in ("STREAM", "CONSUMER") or not rest:
            return local
        account = api.ajs.account.name
        if meta.state.stream(account, rest[0]) is None:
            if meta.is_leader:
                return _not_found
            return _unavailable if leaderless else None
        if key[0] == "CONSUMER" and len(rest) >= 2 and key != ("CONSUMER", "CREATE"):
            if key == ("CONSUMER", "DURABLE", "CREATE"):
                pass  # the stream's leader takes creates (below)
            else:
                return self._consumer_handler(api, key, rest, local)
        replica = self.replica(account, rest[0])
        if replica is None or not replica.is_leader:
            return None
        if key == ("STREAM", "PURGE"):

            def purge(rest: list[str], body: bytes, reply: str) -> dict[str, Any] | None:
                _, subject, seq, keep = api.purge_request(rest, body)
                replica.propose_purge(subject, seq, keep, reply)
                return None

            return purge
        if key == ("STREAM", "MSG", "DELETE"):

            def delete(rest: list[str], body: bytes, reply: str) -> dict[str, Any] | None:
                _, seq, erase = api.msg_delete_request(rest, body)
                replica.propose_delete(seq, erase, reply)
                return None

            return delete
        if key == ("STREAM", "UPDATE"):
            return _not_replicated_yet
        if key == ("STREAM", "LEADER", "STEPDOWN"):
            return self._stepdown(replica.node, replica.transport)
        if key == ("STREAM", "INFO"):
            return _with_cluster_info(local, replica)
        return local

    def _consumer_handler(
        self, api: JetStreamApi, key: tuple[str, ...], rest: list[str], local: Handler
    ) -> Handler | None:
        """A request for one consumer: its leader answers; with no such consumer, the
        stream's leader does (it says so)."""
        account = api.ajs.account.name
        consumer = self.consumers.get((account, rest[0], rest[1]))
        if consumer is None:
            stream = self.replica(account, rest[0])
            return local if stream is not None and stream.is_leader else None
        if not consumer.is_leader:
            return None
        if key == ("CONSUMER", "LEADER", "STEPDOWN"):
            return self._stepdown(consumer.node, consumer.transport)
        if key == ("CONSUMER", "DELETE"):

            def delete(rest: list[str], body: bytes, reply: str) -> dict[str, Any] | None:
                removal = dict(consumer.assignment)
                removal.update(subject=f"$JS.API.CONSUMER.DELETE.{rest[0]}.{rest[1]}", reply=reply)
                self._forward(MetaOp.REMOVE_CONSUMER, removal)
                return None

            return delete
        if key == ("CONSUMER", "INFO"):

            def info(rest: list[str], body: bytes, reply: str) -> dict[str, Any] | None:
                out = local(rest, body, reply)
                if out is not None:
                    out["cluster"] = consumer.cluster_info()
                return out

            return info
        return local

    def _stepdown(self, node: RaftNode | None, transport: NrgTransport | None) -> Handler:
        """jsStreamLeaderStepDownRequest and its consumer twin: the leader hands over (to the
        preferred server if the request names one) and says so; an R1 group just says so."""

        def stepdown(rest: list[str], body: bytes, reply: str) -> dict[str, Any] | None:
            preferred = self.preferred_peer(body)
            if node is not None:
                node.step_down(preferred)
                if transport is not None:
                    transport.pump()
            return {"success": True}

        return stepdown

    def preferred_peer(self, body: bytes) -> str:
        """The node id of `placement.preferred` (a server name) in a stepdown request."""
        try:
            request = json.loads(body) if body.strip() else {}
        except ValueError:
            raise errors.js_error("InvalidJSON", err=str(body)) from None
        name = str(((request or {}).get("placement") or {}).get("preferred") or "")
        if not name:
            return ""
        for node_id, server_name in self.meta.names.items():
            if server_name == name:
                return node_id
        raise errors.js_error("ClusterNoPeers", err=f"preferred server {name!r} not known")

    def propose_consumer(self, stream: Stream, config_json: dict[str, Any], name: str) -> None:
        """A consumer create that the stream's leader checked: an assignment for the meta group
        (forwarded to its leader), placed on the stream's peers, this server preferred."""
        replica = self.replica(stream.ajs.account.name, stream.name)
        assert replica is not None
        api = stream.ajs.api
        reply = api.current_reply if api is not None else ""
        replicas = consumer_replicas(config_json, replica.assignment.raw.get("stream") or {})
        peers = [self.meta.node_id] + [p for p in replica.peers if p != self.meta.node_id]
        peers = peers[: max(1, min(replicas, len(peers)))]
        storage = str((config_json.get("mem_storage") and "memory") or stream.config.storage)
        group = raft_group(
            group_name_for_consumer(peers, storage),
            peers,
            storage,
            stream.ajs.server.cluster_name,
            self.meta.node_id,
        )
        assignment = consumer_assignment(
            {"acc": stream.ajs.account.name},
            now_ns(),
            name,
            stream.name,
            config_json,
            group,
            f"$JS.API.CONSUMER.CREATE.{stream.name}.{name}",
            reply,
        )
        self._forward(MetaOp.ASSIGN_CONSUMER, assignment)

    def _forward(self, op: MetaOp, assignment: dict[str, Any]) -> None:
        """ForwardProposal: to the meta leader, wherever it is."""
        node, transport = self.meta.node, self.meta.transport
        if node is None or transport is None:
            raise errors.js_error("ClusterNotAvail")
        node.forward_proposal(encode_entry(op, assignment))
        transport.pump()

    def _meta_handlers(self, api: JetStreamApi) -> dict[tuple[str, ...], Handler]:
        ajs = api.ajs
        return {
            ("INFO",): lambda rest, body, reply: self._account_info(api, rest, body, reply),
            ("STREAM", "CREATE"): lambda rest, body, reply: self._create(api, rest, body, reply),
            ("STREAM", "DELETE"): lambda rest, body, reply: self._delete(ajs, rest, reply),
            ("STREAM", "NAMES"): lambda rest, body, reply: self._names(api, rest, body),
            ("STREAM", "LIST"): lambda rest, body, reply: self._list(api, rest, body),
        }

    def replica(self, account: str, name: str) -> StreamReplica | None:
        return self.replicas.get((account, name))

    # ----- meta leader: requests
    def _account_info(
        self, api: JetStreamApi, rest: list[str], body: bytes, reply: str
    ) -> dict[str, Any] | None:
        out = api.account_info(rest, body, reply)
        streams = self.meta.state.streams.get(api.ajs.account.name, {})
        out["streams"] = len(streams)
        out["consumers"] = sum(len(sa.consumers) for sa in streams.values())
        return out

    def _create(
        self, api: JetStreamApi, rest: list[str], body: bytes, reply: str
    ) -> dict[str, Any] | None:
        """jsClusteredStreamRequest: checks, placement, then an assignment for the group."""
        from pynatsd.jetstream.stream_checks import check_stream_config
        from pynatsd.jetstream.stream_config import stream_configs_equal

        ajs = api.ajs
        config, pedantic = api.decode_stream_config(rest, body)
        if config.sealed:
            raise errors.stream_invalid_config("stream configuration for create can not be sealed")
        ajs.check_stream_limits(config)
        others = {
            sa.name: _config_of(sa)
            for sa in self.meta.state.streams.get(ajs.account.name, {}).values()
        }
        existing = others.pop(config.name, None)
        config = check_stream_config(config, pedantic, others)
        ajs.check_max_bytes(config)
        if existing is not None:
            if not stream_configs_equal(existing, config):
                raise errors.stream_name_exist()
            replica = self.replica(ajs.account.name, config.name)
            if replica is not None and replica.is_leader:
                replica.answer_create(reply)
            return None
        config_json = config.to_reply(full_metadata=False)
        client = {"acc": ajs.account.name, "cluster": ajs.server.cluster_name}
        assignments = [
            sa.raw for account in self.meta.state.streams.values() for sa in account.values()
        ]
        try:
            group = create_group_for_stream(
                client,
                PlacementSpec.from_config(config_json),
                self._candidates(),
                load=PeerLoad.of_assignments(assignments),
                rng=self.rng,
            )
        except SelectPeerError as e:
            raise stream_placement_error(e) from None
        assignment = stream_assignment(
            client,
            now_ns(),
            config_json,
            group,
            sync_subject_for_stream(self.rng),
            f"$JS.API.STREAM.CREATE.{config.name}",
            reply,
        )
        if not self._propose(MetaOp.ASSIGN_STREAM, assignment):
            raise errors.js_error("ClusterNotLeader")
        return None

    def _candidates(self) -> list[PeerCandidate]:
        """The meta group's peers as placement sees them. nats-server fills these from each
        server's STATSZ; a peer is online here when the meta group heard from it lately, and
        its room is this server's own JetStream limits (pynatsd peers send no STATSZ yet)."""
        node = self.meta.node
        assert node is not None
        js = self.js
        room = 1 << 50
        max_memory = js.max_memory if js.max_memory >= 0 else room
        max_storage = js.max_store if js.max_store >= 0 else room
        now = node.clock()
        out = []
        for peer, progress in node.peers.items():
            heard = peer == self.meta.node_id or (
                progress.heard and now - progress.heard < OFFLINE_AFTER
            )
            out.append(
                PeerCandidate(
                    id=peer,
                    name=self.meta.names.get(peer, ""),
                    cluster=js.server.cluster_name,
                    offline=not heard,
                    known=peer in self.meta.names,
                    max_memory=max_memory,
                    max_storage=max_storage,
                )
            )
        return out

    def _delete(self, ajs: AccountJetStream, rest: list[str], reply: str) -> dict[str, Any] | None:
        if len(rest) != 1:
            raise errors.bad_request()
        sa = self.meta.state.stream(ajs.account.name, rest[0])
        if sa is None:
            raise errors.stream_not_found()
        removal = dict(sa.raw)
        removal.update(sync="", subject=f"$JS.API.STREAM.DELETE.{sa.name}", reply=reply)
        if not self._propose(MetaOp.REMOVE_STREAM, removal):
            raise errors.js_error("ClusterNotLeader")
        return None

    def _matching(
        self, api: JetStreamApi, rest: list[str], body: bytes, struct: str
    ) -> tuple[int, list[str]]:
        """A names or list request against the assignments: (offset, the names it takes)."""
        if rest:
            raise errors.bad_request()
        offset, subject = api.list_request(body, struct)
        streams = self.meta.state.streams.get(api.ajs.account.name, {})
        configs = {
            name: list(sa.raw.get("stream", {}).get("subjects") or [])
            for name, sa in streams.items()
        }
        return offset, names_matching(configs, subject)

    def _names(self, api: JetStreamApi, rest: list[str], body: bytes) -> dict[str, Any]:
        offset, names = self._matching(api, rest, body, "JSApiStreamNamesRequest")
        page = names[offset : offset + 1024]
        return {"total": len(names), "offset": offset, "limit": 1024, "streams": page}

    def _list(self, api: JetStreamApi, rest: list[str], body: bytes) -> dict[str, Any]:
        """Every stream's info: a replica here gives its own, another stream its config (the
        meta leader of nats-server asks each stream's leader; not yet done here)."""
        ajs = api.ajs
        offset, names = self._matching(api, rest, body, "JSApiStreamListRequest")
        streams = self.meta.state.streams.get(ajs.account.name, {})
        items = []
        for name in names[offset : offset + 256]:
            replica = self.replica(ajs.account.name, name)
            if replica is not None:
                info = replica.stream.info()
                info["cluster"] = replica.cluster_info()
            else:
                sa = streams[name]
                info = {
                    "config": _config_of(sa).to_reply(),
                    "created": sa.raw.get("created", ""),
                    "state": _EMPTY_STATE,
                    "cluster": {"name": ajs.server.cluster_name},
                }
            items.append(info)
        return {"total": len(names), "offset": offset, "limit": 256, "streams": items}

    def _propose(self, op: MetaOp, assignment: dict[str, Any]) -> bool:
        node, transport = self.meta.node, self.meta.transport
        if node is None or transport is None:
            return False
        accepted = node.propose((Entry(EntryType.NORMAL, encode_entry(op, assignment)),))
        transport.pump()
        return accepted

    # ----- every member: assignments
    def _on_assignment(self, op: MetaOp, assignment: dict[str, Any]) -> None:
        if not self.active:
            return
        if op is MetaOp.ASSIGN_CONSUMER:
            self._place_consumer(assignment, answer=not self.meta.replaying)
            return
        if op is MetaOp.REMOVE_CONSUMER:
            self._remove_consumer(assignment)
            return
        account = str((assignment.get("client") or {}).get("acc", ""))
        name = str((assignment.get("stream") or {}).get("name", ""))
        if op is MetaOp.ASSIGN_STREAM:
            sa = self.meta.state.stream(account, name)
            if sa is not None:
                self._place(sa, answer=not self.meta.replaying)
        elif op is MetaOp.REMOVE_STREAM:
            # processClusterDeleteStream: the stream's leader answers once its replica is gone
            # (every member does when the group had no leader).
            replica = self.replicas.pop((account, name), None)
            if replica is None:
                return
            for key in [k for k in self.consumers if k[:2] == (account, name)]:
                self.consumers.pop(key).stop()
            node = replica.node
            answers = replica.is_leader or (node is not None and not node.leader)
            self._remove(replica)
            reply = str(assignment.get("reply") or "")
            if answers and reply and not self.meta.replaying:
                replica.stream.ajs.api_answer(reply, "stream_delete_response", {"success": True})

    def _place_consumer(self, assignment: dict[str, Any], answer: bool) -> None:
        """processConsumerAssignment: a replica here if this server is one of its peers."""
        account = str((assignment.get("client") or {}).get("acc", ""))
        stream_name, name = str(assignment.get("stream", "")), str(assignment.get("name", ""))
        key = (account, stream_name, name)
        group = assignment.get("group") or {}
        peers = list(group.get("peers") or [])
        stream = self.replica(account, stream_name)
        if key in self.consumers or self.meta.node_id not in peers or stream is None:
            return
        replica = ConsumerReplica(
            assignment, stream.stream, self.meta.node_id, lambda: self.meta.names
        )
        self.consumers[key] = replica
        replica.create_reply = str(assignment.get("reply") or "") if answer else ""
        if len(peers) == 1:
            replica.leader_changed(True)
            return
        file_backed = stream.stream.config.storage == "file"
        self._run_group(replica, group, peers, file_backed, stream.stream.ajs.server)

    def _remove_consumer(self, assignment: dict[str, Any]) -> None:
        """processClusterDeleteConsumer: the consumer's leader answers once it is gone."""
        account = str((assignment.get("client") or {}).get("acc", ""))
        key = (account, str(assignment.get("stream", "")), str(assignment.get("name", "")))
        replica = self.consumers.pop(key, None)
        if replica is None:
            return
        node = replica.node
        answers = replica.is_leader or (node is not None and not node.leader)
        replica.stop(delete=True)
        reply = str(assignment.get("reply") or "")
        if answers and reply and not self.meta.replaying:
            replica.stream.ajs.api_answer(reply, "consumer_delete_response", {"success": True})

    def _place(self, sa: StreamAssignment, answer: bool) -> None:
        """processStreamAssignment: a replica here if this server is one of the peers."""
        key = (sa.account, sa.name)
        if key in self.replicas or self.meta.node_id not in (sa.group.get("peers") or []):
            return
        ajs = self.js.accounts.get(sa.account)
        if ajs is None:
            log.error("JetStream cluster: stream '%s > %s' for an account without JetStream", *key)
            return
        config = _config_of(sa)
        created = created_ns(sa.raw.get("created"))
        stream = ajs.open_replica(config, created)
        replica = StreamReplica(sa, stream, self.meta.node_id, lambda: self.meta.names)
        stream.replicator = replica
        self.replicas[key] = replica
        stream.start()
        replica.create_reply = str(sa.raw.get("reply") or "") if answer else ""
        peers = list(sa.group.get("peers") or [])
        if len(peers) == 1:
            replica.leader_changed(True)
            return
        self._start_group(replica, ajs, peers)

    def _start_group(self, replica: StreamReplica, ajs: AccountJetStream, peers: list[str]) -> None:
        file_backed = replica.stream.config.storage == "file"
        self._run_group(replica, replica.assignment.group, peers, file_backed, ajs.server)

    def _run_group(
        self,
        member: GroupMember,
        group: dict[str, Any],
        peers: list[str],
        file_backed: bool,
        server: Server,
    ) -> None:
        """createRaftGroup: a stream's or consumer's group opened (its directory beside the meta
        group's, or in memory) and run; what its log replays is applied before anything new,
        and the preferred peer of a new group stands first (a quick first leader)."""
        meta = self.meta
        name = str(group.get("name", ""))
        node, bootstrapped = open_group(
            meta.directory.parent / name if file_backed else None,
            meta.node_id,
            name,
            known_peers=peers,
            cluster_size=len(peers),
            clock=meta.clock,
            timings=meta.timings,
            managed=True,
        )
        member.node = node
        transport = NrgTransport(
            node,
            server.system_account,
            server.publish_internal,
            member.apply_entries,
            member.leader_changed,
        )
        member.transport = transport
        member.recovering = True
        transport.start()
        member.recovering = False
        if bootstrapped and group.get("preferred") == meta.node_id:
            node.campaign()
            transport.pump()

    def _remove(self, replica: StreamReplica) -> None:
        replica.sync.close()
        if replica.transport is not None:
            replica.transport.close()
        stream = replica.stream
        ajs = stream.ajs
        ajs.streams.pop(stream.name, None)
        ajs.delete_stream(stream)

    def stop(self) -> None:
        self.system_api.stop()
        for consumer in self.consumers.values():
            consumer.stop()
        for replica in self.replicas.values():
            replica.sync.shutdown()  # a snapshot, as nats-server takes on a clean shutdown
            if replica.transport is not None:
                replica.transport.close()
            if replica.node is not None:
                replica.node.log.close()


def _with_cluster_info(local: Handler, replica: StreamReplica) -> Handler:
    def info(rest: list[str], body: bytes, reply: str) -> dict[str, Any] | None:
        out = local(rest, body, reply)
        if out is not None:
            out["cluster"] = replica.cluster_info()
        return out

    return info


def _not_found(rest: list[str], body: bytes, reply: str) -> dict[str, Any] | None:
    raise errors.stream_not_found()


def _not_replicated_yet(rest: list[str], body: bytes, reply: str) -> dict[str, Any] | None:
    # Updates of replicated streams are not replicated yet: the leader refuses them rather
    # than let the replicas differ.
    raise errors.js_error("ClusterNotLeader")


def _unavailable(rest: list[str], body: bytes, reply: str) -> dict[str, Any] | None:
    raise errors.js_error("ClusterNotAvail")


def _config_of(sa: StreamAssignment) -> StreamConfig:
    config, _ = decode_stream_request(dict(sa.raw.get("stream") or {}))
    return config
