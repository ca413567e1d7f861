"""A whole RAFT group in one thread: nodes from `pynatsd.raft.node`, a fake clock, and a
network of our own that delays, drops and cuts messages, and crashes and restarts nodes.

Messages are routed by subject as the system account routes NRG traffic: a node never gets
what it published itself (nats-server's send queue does not call internal subscriptions of
its own server), everyone else subscribed to the subject does.
"""

from __future__ import annotations

import heapq
import random
from dataclasses import dataclass, field

from pynatsd.raft.log import MemoryLog
from pynatsd.raft.node import (
    Committed,
    LeaderChanged,
    MemoryFiles,
    Publish,
    RaftNode,
    RaftState,
    Subscribe,
    Timings,
    Unsubscribe,
)
from pynatsd.raft.wire import (
    Entry,
    EntryType,
    PeerState,
    decode_append_entry,
    decode_append_entry_response,
    decode_vote_request,
    decode_vote_response,
)

GROUP = "TEST"


@dataclass
class Member:
    """A node with its durable parts, which survive a crash."""

    id: str
    log: MemoryLog
    files: MemoryFiles
    node: RaftNode | None = None
    subjects: set[str] = field(default_factory=set)
    committed: dict[int, tuple[Entry, ...]] = field(default_factory=dict)
    leads: bool = False  # the upper layer was told it leads


