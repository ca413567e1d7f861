"""NRG's binary encodings, byte for byte as nats-server writes them (`server/raft.go`).

All integers are little-endian. A peer (a node id) is exactly 8 bytes: nats-server's `getHash`
of the server name, for every group the server is in.

- append entry (`appendEntry.encode`): leader[8] term u64 commit u64 pterm u64 pindex u64
  count u16, then per entry: size u32 (1 + data) type u8 data; then an optional uvarint
  `lterm` (the leader's term during a catch-up; old nodes ignore the trailing bytes).
- append entry response (`appendEntryResponse.encode`): term u64 index u64 peer[8] success u8.
- vote request (`voteRequest.encode`): term u64 last_term u64 last_index u64 candidate[8].
- vote response (`voteResponse.encode`): term u64 peer[8] flags u8 (1 granted, 2 empty log).
- peer state (`encodePeerState`, the `peers.idx` file and EntryPeerState's data): cluster_size
  u32 count u32 peers[8 each] domain_ext u16.
- term and vote (`tav.idx`): term u64 then the voted-for peer's 8 bytes, or nothing.

Decoders raise `WireError` where nats-server's return an error or nil; they never read past the
buffer. Every function is O(len(message)).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from enum import IntEnum

ID_LEN = 8  # idLen: a node id is a fixed 8 bytes on the wire
NO_PEER = ""  # noLeader / noVote

_U16 = struct.Struct("<H")
_U32 = struct.Struct("<I")
_U64 = struct.Struct("<Q")
_AE_HEAD = struct.Struct("<8sQQQQH")  # leader, term, commit, pterm, pindex, entry count
_AE_RESPONSE = struct.Struct("<QQ8sB")
_VOTE_REQUEST = struct.Struct("<QQQ8s")
_VOTE_RESPONSE = struct.Struct("<Q8sB")
_PEER_STATE_HEAD = struct.Struct("<II")

APPEND_ENTRY_BASE_LEN = _AE_HEAD.size  # appendEntryBaseLen = idLen + 4*8 + 2
APPEND_ENTRY_RESPONSE_LEN = _AE_RESPONSE.size  # appendEntryResponseLen = 24 + 1
VOTE_REQUEST_LEN = _VOTE_REQUEST.size  # voteRequestLen = 24 + idLen
VOTE_RESPONSE_LEN = _VOTE_RESPONSE.size  # voteResponseLen = 8 + 8 + 1
MAX_ENTRIES = 0xFFFF  # math.MaxUint16: the count is a u16
MAX_ENTRY_DATA = 0x7FFFFFFF  # math.MaxInt32, as nats-server bounds one entry


class WireError(ValueError):
    """A message nats-server would refuse to decode (`errBadAppendEntry`, a nil decode)."""


class EntryType(IntEnum):
    """nats-server's EntryType; the values are on the wire and in the log."""

    NORMAL = 0
    OLD_SNAPSHOT = 1
    PEER_STATE = 2
    ADD_PEER = 3
    REMOVE_PEER = 4
    LEADER_TRANSFER = 5
    SNAPSHOT = 6


class ExtensionState(IntEnum):
    """extensionState: whether a leaf node extends this JetStream domain (the meta group)."""

    UNDETERMINED = 0
    EXTENDED = 1
    NOT_EXTENDED = 2


@dataclass(frozen=True, slots=True)
class Entry:
    """One entry of an append entry. `type` is an int so an unknown type nats-server may add
    later still round-trips."""

    type: int
    data: bytes

    @property
    def changes_membership(self) -> bool:
        return self.type in (EntryType.ADD_PEER, EntryType.REMOVE_PEER)


@dataclass(frozen=True, slots=True)
class AppendEntry:
    """appendEntry: what a leader sends on `$NRG.AE.<group>` (and on a catch-up inbox).

    `pterm`/`pindex` name the entry before this one (the consistency check); `lterm` is the
    leader's own term while it replays older entries to a follower catching up (0 = `term`).
    """

    leader: str
    term: int
    commit: int
    pterm: int
    pindex: int
    entries: tuple[Entry, ...] = ()
    lterm: int = 0

    @property
    def index(self) -> int:
        """The index this append entry has in the log (a heartbeat has none of its own)."""
        return self.pindex + 1

    @property
    def is_heartbeat(self) -> bool:
        return not self.entries


