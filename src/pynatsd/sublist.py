"""The routing trie: which subscriptions want a published subject (nats-server sublist.go).

A :class:`SubList` stores subscriptions in a trie of *levels*, one level per token position.
A level maps literal tokens to *nodes* and keeps the ``*`` and ``>`` nodes in two separate slots,
so a match looks up one literal token and checks two slots per level instead of scanning.
A node holds the plain subscribers, the queue subscribers by group name, and the next level.

:meth:`SubList.match` answers with an immutable :class:`SubListResult`, shared by every caller
and kept in a result cache keyed by the published subject. Every insert and remove bumps
:attr:`SubList.genid` and invalidates the cache in O(1): a literal subscription can only change
the entry for its own subject, so only that entry goes; a wildcard one drops the whole cache.
See ``docs/sublist.md`` for the design and where pynatsd differs from nats-server.

Not thread-safe, on purpose: the server runs on one asyncio event loop and the match path must
stay free of locks. Use :class:`LockedSubList` to share a SubList between threads.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar

from mypy_extensions import mypyc_attr

from pynatsd.subjects import is_valid_queue_name, is_valid_subject, split_sublist_subject

__all__ = [
    "CACHE_MAX",
    "CACHE_SWEEP_STEP",
    "EMPTY_RESULT",
    "PLIST_MAX",
    "PLIST_MIN",
    "InvalidSubjectError",
    "LockedSubList",
    "SubList",
    "SubListResult",
    "SubListStats",
    "SubscriptionLike",
]

CACHE_MAX = 1024
"""Most results the cache holds (per key type: ``str`` for match, ``bytes`` for match_bytes)."""
CACHE_SWEEP_STEP = 4
"""Entries of the retired cache generation freed by each cache miss (see ``docs/sublist.md``)."""
PLIST_MAX = 256
"""A node with more plain subscribers than this keeps them in a dict plus a flat tuple."""
PLIST_MIN = 128
"""A high-fanout node goes back to a plain tuple below this many subscribers (hysteresis)."""


class InvalidSubjectError(ValueError):
    """A subject or queue name that cannot be inserted into a SubList."""


class SubscriptionLike(Protocol):
    """What the SubList needs from a subscription: its subject and queue group.

    The SubList keys subscriptions by identity (``hash``/``==`` of ``object``), so the same
    subject subscribed twice by different objects counts twice. ``subject`` and ``queue`` must
    not change while the subscription is inserted.
    """

    @property
    def subject(self) -> str: ...

    @property
    def queue(self) -> str | None: ...


S = TypeVar("S", bound=SubscriptionLike)


# A regular Python class even when compiled (mypyc's native classes cannot refuse writes with
# __setattr__), so it is the same class on both paths and the interpreted server code reads its
# slots directly.
@mypyc_attr(native_class=False)
class SubListResult(Generic[S]):
    """The subscriptions a published subject reaches. Immutable: results are cached and shared.

    ``psubs`` are the plain subscribers; ``qsubs`` holds one tuple per queue group name with
    every member of that group from every matching node (the router picks one per group).
    """

    __slots__ = ("psubs", "qsubs")

    psubs: tuple[S, ...]
    qsubs: tuple[tuple[S, ...], ...]

    def __init__(self, psubs: tuple[S, ...] = (), qsubs: tuple[tuple[S, ...], ...] = ()) -> None:
        # Slot descriptors write past our own __setattr__, which refuses every write.
        _set_psubs(self, psubs)
        _set_qsubs(self, qsubs)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError("SubListResult is immutable")

    def __delattr__(self, name: str) -> None:
        raise AttributeError("SubListResult is immutable")

    def __repr__(self) -> str:
        return f"SubListResult(psubs={self.psubs!r}, qsubs={self.qsubs!r})"


_set_psubs: Any = vars(SubListResult)["psubs"].__set__
_set_qsubs: Any = vars(SubListResult)["qsubs"].__set__
_new_object = object.__new__


def _result(psubs: tuple[S, ...], qsubs: tuple[tuple[S, ...], ...] = ()) -> SubListResult[S]:
    # SubListResult() without the Python-level __init__ call: this runs on every cache miss.
    r: SubListResult[S] = _new_object(SubListResult)
    _set_psubs(r, psubs)
    _set_qsubs(r, qsubs)
    return r


EMPTY_RESULT: SubListResult[Any] = SubListResult()
"""The one result with no subscribers; ``match`` returns this very object for no interest."""


@dataclass(frozen=True, slots=True)
class SubListStats:
    """A snapshot of a SubList's counters, with nats-server's ``SublistStats`` fields.

    ``max_fanout`` and ``avg_fanout`` are computed over the cached results (number of plain
    subscribers plus number of queue groups), as nats-server does.
    """

    num_subs: int
    num_cache: int
    num_inserts: int
    num_removes: int
    num_matches: int
    cache_hit_rate: float
    max_fanout: int
    avg_fanout: float


class _Node(Generic[S]):
    # Plain subscribers live in a tuple while there are at most PLIST_MAX of them: a tuple of
    # one costs 56 bytes where a dict costs 184, and it *is* the result a match returns, shared
    # and never copied. Adding or removing copies it, which is C-speed up to PLIST_MAX. Above
    # that they move to a dict (insertion-ordered identity set, O(1) insert and remove) and
    # `plist` keeps a flat tuple of it for matches; below PLIST_MIN they go back to a tuple.
    # Attributes are None until used: most nodes on a path hold no subscriber at all.
    __slots__ = ("next", "plist", "psubs", "qsubs")

    def __init__(self) -> None:
        self.next: _Level[S] | None = None
        self.psubs: tuple[S, ...] | dict[S, None] | None = None
        self.qsubs: dict[str, dict[S, None]] | None = None
        # Only with a dict `psubs`: the flat snapshot of it, or () when stale (rebuilt by the
        # next match that reaches the node). A dict node is never empty, so () is free.
        self.plist: tuple[S, ...] = ()

    def is_empty(self) -> bool:
        return not self.psubs and not self.qsubs and self.next is None


class _Level(Generic[S]):
    __slots__ = ("fwc", "nodes", "pwc")

    def __init__(self) -> None:
        self.nodes: dict[str, _Node[S]] = {}
        self.pwc: _Node[S] | None = None
        self.fwc: _Node[S] | None = None

    def is_empty(self) -> bool:
        return not self.nodes and self.pwc is None and self.fwc is None


K = TypeVar("K", str, bytes)


class _Cache(Generic[K, S]):
    """Results by published subject, bounded at CACHE_MAX with an amortised sweep.

    When ``cur`` overflows it becomes ``old`` (O(1)) and a fresh ``cur`` starts. Each later miss
    frees CACHE_SWEEP_STEP entries of ``old``, so no single match pays for the whole sweep, and
    a miss that finds its key still in ``old`` moves it back: entries that are still being used
    survive the sweep, the rest go.
    """

    __slots__ = ("cur", "old")

    def __init__(self) -> None:
        self.cur: dict[K, SubListResult[S]] = {}
        self.old: dict[K, SubListResult[S]] = {}

    def __len__(self) -> int:
        return len(self.cur) + len(self.old)

    def promote(self, key: K) -> SubListResult[S] | None:
        r = self.old.pop(key, None)
        if r is not None:
            self.put(key, r)
        return r

    def put(self, key: K, result: SubListResult[S]) -> None:
        cur = self.cur
        cur[key] = result
        old = self.old
        if old:
            # popitem() takes the newest entry in O(1); popping from the front would make
            # CPython skip over the holes left by earlier deletions, O(n) each time.
            for _ in range(CACHE_SWEEP_STEP):
                if not old:
                    break
                old.popitem()
        if len(cur) >= CACHE_MAX:
            # Only reachable while `old` is empty: a sweep frees CACHE_SWEEP_STEP per miss and
            # is over long before `cur` fills up again, so the two together stay <= CACHE_MAX.
            self.old = cur
            self.cur = {}

    def discard(self, key: K) -> None:
        self.cur.pop(key, None)
        self.old.pop(key, None)

    def clear(self) -> None:
        self.cur = {}
        self.old = {}

    def values(self) -> Iterator[SubListResult[S]]:
        yield from self.cur.values()
        yield from self.old.values()


def _collect(
    level: _Level[S] | None, toks: list[str], i: int, ntoks: int, out: list[_Node[S]]
) -> None:
    """Append to ``out`` every node whose subscriptions match ``toks[i:]`` below ``level``.

    This is nats-server's ``matchLevel``: at each level the ``>`` node matches, the ``*`` node
    branches, and the token is looked up among the literals. A published token ``*`` or ``>``
    is looked up as a literal too; no subscription stores those as literals, so only the
    wildcard slots match it.
    """
    n: _Node[S] | None = None
    pwc: _Node[S] | None = None
    last = ntoks - 1
    while i < ntoks:
        if level is None:
            return
        if level.fwc is not None:
            out.append(level.fwc)
        pwc = level.pwc
        if pwc is not None and i < last and pwc.next is not None:
            _collect(pwc.next, toks, i + 1, ntoks, out)
        n = level.nodes.get(toks[i])
        level = None if n is None else n.next
        i += 1
    if n is not None:
        out.append(n)
    if pwc is not None:
        out.append(pwc)


def _node_psubs(n: _Node[S]) -> tuple[S, ...]:
    """The plain subscribers of a node as a tuple that can be shared."""
    psubs = n.psubs
    if type(psubs) is tuple:
        return psubs
    if psubs is None:
        return ()
    pl = n.plist
    if not pl:
        pl = n.plist = tuple(psubs)
    return pl


def _build(nodes: list[_Node[S]]) -> SubListResult[S]:
    if len(nodes) == 1:
        n = nodes[0]
        if not n.qsubs:
            if not n.psubs:
                return EMPTY_RESULT
            # The node's own tuple: a single-node result copies nothing.
            return _result(_node_psubs(n))
    psubs: list[S] = []
    groups: dict[str, list[S]] | None = None
    for n in nodes:
        if n.psubs:
            psubs.extend(_node_psubs(n))
        q = n.qsubs
        if q:
            if groups is None:
                groups = {}
            for name, members in q.items():
                g = groups.get(name)
                if g is None:
                    groups[name] = list(members)
                else:
                    g.extend(members)
    if groups is None:
        if not psubs:
            return EMPTY_RESULT
        return _result(tuple(psubs))
    return _result(tuple(psubs), tuple([tuple(g) for g in groups.values()]))


def _tokens(subject: str) -> list[str] | None:
    """The tokens of a subject to match, or None if it can match nothing (empty tokens)."""
    toks = subject.split(".")
    if "" in toks:
        return None
    return toks


def _count_node(n: _Node[S]) -> tuple[int, int]:
    np = len(n.psubs) if n.psubs else 0
    nq = sum(len(m) for m in n.qsubs.values()) if n.qsubs else 0
    return np, nq


def _any_interest(level: _Level[S] | None, toks: list[str], i: int, ntoks: int) -> bool:
    # _collect's walk, answering at the first node with a subscriber. Pruning guarantees a `>`
    # node exists only while it has subscribers (nothing can hang below `>`).
    n: _Node[S] | None = None
    pwc: _Node[S] | None = None
    last = ntoks - 1
    while i < ntoks:
        if level is None:
            return False
        if level.fwc is not None:
            return True
        pwc = level.pwc
        if (
            pwc is not None
            and i < last
            and pwc.next is not None
            and _any_interest(pwc.next, toks, i + 1, ntoks)
        ):
            return True
        n = level.nodes.get(toks[i])
        level = None if n is None else n.next
        i += 1
    if n is not None and (n.psubs or n.qsubs):
        return True
    return pwc is not None and bool(pwc.psubs or pwc.qsubs)


def _all_in_level(level: _Level[S], out: list[_Node[S]]) -> None:
    stack = [level]
    while stack:
        lv = stack.pop()
        for n in (*lv.nodes.values(), lv.pwc, lv.fwc):
            if n is None:
                continue
            out.append(n)
            if n.next is not None:
                stack.append(n.next)


def _reverse(level: _Level[S] | None, toks: list[str], i: int, out: list[_Node[S]]) -> None:
    """Append the nodes of every subscription whose subject collides with ``toks[i:]``."""
    while level is not None:
        t = toks[i]
        if t == ">":
            # One or more tokens: everything at or below this level collides.
            _all_in_level(level, out)
            return
        if level.fwc is not None:
            out.append(level.fwc)
        cands: list[_Node[S]] = []
        if t == "*":
            cands.extend(level.nodes.values())
        else:
            lit = level.nodes.get(t)
            if lit is not None:
                cands.append(lit)
        if level.pwc is not None:
            cands.append(level.pwc)
        if i == len(toks) - 1:
            out.extend(cands)
            return
        if not cands:
            return
        for c in cands[1:]:
            _reverse(c.next, toks, i + 1, out)
        level = cands[0].next
        i += 1


class SubList(Generic[S]):
    """Subscriptions indexed by subject, matched against published subjects.

    Not thread-safe: meant for one asyncio event loop, with a lock-free match path. Wrap it in
    :class:`LockedSubList` to use it from several threads.

    ``genid`` counts changes: it is bumped by every insert and remove that changes the
    SubList (once per :meth:`remove_batch`), so callers can cache whatever they derive from
    a match and check it with one integer comparison.
    """

    __slots__ = (
        "_bcache",
        "_cache",
        "_cache_on",
        "_count",
        "_inserts",
        "_matches",
        "_misses",
        "_removes",
        "_root",
        "genid",
        "watcher",
    )

    def __init__(self, cache: bool = True) -> None:
        self.genid: int = 0
        # Told of every subscription inserted (+1) or removed (-1): how a cluster learns of
        # local interest to announce to its routes. None (no cost) without a cluster.
        self.watcher: Callable[[S, int], None] | None = None
        self._root: _Level[S] = _Level()
        self._cache_on = cache
        # Disabled caches stay empty, so the hit path needs no "is the cache on" test.
        self._cache: _Cache[str, S] = _Cache()
        self._bcache: _Cache[bytes, S] = _Cache()
        self._count = 0
        self._inserts = 0
        self._removes = 0
        self._matches = 0
        # Hits are derived (matches - misses) so that the hit path bumps a single counter.
        self._misses = 0

    @property
    def cache_enabled(self) -> bool:
        return self._cache_on

    # -- changes -------------------------------------------------------------------------------

    def add_watcher(self, watcher: Callable[[S, int], None]) -> None:
        """Tell `watcher` too of every insert and removal (the cluster's routes and the
        gateways each announce local interest; each watches the same SubList)."""
        first = self.watcher
        if first is None:
            self.watcher = watcher
            return

        def both(sub: S, delta: int) -> None:
            first(sub, delta)
            watcher(sub, delta)

        self.watcher = both

    def insert(self, sub: S) -> None:
        """Add ``sub``. Inserting an already inserted subscription object changes nothing.

        Raises :class:`InvalidSubjectError` (and leaves the SubList unchanged) when the subject
        is not a valid subscription subject or the queue name is not valid.
        """
        subject = sub.subject
        queue = sub.queue
        toks = split_sublist_subject(subject) if isinstance(subject, str) else None
        if toks is None:
            raise InvalidSubjectError(f"invalid subject {subject!r}")
        if queue is not None and (not isinstance(queue, str) or not is_valid_queue_name(queue)):
            raise InvalidSubjectError(f"invalid queue name {queue!r}")

        level = self._root
        n: _Node[S] | None = None
        wild = False
        for t in toks:
            if n is not None:
                nxt = n.next
                if nxt is None:
                    nxt = n.next = _Level()
                level = nxt
            if t == "*":
                wild = True
                n = level.pwc
                if n is None:
                    n = level.pwc = _Node()
            elif t == ">":
                wild = True
                n = level.fwc
                if n is None:
                    n = level.fwc = _Node()
            else:
                n = level.nodes.get(t)
                if n is None:
                    n = level.nodes[t] = _Node()
        assert n is not None  # a valid subject has at least one token

        if queue is None:
            psubs = n.psubs
            if psubs is None:
                n.psubs = (sub,)
            elif sub in psubs:
                return
            elif isinstance(psubs, tuple):
                if len(psubs) < PLIST_MAX:
                    n.psubs = (*psubs, sub)
                else:
                    big = dict.fromkeys(psubs)
                    big[sub] = None
                    n.psubs = big
                    n.plist = ()
            else:
                psubs[sub] = None
                n.plist = ()
        else:
            qsubs = n.qsubs
            if qsubs is None:
                qsubs = n.qsubs = {}
            group = qsubs.get(queue)
            if group is None:
                group = qsubs[queue] = {}
            elif sub in group:
                return
            group[sub] = None

        self._count += 1
        self._inserts += 1
        self.genid += 1
        self._invalidate(subject, wild)
        if self.watcher is not None:
            self.watcher(sub, 1)

    def remove(self, sub: S) -> bool:
        """Remove ``sub``; False (and nothing changes) if it was not inserted."""
        wild = self._remove(sub)
        if wild is None:
            return False
        self.genid += 1
        self._invalidate(sub.subject, wild)
        return True

    def remove_batch(self, subs: Iterable[S]) -> None:
        """Remove every subscription of ``subs`` that is present, with a single genid bump."""
        removed: list[str] = []
        any_wild = False
        for sub in subs:
            wild = self._remove(sub)
            if wild is not None:
                removed.append(sub.subject)
                any_wild = any_wild or wild
        if not removed:
            return
        self.genid += 1
        if any_wild:
            self._cache.clear()
            self._bcache.clear()
        else:
            for subject in removed:
                self._invalidate(subject, False)

    def _remove(self, sub: S) -> bool | None:
        """Unlink ``sub`` and prune; None if absent, else whether its subject has wildcards."""
        subject = sub.subject
        if not isinstance(subject, str):
            return None
        level: _Level[S] | None = self._root
        path: list[tuple[_Level[S], str, _Node[S]]] = []
        n: _Node[S] | None = None
        wild = False
        for t in subject.split("."):
            if level is None:
                return None
            if t == "*":
                wild = True
                n = level.pwc
            elif t == ">":
                wild = True
                n = level.fwc
            else:
                n = level.nodes.get(t)
            if n is None:
                return None
            path.append((level, t, n))
            level = n.next
        if n is None:
            return None

        queue = sub.queue
        if queue is None:
            psubs = n.psubs
            if psubs is None:
                return None
            if isinstance(psubs, tuple):
                try:
                    i = psubs.index(sub)
                except ValueError:
                    return None
                n.psubs = psubs[:i] + psubs[i + 1 :] or None
            else:
                if sub not in psubs:
                    return None
                del psubs[sub]
                if len(psubs) < PLIST_MIN:
                    n.psubs = tuple(psubs)
                n.plist = ()
        else:
            qsubs = n.qsubs
            group = qsubs.get(queue) if qsubs else None
            if group is None or sub not in group:
                return None
            del group[sub]
            if not group:
                assert qsubs is not None
                del qsubs[queue]
                if not qsubs:
                    n.qsubs = None

        self._count -= 1
        self._removes += 1
        if self.watcher is not None:
            self.watcher(sub, -1)
        # Prune from the leaf up: a node goes when it has no subscriber and nothing below it,
        # and an emptied level is dropped from its node so leaves stay small.
        for lv, t, node in reversed(path):
            nxt = node.next
            if nxt is not None:
                if not nxt.is_empty():
                    break
                node.next = None
            if node.psubs or node.qsubs:
                break
            if t == "*":
                lv.pwc = None
            elif t == ">":
                lv.fwc = None
            else:
                del lv.nodes[t]
        return wild

    def _invalidate(self, subject: str, wild: bool) -> None:
        if wild:
            # Which cached subjects a wildcard reaches is a scan; starting over is O(1). A burst
            # of subscriptions with no publishing in between finds the caches empty already.
            cache, bcache = self._cache, self._bcache
            if cache.cur or cache.old:
                cache.clear()
            if bcache.cur or bcache.old:
                bcache.clear()
        else:
            # Cache keys are published subjects, and a literal subscription is matched by one
            # published subject only: itself. A published `*` or `>` token never reaches it.
            # A burst of subscriptions with no publishing in between: nothing to drop.
            cache, bcache = self._cache, self._bcache
            if cache.cur or cache.old:
                cache.discard(subject)
            if not bcache.cur and not bcache.old:
                return
            try:
                # The inverse of match_bytes' decode, so the bytes key is exactly the one a PUB
                # of this subject was cached under (non-UTF-8 bytes included).
                key = subject.encode("utf-8", "surrogateescape")
            except UnicodeEncodeError:
                return  # a lone surrogate no byte string decodes to: no bytes key to drop
            bcache.discard(key)

    # -- matching ------------------------------------------------------------------------------

    def match(self, subject: str) -> SubListResult[S]:
        """The subscriptions interested in the published ``subject``.

        ``subject`` may hold ``*`` or ``>`` tokens (a non-pedantic publish); they only reach
        wildcard subscriptions, as in nats-server. An invalid subject (empty token) matches
        nothing. Returns :data:`EMPTY_RESULT` when nothing matches.
        """
        self._matches += 1
        r = self._cache.cur.get(subject)
        if r is not None:
            return r
        return self._match_miss(subject)

    def _match_miss(self, subject: str) -> SubListResult[S]:
        cache = self._cache
        if cache.old:
            r = cache.promote(subject)
            if r is not None:
                return r
        self._misses += 1
        toks = _tokens(subject)
        if toks is None:
            return EMPTY_RESULT
        nodes: list[_Node[S]] = []
        _collect(self._root, toks, 0, len(toks), nodes)
        r = _build(nodes) if nodes else EMPTY_RESULT
        if self._cache_on:
            cache.put(subject, r)
        return r

    def match_bytes(self, subject: bytes) -> SubListResult[S]:
        """:meth:`match` for a subject straight from the wire, cached by the bytes themselves.

        Bytes that are not valid UTF-8 are decoded with ``surrogateescape``, as the server
        decodes SUB subjects, so every byte sequence routes like in nats-server (which compares
        raw bytes): ``SUB >`` receives a PUB to ``b"\\xff"``, and ``SUB`` to those same bytes too.
        """
        self._matches += 1
        r = self._bcache.cur.get(subject)
        if r is not None:
            return r
        return self._match_bytes_miss(subject)

    def _match_bytes_miss(self, subject: bytes) -> SubListResult[S]:
        cache = self._bcache
        if cache.old:
            r = cache.promote(subject)
            if r is not None:
                return r
        self._misses += 1
        # nats-server routes subjects as raw bytes; surrogateescape keeps any byte sequence
        # matchable, the same way subscriptions decode their subjects.
        text = subject.decode("utf-8", "surrogateescape")
        toks = _tokens(text)
        if toks is None:
            return EMPTY_RESULT
        nodes: list[_Node[S]] = []
        _collect(self._root, toks, 0, len(toks), nodes)
        r = _build(nodes) if nodes else EMPTY_RESULT
        if self._cache_on:
            # bytes() so a key never pins a larger buffer (or a mutable bytearray) passed in.
            cache.put(subject if type(subject) is bytes else bytes(subject), r)
        return r

    def has_interest(self, subject: str) -> bool:
        """True if any subscription matches ``subject``; stops at the first one found.

        A cached subject is answered from the cache, and counts as a match and a cache hit in
        :meth:`stats` (nats-server counts the hit only).
        """
        r = self._cache.cur.get(subject)
        if r is not None:
            self._matches += 1
            return bool(r.psubs or r.qsubs)
        toks = _tokens(subject)
        if toks is None:
            return False
        return _any_interest(self._root, toks, 0, len(toks))

    def num_interest(self, subject: str) -> tuple[int, int]:
        """(plain subscribers, queue subscribers) matching ``subject``, without a result.

        Counts every matching node (nats-server's ``NumInterest`` stops at a ``>`` node and can
        undercount overlapping subscriptions). Uses the cache as :meth:`has_interest` does.
        """
        r = self._cache.cur.get(subject)
        if r is not None:
            self._matches += 1
            return len(r.psubs), sum(len(g) for g in r.qsubs)
        toks = _tokens(subject)
        if toks is None:
            return 0, 0
        nodes: list[_Node[S]] = []
        _collect(self._root, toks, 0, len(toks), nodes)
        np = nq = 0
        for n in nodes:
            a, b = _count_node(n)
            np += a
            nq += b
        return np, nq

    def reverse_match(self, subject: str) -> SubListResult[S]:
        """Every subscription whose subject collides with ``subject`` (a pattern or literal).

        A subscription is returned when some literal subject could match both it and
        ``subject``, e.g. ``reverse_match("foo.*")`` finds ``foo.bar``, ``foo.*``, ``*.*`` and
        ``foo.>`` but not ``foo.bar.baz``. Not cached. An invalid subject matches nothing.
        """
        if not is_valid_subject(subject):
            return EMPTY_RESULT
        nodes: list[_Node[S]] = []
        _reverse(self._root, subject.split("."), 0, nodes)
        return _build(nodes) if nodes else EMPTY_RESULT

    # -- inspection ----------------------------------------------------------------------------

    def all(self) -> list[S]:
        """Every inserted subscription, plain and queue."""
        nodes: list[_Node[S]] = []
        _all_in_level(self._root, nodes)
        subs: list[S] = []
        for n in nodes:
            if n.psubs:
                subs.extend(n.psubs)
            if n.qsubs:
                for g in n.qsubs.values():
                    subs.extend(g)
        return subs

    def count(self) -> int:
        """Number of subscriptions."""
        return self._count

    def cache_count(self) -> int:
        """Number of results in the cache (both key types, both generations)."""
        return len(self._cache) + len(self._bcache)

    def stats(self) -> SubListStats:
        """Counters and fan-out figures, as nats-server's ``Sublist.Stats``."""
        matches = self._matches
        hits = matches - self._misses
        tot = mx = cnt = 0
        for cache in (self._cache, self._bcache):
            for r in cache.values():
                f = len(r.psubs) + len(r.qsubs)
                tot += f
                cnt += 1
                mx = max(mx, f)
        return SubListStats(
            num_subs=self._count,
            num_cache=cnt,
            num_inserts=self._inserts,
            num_removes=self._removes,
            num_matches=matches,
            cache_hit_rate=hits / matches if matches else 0.0,
            max_fanout=mx,
            avg_fanout=tot / cnt if cnt else 0.0,
        )

    def num_levels(self) -> int:
        """Depth of the trie: the number of tokens of the longest stored path."""
        depth = 0
        stack: list[tuple[_Level[S], int]] = [(self._root, 0)]
        while stack:
            lv, d = stack.pop()
            if lv.is_empty():
                continue
            d += 1
            depth = max(depth, d)
            for n in (*lv.nodes.values(), lv.pwc, lv.fwc):
                if n is not None and n.next is not None:
                    stack.append((n.next, d))
        return depth


