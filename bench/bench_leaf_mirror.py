#!/usr/bin/env python3
"""How fast a leaf's mirror copies a hub's stream across the leaf link (JetStream by domain).

A hub (`jetstream { domain: hub }`) and its leaf (`domain: leaf`) on 127.0.0.1, side by side
in the same run: nats-server on both sides (the reference), a pynatsd leaf of a nats-server
hub, a nats-server leaf of a pynatsd hub, and pynatsd on both. The hub's stream is filled
first; then a stream of the leaf mirrors it through `external.api = $JS.hub.API` and the
time until it holds every message is measured (the consumer's creation, its flow-controlled
push deliveries across the link, and the leaf's stores). Messages per second = count / time.

    python bench/bench_leaf_mirror.py                     # 20,000 messages of 128 B, 4 pairs
    python bench/bench_leaf_mirror.py --count 50000 --size 1024 --pairs go-go,py-py

See docs/leafnodes.md ("A KV of the hub mirrored on the leaf") for figures.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))

import nats  # noqa: E402
from nats.js.api import ExternalStream, StreamConfig, StreamSource  # noqa: E402

from support.natsserver import NATS_SERVER  # noqa: E402
from support.ports import LOOPBACK, free_port  # noqa: E402
from support.processes import PYNATSD, ServerProcess, start_server  # noqa: E402

PAIRS = {"go-go": ("go", "go"), "go-py": ("go", "py"), "py-go": ("py", "go"), "py-py": ("py", "py")}
TIME_LIMIT = 120.0  # seconds a mirror may take before the pair is reported as not done


def _start(kind: str, name: str, conf: str, directory: Path, port: int) -> ServerProcess:
    path = directory / f"{name}.conf"
    path.write_text(f"server_name: {name}\n{conf}")
    cmd = [str(NATS_SERVER)] if kind == "go" else list(PYNATSD)
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO / "src"), env.get("PYTHONPATH")) if p)
    return start_server(cmd, ["-c", str(path)], port=port, env=env)


async def _fill(url: str, count: int, size: int) -> None:
    nc = await nats.connect(url)
    try:
        js = nc.jetstream()
        await js.add_stream(name="ORIGIN", subjects=["m.>"])
        payload = b"x" * size
        for i in range(count):
            await nc.publish(f"m.{i % 100}", payload)
            if i % 1000 == 999:
                await nc.flush()
        deadline = time.monotonic() + TIME_LIMIT
        while (await js.stream_info("ORIGIN")).state.messages < count:
            if time.monotonic() > deadline:
                raise RuntimeError("the hub did not store every message")
            await asyncio.sleep(0.05)
    finally:
        await nc.close()


async def _mirror(url: str, count: int) -> float:
    """Seconds from the mirror's creation until it holds `count` messages."""
    nc = await nats.connect(url)
    try:
        js = nc.jetstream()
        source = StreamSource(name="ORIGIN", external=ExternalStream(api="$JS.hub.API"))
        start = time.perf_counter()
        await js.add_stream(StreamConfig(name="COPY", mirror=source))
        while (await js.stream_info("COPY")).state.messages < count:
            if time.perf_counter() - start > TIME_LIMIT:
                return float("inf")
            await asyncio.sleep(0.02)
        return time.perf_counter() - start
    finally:
        await nc.close()


async def _run(pair: tuple[str, str], count: int, size: int, directory: Path) -> float:
    hub_kind, leaf_kind = pair
    leaf_port, hub_port, hub_leaf_port = free_port(), free_port(), free_port()
    hub_conf = (
        f'jetstream {{ domain: hub, store_dir: "{directory / "hub"}" }}\n'
        f"leafnodes {{ listen: {LOOPBACK}:{hub_leaf_port} }}\n"
    )
    hub_url = f"nats-leaf://{LOOPBACK}:{hub_leaf_port}"
    leaf_conf = (
        f'jetstream {{ domain: leaf, store_dir: "{directory / "leaf"}" }}\n'
        f'leafnodes {{ reconnect: 1s, remotes: [{{ url: "{hub_url}" }}] }}\n'
    )
    hub = _start(hub_kind, "HUB", hub_conf, directory, hub_port)
    leaf = None
    try:
        leaf = _start(leaf_kind, "LEAF", leaf_conf, directory, leaf_port)
        await _fill(f"nats://{LOOPBACK}:{hub_port}", count, size)
        await asyncio.sleep(1.0)  # the leaf link up and its interest exchanged
        return await _mirror(f"nats://{LOOPBACK}:{leaf_port}", count)
    finally:
        if leaf is not None:
            leaf.stop()
        hub.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=20_000)
    parser.add_argument("--size", type=int, default=128)
    parser.add_argument("--pairs", default=",".join(PAIRS))
    args = parser.parse_args()
    print(f"mirror of {args.count} messages of {args.size} B across a leaf (hub-leaf)")
    reference = 0.0
    for name in args.pairs.split(","):
        with tempfile.TemporaryDirectory() as tmp:
            seconds = asyncio.run(_run(PAIRS[name], args.count, args.size, Path(tmp)))
        rate = args.count / seconds if seconds != float("inf") else 0.0
        if name == "go-go":
            reference = rate
        ratio = f"{rate / reference:.2f}x" if reference else "-"
        print(f"{name:6}  {seconds:7.2f} s  {rate:10.0f} msgs/s  {ratio}")


if __name__ == "__main__":
    main()
