"""NRG's binary encodings (pynatsd/raft/wire.py) against nats-server's (`server/raft.go`).

Property tests: every encoding round-trips (object -> bytes -> object, and nats-server's bytes ->
object -> the same bytes), and a decoder given garbage, a truncated message or a message with a
flipped bit either raises WireError or returns what the bytes it was given say (never a value
made of bytes past the end, never another exception). Table tests: exact bytes worked out by
hand from raft.go's encode functions, and a few messages captured from nats-server 2.15.1
(tests/raft/test_wire_vs_nats_server.py captures them all, live).
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from pynatsd.raft.wire import (
    APPEND_ENTRY_BASE_LEN,
    APPEND_ENTRY_RESPONSE_LEN,
    ID_LEN,
    MAX_ENTRIES,
    NO_PEER,
    VOTE_REQUEST_LEN,
    VOTE_RESPONSE_LEN,
    AppendEntry,
    AppendEntryResponse,
    Entry,
    EntryType,
    ExtensionState,
    PeerState,
    VoteRequest,
    VoteResponse,
    WireError,
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
    put_uvarint,
    read_uvarint,
)

# The node ids of servers named n1, n2, n3 (getHash of the name), as in the live test.
N1, N2, N3 = "fjFyEjc1", "44jzkV9D", "BXScrY9i"
ZERO_ID = b"\0" * ID_LEN
U64_MAX = 2**64 - 1

# -- strategies --------------------------------------------------------------------------------

# getHash's digits: what every real node id is made of.
_DIGITS = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
node_ids = st.text(alphabet=_DIGITS, min_size=ID_LEN, max_size=ID_LEN)
# nats-server treats an id as 8 opaque bytes: any 8 bytes but all zeros (which mean "none").
raw_ids = (
    st.binary(min_size=ID_LEN, max_size=ID_LEN)
    .filter(lambda b: b != ZERO_ID)
    .map(lambda b: b.decode("latin-1"))
)
peers = st.one_of(node_ids, raw_ids)
peers_or_none = st.one_of(st.just(NO_PEER), peers)
u64 = st.integers(0, U64_MAX)
small = st.integers(0, 1000)
terms = st.one_of(small, u64)

entries = st.builds(Entry, st.integers(0, 255), st.binary(max_size=64))
append_entries = st.builds(
    AppendEntry,
    leader=peers_or_none,
    term=terms,
    commit=terms,
    pterm=terms,
    pindex=terms,
    entries=st.lists(entries, max_size=6).map(tuple),
    lterm=terms,
)
append_entry_responses = st.builds(AppendEntryResponse, peer=peers_or_none, term=u64, index=u64)
vote_requests = st.builds(
    VoteRequest, term=u64, last_term=u64, last_index=u64, candidate=peers_or_none
)
vote_responses = st.builds(VoteResponse, term=u64, peer=peers_or_none)
# A peer state names real peers (an empty one would come back as eight zero bytes).
peer_states = st.builds(
    PeerState,
    known_peers=st.lists(peers, max_size=7).map(tuple),
    cluster_size=st.integers(0, 2**32 - 1),
    domain_ext=st.one_of(st.sampled_from(ExtensionState), st.integers(0, 0xFFFF)),
)
term_votes = st.tuples(u64, peers_or_none)


@dataclass(frozen=True)
class Codec:
    """One encoding: how to make a value, and nats-server's encode and decode of it."""

    name: str
    values: st.SearchStrategy[Any]
    encode: Callable[[Any], bytes]
    decode: Callable[[bytes], Any]

    def __str__(self) -> str:
        return self.name


def _encode_term_vote(tv: tuple[int, str]) -> bytes:
    return encode_term_vote(*tv)


CODECS = [
    Codec("append entry", append_entries, encode_append_entry, decode_append_entry),
    Codec(
        "append entry response",
        append_entry_responses,
        encode_append_entry_response,
        decode_append_entry_response,
    ),
    Codec("vote request", vote_requests, encode_vote_request, decode_vote_request),
    Codec("vote response", vote_responses, encode_vote_response, decode_vote_response),
    Codec("peer state", peer_states, encode_peer_state, decode_peer_state),
    Codec("term and vote", term_votes, _encode_term_vote, decode_term_vote),
]
BY_NAME = {codec.name: codec for codec in CODECS}


