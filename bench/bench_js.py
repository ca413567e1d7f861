#!/usr/bin/env python3
"""JetStream benchmark: pynatsd -js side by side with nats-server -js, in the same run.

    python bench/bench_js.py                       # everything, 3 interleaved pairs, minutes
    python bench/bench_js.py --only publish --only fetch --repeat 3
    python bench/bench_js.py --only publish --sizes 16 --windows 1,1000 --always --repeat 1
    python bench/bench_js.py --restart-msgs 200000 --fetch-msgs 20000
    python bench/bench_js.py --only publish --repeat 1 --profile /tmp/prof   # py-spy, pynatsd

Each scenario runs `--repeat` times per server, the order of the servers reversed every other
round (interleaved pairs). The table gives each server's median, the median of the pairs'
ratios (pynatsd / the other, run i with run i), and each server's CPU time per message (user +
system, all threads, from /proc/<pid>/stat, over the measured part only): on a shared machine
the rates move with whatever else runs, the CPU per message much less.

Servers (each scenario starts them fresh, in a temporary store directory):

- ``pynatsd``: the default policy, a PubAck only after the record is fsynced (group commit);
- ``nats-server``: its default (ack at once, fsync every 2 minutes);
- ``nats-server always`` (with ``--always``): a config file with
  ``jetstream { sync_interval: always }``, fsync before every ack, the same durability promise
  as pynatsd's default.

Scenarios:

- ``publish``: publish with acks to a file stream, a window of 1000 in flight (``--windows``,
  ``1`` for one at a time), 16 B and 1 KiB payloads; messages per second (time-boxed by
  --seconds).
- ``fetch``: a pull consumer fetching --fetch-msgs stored 16 B messages in batches of 1000, with
  ack policy none, and with explicit acks (one +ACK per message).
- ``restart``: a stream of --restart-msgs 16 B messages; time from starting the server process
  until STREAM.INFO answers with every message (nats-server's sync policy does not change its
  recovery, so "always" is not run).

The client is a small raw-protocol asyncio client in this process (no client library): it
pipelines PUBs and parses MSG/HMSG with bytes.find, so the servers are what is measured; at
nats-server's fetch rates the client itself is close to the bottleneck, which makes those ratios
flattering to pynatsd (said next to the table).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

HOST = "127.0.0.1"
REPO = Path(__file__).resolve().parent.parent
PY = REPO / ".venv" / "bin" / "python"
# `--baseline SRC`: pynatsd also runs from this source tree (an older commit's src/ folder, e.g.
# a `git worktree`), to measure a change before and after in the same run.
BASELINE = "pynatsd-baseline"
baseline_src = ""


def free_port() -> int:
    with socket.socket() as s:
        s.bind((HOST, 0))
        return int(s.getsockname()[1])


def nats_server_binary() -> str:
    candidate = REPO / ".venv" / "bin" / "nats-server"
    if candidate.exists():
        return str(candidate)
    found = shutil.which("nats-server")
    if found is None:
        raise SystemExit("nats-server not found")
    return found


# -- servers ------------------------------------------------------------------------------------


@dataclass
class Server:
    kind: str  # "pynatsd", "pynatsd-baseline", "nats-server", "nats-server always"
    store: Path
    port: int = 0
    proc: subprocess.Popen[bytes] | None = None
    started_at: float = 0.0
    profiler: subprocess.Popen[bytes] | None = None

    def argv(self) -> list[str]:
        base = ["-js", "-sd", str(self.store), "-p", str(self.port), "-a", HOST]
        if self.kind in ("pynatsd", BASELINE):
            python = str(PY) if PY.exists() else sys.executable
            return [python, "-m", "pynatsd", *base]
        argv = [nats_server_binary(), *base]
        if self.kind == "nats-server always":
            # The store directory comes from -sd; the file only changes the sync policy.
            conf = self.store.parent / f"{self.store.name}.conf"
            conf.write_text("jetstream { sync_interval: always }\n")
            argv += ["-c", str(conf)]
        return argv

    def start(self) -> None:
        self.store.mkdir(parents=True, exist_ok=True)
        if not self.port:
            self.port = free_port()
        self.started_at = time.perf_counter()
        env = {**os.environ, "PYTHONPATH": baseline_src} if self.kind == BASELINE else None
        self.proc = subprocess.Popen(
            self.argv(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env
        )
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                with socket.create_connection((HOST, self.port), 0.2) as s:
                    if s.recv(16).startswith(b"INFO"):
                        return
            except OSError:
                time.sleep(0.005)
        raise RuntimeError(f"{self.kind} did not start")

    def cpu_seconds(self) -> float:
        """User + system CPU time of the server process so far (all threads), /proc/<pid>/stat."""
        assert self.proc is not None
        stat = Path(f"/proc/{self.proc.pid}/stat").read_text()
        fields = stat[stat.rindex(")") + 2 :].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def start_profiler(self, out: Path) -> None:
        """Attach py-spy (sampling, not pausing the server) for the rest of the scenario."""
        pyspy = shutil.which("py-spy", path=f"{Path(sys.executable).parent}:{os.environ['PATH']}")
        if pyspy is None:
            raise SystemExit("py-spy not found: pip install py-spy into the venv")
        assert self.proc is not None
        argv = [pyspy, "record", "--pid", str(self.proc.pid), "--format", "raw"]
        argv += ["--rate", "250", "--nonblocking", "-o", str(out)]
        self.profiler = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(1.0)  # py-spy needs a moment to attach

    def stop(self) -> None:
        if self.profiler is not None:
            self.profiler.send_signal(signal.SIGINT)  # py-spy writes its output and exits
            try:
                self.profiler.wait(30)
            except subprocess.TimeoutExpired:
                self.profiler.kill()
                self.profiler.wait()
            self.profiler = None
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc = None


# -- a raw client -------------------------------------------------------------------------------


class RawClient(asyncio.Protocol):
    """Just enough of the protocol: PUB out, MSG/HMSG in (handed to `on_msg`), PING/PONG."""

    def __init__(self) -> None:
        self.buf = bytearray()
        self.transport: asyncio.Transport | None = None
        self.on_msg: Callable[[bytes, bytes, bytes, bytes], None] = lambda *a: None
        self.pongs: asyncio.Queue[None] = asyncio.Queue()
        self.ready = asyncio.get_running_loop().create_future()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        buf = self.buf
        buf += data
        pos = 0
        n = len(buf)
        on_msg = self.on_msg
        while pos < n:
            end = buf.find(b"\r\n", pos)
            if end < 0:
                break
            op = buf[pos : pos + 4]
            if op == b"MSG " or op == b"HMSG":
                line = bytes(buf[pos:end]).split()
                if op == b"MSG ":
                    size = int(line[-1])
                    hsize = 0
                else:
                    size = int(line[-1])
                    hsize = int(line[-2])
                reply = line[3] if len(line) == (5 if op == b"MSG " else 6) else b""
                start = end + 2
                if start + size + 2 > n:
                    break
                payload = bytes(buf[start : start + size])
                on_msg(bytes(line[1]), reply, payload[:hsize], payload[hsize:])
                pos = start + size + 2
            elif op == b"PING":
                assert self.transport is not None
                self.transport.write(b"PONG\r\n")
                pos = end + 2
            elif op == b"PONG":
                self.pongs.put_nowait(None)
                pos = end + 2
            elif op == b"INFO":
                if not self.ready.done():
                    self.ready.set_result(None)
                pos = end + 2
            else:  # +OK, -ERR
                pos = end + 2
        del buf[:pos]

    def write(self, data: bytes) -> None:
        assert self.transport is not None
        self.transport.write(data)

    async def flush(self) -> None:
        self.write(b"PING\r\n")
        await self.pongs.get()


async def connect(port: int) -> RawClient:
    loop = asyncio.get_running_loop()
    _, proto = await loop.create_connection(RawClient, HOST, port)
    await proto.ready
    proto.write(
        b'CONNECT {"verbose":false,"pedantic":false,"headers":true,"no_responders":true,'
        b'"protocol":1}\r\nSUB _R.> 1\r\n'
    )
    await proto.flush()
    return proto


def pub(subject: bytes, payload: bytes, reply: bytes = b"") -> bytes:
    if reply:
        return b"PUB %s %s %d\r\n%s\r\n" % (subject, reply, len(payload), payload)
    return b"PUB %s %d\r\n%s\r\n" % (subject, len(payload), payload)


async def request(client: RawClient, subject: str, body: dict[str, object]) -> dict[str, object]:
    fut: asyncio.Future[bytes] = asyncio.get_running_loop().create_future()
    inbox = b"_R.req.%d" % time.monotonic_ns()

    def on_msg(subj: bytes, reply: bytes, hdr: bytes, data: bytes) -> None:
        if subj == inbox and not fut.done():
            fut.set_result(data)

    old = client.on_msg
    client.on_msg = on_msg
    client.write(pub(subject.encode(), json.dumps(body).encode(), inbox))
    try:
        data = await asyncio.wait_for(fut, 30)
    finally:
        client.on_msg = old
    result: dict[str, object] = json.loads(data)
    return result


async def add_stream(client: RawClient, name: str, subject: str) -> None:
    res = await request(
        client, f"$JS.API.STREAM.CREATE.{name}", {"name": name, "subjects": [subject]}
    )
    assert "error" not in res, res


# -- scenarios ----------------------------------------------------------------------------------


async def publish_with_acks(port: int, size: int, window: int, seconds: float) -> tuple[float, int]:
    """Messages per second (and how many), publishing with a reply subject and at most
    `window` unacked."""
    client = await connect(port)
    await add_stream(client, "B", "b")
    payload = os.urandom(size)
    acked = 0
    inflight = 0
    wake = asyncio.Event()

    def on_msg(subj: bytes, reply: bytes, hdr: bytes, data: bytes) -> None:
        nonlocal acked, inflight
        acked += 1
        inflight -= 1
        if data[:9] == b'{"error":':
            raise RuntimeError(data.decode())
        wake.set()

    client.on_msg = on_msg
    frame = pub(b"b", payload, b"_R.ack")
    start = time.perf_counter()
    deadline = start + seconds
    while time.perf_counter() < deadline:
        room = window - inflight
        if room > 0:
            client.write(frame * room)
            inflight += room
        wake.clear()
        await wake.wait()
    while inflight:
        wake.clear()
        await wake.wait()
    elapsed = time.perf_counter() - start
    assert client.transport is not None
    client.transport.close()
    return acked / elapsed, acked


async def fill(port: int, stream: str, subject: str, count: int, size: int = 16) -> None:
    """Store `count` messages fast: publishes with acks, 1000 in flight (without acks
    nats-server may drop what its inbound queue cannot hold)."""
    client = await connect(port)
    await add_stream(client, stream, subject)
    frame = pub(subject.encode(), b"x" * size, b"_R.fill")
    acked = 0
    sent = 0
    wake = asyncio.Event()

    def on_msg(subj: bytes, reply: bytes, hdr: bytes, data: bytes) -> None:
        nonlocal acked
        acked += 1
        if acked == sent or acked % 500 == 0:
            wake.set()

    client.on_msg = on_msg
    while acked < count:
        room = min(1000 - (sent - acked), count - sent)
        if room > 0:
            client.write(frame * room)
            sent += room
        wake.clear()
        await wake.wait()
    assert client.transport is not None
    client.transport.close()


async def fetch_all(port: int, count: int, ack: bool) -> float:
    """Messages per second a pull consumer fetches (batches of 1000, two requests in flight)."""
    client = await connect(port)
    name = "ack" if ack else "none"
    res = await request(
        client,
        f"$JS.API.CONSUMER.CREATE.F.{name}",
        {
            "stream_name": "F",
            "config": {"durable_name": name, "ack_policy": "explicit" if ack else "none"},
        },
    )
    assert "error" not in res, res
    got = 0
    done = asyncio.get_running_loop().create_future()
    batch = 1000
    outstanding = 0
    next_subject = f"$JS.API.CONSUMER.MSG.NEXT.F.{name}".encode()
    req = json.dumps({"batch": batch, "expires": 5_000_000_000}).encode()
    acks: list[bytes] = []

    def ask() -> None:
        nonlocal outstanding
        outstanding += batch
        client.write(pub(next_subject, req, b"_R.fetch"))

    def on_msg(subj: bytes, reply: bytes, hdr: bytes, data: bytes) -> None:
        nonlocal got, outstanding
        if hdr:  # a status (408 at the end, 409...)
            return
        got += 1
        outstanding -= 1
        if ack:
            acks.append(b"PUB %s 0\r\n\r\n" % reply)
            if len(acks) >= 100:
                client.write(b"".join(acks))
                acks.clear()
        if outstanding <= batch and got + outstanding < count:
            ask()
        if got >= count and not done.done():
            done.set_result(None)

    client.on_msg = on_msg
    start = time.perf_counter()
    ask()
    ask()
    await asyncio.wait_for(done, 300)
    elapsed = time.perf_counter() - start
    if acks:
        client.write(b"".join(acks))
    await client.flush()
    assert client.transport is not None
    client.transport.close()
    return count / elapsed


async def restart_time(server: Server, count: int) -> float:
    """Seconds from starting the server until STREAM.INFO reports every message."""
    server.stop()
    server.start()
    client = await connect(server.port)
    while True:
        info = await request(client, "$JS.API.STREAM.INFO.R", {})
        state = info.get("state")
        if isinstance(state, dict) and state.get("messages", 0) >= count:
            break
        await asyncio.sleep(0.01)
    elapsed = time.perf_counter() - server.started_at
    assert client.transport is not None
    client.transport.close()
    return elapsed


# -- driver -------------------------------------------------------------------------------------


@dataclass
class Run:
    rate: float  # msgs/s (seconds for restart)
    cpu_us: float = 0.0  # the server's CPU (all threads) per message, in microseconds


@dataclass
class Row:
    scenario: str
    unit: str
    runs: dict[str, list[Run]] = field(default_factory=dict)

    def median(self, kind: str) -> float | None:
        runs = self.runs.get(kind)
        return statistics.median(r.rate for r in runs) if runs else None

    def median_cpu(self, kind: str) -> float | None:
        runs = [r for r in self.runs.get(kind, []) if r.cpu_us]
        return statistics.median(r.cpu_us for r in runs) if runs else None

    def pair_ratio(self, kind: str, ref: str) -> float | None:
        """The median of the ratios of the runs made side by side (pair i: run i of each)."""
        ratios = [
            a.rate / b.rate
            for a, b in zip(self.runs.get(kind, []), self.runs.get(ref, []), strict=False)
        ]
        return statistics.median(ratios) if ratios else None


def measured(
    server: Server, work: Callable[[], tuple[float, int]], profile: Path | None = None
) -> Run:
    """Run `work` (returning its rate and message count) and charge the server's CPU to it;
    with `profile`, py-spy samples pynatsd during `work` only."""
    if profile is not None and server.kind == "pynatsd":
        server.start_profiler(profile)
    before = server.cpu_seconds()
    rate, msgs = work()
    cpu = server.cpu_seconds() - before
    return Run(rate, cpu / msgs * 1e6 if msgs else 0.0)


def run_with(kind: str, work: Path, scenario: Callable[[Server], Run]) -> Run:
    server = Server(kind, work / f"{kind.replace(' ', '-')}-{time.monotonic_ns()}")
    server.start()
    try:
        return scenario(server)
    finally:
        server.stop()
        shutil.rmtree(server.store, ignore_errors=True)


def interleaved(row: Row, kinds: list[str], repeat: int, run: Callable[[str, int], Run]) -> Row:
    """`repeat` rounds of every server, the order reversed every other round, so that both
    see the same spells of load on a shared machine; each run is printed as it ends."""
    for i in range(repeat):
        for kind in kinds if i % 2 == 0 else kinds[::-1]:
            result = run(kind, i)
            row.runs.setdefault(kind, []).append(result)
            cpu = f"{result.cpu_us:8.2f} us CPU/msg" if result.cpu_us else ""
            value = f"{result.rate:>12.2f}" if row.unit == "seconds" else f"{result.rate:>12,.0f}"
            print(f"  {row.scenario:40} {kind:20} {value} {cpu}", flush=True)
    return row


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--only", choices=["publish", "fetch", "restart"], action="append")
    ap.add_argument("--seconds", type=float, default=3.0, help="per publish measurement")
    ap.add_argument("--sizes", default="16,1024", help="publish payload sizes")
    ap.add_argument("--windows", default="1000", help="publishes in flight, e.g. 1,1000")
    ap.add_argument("--fetch-msgs", type=int, default=100_000)
    ap.add_argument("--fetch-acks", default="none,explicit", help="fetch ack policies")
    ap.add_argument("--restart-msgs", type=int, default=1_000_000)
    ap.add_argument("--repeat", type=int, default=3, help="interleaved runs per server")
    ap.add_argument("--always", action="store_true", help="also nats-server sync_interval always")
    ap.add_argument("--json", help="write the results here too")
    ap.add_argument("--baseline", default="", metavar="SRC", help="also run pynatsd from SRC")
    ap.add_argument("--profile", type=Path, help="directory: py-spy profiles of pynatsd")
    args = ap.parse_args()
    only = set(args.only or ["publish", "fetch", "restart"])
    kinds = ["pynatsd", "nats-server"]
    if args.always:
        kinds.append("nats-server always")
    if args.baseline:
        global baseline_src
        baseline_src = args.baseline
        kinds.append(BASELINE)
    if args.profile:
        args.profile.mkdir(parents=True, exist_ok=True)
    rows: list[Row] = []

    def profile_path(name: str, i: int) -> Path | None:
        return args.profile / f"{name}-{i}.txt" if args.profile else None

    with tempfile.TemporaryDirectory(prefix="bench-js-") as tmp:
        work = Path(tmp)
        if "publish" in only:
            for size in (int(x) for x in args.sizes.split(",")):
                for window in (int(x) for x in args.windows.split(",")):

                    def publish(kind: str, i: int, size: int = size, window: int = window) -> Run:
                        def scenario(s: Server) -> Run:
                            return measured(
                                s,
                                lambda: asyncio.run(
                                    publish_with_acks(s.port, size, window, args.seconds)
                                ),
                                profile_path(f"publish-{size}-{window}", i),
                            )

                        return run_with(kind, work, scenario)

                    row = Row(f"publish {size} B, window {window}", "msgs/s")
                    rows.append(interleaved(row, kinds, args.repeat, publish))
        if "fetch" in only:
            for policy in args.fetch_acks.split(","):
                ack = policy == "explicit"

                def fetch(kind: str, i: int, ack: bool = ack) -> Run:
                    def scenario(s: Server) -> Run:
                        asyncio.run(fill(s.port, "F", "f", args.fetch_msgs))
                        return measured(
                            s,
                            lambda: (
                                asyncio.run(fetch_all(s.port, args.fetch_msgs, ack)),
                                args.fetch_msgs,
                            ),
                            profile_path(f"fetch-{'explicit' if ack else 'none'}", i),
                        )

                    return run_with(kind, work, scenario)

                row = Row(
                    f"fetch {args.fetch_msgs:,} ({'explicit acks' if ack else 'ack none'})",
                    "msgs/s",
                )
                rows.append(
                    interleaved(
                        row, [k for k in kinds if k != "nats-server always"], args.repeat, fetch
                    )
                )
        if "restart" in only:

            def restart(kind: str, i: int) -> Run:
                def scenario(s: Server) -> Run:
                    asyncio.run(fill(s.port, "R", "r", args.restart_msgs))
                    return Run(asyncio.run(restart_time(s, args.restart_msgs)))

                return run_with(kind, work, scenario)

            row = Row(f"restart, {args.restart_msgs:,} msgs", "seconds")
            rows.append(interleaved(row, kinds[:2], args.repeat, restart))
    print_table(rows, kinds)
    if args.json:
        Path(args.json).write_text(
            json.dumps(
                [
                    {
                        "scenario": r.scenario,
                        "unit": r.unit,
                        "runs": {k: [vars(x) for x in v] for k, v in r.runs.items()},
                    }
                    for r in rows
                ],
                indent=1,
            )
        )
    return 0


def print_table(rows: list[Row], kinds: list[str]) -> None:
    """Medians; `py/ns` is the median of the side-by-side ratios (pair i: run i of each), and
    the CPU columns are the servers' CPU per message (all threads), steadier than the rates on
    a shared machine."""
    others = [k for k in kinds if k != "pynatsd"]
    head = " | ".join(f"{k:>18}" for k in kinds)
    ratios = " | ".join(f"{'py/' + k:>22}" for k in others)
    cpus = " | ".join(f"{k + ' CPU us':>22}" for k in kinds)
    print()
    print(f"| {'scenario':48} | {head} | {ratios} | {cpus} |")
    print(
        "|"
        + "|".join(
            "-" * (n + 2) for n in [48] + [18] * len(kinds) + [22] * (len(others) + len(kinds))
        )
        + "|"
    )
    for row in rows:

        def fmt(x: float | None, unit: str = row.unit) -> str:
            if x is None:
                return "-"
            return f"{x:,.2f}" if unit == "seconds" else f"{x:,.0f}"

        def opt(x: float | None) -> str:
            return "-" if x is None else f"{x:.2f}"

        label = f"{row.scenario} ({row.unit})"
        values = " | ".join(f"{fmt(row.median(k)):>18}" for k in kinds)
        rs = " | ".join(f"{opt(row.pair_ratio('pynatsd', k)):>22}" for k in others)
        cs = " | ".join(f"{opt(row.median_cpu(k)):>22}" for k in kinds)
        print(f"| {label:48} | {values} | {rs} | {cs} |")


if __name__ == "__main__":
    sys.exit(main())
