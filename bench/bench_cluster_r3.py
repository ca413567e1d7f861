#!/usr/bin/env python3
"""Replicated (R3) streams on a 3-node cluster: nats-server side by side with pynatsd.

Each scenario runs first on a 3-node nats-server cluster, then on a 3-node pynatsd cluster
(tests/support/cluster.py's ProcessCluster: loopback, a full mesh of routes, each node's store
directory in a temporary directory), every cluster started fresh:

- ``publish``: acked publishes to an R3 file stream, 16 B and 1 KiB payloads, --window (1000)
  in flight, one connection on the stream leader's node, each PUB with a reply inbox of its
  own (``_R.a.<n>``, as a client library makes them); the PubAcks that come back are counted.
  Bounded by --msgs (20,000) and --seconds (20). Messages per second, and the CPU time per
  message of the leader and of the three nodes together (/proc/<pid>/stat).
- ``failover``: acked publishes at a steady --rate (100/s) through a follower's node, the
  stream leader SIGKILLed after --warmup seconds; the time from the kill to the first PubAck
  received for a publish sent after it, and to the first stream info that names another
  leader (polled every 50 ms through the same node). --trials (3) clusters per server;
  min/median/max. Each trial also prints how the publishes after the kill were answered:
  503 no responders (nobody leads), errors, never (publishing goes on --settle s after both
  times are in), the send time of the last 503 and of the first publish acked, and the kill's
  UTC time to read the logs by (--logs DIR keeps every node's log).
- ``catchup``: a follower SIGKILLed, --catchup-msgs (20,000) 1 KiB messages published (acked,
  1000 in flight) while it is down, the follower restarted; the time from starting its process
  until the leader's stream info reports its replica current with no lag (polled every 50 ms),
  and until the node's own /jsz shows every message; messages caught up per second.

Servers and their sync settings (each row of the output says which):

- ``nats-server``: its default (``sync_interval`` 2 min: a PubAck before any fsync);
- ``pynatsd``: its default, the stream's store fsyncs before the PubAck (group commit) on
  every replica, and the stream group's RAFT log (its WAL) fdatasyncs each append;
- ``pynatsd lazy`` (publish only; leave out with --no-lazy): ``jetstream { sync_interval:
  "1m" }``, the store's lazy policy as nats-server's default (a PubAck before the fsync, an
  fsync every minute). pynatsd takes only a value other than its default of 2 min as the lazy
  policy ("2m" spelled out keeps fsync-before-ack), hence 1 min. The RAFT log's fsync per
  append does not follow ``sync_interval``;
- ``nats-server always`` (publish only, with --always): ``sync_interval: always``.

The client is one raw-protocol asyncio connection (bench_js.py's RawClient) in this process;
its own CPU time over each publish run is printed (``client CPU``), so a run where the client
is the bottleneck shows. With --profile DIR the pynatsd stream leader and a follower are
sampled by py-spy during the publish runs and the catch-up (a separate run: the profilers take
CPU from the servers, and their attach delays the catch-up's polling) and summarised with
pyspy_top.py, once as sampled and once without the samples waiting in an fsync (py-spy counts
those as busy). A scenario that fails (a cluster that does not form, a failover that never
completes) is printed with the nodes' logs and recorded (``failures`` in the JSON), and the
run goes on.

    .venv/bin/python bench/bench_cluster_r3.py                     # a few minutes
    .venv/bin/python bench/bench_cluster_r3.py --only publish --msgs 20000 --seconds 20
    .venv/bin/python bench/bench_cluster_r3.py --only failover --trials 3
    .venv/bin/python bench/bench_cluster_r3.py --only publish --kinds pynatsd --profile /tmp/prof
    .venv/bin/python bench/bench_cluster_r3.py --src /tmp/head/src --json out.json

``--src`` runs pynatsd from another source tree (built in place), e.g. a clean export of a
commit, while the checkout is being edited.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))
# tests/support/ports.py hands each pytest-xdist worker its own slice of ports; take the last
# slice, so that a test suite running beside the benchmark (workers gw0, gw1) does not reuse a
# port of ours between our check and our bind.
os.environ.setdefault("PYTEST_XDIST_WORKER", "gw7")
sys.path.insert(0, str(REPO / "bench"))

from bench_js import RawClient, connect  # noqa: E402
from pyspy_top import parse, summarise  # noqa: E402
from support.cluster import GO, PY, ClusterError, ProcessCluster  # noqa: E402
from support.processes import ServerStartError  # noqa: E402

NATS = "nats-server"
NATS_ALWAYS = "nats-server always"
PYNATSD = "pynatsd"
PYNATSD_LAZY = "pynatsd lazy"
LAZY_INTERVAL = "1m"

# kind -> (node kind, extra lines in the jetstream block, the sync setting in words)
KINDS: dict[str, tuple[str, str, str]] = {
    NATS: (GO, "", "default: ack before fsync, fsync every 2 min"),
    NATS_ALWAYS: (GO, "sync_interval: always", "sync_interval: always"),
    PYNATSD: (PY, "", "default: store fsync before ack on each replica, RAFT WAL fsync"),
    PYNATSD_LAZY: (
        PY,
        f'sync_interval: "{LAZY_INTERVAL}"',
        f"sync_interval {LAZY_INTERVAL}: store acks before fsync; RAFT WAL still fsyncs",
    ),
}

pynatsd_src = ""  # --src
logs_dir: Path | None = None  # --logs


def cpu_times(pid: int) -> tuple[float, float]:
    """User and system CPU time of a process so far (all threads), from /proc/<pid>/stat."""
    stat = Path(f"/proc/{pid}/stat").read_text()
    fields = stat[stat.rindex(")") + 2 :].split()
    tick = os.sysconf("SC_CLK_TCK")
    return int(fields[11]) / tick, int(fields[12]) / tick


# -- the cluster ------------------------------------------------------------------------------


class Cluster(ProcessCluster):
    """ProcessCluster with pynatsd from --src when given."""

    def _env(self, node: Any) -> dict[str, str] | None:
        env = super()._env(node)
        if env is not None and pynatsd_src:
            env["PYTHONPATH"] = pynatsd_src
        return env

    def pid(self, index: int) -> int:
        process = self.nodes[index].process
        assert process is not None
        return int(process.proc.pid)

    def index_of(self, name: str) -> int:
        return next(n.index for n in self.nodes if n.name == name)

    def logs(self) -> str:
        return self.describe()


@contextmanager
def cluster_of(kind: str, work: Path, label: str) -> Iterator[Cluster]:
    """A fresh 3-node cluster of `kind`; with --logs its nodes' logs are kept, named by
    `label`."""
    node_kind, extra, _ = KINDS[kind]
    prefix = f"{label}-{kind.replace(' ', '-')}"
    directory = Path(tempfile.mkdtemp(prefix=prefix + "-", dir=work))
    stores = {
        i: f'jetstream {{\n  store_dir: "{directory / f"js{i}"}"\n  {extra}\n}}\n' for i in range(3)
    }
    cluster = Cluster([node_kind] * 3, directory, node_config=stores)
    try:
        cluster.start()  # a ClusterError leaves the nodes running: stopped below
        yield cluster
    finally:
        if logs_dir is not None:
            for node in cluster.nodes:
                (logs_dir / f"{prefix}-{node.name}.log").write_text(node.log_text())
        cluster.stop()
        shutil.rmtree(directory, ignore_errors=True)


class ScenarioError(RuntimeError):
    """A scenario did not complete; the message says what was seen, with the nodes' logs."""


