"""One member of a RAFT group, as nats-server's `raft` runs it (`server/raft.go`), sans-IO.

Messages come in decoded (`handle_*`), time comes from an injected clock, and what the node
wants done goes out through `take_outputs()`: messages to publish, catch-up inboxes to
subscribe to or drop, committed entries for the upper layer, and leader changes. The transport
calls `tick()` at `next_deadline()`. The log and the group's small files are injected too
(`RaftLog`, `GroupFiles`), so a test drives a whole group in one thread with a fake clock.

The rules are nats-server's, named after its functions where they live:
- terms and votes (`processVoteRequest`, `runAsCandidate`): a vote is durable before it is
  granted; a candidate that heard only empty logs from everyone may still lead;
- append entries (`processAppendEntry`): the consistency check on (pterm, pindex), truncation
  of a conflicting tail, catch-up through a private inbox when the follower is behind, and a
  response only to entries that came on the group's own subject (never to catch-up traffic);
- commits (`trackResponse`, `tryCommit`): only responses in the leader's own term count,
  and committing an index commits everything before it;
- membership (`sendMembershipChange`, `trackPeer`): one change at a time, applied to the peer
  set when stored and made official when committed; a leader adds a peer it hears from;
- leadership: heartbeats every second while idle, a step-down when a quorum has not been heard
  from for 10 s, a transfer by an EntryLeaderTransfer entry, and the upper layer told it leads
  only after it has applied everything up to its first entry of the term (`aflr`).

Left out for now (nats-server has them): apply pausing under overload, the quorum rescue, the
scale-up observer, account-scoped NRG traffic.
"""

from __future__ import annotations

import contextlib
import logging
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from enum import IntEnum
from typing import Protocol

from pynatsd.raft.log import RaftLog
from pynatsd.raft.wire import (
    ID_LEN,
    NO_PEER,
    AppendEntry,
    AppendEntryResponse,
    Entry,
    EntryType,
    PeerState,
    VoteRequest,
    VoteResponse,
    WireError,
    decode_peer_state,
    encode_append_entry,
    encode_append_entry_response,
    encode_peer_state,
    encode_vote_request,
    encode_vote_response,
)

log = logging.getLogger("pynatsd.raft")

# nats-server's timings (raft.go), in seconds.
MIN_ELECTION_TIMEOUT = 4.0
MAX_ELECTION_TIMEOUT = 9.0
MIN_CAMPAIGN_TIMEOUT = 0.1
MAX_CAMPAIGN_TIMEOUT = 0.8
HEARTBEAT_INTERVAL = 1.0
LOST_QUORUM_INTERVAL = 10.0
LOST_QUORUM_CHECK = 10.0
OBSERVER_INTERVAL = 48 * 3600.0
CATCHUP_ACTIVITY = 2.0  # a leader's catch-up run ends after this long without progress
CATCHUP_STALLED = 2.0  # a follower asks again after this long without progress
CATCHUP_MAX_OUTSTANDING = 2 * 1024 * 1024
PEER_REMOVE_TIMEOUT = 300.0  # a removed peer may rejoin after five minutes
TRANSFER_CAMPAIGN = 0.01

CATCHUP_ACK_PREFIX = "$NRG.CP."  # where nats-server 2.15.1 wants catch-up entries acked
INBOX_DIGITS = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
INBOX_SUFFIX_LEN = 8  # replySuffixLen


class RaftState(IntEnum):
    FOLLOWER = 0
    LEADER = 1
    CANDIDATE = 2
    CLOSED = 3


@dataclass(frozen=True, slots=True)
class Timings:
    """The group's timers; tests shrink them, the defaults are nats-server's."""

    min_election: float = MIN_ELECTION_TIMEOUT
    max_election: float = MAX_ELECTION_TIMEOUT
    min_campaign: float = MIN_CAMPAIGN_TIMEOUT
    max_campaign: float = MAX_CAMPAIGN_TIMEOUT
    heartbeat: float = HEARTBEAT_INTERVAL
    lost_quorum: float = LOST_QUORUM_INTERVAL
    lost_quorum_check: float = LOST_QUORUM_CHECK
    catchup_activity: float = CATCHUP_ACTIVITY
    catchup_stalled: float = CATCHUP_STALLED

    def scaled(self, factor: float) -> Timings:
        return Timings(*(getattr(self, name) * factor for name in self.__dataclass_fields__))


NATS_TIMINGS = Timings()  # nats-server's own


class GroupFiles(Protocol):
    """The group directory's small durable records (`peers.idx`, `tav.idx`, snapshots)."""

    def write_term_vote(self, term: int, vote: str) -> None: ...
    def write_peer_state(self, state: PeerState) -> None: ...
    def write_snapshot(self, term: int, index: int, peer_state: bytes, data: bytes) -> None: ...
    def latest_snapshot(self) -> tuple[int, int, bytes, bytes] | None:
        """(term, index, peer state, data) of the newest intact snapshot."""
        ...


class MemoryFiles:
    """GroupFiles kept in memory (memory groups, and tests)."""

    def __init__(self) -> None:
        self.term_vote: tuple[int, str] = (0, NO_PEER)
        self.peer_state: PeerState | None = None
        self.snapshot: tuple[int, int, bytes, bytes] | None = None

    def write_term_vote(self, term: int, vote: str) -> None:
        self.term_vote = (term, vote)

    def write_peer_state(self, state: PeerState) -> None:
        self.peer_state = state

    def write_snapshot(self, term: int, index: int, peer_state: bytes, data: bytes) -> None:
        self.snapshot = (term, index, peer_state, data)

    def latest_snapshot(self) -> tuple[int, int, bytes, bytes] | None:
        return self.snapshot


# What the node asks of its transport and upper layer.
@dataclass(frozen=True, slots=True)
class Publish:
    subject: str
    reply: str
    payload: bytes