class LockedSubList(Generic[S]):
    """A :class:`SubList` behind one lock, for use from several threads.

    Every call, matches included, takes the lock: a match may fill the cache, so a shared
    read lock would not be enough. The asyncio server does not need this and should not pay
    for it.
    """

    __slots__ = ("_lock", "_sl")

    def __init__(self, cache: bool = True) -> None:
        self._sl: SubList[S] = SubList(cache)
        self._lock = threading.Lock()

    @property
    def genid(self) -> int:
        return self._sl.genid

    def insert(self, sub: S) -> None:
        with self._lock:
            self._sl.insert(sub)

    def remove(self, sub: S) -> bool:
        with self._lock:
            return self._sl.remove(sub)

    def remove_batch(self, subs: Iterable[S]) -> None:
        subs = list(subs)  # iterate caller code outside the lock
        with self._lock:
            self._sl.remove_batch(subs)

    def match(self, subject: str) -> SubListResult[S]:
        with self._lock:
            return self._sl.match(subject)

    def match_bytes(self, subject: bytes) -> SubListResult[S]:
        with self._lock:
            return self._sl.match_bytes(subject)

    def has_interest(self, subject: str) -> bool:
        with self._lock:
            return self._sl.has_interest(subject)

    def num_interest(self, subject: str) -> tuple[int, int]:
        with self._lock:
            return self._sl.num_interest(subject)

    def reverse_match(self, subject: str) -> SubListResult[S]:
        with self._lock:
            return self._sl.reverse_match(subject)

    def all(self) -> list[S]:
        with self._lock:
            return self._sl.all()

    def count(self) -> int:
        with self._lock:
            return self._sl.count()

    def stats(self) -> SubListStats:
        with self._lock:
            return self._sl.stats()
