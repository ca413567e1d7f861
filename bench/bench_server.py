#!/usr/bin/env python3
"""Whole-server load benchmark: pynatsd and nats-server side by side, in the same run.

Every scenario starts a fresh server (random free port on 127.0.0.1), drives it with raw-socket
clients and kills it afterwards; the same scenario then runs against the other server, so both
see the same machine state. Clients are raw sockets in separate processes, not a client library:
publishers `sendall` pre-built batches of PUB frames, subscribers `recv_into` a 1 MiB buffer and
count `MSG ` occurrences, so the client side costs a few C-level calls per 64-256 KiB and the
server is what is measured.

    python bench/bench_server.py                      # everything, < 5 minutes on 2 cores
    python bench/bench_server.py --scenarios pubsub,fanout --sizes 16 --count 500000
    python bench/bench_server.py --json /tmp/bench.json --profile /tmp/prof

See docs/benchmarks.md for what each scenario measures and how to read the table.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import json
import multiprocessing as mp
import os
import platform
import re
import resource
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from multiprocessing.synchronize import Event as MpEvent
from pathlib import Path
from typing import Any

HOST = "127.0.0.1"
REPO = Path(__file__).resolve().parent.parent
VENV_BIN = REPO / ".venv" / "bin"

SERVERS = ("pynatsd", "nats-server")
# `--baseline SRC` adds this server: pynatsd run from another source tree (an older commit's
# `src/`, e.g. a `git worktree`), to measure a change before and after in the same run.
BASELINE = "pynatsd-baseline"
SCENARIOS = ("pub", "pubsub", "fanout", "queue", "fanin", "reqrep", "subs100k", "idle5k", "slowsub")
# Scenarios that take one message size; the others run once (subs100k with the smallest size,
# slowsub with the largest).
SIZED = frozenset({"pub", "pubsub", "fanout", "queue", "fanin", "reqrep"})

# Publishers write this much per sendall: large enough that the client's per-call cost vanishes,
# small enough that the time-limit check between batches stays responsive.
BATCH_BYTES = 256 * 1024
RECV_BYTES = 1024 * 1024
# A subscriber gives up this long after the publishers finished and no more data arrived; the
# rate uses the time of the last message, so this wait never shows up in the figures.
IDLE_AFTER_DONE = 2.0
CONNECT = b'{"verbose":false,"pedantic":false,"lang":"raw","version":"0","protocol":1}'
PING = b"PING\r\n"
PONG = b"PONG\r\n"

# Targets of issue 16 (issue 2's, raised): (kind, bound). "ratio>=": pynatsd/nats-server at
# least the bound; "ratio<=": at most; "abs<=": pynatsd's own figure at most the bound.
TARGETS: dict[tuple[str, int | None, str], tuple[str, float]] = {
    ("pub", 16, "ingested msgs/s"): ("ratio>=", 0.5),
    ("pub", 1024, "ingested msgs/s"): ("ratio>=", 0.7),
    ("pubsub", 16, "delivered msgs/s"): ("ratio>=", 1.0),
    ("pubsub", 1024, "delivered msgs/s"): ("ratio>=", 0.7),
    ("fanout", 16, "delivered msgs/s"): ("ratio>=", 1.2),
    ("fanout", 1024, "delivered msgs/s"): ("ratio>=", 0.7),
    ("queue", 16, "delivered msgs/s"): ("ratio>=", 0.8),
    ("queue", 1024, "delivered msgs/s"): ("ratio>=", 0.7),
    ("fanin", 16, "delivered msgs/s"): ("ratio>=", 0.8),
    ("fanin", 1024, "delivered msgs/s"): ("ratio>=", 0.7),
    ("reqrep", 16, "p50 latency us"): ("ratio<=", 1.0),
    ("subs100k", 16, "subscribe 100k s"): ("ratio<=", 1.5),
    ("subs100k", 16, "delivered msgs/s"): ("ratio>=", 0.5),
    ("idle5k", None, "RSS per conn KiB"): ("abs<=", 20.0),
}


# -- servers ------------------------------------------------------------------------------------


def free_port() -> int:
    """A port the kernel had free a moment ago (a tiny race is accepted; start() retries)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((HOST, 0))
        port: int = s.getsockname()[1]
        return port


def server_argv(kind: str, port: int, nats_server: str) -> list[str]:
    if kind in ("pynatsd", BASELINE):
        python = VENV_BIN / "python"
        exe = str(python) if python.exists() else sys.executable
        return [exe, "-m", "pynatsd", "-p", str(port), "-a", HOST]
    return [nats_server, "-p", str(port), "-a", HOST]


# Server log lines worth reporting: crashes, errors, slow-consumer closes, and nats-server's
# producer stalls (its flow control: it slows a publisher down instead of dropping a receiver).
_PROBLEM = re.compile(
    rb"Traceback|Error|Exception|\[ERR\]|\[FTL\]|Slow Consumer|panic|Producer was stalled"
)


