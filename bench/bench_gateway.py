#!/usr/bin/env python3
"""Messages per second across a gateway: publisher on cluster A's server, subscriber on
cluster B's, each cluster a single server, A's gateway block naming B (B dials back).

Side by side in the same run, as bench_cluster.py measures a route: two nats-server servers
(the reference), two pynatsd servers, and the mixed pairs (pynatsd publishing side ->
nats-server subscribing side, and the reverse). Each pair is a fresh super-cluster per size
(`tests/support/supercluster.py`), stopped afterwards; the clients are bench_server.py's
raw-socket publisher and subscriber processes.

    python bench/bench_gateway.py                     # 16 B and 1 KiB, 4 pairs
    python bench/bench_gateway.py --pairs nats-server,pynatsd --sizes 16 --repeat 3
    python bench/bench_gateway.py --json /tmp/bench_gateway.json

The options and the tables are bench_cluster.py's (the ratio is pair / nats-server). See
docs/benchmarks.md ("Across a gateway").
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import bench_cluster as bc
from support.supercluster import SuperCluster


@dataclass
class _Node:
    """A server of the super-cluster under the names bench_cluster's flow reads (n1 publishes,
    n2 subscribes)."""

    name: str
    port: int
    process: Any

    def log_text(self) -> str:
        return str(self.process.log_text()) if self.process is not None else ""


class _Pair:
    def __init__(self, sc: SuperCluster) -> None:
        a, b = sc.cluster("A")[0], sc.cluster("B")[0]
        self.nodes = [_Node("n1", a.port, a.process), _Node("n2", b.port, b.process)]


def run_one(pair: str, size: int, a: argparse.Namespace) -> bc.Run:
    t = time.monotonic()
    first, second = bc.PAIRS[pair]
    run = bc.Run(pair, size, None)
    with tempfile.TemporaryDirectory(prefix="bench-gateway-") as d:
        sc = SuperCluster(
            Path(d),
            {"A": [first], "B": [second]},
            dials={"A": ["B"]},
            extra=bc.NODE_CONFIG,
        )
        formed: dict[str, int] = {}
        try:
            sc.start()
            sc.wait_up(a.form_timeout)
            target = _Pair(sc)
            formed = {n.name: len(n.log_text()) for n in target.nodes}
            res = bc.run_route_flow(target, size, a.count_for(size), a.time_limit)  # type: ignore[arg-type]
            run.rate = res.get("rate")
            run.notes = bc.flow_notes(res)
            run.extra = {k: v for k, v in res.items() if k != "errors"}
        except (AssertionError, TimeoutError, OSError, RuntimeError) as e:
            first_line = str(e).splitlines()[0] if str(e) else ""
            run.notes.append(f"{type(e).__name__}: {first_line[:200]}")
        finally:
            if formed:
                run.notes += bc.problems(_Pair(sc), formed)  # type: ignore[arg-type]
            sc.stop()
    bc.print_run(run, t)
    return run


if __name__ == "__main__":
    bc.TARGETS.clear()  # no target is set for gateways yet
    sys.exit(bc.main(run=run_one))