# -- a client with requests and acks on one connection ------------------------------------------


class Client:
    """bench_js's RawClient with requests (by inbox) and a handler for everything else."""

    def __init__(self, raw: RawClient) -> None:
        self.raw = raw
        self.waiting: dict[bytes, asyncio.Future[tuple[bytes, bytes]]] = {}
        self.other: Callable[[bytes, bytes, bytes], None] = lambda s, h, d: None
        self.ids = itertools.count()
        raw.on_msg = self._on_msg

    def _on_msg(self, subject: bytes, reply: bytes, hdr: bytes, data: bytes) -> None:
        fut = self.waiting.pop(subject, None)
        if fut is not None:
            if not fut.done():
                fut.set_result((hdr, data))
            return
        self.other(subject, hdr, data)

    async def request(
        self, subject: str, body: dict[str, Any] | None = None, timeout: float = 2.0
    ) -> dict[str, Any] | None:
        """The JSON answer, or None on a timeout or no responders (503)."""
        inbox = b"_R.q.%d" % next(self.ids)
        fut: asyncio.Future[tuple[bytes, bytes]] = asyncio.get_running_loop().create_future()
        self.waiting[inbox] = fut
        payload = json.dumps(body).encode() if body is not None else b""
        self.raw.write(b"PUB %s %s %d\r\n%s\r\n" % (subject.encode(), inbox, len(payload), payload))
        try:
            hdr, data = await asyncio.wait_for(fut, timeout)
        except TimeoutError:
            self.waiting.pop(inbox, None)
            return None
        if hdr.startswith(b"NATS/1.0 503") or not data:
            return None
        answer: dict[str, Any] = json.loads(data)
        return answer

    def close(self) -> None:
        if self.raw.transport is not None:
            self.raw.transport.close()


async def client_on(port: int) -> Client:
    return Client(await connect(port))


