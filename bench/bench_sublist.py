"""Micro-benchmarks for pynatsd.sublist (the counterpart of the Benchmark* functions in
nats-server's server/sublist_test.go).

    python bench/bench_sublist.py [--sizes 1000,100000,1000000] [--repeat 3]

For each size N it builds a trie of N subscriptions on unique 4-token subjects and reports:
insert and remove rates, match on a cache hit, on a miss (cache off, and cache on while cycling
through more subjects than the cache holds), match_bytes, has_interest, a wildcard-heavy trie,
and memory per subscription measured with tracemalloc (trie alone, and with the subscription
objects and their subject strings). Times are per operation, best of --repeat runs, and include
the Python loop that calls the method (about 15 ns).
"""

from __future__ import annotations

import argparse
import gc
import os
import platform
import random
import sys
import time
import tracemalloc
from collections.abc import Callable, Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from pynatsd.sublist import CACHE_MAX, SubList


class Sub:
    __slots__ = ("queue", "subject")

    def __init__(self, subject: str, queue: str | None = None) -> None:
        self.subject = subject
        self.queue = queue


def subject_for(i: int) -> str:
    # Unique 4-token subjects with a fan-out of 100 per level, like a hierarchy of
    # tenants, services and entities: s0.a0.b0.c0 ... s0.a99.b99.c99, then s1....
    return f"s{i // 1_000_000}.a{i // 10_000 % 100}.b{i // 100 % 100}.c{i % 100}"


def wildcard_for(i: int, rnd: random.Random) -> str:
    """A wildcard pattern over the i-th subject: one token `*`, or a `>` tail."""
    toks = subject_for(i).split(".")
    pos = rnd.randrange(1, 5)
    if pos == 4:
        return ".".join([*toks[:3], ">"])
    toks[pos] = "*"
    return ".".join(toks)


def rss_bytes() -> int:
    """Resident set size now (Linux); 0 where /proc is not available."""
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError):
        return 0


def best_per_op(fn: Callable[[], int], repeat: int) -> float:
    """Best time per operation in ns; `fn` runs a batch and returns how many ops it did."""
    best = float("inf")
    for _ in range(repeat):
        gc.collect()
        t0 = time.perf_counter_ns()
        n = fn()
        dt = time.perf_counter_ns() - t0
        best = min(best, dt / n)
    return best


def loop_match(
    m: Callable[[str], object], subjects: Sequence[str], rounds: int
) -> Callable[[], int]:
    def run() -> int:
        for _ in range(rounds):
            for s in subjects:
                m(s)
        return rounds * len(subjects)

    return run


def loop_match_bytes(
    m: Callable[[bytes], object], subjects: Sequence[bytes], rounds: int
) -> Callable[[], int]:
    def run() -> int:
        for _ in range(rounds):
            for s in subjects:
                m(s)
        return rounds * len(subjects)

    return run


def fmt_ns(ns: float) -> str:
    return f"{ns / 1000:8.3f} us" if ns >= 1000 else f"{ns:8.1f} ns"


def row(name: str, value: str) -> None:
    print(f"  {name:<58} {value}")