# -- what a decoder may return ---------------------------------------------------------------


def _entries_end(ae: AppendEntry) -> int:
    """Where the entries of `ae` end in its encoding (the lterm uvarint follows)."""
    return APPEND_ENTRY_BASE_LEN + sum(4 + 1 + len(e.data) for e in ae.entries)


def assert_faithful(name: str, buf: bytes) -> None:
    """Decode `buf` as `name`: WireError, or a value that says exactly what the bytes say,
    read only from `buf`, as nats-server's decoder reads it."""
    codec = BY_NAME[name]
    try:
        value = codec.decode(buf)
    except WireError:
        assert name != "term and vote", "readTermVote never fails on a short file"
        return
    again = codec.encode(value)
    if name == "append entry":
        # The header and the entries are the message's first bytes; past them, only a
        # complete uvarint counts as lterm (anything else is ignored, as old nodes ignore it).
        end = _entries_end(value)
        assert end <= len(buf)
        assert again[:end] == buf[:end]
        lterm, read = read_uvarint(buf, end)
        assert value.lterm == (lterm if read > 0 else 0)
    elif name == "append entry response":
        assert len(buf) == APPEND_ENTRY_RESPONSE_LEN
        assert again[:24] == buf[:24]
        assert value.success == (buf[24] == 1)  # only 1 is success
    elif name == "vote request":
        assert again == buf
    elif name == "vote response":
        assert len(buf) == VOTE_RESPONSE_LEN
        assert again[:16] == buf[:16]
        assert (value.granted, value.empty) == (bool(buf[16] & 1), bool(buf[16] & 2))
    elif name == "peer state":
        # Count, size and peers as written; the domain extension when two bytes follow.
        end = 8 + ID_LEN * len(value.known_peers)
        assert struct.unpack_from("<I", buf, 4)[0] == len(value.known_peers)
        ext = buf[end : end + 2] if len(buf) >= end + 2 else b"\0\0"
        assert again == buf[:end] + ext
    elif name == "term and vote":
        if len(buf) < 8:
            assert value == (0, NO_PEER)
        elif len(buf) < 16:
            assert value == (struct.unpack_from("<Q", buf)[0], NO_PEER)
        else:
            assert again == buf  # the whole rest of the file is the vote


# -- round trips -----------------------------------------------------------------------------


@pytest.mark.parametrize("codec", CODECS, ids=str)
@given(data=st.data())
def test_value_round_trips(codec: Codec, data: st.DataObject) -> None:
    value = data.draw(codec.values)
    assert codec.decode(codec.encode(value)) == value


@pytest.mark.parametrize("codec", CODECS, ids=str)
@given(data=st.data())
def test_bytes_round_trip(codec: Codec, data: st.DataObject) -> None:
    buf = codec.encode(data.draw(codec.values))
    assert codec.encode(codec.decode(buf)) == buf


@given(st.binary(min_size=VOTE_REQUEST_LEN, max_size=VOTE_REQUEST_LEN))
def test_any_vote_request_bytes_round_trip(buf: bytes) -> None:
    """Every 32 bytes are a vote request; re-encoded, the same 32 bytes."""
    assert encode_vote_request(decode_vote_request(buf)) == buf


@given(st.binary(min_size=24, max_size=24), st.sampled_from([0, 1]))
def test_any_canonical_append_entry_response_round_trips(head: bytes, success: int) -> None:
    buf = head + bytes([success])
    assert encode_append_entry_response(decode_append_entry_response(buf)) == buf


@given(st.binary(min_size=16, max_size=16), st.integers(0, 3))
def test_any_canonical_vote_response_round_trips(head: bytes, flags: int) -> None:
    buf = head + bytes([flags])
    assert encode_vote_response(decode_vote_response(buf)) == buf


# -- garbage, truncations, bit flips ---------------------------------------------------------