async def create_stream(client: Client, name: str, subject: str, timeout: float = 60.0) -> None:
    """Create an R3 file stream, retried while the cluster is not ready (no meta leader yet)."""
    deadline = time.monotonic() + timeout
    last: object = None
    config = {"name": name, "subjects": [subject], "num_replicas": 3, "storage": "file"}
    while time.monotonic() < deadline:
        res = await client.request(f"$JS.API.STREAM.CREATE.{name}", config, timeout=5.0)
        if res is not None and "error" not in res:
            return
        last = res
        await asyncio.sleep(0.5)
    raise ScenarioError(f"stream {name} not created within {timeout}s: last answer {last}")


async def stream_cluster(client: Client, name: str, timeout: float = 0.5) -> dict[str, Any] | None:
    """The `cluster` block of stream info, or None (no answer, no leader)."""
    res = await client.request(f"$JS.API.STREAM.INFO.{name}", timeout=timeout)
    if res is None or "error" in res:
        return None
    cluster = res.get("cluster")
    return cluster if isinstance(cluster, dict) else None


async def wait_all_current(client: Client, name: str, timeout: float = 60.0) -> str:
    """Wait until the stream has a leader and both replicas current; the leader's name."""
    deadline = time.monotonic() + timeout
    seen: object = None
    while time.monotonic() < deadline:
        info = await stream_cluster(client, name)
        seen = info
        if info and info.get("leader"):
            replicas = info.get("replicas") or []
            if len(replicas) == 2 and all(r.get("current") for r in replicas):
                return str(info["leader"])
        await asyncio.sleep(0.1)
    raise ScenarioError(f"stream {name}: no leader with 2 current replicas in {timeout}s: {seen}")


def jsz_messages(http_port: int, stream: str) -> int:
    """The messages a node's own store holds for `stream` (/jsz), -1 when it cannot say."""
    url = f"http://127.0.0.1:{http_port}/jsz?accounts=true&streams=true"
    try:
        with urllib.request.urlopen(url, timeout=1.0) as r:
            data = json.loads(r.read())
    except (OSError, ValueError):
        return -1
    for account in data.get("account_details") or []:
        for detail in account.get("stream_detail") or []:
            if detail.get("name") == stream:
                return int((detail.get("state") or {}).get("messages", 0))
    return -1


# -- publishing with acks -----------------------------------------------------------------------


@dataclass
class PublishResult:
    acked: int = 0
    errors: int = 0
    first_error: str = ""
    elapsed: float = 0.0
    client_cpu: float = 0.0

    @property
    def rate(self) -> float:
        return self.acked / self.elapsed if self.elapsed else 0.0


async def publish_acked(
    client: Client, subject: bytes, size: int, window: int, count: int, seconds: float
) -> PublishResult:
    """Publish up to `count` messages within `seconds` (then wait for what is in flight, at
    most 30 s more), each with its own reply inbox, at most `window` unacked."""
    out = PublishResult()
    payload = os.urandom(size)
    inflight = 0
    sent = 0
    wake = asyncio.Event()
    last_ack = time.perf_counter()

    def on_ack(subj: bytes, hdr: bytes, data: bytes) -> None:
        nonlocal inflight, last_ack
        if not subj.startswith(b"_R.a."):
            return
        inflight -= 1
        if data[:10] == b'{"stream":' and b'"error"' not in data:
            out.acked += 1
        else:
            out.errors += 1
            if not out.first_error:
                out.first_error = (hdr or data).decode(errors="replace")[:300]
        last_ack = time.perf_counter()
        if inflight <= window // 2 or inflight == 0:
            wake.set()

    client.other = on_ack
    head = b"PUB %s _R.a." % subject
    tail = b" %d\r\n%s\r\n" % (size, payload)
    cpu0 = time.process_time()
    start = time.perf_counter()
    deadline = start + seconds
    while sent < count and time.perf_counter() < deadline:
        room = min(window - inflight, count - sent)
        if room > 0:
            client.raw.write(b"".join([head + b"%d" % (sent + k) + tail for k in range(room)]))
            sent += room
            inflight += room
        wake.clear()
        try:
            await asyncio.wait_for(wake.wait(), max(0.01, deadline - time.perf_counter()))
        except TimeoutError:
            break
    drain = time.perf_counter() + 30
    while inflight > 0 and time.perf_counter() < drain:
        wake.clear()
        try:
            await asyncio.wait_for(wake.wait(), 1.0)
        except TimeoutError:
            continue
    out.elapsed = last_ack - start
    out.client_cpu = time.process_time() - cpu0
    client.other = lambda s, h, d: None
    if inflight > 0:
        out.first_error = out.first_error or f"{inflight} publishes never answered"
    return out


# -- scenarios ----------------------------------------------------------------------------------


