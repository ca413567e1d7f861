"""One replica of a clustered stream on this server (nats-server's `monitorStream`,
`processClusteredInboundMsg`, `applyStreamEntries`).

The local `Stream` is the state machine. While this server leads the stream's group it
captures the stream's subjects; every publish becomes a `streamMsgOp` entry (nats-server's
encoding, `entries.encode_stream_msg`) proposed to the group, and is stored when the entry
commits, on every replica in the same order, by the same `Stream.process_message` a single
server uses. Only the leader answers: the PubAck (or the error) goes out after the commit, so
an acknowledged message is on a quorum. An R1 stream has no group (as in nats-server): its
entries apply at once.

`lseq` and `clfs` are nats-server's: each entry carries the stream's clustered last sequence
when it was proposed, and a replica counts the entries that stored nothing (a duplicate, a
failed check). An entry whose `lseq - clfs` is below the store's last sequence was applied
before (a replay of the group's log after a restart) and is skipped.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from pynatsd.jetstream.api import delete_message, purge_stream
from pynatsd.jetstream.cluster.assignments import StreamAssignment
from pynatsd.jetstream.cluster.entries import (
    EntryError,
    MsgDelete,
    PurgeRequest,
    StreamOp,
    StreamPurge,
    decode_msg_delete,
    decode_stream_msg,
    decode_stream_purge,
    encode_msg_delete,
    encode_stream_msg,
    encode_stream_purge,
)
from pynatsd.jetstream.cluster.peers import cluster_block
from pynatsd.jetstream.cluster.replica_sync import ReplicaSync
from pynatsd.jetstream.errors import ApiError
from pynatsd.jetstream.util import now_ns, rfc3339_ns
from pynatsd.logger import log
from pynatsd.raft.node import Committed, RaftNode
from pynatsd.raft.transport import NrgTransport
from pynatsd.raft.wire import Entry, EntryType

if TYPE_CHECKING:
    from pynatsd.jetstream.stream import Stream


# At most this many entries in one append entry (nats-server: 4096, or 256 KiB of them).
MAX_ENTRIES_PER_APPEND = 4096


class StreamReplica:
    """The replica: its assignment, its local stream, its group's node (None for R1), and
    whether this server leads it."""

    def __init__(
        self,
        assignment: StreamAssignment,
        stream: Stream,
        node_id: str,
        names: Callable[[], dict[str, str]],
    ) -> None:
        self.assignment = assignment
        self.names = names  # node id -> server name, as the meta group knows them
        self.stream = stream
        self.node_id = node_id
        self.node: RaftNode | None = None
        self.transport: NrgTransport | None = None
        self.is_leader = False
        self.clfs = 0  # entries applied that stored nothing
        self.clseq = 0  # the leader's clustered last sequence, proposals included
        # The create request to answer once this replica first leads (nats-server: the
        # stream's first leader answers the create).
        self.create_reply = ""
        self._proposals: list[Entry] = []  # proposed this turn, not yet sent
        self.recovering = False  # while the group's log replays at start-up: nobody to answer
        self.sync = ReplicaSync(self)  # snapshots and catch-ups (replica_sync.py)

    @property
    def peers(self) -> list[str]:
        return list(self.assignment.group.get("peers") or [])

    @property
    def group_name(self) -> str:
        return str(self.assignment.group.get("name", ""))

    # ----- leadership
    def leader_changed(self, is_leader: bool) -> None:
        stream = self.stream
        was = self.is_leader
        self.is_leader = is_leader
        if is_leader and not was:
            self.clseq = stream.store.state().last_seq + self.clfs
            stream.subscribe()
            if self.create_reply:
                reply, self.create_reply = self.create_reply, ""
                self.answer_create(reply)
            log.info(
                "JetStream cluster new stream leader for '%s > %s'",
                stream.ajs.account.name,
                stream.name,
            )
        elif was and not is_leader:
            stream.unsubscribe()
        self.sync.leader_changed(is_leader)

    def answer_create(self, reply: str) -> None:
        out = self.stream.info()
        out["cluster"] = self.cluster_info()
        out["ts"] = rfc3339_ns(now_ns())
        out["did_create"] = True
        self.stream.ajs.api_answer(reply, "stream_create_response", out)

    # ----- publishing (leader)
    def propose_message(self, subject: bytes, reply: bytes, header: bytes, data: bytes) -> None:
        """processClusteredInboundMsg: a publish the leader captured."""
        entry = encode_stream_msg(
            subject.decode("utf-8", "surrogateescape"),
            reply.decode("utf-8", "surrogateescape"),
            header,
            data,
            self.clseq,
            now_ns(),
        )
        self.clseq += 1
        if not self._propose(entry):
            self.clseq -= 1  # no longer the leader: the publisher gets no answer, as in Go

    def propose_purge(self, subject: str, seq: int, keep: int, reply: str) -> None:
        """jsClusteredStreamPurgeRequest: every replica purges when it commits."""
        stream = self.stream
        purge = StreamPurge(
            stream=stream.name,
            last_seq=stream.store.state().last_seq,
            subject=f"$JS.API.STREAM.PURGE.{stream.name}",
            reply=reply,
            request=PurgeRequest(seq=seq, filter=subject, keep=keep),
            client={"acc": stream.ajs.account.name},
        )
        self._propose(encode_stream_purge(purge))

    def propose_delete(self, seq: int, erase: bool, reply: str) -> None:
        """jsClusteredMsgDeleteRequest."""
        stream = self.stream
        delete = MsgDelete(
            stream=stream.name,
            seq=seq,
            no_erase=not erase,
            subject=f"$JS.API.STREAM.MSG.DELETE.{stream.name}",
            reply=reply,
            client={"acc": stream.ajs.account.name},
        )
        self._propose(encode_msg_delete(delete))

    def _propose(self, entry: bytes) -> bool:
        """Entries proposed in one turn of the event loop go out as one append entry (one log
        write and one fsync on every replica, as nats-server batches its proposals)."""
        if self.node is None:
            self.apply_entries(Committed(0, (Entry(EntryType.NORMAL, entry),)))
            return True
        if not self.node.is_leader:
            return False
        pending = self._proposals
        pending.append(Entry(EntryType.NORMAL, entry))
        if len(pending) == 1:
            self.stream.ajs.loop.call_soon(self._flush_proposals)
        return True

    def _flush_proposals(self) -> None:
        entries, self._proposals = tuple(self._proposals), []
        if entries and self.node is not None:
            for start in range(0, len(entries), MAX_ENTRIES_PER_APPEND):
                self.node.propose(entries[start : start + MAX_ENTRIES_PER_APPEND])
            if self.transport is not None:
                self.transport.pump()

    # ----- applying
    def apply_entries(self, committed: Committed) -> None:
        if self.sync.hold(committed):
            return  # catching up: applied once the store has what the snapshot says
        for position, entry in enumerate(committed.entries):
            if entry.type == EntryType.SNAPSHOT:
                if self.sync.apply_snapshot(entry.data, committed, position):
                    return  # a catch-up began: the rest waits for it
                continue
            if entry.type != EntryType.NORMAL or not entry.data:
                continue
            op = entry.data[0]
            if op in (StreamOp.MSG, StreamOp.COMPRESSED_MSG):
                self._apply_message(entry.data)
            elif op == StreamOp.PURGE:
                self._apply_purge(entry.data)
            elif op == StreamOp.DELETE_MSG:
                self._apply_delete(entry.data)
        if self.node is not None and committed.index:
            self.node.on_applied(committed.index)
            self.sync.applied(committed)

    def _apply_message(self, data: bytes) -> None:
        try:
            msg = decode_stream_msg(data)
        except EntryError as e:
            log.error(
                "JetStream cluster could not decode stream entry for %s: %s", self.stream.name, e
            )
            return
        stream = self.stream
        last = stream.store.state().last_seq
        if msg.lseq - self.clfs < last:
            return  # applied before (a replay)
        reply = msg.reply.encode("utf-8", "surrogateescape")
        answer = self.is_leader and bool(reply) and not stream.config.no_ack
        try:
            seq, duplicate = stream.process_message(msg.subject, msg.header, msg.payload)
        except ApiError as e:
            self.clfs += 1
            if answer:
                stream.reply_error(reply, e)
            return
        if duplicate or seq == 0:
            self.clfs += 1
        if not answer or seq == 0:
            return
        ack = stream.ack_prefix() + b"%d" % seq
        if duplicate:
            stream.ajs.reply(reply, ack + b',"duplicate": true}')
        else:
            stream.queue_ack(reply, ack + b"}", seq)

    def _apply_purge(self, data: bytes) -> None:
        try:
            purge = decode_stream_purge(data)
        except EntryError as e:
            log.error(
                "JetStream cluster could not decode purge msg for %s: %s", self.stream.name, e
            )
            return
        request = purge.request or PurgeRequest()
        seq, keep = request.seq, request.keep
        if not seq:
            # Without a sequence, up to what the leader had: a replay purges no more.
            if keep and self.recovering:
                return
            if not keep:
                seq = purge.last_seq + 1
        try:
            result = purge_stream(self.stream, request.filter, seq, keep)
        except ApiError as e:
            result = {"error": e.to_json()}
        self._answer(purge.reply, "stream_purge_response", result)

    def _apply_delete(self, data: bytes) -> None:
        try:
            delete = decode_msg_delete(data)
        except EntryError as e:
            log.error(
                "JetStream cluster could not decode delete msg for %s: %s", self.stream.name, e
            )
            return
        try:
            result = delete_message(self.stream, delete.seq, not delete.no_erase)
        except ApiError as e:
            result = {"error": e.to_json()}
        self._answer(delete.reply, "stream_msg_delete_response", result)

    def _answer(self, reply: str, rtype: str, result: dict[str, Any]) -> None:
        if reply and self.is_leader and not self.recovering:
            self.stream.ajs.api_answer(reply, rtype, result)

    # ----- monitoring
    def cluster_info(self) -> dict[str, Any]:
        """The `cluster` block of stream info (clusterInfo)."""
        return cluster_block(
            self.stream.ajs.server,
            self.node,
            self.group_name,
            self.peers,
            self.node_id,
            self.names(),
        )
