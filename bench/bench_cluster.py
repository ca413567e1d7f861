#!/usr/bin/env python3
"""Messages per second through a route: publisher on node 1, subscriber on node 2.

Two-node clusters on 127.0.0.1, side by side in the same run: two nats-server nodes (the
reference), two pynatsd nodes, and the mixed pairs (pynatsd publishing side -> nats-server
subscribing side, and the reverse). Each pair is a fresh cluster per size, started with
`tests/support/cluster.py` (config files, full mesh) and stopped afterwards. The clients are
bench_server.py's raw-socket publisher and subscriber processes, so the servers and the route
between them are what is measured.

    python bench/bench_cluster.py                     # 16 B and 1 KiB, 4 pairs, ~1-2 minutes
    python bench/bench_cluster.py --pairs nats-server,pynatsd --sizes 16 --repeat 3
    python bench/bench_cluster.py --json /tmp/bench_cluster.json

See docs/benchmarks.md ("Through a route") for the method and the figures.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import json
import os
import re
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))

from bench_server import (  # noqa: E402
    _PROBLEM,
    IDLE_AFTER_DONE,
    PING,
    Workers,
    connect,
    flow_notes,
    fmt,
    machine,
    publisher,
    server_version,
    subscriber,
    wait_pong,
)
from support.cluster import GO, PY, ClusterError, ProcessCluster  # noqa: E402
from support.natsserver import NATS_SERVER  # noqa: E402

# name -> (node 1 = publishing side, node 2 = subscribing side)
PAIRS: dict[str, tuple[str, str]] = {
    "nats-server": (GO, GO),
    "pynatsd": (PY, PY),
    "pynatsd->nats-server": (PY, GO),
    "nats-server->pynatsd": (GO, PY),
}
REFERENCE = "nats-server"
SUBJECT = b"bench.route"
# Issue 14: through a route, pynatsd at least half of nats-server's rate for now.
TARGETS: dict[tuple[str, int], float] = {("pynatsd", 16): 0.5}
DEFAULT_COUNT_SMALL = 1_000_000
DEFAULT_COUNT_LARGE = 300_000
# A route is not flow-controlled as a local publisher is (nats-server stalls a client publishing
# to a slow local reader, not a route): with the default 64 MiB the subscribing node closes the
# subscriber as a slow consumer mid-run. Room for a whole run keeps every message.
NODE_CONFIG = "max_pending: 1073741824\n"
# What nats-server logs when it dials its `$SYS`-pinned connection to a peer that announced no
# pool (pynatsd), and the peer's refusal; expected (nats-cluster-facts §0, pitfall 3), so the
# lines of those connections are left out of the notes.
_PINNED_REFUSED = re.compile(r"dedicated route for account")
_RID = re.compile(r" - rid:(\d+) - ")


@dataclass
class Run:
    pair: str
    size: int
    rate: float | None
    notes: list[str] = field(default_factory=list)
    extra: dict[str, Any] = field(default_factory=dict)


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process so far, from /proc/<pid>/stat."""
    stat = Path(f"/proc/{pid}/stat").read_text()
    fields = stat[stat.rindex(")") + 2 :].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def wait_route_interest(pub_port: int, sub_port: int, timeout: float = 20.0) -> None:
    """Return once the subscriber's interest (already processed by node 2) has reached node 1:
    a probe subscribed on node 2 after it, published from node 1 until it comes through (node 2
    sends its interest on the route in the order it processed it)."""
    probe, _ = connect(sub_port)
    pub, _ = connect(pub_port)
    try:
        probe.sendall(b"SUB bench.probe 1\r\n" + PING)
        wait_pong(probe, 10.0)
        probe.settimeout(0.05)
        deadline = time.monotonic() + timeout
        data = b""
        while b"MSG bench.probe" not in data:
            if time.monotonic() > deadline:
                raise TimeoutError("the subscriber's interest did not cross the route")
            pub.sendall(b"PUB bench.probe 0\r\n\r\n" + PING)
            wait_pong(pub, 10.0)
            with contextlib.suppress(TimeoutError):
                data += probe.recv(65536)
    finally:
        probe.close()
        pub.close()


