#!/usr/bin/env python3
"""JetStream through a route: what the hop to the one JetStream node of a cluster costs.

pynatsd runs JetStream on one node of a cluster (docs/clustering.md); clients of the other
nodes reach it through the routes. This measures, on two-node clusters on 127.0.0.1 (node 1
pynatsd with JetStream, node 2 pynatsd or nats-server without), the same client work with
the client on node 1 (no hop) and on node 2 (every request, ack and delivery crosses the
route):

- ``publish``: publishes with acks, 16 B, a window of 1000 unacked (time-boxed by --seconds);
- ``fetch``: a pull consumer fetching --fetch-msgs stored 16 B messages in batches of 1000
  with ack policy none, then with explicit acks.

There is no nats-server reference for the whole topology (three nats-server nodes with
JetStream on one of them wait for a meta leader); the side by side is the hop itself, and
a nats-server node in the middle against a pynatsd one. The client is bench_js.py's raw
protocol client.

    python bench/bench_cluster_js.py                   # ~1 minute
    python bench/bench_cluster_js.py --seconds 2 --fetch-msgs 20000
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))
sys.path.insert(0, str(REPO / "bench"))

from bench_js import fetch_all, fill, publish_with_acks  # noqa: E402
from support.cluster import GO, PY, ProcessCluster  # noqa: E402

# name -> the kind of node 2 (node 1 is always pynatsd with JetStream)
MIDDLE = {"via pynatsd": PY, "via nats-server": GO}


def measure(port: int, seconds: float, fetch_msgs: int) -> dict[str, float]:
    async def run() -> dict[str, float]:
        out = {"publish": await publish_with_acks(port, 16, 1000, seconds)}
        await fill(port, "F", "f", fetch_msgs)
        out["fetch (ack none)"] = await fetch_all(port, fetch_msgs, ack=False)
        out["fetch (explicit acks)"] = await fetch_all(port, fetch_msgs, ack=True)
        return out

    return asyncio.run(run())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--fetch-msgs", type=int, default=50_000)
    args = parser.parse_args()
    rows: dict[str, dict[str, float]] = {}
    for name, kind in MIDDLE.items():
        for where in ("on node 1", name):
            with tempfile.TemporaryDirectory() as work:
                js = f'jetstream {{ store_dir: "{Path(work) / "js"}" }}\n'
                with ProcessCluster((PY, kind), Path(work), node_config={0: js}) as cluster:
                    cluster.start()
                    node = cluster.nodes[0 if where == "on node 1" else 1]
                    label = where if where != "on node 1" else f"on node 1 (node 2 {kind})"
                    rows[label] = measure(node.port, args.seconds, args.fetch_msgs)
                    print(label, {k: round(v) for k, v in rows[label].items()}, flush=True)
    scenarios = list(next(iter(rows.values())))
    print()
    print("| client | " + " | ".join(scenarios) + " |")
    print("|---" * (len(scenarios) + 1) + "|")
    for label, values in rows.items():
        cells = " | ".join(f"{values[s]:,.0f} msg/s" for s in scenarios)
        print(f"| {label} | {cells} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