@pytest.mark.parametrize("codec", CODECS, ids=str)
@given(buf=st.binary(max_size=200))
@example(buf=b"")
@example(buf=ZERO_ID * 6)
def test_random_bytes_decode_faithfully_or_raise_wire_error(codec: Codec, buf: bytes) -> None:
    assert_faithful(codec.name, buf)


@given(
    head=st.binary(min_size=APPEND_ENTRY_BASE_LEN - 2, max_size=APPEND_ENTRY_BASE_LEN - 2),
    count=st.integers(0, 8),
    tail=st.binary(max_size=80),
)
def test_random_append_entry_bodies(head: bytes, count: int, tail: bytes) -> None:
    """A header with a small entry count and random bytes after it: the entry walk is reached
    (random bytes alone almost never get past the count)."""
    assert_faithful("append entry", head + struct.pack("<H", count) + tail)


@given(
    peer_count=st.integers(0, 6),
    body=st.binary(max_size=60),
)
def test_random_peer_state_bodies(peer_count: int, body: bytes) -> None:
    assert_faithful("peer state", struct.pack("<II", 3, peer_count) + body)


@pytest.mark.parametrize("codec", CODECS, ids=str)
@given(data=st.data())
def test_every_truncation_decodes_faithfully_or_raises_wire_error(
    codec: Codec, data: st.DataObject
) -> None:
    buf = codec.encode(data.draw(codec.values))
    for end in range(len(buf)):
        assert_faithful(codec.name, buf[:end])