def run_route_flow(
    cluster: ProcessCluster, size: int, count: int, time_limit: float
) -> dict[str, Any]:
    """One publisher on node 1, one subscriber on node 2: the delivered rate and the counts."""
    pub_node, sub_node = cluster.nodes
    w = Workers.new()
    out: dict[str, Any] = {"errors": []}
    pubs: list[dict[str, Any]] = []
    subs: list[dict[str, Any]] = []
    pids = {n.name: n.process.proc.pid for n in cluster.nodes if n.process is not None}
    try:
        w.spawn(subscriber, sub_node.port, SUBJECT, b"", count, 0, time_limit + 30, 0.0)
        w.wait_ready(1, 30)
        wait_route_interest(pub_node.port, sub_node.port)
        w.spawn(publisher, pub_node.port, [SUBJECT], size, count, 0, 0, time_limit)
        w.wait_ready(1, 60)
        cpu0 = {name: cpu_seconds(pid) for name, pid in pids.items()}
        w.sync.start.set()
        pubs = w.results("pub", 1, time_limit + 90)
        w.sync.sent.value = sum(r["sent"] for r in pubs)
        w.sync.pubs_done.set()
        subs = w.results("sub", 1, IDLE_AFTER_DONE + 60)
        out["server_cpu_s"] = {
            name: cpu_seconds(pid) - cpu0[name] for name, pid in pids.items() if _alive(pid)
        }
    finally:
        w.close()
    out["errors"] += [r["error"] for r in pubs + subs if r.get("error")]
    ok_pubs = [r for r in pubs if "t0" in r]
    sent = sum(r["sent"] for r in pubs)
    out["sent"] = sent
    if not ok_pubs or not subs:
        return out
    t0 = ok_pubs[0]["t0"]
    delivered = subs[0]["count"]
    t_last = subs[0].get("t_last", t0)
    out.update(expected=sent, delivered=delivered, lost=sent - delivered)
    out["pub_rate"] = sent / (ok_pubs[0]["t1"] - t0)
    out["rate"] = delivered / (t_last - t0) if t_last > t0 else None
    out["statuses"] = [subs[0]["status"]] if subs[0].get("status") != "complete" else []
    return out


def _alive(pid: int) -> bool:
    return Path(f"/proc/{pid}").exists()


def log_sizes(cluster: ProcessCluster) -> dict[str, int]:
    return {n.name: len(n.log_text()) for n in cluster.nodes}


def problems(cluster: ProcessCluster, since: dict[str, int]) -> list[str]:
    """Error lines the nodes logged after `since` (the log sizes once the cluster had formed:
    the refused dials of a simultaneous start are expected), deduplicated, at most 5."""
    logs = {
        n.name: [
            line.decode(errors="replace")
            for line in n.log_text()[since.get(n.name, 0) :].encode().splitlines()
        ]
        for n in cluster.nodes
    }
    # A refused `$SYS`-pinned dial: the dialer's lines for that connection, and one "closed:
    # Parse Error" on the refusing side per refusal.
    refusals = 0
    skip: set[tuple[str, str]] = set()
    for name, lines in logs.items():
        for line in lines:
            if _PINNED_REFUSED.search(line) and (m := _RID.search(line)):
                refusals += 1
                skip.add((name, m.group(1)))
    seen: dict[str, int] = {}
    for name, lines in logs.items():
        for line in lines:
            rid = _RID.search(line)
            if rid and (name, rid.group(1)) in skip:
                continue
            if refusals and line.endswith("Router connection closed: Parse Error"):
                refusals -= 1
                continue
            if _PROBLEM.search(line.encode()):
                # Drop the "[pid] date time" prefix so repeated lines collapse into one.
                text = re.sub(r"^\[\d+\] \S+ \S+ ", "", line).strip()
                text = re.sub(r"cid:\d+|127\.0\.0\.1:\d+|\d+ms", "…", text)
                text = f"{name}: {text}"
                seen[text] = seen.get(text, 0) + 1
    return [f"{t} (x{n})" if n > 1 else t for t, n in list(seen.items())[:5]]