class ServerProcess:
    """One server process: started fresh, probed through /proc, killed after the scenario."""

    def __init__(self, kind: str, nats_server: str, log_dir: Path, baseline: str = "") -> None:
        self.kind = kind
        self.env = None if kind != BASELINE else {**os.environ, "PYTHONPATH": baseline}
        self.nats_server = nats_server
        self.log_path = log_dir / f"{kind}-{time.monotonic_ns()}.log"
        self.proc: subprocess.Popen[bytes] | None = None
        self.port = 0
        self.profiler: subprocess.Popen[bytes] | None = None

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def start(self) -> None:
        for _ in range(3):
            self.port = free_port()
            with self.log_path.open("ab") as log:
                self.proc = subprocess.Popen(
                    server_argv(self.kind, self.port, self.nats_server),
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    stdin=subprocess.DEVNULL,
                    env=self.env,
                )
            if self._wait_ready(10.0):
                return
            self.stop()
        raise RuntimeError(f"{self.kind} did not start; see {self.log_path}")

    def _wait_ready(self, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            assert self.proc is not None
            if self.proc.poll() is not None:
                return False
            try:
                with socket.create_connection((HOST, self.port), timeout=1.0) as s:
                    if s.recv(4096).startswith(b"INFO "):
                        return True
            except OSError:
                time.sleep(0.05)
        return False

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def rss_kib(self) -> int:
        """VmRSS of the server process, in KiB."""
        for line in Path(f"/proc/{self.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
        raise RuntimeError("no VmRSS")

    def cpu_seconds(self) -> float:
        """User + system CPU time used so far (all threads), from /proc/<pid>/stat."""
        stat = Path(f"/proc/{self.pid}/stat").read_text()
        # The command name may contain spaces; fields after the closing parenthesis are fixed.
        fields = stat[stat.rindex(")") + 2 :].split()
        ticks = os.sysconf("SC_CLK_TCK")
        return (int(fields[11]) + int(fields[12])) / ticks

    def start_profiler(self, out: Path, native: bool) -> None:
        """Attach py-spy (sampling, non-blocking) to the server for the rest of the scenario."""
        pyspy = shutil.which("py-spy", path=f"{VENV_BIN}:{os.environ.get('PATH', '')}")
        if pyspy is None:
            raise RuntimeError("py-spy not found: pip install py-spy into the venv")
        # --nonblocking samples without pausing the server (less skew); py-spy cannot unwind
        # C frames that way, so --native pauses it for each sample.
        mode = ["--native"] if native else ["--nonblocking"]
        with out.with_suffix(".log").open("wb") as log:
            self.profiler = subprocess.Popen(
                [
                    pyspy,
                    "record",
                    "--pid",
                    str(self.pid),
                    "--format",
                    "raw",
                    "--rate",
                    "250",
                    "-o",
                    str(out),
                    *mode,
                ],
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        time.sleep(1.0)  # py-spy needs a moment to attach; samples before that would be lost.

    def stop(self) -> list[str]:
        """Kill the server; return the problem lines of its log (deduplicated, at most 5)."""
        if self.profiler is not None:
            # SIGINT makes py-spy write its output and exit.
            self.profiler.send_signal(signal.SIGINT)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.profiler.wait(30)
            self.profiler = None
        crashed: list[str] = []
        if self.proc is not None:
            code = self.proc.poll()
            if code is not None:
                crashed.append(f"server exited early with code {code}")
            else:
                self.proc.terminate()
                try:
                    self.proc.wait(5)
                except subprocess.TimeoutExpired:
                    self.proc.kill()
                    self.proc.wait()
        return crashed + self.problems()

    def problems(self) -> list[str]:
        if not self.log_path.exists():
            return []
        seen: dict[str, int] = {}
        for line in self.log_path.read_bytes().splitlines():
            if _PROBLEM.search(line):
                # Drop the "[pid] date time" prefix so repeated lines collapse into one.
                text = re.sub(r"^\[\d+\] \S+ \S+ ", "", line.decode(errors="replace")).strip()
                text = re.sub(r"cid:\d+|127\.0\.0\.1:\d+|\d+ms", "…", text)
                seen[text] = seen.get(text, 0) + 1
        return [f"{t} (x{n})" if n > 1 else t for t, n in list(seen.items())[:5]]


# -- raw protocol helpers (used in the worker processes) -----------------------------------------


def connect(port: int, timeout: float = 10.0) -> tuple[socket.socket, bytes]:
    """Connect, read INFO, send CONNECT+PING, wait for PONG; return the socket and leftovers."""
    sock = socket.create_connection((HOST, port), timeout=timeout)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    sock.sendall(b"CONNECT " + CONNECT + b"\r\n" + PING)
    return sock, wait_pong(sock, timeout)


def wait_pong(sock: socket.socket, timeout: float, data: bytes = b"") -> bytes:
    """Read until a PONG arrives; return what followed it (an INFO, typically, or nothing)."""
    deadline = time.monotonic() + timeout
    while PONG not in data:
        sock.settimeout(max(deadline - time.monotonic(), 0.001))
        chunk = sock.recv(65536)
        if not chunk:
            raise ConnectionError(f"closed by server before PONG: {data[-200:]!r}")
        data += chunk
    return data[data.index(PONG) + len(PONG) :]


class FrameReader:
    """A minimal parser for the request/reply clients, where every frame must be taken apart."""

    def __init__(self, sock: socket.socket, data: bytes = b"") -> None:
        self.sock = sock
        self.buf = bytearray(data)
        self.errors: list[str] = []

    def next_msg(self) -> tuple[bytes, bytes | None, bytes]:
        """Block until one MSG arrives: (subject, reply, payload)."""
        while True:
            msg = self.parse_one()
            if msg is not None:
                return msg
            chunk = self.sock.recv(RECV_BYTES)
            if not chunk:
                raise ConnectionError("closed by server")
            self.buf += chunk

    def parse_one(self) -> tuple[bytes, bytes | None, bytes] | None:
        buf = self.buf
        while True:
            end = buf.find(b"\r\n")
            if end < 0:
                return None
            if buf.startswith(b"MSG "):
                parts = bytes(buf[4:end]).split()
                size = int(parts[-1])
                total = end + 2 + size + 2
                if len(buf) < total:
                    return None
                payload = bytes(buf[end + 2 : end + 2 + size])
                del buf[:total]
                return parts[0], parts[2] if len(parts) == 4 else None, payload
            line = bytes(buf[:end])
            del buf[: end + 2]
            if line == b"PING":
                self.sock.sendall(PONG)
            elif line.startswith(b"-ERR"):
                self.errors.append(line.decode(errors="replace"))
            # INFO, PONG and +OK need no action.


def build_batches(
    subjects: Sequence[bytes], size: int, count: int, seq_start: int, digits: int
) -> list[tuple[bytes, int]]:
    """PUB frames for `count` messages as (buffer, messages in it) pairs of ~BATCH_BYTES.

    With digits > 0 each payload starts with its sequence number (for the exactly-once check) and
    every batch is distinct; otherwise one batch object is repeated, costing no memory.
    """
    frame_len = len(b"PUB %s %d\r\n\r\n" % (subjects[0], size)) + size
    per_batch = max(1, min(count, BATCH_BYTES // frame_len))
    pad = b"x" * size
    nsub = len(subjects)
    heads = [b"PUB %s %d\r\n" % (s, size) for s in subjects]

    def batch(first: int, n: int) -> bytes:
        if digits:
            tail = pad[digits:] + b"\r\n"
            return b"".join(
                heads[i % nsub] + b"%0*d" % (digits, seq_start + i) + tail
                for i in range(first, first + n)
            )
        return b"".join(heads[i % nsub] + pad + b"\r\n" for i in range(first, first + n))

    out: list[tuple[bytes, int]] = []
    full, rest = divmod(count, per_batch)
    if digits:
        out = [(batch(k * per_batch, per_batch), per_batch) for k in range(full)]
    elif full:
        # Every repeat starts at subject index 0; with per_batch a multiple of nsub the rotation
        # over subjects stays even, and otherwise the skew is below one message per batch.
        same = batch(0, per_batch)
        out = [(same, per_batch)] * full
    if rest:
        out.append((batch(full * per_batch, rest), rest))
    return out


# -- worker processes ---------------------------------------------------------------------------


@dataclass
class Sync:
    """What the orchestrator and the worker processes share."""

    ready: Any  # mp.Queue: each worker puts one item when connected (and subscribed)
    results: Any  # mp.Queue: each worker puts its result dict
    start: MpEvent  # set when every worker is ready: publishers go
    pubs_done: MpEvent  # set when every publisher got its final PONG
    stop: MpEvent  # for workers without a natural end (the responder)
    total: Any  # mp.Value: messages received by all subscribers, so queue members know when to stop
    sent: Any  # mp.Value: messages the publishers sent, valid once pubs_done is set


def publisher(
    port: int,
    subjects: list[bytes],
    size: int,
    count: int,
    seq_start: int,
    digits: int,
    time_limit: float,
    sync: Sync,
) -> None:
    res: dict[str, Any] = {"role": "pub", "sent": 0, "error": ""}
    announced = False
    try:
        batches = build_batches(subjects, size, count, seq_start, digits)
        sock, _ = connect(port)
        sock.settimeout(None)
        sync.ready.put("pub")
        announced = True
        sync.start.wait()
        t0 = time.perf_counter()
        sent = 0
        for buf, n in batches:
            sock.sendall(buf)
            sent += n
            if time.perf_counter() - t0 > time_limit:
                break
        # The PONG comes after the server processed every PUB before the PING: the count is of
        # messages the server handled, not of bytes sitting in a socket buffer.
        sock.sendall(PING)
        wait_pong(sock, time_limit + 60)
        res.update(t0=t0, t1=time.perf_counter(), sent=sent)
        sock.close()
    except Exception as e:
        res["error"] = f"publisher: {type(e).__name__}: {e}"
        if not announced:
            sync.ready.put("failed")  # the orchestrator must not wait for us
    sync.results.put(res)


def subscriber(
    port: int,
    subject: bytes,
    queue: bytes,
    expected: int,
    digits: int,
    deadline: float,
    read_rate: float,
    sync: Sync,
) -> None:
    res: dict[str, Any] = {"role": "sub", "count": 0, "status": "", "error": "", "seqs": []}
    announced = False
    try:
        sock, _ = connect(port)
        q = b" " + queue if queue else b""
        sock.sendall(b"SUB %s%s 1\r\n" % (subject, q) + PING)
        wait_pong(sock, 10.0)
        sync.ready.put("sub")
        announced = True
        # A paced subscriber (read_rate bytes/s) reads small pieces so its pace stays smooth.
        buf = bytearray(64 * 1024 if read_rate else RECV_BYTES)
        view = memoryview(buf)
        chunks: list[bytes] = []
        count = 0
        tail = b""
        sync.start.wait()
        t_start = time.perf_counter()
        t_last = t_start
        t_data = t_start
        nbytes = 0
        sock.settimeout(0.2)
        status = "complete"
        total = 0
        # A queue member cannot know its share: the group stops when the shared total is reached.
        while (total if queue else count) < expected:
            try:
                n = sock.recv_into(buf)
            except TimeoutError:
                total = sync.total.value
                now = time.perf_counter()
                if sync.pubs_done.is_set():
                    # Publishers stopped by the time limit sent fewer than planned.
                    expected = min(expected, sync.sent.value)
                    if (total if queue else count) >= expected:
                        break
                if sync.pubs_done.is_set() and now - t_data > IDLE_AFTER_DONE:
                    status = "timeout (messages missing)"
                    break
                if now - t_start > deadline:
                    status = "deadline"
                    break
                continue
            if n == 0:
                status = "closed by server"
                break
            t_data = time.perf_counter()
            # "MSG " can straddle two reads: count it across the seam (the stream's last 3 bytes
            # + this read's first 3). Neither side alone can hold 4 bytes, so every occurrence
            # is counted exactly once: in its read, or at the seam where it completes.
            found = buf.count(b"MSG ", 0, n)
            if tail:
                found += (tail + bytes(view[: min(n, 3)])).count(b"MSG ")
            tail = bytes(view[n - 3 : n]) if n >= 3 else (tail + bytes(view[:n]))[-3:]
            if found:
                count += found
                t_last = t_data
                with sync.total.get_lock():
                    sync.total.value += found
                    total = sync.total.value
            # bytearray.find, not `in view[:n]`: a memoryview compares element by element.
            i = buf.find(b"-ERR", 0, n)
            if i >= 0:
                res["error"] = bytes(view[i : buf.find(b"\r\n", i, n)]).decode(errors="replace")
            if digits:
                chunks.append(bytes(view[:n]))
            if read_rate:
                nbytes += n
                ahead = nbytes / read_rate - (time.perf_counter() - t_start)
                if ahead > 0:
                    time.sleep(ahead)
        res.update(count=count, t_last=t_last, status=status)
        if digits:
            pattern = rb"MSG \S+ \S+ \d+\r\n(\d{%d})" % digits
            res["seqs"] = [int(s) for s in re.findall(pattern, b"".join(chunks))]
        sock.close()
    except Exception as e:
        res["error"] = f"subscriber: {type(e).__name__}: {e}"
        if not announced:
            sync.ready.put("failed")
    sync.results.put(res)


def responder(port: int, subject: bytes, sync: Sync) -> None:
    """Answers every request with its own payload, until told to stop."""
    announced = False
    try:
        sock, rest = connect(port)
        sock.sendall(b"SUB %s 1\r\n" % subject + PING)
        rest = wait_pong(sock, 10.0, rest)
        reader = FrameReader(sock, rest)
        sync.ready.put("responder")
        announced = True
        sock.settimeout(0.2)
        while not sync.stop.is_set():
            try:
                chunk = sock.recv(RECV_BYTES)
            except TimeoutError:
                continue
            if not chunk:
                break
            reader.buf += chunk
            out = []
            while (msg := reader.parse_one()) is not None:
                _, reply, payload = msg
                if reply:
                    out.append(b"PUB %s %d\r\n%s\r\n" % (reply, len(payload), payload))
            if out:
                sock.sendall(b"".join(out))
        sock.close()
    except Exception as e:
        sync.results.put({"role": "responder", "error": f"responder: {type(e).__name__}: {e}"})
        if not announced:
            sync.ready.put("failed")


def requester(port: int, subject: bytes, size: int, warmup: int, count: int, sync: Sync) -> None:
    """Sequential round trips; each latency is PUB written -> reply fully read."""
    res: dict[str, Any] = {"role": "requester", "lat_ns": [], "error": ""}
    announced = False
    try:
        sock, rest = connect(port)
        inbox = b"_INBOX.bench.reply"
        sock.sendall(b"SUB %s 1\r\n" % inbox + PING)
        rest = wait_pong(sock, 10.0, rest)
        reader = FrameReader(sock, rest)
        sync.ready.put("requester")
        announced = True
        sync.start.wait()
        sock.settimeout(10.0)
        payload = b"r" * size
        frame = b"PUB %s %s %d\r\n%s\r\n" % (subject, inbox, size, payload)
        lat: list[int] = []
        clock = time.perf_counter_ns
        for i in range(warmup + count):
            t = clock()
            sock.sendall(frame)
            reader.next_msg()
            if i >= warmup:
                lat.append(clock() - t)
        res["lat_ns"] = lat
        if reader.errors:
            res["error"] = "; ".join(reader.errors[:3])
        sock.close()
    except Exception as e:
        res["error"] = f"requester: {type(e).__name__}: {e}"
        if not announced:
            sync.ready.put("failed")
    sync.results.put(res)


# -- orchestration ------------------------------------------------------------------------------


@dataclass
class Measurement:
    metric: str
    value: float | None
    notes: list[str] = field(default_factory=list)
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass
class Workers:
    """Worker processes of one scenario and the queues they report through."""

    ctx: Any
    sync: Sync
    procs: list[Any] = field(default_factory=list)
    early: list[dict[str, Any]] = field(default_factory=list)

    @classmethod
    def new(cls) -> Workers:
        # fork: the workers start in milliseconds and need nothing re-imported.
        ctx = mp.get_context("fork")
        sync = Sync(
            ctx.Queue(),
            ctx.Queue(),
            ctx.Event(),
            ctx.Event(),
            ctx.Event(),
            ctx.Value("q", 0),
            ctx.Value("q", 0),
        )
        return cls(ctx, sync)

    def spawn(self, target: Callable[..., None], *args: Any) -> None:
        p = self.ctx.Process(target=target, args=(*args, self.sync), daemon=True)
        p.start()
        self.procs.append(p)

    def wait_ready(self, n: int, timeout: float) -> None:
        for _ in range(n):
            self.sync.ready.get(timeout=timeout)

    def results(self, role: str, n: int, timeout: float) -> list[dict[str, Any]]:
        """The next n results of `role`; results of other roles that arrive first (a subscriber
        closed as a slow consumer reports before the publishers) are kept for later."""
        out = [r for r in self.early if r["role"] == role][:n]
        self.early = [r for r in self.early if r not in out]
        deadline = time.monotonic() + timeout
        while len(out) < n:
            r = self.sync.results.get(timeout=max(deadline - time.monotonic(), 0.1))
            (out if r["role"] == role else self.early).append(r)
        return out

    def close(self) -> None:
        self.sync.stop.set()
        for p in self.procs:
            p.join(2.0)
            if p.is_alive():
                p.terminate()
                p.join()


@dataclass
class Flow:
    """A publish/subscribe load: publishers share `count`, each subscriber expects its share."""

    pubs: int
    subs: int
    size: int
    count: int
    queue: bytes = b""
    pub_subjects: list[bytes] = field(default_factory=lambda: [b"bench.subject"])
    sub_subject: bytes = b"bench.subject"
    check_seqs: bool = False
    sub_read_rate: float = 0.0  # bytes/s; 0 reads as fast as possible


def run_flow(server: ServerProcess, flow: Flow, time_limit: float) -> dict[str, Any]:
    """Run one load against `server`; return rates, counts and problems."""
    w = Workers.new()
    digits = min(flow.size, 16) if flow.check_seqs else 0
    per_pub = flow.count // flow.pubs
    # Every plain subscriber expects every message; queue members stop on the shared total.
    expected = per_pub * flow.pubs
    out: dict[str, Any] = {"errors": []}
    try:
        for _ in range(flow.subs):
            w.spawn(
                subscriber,
                server.port,
                flow.sub_subject,
                flow.queue,
                expected,
                digits,
                time_limit + 30,
                flow.sub_read_rate,
            )
        w.wait_ready(flow.subs, 30)
        for i in range(flow.pubs):
            w.spawn(
                publisher,
                server.port,
                flow.pub_subjects,
                flow.size,
                per_pub,
                i * per_pub,
                digits,
                time_limit,
            )
        w.wait_ready(flow.pubs, 60)
        cpu0 = server.cpu_seconds()
        w.sync.start.set()
        pubs = w.results("pub", flow.pubs, time_limit + 90)
        w.sync.sent.value = sum(r["sent"] for r in pubs)
        w.sync.pubs_done.set()
        subs = w.results("sub", flow.subs, IDLE_AFTER_DONE + 60) if flow.subs else []
        out["server_cpu_s"] = server.cpu_seconds() - cpu0 if server.alive() else None
    finally:
        w.close()
    out["errors"] += [r["error"] for r in pubs + subs if r.get("error")]
    ok_pubs = [r for r in pubs if "t0" in r]
    sent = sum(r["sent"] for r in pubs)
    out["sent"] = sent
    if not ok_pubs:
        return out
    t0 = min(r["t0"] for r in ok_pubs)
    out["pub_rate"] = sent / (max(r["t1"] for r in ok_pubs) - t0)
    if not flow.subs:
        return out
    expected = sent if flow.queue else sent * flow.subs
    delivered = sum(r["count"] for r in subs)
    t_last = max((r.get("t_last", t0) for r in subs), default=t0)
    out.update(
        expected=expected,
        delivered=delivered,
        lost=expected - delivered,
        delivered_pct=100.0 * delivered / expected if expected else None,
    )
    out["rate"] = delivered / (t_last - t0) if t_last > t0 else None
    out["statuses"] = sorted({r["status"] for r in subs if r.get("status") != "complete"})
    if digits:
        seqs = [s for r in subs for s in r["seqs"]]
        unique = set(seqs)
        out["duplicates"] = len(seqs) - len(unique)
        out["missing"] = sent - len(unique)
        out["per_member"] = [len(r["seqs"]) for r in subs]
    return out


def flow_notes(res: dict[str, Any]) -> list[str]:
    notes = list(res["errors"])
    if res.get("lost"):
        notes.append(f"LOST {res['lost']} of {res['expected']}")
    if res.get("duplicates"):
        notes.append(f"DUPLICATES {res['duplicates']}")
    if res.get("missing"):
        notes.append(f"missing seqs {res['missing']}")
    notes += res.get("statuses", [])
    return notes


def flow_measurement(res: dict[str, Any], metric: str, key: str) -> Measurement:
    extra = {k: v for k, v in res.items() if k != "errors"}
    return Measurement(metric, res.get(key), flow_notes(res), extra)


Scenario = Callable[[ServerProcess, int, argparse.Namespace], list[Measurement]]


def sc_pub(server: ServerProcess, size: int, a: argparse.Namespace) -> list[Measurement]:
    res = run_flow(server, Flow(1, 0, size, a.count_for(size)), a.time_limit)
    return [flow_measurement(res, "ingested msgs/s", "pub_rate")]


def sc_pubsub(server: ServerProcess, size: int, a: argparse.Namespace) -> list[Measurement]:
    res = run_flow(server, Flow(1, 1, size, a.count_for(size)), a.time_limit)
    return [flow_measurement(res, "delivered msgs/s", "rate")]


def sc_fanout(server: ServerProcess, size: int, a: argparse.Namespace) -> list[Measurement]:
    res = run_flow(server, Flow(1, 5, size, a.count_for(size) // 5), a.time_limit)
    return [flow_measurement(res, "delivered msgs/s", "rate")]


def sc_queue(server: ServerProcess, size: int, a: argparse.Namespace) -> list[Measurement]:
    # The exactly-once check needs a sequence number in the payload: 8 digits at least.
    flow = Flow(1, 4, size, a.count_for(size), queue=b"workers", check_seqs=size >= 8)
    res = run_flow(server, flow, a.time_limit)
    return [flow_measurement(res, "delivered msgs/s", "rate")]


def sc_fanin(server: ServerProcess, size: int, a: argparse.Namespace) -> list[Measurement]:
    res = run_flow(server, Flow(4, 1, size, a.count_for(size)), a.time_limit)
    return [flow_measurement(res, "delivered msgs/s", "rate")]


def sc_reqrep(server: ServerProcess, size: int, a: argparse.Namespace) -> list[Measurement]:
    w = Workers.new()
    try:
        w.spawn(responder, server.port, b"bench.service")
        w.wait_ready(1, 30)
        w.spawn(requester, server.port, b"bench.service", size, 200, a.requests)
        w.wait_ready(1, 30)
        w.sync.start.set()
        res = w.results("requester", 1, 120)[0]
    finally:
        w.close()
    lat = sorted(res["lat_ns"])
    notes = [r["error"] for r in [res, *w.early] if r.get("error")]
    if not lat:
        return [Measurement("p50 latency us", None, notes), Measurement("p99 latency us", None)]
    p50 = statistics.median(lat) / 1000
    p99 = lat[min(len(lat) - 1, int(len(lat) * 0.99))] / 1000
    extra = {"mean_us": statistics.fmean(lat) / 1000, "max_us": lat[-1] / 1000, "n": len(lat)}
    return [Measurement("p50 latency us", p50, notes, extra), Measurement("p99 latency us", p99)]


def sub_patterns(n: int) -> Iterator[bytes]:
    """n subjects, 80% with wildcards, none matching the published bench.p<k>.data subjects,
    but sharing their first token so every match walks crowded trie levels."""
    shapes = (b"bench.h%d.data", b"bench.h%d.*", b"bench.*.h%d", b"bench.h%d.>", b"*.h%d.data")
    for i in range(n):
        yield shapes[i % len(shapes)] % i


def sc_subs100k(server: ServerProcess, size: int, a: argparse.Namespace) -> list[Measurement]:
    n = a.subs
    lines = b"".join(b"SUB %s %d\r\n" % (s, i + 1) for i, s in enumerate(sub_patterns(n)))
    sock, _ = connect(server.port)
    rss0 = server.rss_kib()
    notes: list[str] = []
    try:
        cpu0 = server.cpu_seconds()
        t0 = time.perf_counter()
        sock.settimeout(None)
        sock.sendall(lines + PING)
        wait_pong(sock, 120.0)
        elapsed = time.perf_counter() - t0
        # Steadier than the time on a shared machine: the server's own CPU for the SUBs.
        cpu_us = (server.cpu_seconds() - cpu0) * 1e6 / max(n, 1)
        time.sleep(0.5)
        rss1 = server.rss_kib()
        sub_m = Measurement(
            f"subscribe {n // 1000}k s" if n >= 1000 else f"subscribe {n} s",
            elapsed,
            [],
            # n may be 0: `--subs 0` runs the same flow without the crowd, as a baseline.
            {
                "subs_per_s": n / elapsed,
                "rss_per_sub_bytes": (rss1 - rss0) * 1024 / max(n, 1),
                "server_cpu_us_per_sub": cpu_us,
            },
        )
        # Distinct subjects (256 by default) keep the match caches honest: each is a fresh walk
        # at least once. The subscriber's bench.*.data shares the crowded `*` node with the 100k.
        subjects = [b"bench.p%d.data" % k for k in range(a.subjects)]
        flow = Flow(
            1, 1, size, a.count_for(size), pub_subjects=subjects, sub_subject=b"bench.*.data"
        )
        res = run_flow(server, flow, a.time_limit)
        notes = flow_notes(res)
    finally:
        sock.close()
    rate_m = Measurement(
        "delivered msgs/s", res.get("rate"), notes, {k: v for k, v in res.items() if k != "errors"}
    )
    return [sub_m, rate_m]


def sc_idle5k(server: ServerProcess, size: int, a: argparse.Namespace) -> list[Measurement]:
    n = a.conns
    time.sleep(0.5)  # let the freshly started server settle before the baseline
    rss0 = server.rss_kib()
    socks: list[socket.socket] = []
    notes: list[str] = []
    t0 = time.perf_counter()
    try:
        # Waves of 100 stay within the listen backlog while keeping the round trips overlapped.
        for first in range(0, n, 100):
            wave = []
            for _ in range(min(100, n - first)):
                s = socket.create_connection((HOST, server.port), timeout=10.0)
                s.sendall(b"CONNECT " + CONNECT + b"\r\n" + PING)
                wave.append(s)
            for s in wave:
                wait_pong(s, 10.0)
            socks += wave
        elapsed = time.perf_counter() - t0
        time.sleep(1.0)  # settle: a server may allocate lazily right after the handshake
        rss1 = server.rss_kib()
    except OSError as e:
        notes.append(f"after {len(socks)} connections: {type(e).__name__}: {e}")
        return [Measurement("RSS per conn KiB", None, notes)]
    finally:
        for s in socks:
            s.close()
    extra = {"rss_before_kib": rss0, "rss_after_kib": rss1, "connect_s": elapsed}
    return [Measurement("RSS per conn KiB", (rss1 - rss0) / n, notes, extra)]


def sc_slowsub(server: ServerProcess, size: int, a: argparse.Namespace) -> list[Measurement]:
    # A subscriber reading at a fixed pace, several times slower than the publisher: the
    # server must either slow the publisher down (nats-server stalls it) or drop the
    # subscriber as a slow consumer once max_pending (64 MiB) is exceeded.
    flow = Flow(1, 1, size, a.slow_bytes // (size + 40), sub_read_rate=a.slow_rate)
    res = run_flow(server, flow, a.time_limit)
    return [flow_measurement(res, "delivered %", "delivered_pct")]


SCENARIO_FUNCS: dict[str, Scenario] = {
    "pub": sc_pub,
    "pubsub": sc_pubsub,
    "fanout": sc_fanout,
    "queue": sc_queue,
    "fanin": sc_fanin,
    "reqrep": sc_reqrep,
    "subs100k": sc_subs100k,
    "idle5k": sc_idle5k,
    "slowsub": sc_slowsub,
}
DESCRIPTIONS = {
    "pub": "1 publisher, no subscribers",
    "pubsub": "1 pub -> 1 sub",
    "fanout": "1 pub -> 5 subs",
    "queue": "1 pub -> queue group of 4",
    "fanin": "4 pubs -> 1 sub",
    "reqrep": "request/reply, sequential",
    "subs100k": "100k wildcard subs present",
    "idle5k": "5k idle connections",
    "slowsub": "1 pub -> 1 paced sub",
}


# -- report -------------------------------------------------------------------------------------


@dataclass
class Row:
    scenario: str
    size: int | None
    metric: str
    values: dict[str, float | None]
    notes: dict[str, list[str]]
    extra: dict[str, dict[str, Any]]
    ratio: float | None = None
    target: str = ""
    verdict: str = ""


def judge(row: Row) -> None:
    py, go = row.values.get("pynatsd"), row.values.get("nats-server")
    if py is not None and go:
        row.ratio = py / go
    rule = TARGETS.get((row.scenario, row.size, row.metric))
    if rule is None:
        return
    kind, bound = rule
    if kind == "abs<=":
        row.target = f"<= {bound:g} KiB"
        if py is not None:
            row.verdict = "ok" if py <= bound else "MISS"
        return
    row.target = f"{kind[5:]} {bound:g}x"
    if row.ratio is not None:
        ok = row.ratio >= bound if kind == "ratio>=" else row.ratio <= bound
        row.verdict = "ok" if ok else "MISS"


def fmt(value: float | None, metric: str) -> str:
    if value is None:
        return "-"
    if "msgs/s" in metric:
        return f"{value / 1e6:.2f}M" if value >= 1e6 else f"{value / 1e3:.0f}k"
    if metric.endswith(" s"):
        return f"{value:.2f}"
    if metric.endswith("%"):
        return f"{value:.1f}%"
    return f"{value:.1f}"


def print_table(rows: list[Row], servers: Sequence[str]) -> None:
    head = ["scenario", "size", "metric", *servers, "ratio", "target", "notes"]
    body = []
    for r in rows:
        notes = [f"{srv}: {n}" for srv in servers for n in r.notes.get(srv, [])]
        ratio = f"{r.ratio:.2f}x" if r.ratio is not None else "-"
        target = f"{r.target} {r.verdict}".strip()
        size = f"{r.size} B" if r.size is not None else ""
        body.append(
            [
                DESCRIPTIONS[r.scenario],
                size,
                r.metric,
                *(fmt(r.values.get(s), r.metric) for s in servers),
                ratio,
                target,
                "; ".join(notes),
            ]
        )
    widths = [max(len(str(x)) for x in col) for col in zip(head, *body, strict=True)]
    widths[-1] = 0  # notes run to the end of the line
    for line in [head, ["-" * w for w in widths[:-1]] + ["-----"], *body]:
        print("  ".join(str(x).ljust(w) for x, w in zip(line, widths, strict=True)).rstrip())


def machine() -> dict[str, Any]:
    cpu = ""
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    return {
        "cpus": os.cpu_count(),
        "cpu": cpu,
        "kernel": platform.release(),
        "python": platform.python_version(),
    }


def server_version(kind: str, nats_server: str) -> str:
    argv = server_argv(kind, 0, nats_server)[:3] if kind != "nats-server" else [nats_server]
    try:
        out = subprocess.run([*argv, "--version"], capture_output=True, timeout=30, text=True)
        return (out.stdout or out.stderr).strip().splitlines()[0]
    except (OSError, subprocess.SubprocessError, IndexError):
        return "?"


def raise_nofile(need: int) -> None:
    """Raise RLIMIT_NOFILE for this process; the servers we spawn inherit it."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = need if hard == resource.RLIM_INFINITY else min(max(soft, need), hard)
    if want > soft:
        resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
    if want < need:
        print(f"warning: RLIMIT_NOFILE hard limit {hard} < {need}", file=sys.stderr)


# Default message counts: a few seconds per scenario for pynatsd, < 5 minutes in total.
DEFAULT_COUNT_SMALL = 2_000_000
DEFAULT_COUNT_LARGE = 500_000


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument(
        "--scenarios",
        default=",".join(SCENARIOS),
        help=f"comma-separated, from {','.join(SCENARIOS)}",
    )
    p.add_argument("--sizes", default="16,1024", help="payload sizes in bytes")
    p.add_argument(
        "--count",
        type=int,
        default=0,
        help=f"messages per load scenario (default {DEFAULT_COUNT_SMALL:,} for sizes "
        f"<= 256 B, {DEFAULT_COUNT_LARGE:,} above)",
    )
    p.add_argument("--servers", default=",".join(SERVERS))
    p.add_argument(
        "--time-limit", type=float, default=10.0, help="publishers stop after this many seconds"
    )
    p.add_argument(
        "--repeat",
        type=int,
        default=1,
        help="runs per scenario and server; the table shows the median",
    )
    p.add_argument("--requests", type=int, default=5000, help="request/reply round trips")
    p.add_argument("--subs", type=int, default=100_000, help="subscriptions for subs100k")
    p.add_argument(
        "--subjects",
        type=int,
        default=256,
        help="subs100k: distinct subjects the publisher cycles through",
    )
    p.add_argument("--conns", type=int, default=5000, help="connections for idle5k")
    p.add_argument(
        "--slow-rate",
        type=float,
        default=50e6,
        help="slowsub: the subscriber's read pace in bytes/s",
    )
    p.add_argument(
        "--slow-bytes",
        type=int,
        default=200 * 1024 * 1024,
        help="slowsub: bytes published (must exceed 64 MiB max_pending to matter)",
    )
    p.add_argument("--nats-server", default=str(VENV_BIN / "nats-server"))
    p.add_argument(
        "--baseline",
        default="",
        metavar="SRC",
        help="also run pynatsd from this source tree (its src/ folder): before/after figures",
    )
    p.add_argument("--json", type=Path, help="write results and machine info here")
    p.add_argument(
        "--profile",
        type=Path,
        help="directory: attach py-spy to pynatsd in each scenario (raw stacks)",
    )
    p.add_argument(
        "--profile-native",
        action="store_true",
        help="with --profile: include C frames (uvloop, CPython) in the stacks",
    )
    a = p.parse_args(argv)
    a.scenarios = [s for s in a.scenarios.split(",") if s]
    a.sizes = [int(s) for s in a.sizes.split(",") if s]
    a.servers = [s for s in a.servers.split(",") if s]
    if a.baseline:
        a.servers.insert(1, BASELINE)
    for s in a.scenarios:
        if s not in SCENARIO_FUNCS:
            p.error(f"unknown scenario {s!r}")
    for s in a.servers:
        if s not in (*SERVERS, BASELINE):
            p.error(f"unknown server {s!r}")

    def count_for(size: int) -> int:
        if a.count:
            return int(a.count)
        return DEFAULT_COUNT_SMALL if size <= 256 else DEFAULT_COUNT_LARGE

    a.count_for = count_for
    return a


def run_one(
    scenario: str, size: int | None, kind: str, a: argparse.Namespace, log_dir: Path
) -> list[Measurement]:
    """One scenario against one fresh server; the server's log problems go on the first row."""
    t = time.monotonic()
    server = ServerProcess(kind, a.nats_server, log_dir, a.baseline)
    server.start()
    if a.profile and kind == "pynatsd":
        server.start_profiler(a.profile / f"{scenario}-{size or 0}.txt", a.profile_native)
    try:
        ms = SCENARIO_FUNCS[scenario](server, size or 16, a)
    except Exception as e:
        ms = [Measurement("error", None, [f"{type(e).__name__}: {e}"])]
    problems = server.stop()
    ms[0].notes += problems
    print(
        f"  {scenario:<9} {size or '':>5} {kind:<12} "
        + ", ".join(f"{m.metric}={fmt(m.value, m.metric)}" for m in ms)
        + f"  ({time.monotonic() - t:.1f}s)"
        + "".join(f"\n      ! {n}" for m in ms for n in m.notes),
        flush=True,
    )
    return ms


def combine(scenario: str, size: int | None, runs: dict[str, list[list[Measurement]]]) -> list[Row]:
    """Rows for one scenario and size: the median over repeats, every note once."""
    rows: dict[str, Row] = {}
    for kind, reps in runs.items():
        for ms in reps:
            for m in ms:
                row = rows.setdefault(m.metric, Row(scenario, size, m.metric, {}, {}, {}))
                row.notes.setdefault(kind, [])
                row.notes[kind] += [n for n in m.notes if n not in row.notes[kind]]
                row.extra.setdefault(kind, {"runs": []})["runs"].append(
                    {"value": m.value, **m.extra}
                )
    for row in rows.values():
        for kind, extra in row.extra.items():
            values = [r["value"] for r in extra["runs"] if r["value"] is not None]
            row.values[kind] = statistics.median(values) if values else None
        judge(row)
    return list(rows.values())


def main(argv: Sequence[str] | None = None) -> int:
    a = parse_args(argv)
    raise_nofile(a.conns + 1000)
    if a.profile:
        a.profile.mkdir(parents=True, exist_ok=True)
    log_dir = Path(tempfile.mkdtemp(prefix="bench-server-"))
    info = {
        "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "machine": machine(),
        "servers": {s: server_version(s, a.nats_server) for s in a.servers},
        "argv": sys.argv,
        "logs": str(log_dir),
        "loadavg_start": os.getloadavg(),
    }
    print(f"# {info['date']}  {info['machine']}  {info['servers']}")
    # Other work on the machine skews a 2-core benchmark: the load average tells.
    print(f"# load average at start {os.getloadavg()[0]:.2f}; server logs in {log_dir}", flush=True)
    rows: list[Row] = []
    started = time.monotonic()
    for scenario in a.scenarios:
        sizes: list[int | None] = list(a.sizes) if scenario in SIZED else [None]
        if scenario == "subs100k":
            sizes = [min(a.sizes)]
        elif scenario == "slowsub":
            sizes = [max(a.sizes)]
        for size in sizes:
            runs: dict[str, list[list[Measurement]]] = {kind: [] for kind in a.servers}
            for rep in range(a.repeat):
                # Alternate the order so that a drift in machine load hits both servers alike.
                order = a.servers if rep % 2 == 0 else a.servers[::-1]
                for kind in order:
                    runs[kind].append(run_one(scenario, size, kind, a, log_dir))
            rows += combine(scenario, size, runs)
    info["loadavg_end"] = os.getloadavg()
    print(
        f"\n# total {time.monotonic() - started:.0f}s, load average at end "
        f"{os.getloadavg()[0]:.2f}; median of {a.repeat} run(s); "
        "ratio = pynatsd / nats-server\n# (higher is better for msgs/s and %, "
        "lower for latency, time and memory)\n"
    )
    print_table(rows, a.servers)
    if a.json:
        a.json.write_text(json.dumps({**info, "rows": [asdict(r) for r in rows]}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
