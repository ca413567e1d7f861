#!/usr/bin/env python3
"""Messages per second across a leaf node link: publisher on the leaf, subscriber on the hub.

A hub and a leaf on 127.0.0.1, side by side in the same run: nats-server on both sides (the
reference), pynatsd on both, a pynatsd leaf of a nats-server hub ("pynatsd->nats-server") and a
nats-server leaf of a pynatsd hub ("nats-server->pynatsd"). Each pair is started fresh per size
from configuration files; the clients and the measurement are bench_cluster.py's (raw-socket
publisher and subscriber processes, the rate the subscriber sees), so the two servers and the
leaf link between them are what is measured.

    python bench/bench_leaf.py                        # 16 B and 1 KiB, 4 pairs, ~1-2 minutes
    python bench/bench_leaf.py --pairs nats-server,pynatsd --sizes 16 --repeat 3

See docs/leafnodes.md ("Throughput") for the figures.
"""

from __future__ import annotations

import datetime as dt
import os
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))
sys.path.insert(0, str(REPO / "bench"))

from bench_cluster import (  # noqa: E402
    NODE_CONFIG,
    PAIRS,
    Row,
    Run,
    combine,
    log_sizes,
    parse_args,
    print_cpu_table,
    print_table,
    problems,
    run_route_flow,
)
from bench_server import flow_notes, fmt, machine, server_version  # noqa: E402
from support.natsserver import NATS_SERVER  # noqa: E402
from support.ports import LOOPBACK, free_port  # noqa: E402
from support.processes import PYNATSD, ServerProcess, start_server  # noqa: E402


@dataclass
class LeafPair:
    """Node 1 (`n1`, the leaf, publishing side) and node 2 (`n2`, the hub, subscribing side),
    shaped as bench_cluster's cluster for its flow and log helpers."""

    nodes: list[_Node]

    def stop(self) -> None:
        for node in reversed(self.nodes):
            if node.process is not None:
                node.process.stop()


@dataclass
class _Node:
    name: str
    port: int
    process: ServerProcess | None = None

    def log_text(self) -> str:
        return self.process.log_text() if self.process is not None else ""


def start_pair(kinds: tuple[str, str], directory: Path) -> LeafPair:
    leaf_kind, hub_kind = kinds
    leaf_port = free_port()
    hub = _Node("n2", free_port())
    leaf = _Node("n1", free_port())
    pair = LeafPair([leaf, hub])
    confs = {
        "n2": f"{NODE_CONFIG}server_name: HUB\nleafnodes {{ listen: {LOOPBACK}:{leaf_port} }}\n",
        "n1": f"{NODE_CONFIG}server_name: LEAF\nleafnodes {{ remotes: "
        f'[ {{ url: "nats-leaf://{LOOPBACK}:{leaf_port}" }} ] }}\n',
    }
    for node, kind in ((hub, hub_kind), (leaf, leaf_kind)):
        path = directory / f"{node.name}.conf"
        path.write_text(confs[node.name])
        cmd = [str(NATS_SERVER)] if kind == "go" else list(PYNATSD)
        node.process = start_server(cmd, ["-c", str(path)], port=node.port)
    return pair


def run_one(pair_name: str, size: int, a: object) -> Run:
    t = time.monotonic()
    kinds = tuple("go" if k == "nats-server" else "py" for k in PAIRS[pair_name])
    run = Run(pair_name, size, None)
    with tempfile.TemporaryDirectory(prefix="bench-leaf-") as d:
        pair: LeafPair | None = None
        since: dict[str, int] = {}
        try:
            pair = start_pair((kinds[0], kinds[1]), Path(d))
            since = log_sizes(pair)  # type: ignore[arg-type]
            res = run_route_flow(pair, size, a.count_for(size), a.time_limit)  # type: ignore[arg-type, attr-defined]
            run.rate = res.get("rate")
            run.notes = flow_notes(res)
            run.extra = {k: v for k, v in res.items() if k != "errors"}
        except (TimeoutError, OSError, RuntimeError) as e:
            first = str(e).splitlines()[0] if str(e) else ""
            run.notes.append(f"{type(e).__name__}: {first[:200]}")
        finally:
            if pair is not None:
                if since:
                    run.notes += problems(pair, since)  # type: ignore[arg-type]
                pair.stop()
    print(
        f"  {pair_name:<22} {size:>5} B  delivered {fmt(run.rate, 'msgs/s')} msgs/s"
        f"  ({time.monotonic() - t:.1f}s)" + "".join(f"\n      ! {n}" for n in run.notes),
        flush=True,
    )
    return run


def main(argv: Sequence[str] | None = None) -> int:
    a = parse_args(argv)
    date = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
    servers = {k: server_version(k, str(NATS_SERVER)) for k in ("pynatsd", "nats-server")}
    print(f"# {date}  {machine()}  {servers}")
    print(f"# load average at start {os.getloadavg()[0]:.2f}", flush=True)
    rows: list[Row] = []
    for size in a.sizes:
        runs: dict[str, list[Run]] = {pair: [] for pair in a.pairs}
        for rep in range(a.repeat):
            for pair in a.pairs if rep % 2 == 0 else a.pairs[::-1]:
                runs[pair].append(run_one(pair, size, a))
        rows.append(combine(size, runs))
    print(
        f"\n# load average at end {os.getloadavg()[0]:.2f}; median of {a.repeat} run(s); "
        "publisher on the leaf (node 1), subscriber on the hub (node 2);\n"
        "# ratio = pair / nats-server (nats-server on both sides); the target column is "
        "bench_cluster's route target\n"
    )
    print_table(rows, a.pairs)
    print("\n# server CPU per message, µs (leaf / hub)\n")
    print_cpu_table(rows, a.pairs)
    return 0


if __name__ == "__main__":
    sys.exit(main())