@dataclass
class PublishRun:
    kind: str
    size: int
    rate: float
    acked: int
    errors: int
    seconds: float
    leader_cpu_us: float
    leader_sys_share: float  # of the leader's CPU time, the part in the kernel
    cluster_cpu_us: float
    client_cpu_share: float  # the client's CPU time / the run's wall time
    first_error: str = ""


# Innermost frames of a thread waiting in an fsync: the RAFT log's on the event loop, the
# stream store's in its worker thread (and that thread waiting for work).
FSYNC_WAITS = ("FileLog.sync ", "FileStore._fsync ", "_worker (concurrent/futures/thread.py")


class Profiler:
    """py-spy record on one process (raw format) until stopped."""

    def __init__(self, pid: int, out: Path) -> None:
        pyspy = shutil.which("py-spy", path=f"{Path(sys.executable).parent}:{os.environ['PATH']}")
        if pyspy is None:
            raise SystemExit("py-spy not found: pip install py-spy into the venv")
        argv = [pyspy, "record", "--pid", str(pid), "--format", "raw", "--rate", "250"]
        argv += ["--nonblocking", "-o", str(out)]
        self.out = out
        self.proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(1.0)  # py-spy needs a moment to attach

    def report(self, title: str, top: int) -> None:
        """pyspy_top's summary, then the same without the samples waiting in an fsync (py-spy
        counts a thread in fsync as active): what is left is where the CPU goes."""
        stacks = parse(self.out)
        text = summarise(stacks, top)
        print(f"\n  py-spy of {title}:\n    " + text.replace("\n", "\n    "), flush=True)
        cpu = [(frames, n) for frames, n in stacks if not frames[-1].startswith(FSYNC_WAITS)]
        text = summarise(cpu, top)
        print(
            f"\n  py-spy of {title}, without the fsync waits:\n    " + text.replace("\n", "\n    "),
            flush=True,
        )

    def stop(self) -> None:
        self.proc.send_signal(signal.SIGINT)  # py-spy writes its output and exits
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def run_publish(kind: str, work: Path, args: argparse.Namespace) -> list[PublishRun]:
    sizes = [int(x) for x in args.sizes.split(",")]
    runs: list[PublishRun] = []
    with cluster_of(kind, work, "publish") as cluster:

        async def go() -> None:
            first = await client_on(cluster.nodes[0].port)
            names = {size: f"P{size}" for size in sizes}
            for name in names.values():
                await create_stream(first, name, name.lower())
            leaders = {size: await wait_all_current(first, name) for size, name in names.items()}
            first.close()
            for size, name in names.items():
                leader = cluster.index_of(leaders[size])
                client = await client_on(cluster.nodes[leader].port)
                pids = [cluster.pid(i) for i in range(3)]
                profilers: list[tuple[str, Profiler]] = []
                if args.profile and cluster.nodes[leader].kind == PY:
                    follower = next(i for i in range(3) if i != leader)
                    for role, i in (("leader", leader), ("follower", follower)):
                        stem = f"{kind.replace(' ', '-')}-publish-{size}-{role}"
                        profiler = Profiler(pids[i], args.profile / f"{stem}.txt")
                        profilers.append((f"{role} ({cluster.nodes[i].name})", profiler))
                before = [cpu_times(p) for p in pids]
                res = await publish_acked(
                    client, name.lower().encode(), size, args.window, args.msgs, args.seconds
                )
                after = [cpu_times(p) for p in pids]
                used = [sum(a) - sum(b) for a, b in zip(after, before, strict=True)]
                leader_sys = after[leader][1] - before[leader][1]
                for role, profiler in profilers:
                    profiler.stop()
                    profiler.report(f"the {kind} {role}, publish {size} B", args.profile_top)
                client.close()
                acked = max(res.acked, 1)
                run = PublishRun(
                    kind,
                    size,
                    res.rate,
                    res.acked,
                    res.errors,
                    res.elapsed,
                    used[leader] / acked * 1e6,
                    leader_sys / used[leader] if used[leader] else 0.0,
                    sum(used) / acked * 1e6,
                    res.client_cpu / res.elapsed if res.elapsed else 0.0,
                    res.first_error,
                )
                runs.append(run)
                print(
                    f"  publish {size:>5} B  {kind:20} {run.rate:>10,.0f} msgs/s  "
                    f"({run.acked:,} acked in {run.seconds:.1f} s, {run.errors} errors)  "
                    f"leader {run.leader_cpu_us:.1f} us CPU/msg "
                    f"({run.leader_sys_share:.0%} system), 3 nodes "
                    f"{run.cluster_cpu_us:.1f}; client CPU {run.client_cpu_share:.0%}",
                    flush=True,
                )
                if run.first_error:
                    print(f"    first error: {run.first_error}", flush=True)

        asyncio.run(go())
    return runs