class Network:
    def __init__(
        self,
        size: int,
        seed: int,
        *,
        drop: float = 0.0,
        max_delay: float = 0.05,
        timings: Timings | None = None,
    ) -> None:
        self.now = 0.0
        self.rng = random.Random(seed)
        self.drop = drop
        self.max_delay = max_delay
        self.timings = timings or Timings()
        self.leaders_by_term: dict[int, set[str]] = {}
        self.history: dict[int, tuple[Entry, ...]] = {}  # every commit any node reported
        self.queue: list[tuple[float, int, str, str, str, bytes]] = []
        self.sequence = 0
        self.link_clock: dict[tuple[str, str], float] = {}  # last delivery time per link
        self.cut: set[frozenset[str]] = set()
        self.members: dict[str, Member] = {}
        ids = [f"N{i:07d}" for i in range(size)]
        for node_id in ids:
            files = MemoryFiles()
            files.peer_state = PeerState(tuple(ids), size)
            self.members[node_id] = Member(node_id, MemoryLog(), files)
        for node_id in ids:
            self.start(node_id)

    # ----- nodes
    def clock(self) -> float:
        return self.now

    def start(self, node_id: str) -> None:
        member = self.members[node_id]
        files = member.files
        term, vote = files.term_vote
        assert files.peer_state is not None
        member.committed = {}
        member.leads = False
        member.node = RaftNode(
            node_id,
            GROUP,
            member.log,
            files,
            files.peer_state,
            term=term,
            vote=vote,
            clock=self.clock,
            rng=random.Random(self.rng.getrandbits(32)),
            timings=self.timings,
            snapshot=files.snapshot,
        )
        node = member.node
        member.subjects = {
            node.vote_subject,
            node.append_subject,
            node.proposal_subject,
            node.remove_peer_subject,
            node.vote_reply,
            node.append_reply,
        }
        self.drain(member)

    def crash(self, node_id: str) -> None:
        member = self.members[node_id]
        member.node = None
        member.subjects = set()

    def live(self) -> list[Member]:
        return [m for m in self.members.values() if m.node is not None]

    def leaders(self) -> list[Member]:
        return [m for m in self.live() if m.node is not None and m.node.is_leader]

    # ----- links
    def partition(self, *sides: set[str]) -> None:
        for i, a_side in enumerate(sides):
            for b_side in sides[i + 1 :]:
                self.cut |= {frozenset((a, b)) for a in a_side for b in b_side}

    def heal(self) -> None:
        self.cut.clear()

    # ----- traffic
    def publish(self, source: str, message: Publish) -> None:
        for member in self.members.values():
            if member.id == source or message.subject not in member.subjects:
                continue
            if frozenset((source, member.id)) in self.cut or self.rng.random() < self.drop:
                continue
            self.sequence += 1
            # NATS keeps the order of one publisher's messages to one subscriber.
            link = (source, member.id)
            at = max(
                self.now + self.rng.uniform(0.0005, self.max_delay), self.link_clock.get(link, 0.0)
            )
            self.link_clock[link] = at
            heapq.heappush(
                self.queue,
                (at, self.sequence, member.id, message.subject, message.reply, message.payload),
            )

    def drain(self, member: Member) -> None:
        node = member.node
        while node is not None and (outputs := node.take_outputs()):
            for output in outputs:
                if isinstance(output, Publish):
                    self.publish(member.id, output)
                elif isinstance(output, Subscribe):
                    member.subjects.add(output.subject)
                elif isinstance(output, Unsubscribe):
                    member.subjects.discard(output.subject)
                elif isinstance(output, Committed):
                    self.record(member, output)
                elif isinstance(output, LeaderChanged):
                    member.leads = output.is_leader
            if node.state is RaftState.LEADER:
                self.leaders_by_term.setdefault(node.term, set()).add(member.id)

    def record(self, member: Member, committed: Committed) -> None:
        assert member.node is not None
        if any(e.type == EntryType.SNAPSHOT for e in committed.entries):
            # The state up to the index, in place of the entries (checked by `agreed`).
            member.node.on_applied(committed.index)
            return
        normal = tuple(e for e in committed.entries if e.type == EntryType.NORMAL)
        # State machine safety: one index, one content, on every node and across restarts.
        before = self.history.setdefault(committed.index, normal)
        assert before == normal, (member.id, committed.index, before, normal)
        member.committed[committed.index] = normal
        assert member.node is not None
        member.node.on_applied(committed.index)

    def deliver(self, member: Member, subject: str, reply: str, payload: bytes) -> None:
        node = member.node
        if node is None or subject not in member.subjects:
            return
        if subject == node.vote_subject:
            node.handle_vote_request(decode_vote_request(payload), reply)
        elif subject == node.append_subject:
            node.handle_append_entry(decode_append_entry(payload), reply)
        elif subject == node.proposal_subject:
            if node.is_leader:
                node.handle_forwarded_proposal(payload, reply)
        elif subject == node.remove_peer_subject:
            if node.is_leader:
                node.handle_forwarded_remove_peer(payload)
        elif subject == node.vote_reply:
            node.handle_vote_response(decode_vote_response(payload))
        elif subject == node.append_reply:
            node.handle_append_entry_response(decode_append_entry_response(payload), reply)
        else:
            node.handle_catchup_entry(decode_append_entry(payload), subject, reply)
        self.drain(member)

    def run_until(self, until: float) -> None:
        while True:
            deadlines = [(m.node.next_deadline(), m.id) for m in self.live() if m.node is not None]
            next_timer = min(deadlines) if deadlines else (float("inf"), "")
            next_message = self.queue[0][0] if self.queue else float("inf")
            at = min(next_timer[0], next_message)
            if at > until:
                self.now = until
                return
            self.now = max(self.now, at)
            if next_message <= next_timer[0]:
                _, _, dest, subject, reply, payload = heapq.heappop(self.queue)
                self.deliver(self.members[dest], subject, reply, payload)
            else:
                member = self.members[next_timer[1]]
                assert member.node is not None
                member.node.tick()
                self.drain(member)

    def run_for(self, seconds: float) -> None:
        self.run_until(self.now + seconds)

    def wait_for_leader(self, limit: float = 60.0) -> Member:
        deadline = self.now + limit
        while self.now < deadline:
            leaders = [m for m in self.leaders() if m.leads]
            if len(leaders) == 1:
                return leaders[0]
            self.run_for(0.25)
        raise AssertionError(f"no leader within {limit} s")

    def propose(self, data: bytes) -> bool:
        leaders = [m for m in self.leaders() if m.leads]
        if not leaders or leaders[0].node is None:
            return False
        accepted = leaders[0].node.propose((Entry(EntryType.NORMAL, data),))
        self.drain(leaders[0])
        return accepted