@dataclass(frozen=True, slots=True)
class Subscribe:
    """Listen on a catch-up inbox; what arrives there goes to `handle_catchup_entry`."""

    subject: str


@dataclass(frozen=True, slots=True)
class Unsubscribe:
    subject: str


@dataclass(frozen=True, slots=True)
class Committed:
    """Entries committed at `index` for the upper layer (nats-server's CommittedEntry); the
    upper layer calls `on_applied(index)` once it has applied them."""

    index: int
    entries: tuple[Entry, ...]


@dataclass(frozen=True, slots=True)
class LeaderChanged:
    """The upper layer may act as leader (or must stop): nats-server's leadChange."""

    is_leader: bool


Output = Publish | Subscribe | Unsubscribe | Committed | LeaderChanged


@dataclass(slots=True)
class PeerProgress:
    """lps: when we last heard from a peer, and the last index it has (leader only)."""

    heard: float = 0.0  # ts
    last_index: int = 0  # li


@dataclass(slots=True)
class _MembershipChange:
    index: int  # the log index of the change
    peer: str
    prev: PeerProgress | None  # set for a removal: what to put back if it is truncated


@dataclass(slots=True)
class _FollowerCatchup:
    """catchupState: we asked the leader for the entries after (pterm, pindex)."""

    inbox: str
    cterm: int  # the leader's (pterm, pindex) when we asked: done once we reach it
    cindex: int
    pterm: int  # our position at the last sign of progress
    pindex: int
    active: float


@dataclass(slots=True)
class _LeaderCatchup:
    """runCatchup: entries streamed to one follower's inbox, at most 2 MiB unacknowledged."""

    inbox: str
    last: int  # our last index when the run began
    term: int
    next: int = 0
    outstanding: dict[int, int] = field(default_factory=dict)
    total: int = 0
    deadline: float = 0.0


def new_inbox(prefix: str, rng: random.Random) -> str:
    """A reply inbox as nats-server names it: 8 base-62 digits of a random 64-bit number."""
    value = rng.getrandbits(64)
    digits = bytearray()
    for _ in range(INBOX_SUFFIX_LEN):
        digits.append(INBOX_DIGITS[value % 62])
        value //= 62
    return prefix + digits.decode()


