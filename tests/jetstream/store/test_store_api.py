"""The behaviour every stream store shares, run against the memory and the file store."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from pynatsd.jetstream.store import (
    FileStore,
    MaxBytesError,
    MaxMsgsError,
    MaxMsgsPerSubjectError,
    MemoryStore,
    MsgTooLargeError,
    SequenceMismatchError,
    StoreClosedError,
    StoredMsg,
    StoreError,
    StreamLimits,
    open_file_store,
    open_memory_store,
)

Store = MemoryStore | FileStore
MakeStore = Callable[..., Store]
HDR = b"NATS/1.0\r\nNats-Msg-Id: 1\r\n\r\n"
SEC = 1_000_000_000


@pytest.fixture(params=["memory", "file"])
def make_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[MakeStore]:
    opened: list[Store] = []

    def make(**limits: object) -> Store:
        lim = StreamLimits(**limits)  # type: ignore[arg-type]
        store: Store
        if request.param == "memory":
            store = open_memory_store(lim)
        else:
            # Small segments, so that rotation and segment deletion happen in these tests too.
            store = open_file_store(str(tmp_path / f"s{len(opened)}"), lim, segment_bytes=4096)
        opened.append(store)
        return store

    yield make
    for store in opened:
        store.close()


def size_of(store: Store, subject: str, header: bytes, data: bytes) -> int:
    return store._msg_size(len(subject.encode()), len(header), len(data))


def seqs(store: Store, filter_subject: str = ">") -> list[int]:
    out = []
    msg = store.load_next_msg(filter_subject, 0)
    while msg is not None:
        out.append(msg.seq)
        msg = store.load_next_msg(filter_subject, msg.seq + 1)
    return out


def test_store_and_load_round_trip(make_store: MakeStore) -> None:
    store = make_store()
    assert store.store_msg("a.b", b"", b"hello", ts=5) == (1, 5)
    seq, ts = store.store_msg("a.c", HDR, b"")
    assert seq == 2 and ts > 0
    big = bytes(range(256)) * 100
    assert store.store_msg("x", HDR, big)[0] == 3
    m = store.load_msg(1)
    assert m is not None
    assert (m.seq, m.subject, m.header, m.data, m.ts) == (1, "a.b", b"", b"hello", 5)
    m = store.load_msg(2)
    assert m is not None and m.header == HDR and m.data == b"" and m.ts == ts
    m = store.load_msg(3)
    assert m is not None and m.data == big
    assert store.load_msg(0) is None
    assert store.load_msg(4) is None
    assert store.msg_ts(1) == 5


def test_non_ascii_subject_and_size(make_store: MakeStore) -> None:
    store = make_store()
    store.store_msg("caf\u00e9.\u65e5\u672c", b"", b"x")
    m = store.load_msg(1)
    assert m is not None and m.subject == "caf\u00e9.\u65e5\u672c"
    assert store.state().bytes == size_of(store, "caf\u00e9.\u65e5\u672c", b"", b"x")


def test_state_of_new_and_emptied_store(make_store: MakeStore) -> None:
    store = make_store()
    st = store.state()
    assert (st.messages, st.bytes, st.first_seq, st.last_seq, st.first_ts, st.last_ts) == (
        0,
        0,
        0,
        0,
        0,
        0,
    )
    store.store_msg("a", b"", b"1", ts=10)
    store.store_msg("b", HDR, b"22", ts=20)
    st = store.state()
    assert (st.messages, st.first_seq, st.last_seq, st.first_ts, st.last_ts) == (2, 1, 2, 10, 20)
    assert st.bytes == size_of(store, "a", b"", b"1") + size_of(store, "b", HDR, b"22")
    assert st.num_subjects == 2 and st.num_deleted == 0
    assert store.remove_msg(2)
    assert store.remove_msg(1)
    st = store.state()
    # As nats-server: an emptied store reports first = last + 1 and keeps the last time.
    assert (st.messages, st.bytes, st.first_seq, st.last_seq, st.first_ts, st.last_ts) == (
        0,
        0,
        3,
        2,
        0,
        20,
    )
    assert store.store_msg("c", b"", b"", ts=30)[0] == 3


def test_memory_and_file_sizes_follow_nats_server() -> None:
    mem = open_memory_store(StreamLimits())
    # memStoreMsgSize = subject + header + data + 16
    assert mem._msg_size(3, 0, 5) == 24
    from pynatsd.jetstream.store.file import _msg_size

    # fileStoreMsgSize = 22 + subject + data + 8, plus 4 + header with headers
    assert _msg_size(3, 0, 5) == 38
    assert _msg_size(3, 10, 5) == 52


def test_remove_interior_and_num_deleted(make_store: MakeStore) -> None:
    store = make_store()
    for i in range(10):
        store.store_msg(f"s.{i % 3}", b"", b"%d" % i)
    assert store.remove_msg(5)
    assert not store.remove_msg(5)
    assert not store.remove_msg(99)
    assert store.remove_msg(1)
    st = store.state()
    assert (st.messages, st.first_seq, st.last_seq, st.num_deleted) == (8, 2, 10, 1)
    assert store.deleted_seqs() == [5]
    assert store.load_msg(5) is None
    assert seqs(store) == [2, 3, 4, 6, 7, 8, 9, 10]
    assert store.remove_msg(10)
    st = store.state()
    assert st.last_seq == 10 and st.messages == 7 and st.num_deleted == 2
    assert store.store_msg("s.0", b"", b"")[0] == 11


def test_erase(make_store: MakeStore) -> None:
    store = make_store()
    store.store_msg("a", b"", b"secret-secret")
    store.store_msg("a", b"", b"other")
    assert store.remove_msg(1, erase=True)
    assert store.load_msg(1) is None
    assert store.state().messages == 1
    if isinstance(store, FileStore):
        for path in store.segment_paths():
            assert b"secret-secret" not in Path(path).read_bytes()


def test_max_msgs_discard_old(make_store: MakeStore) -> None:
    store = make_store(max_msgs=3)
    for i in range(10):
        store.store_msg("a", b"", b"%d" % i)
    st = store.state()
    assert (st.messages, st.first_seq, st.last_seq) == (3, 8, 10)
    assert seqs(store) == [8, 9, 10]


def test_max_bytes_discard_old(make_store: MakeStore) -> None:
    store = make_store()
    one = size_of(store, "a", b"", b"x" * 10)
    store.update_limits(StreamLimits(max_bytes=one * 3 + 1))
    for _ in range(10):
        store.store_msg("a", b"", b"x" * 10)
    st = store.state()
    assert (st.messages, st.bytes, st.first_seq) == (3, one * 3, 8)


def test_message_alone_over_max_bytes_is_stored_then_dropped(make_store: MakeStore) -> None:
    store = make_store(max_bytes=50)
    store.store_msg("a", b"", b"1")
    seq, _ = store.store_msg("a", b"", b"y" * 100)
    st = store.state()
    # nats-server's enforceBytesLimit drops messages until under the limit, the new one too.
    assert (seq, st.messages, st.bytes, st.first_seq, st.last_seq) == (2, 0, 0, 3, 2)


def test_max_msgs_per_subject(make_store: MakeStore) -> None:
    store = make_store(max_msgs_per_subject=2)
    for i in range(6):
        store.store_msg(f"k.{i % 2}", b"", b"%d" % i)
    assert store.subjects_state() == {"k.0": 2, "k.1": 2}
    assert seqs(store) == [3, 4, 5, 6]
    store.store_msg("k.0", b"", b"x")
    assert seqs(store, "k.0") == [5, 7]
    assert seqs(store) == [4, 5, 6, 7]


def test_per_subject_interior_removal(make_store: MakeStore) -> None:
    # A KV pattern: the oldest message of a subject is in the middle of the stream.
    store = make_store(max_msgs_per_subject=1)
    store.store_msg("k.a", b"", b"a1")
    store.store_msg("k.b", b"", b"b1")
    store.store_msg("k.b", b"", b"b2")
    store.store_msg("k.b", b"", b"b3")
    assert seqs(store) == [1, 4]
    assert store.state().num_deleted == 2
    assert store.num_pending(1) == 2
    assert store.num_pending(2) == 1


def test_max_age(make_store: MakeStore) -> None:
    store = make_store(max_age=10 * SEC)
    now = store.store_msg("a", b"", b"new")[1]
    store.store_msg("a", b"", b"newer", ts=now + 1)
    store.expire(now + 5 * SEC)
    assert store.state().messages == 2
    assert store.next_expiry() == now + 10 * SEC
    store.expire(now + 10 * SEC)
    assert seqs(store) == [2]
    store.expire(now + 100 * SEC)
    st = store.state()
    assert (st.messages, st.first_seq, st.last_seq) == (0, 3, 2)
    assert store.next_expiry() is None


def test_max_age_applied_on_store(make_store: MakeStore) -> None:
    store = make_store(max_age=10 * SEC)
    store.store_msg("a", b"", b"ancient", ts=1)
    store.store_msg("a", b"", b"ancient", ts=2)
    store.store_msg("a", b"", b"fresh")
    assert seqs(store) == [3]


def test_discard_new_max_msgs(make_store: MakeStore) -> None:
    store = make_store(max_msgs=2, discard="new")
    store.store_msg("a", b"", b"1")
    store.store_msg("a", b"", b"2")
    with pytest.raises(MaxMsgsError) as err:
        store.store_msg("a", b"", b"3")
    assert err.value.description == "maximum messages exceeded"
    assert store.state().messages == 2 and store.state().last_seq == 2
    store.remove_msg(1)
    assert store.store_msg("a", b"", b"3")[0] == 3


def test_discard_new_max_bytes(make_store: MakeStore) -> None:
    store = make_store()
    one = size_of(store, "a", b"", b"1")
    store.update_limits(StreamLimits(max_bytes=2 * one, discard="new"))
    store.store_msg("a", b"", b"1")
    store.store_msg("a", b"", b"1")
    with pytest.raises(MaxBytesError) as err:
        store.store_msg("a", b"", b"1")
    assert err.value.description == "maximum bytes exceeded"
    assert store.state().messages == 2


def test_discard_new_per_subject(make_store: MakeStore) -> None:
    store = make_store(max_msgs_per_subject=1, discard="new", discard_new_per_subject=True)
    store.store_msg("a", b"", b"1")
    with pytest.raises(MaxMsgsPerSubjectError) as err:
        store.store_msg("a", b"", b"2")
    assert err.value.description == "maximum messages per subject exceeded"
    store.store_msg("b", b"", b"1")
    assert store.state().messages == 2


def test_discard_new_at_subject_limit_replaces(make_store: MakeStore) -> None:
    # At the per-subject limit the oldest of the subject makes room, so max_msgs is not hit.
    store = make_store(max_msgs=2, max_msgs_per_subject=1, discard="new")
    store.store_msg("a", b"", b"1")
    store.store_msg("b", b"", b"1")
    store.store_msg("a", b"", b"2")
    assert seqs(store) == [2, 3]
    with pytest.raises(MaxMsgsError):
        store.store_msg("c", b"", b"1")


def test_max_msg_size(make_store: MakeStore) -> None:
    store = make_store(max_msg_size=10)
    store.store_msg("a", b"", b"x" * 10)
    with pytest.raises(MsgTooLargeError) as err:
        store.store_msg("a", b"", b"x" * 11)
    assert err.value.description == "message size exceeds maximum allowed"
    with pytest.raises(StoreError):
        store.store_msg("a", HDR, b"x")
    assert store.state().messages == 1


def test_update_limits_removes_at_once(make_store: MakeStore) -> None:
    store = make_store()
    for i in range(20):
        store.store_msg(f"k.{i % 4}", b"", b"%d" % i)
    store.update_limits(StreamLimits(max_msgs_per_subject=3))
    assert store.state().messages == 12
    store.update_limits(StreamLimits(max_msgs=5, max_msgs_per_subject=3))
    assert seqs(store) == [16, 17, 18, 19, 20]
    assert store.limits.max_msgs == 5
    # Discard new does not remove what is already there (nats-server's enforceMsgLimit).
    store.update_limits(StreamLimits(max_msgs=2, discard="new"))
    assert store.state().messages == 5


def test_purge_all(make_store: MakeStore) -> None:
    store = make_store()
    for i in range(10):
        store.store_msg("a", b"", b"%d" % i)
    assert store.purge() == 10
    st = store.state()
    assert (st.messages, st.bytes, st.first_seq, st.last_seq, st.num_subjects) == (0, 0, 11, 10, 0)
    assert store.load_next_msg(">", 0) is None
    assert store.store_msg("a", b"", b"")[0] == 11
    assert store.purge(">") == 1


def test_purge_up_to_seq(make_store: MakeStore) -> None:
    store = make_store()
    for i in range(10):
        store.store_msg(f"s.{i % 2}", b"", b"%d" % i)
    assert store.purge(seq=1) == 0
    assert store.purge(seq=4) == 3
    assert store.state().first_seq == 4
    assert store.purge("s.0", seq=8) == 2  # seqs 5 and 7
    assert seqs(store) == [4, 6, 8, 9, 10]


def test_purge_past_the_end(make_store: MakeStore) -> None:
    store = make_store()
    store.store_msg("a", b"", b"")
    assert store.purge(seq=100) == 1
    st = store.state()
    assert (st.first_seq, st.last_seq) == (100, 99)
    assert store.store_msg("a", b"", b"")[0] == 100


def test_purge_subject_and_keep(make_store: MakeStore) -> None:
    store = make_store()
    for i in range(12):
        store.store_msg(f"s.{i % 3}", b"", b"%d" % i)
    assert store.purge("s.1", keep=1) == 3
    assert seqs(store, "s.1") == [11]
    assert store.purge("s.1", keep=5) == 0
    assert store.purge("", keep=4) == 5
    assert seqs(store) == [9, 10, 11, 12]
    assert store.purge("s.*") == 4
    assert store.state().messages == 0
    assert store.purge("nothing") == 0


def test_purge_wildcard_keeps_others(make_store: MakeStore) -> None:
    store = make_store()
    for i in range(9):
        store.store_msg(["a.x", "b.y", "a.z"][i % 3], b"", b"%d" % i)
    assert store.purge("a.*") == 6
    assert store.subjects_state() == {"b.y": 3}
    assert store.purge("a.*") == 0


def test_load_next_with_filters(make_store: MakeStore) -> None:
    store = make_store()
    subjects = ["orders.eu.1", "orders.us.1", "ship.eu", "orders.eu.2", "ship.us"]
    for s in subjects:
        store.store_msg(s, b"", s.encode())
    assert seqs(store, "") == [1, 2, 3, 4, 5]
    assert seqs(store, ">") == [1, 2, 3, 4, 5]
    assert seqs(store, "orders.>") == [1, 2, 4]
    assert seqs(store, "orders.eu.*") == [1, 4]
    assert seqs(store, "*.eu") == [3]
    assert seqs(store, "ship.us") == [5]
    assert seqs(store, "nope") == []
    msg = store.load_next_msg("orders.*.1", 2)
    assert msg is not None and msg.seq == 2 and msg.data == b"orders.us.1"
    assert store.load_next_msg("orders.>", 5) is None
    assert store.load_next_msg(">", 100) is None


def test_load_next_with_many_subjects(make_store: MakeStore) -> None:
    # Enough subjects that wildcards are answered by walking sequences.
    store = make_store()
    for i in range(600):
        store.store_msg(f"k.{i}.{'odd' if i % 2 else 'even'}", b"", b"")
    found = seqs(store, "k.*.odd")
    assert found == list(range(2, 601, 2))
    assert seqs(store, "k.7.>") == [8]
    assert store.num_pending(0, "k.*.even") == 300
    last = store.load_last_msg("k.*.even")
    assert last is not None and last.seq == 599
    prev = store.load_prev_msg("k.*.odd", 599)
    assert prev is not None and prev.seq == 598


def test_load_last(make_store: MakeStore) -> None:
    store = make_store()
    assert store.load_last_msg(">") is None
    for s in ["a.1", "b.1", "a.2", "b.2", "c"]:
        store.store_msg(s, b"", s.encode())
    for filt, want in [(">", 5), ("", 5), ("a.*", 3), ("b.1", 2), ("a.>", 3), ("z", None)]:
        msg = store.load_last_msg(filt)
        assert (msg.seq if msg else None) == want, filt
    store.remove_msg(5)
    msg = store.load_last_msg(">")
    assert msg is not None and msg.seq == 4


def test_num_pending(make_store: MakeStore) -> None:
    store = make_store()
    for i in range(10):
        store.store_msg(f"s.{i % 3}", b"", b"")
    store.remove_msg(4)
    assert store.num_pending(0) == 9
    assert store.num_pending(1, ">") == 9
    assert store.num_pending(5) == 6
    assert store.num_pending(11) == 0
    assert store.num_pending(1, "s.0") == 3  # 1, 7, 10 (4 removed)
    assert store.num_pending(8, "s.0") == 1
    assert store.num_pending(1, "s.*") == 9
    assert store.num_pending(1, "s.*", last_per_subject=True) == 3
    assert store.num_pending(10, "s.*", last_per_subject=True) == 1
    assert store.num_pending(1, "s.1", last_per_subject=True) == 1
    assert store.num_pending(1, "x", last_per_subject=True) == 0


def test_subjects_state(make_store: MakeStore) -> None:
    store = make_store()
    for s in ["a.1", "a.1", "a.2", "b.1"]:
        store.store_msg(s, b"", b"")
    assert store.subjects_state() == {"a.1": 2, "a.2": 1, "b.1": 1}
    assert store.subjects_state("a.*") == {"a.1": 2, "a.2": 1}
    assert store.subjects_state("b.1") == {"b.1": 1}
    assert store.subjects_state("c") == {}


def test_seq_for_time(make_store: MakeStore) -> None:
    store = make_store()
    for ts in (10, 20, 30):
        store.store_msg("a", b"", b"", ts=ts)
    assert store.seq_for_time(0) == 1
    assert store.seq_for_time(20) == 2
    assert store.seq_for_time(21) == 3
    assert store.seq_for_time(31) == 4


def test_consumer_state_round_trip(make_store: MakeStore) -> None:
    store = make_store()
    cs = store.consumer_state_store("worker")
    assert cs.load() is None
    state = {"delivered": {"consumer_seq": 5, "stream_seq": 9}, "pending": {"7": [1, 2]}}
    cs.save(state)
    state["delivered"]["consumer_seq"] = 6  # later edits by the caller do not leak in
    assert cs.load() == {
        "delivered": {"consumer_seq": 5, "stream_seq": 9},
        "pending": {"7": [1, 2]},
    }
    assert store.consumer_names() == ["worker"]
    assert store.state().consumer_count == 1
    cs.delete()
    assert store.consumer_names() == []
    with pytest.raises(ValueError):
        store.consumer_state_store("../evil")


def test_closed_store_refuses(make_store: MakeStore) -> None:
    store = make_store()
    store.store_msg("a", b"", b"")
    store.close()
    with pytest.raises(StoreClosedError):
        store.store_msg("a", b"", b"")
    with pytest.raises(StoreClosedError):
        store.load_msg(1)


def test_when_durable_without_loop_calls_back(make_store: MakeStore) -> None:
    store = make_store()
    seq, _ = store.store_msg("a", b"", b"")
    called: list[int] = []
    store.when_durable(seq, lambda: called.append(seq))
    assert called == [1]


def test_first_message_alone_over_max_bytes(make_store: MakeStore) -> None:
    store = make_store(max_bytes=60)
    assert store.store_msg("a", b"", b"q" * 100)[0] == 1
    st = store.state()
    assert (st.messages, st.first_seq, st.last_seq) == (0, 2, 1)
    store.store_msg("a", b"", b"q")
    assert store.state().messages == 1


class CountingRecs(dict[int, object]):
    """The store's sequence index, counting lookups: a walk that visits every removed sequence
    shows up as thousands of them."""

    lookups = 0

    def get(self, key: int, default: object = None) -> object:
        self.lookups += 1
        return super().get(key, default)

    def __contains__(self, key: object) -> bool:
        self.lookups += 1
        return super().__contains__(key)


def test_long_runs_of_removed_sequences_are_skipped(make_store: MakeStore) -> None:
    # A KV stream: two live messages with 20k removed sequences between them. Walks must skip
    # the run (binary search in the deleted list), not visit each sequence.
    store = make_store(max_msgs_per_subject=1)
    store.store_msg("kv.pinned", b"", b"p")
    for i in range(20_000):
        store.store_msg("kv.hot", b"", b"%d" % i)
    store.store_msg("kv.other", b"", b"o")
    recs = store._recs = CountingRecs(store._recs)  # type: ignore[assignment]
    assert [m.seq for m in iter_all(store, ">")] == [1, 20_001, 20_002]
    assert [m.seq for m in iter_all(store, "kv.*")] == [1, 20_001, 20_002]
    assert [m.seq for m in store.load_next_msgs(">", 1, 10)] == [1, 20_001, 20_002]
    last = store.load_prev_msg(">", 20_000)
    assert last is not None and last.seq == 1
    last = store.load_prev_msg("kv.*", 20_000)
    assert last is not None and last.seq == 1
    assert store.num_pending(2) == 2
    assert recs.lookups < 200
    store.remove_msg(1)
    assert store.state().first_seq == 20_001


def iter_all(store: Store, filter_subject: str) -> list[StoredMsg]:
    out = []
    m = store.load_next_msg(filter_subject, 0)
    while m is not None:
        out.append(m)
        m = store.load_next_msg(filter_subject, m.seq + 1)
    return out


def test_store_msgs_is_store_msg_for_each(make_store: MakeStore) -> None:
    """A batch (what a stream stores of one turn's simple publishes) gets the sequences,
    sizes, subjects and index a store_msg per message would give, under one timestamp."""
    one_by_one, batched = make_store(), make_store()
    assert batched.unlimited and not make_store(max_msgs=10).unlimited
    subjects = ["a", "b.c", "a", "ü.x", "b.c"] * 40  # past the file store's 4 KiB segments
    datas = [b"m%d" % i for i in range(len(subjects))]
    headers = [HDR if i % 3 == 0 else b"" for i in range(len(subjects))]
    one_by_one.store_msg("z", b"", b"first")
    batched.store_msg("z", b"", b"first")
    for subject, header, data in zip(subjects, headers, datas, strict=True):
        one_by_one.store_msg(subject, header, data)
    first, ts = batched.store_msgs(subjects[:100], headers[:100], datas[:100])
    assert first == 2
    assert batched.store_msgs(subjects[100:], headers[100:], datas[100:])[0] == 102
    a, b = one_by_one.state(), batched.state()
    assert (a.messages, a.bytes, a.first_seq, a.last_seq, a.num_subjects) == (
        b.messages,
        b.bytes,
        b.first_seq,
        b.last_seq,
        b.num_subjects,
    )
    assert batched.subjects_state() == one_by_one.subjects_state()
    assert batched.num_pending(50, "b.c") == one_by_one.num_pending(50, "b.c")
    for seq in range(2, 202):
        msg = batched.load_msg(seq)
        assert msg is not None
        expected = (subjects[seq - 2], headers[seq - 2], datas[seq - 2])
        assert (msg.subject, msg.header, msg.data) == expected
    assert batched.load_msg(2).ts == ts  # type: ignore[union-attr]
    assert [m.seq for m in batched.load_next_msgs("a", 0, 1000)] == seqs(one_by_one, "a")
    seq, _ = batched.store_msg("z", HDR, b"after")
    assert seq == 202


# -- skipping sequences (a catch-up's gaps: nats-server's SkipMsg / SkipMsgs) --------------------


def test_skip_on_an_empty_store_moves_the_first_sequence(make_store: MakeStore) -> None:
    store = make_store()
    store.skip_msgs(1, 5)
    st = store.state()
    assert (st.messages, st.first_seq, st.last_seq, st.num_deleted) == (0, 6, 5, 0)
    assert store.store_msg("a", b"", b"x", ts=7) == (6, 7)
    st = store.state()
    assert (st.messages, st.first_seq, st.last_seq, st.num_deleted) == (1, 6, 6, 0)
    assert store.load_msg(5) is None and store.load_next_msg(">", 0).seq == 6  # type: ignore[union-attr]


def test_skip_after_messages_makes_interior_deletes(make_store: MakeStore) -> None:
    store = make_store()
    for i in range(3):
        store.store_msg("a", b"", b"m%d" % i, ts=10 + i)
    store.skip_msgs(4, 1)
    store.skip_msgs(5, 1000)
    st = store.state()
    assert (st.messages, st.first_seq, st.last_seq, st.num_deleted) == (3, 1, 1004, 1001)
    assert st.last_ts == 12  # a skip keeps the last time it has
    assert store.store_msg("b", HDR, b"next")[0] == 1005
    st = store.state()
    assert (st.messages, st.first_seq, st.last_seq, st.num_deleted) == (4, 1, 1005, 1001)
    assert seqs(store) == [1, 2, 3, 1005]
    assert store.num_pending(2) == 3
    assert store.load_prev_msg(">", 1004).seq == 3  # type: ignore[union-attr]
    assert store.deleted_seqs() == list(range(4, 1005))
    # Removing the front walks over the skipped run in one step.
    store.purge(seq=4)
    st = store.state()
    assert (st.messages, st.first_seq, st.num_deleted) == (1, 1005, 0)


def test_skip_that_does_not_follow_the_last_sequence_is_refused(make_store: MakeStore) -> None:
    store = make_store()
    store.store_msg("a", b"", b"x")
    for first in (1, 3, 0):
        with pytest.raises(SequenceMismatchError) as info:
            store.skip_msgs(first, 2)
        assert info.value.description == "expected sequence does not match store"
    store.skip_msgs(2, 0)  # nothing to skip
    st = store.state()
    assert (st.messages, st.first_seq, st.last_seq) == (1, 1, 1)


def test_skip_after_everything_was_removed(make_store: MakeStore) -> None:
    store = make_store()
    store.store_msg("a", b"", b"x")
    store.store_msg("a", b"", b"y")
    store.remove_msg(1)
    store.remove_msg(2)
    store.skip_msgs(3, 4)
    st = store.state()
    assert (st.messages, st.first_seq, st.last_seq, st.num_deleted) == (0, 7, 6, 0)
    assert store.store_msg("a", b"", b"z")[0] == 7