def run_one(pair: str, size: int, a: argparse.Namespace) -> Run:
    t = time.monotonic()
    kinds = PAIRS[pair]
    with tempfile.TemporaryDirectory(prefix="bench-cluster-") as d:
        cluster = ProcessCluster(kinds, Path(d), name="BENCH", extra_config=NODE_CONFIG)
        run = Run(pair, size, None)
        formed: dict[str, int] = {}
        try:
            cluster.start(timeout=a.form_timeout)
            formed = log_sizes(cluster)
            res = run_route_flow(cluster, size, a.count_for(size), a.time_limit)
            run.rate = res.get("rate")
            run.notes = flow_notes(res)
            run.extra = {k: v for k, v in res.items() if k != "errors"}
        except (ClusterError, TimeoutError, OSError, RuntimeError) as e:
            first = str(e).splitlines()[0] if str(e) else ""
            run.notes.append(f"{type(e).__name__}: {first[:200]}")
        finally:
            if formed:
                run.notes += problems(cluster, formed)
            cluster.stop()
    print_run(run, t)
    return run


def print_run(run: Run, started: float) -> None:
    """One line per run as it ends, with its notes."""
    print(
        f"  {run.pair:<22} {run.size:>5} B  delivered {fmt(run.rate, 'msgs/s')} msgs/s"
        f"  ({time.monotonic() - started:.1f}s)" + "".join(f"\n      ! {n}" for n in run.notes),
        flush=True,
    )


@dataclass
class Row:
    size: int
    values: dict[str, float | None]
    notes: dict[str, list[str]]
    ratios: dict[str, float | None]
    # pair -> (node 1, node 2) server CPU per delivered message, in µs (median over runs):
    # less sensitive to the machine's other load than the rates.
    cpu_us: dict[str, tuple[float | None, float | None]] = field(default_factory=dict)
    target: str = ""


def combine(size: int, runs: dict[str, list[Run]]) -> Row:
    values: dict[str, float | None] = {}
    notes: dict[str, list[str]] = {}
    for pair, reps in runs.items():
        rates = [r.rate for r in reps if r.rate is not None]
        values[pair] = statistics.median(rates) if rates else None
        notes[pair] = sorted({n for r in reps for n in r.notes})
    ref = values.get(REFERENCE)
    ratios = {
        pair: (v / ref if v is not None and ref else None)
        for pair, v in values.items()
        if pair != REFERENCE
    }
    row = Row(size, values, notes, ratios)
    for pair, reps in runs.items():
        per_node: list[float | None] = []
        for name in ("n1", "n2"):
            us = [
                r.extra["server_cpu_s"][name] * 1e6 / r.extra["delivered"]
                for r in reps
                if r.extra.get("delivered") and name in r.extra.get("server_cpu_s", {})
            ]
            per_node.append(statistics.median(us) if us else None)
        row.cpu_us[pair] = (per_node[0], per_node[1])
    for (pair, tsize), bound in TARGETS.items():
        if tsize == size and pair in ratios:
            ratio = ratios[pair]
            verdict = "" if ratio is None else ("ok" if ratio >= bound else "MISS")
            row.target = f"{pair} >= {bound:g}x {verdict}".strip()
    return row


def print_table(rows: list[Row], pairs: Sequence[str]) -> None:
    others = [p for p in pairs if p != REFERENCE]
    head = [
        "size",
        *[f"{p} msgs/s" for p in pairs],
        *[f"{p} ratio" for p in others],
        "target",
        "notes",
    ]
    body = []
    for r in rows:
        notes = [f"{p}: {n}" for p in pairs for n in r.notes.get(p, [])]
        body.append(
            [
                f"{r.size} B",
                *(fmt(r.values.get(p), "msgs/s") for p in pairs),
                *(f"{x:.2f}x" if (x := r.ratios.get(p)) is not None else "-" for p in others),
                r.target,
                "; ".join(notes),
            ]
        )
    widths = [max(len(str(x)) for x in col) for col in zip(head, *body, strict=True)]
    widths[-1] = 0
    for line in [head, ["-" * w for w in widths[:-1]] + ["-----"], *body]:
        print("  ".join(str(x).ljust(w) for x, w in zip(line, widths, strict=True)).rstrip())


