"""The parser fuzz run of issue 16: 1M frames through the client protocol parser, no crash, no
leak (tests/support/parserfuzz.py makes and checks the frames; the suite runs a small count).

    python bench/fuzz_parser.py                       # 1M frames on the active path
    python bench/fuzz_parser.py --runs                # the server's parser (PubRun, SubRun)
    PYNATSD_PURE_PYTHON=1 python bench/fuzz_parser.py --frames 200000

Prints the frames, events, protocol errors, and the allocated blocks after each round: after the
first round (warm-up) they must stay flat; and the process's resident memory before and after.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))

from pynatsd import native
from pynatsd.protocol.parser import Parser
from support.parserfuzz import fuzz


def rss_kib(field: str = "VmRSS") -> int:
    """The process's resident memory now, or its peak with "VmHWM" (Linux; 0 elsewhere)."""
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--frames", type=int, default=1_000_000)
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--seed", type=int, default=16)
    parser.add_argument(
        "--runs", action="store_true", help="Parser(runs=True), as a server's client parses"
    )
    args = parser.parse_args()
    print(f"path: {native.describe()}" + ("  (runs=True)" if args.runs else ""))
    rss_before = rss_kib()
    start = time.monotonic()
    report = fuzz(
        lambda: Parser(max_payload=4096, max_control_line=256, runs=args.runs),
        args.frames,
        seed=args.seed,
        rounds=args.rounds,
    )
    elapsed = time.monotonic() - start
    print(
        f"frames: {report.frames:,}  events: {report.events:,}  "
        f"protocol errors: {report.protocol_errors:,}  ({elapsed:.0f} s)"
    )
    print(f"allocated blocks after each round: {report.blocks}")
    print(f"growth after the first round: {report.block_growth:+,} blocks")
    print(
        f"RSS before: {rss_before:,} KiB  after: {rss_kib():,} KiB  peak: {rss_kib('VmHWM'):,} KiB"
    )
    if report.block_growth > 1000:
        sys.exit("LEAK: allocated blocks keep growing")


if __name__ == "__main__":
    main()