@dataclass
class FailoverRun:
    kind: str
    to_ack: float | None  # seconds from the kill to the first PubAck of a publish sent after it
    to_info: float | None  # seconds from the kill to a stream info naming another leader
    old_leader: str = ""
    new_leader: str = ""
    no_responders: int = 0  # publishes after the kill answered 503
    errors: int = 0  # publishes after the kill answered with an error
    unanswered: int = 0  # publishes after the kill never answered (within --settle s)
    unanswered_at: list[float] = field(default_factory=list)  # their send times after the kill
    last_503_at: float | None = None  # the send time of the last publish answered 503
    first_acked_sent_at: float | None = None  # the send time of the first publish acked
    kill_wall: str = ""  # when the kill was sent, UTC, to read the logs by
    note: str = ""


def run_failover(kind: str, work: Path, args: argparse.Namespace, trial: int) -> FailoverRun:
    with cluster_of(kind, work, f"failover{trial + 1}") as cluster:

        async def go() -> FailoverRun:
            setup = await client_on(cluster.nodes[0].port)
            await create_stream(setup, "F", "f")
            leader_name = await wait_all_current(setup, "F")
            setup.close()
            leader = cluster.index_of(leader_name)
            via = next(i for i in range(3) if i != leader)
            client = await client_on(cluster.nodes[via].port)
            result = FailoverRun(kind, None, None, old_leader=leader_name)
            sent_at: dict[bytes, float] = {}
            kill_at = 0.0
            acked_before = 0

            def on_ack(subj: bytes, hdr: bytes, data: bytes) -> None:
                nonlocal acked_before
                at = sent_at.pop(subj, None)
                if at is None:
                    return
                ok = data[:10] == b'{"stream":' and b'"error"' not in data
                if not kill_at or at < kill_at:
                    acked_before += ok
                    return
                if ok:
                    if result.to_ack is None:
                        result.to_ack = time.perf_counter() - kill_at
                    first = result.first_acked_sent_at
                    result.first_acked_sent_at = min(first or at - kill_at, at - kill_at)
                elif hdr.startswith(b"NATS/1.0 503"):
                    result.no_responders += 1
                    result.last_503_at = max(result.last_503_at or 0.0, at - kill_at)
                else:
                    result.errors += 1
                    if not result.note:
                        result.note = (hdr or data).decode(errors="replace")[:300]

            client.other = on_ack
            payload = b"x" * 16
            interval = 1.0 / args.rate
            ids = itertools.count()

            async def publisher() -> None:
                next_at = time.perf_counter()
                while True:
                    inbox = b"_R.a.%d" % next(ids)
                    sent_at[inbox] = time.perf_counter()
                    client.raw.write(b"PUB f %s 16\r\n%s\r\n" % (inbox, payload))
                    next_at += interval
                    await asyncio.sleep(max(0.0, next_at - time.perf_counter()))

            task = asyncio.create_task(publisher())
            try:
                await asyncio.sleep(args.warmup)
                if acked_before == 0:
                    raise ScenarioError(f"{kind}: no publish acked before the kill")
                kill_at = time.perf_counter()
                result.kill_wall = (
                    time.strftime("%H:%M:%S", time.gmtime()) + (f"{time.time() % 1:.6f}"[1:])
                )
                cluster.kill(leader)
                deadline = kill_at + args.failover_timeout
                while time.perf_counter() < deadline and (
                    result.to_ack is None or result.to_info is None
                ):
                    if result.to_info is None:
                        info = await stream_cluster(client, "F", timeout=0.25)
                        new = (info or {}).get("leader")
                        if new and new != leader_name:
                            result.to_info = time.perf_counter() - kill_at
                            result.new_leader = str(new)
                    await asyncio.sleep(0.05)
                # Go on publishing a while: what was sent before the end got its answer or
                # never will.
                await asyncio.sleep(args.settle)
            finally:
                task.cancel()
            # Publishes sent after the kill (up to `settle` s before the end) never answered.
            cutoff = time.perf_counter() - args.settle
            lost = sorted(at - kill_at for at in sent_at.values() if kill_at <= at < cutoff)
            result.unanswered = len(lost)
            result.unanswered_at = [round(x, 3) for x in lost]
            client.close()
            return result

        result = asyncio.run(go())
        if result.to_ack is None or result.to_info is None:
            missing = "no PubAck" if result.to_ack is None else "no stream info with a new leader"
            result.note = (
                f"{missing} within {args.failover_timeout}s of the kill; "
                f"{result.no_responders} no-responders, {result.errors} errors; logs:"
                + cluster.logs()
            )
    fmt = "{:.2f} s".format
    print(
        f"  failover #{trial + 1} {kind:20} first ack "
        f"{fmt(result.to_ack) if result.to_ack is not None else 'NONE'}, new leader in info "
        f"{fmt(result.to_info) if result.to_info is not None else 'NONE'} "
        f"({result.old_leader} -> {result.new_leader or '?'}; {result.no_responders} "
        f"no-responders, {result.errors} errors, {result.unanswered} unanswered)",
        flush=True,
    )

    def at(x: float | None) -> str:
        return "-" if x is None else f"{x:.2f} s"

    print(
        f"    killed at {result.kill_wall} UTC; last 503 for a publish sent at "
        f"{at(result.last_503_at)}, first acked publish sent at {at(result.first_acked_sent_at)}",
        flush=True,
    )
    if result.unanswered_at:
        print(f"    unanswered, sent at (s after the kill): {result.unanswered_at}", flush=True)
    if result.note:
        print("    " + result.note[:6000].replace("\n", "\n    "), flush=True)
    return result


