#!/usr/bin/env python3
"""Summarise a py-spy raw profile (`py-spy record --format raw`, or bench_server.py --profile).

    python bench/pyspy_top.py /tmp/prof/pubsub-16.txt [--top 15]

Prints the functions with the most samples: "self" counts samples where the function was the
innermost Python frame (its own code and the C calls it makes, e.g. transport.write), "total"
those where it was anywhere on the stack (each function once per stack, so recursion does not
inflate it), and the hottest lines. Shares are of all non-idle samples.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

# A frame is "function (file:line)"; the line number is dropped to aggregate per function.
_LINE = re.compile(r":\d+\)$")


def parse(path: Path) -> list[tuple[list[str], int]]:
    stacks = []
    for line in path.read_text().splitlines():
        frames, _, n = line.rpartition(" ")
        if frames and n.isdigit():
            stacks.append((frames.split(";"), int(n)))
    return stacks


def summarise(stacks: list[tuple[list[str], int]], top: int) -> str:
    total = sum(n for _, n in stacks)
    if not total:
        return "no samples"
    self_fn: Counter[str] = Counter()
    incl_fn: Counter[str] = Counter()
    self_line: Counter[str] = Counter()
    for frames, n in stacks:
        funcs = [_LINE.sub(")", f) for f in frames]
        self_fn[funcs[-1]] += n
        self_line[frames[-1]] += n
        for f in set(funcs):
            incl_fn[f] += n
    out = [f"{total} samples"]
    for title, counter in (("self", self_fn), ("total", incl_fn), ("hot lines", self_line)):
        out.append(f"\n{title}:")
        # Frames on every stack (runpy, asyncio.run, the event loop) say nothing: leave them out.
        rows = [(name, n) for name, n in counter.most_common() if n < total][:top]
        out += [f"  {n / total:6.1%}  {name}" for name, n in rows]
    return "\n".join(out)


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("profile", type=Path)
    p.add_argument("--top", type=int, default=15)
    a = p.parse_args(argv)
    print(summarise(parse(a.profile), a.top))
    return 0


if __name__ == "__main__":
    sys.exit(main())