@pytest.mark.parametrize("codec", CODECS, ids=str)
@given(data=st.data())
def test_bit_flips_decode_faithfully_or_raise_wire_error(codec: Codec, data: st.DataObject) -> None:
    buf = bytearray(codec.encode(data.draw(codec.values)))
    bit = data.draw(st.integers(0, len(buf) * 8 - 1))
    buf[bit // 8] ^= 1 << (bit % 8)
    assert_faithful(codec.name, bytes(buf))


@pytest.mark.parametrize("codec", CODECS, ids=str)
@given(data=st.data())
def test_trailing_bytes_decode_faithfully_or_raise_wire_error(
    codec: Codec, data: st.DataObject
) -> None:
    buf = codec.encode(data.draw(codec.values)) + data.draw(st.binary(min_size=1, max_size=12))
    assert_faithful(codec.name, buf)


@given(ae=append_entries)
def test_a_truncated_entry_is_refused(ae: AppendEntry) -> None:
    """Cut anywhere before the last entry's last byte: errBadAppendEntry, never a short entry."""
    buf = encode_append_entry(ae)
    end = _entries_end(ae)
    for cut in range(APPEND_ENTRY_BASE_LEN if ae.entries else 0, end):
        with pytest.raises(WireError):
            decode_append_entry(buf[:cut])


@given(ae=append_entries)
def test_a_missing_or_cut_lterm_reads_as_zero(ae: AppendEntry) -> None:
    """An older node's message ends with the entries; a cut uvarint is ignored (Uvarint n <= 0)."""
    buf = encode_append_entry(ae)
    end = _entries_end(ae)
    for cut in range(end, len(buf)):
        assert decode_append_entry(buf[:cut]) == AppendEntry(
            ae.leader, ae.term, ae.commit, ae.pterm, ae.pindex, ae.entries, 0
        )


# -- exact bytes, worked out from raft.go -----------------------------------------------------


def h(text: str) -> bytes:
    """Hex with spaces and ASCII ids in quotes: `01 00 "fjFyEjc1"`."""
    out = bytearray()
    for i, part in enumerate(text.split('"')):
        out += part.encode() if i % 2 else bytes.fromhex(part)
    return bytes(out)


U64_0 = "00 00 00 00 00 00 00 00"

EXACT = [
    pytest.param(
        # A heartbeat: no entries, count 0, and the lterm uvarint is always there (0 -> 00).
        encode_append_entry(AppendEntry(N1, term=2, commit=5, pterm=2, pindex=7)),
        h(
            '"fjFyEjc1" 02 00 00 00 00 00 00 00  05 00 00 00 00 00 00 00'
            "  02 00 00 00 00 00 00 00  07 00 00 00 00 00 00 00  00 00  00"
        ),
        id="heartbeat is 43 bytes",
    ),
    pytest.param(
        # No leader: the id field is eight zero bytes (the buffer is zeroed, nothing copied).
        encode_append_entry(AppendEntry(NO_PEER, term=1, commit=0, pterm=0, pindex=0)),
        h(f"{U64_0} 01 00 00 00 00 00 00 00 {U64_0} {U64_0} {U64_0} 00 00 00"),
        id="empty leader",
    ),
    pytest.param(
        # One entry: size u32 = 1 + len(data), then the type byte and the data; lterm 300.
        encode_append_entry(
            AppendEntry(N1, 3, 9, 3, 9, (Entry(EntryType.NORMAL, b"abc"),), lterm=300)
        ),
        h(
            '"fjFyEjc1" 03 00 00 00 00 00 00 00  09 00 00 00 00 00 00 00'
            "  03 00 00 00 00 00 00 00  09 00 00 00 00 00 00 00  01 00"
            '  04 00 00 00 00 "abc"  ac 02'
        ),
        id="one entry and lterm 300",
    ),
    pytest.param(
        encode_append_entry(
            AppendEntry(
                N2,
                term=1,
                commit=1,
                pterm=1,
                pindex=1,
                entries=(Entry(EntryType.PEER_STATE, b""), Entry(EntryType.ADD_PEER, N3.encode())),
            )
        ),
        h(
            '"44jzkV9D" 01 00 00 00 00 00 00 00  01 00 00 00 00 00 00 00'
            "  01 00 00 00 00 00 00 00  01 00 00 00 00 00 00 00  02 00"
            '  01 00 00 00 02  09 00 00 00 03 "BXScrY9i"  00'
        ),
        id="two entries, one empty",
    ),
    pytest.param(
        encode_append_entry_response(AppendEntryResponse(3, 10, N2, success=True)),
        h('03 00 00 00 00 00 00 00  0a 00 00 00 00 00 00 00 "44jzkV9D" 01'),
        id="append entry response, success",
    ),
    pytest.param(
        encode_append_entry_response(AppendEntryResponse(U64_MAX, 0, N3, success=False)),
        h(f'ff ff ff ff ff ff ff ff  {U64_0} "BXScrY9i" 00'),
        id="append entry response, failure",
    ),
    pytest.param(
        encode_vote_request(VoteRequest(term=2, last_term=1, last_index=300, candidate=N3)),
        h('02 00 00 00 00 00 00 00  01 00 00 00 00 00 00 00  2c 01 00 00 00 00 00 00 "BXScrY9i"'),
        id="vote request",
    ),
    pytest.param(
        encode_vote_response(VoteResponse(1, N1, granted=True, empty=True)),
        h('01 00 00 00 00 00 00 00 "fjFyEjc1" 03'),
        id="vote response, granted and empty",
    ),
    pytest.param(
        encode_vote_response(VoteResponse(7, N1, granted=True)),
        h('07 00 00 00 00 00 00 00 "fjFyEjc1" 01'),
        id="vote response, granted",
    ),
    pytest.param(
        encode_vote_response(VoteResponse(7, N1, granted=False, empty=True)),
        h('07 00 00 00 00 00 00 00 "fjFyEjc1" 02'),
        id="vote response, empty log, refused",
    ),
    pytest.param(
        encode_peer_state(PeerState((N3, N1, N2), cluster_size=3)),
        # A peers.idx file as nats-server 2.15.1 wrote it.
        h('03 00 00 00 03 00 00 00 "BXScrY9ifjFyEjc144jzkV9D" 00 00'),
        id="peers.idx",
    ),
    pytest.param(
        encode_peer_state(PeerState((), cluster_size=1, domain_ext=ExtensionState.NOT_EXTENDED)),
        h("01 00 00 00 00 00 00 00 02 00"),
        id="peer state, no peers, not extended",
    ),
    pytest.param(
        encode_term_vote(1, N3),
        # A tav.idx file as nats-server 2.15.1 wrote it.
        h('01 00 00 00 00 00 00 00 "BXScrY9i"'),
        id="tav.idx",
    ),
    pytest.param(encode_term_vote(5, NO_PEER), h("05 00 00 00 00 00 00 00"), id="tav.idx, no vote"),
]


@pytest.mark.parametrize(("encoded", "expected"), EXACT)
def test_exact_bytes(encoded: bytes, expected: bytes) -> None:
    assert encoded == expected


# Messages captured from nats-server 2.15.1 (n1, n2, n3 on loopback), and what they say.
CAPTURED = [
    pytest.param(
        "vote request",
        h(f'01 00 00 00 00 00 00 00 {U64_0} {U64_0} "BXScrY9i"'),
        VoteRequest(1, 0, 0, N3),
        id="meta group's first vote request",
    ),
    pytest.param(
        "vote response",
        h('01 00 00 00 00 00 00 00 "fjFyEjc1" 03'),
        VoteResponse(1, N1, granted=True, empty=True),
        id="a vote from an empty log",
    ),
    pytest.param(
        "append entry response",
        h('02 00 00 00 00 00 00 00 36 00 00 00 00 00 00 00 "44jzkV9D" 01'),
        AppendEntryResponse(2, 54, N2, success=True),
        id="a catch-up acknowledgement",
    ),
    pytest.param(
        "append entry",
        h(
            f'"BXScrY9i" 01 00 00 00 00 00 00 00 {U64_0} {U64_0} {U64_0} 01 00'
            '  13 00 00 00 02  02 00 00 00 01 00 00 00 "BXScrY9i" 00 00  00'
        ),
        AppendEntry(
            N3,
            1,
            0,
            0,
            0,
            (Entry(EntryType.PEER_STATE, h('02 00 00 00 01 00 00 00 "BXScrY9i" 00 00')),),
        ),
        id="a new meta leader's first entry: its peer state",
    ),
    pytest.param(
        "peer state",
        h('02 00 00 00 01 00 00 00 "BXScrY9i" 00 00'),
        PeerState((N3,), cluster_size=2),
        id="the meta leader's first peer state: itself, of 2",
    ),
]


@pytest.mark.parametrize(("name", "buf", "value"), CAPTURED)
def test_captured(name: str, buf: bytes, value: object) -> None:
    codec = BY_NAME[name]
    assert codec.decode(buf) == value
    assert codec.encode(value) == buf


# -- nats-server's decoding rules --------------------------------------------------------------


def _ae_head(count: int, leader: bytes = N1.encode()) -> bytes:
    return leader + struct.pack("<QQQQH", 1, 2, 3, 4, count)


@pytest.mark.parametrize(
    ("buf", "expected"),
    [
        pytest.param(_ae_head(0)[:-1], None, id="shorter than the header"),
        pytest.param(_ae_head(1), None, id="an entry counted, none there"),
        pytest.param(_ae_head(1) + b"\x01\x00\x00", None, id="a cut size"),
        pytest.param(_ae_head(1) + b"\x00\x00\x00\x00\x00", None, id="size 0: no type byte"),
        pytest.param(_ae_head(1) + b"\x03\x00\x00\x00\x00a", None, id="size past the end"),
        pytest.param(
            _ae_head(0),
            AppendEntry(N1, 1, 2, 3, 4),
            id="no lterm (an older node): 0",
        ),
        pytest.param(
            _ae_head(1) + b"\x01\x00\x00\x00\x07",
            AppendEntry(N1, 1, 2, 3, 4, (Entry(7, b""),)),
            id="an unknown entry type is kept",
        ),
        pytest.param(
            _ae_head(0) + b"\x05trailing",
            AppendEntry(N1, 1, 2, 3, 4, lterm=5),
            id="bytes after lterm are ignored",
        ),
        pytest.param(
            _ae_head(0) + b"\x80" * 10 + b"\x01",
            AppendEntry(N1, 1, 2, 3, 4),
            id="an lterm past 64 bits is ignored",
        ),
        pytest.param(
            _ae_head(0) + b"\xff" * 9 + b"\x01",
            AppendEntry(N1, 1, 2, 3, 4, lterm=U64_MAX),
            id="the largest lterm",
        ),
        pytest.param(
            _ae_head(0, ZERO_ID) + b"\x00",
            AppendEntry(NO_PEER, 1, 2, 3, 4),
            id="eight zero bytes: no leader",
        ),
    ],
)
def test_decode_append_entry(buf: bytes, expected: AppendEntry | None) -> None:
    if expected is None:
        with pytest.raises(WireError):
            decode_append_entry(buf)
    else:
        assert decode_append_entry(buf) == expected


@pytest.mark.parametrize(
    ("leader", "entries"),
    [
        pytest.param("short", (), id="a leader of 5 bytes (errLeaderLen)"),
        pytest.param(N1 + "x", (), id="a leader of 9 bytes"),
        pytest.param(N1, (Entry(0, b""),) * (MAX_ENTRIES + 1), id="64k entries"),
    ],
)
def test_encode_append_entry_refuses(leader: str, entries: tuple[Entry, ...]) -> None:
    with pytest.raises(WireError):
        encode_append_entry(AppendEntry(leader, 1, 1, 1, 1, entries))


def test_the_most_entries_encode() -> None:
    ae = AppendEntry(N1, 1, 1, 1, 1, (Entry(0, b""),) * MAX_ENTRIES)
    assert decode_append_entry(encode_append_entry(ae)) == ae


@pytest.mark.parametrize(("flag", "success"), [(0, False), (1, True), (2, False), (0xFF, False)])
def test_only_1_is_success(flag: int, success: bool) -> None:
    buf = struct.pack("<QQ", 1, 2) + N1.encode() + bytes([flag])
    assert decode_append_entry_response(buf).success is success


@pytest.mark.parametrize(
    ("flags", "granted", "empty"),
    [(0, False, False), (1, True, False), (2, False, True), (3, True, True), (0xFD, True, False)],
)
def test_vote_response_flags_are_bits(flags: int, granted: bool, empty: bool) -> None:
    vr = decode_vote_response(struct.pack("<Q", 1) + N1.encode() + bytes([flags]))
    assert (vr.granted, vr.empty) == (granted, empty)


@pytest.mark.parametrize(
    ("decode", "size"),
    [
        (decode_append_entry_response, APPEND_ENTRY_RESPONSE_LEN),
        (decode_vote_request, VOTE_REQUEST_LEN),
        (decode_vote_response, VOTE_RESPONSE_LEN),
    ],
    ids=["append entry response", "vote request", "vote response"],
)
def test_fixed_sizes_are_exact(decode: Callable[[bytes], object], size: int) -> None:
    for length in (0, size - 1, size + 1):
        with pytest.raises(WireError):
            decode(b"\x01" * length)
    decode(b"\x01" * size)


@pytest.mark.parametrize(
    ("buf", "expected"),
    [
        pytest.param(b"", None, id="empty"),
        pytest.param(b"\x03\x00\x00\x00\x01\x00\x00", None, id="a cut count"),
        pytest.param(h('03 00 00 00 02 00 00 00 "fjFyEjc1"'), None, id="a peer missing"),
        pytest.param(
            h('03 00 00 00 01 00 00 00 "fjFyEjc1"'),
            PeerState((N1,), 3),
            id="no domain extension (an older file)",
        ),
        pytest.param(
            h('03 00 00 00 01 00 00 00 "fjFyEjc1" 01'),
            PeerState((N1,), 3),
            id="one byte of domain extension: ignored",
        ),
        pytest.param(
            h('03 00 00 00 01 00 00 00 "fjFyEjc1" 01 00 ff ff'),
            PeerState((N1,), 3, ExtensionState.EXTENDED),
            id="bytes after the extension are ignored",
        ),
        pytest.param(h("05 00 00 00 ff ff ff ff") + b"x" * 64, None, id="4 billion peers counted"),
    ],
)
def test_decode_peer_state(buf: bytes, expected: PeerState | None) -> None:
    if expected is None:
        with pytest.raises(WireError):
            decode_peer_state(buf)
    else:
        assert decode_peer_state(buf) == expected


@pytest.mark.parametrize(
    ("buf", "expected"),
    [
        pytest.param(b"", (0, NO_PEER), id="empty file"),
        pytest.param(b"\x07\x00\x00", (0, NO_PEER), id="a cut term"),
        pytest.param(h("07 00 00 00 00 00 00 00"), (7, NO_PEER), id="no vote"),
        pytest.param(h('07 00 00 00 00 00 00 00 "fjFyEj"'), (7, NO_PEER), id="a cut vote"),
        pytest.param(h('07 00 00 00 00 00 00 00 "fjFyEjc1"'), (7, N1), id="term and vote"),
    ],
)
def test_decode_term_vote(buf: bytes, expected: tuple[int, str]) -> None:
    assert decode_term_vote(buf) == expected


# -- Go's uvarint --------------------------------------------------------------------------------

UVARINTS = [
    (0, "00"),
    (1, "01"),
    (127, "7f"),
    (128, "80 01"),
    (255, "ff 01"),
    (256, "80 02"),
    (300, "ac 02"),
    (16383, "ff 7f"),
    (16384, "80 80 01"),
    (2**21 - 1, "ff ff 7f"),
    (2**21, "80 80 80 01"),
    (2**32 - 1, "ff ff ff ff 0f"),
    (2**63, "80 80 80 80 80 80 80 80 80 01"),
    (U64_MAX, "ff ff ff ff ff ff ff ff ff 01"),
]


@pytest.mark.parametrize(("value", "encoded"), UVARINTS)
def test_put_uvarint(value: int, encoded: str) -> None:
    assert put_uvarint(value) == bytes.fromhex(encoded)


@pytest.mark.parametrize(("value", "encoded"), UVARINTS)
def test_read_uvarint(value: int, encoded: str) -> None:
    buf = bytes.fromhex(encoded)
    assert read_uvarint(buf) == (value, len(buf))
    assert read_uvarint(b"\xff\xff" + buf + b"\xff", 2) == (value, len(buf))


@pytest.mark.parametrize(
    ("buf", "expected"),
    [
        pytest.param(b"", (0, 0), id="empty: too small"),
        pytest.param(b"\x80", (0, 0), id="cut: too small"),
        pytest.param(b"\xff" * 9, (0, 0), id="nine continuations: too small"),
        pytest.param(b"\x80\x00", (0, 2), id="overlong zero is accepted"),
        pytest.param(b"\x80" * 9 + b"\x02", (0, -10), id="10th byte above 1: overflow"),
        pytest.param(b"\x80" * 10, (0, 0), id="ten continuations: too small"),
        pytest.param(b"\xff" * 10, (0, 0), id="ten continuations of ones: too small"),
        pytest.param(b"\x80" * 10 + b"\x01\x00\x00", (0, -11), id="an 11th byte: overflow"),
        pytest.param(b"\xff" * 11, (0, -11), id="eleven continuations: overflow"),
    ],
)
def test_read_uvarint_errors_as_go(buf: bytes, expected: tuple[int, int]) -> None:
    """binary.Uvarint: n == 0 when the buffer ends first, n = -(bytes read) on overflow."""
    assert read_uvarint(buf) == expected


@given(value=u64, junk=st.binary(max_size=12), lead=st.binary(max_size=4))
def test_uvarint_round_trips(value: int, junk: bytes, lead: bytes) -> None:
    encoded = put_uvarint(value)
    assert len(encoded) == max(1, -(-value.bit_length() // 7))
    assert read_uvarint(lead + encoded + junk, len(lead)) == (value, len(encoded))


@given(buf=st.binary(max_size=14), pos=st.integers(0, 16))
def test_read_uvarint_stays_in_the_buffer(buf: bytes, pos: int) -> None:
    value, read = read_uvarint(buf, pos)
    assert read <= max(len(buf) - pos, 0) or read < 0
    assert -read <= max(len(buf) - pos, 0)
    if read > 0:
        assert 0 <= value <= U64_MAX
        assert read_uvarint(buf[pos : pos + read]) == (value, read)
    else:
        assert value == 0