@dataclass
class CatchupRun:
    kind: str
    msgs: int
    to_current: float | None  # from the restart to the replica current with no lag
    to_stored: float | None  # from the restart to the node's own /jsz showing every message
    started: float = 0.0  # from the restart until the process greets a client
    publish_rate: float = 0.0  # the R3 publish with one replica down, msgs/s
    note: str = ""

    @property
    def rate(self) -> float | None:
        return self.msgs / self.to_current if self.to_current else None


def run_catchup(kind: str, work: Path, args: argparse.Namespace) -> CatchupRun:
    with cluster_of(kind, work, "catchup") as cluster:

        async def go() -> CatchupRun:
            setup = await client_on(cluster.nodes[0].port)
            await create_stream(setup, "C", "c")
            leader_name = await wait_all_current(setup, "C")
            setup.close()
            leader = cluster.index_of(leader_name)
            follower = next(i for i in range(3) if i != leader)
            name = cluster.nodes[follower].name
            client = await client_on(cluster.nodes[leader].port)
            cluster.kill(follower)
            pub = await publish_acked(client, b"c", 1024, 1000, args.catchup_msgs, 120.0)
            if pub.acked != args.catchup_msgs:
                raise ScenarioError(
                    f"{kind}: {pub.acked} of {args.catchup_msgs} acked with a follower down "
                    f"({pub.errors} errors, {pub.first_error})"
                )
            result = CatchupRun(kind, pub.acked, None, None, publish_rate=pub.rate)
            t0 = time.perf_counter()
            cluster.restart(follower, wait=False)
            result.started = time.perf_counter() - t0
            profilers: list[tuple[str, Profiler]] = []
            if args.profile and cluster.nodes[follower].kind == PY:
                # Measured times include py-spy's attach (1 s each): a run for the profile only.
                for role, i in (("follower", follower), ("leader", leader)):
                    out = args.profile / f"{kind.replace(' ', '-')}-catchup-{role}.txt"
                    profilers.append((role, Profiler(cluster.pid(i), out)))
            http_port = cluster.nodes[follower].http_port
            deadline = t0 + args.catchup_timeout
            last: object = None
            while time.perf_counter() < deadline and (
                result.to_current is None or result.to_stored is None
            ):
                if result.to_current is None:
                    info = await stream_cluster(client, "C", timeout=0.5)
                    replica = next(
                        (r for r in (info or {}).get("replicas") or [] if r.get("name") == name),
                        None,
                    )
                    last = replica
                    if replica and replica.get("current") and not replica.get("lag"):
                        result.to_current = time.perf_counter() - t0
                if result.to_stored is None:
                    stored = await asyncio.to_thread(jsz_messages, http_port, "C")
                    if stored >= pub.acked:
                        result.to_stored = time.perf_counter() - t0
                await asyncio.sleep(0.05)
            for role, profiler in profilers:
                profiler.stop()
                profiler.report(f"the {kind} {role} during the catch-up", args.profile_top)
            if result.to_current is None or result.to_stored is None:
                stored = jsz_messages(http_port, "C")
                result.note = (
                    f"within {args.catchup_timeout}s: replica {last}, node's /jsz {stored} of "
                    f"{pub.acked} messages; logs:" + cluster.logs()
                )
            client.close()
            return result

        result = asyncio.run(go())

    def fmt(x: float | None) -> str:
        return "NONE" if x is None else f"{x:.2f} s"

    rate = f"{result.rate:,.0f} msgs/s" if result.rate else "-"
    print(
        f"  catch-up {kind:20} {result.msgs:,} x 1 KiB: replica current {fmt(result.to_current)}"
        f" ({rate}), all stored per /jsz {fmt(result.to_stored)}, process up "
        f"{result.started:.2f} s; publish with a follower down {result.publish_rate:,.0f} msgs/s",
        flush=True,
    )
    if result.note:
        print("    " + result.note[:6000].replace("\n", "\n    "), flush=True)
    return result


