"""Instructions per message and per SUB inside the server, counted by valgrind's callgrind.

CPU time on a shared machine moves with everything else running on it; an instruction count does
not. Each workload of `bench_client_cpu.py` (a `Client` fed batches of frames, no sockets) runs
twice under callgrind, with N and 3N batches; the difference, divided by the 2N batches' messages,
is the count per message with start-up, imports and shutdown cancelled out.

    python bench/bench_instructions.py                 # the path pynatsd picks (compiled if built)
    PYNATSD_PURE_PYTHON=1 python bench/bench_instructions.py      # the pure-Python path
    python bench/bench_instructions.py --batches 10 --subs 1,5 --subscribe 5000
    python bench/bench_instructions.py --subs '' --subscribe 0 --js 5000   # JetStream only
    python bench/bench_instructions.py --subs '' --subjects 0 --subscribe 0 --subscribe-crowd 10000

`--js N`: a plain PUB of 16 B with a PubAck to a file stream (fsync before the ack), and a pull
consumer fetching 16 B messages with ack policy none and explicit (bench_client_cpu.py --js,
--js-fetch), with N and 3N messages.

Needs `valgrind` (apt-get install valgrind). Takes a minute or two per workload.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import subprocess
import sys
import tempfile

_COLLECTED = re.compile(rb"Collected : (\d+)")


def run_workload(kind: str, arg: int, count: int) -> None:
    """The workload itself, in the process valgrind runs (`--run`)."""
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import bench_client_cpu

    if kind == "pub":
        asyncio.run(bench_client_cpu.pub_cpu(arg, count))
    elif kind == "jspub":
        asyncio.run(bench_client_cpu.js_publish_cpu(count, None, plain=True))
    elif kind == "jsfetch":
        # arg: the ack flag, and in the bits above it how many messages to store first (the
        # same for N and 3N, so that storing them cancels out).
        asyncio.run(bench_client_cpu.js_fetch_cpu(count, bool(arg & 1), None, fill=arg >> 1))
    elif kind == "cycle":
        asyncio.run(bench_client_cpu.pub_cpu(1, count, arg))
    elif kind == "crowd":
        asyncio.run(bench_client_cpu.sub_cpu(count, arg))
    else:
        asyncio.run(bench_client_cpu.sub_cpu(count))


def instructions(kind: str, arg: int, count: int) -> int:
    with tempfile.TemporaryDirectory(prefix="bench-callgrind-") as tmp:
        out = subprocess.run(
            [
                "valgrind",
                "--tool=callgrind",
                f"--callgrind-out-file={tmp}/out",
                sys.executable,
                os.path.abspath(__file__),
                "--run",
                kind,
                str(arg),
                str(count),
            ],
            capture_output=True,
            check=True,
        )
    found = _COLLECTED.search(out.stderr)
    if found is None:
        raise RuntimeError(out.stderr.decode(errors="replace")[-2000:])
    return int(found.group(1))


def per_item(kind: str, arg: int, count: int, items_per_count: int) -> float:
    low = instructions(kind, arg, count)
    high = instructions(kind, arg, 3 * count)
    return (high - low) / (2 * count * items_per_count)


def main() -> None:
    if len(sys.argv) == 5 and sys.argv[1] == "--run":
        run_workload(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]))
        return
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--subs", default="1", help="fan-outs to measure")
    parser.add_argument("--batches", type=int, default=10, help="N: batches of 1000 PUBs")
    parser.add_argument("--subscribe", type=int, default=5000, help="N: SUB lines (0: skip)")
    parser.add_argument(
        "--subscribe-crowd",
        type=int,
        default=0,
        help="N: bench_server.py's subs100k SUB lines, without the close (0: skip)",
    )
    parser.add_argument("--js", type=int, default=0, help="N: JetStream messages (0: skip)")
    parser.add_argument("--subjects", type=int, default=256, help="subjects in turn (0: skip)")
    args = parser.parse_args()
    from pynatsd import native

    print(f"path: {native.describe()}")
    if args.js:
        per_msg = per_item("jspub", 0, args.js, 1)
        print(f"JetStream PUB 16 B + PubAck: {per_msg:,.0f} instructions per message")
        for ack in (0, 1):
            per_msg = per_item("jsfetch", ack | (3 * args.js) << 1, args.js, 1)
            what = "explicit acks" if ack else "ack none"
            print(f"JetStream pull fetch 16 B ({what}): {per_msg:,.0f} instructions per message")
    for subs in (int(x) for x in args.subs.split(",") if x):
        per_msg = per_item("pub", subs, args.batches, 1000)
        print(f"PUB 16 B -> {subs} sub(s): {per_msg:,.0f} instructions per message")
    if args.subjects:
        per_msg = per_item("cycle", args.subjects, args.batches, 1000)
        print(
            f"PUB 16 B, {args.subjects} subjects in turn -> 1 sub: "
            f"{per_msg:,.0f} instructions per message"
        )
    if args.subscribe:
        per_sub = per_item("sub", 0, args.subscribe, 1)
        print(f"SUB (wildcard, 5 tokens): {per_sub:,.0f} instructions per subscription")
    if args.subscribe_crowd:
        per_sub = per_item("crowd", 3 * args.subscribe_crowd, args.subscribe_crowd, 1)
        print(f"SUB (subs100k's subjects, no close): {per_sub:,.0f} instructions per subscription")


if __name__ == "__main__":
    main()