def _id_bytes(peer: str) -> bytes:
    """An id's bytes: ids are opaque bytes to nats-server, so one char is one byte (latin-1,
    the inverse of `_peer_str`), never UTF-8."""
    try:
        return peer.encode("latin-1")
    except UnicodeEncodeError:
        raise WireError(f"raft: a peer id is {ID_LEN} bytes, not {peer!r}") from None


def _peer_bytes(peer: str) -> bytes:
    raw = _id_bytes(peer)
    if len(raw) not in (0, ID_LEN):
        raise WireError(f"raft: leader should be exactly {ID_LEN} bytes")
    return raw.ljust(ID_LEN, b"\0")


def _peer_str(raw: bytes) -> str:
    # nats-server sends an empty id as eight zero bytes (the buffer is zeroed, nothing copied).
    return "" if raw == b"\0" * ID_LEN else raw.decode("latin-1")


def put_uvarint(value: int) -> bytes:
    """Go's binary.PutUvarint."""
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def read_uvarint(buf: bytes | memoryview, pos: int = 0) -> tuple[int, int]:
    """Go's binary.Uvarint from `pos`: (value, bytes read); bytes read <= 0 when there is none
    (0: the buffer ended, negative: more than 64 bits), as Go reports it: -10 when a 10th byte
    ends it above 1, -11 when there is an 11th byte to read (at most 11 bytes are looked at)."""
    value = shift = 0
    for i in range(max(min(len(buf) - pos, 10), 0)):
        b = buf[pos + i]
        if b < 0x80:
            if i == 9 and b > 1:
                return 0, -10
            return value | b << shift, i + 1
        value |= (b & 0x7F) << shift
        shift += 7
    return (0, -11) if len(buf) - pos > 10 else (0, 0)


def encode_append_entry(ae: AppendEntry) -> bytes:
    if len(ae.entries) > MAX_ENTRIES:
        raise WireError("raft: append entry can contain a max of 64k entries")
    parts = [
        _AE_HEAD.pack(
            _peer_bytes(ae.leader), ae.term, ae.commit, ae.pterm, ae.pindex, len(ae.entries)
        )
    ]
    for entry in ae.entries:
        if len(entry.data) > MAX_ENTRY_DATA:
            raise WireError("raft: append entry corrupt")
        parts.append(_U32.pack(1 + len(entry.data)))
        parts.append(bytes((entry.type,)))
        parts.append(entry.data)
    parts.append(put_uvarint(ae.lterm))
    return b"".join(parts)


def decode_append_entry(msg: bytes) -> AppendEntry:
    """decodeAppendEntry: entries past the count, and a missing or bad lterm, are ignored as
    nats-server ignores them."""
    size = len(msg)
    if size < APPEND_ENTRY_BASE_LEN:
        raise WireError("raft: append entry corrupt")
    leader, term, commit, pterm, pindex, count = _AE_HEAD.unpack_from(msg)
    entries = []
    pos = APPEND_ENTRY_BASE_LEN
    for _ in range(count):
        if size - pos < 4:
            raise WireError("raft: append entry corrupt")
        (length,) = _U32.unpack_from(msg, pos)
        pos += 4
        if length == 0 or pos + length > size:
            raise WireError("raft: append entry corrupt")
        entries.append(Entry(msg[pos], bytes(msg[pos + 1 : pos + length])))
        pos += length
    lterm = 0
    if pos < size:
        value, read = read_uvarint(msg, pos)
        if read > 0:
            lterm = value
    return AppendEntry(_peer_str(leader), term, commit, pterm, pindex, tuple(entries), lterm)


@dataclass(frozen=True, slots=True)
class AppendEntryResponse:
    """appendEntryResponse: a follower's answer to an append entry, on the leader's reply inbox.

    On success `index` is the follower's last index; on failure it is the index the follower
    has (the leader catches it up from there), and `term` may be the follower's higher term.
    """

    term: int
    index: int
    peer: str
    success: bool