def bench_size(n: int, repeat: int) -> None:
    print(f"\n== {n:,} subscriptions (unique 4-token subjects, e.g. {subject_for(n - 1)})")
    rnd = random.Random(n)
    subjects = [subject_for(i) for i in range(n)]
    subs = [Sub(s) for s in subjects]

    # -- insert / memory ------------------------------------------------------------------------
    gc.collect()
    rss0 = rss_bytes()
    t0 = time.perf_counter_ns()
    sl: SubList[Sub] = SubList()
    for s in subs:
        sl.insert(s)
    row("insert", fmt_ns((time.perf_counter_ns() - t0) / n) + "/op")
    rss_growth = rss_bytes() - rss0

    del sl
    gc.collect()
    tracemalloc.start()
    base = tracemalloc.get_traced_memory()[0]
    sl = SubList()
    for s in subs:
        sl.insert(s)
    trie_bytes = tracemalloc.get_traced_memory()[0] - base
    tracemalloc.stop()
    tracemalloc.start()
    base = tracemalloc.get_traced_memory()[0]
    probe = [Sub(subject_for(i)) for i in range(min(n, 100_000))]
    sub_bytes = (tracemalloc.get_traced_memory()[0] - base) / len(probe)
    tracemalloc.stop()
    del probe
    row("memory: trie per subscription", f"{trie_bytes / n:8.0f} B")
    row(
        "memory: trie + subscription object + subject per sub",
        f"{trie_bytes / n + sub_bytes:8.0f} B",
    )
    row(
        f"memory: total for {n:,} subscriptions",
        f"{(trie_bytes + sub_bytes * n) / 2**20:8.1f} MiB",
    )
    if n >= 100_000 and rss_growth > 0:
        # Allocator overhead included; small sizes fit in already mapped memory.
        row("memory: process RSS growth while inserting (trie only)", f"{rss_growth / n:8.0f} B")

    # -- match ------------------------------------------------------------------------------------
    hot = rnd.sample(subjects, min(n, 100))
    for s in hot:
        sl.match(s)
    rounds = max(1, 200_000 // len(hot))
    row("match, cache hit", fmt_ns(best_per_op(loop_match(sl.match, hot, rounds), repeat)))
    hot_b = [s.encode() for s in hot]
    for s in hot_b:
        sl.match_bytes(s)
    row(
        "match_bytes, cache hit",
        fmt_ns(best_per_op(loop_match_bytes(sl.match_bytes, hot_b, rounds), repeat)),
    )
    row(
        "has_interest, cache hit",
        fmt_ns(best_per_op(loop_match(sl.has_interest, hot, rounds), repeat)),
    )

    # A cache that is on but never hits: more distinct subjects than the cache holds, so every
    # match also stores its result and pays its share of the sweep.
    cycle = rnd.sample(subjects, min(n, 10_000))
    if len(cycle) > 2 * CACHE_MAX:
        row(
            f"match, cache miss (cache on, {len(cycle):,} subjects cycling)",
            fmt_ns(best_per_op(loop_match(sl.match, cycle, 2), repeat)),
        )
        row(
            f"match_bytes, cache miss (cache on, {len(cycle):,} subjects cycling)",
            fmt_ns(
                best_per_op(
                    loop_match_bytes(sl.match_bytes, [c.encode() for c in cycle], 2), repeat
                )
            ),
        )

    nocache: SubList[Sub] = SubList(cache=False)
    for s in subs:
        nocache.insert(s)
    rounds = max(1, 100_000 // len(cycle))
    row(
        "match, cache miss, literal-only trie (cache off)",
        fmt_ns(best_per_op(loop_match(nocache.match, cycle, rounds), repeat)),
    )
    row(
        "match_bytes, cache miss, literal-only trie (cache off)",
        fmt_ns(
            best_per_op(
                loop_match_bytes(nocache.match_bytes, [c.encode() for c in cycle], rounds), repeat
            )
        ),
    )
    missing = [s.replace(".c", ".x") for s in cycle]
    row(
        "match, no interest, miss on last token (cache off)",
        fmt_ns(best_per_op(loop_match(nocache.match, missing, rounds), repeat)),
    )
    row(
        "has_interest, cache miss (cache off)",
        fmt_ns(best_per_op(loop_match(nocache.has_interest, cycle, rounds), repeat)),
    )
    # -- wildcard-heavy ---------------------------------------------------------------------------
    # The same literal subscriptions plus one wildcard subscription for every four of them.
    for _ in range(n // 4):
        nocache.insert(Sub(wildcard_for(rnd.randrange(n), rnd)))
    fanout = sum(len(nocache.match(s).psubs) for s in cycle) / len(cycle)
    row(
        f"match, wildcard-heavy trie (+{n // 4:,} wildcards, {fanout:.1f} results avg, cache off)",
        fmt_ns(best_per_op(loop_match(nocache.match, cycle, rounds), repeat)),
    )
    del nocache

    # -- remove -----------------------------------------------------------------------------------
    order = subs[:]
    rnd.shuffle(order)
    gc.collect()
    t0 = time.perf_counter_ns()
    for s in order:
        sl.remove(s)
    row("remove (random order)", fmt_ns((time.perf_counter_ns() - t0) / n) + "/op")
    assert sl.count() == 0
    for s in subs:
        sl.insert(s)
    gc.collect()
    t0 = time.perf_counter_ns()
    sl.remove_batch(order)
    row("remove_batch (random order)", fmt_ns((time.perf_counter_ns() - t0) / n) + "/op")
    assert sl.count() == 0


def main(argv: Sequence[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--sizes", default="1000,100000,1000000", help="comma-separated sizes")
    ap.add_argument("--repeat", type=int, default=3, help="runs per micro-benchmark (best kept)")
    args = ap.parse_args(argv)
    sizes = [int(x) for x in args.sizes.split(",") if x]
    print(f"pynatsd SubList benchmark; Python {platform.python_version()} on {platform.machine()}")
    for n in sizes:
        bench_size(n, args.repeat)


if __name__ == "__main__":
    main()