# -- driver -------------------------------------------------------------------------------------


@dataclass
class Results:
    meta: dict[str, Any] = field(default_factory=dict)
    publish: list[PublishRun] = field(default_factory=list)
    failover: list[FailoverRun] = field(default_factory=list)
    catchup: list[CatchupRun] = field(default_factory=list)
    failures: list[dict[str, str]] = field(default_factory=list)

    def attempt(self, scenario: str, kind: str, run: Callable[[], None]) -> None:
        """Run one scenario; a cluster that does not form or a scenario that does not
        complete is printed (with the nodes' logs) and recorded, and the run goes on."""
        try:
            run()
        except (ScenarioError, ClusterError, ServerStartError) as e:
            text = str(e)
            print(f"  {scenario} {kind}: FAILED: {text[:8000]}", flush=True)
            self.failures.append({"scenario": scenario, "kind": kind, "error": text[:8000]})


def spread(values: list[float]) -> str:
    if not values:
        return "-"
    return (
        f"{min(values):.2f} / {statistics.median(values):.2f} / {max(values):.2f} s ({len(values)})"
    )


def print_tables(res: Results, kinds: list[str]) -> None:
    if res.publish:
        print(f"\nR3 acked publish (window {res.meta['args']['window']}):\n")
        print(
            "| payload | server (sync) | msgs/s | / nats-server | leader CPU µs/msg (system) "
            "| 3 nodes CPU µs/msg | client CPU |"
        )
        print("|---|---|---|---|---|---|---|")
        for run in res.publish:
            ref = next((r for r in res.publish if r.kind == NATS and r.size == run.size), None)
            ratio = "-"
            if ref and ref.rate:
                r = run.rate / ref.rate
                ratio = f"{r:.3f}x" if r < 0.1 else f"{r:.2f}x"
            label = f"{run.kind} ({KINDS[run.kind][2]})"
            print(
                f"| {run.size} B | {label} | {run.rate:,.0f} | {ratio} | "
                f"{run.leader_cpu_us:.1f} ({run.leader_sys_share:.0%}) | "
                f"{run.cluster_cpu_us:.1f} | "
                f"{run.client_cpu_share:.0%} |"
            )
    if res.failover:
        print("\nFailover (min / median / max, trials):\n")
        print("| server | kill → first PubAck | kill → stream info with a new leader |")
        print("|---|---|---|")
        for kind in kinds:
            runs = [r for r in res.failover if r.kind == kind]
            if not runs:
                continue
            acks = [r.to_ack for r in runs if r.to_ack is not None]
            infos = [r.to_info for r in runs if r.to_info is not None]
            failed = len(runs) - min(len(acks), len(infos))
            note = f" ({failed} of {len(runs)} did not complete)" if failed else ""
            print(f"| {kind}{note} | {spread(acks)} | {spread(infos)} |")
    if res.catchup:
        print("\nCatch-up of a restarted follower:\n")
        print(
            "| server | messages | restart → replica current, lag 0 | msgs/s caught up "
            "| restart → all in the node's /jsz |"
        )
        print("|---|---|---|---|---|")
        for c in res.catchup:
            cur = f"{c.to_current:.2f} s" if c.to_current is not None else "never"
            rate = f"{c.rate:,.0f}" if c.rate else "-"
            stored = f"{c.to_stored:.2f} s" if c.to_stored is not None else "never"
            print(f"| {c.kind} | {c.msgs:,} x 1 KiB | {cur} | {rate} | {stored} |")


def publish_into(res: Results, kind: str, work: Path, args: argparse.Namespace) -> None:
    res.publish.extend(run_publish(kind, work, args))


def failover_into(
    res: Results, kind: str, work: Path, args: argparse.Namespace, trial: int
) -> None:
    res.failover.append(run_failover(kind, work, args, trial))


def catchup_into(res: Results, kind: str, work: Path, args: argparse.Namespace) -> None:
    res.catchup.append(run_catchup(kind, work, args))