def print_cpu_table(rows: list[Row], pairs: Sequence[str]) -> None:
    def us(x: float | None) -> str:
        return "-" if x is None else f"{x:.2f}"

    head = ["size", *pairs]
    body = [
        [f"{r.size} B", *(" / ".join(us(x) for x in r.cpu_us.get(p, (None, None))) for p in pairs)]
        for r in rows
    ]
    widths = [max(len(str(x)) for x in col) for col in zip(head, *body, strict=True)]
    for line in [head, ["-" * w for w in widths], *body]:
        print("  ".join(str(x).ljust(w) for x, w in zip(line, widths, strict=True)).rstrip())


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--pairs", default=",".join(PAIRS), help=f"from {','.join(PAIRS)}")
    p.add_argument("--sizes", default="16,1024", help="payload sizes in bytes")
    p.add_argument(
        "--count",
        type=int,
        default=0,
        help=f"messages per run (default {DEFAULT_COUNT_SMALL:,} for sizes <= 256 B, "
        f"{DEFAULT_COUNT_LARGE:,} above)",
    )
    p.add_argument(
        "--time-limit", type=float, default=10.0, help="the publisher stops after this many s"
    )
    p.add_argument("--repeat", type=int, default=1, help="runs per pair; the median is shown")
    p.add_argument(
        "--form-timeout", type=float, default=20.0, help="seconds for the routes to come up"
    )
    p.add_argument("--json", type=Path, help="write every run, the machine and versions here")
    a = p.parse_args(argv)
    a.pairs = [s for s in a.pairs.split(",") if s]
    a.sizes = [int(s) for s in a.sizes.split(",") if s]
    for pair in a.pairs:
        if pair not in PAIRS:
            p.error(f"unknown pair {pair!r}")

    def count_for(size: int) -> int:
        if a.count:
            return int(a.count)
        return DEFAULT_COUNT_SMALL if size <= 256 else DEFAULT_COUNT_LARGE

    a.count_for = count_for
    return a


def main(
    argv: Sequence[str] | None = None,
    run: Callable[[str, int, argparse.Namespace], Run] | None = None,
) -> int:
    """Every pair and size, `run` (run_one: through a route) measuring each."""
    run_pair = run or run_one
    a = parse_args(argv)
    nats_server = str(NATS_SERVER)
    info = {
        "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "machine": machine(),
        "servers": {k: server_version(k, nats_server) for k in ("pynatsd", "nats-server")},
        "argv": sys.argv,
        "loadavg_start": os.getloadavg(),
    }
    print(f"# {info['date']}  {info['machine']}  {info['servers']}")
    print(f"# load average at start {os.getloadavg()[0]:.2f}", flush=True)
    started = time.monotonic()
    rows: list[Row] = []
    runs_out: list[Run] = []
    for size in a.sizes:
        runs: dict[str, list[Run]] = {pair: [] for pair in a.pairs}
        for rep in range(a.repeat):
            # Alternate the order so that a drift in machine load hits every pair alike.
            for pair in a.pairs if rep % 2 == 0 else a.pairs[::-1]:
                result = run_pair(pair, size, a)
                runs[pair].append(result)
                runs_out.append(result)
        rows.append(combine(size, runs))
    info["loadavg_end"] = os.getloadavg()
    print(
        f"\n# total {time.monotonic() - started:.0f}s, load average at end "
        f"{os.getloadavg()[0]:.2f}; median of {a.repeat} run(s); publisher on node 1, "
        "subscriber on node 2;\n# ratio = pair / nats-server (two nats-server nodes)\n"
    )
    print_table(rows, a.pairs)
    print("\n# server CPU per message, µs (node 1 publisher's side / node 2 subscriber's side)\n")
    print_cpu_table(rows, a.pairs)
    if a.json:
        a.json.write_text(
            json.dumps(
                {**info, "rows": [asdict(r) for r in rows], "runs": [asdict(r) for r in runs_out]},
                indent=1,
            )
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