def encode_append_entry_response(ar: AppendEntryResponse) -> bytes:
    return _AE_RESPONSE.pack(ar.term, ar.index, _peer_bytes(ar.peer), 1 if ar.success else 0)


def decode_append_entry_response(msg: bytes) -> AppendEntryResponse:
    if len(msg) != APPEND_ENTRY_RESPONSE_LEN:
        raise WireError("raft: append entry response corrupt")
    term, index, peer, success = _AE_RESPONSE.unpack(msg)
    # nats-server counts only 1 as success.
    return AppendEntryResponse(term, index, _peer_str(peer), success == 1)


@dataclass(frozen=True, slots=True)
class VoteRequest:
    term: int
    last_term: int
    last_index: int
    candidate: str


def encode_vote_request(vr: VoteRequest) -> bytes:
    return _VOTE_REQUEST.pack(vr.term, vr.last_term, vr.last_index, _peer_bytes(vr.candidate))


def decode_vote_request(msg: bytes) -> VoteRequest:
    if len(msg) != VOTE_REQUEST_LEN:
        raise WireError("raft: vote request corrupt")
    term, last_term, last_index, candidate = _VOTE_REQUEST.unpack(msg)
    return VoteRequest(term, last_term, last_index, _peer_str(candidate))


@dataclass(frozen=True, slots=True)
class VoteResponse:
    """`empty`: the voter's log is empty (a candidate that only hears empty votes from a
    recovering group waits for every peer before it leads)."""

    term: int
    peer: str
    granted: bool
    empty: bool = False


def encode_vote_response(vr: VoteResponse) -> bytes:
    flags = (1 if vr.granted else 0) | (2 if vr.empty else 0)
    return _VOTE_RESPONSE.pack(vr.term, _peer_bytes(vr.peer), flags)


def decode_vote_response(msg: bytes) -> VoteResponse:
    if len(msg) != VOTE_RESPONSE_LEN:
        raise WireError("raft: vote response corrupt")
    term, peer, flags = _VOTE_RESPONSE.unpack(msg)
    return VoteResponse(term, _peer_str(peer), bool(flags & 1), bool(flags & 2))


@dataclass(frozen=True, slots=True)
class PeerState:
    """peerState: the known peers, the cluster size quorum counts from, and the domain
    extension (meaningful for the meta group only)."""

    known_peers: tuple[str, ...]
    cluster_size: int
    domain_ext: int = ExtensionState.UNDETERMINED


def encode_peer_state(ps: PeerState) -> bytes:
    parts = [_PEER_STATE_HEAD.pack(ps.cluster_size, len(ps.known_peers))]
    parts.extend(_peer_bytes(peer) for peer in ps.known_peers)
    parts.append(_U16.pack(ps.domain_ext))
    return b"".join(parts)


def decode_peer_state(buf: bytes) -> PeerState:
    """decodePeerState: the domain extension is optional (older files end before it)."""
    if len(buf) < _PEER_STATE_HEAD.size:
        raise WireError("raft: corrupt peer state")
    cluster_size, expected = _PEER_STATE_HEAD.unpack_from(buf)
    pos = _PEER_STATE_HEAD.size
    if len(buf) - pos < expected * ID_LEN:
        raise WireError("raft: corrupt peer state")
    peers = tuple(
        buf[pos + i * ID_LEN : pos + (i + 1) * ID_LEN].decode("latin-1") for i in range(expected)
    )
    pos += expected * ID_LEN
    domain_ext = _U16.unpack_from(buf, pos)[0] if len(buf) - pos >= 2 else 0
    return PeerState(peers, cluster_size, domain_ext)


def encode_term_vote(term: int, vote: str) -> bytes:
    """The `tav.idx` record: the vote is left out when there is none."""
    return _U64.pack(term) + _id_bytes(vote)


def decode_term_vote(buf: bytes) -> tuple[int, str]:
    """readTermVote: short files read as term 0 or as no vote, as nats-server reads them."""
    if len(buf) < 8:
        return 0, NO_PEER
    term = _U64.unpack_from(buf)[0]
    if len(buf) < 8 + ID_LEN:
        return term, NO_PEER
    return term, buf[8:].decode("latin-1")