class RaftNode:
    """One group member. Not thread-safe: one owner feeds it."""

    def __init__(
        self,
        node_id: str,
        group: str,
        log_: RaftLog,
        files: GroupFiles,
        peer_state: PeerState,
        *,
        term: int = 0,
        vote: str = NO_PEER,
        clock: Callable[[], float],
        rng: random.Random | None = None,
        timings: Timings = NATS_TIMINGS,
        observer: bool = False,
        managed: bool = False,
        recovering: bool = True,
        snapshot: tuple[int, int, bytes, bytes] | None = None,
    ) -> None:
        if len(node_id) != ID_LEN:
            raise ValueError(f"raft: node id must be {ID_LEN} characters: {node_id!r}")
        self.id = node_id
        self.group = group
        self.log = log_
        self.files = files
        self.clock = clock
        self.rng = rng or random.Random()
        self.timings = timings
        self.observer = observer
        self.managed = managed  # peers are added by the meta layer, not when heard from
        self.state = RaftState.FOLLOWER
        self.term, self.vote = term, vote
        self.leader = NO_PEER
        self.had_leader = False  # pleader
        self.pterm = self.pindex = 0  # the term and index of our last entry
        self.commit = self.applied = self.processed = 0
        self.papplied = 0  # the index our last snapshot covers
        self.snapshot_term = 0  # and the term of that index
        self.peers: dict[str, PeerProgress] = {}
        self.cluster_size = 0  # csz
        self.quorum = 1  # qn
        self.domain_ext = peer_state.domain_ext
        self.removed: dict[str, float] = {}
        self.acks: dict[int, set[str]] = {}
        self.membership_change: _MembershipChange | None = None
        self.leader_floor = 0  # aflr: tell the upper layer it leads once this is processed
        self.leader_transfer = False  # lxfer
        self.initializing = False
        self.paused = False  # the upper layer holds its applies (a stream catching up)
        self.votes: set[str] = set()
        self.empty_votes: set[str] = set()
        self.catchup: _FollowerCatchup | None = None
        self.progress: dict[str, _LeaderCatchup] = {}
        self.outputs: list[Output] = []
        self.vote_subject = f"$NRG.V.{group}"
        self.append_subject = f"$NRG.AE.{group}"
        self.proposal_subject = f"$NRG.P.{group}"
        self.remove_peer_subject = f"$NRG.RP.{group}"
        self.vote_reply = new_inbox("$NRG.R.", self.rng)
        self.append_reply = new_inbox("$NRG.R.", self.rng)
        now = clock()
        self.active = now  # our last append entry sent (leader)
        self.last_lost_quorum_signal = now  # llqrt
        self.last_scale_up = 0.0  # lsut
        self.elect_at = now
        self.heartbeat_at = self.lost_quorum_at = 0.0
        if snapshot is not None:
            self._restore_snapshot(*snapshot)
        if not self.peers:
            self._process_peer_state(peer_state, write=False)
        self._replay()
        self._reset_election_timeout()
        if not recovering and self.pindex == 0:
            self.initializing = True

    # ----- what the owner reads
    @property
    def is_leader(self) -> bool:
        return self.state is RaftState.LEADER

    def take_outputs(self) -> list[Output]:
        outputs, self.outputs = self.outputs, []
        return outputs

    def next_deadline(self) -> float:
        deadlines = [self.elect_at]
        if self.state is RaftState.LEADER:
            deadlines += [self.heartbeat_at, self.lost_quorum_at]
            deadlines += [run.deadline for run in self.progress.values()]
        return min(deadlines)

    def peer_names(self) -> list[str]:
        return list(self.peers)

    def current(self) -> bool:
        """isCurrent, simply: a leader, or a follower with a leader that has applied all."""
        if self.state is RaftState.CLOSED or self.commit == 0:
            return False
        if self.state is RaftState.LEADER:
            return True
        return self.leader != NO_PEER and self.catchup is None and self.applied >= self.commit

    # ----- start-up
    def _restore_snapshot(self, term: int, index: int, peer_state: bytes, data: bytes) -> None:
        """setupLastSnapshot: the snapshot is where the log now starts; the upper layer gets
        its data as a committed EntrySnapshot before anything replayed after it."""
        self.pterm, self.pindex = term, index
        self.commit = self.applied = self.processed = self.papplied = index
        self.snapshot_term = term
        try:
            self._process_peer_state(decode_peer_state(peer_state), write=False)
        except WireError:
            log.warning("RAFT [%s - %s] Snapshot peer state is corrupt", self.id, self.group)
        self.outputs.append(Committed(index, (Entry(EntryType.SNAPSHOT, data),)))

    def _replay(self) -> None:
        """Entries in the log that were committed but maybe not applied are replayed (with no
        responses) so the upper layer is where it was; a misaligned first entry or a gap cuts
        the log there, as nats-server truncates a corrupt WAL."""
        first, last = self.log.first_index, self.log.last_index
        for index in range(first, last + 1):
            ae = self.log.get(index)
            if index == first and (ae is None or ae.pindex != self.pindex):
                log.warning("RAFT [%s - %s] Misaligned WAL, will truncate", self.id, self.group)
                self.log.truncate_after(self.pindex)
                return
            if ae is None or ae.pindex != index - 1:
                log.warning("RAFT [%s - %s] Corrupt WAL, will truncate", self.id, self.group)
                self.log.truncate_after(index - 1)
                return
            if index == first and ae.commit > self.commit:
                self.commit = min(ae.commit, last)
            self._process_append_entry(ae, source=None)

    # ----- timers
    def _reset_election_timeout(self) -> None:
        timings = self.timings
        self._reset_elect(self.rng.uniform(timings.min_election, timings.max_election))

    def _reset_elect(self, delay: float) -> None:
        self.elect_at = self.clock() + delay

    def tick(self) -> None:
        """Fire whatever is due (the transport calls this at `next_deadline()`)."""
        now = self.clock()
        if self.state is RaftState.LEADER:
            if now >= self.heartbeat_at:
                if now - self.active >= self.timings.heartbeat:
                    self._send_append_entry(())
                self.heartbeat_at = now + self.timings.heartbeat
            for peer, run in list(self.progress.items()):
                if now >= run.deadline:
                    self._end_catchup_run(peer)
            if now >= self.lost_quorum_at:
                self.lost_quorum_at = now + self.timings.lost_quorum_check
                if self._lost_quorum(now):
                    log.warning("RAFT [%s - %s] Lost quorum, stepping down", self.id, self.group)
                    self._step_down(NO_PEER)
                    return
        if now >= self.elect_at:
            self._election_timer_fired()

    def _election_timer_fired(self) -> None:
        if self.state is RaftState.LEADER:
            self._reset_election_timeout()
        elif self.observer:
            self._reset_elect(OBSERVER_INTERVAL)
        elif self.catchup is not None:
            if self._catchup_stalled():
                self._cancel_catchup()
            self._reset_election_timeout()
        else:
            self._switch_to_candidate()

    # ----- votes
    def handle_vote_request(self, vr: VoteRequest, reply: str) -> None:
        """processVoteRequest."""
        response_empty = self.pindex == 0
        if vr.term < self.term:
            self._reply(
                reply, encode_vote_response(VoteResponse(self.term, self.id, False, response_empty))
            )
            return
        if vr.term > self.term:
            if self.state is not RaftState.FOLLOWER:
                self._step_down(NO_PEER)
            self._cancel_catchup()
            self.term, self.vote = vr.term, NO_PEER
            self._write_term_vote()
            self._update_leader(NO_PEER)
        vote_ok = self.vote in (NO_PEER, vr.candidate)
        if vote_ok and response_empty and self.initializing:
            response_empty = False
        granted = False
        up_to_date = vr.last_term > self.pterm or (
            vr.last_term == self.pterm and vr.last_index >= self.pindex
        )
        if vote_ok and up_to_date:
            self.term, self.vote = vr.term, vr.candidate
            self._write_term_vote()
            granted = True
            self._reset_election_timeout()
        elif self.vote == NO_PEER and self.state is not RaftState.CANDIDATE:
            # Our log is ahead of theirs: campaign sooner ourselves.
            self._reset_elect(
                self.rng.uniform(self.timings.min_campaign, self.timings.max_campaign)
            )
        self._reply(
            reply, encode_vote_response(VoteResponse(self.term, self.id, granted, response_empty))
        )

    def handle_vote_response(self, vr: VoteResponse) -> None:
        """runAsCandidate's vote counting; a leader steps down on a higher term."""
        if self.state is RaftState.LEADER:
            if vr.term > self.term:
                self._step_down(NO_PEER)
            return
        if self.state is not RaftState.CANDIDATE:
            return
        if vr.granted and vr.term == self.term:
            self._track_peer(vr.peer)
            if self._should_count_vote(vr.peer):
                (self.empty_votes if vr.empty else self.votes).add(vr.peer)
            if len(self.votes) >= self.quorum or (
                len(self.votes) + len(self.empty_votes) == self.cluster_size
            ):
                self._switch_to_leader()
        elif vr.term > self.term:
            self.term, self.vote = vr.term, NO_PEER
            self._write_term_vote()
            self.leader_transfer = False
            self._step_down(NO_PEER)

    def _should_count_vote(self, peer: str) -> bool:
        # While bootstrapping we may know fewer peers than the cluster size.
        return peer in self.peers or len(self.peers) < self.cluster_size

    def _switch_to_candidate(self) -> None:
        if self.observer or self.paused or self.processed < self.commit:
            self._reset_elect(self.timings.min_election / 4)
            return
        change = self.membership_change
        if change is not None and change.peer == self.id:
            self._update_leader(NO_PEER)
            self._reset_elect(self.timings.min_election)
            return
        self.term += 1
        self.vote = NO_PEER
        self._update_leader(NO_PEER)
        self._switch_state(RaftState.CANDIDATE)
        # requestVote: our own vote is durable before we ask for any.
        self.vote = self.id
        self._write_term_vote()
        self.votes, self.empty_votes = set(), set()
        request = VoteRequest(self.term, self.pterm, self.pindex, self.id)
        self.outputs.append(
            Publish(self.vote_subject, self.vote_reply, encode_vote_request(request))
        )
        self.handle_vote_response(VoteResponse(self.term, self.id, True))

    # ----- state changes
    def _switch_state(self, state: RaftState) -> None:
        """switchState: every change restarts the election timer and leaves term and vote
        on disk."""
        previous = self.state
        if previous is RaftState.CLOSED:
            return
        self.state = state
        self._reset_election_timeout()
        if previous is RaftState.LEADER and state is not RaftState.LEADER:
            self.outputs.append(LeaderChanged(False))
            for peer in list(self.progress):
                self._end_catchup_run(peer)
        self._write_term_vote()

    def _switch_to_follower(self, leader: str) -> None:
        self.leader_floor = 0
        self.leader_transfer = False
        self.acks.clear()
        self._update_leader(leader)
        self._switch_state(RaftState.FOLLOWER)

    def _step_down(self, new_leader: str) -> None:
        self._switch_to_follower(new_leader)

    def _switch_to_leader(self) -> None:
        self.leader_transfer = False
        self._update_leader(self.id)
        self._switch_state(RaftState.LEADER)
        now = self.clock()
        self.heartbeat_at = now + self.timings.heartbeat
        self.lost_quorum_at = now + self.timings.lost_quorum_check
        # Our first entry of the term is the peer state (a no-op in RAFT terms); we tell the
        # upper layer it leads once everything up to it is applied.
        self._send_append_entry(
            (Entry(EntryType.PEER_STATE, encode_peer_state(self._peer_state())),)
        )
        self.leader_floor = self.pindex

    def _update_leader(self, leader: str) -> None:
        was_leader = self.leader == self.id
        self.leader = leader
        if leader != NO_PEER:
            self.had_leader = True
        if leader != self.id and not was_leader:
            for peer, progress in self.peers.items():
                progress.last_index = 0
                if peer != leader:
                    progress.heard = 0.0

    def step_down(self, preferred: str = NO_PEER) -> bool:
        """StepDown: hand the lead to `preferred` (or to the first healthy follower) with an
        EntryLeaderTransfer, then follow. False when we do not lead."""
        if self.state is not RaftState.LEADER:
            return False
        now = self.clock()

        def healthy(peer: str) -> bool:
            progress = self.peers.get(peer)
            return progress is not None and now - progress.heard < self.timings.heartbeat * 3

        target = (
            preferred if preferred not in (NO_PEER, self.id) and healthy(preferred) else NO_PEER
        )
        if target == NO_PEER:
            target = next((p for p in self.peers if p != self.id and healthy(p)), NO_PEER)
        if target != NO_PEER:
            self._send_append_entry((Entry(EntryType.LEADER_TRANSFER, target.encode()),))
        self._step_down(NO_PEER)
        return True

    def campaign(self) -> None:
        """Campaign: stand for election soon (a short random delay)."""
        if self.state is not RaftState.LEADER:
            self._reset_elect(
                self.rng.uniform(self.timings.min_campaign, self.timings.max_campaign)
            )

    def close(self) -> None:
        if self.state is RaftState.LEADER:
            self.outputs.append(LeaderChanged(False))
        self._cancel_catchup()
        self.state = RaftState.CLOSED

    # ----- proposals (leader)
    def propose(self, entries: Sequence[Entry]) -> bool:
        """Propose and ProposeMulti: False when we do not lead (the caller forwards)."""
        if self.state is not RaftState.LEADER:
            return False
        normal = [e for e in entries if not e.changes_membership]
        for entry in entries:
            if entry.changes_membership:
                self._send_membership_change(entry)
        if normal:
            self._send_append_entry(tuple(normal))
        return True

    def forward_proposal(self, data: bytes) -> None:
        """ForwardProposal: a follower sends it to the leader's `$NRG.P.<group>`."""
        if self.state is RaftState.LEADER:
            self.propose((Entry(EntryType.NORMAL, data),))
        else:
            self.outputs.append(Publish(self.proposal_subject, "", data))

    def handle_forwarded_proposal(self, data: bytes, reply: str) -> None:
        if self.propose((Entry(EntryType.NORMAL, data),)) and reply:
            self._reply(reply, b"")

    def propose_add_peer(self, peer: str) -> bool:
        if self.state is not RaftState.LEADER or self.membership_change is not None:
            return False
        return self._send_membership_change(Entry(EntryType.ADD_PEER, peer.encode()))

    def propose_remove_peer(self, peer: str) -> bool:
        """ProposeRemovePeer: a follower forwards it to the leader's `$NRG.RP.<group>`."""
        if self.state is not RaftState.LEADER:
            self.outputs.append(Publish(self.remove_peer_subject, "", peer.encode()))
            return True
        if self.membership_change is not None or peer not in self.peers or len(self.peers) <= 1:
            return False
        return self._send_membership_change(Entry(EntryType.REMOVE_PEER, peer.encode()))

    def handle_forwarded_remove_peer(self, data: bytes) -> None:
        if len(data) == ID_LEN:
            self.propose_remove_peer(data.decode("latin-1"))

    def _send_membership_change(self, entry: Entry) -> bool:
        if not entry.changes_membership or self.membership_change is not None:
            return False
        peer = entry.data.decode("latin-1")
        existing = self.peers.get(peer)
        adding = entry.type == EntryType.ADD_PEER
        if (adding and existing is not None) or (not adding and existing is None):
            return False
        self.membership_change = _MembershipChange(
            self.pindex + 1, peer, None if adding else existing
        )
        if not self._send_append_entry((entry,)):
            self.membership_change = None
            return False
        if adding:
            if peer not in self.peers:
                self.peers[peer] = PeerProgress()
                self._adjust_cluster_size()
        elif peer in self.peers:
            del self.peers[peer]
            self._adjust_cluster_size()
            if self.quorum <= 1:
                self._try_commit(self.pindex)
        return True

    # ----- append entries (leader side)
    def _send_append_entry(self, entries: tuple[Entry, ...]) -> bool:
        """sendAppendEntryLocked: stored first (when it has entries), then sent to all."""
        if self.state is not RaftState.LEADER:
            return False
        ae = AppendEntry(self.id, self.term, self.commit, self.pterm, self.pindex, entries)
        payload = encode_append_entry(ae)
        if entries:
            if not self._store(ae):
                return False
            self.active = self.clock()
        self.outputs.append(Publish(self.append_subject, self.append_reply, payload))
        if self.quorum <= 1:
            self._try_commit(self.pindex)
        return True

    def _store(self, ae: AppendEntry) -> bool:
        """storeToWAL: a store at the wrong index resets the log rather than diverge."""
        if ae.pindex != self.log.last_index:
            log.warning(
                "RAFT [%s - %s] Wrong index, ae is %s, log ends at %d, will reset",
                self.id,
                self.group,
                ae,
                self.log.last_index,
            )
            if self.state is RaftState.LEADER:
                self._step_down(self._select_next_leader())
            self._truncate_log(0, 0)
            self._cancel_catchup()
            return False
        self.log.append(ae)
        self.pterm, self.pindex = ae.term, ae.pindex + 1
        return True

    def handle_append_entry_response(self, ar: AppendEntryResponse, reply: str) -> None:
        """processAppendEntryResponse."""
        self._track_peer(ar.peer)
        if ar.success:
            if self._track_response(ar) and self._try_commit(ar.index):
                # A heartbeat now lets followers apply without waiting for the next entry.
                self._send_append_entry(())
        elif reply:
            self._catchup_follower(ar, reply)
        elif ar.term > self.term:
            log.warning(
                "RAFT [%s - %s] Detected another leader with higher term, will stepdown",
                self.id,
                self.group,
            )
            self.term, self.vote = ar.term, NO_PEER
            self._write_term_vote()
            self._step_down(NO_PEER)

    def _track_peer(self, peer: str) -> None:
        """trackPeer: a leader adds a peer it has not seen (unless removed lately)."""
        now = self.clock()
        removed_at = self.removed.get(peer)
        if removed_at is not None and now - removed_at >= PEER_REMOVE_TIMEOUT:
            removed_at = None
        progress = self.peers.get(peer)
        if progress is not None:
            progress.heard = now
        elif self.state is RaftState.LEADER and not self.managed and removed_at is None:
            self.propose_add_peer(peer)

    def _track_response(self, ar: AppendEntryResponse) -> bool:
        if self.state is not RaftState.LEADER:
            return False
        progress = self.peers.get(ar.peer)
        if progress is not None and ar.index > progress.last_index:
            progress.last_index = ar.index
        if ar.peer in self.progress:
            self._catchup_progress(ar.peer, ar.index)
        # Only a response for an entry of our own term counts (RAFT's commit rule).
        if ar.index <= self.commit or ar.term != self.term or progress is None:
            return False
        self.acks.setdefault(ar.index, set()).add(ar.peer)
        return True

    def _try_commit(self, index: int) -> bool:
        acks = len(self.acks.get(index, ()))
        if self.id in self.peers:
            acks += 1
        if acks < self.quorum:
            return False
        return all(self._apply_commit(i) for i in range(self.commit + 1, index + 1))

    def _apply_commit(self, index: int) -> bool:
        """applyCommit: the entry at `index` is committed; membership changes take effect."""
        if self.state is RaftState.CLOSED:
            return False
        if index <= self.commit:
            return True
        self.acks.pop(index, None)
        if index <= self.papplied:
            return True
        ae = self.log.get(index)
        if ae is None:
            log.warning(
                "RAFT [%s - %s] Got an error loading %d index - will reset",
                self.id,
                self.group,
                index,
            )
            if self.state is RaftState.LEADER:
                self._step_down(self._select_next_leader())
            self._truncate_log(0, 0)
            self._cancel_catchup()
            return False
        self.commit = index
        committed: list[Entry] = []
        removed_self = False
        for entry in ae.entries:
            kind = entry.type
            if kind == EntryType.NORMAL:
                committed.append(entry)
            elif kind == EntryType.OLD_SNAPSHOT:
                committed.append(Entry(EntryType.SNAPSHOT, entry.data))
            elif kind == EntryType.SNAPSHOT:
                committed.append(entry)
            elif kind == EntryType.PEER_STATE:
                if self.state is not RaftState.LEADER:
                    with contextlib.suppress(WireError):
                        self._process_peer_state(decode_peer_state(entry.data))
            elif kind in (EntryType.ADD_PEER, EntryType.REMOVE_PEER):
                if self.membership_change is None and self.state is RaftState.LEADER:
                    continue
                peer = entry.data.decode("latin-1")
                if kind == EntryType.ADD_PEER:
                    self._add_peer(peer)
                else:
                    self._remove_peer(peer)
                    removed_self = peer == self.id and self.state is RaftState.LEADER
                committed.append(entry)
                self.membership_change = None
        self.outputs.append(Committed(index, tuple(committed)))
        if removed_self:
            self.step_down()
            self.close()
            return False
        return True

    def _select_next_leader(self) -> str:
        best, best_index = NO_PEER, 0
        for peer, progress in self.peers.items():
            if peer != self.id and progress.last_index > best_index:
                best, best_index = peer, progress.last_index
        return best

    def _lost_quorum(self, now: float) -> bool:
        if self.last_scale_up and now - self.last_scale_up < self.timings.lost_quorum:
            return False
        heard = sum(
            1
            for peer, progress in self.peers.items()
            if peer == self.id or now - progress.heard < self.timings.lost_quorum
        )
        return heard < self.quorum

    # ----- catch-up (leader side)
    def _catchup_follower(self, ar: AppendEntryResponse, inbox: str) -> None:
        """catchupFollower: a follower behind us asked, on `inbox`, for what follows its
        (term, index); a snapshot first when our log no longer holds it."""
        if self.state is not RaftState.LEADER:
            return
        self.progress.pop(ar.peer, None)
        start = ar.index + 1
        first, last = self.log.first_index, self.log.last_index
        if start < first or (first > last and start <= last):
            sent = self._send_snapshot_to(inbox)
            if sent is None:
                return
            start = sent + 1
            if first > last or start > last:
                return
        if self.log.get(start) is None:
            log.warning(
                "RAFT [%s - %s] Request from follower for entry at index [%d] not found",
                self.id,
                self.group,
                start,
            )
            self._step_down(NO_PEER)
            return
        run = _LeaderCatchup(inbox, last, self.term, next=start - 1)
        run.deadline = self.clock() + self.timings.catchup_activity
        self.progress[ar.peer] = run
        if self._send_catchup_entries(run):
            self._end_catchup_run(ar.peer)

    def _send_snapshot_to(self, inbox: str) -> int | None:
        latest = self.files.latest_snapshot()
        if latest is None:
            self._step_down(NO_PEER)
            return None
        term, index, peer_state, data = latest
        fp_index = self.log.first_index - 1
        if index < fp_index and self.log.first_index != 0:
            index = fp_index
        ae = AppendEntry(
            self.id,
            self.term,
            self.commit,
            term,
            index,
            (Entry(EntryType.SNAPSHOT, data), Entry(EntryType.PEER_STATE, peer_state)),
        )
        self.outputs.append(Publish(inbox, self.append_reply, encode_append_entry(ae)))
        return index

    def _send_catchup_entries(self, run: _LeaderCatchup) -> bool:
        """sendNext: True once everything up to `run.last` is sent."""
        while run.total <= CATCHUP_MAX_OUTSTANDING:
            run.next += 1
            if run.next > run.last:
                return True
            ae = self.log.get(run.next)
            if ae is None:
                return True
            payload = encode_append_entry(
                AppendEntry(
                    ae.leader, ae.term, ae.commit, ae.pterm, ae.pindex, ae.entries, run.term
                )
            )
            run.outstanding[run.next] = len(payload)
            run.total += len(payload)
            self.outputs.append(Publish(run.inbox, self.append_reply, payload))
        return False

    def _catchup_progress(self, peer: str, index: int) -> None:
        run = self.progress[peer]
        run.deadline = self.clock() + self.timings.catchup_activity
        run.total -= run.outstanding.pop(index, 0)
        if index > run.last or self._send_catchup_entries(run):
            self._end_catchup_run(peer)

    def _end_catchup_run(self, peer: str) -> None:
        self.progress.pop(peer, None)
        if self.state is RaftState.LEADER and not self.managed and peer not in self.peers:
            self.propose_add_peer(peer)

    # ----- append entries (follower side)
    def handle_append_entry(self, ae: AppendEntry, reply: str) -> None:
        """An append entry on the group's own subject."""
        self._process_append_entry(ae, source="new", reply=reply)

    def handle_catchup_entry(self, ae: AppendEntry, inbox: str, reply: str) -> None:
        """An append entry on one of our catch-up inboxes."""
        current = self.catchup is not None and self.catchup.inbox == inbox
        self._process_append_entry(ae, source="catchup" if current else "old", reply=reply)

    def _process_append_entry(self, ae: AppendEntry, source: str | None, reply: str = "") -> None:
        """processAppendEntry. `source`: "new" (the group subject), "catchup" (our current
        catch-up inbox), "old" (an inbox we dropped) or None (replaying our own log)."""
        if not self.leader_transfer:
            self._reset_election_timeout()
        if self.state is RaftState.CLOSED:
            return
        lterm = ae.lterm or ae.term
        if self.state is RaftState.LEADER:
            if lterm >= self.term:
                if lterm > self.term:
                    self.term, self.vote = lterm, NO_PEER
                    self._write_term_vote()
                self._step_down(ae.leader)
            else:
                response = AppendEntryResponse(self.term, self.pindex, self.id, False)
                self._send(reply, "", encode_append_entry_response(response))
                return
        if self.state is RaftState.CANDIDATE and lterm >= self.term:
            if lterm > self.term:
                self.term, self.vote = lterm, NO_PEER
                self._write_term_vote()
            self._step_down(ae.leader)
            self.outputs.append(LeaderChanged(False))

        catching_up = self.catchup is not None
        is_new = source == "new"
        if source == "old" and (ae.lterm == 0 or ae.pindex < self.pindex):
            return
        if lterm > self.term:
            self.term, self.vote = lterm, NO_PEER
            if is_new:
                self._write_term_vote()
            if self.state is not RaftState.FOLLOWER:
                self._step_down(ae.leader)
        elif lterm < self.term and source is not None and (is_new or ae.lterm != 0):
            if not is_new:
                return
            response = AppendEntryResponse(self.term, self.pindex, self.id, False)
            self._send(reply, "", encode_append_entry_response(response))
            return

        if catching_up:
            cs = self.catchup
            assert cs is not None
            if self.pterm >= cs.cterm and self.pindex >= cs.cindex:
                self._cancel_catchup()
                catching_up = False
            elif is_new:
                if self._catchup_stalled():
                    inbox = self._create_catchup(ae)
                    response = AppendEntryResponse(self.pterm, self.pindex, self.id, False)
                    self._send(reply, inbox, encode_append_entry_response(response))
                return

        if is_new and self.leader != ae.leader and self.state is RaftState.FOLLOWER:
            self._update_leader(ae.leader)
            self._write_term_vote()
            self._reset_election_timeout()
            self.outputs.append(LeaderChanged(False))  # the upper layer learns the new leader
        if is_new and ae.leader != NO_PEER and ae.leader == self.leader:
            progress = self.peers.get(ae.leader)
            if progress is not None:
                progress.heard = self.clock()

        mismatch = ae.pterm != self.pterm or ae.pindex != self.pindex
        if source is not None and mismatch and not self._reconcile(ae, is_new, catching_up, reply):
            return

        if ae.entries:
            if source is not None:
                if not self._store(ae):
                    return
                self.initializing = False
            else:
                self.pterm, self.pindex = ae.term, ae.pindex + 1
        self._note_membership(ae, is_new)

        if ae.commit > self.commit:
            for index in range(self.commit + 1, min(ae.commit, self.pindex) + 1):
                if not self._apply_commit(index):
                    break
        if source is not None and is_new:
            response = AppendEntryResponse(self.pterm, self.pindex, self.id, True)
            self._send(reply, "", encode_append_entry_response(response))
        elif source == "catchup" and reply.startswith(CATCHUP_ACK_PREFIX):
            # nats-server 2.15.1 paces a catch-up by these acks (on `$NRG.CP.<inbox>`); they
            # go to the catch-up's own reply, never to the group's, so they count for no quorum.
            response = AppendEntryResponse(self.pterm, self.pindex, self.id, True)
            self._send(reply, "", encode_append_entry_response(response))

    def _reconcile(self, ae: AppendEntry, is_new: bool, catching_up: bool, reply: str) -> bool:
        """The entry does not follow our last one. True when, after truncating our tail, it
        does; otherwise we answer (or stay silent) as nats-server does and return False."""
        if ae.pindex <= self.pindex:
            success = False
            existing = self.log.get(ae.pindex) if ae.pindex > 0 else None
            if ae.pindex < self.commit:
                success = True  # already committed here
            elif existing is None:
                if ae.pterm == self.pterm and is_new:
                    success = True  # already processed (a restart around a snapshot)
                elif ae.pindex == self.pindex:
                    self._truncate_log(ae.pterm, ae.pindex)  # only the terms differ
                elif ae.pindex == self.papplied and ae.pterm == self.snapshot_term:
                    self._truncate_log(ae.pterm, ae.pindex)  # back to our snapshot
                    if ae.pterm == self.pterm and ae.pindex == self.pindex:
                        return True
                else:
                    self._truncate_log(0, 0)
            elif existing.term == ae.pterm:
                self._truncate_log(ae.pterm, ae.pindex)
                if ae.pterm == self.pterm and ae.pindex == self.pindex:
                    return True
            elif existing.pindex < self.commit:
                success = True
            else:
                self._truncate_log(existing.pterm, existing.pindex)
            if not success:
                self._cancel_catchup()
            # Deliberately no answer: a "success" here could count towards a quorum for
            # entries we do not have.
            return False
        if catching_up:
            # The leader no longer has what we asked for: the first catch-up entry must be
            # its snapshot with its peer state.
            return self._install_leader_snapshot(ae)
        inbox = self._create_catchup(ae)
        response = AppendEntryResponse(self.pterm, self.pindex, self.id, False)
        self._send(reply, inbox, encode_append_entry_response(response))
        return False

    def _install_leader_snapshot(self, ae: AppendEntry) -> bool:
        entries = ae.entries
        if (
            len(entries) != 2
            or entries[0].type != EntryType.SNAPSHOT
            or entries[1].type != EntryType.PEER_STATE
        ):
            log.warning(
                "RAFT [%s - %s] Expected first catchup entry to be a snapshot and peerstate, "
                "will retry",
                self.id,
                self.group,
            )
            self._cancel_catchup()
            return False
        try:
            self._process_peer_state(decode_peer_state(entries[1].data))
        except WireError:
            log.warning(
                "RAFT [%s - %s] Could not parse snapshot peerstate correctly", self.id, self.group
            )
            self._cancel_catchup()
            return False
        self._install_snapshot(ae.pterm, ae.pindex, entries[0].data, reset_log=True)
        self.pterm, self.pindex = ae.pterm, ae.pindex
        self.commit = ae.pindex
        self.initializing = False
        self.outputs.append(Committed(self.commit, entries[:1]))
        return False

    def _note_membership(self, ae: AppendEntry, is_new: bool) -> None:
        """Entries that act when stored: a leader transfer to us, and a membership change,
        which counts from here and becomes official at its commit."""
        for entry in ae.entries:
            if entry.type == EntryType.LEADER_TRANSFER:
                if is_new and entry.data.decode("latin-1") == self.id and not self.observer:
                    self.leader_transfer = True
                    self._reset_elect(TRANSFER_CAMPAIGN)
            elif entry.type == EntryType.ADD_PEER and len(entry.data) == ID_LEN:
                peer = entry.data.decode("latin-1")
                self.membership_change = _MembershipChange(self.pindex, peer, None)
                if peer not in self.peers:
                    self.peers[peer] = PeerProgress()
                self._adjust_cluster_size()
            elif entry.type == EntryType.REMOVE_PEER and len(entry.data) == ID_LEN:
                peer = entry.data.decode("latin-1")
                previous = self.peers.pop(peer, PeerProgress())
                self.membership_change = _MembershipChange(self.pindex, peer, previous)
                self._adjust_cluster_size()

    def _create_catchup(self, ae: AppendEntry) -> str:
        if self.catchup is not None:
            self.outputs.append(Unsubscribe(self.catchup.inbox))
        inbox = new_inbox("$NRG.CR.", self.rng)
        self.catchup = _FollowerCatchup(
            inbox, ae.pterm, ae.pindex, self.pterm, self.pindex, self.clock()
        )
        self.outputs.append(Subscribe(inbox))
        return inbox

    def _cancel_catchup(self) -> None:
        if self.catchup is not None:
            self.outputs.append(Unsubscribe(self.catchup.inbox))
            self.catchup = None

    def _catchup_stalled(self) -> bool:
        cs = self.catchup
        if cs is None:
            return False
        if cs.pindex == self.pindex:
            return self.clock() - cs.active > self.timings.catchup_stalled
        cs.pindex, cs.active = self.pindex, self.clock()
        return False

    def _truncate_log(self, term: int, index: int) -> None:
        """truncateWAL: drop everything after `index`, which then is our last entry."""
        if index < self.commit:
            log.error(
                "RAFT [%s - %s] WAL truncate to %d would lose commits up to %d",
                self.id,
                self.group,
                index,
                self.commit,
            )
        if index == 0 or index < self.log.first_index - 1:
            self.log.reset(index, term)
        else:
            self.log.truncate_after(index)
        self.pterm, self.pindex = term, index
        self.commit = min(self.commit, index)
        self.processed = min(self.processed, self.commit)
        self.applied = min(self.applied, self.processed)
        change = self.membership_change
        if change is not None and change.index > index:
            if change.prev is not None:
                self.peers[change.peer] = change.prev
                self.removed.pop(change.peer, None)
            else:
                self.peers.pop(change.peer, None)
            self._adjust_cluster_size()
            self._write_peer_state()
            self.membership_change = None

    # ----- peers
    def _peer_state(self) -> PeerState:
        return PeerState(tuple(self.peers), self.cluster_size, self.domain_ext)

    def _process_peer_state(self, ps: PeerState, write: bool = True) -> None:
        """processPeerState: the leader's view of the peers replaces ours; peers it dropped
        may not be re-added automatically for a while."""
        self.cluster_size = ps.cluster_size
        self._recalc_quorum()
        old = self.peers
        self.peers = {}
        for peer in ps.known_peers:
            self.peers[peer] = old.pop(peer) if peer in old else PeerProgress()
            self.removed.pop(peer, None)
        now = self.clock()
        for peer in old:
            self.removed[peer] = now
        if write:
            self.files.write_peer_state(ps)

    def _recalc_quorum(self) -> None:
        self.quorum = self.cluster_size // 2 + 1

    def _adjust_cluster_size(self) -> None:
        previous, size = self.cluster_size, len(self.peers)
        self.cluster_size = size
        self._recalc_quorum()
        if size > previous:
            self.last_scale_up = self.clock()

    def _add_peer(self, peer: str) -> None:
        self.removed.pop(peer, None)
        self.peers.setdefault(peer, PeerProgress())
        self._adjust_cluster_size()
        self._write_peer_state()

    def _remove_peer(self, peer: str) -> None:
        self.removed[peer] = self.clock()
        self.peers.pop(peer, None)
        self._adjust_cluster_size()
        self._write_peer_state()

    def _write_peer_state(self) -> None:
        self.files.write_peer_state(self._peer_state())

    def _write_term_vote(self) -> None:
        self.files.write_term_vote(self.term, self.vote)

    # ----- the upper layer's side
    def on_applied(self, index: int) -> None:
        """Applied: the upper layer has applied everything up to `index`."""
        if index > self.commit:
            return
        self.processed = max(self.processed, index)
        self.applied = max(self.applied, index)
        if self.leader_floor and self.processed >= self.leader_floor:
            self.leader_floor = 0
            if self.state is RaftState.LEADER:
                self.outputs.append(LeaderChanged(True))

    def pause_apply(self) -> bool:
        """PauseApply: the upper layer holds what it is given until `resume_apply` (a stream
        catching up from its leader after a snapshot); meanwhile this node does not stand
        for election. False when it leads (the caller steps down first)."""
        if self.state is RaftState.LEADER:
            return False
        if self.state is RaftState.CANDIDATE:
            self._step_down(NO_PEER)
        self.paused = True
        self._reset_elect(OBSERVER_INTERVAL)
        return True

    def resume_apply(self) -> None:
        """ResumeApply: the upper layer is caught up; elections as usual again."""
        if self.paused:
            self.paused = False
            self._reset_election_timeout()

    def install_snapshot(self, data: bytes) -> bool:
        """InstallSnapshot: `data` holds the upper layer's state up to `applied`; the log
        before it is compacted away."""
        if self.applied == 0 or self.applied <= self.papplied:
            return False
        term = self.log.term_at(self.applied)
        if term is None:
            return False
        self._install_snapshot(term, self.applied, data, reset_log=False)
        return True

    def _install_snapshot(self, term: int, index: int, data: bytes, reset_log: bool) -> None:
        peer_state = encode_peer_state(self._peer_state())
        self.files.write_snapshot(term, index, peer_state, data)
        if reset_log:
            self.log.reset(index, term)
        else:
            self.log.compact(index, term)
        self.papplied, self.snapshot_term = index, term

    # ----- sending
    def _send(self, subject: str, reply: str, payload: bytes) -> None:
        if subject:
            self.outputs.append(Publish(subject, reply, payload))

    def _reply(self, subject: str, payload: bytes) -> None:
        self._send(subject, "", payload)
