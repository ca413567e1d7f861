#!/usr/bin/env python3
"""Concurrent TLS connects: pynatsd and nats-server side by side, in the same run.

Each server runs twice, once with the INFO-first upgrade (INFO in plain text, then the client
starts TLS) and once with `tls { handshake_first: true }` (TLS from the first byte, INFO after).
Clients connect in waves: every connect of a wave runs at once, the next wave starts when the
previous one is done, and every connection stays open until the last wave, so the server holds
them all. In the INFO-first runs every other client sends its ClientHello before INFO has
arrived. A connect is complete when the client, over TLS, got INFO, sent `CONNECT` and `PING`,
and read `PONG`; its latency runs from the start of the TCP connect to that `PONG`.

    python bench/bench_tls.py                          # 600 + 600 per server, waves of 20
    python bench/bench_tls.py --clients 300 --wave 50 --json /tmp/tls.json

The clients (tests/support/tlsclient.py) run in this process on uvloop when it is installed,
as the servers do; the certificates are made for the run (tests/support/certs.py).
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import contextlib
import json
import os
import platform
import resource
import socket
import ssl
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))

from cryptography.x509.oid import NameOID  # noqa: E402

from support.certs import make_ca, make_cert  # noqa: E402
from support.tlsclient import Start, TLSClient, connect_and_ping  # noqa: E402

HOST = "127.0.0.1"
SERVERS = ("pynatsd", "nats-server")
MODES = ("info-first", "handshake-first")


@dataclass
class Result:
    server: str
    mode: str
    clients: int
    completed: int = 0
    failed: int = 0
    seconds: float = 0.0
    latencies_ms: list[float] = field(default_factory=list, repr=False)
    errors: dict[str, int] = field(default_factory=dict)

    def summary(self) -> dict[str, object]:
        lat = sorted(self.latencies_ms)

        def pct(p: float) -> float | None:
            return round(lat[min(len(lat) - 1, int(p * len(lat)))], 1) if lat else None

        out = asdict(self)
        del out["latencies_ms"]
        out.update(
            p50_ms=pct(0.5),
            p90_ms=pct(0.9),
            p99_ms=pct(0.99),
            max_ms=round(lat[-1], 1) if lat else None,
            mean_ms=round(statistics.fmean(lat), 1) if lat else None,
        )
        return out


# -- servers ------------------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as s:
        s.bind((HOST, 0))
        port: int = s.getsockname()[1]
        return port


def write_certs(directory: Path) -> tuple[str, str, str]:
    """A CA and a server certificate for 127.0.0.1/localhost; returns (ca, cert, key) paths."""
    ca = make_ca()
    server = make_cert(
        ca, [(NameOID.COMMON_NAME, "localhost")], dns=("localhost",), ips=("127.0.0.1",)
    )
    ca_path, _ = ca.write(directory, "ca")
    cert, key = server.write(directory, "server")
    return ca_path, cert, key


class Server:
    """One server process with TLS on a free port and monitoring (for the readiness probe)."""

    def __init__(self, kind: str, mode: str, certs: tuple[str, str, str], work: Path) -> None:
        self.kind, self.mode = kind, mode
        self.port, self.http = free_port(), free_port()
        _, cert, key = certs
        first = "true" if mode == "handshake-first" else "false"
        conf = work / f"{kind}-{mode}.conf"
        conf.write_text(
            f'listen: "{HOST}:{self.port}"\nhttp: "{HOST}:{self.http}"\n'
            f'tls {{ cert_file: "{cert}", key_file: "{key}", handshake_first: {first} }}\n'
        )
        if kind == "pynatsd":
            argv = [sys.executable, "-m", "pynatsd", "-c", str(conf)]
        else:
            argv = [str(Path(sys.executable).parent / "nats-server"), "-c", str(conf)]
        self.log = work / f"{kind}-{mode}.log"
        with self.log.open("wb") as log:
            self.proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT)
        self._wait_ready()

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"{self.kind} exited: {self.log.read_text()[-2000:]}")
            url = f"http://{HOST}:{self.http}/healthz"
            with contextlib.suppress(OSError), urllib.request.urlopen(url, timeout=1):
                return
            time.sleep(0.05)
        raise RuntimeError(f"{self.kind} did not start: {self.log.read_text()[-2000:]}")

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


# -- clients ------------------------------------------------------------------------------------


# In an INFO-first run every other client is eager: it sends its ClientHello before INFO has
# arrived (what a server slow to start TLS sees from every client).
STARTS: dict[str, tuple[Start, ...]] = {
    "info-first": ("info-first", "eager"),
    "handshake-first": ("handshake-first",),
}


async def connect_once(
    port: int, start: Start, ctx: ssl.SSLContext, timeout: float
) -> tuple[float, TLSClient]:
    """One complete TLS connect; returns its latency (ms) and the open connection."""
    began = time.perf_counter()
    client = await asyncio.wait_for(connect_and_ping(HOST, port, ctx, start), timeout)
    return (time.perf_counter() - began) * 1000, client


def _error_kind(e: BaseException) -> str:
    if isinstance(e, TimeoutError):
        return "timeout"
    text = str(e) or type(e).__name__
    return f"{type(e).__name__}: {text[:80]}"


async def run_waves(
    server: Server, ctx: ssl.SSLContext, clients: int, wave: int, timeout: float
) -> Result:
    result = Result(server.kind, server.mode, clients)
    errors: collections.Counter[str] = collections.Counter()
    opened: list[TLSClient] = []
    starts = STARTS[server.mode]
    started = time.perf_counter()
    for first in range(0, clients, wave):
        size = min(wave, clients - first)
        outcomes = await asyncio.gather(
            *(
                connect_once(server.port, starts[(first + i) % len(starts)], ctx, timeout)
                for i in range(size)
            ),
            return_exceptions=True,
        )
        for outcome in outcomes:
            if isinstance(outcome, BaseException):
                result.failed += 1
                errors[_error_kind(outcome)] += 1
            else:
                latency, client = outcome
                result.completed += 1
                result.latencies_ms.append(latency)
                opened.append(client)
    result.seconds = round(time.perf_counter() - started, 2)
    result.errors = dict(errors.most_common(5))
    for client in opened:
        client.close()
    return result


# -- report -------------------------------------------------------------------------------------


def print_table(results: list[Result]) -> None:
    head = (
        f"{'server':<12} {'mode':<16} {'done':>5} {'failed':>6} {'p50 ms':>7} {'p90 ms':>7} "
        f"{'p99 ms':>7} {'max ms':>7} {'total s':>7}"
    )
    print(head)
    print("-" * len(head))
    for r in results:
        s = r.summary()
        keys = ("p50_ms", "p90_ms", "p99_ms", "max_ms")
        cells = [s[k] if s[k] is not None else "-" for k in keys]
        print(
            f"{r.server:<12} {r.mode:<16} {r.completed:>5} {r.failed:>6} "
            + " ".join(f"{c:>7}" for c in cells)
            + f" {r.seconds:>7}"
        )
        for kind, n in r.errors.items():
            print(f"{'':<12} {'':<16} {n:>5} x {kind}")


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--clients", type=int, default=600, help="connects per server and mode")
    p.add_argument("--wave", type=int, default=20, help="connects started at once")
    p.add_argument("--timeout", type=float, default=10.0, help="seconds allowed per connect")
    p.add_argument("--servers", default=",".join(SERVERS))
    p.add_argument("--modes", default=",".join(MODES))
    p.add_argument("--json", help="write the figures to this file")
    return p.parse_args(argv)


async def bench(a: argparse.Namespace, work: Path) -> list[Result]:
    certs = write_certs(work)
    ctx = ssl.create_default_context(cafile=certs[0])
    results = []
    for mode in a.modes.split(","):
        for kind in a.servers.split(","):
            server = Server(kind, mode, certs, work)
            try:
                results.append(await run_waves(server, ctx, a.clients, a.wave, a.timeout))
            finally:
                server.stop()
    return results


def main(argv: Sequence[str] | None = None) -> int:
    a = parse_args(argv)
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    need = 4 * a.clients + 256
    if soft < need and (hard == resource.RLIM_INFINITY or hard >= need):
        resource.setrlimit(resource.RLIMIT_NOFILE, (need, hard))
    with contextlib.suppress(ImportError):
        import uvloop

        uvloop.install()
    with tempfile.TemporaryDirectory(prefix="bench-tls-") as tmp:
        results = asyncio.run(bench(a, Path(tmp)))
    print(
        f"{a.clients} connects per server and mode, waves of {a.wave}; "
        f"{platform.python_implementation()} {platform.python_version()}, {os.cpu_count()} cores"
    )
    print_table(results)
    if a.json:
        Path(a.json).write_text(json.dumps([r.summary() for r in results], indent=2) + "\n")
    return 0 if all(r.failed == 0 for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