def git_head() -> str:
    try:
        out = subprocess.run(
            ["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            check=True,
        )
        return out.stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return ""


def hot_path() -> str:
    env = {**os.environ, "PYTHONPATH": pynatsd_src or str(REPO / "src")}
    out = subprocess.run(
        [sys.executable, "-m", "pynatsd", "--version"], capture_output=True, text=True, env=env
    )
    return out.stdout.strip().splitlines()[-1] if out.stdout.strip() else out.stderr.strip()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--only", choices=["publish", "failover", "catchup"], action="append")
    ap.add_argument("--kinds", default=f"{NATS},{PYNATSD}", help="comma-separated, in order")
    ap.add_argument("--no-lazy", action="store_true", help=f"leave out {PYNATSD_LAZY!r}")
    ap.add_argument("--always", action="store_true", help=f"also {NATS_ALWAYS!r} (publish)")
    ap.add_argument("--sizes", default="16,1024", help="publish payload sizes")
    ap.add_argument("--window", type=int, default=1000, help="publishes in flight")
    ap.add_argument("--msgs", type=int, default=20_000, help="publish: at most this many")
    ap.add_argument("--seconds", type=float, default=20.0, help="publish: at most this long")
    ap.add_argument("--trials", type=int, default=3, help="failover clusters per server")
    ap.add_argument("--rate", type=float, default=100.0, help="failover: publishes per second")
    ap.add_argument("--warmup", type=float, default=2.0, help="failover: seconds before the kill")
    ap.add_argument("--failover-timeout", type=float, default=60.0)
    ap.add_argument(
        "--settle", type=float, default=2.0, help="failover: publish on this long after both"
    )
    ap.add_argument("--catchup-msgs", type=int, default=20_000)
    ap.add_argument("--catchup-timeout", type=float, default=120.0)
    ap.add_argument("--src", default="", help="run pynatsd from this src/ tree")
    ap.add_argument("--src-commit", default="", help="what --src is (recorded in the JSON)")
    ap.add_argument(
        "--profile",
        type=Path,
        help="directory: py-spy of a pynatsd leader and follower (publish, catchup)",
    )
    ap.add_argument("--profile-top", type=int, default=15)
    ap.add_argument("--logs", type=Path, help="directory: keep every node's log")
    ap.add_argument("--json", help="write the results here too")
    args = ap.parse_args()
    global pynatsd_src, logs_dir
    pynatsd_src = str(Path(args.src).resolve()) if args.src else ""
    if args.logs:
        logs_dir = args.logs
        logs_dir.mkdir(parents=True, exist_ok=True)
    only = args.only or ["publish", "failover", "catchup"]
    base = [k.strip() for k in args.kinds.split(",") if k.strip()]
    for k in base:
        if k not in KINDS:
            ap.error(f"unknown kind {k!r}: one of {', '.join(KINDS)}")
    publish_kinds = list(base)
    if args.always and NATS_ALWAYS not in publish_kinds:
        publish_kinds.insert(
            publish_kinds.index(NATS) + 1 if NATS in publish_kinds else 0, NATS_ALWAYS
        )
    if PYNATSD in base and not args.no_lazy and PYNATSD_LAZY not in publish_kinds:
        publish_kinds.append(PYNATSD_LAZY)
    if args.profile:
        args.profile.mkdir(parents=True, exist_ok=True)
    res = Results()
    res.meta = {
        "when": time.strftime("%Y-%m-%d %H:%M:%S"),
        "checkout_commit": git_head(),
        "pynatsd_src": pynatsd_src or str(REPO / "src"),
        "pynatsd_src_commit": args.src_commit or ("" if pynatsd_src else git_head()),
        "hot_path": hot_path(),
        "loadavg_start": os.getloadavg(),
        "args": {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()},
        "sync": {k: KINDS[k][2] for k in publish_kinds},
    }
    print(
        f"pynatsd from {res.meta['pynatsd_src']} ({res.meta['hot_path']}); "
        f"load average {os.getloadavg()[0]:.2f}",
        flush=True,
    )
    with tempfile.TemporaryDirectory(prefix="bench-r3-") as tmp:
        work = Path(tmp)
        if "publish" in only:
            for kind in publish_kinds:
                res.attempt("publish", kind, partial(publish_into, res, kind, work, args))
        if "failover" in only:
            for kind in base:
                for trial in range(args.trials):
                    res.attempt(
                        f"failover #{trial + 1}",
                        kind,
                        partial(failover_into, res, kind, work, args, trial),
                    )
        if "catchup" in only:
            for kind in base:
                res.attempt("catch-up", kind, partial(catchup_into, res, kind, work, args))
    res.meta["loadavg_end"] = os.getloadavg()
    print_tables(res, base)
    if res.failures:
        print("\nFailed: " + ", ".join(f"{f['scenario']} ({f['kind']})" for f in res.failures))
    if args.json:
        Path(args.json).write_text(
            json.dumps(
                {
                    "meta": res.meta,
                    "publish": [vars(r) for r in res.publish],
                    "failover": [{**vars(r), "note": r.note[:2000]} for r in res.failover],
                    "catchup": [
                        {**vars(r), "note": r.note[:2000], "rate": r.rate} for r in res.catchup
                    ],
                    "failures": res.failures,
                },
                indent=1,
            )
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
