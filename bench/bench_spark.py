"""Benchmark of the `nats` Spark data source, side by side on nats-server -js and pynatsd -js.

    python bench/bench_spark.py                       # 1M 100-byte messages, both servers
    python bench/bench_spark.py --master 'local[2]' --repeat 3   # medians of interleaved runs
    python bench/bench_spark.py --count 100000        # a quick run
    python bench/bench_spark.py --servers nats-server --profile /tmp/spark-prof --json out.json

For each server (pynatsd is skipped, with a note, while it does not serve JetStream):
  fill        COUNT messages of SIZE bytes published with acks (the data source's own client)
  client      the same stream read by one process with the client alone (no Spark)
  batch       spark.read.format("nats") -> Parquet, local[2]                      (target 300k/s)
  stream      readStream ... trigger(availableNow) -> Parquet with a checkpoint
  noop        the batch read into Spark's `noop` sink: the read path without Parquet  (300k/s)
  write       COUNT rows -> JetStream with acks and Nats-Msg-Id, local[2]
  write core  COUNT rows -> a core subject (publishMode=core), every delivered message counted
              by a raw-socket subscriber in its own process (loss reported)  (target 300k/s)
  pushdown    `subject = 'R.7'` (1% of the stream) with filter pushdown: rows, and messages the
              server sent meanwhile (/varz out_msgs)
Each master of `--master` (default `local[2],standalone`) runs every phase; `standalone` is a
master and two workers of 1 core / 1 GiB on loopback (tests/support/spark_standalone.py), the
package shipped to the executors as a zip, as docs/spark.md describes.
Each Spark phase also reports the CPU per message of the server, of Spark's JVM and of the Python
side (the driver and Spark's Python workers, where the data source runs), read from /proc, and the
rate the machine's CPUs would give to that work alone (the core subscriber is not counted): on a
shared machine the wall-clock rates swing with the load, the CPU per message much less.
Spark phases are timed after session start-up, after a warm-up of the JVM's Parquet path (a
synthetic Parquet write of COUNT rows, so that no server's column carries the JIT's warm-up) and
after a warm-up per server (a 100k-message stream read to Parquet and to noop, small writes: the
first query of a Python data source in a session starts its Python workers); these costs are
printed too. `--repeat N` runs the servers N times, alternating
which goes first, and reports the median of each phase and of the per-pair ratios.
`--profile DIR` attaches py-spy to Spark's Python workers during the batch and write phases and
summarises the stacks with bench/pyspy_top.py.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
VENV_BIN = Path(sys.executable).parent

from pynatsd.spark import client  # noqa: E402
from pynatsd.spark.options import ConnectOptions, parse_read_options, parse_servers  # noqa: E402
from pynatsd.spark.reader import CHUNK_ROWS  # noqa: E402
from pynatsd.spark.schema import arrow_schema, chunk_to_batch, stream_schema  # noqa: E402
from pynatsd.spark.wire import Connection, new_inbox  # noqa: E402

# The data source's default pull size, which the client-alone read uses too.
FETCH_BATCH = parse_read_options({"servers": "nats://h:1", "stream": "S"}, "batch").fetch_batch_size  # type: ignore[union-attr]
SPARK_TARGETS = {"batch": 300_000, "noop": 300_000, "write_core": 300_000}  # issues 16, 18


# --- servers -----------------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def connect_options(url: str) -> ConnectOptions:
    return ConnectOptions(servers=parse_servers(url), request_timeout=30.0)


def _jetstream_ready(url: str) -> bool:
    try:
        with Connection.open(connect_options(url)) as conn:
            conn.request("$JS.API.INFO", b"", timeout=1.0)
            return True
    except Exception:
        return False


MONITOR: dict[str, int] = {}  # server URL -> its monitoring port
SERVER_PID: dict[str, int] = {}  # server URL -> its process
# Messages of the warm-up stream: enough for the JIT to compile the JVM's read path.
WARM_COUNT = 100_000
SUBSCRIBER_PID: set[int] = set()  # the core subscriber: not part of the Python side's CPU


def out_msgs(url: str) -> int:
    """Messages the server has sent to clients (`/varz` out_msgs)."""
    with urllib.request.urlopen(f"http://127.0.0.1:{MONITOR[url]}/varz", timeout=5) as r:
        return int(json.load(r)["out_msgs"])


@contextmanager
def server(kind: str) -> Iterator[str | None]:
    """A server with JetStream on a free loopback port; None if it cannot serve JetStream."""
    store = tempfile.mkdtemp(prefix=f"bench-spark-{kind}-")
    port = free_port()
    http_port = free_port()
    if kind == "pynatsd":
        argv = [sys.executable, "-m", "pynatsd", "-js", "-sd", store]
    else:
        binary = VENV_BIN / "nats-server"
        argv = [str(binary) if binary.exists() else "nats-server", "-js", "-sd", store]
    proc = subprocess.Popen(
        [*argv, "-p", str(port), "-a", "127.0.0.1", "-m", str(http_port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"nats://127.0.0.1:{port}"
    MONITOR[url] = http_port
    SERVER_PID[url] = proc.pid
    try:
        deadline = time.monotonic() + 15
        ready = False
        while time.monotonic() < deadline and proc.poll() is None:
            if _jetstream_ready(url):
                ready = True
                break
            time.sleep(0.1)
        yield url if ready else None
    finally:
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(10)
        shutil.rmtree(store, ignore_errors=True)


# --- phases without Spark ----------------------------------------------------------------------


def create_stream(url: str, name: str, subjects: list[str]) -> None:
    with Connection.open(connect_options(url)) as conn:
        body = {"name": name, "subjects": subjects, "storage": "file", "num_replicas": 1}
        client.api(conn, f"STREAM.CREATE.{name}", body, f"creating stream {name}")


def fill(url: str, stream: str, count: int, size: int) -> float:
    """Publish `count` messages with acks; returns the rate."""
    payload = b"x" * size
    with Connection.open(connect_options(url)) as conn:
        # 100 subjects: one of them is the 1% a pushed-down filter reads.
        messages = ((f"{stream}.{i % 100}".encode(), b"", payload) for i in range(count))
        reply = new_inbox().encode()
        started = time.perf_counter()
        client.publish_acked(conn, client.blocks_of(messages, reply), reply, window=4000)
        return count / (time.perf_counter() - started)


def client_read(url: str, stream: str, count: int) -> tuple[float, float]:
    """(messages/s reading with the client alone, share of that time spent building Arrow)."""
    schema = arrow_schema(stream_schema(False))
    arrow_seconds = 0.0
    rows = 0
    with Connection.open(connect_options(url)) as conn:
        started = time.perf_counter()
        for chunk in client.read_range(
            conn,
            stream,
            1,
            count + 1,
            (),
            batch_size=FETCH_BATCH,
            chunk_rows=CHUNK_ROWS,
            with_headers=False,
            fail_on_data_loss=True,
        ):
            t = time.perf_counter()
            rows += chunk_to_batch(chunk, stream, schema).num_rows
            arrow_seconds += time.perf_counter() - t
        elapsed = time.perf_counter() - started
    assert rows == count, (rows, count)
    return count / elapsed, arrow_seconds / elapsed


# --- Spark -------------------------------------------------------------------------------------


def spark_session(master: str, standalone: bool = False) -> Any:
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    builder = SparkSession.builder
    if standalone:
        builder = (
            builder.config("spark.cores.max", "2")
            .config("spark.executor.cores", "1")
            .config("spark.executor.memory", "512m")
            .config("spark.pyspark.python", sys.executable)
        )
    return (
        builder.master(master)
        .appName("bench_spark")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.driver.memory", "2g")
        .getOrCreate()
    )


def read_df(
    spark: Any, url: str, stream: str, partitions: int, batch: int | None, streaming: bool = False
) -> Any:
    source = spark.readStream if streaming else spark.read
    reader = (
        source.format("nats")
        .option("servers", url)
        .option("stream", stream)
        .option("minPartitions", str(partitions))
    )
    if batch is not None:
        reader = reader.option("fetchBatchSize", str(batch))
    return reader.load()


def timed(fn: Any) -> float:
    started = time.perf_counter()
    fn()
    return time.perf_counter() - started


_TICK = os.sysconf("SC_CLK_TCK")


def _process_cpu(pid: int) -> float:
    """CPU seconds of a live process and of its children it has reaped."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return sum(int(f) for f in fields[11:15]) / _TICK


def _is_jvm(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip() == "java"
    except OSError:
        return False


def cpu_split(url: str) -> tuple[float, float, float]:
    """CPU seconds of the server, of Spark's JVM, and of the Python side (this driver and
    Spark's Python workers). On a shared machine these, not wall-clock rates, say what the code
    costs: each process is charged only for the time it ran."""
    server_pid = SERVER_PID[url]
    server = _process_cpu(server_pid)
    jvm = python = 0.0
    todo = [os.getpid()]
    while todo:
        pid = todo.pop()
        if _is_jvm(pid):
            jvm += _process_cpu(pid)
        else:
            python += _process_cpu(pid)
        todo.extend(c for c in _children(pid) if c != server_pid and c not in SUBSCRIBER_PID)
    return server, jvm, python


def timed_cpu(result: dict[str, Any], key: str, url: str, count: int, fn: Any) -> float:
    """`timed`, and the CPU per message (us) of the server, Spark's JVM and the Python side
    into result[key + "_cpu"]."""
    before = cpu_split(url)
    seconds = timed(fn)
    after = cpu_split(url)
    result[key + "_cpu"] = [(b - a) / count * 1e6 for a, b in zip(before, after, strict=True)]
    return seconds


def batch_to_parquet(spark: Any, url: str, stream: str, out: str, args: Any) -> None:
    read_df(spark, url, stream, args.partitions, args.fetch_batch).write.mode("overwrite").parquet(
        out
    )


def stream_to_parquet(spark: Any, url: str, stream: str, out: str, args: Any) -> None:
    query = (
        read_df(spark, url, stream, args.partitions, args.fetch_batch, streaming=True)
        .writeStream.format("parquet")
        .option("path", out)
        .option("checkpointLocation", out + "_checkpoint")
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
    if query.exception() is not None:
        raise query.exception()


def batch_to_noop(spark: Any, url: str, stream: str, args: Any) -> None:
    read_df(spark, url, stream, args.partitions, args.fetch_batch).write.format("noop").mode(
        "overwrite"
    ).save()


def pushdown_read(spark: Any, url: str, stream: str, args: Any) -> tuple[int, int]:
    """`subject = '<stream>.7'` (1% of the stream) with filter pushdown on: (rows, messages
    the server sent meanwhile)."""
    spark.conf.set("spark.sql.python.filterPushdown.enabled", "true")
    try:
        df = read_df(spark, url, stream, args.partitions, args.fetch_batch)
        before = out_msgs(url)
        rows = df.where(f"subject = '{stream}.7'").count()
        return rows, out_msgs(url) - before
    finally:
        spark.conf.unset("spark.sql.python.filterPushdown.enabled")


def write_rows(spark: Any, url: str, stream: str, count: int, size: int, args: Any) -> None:
    # 100-byte payloads made in the JVM: the row number padded with 'x'.
    rows = spark.range(0, count, 1, args.partitions).selectExpr(
        f"concat('{stream}.', cast(id % 10 as string)) as subject",
        f"cast(lpad(cast(id as string), {size}, 'x') as binary) as data",
    )
    (
        rows.write.format("nats")
        .option("servers", url)
        .option("stream", stream)
        .mode("append")
        .save()
    )


def write_core_rows(spark: Any, url: str, subject: str, count: int, size: int, args: Any) -> None:
    """COUNT rows -> the core subject `subject` (no stream captures it): fire and forget."""
    rows = spark.range(0, count, 1, args.partitions).selectExpr(
        f"cast(lpad(cast(id as string), {size}, 'x') as binary) as data"
    )
    (
        rows.write.format("nats")
        .option("servers", url)
        .option("subject", subject)
        .option("publishMode", "core")
        .mode("append")
        .save()
    )


# --- the core subscriber (its own process: its CPU is neither Spark's nor the server's) --------


def count_core(url: str, subject: str, expected: int, idle: float) -> None:
    """Subscribe to `subject` on a raw socket, say `ready`, then count the MSG frames delivered
    until `expected` have come or none came for `idle` seconds; print the count and the
    monotonic time of the last one. Frames are counted by their `MSG ` prefix with C-speed
    `bytes.count` (the bench's payloads hold no such bytes), a frame split across two reads
    counted once; the server's PINGs are answered."""
    host, port = url.removeprefix("nats://").rsplit(":", 1)
    sock = socket.create_connection((host, int(port)))
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8 << 20)
    sock.recv(4096)  # INFO
    sock.sendall(b'CONNECT {"verbose":false,"pedantic":false}\r\nSUB ' + subject.encode())
    sock.sendall(b" 1\r\nPING\r\n")
    greeting = b""
    while b"PONG\r\n" not in greeting:
        greeting += sock.recv(4096)
    print("ready", flush=True)
    count, last, tail = 0, time.monotonic(), b""
    sock.settimeout(idle)
    while count < expected:
        try:
            chunk = sock.recv(1 << 20)
        except TimeoutError:
            break
        if not chunk:
            break
        last = time.monotonic()
        data = tail + chunk
        count += data.count(b"MSG ")
        if b"PING\r\n" in data:
            sock.sendall(b"PONG\r\n")
        # Keep the last 3 bytes: a `MSG ` cut by the read is found whole in the next one, and
        # one counted already is not counted again (3 bytes cannot hold all of it).
        tail = data[-3:]
    print(f"{count} {last:.6f}", flush=True)
    sock.close()


@contextmanager
def core_counter(url: str, subject: str, expected: int) -> Iterator[dict[str, float]]:
    """The subscriber process around a core write; fills in `delivered` and `last` (monotonic)."""
    proc = subprocess.Popen(
        [sys.executable, __file__, "--count-core", url, subject, str(expected)],
        stdout=subprocess.PIPE,
        text=True,
    )
    SUBSCRIBER_PID.add(proc.pid)
    out: dict[str, float] = {}
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == "ready", "the core subscriber did not start"
        yield out
        line = proc.stdout.readline().split()
        out["delivered"], out["last"] = int(line[0]), float(line[1])
        proc.wait(10)
    finally:
        SUBSCRIBER_PID.discard(proc.pid)
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)


def stream_messages(url: str, stream: str) -> int:
    with Connection.open(connect_options(url)) as conn:
        return client.stream_info(conn, stream).messages


# --- profiling ---------------------------------------------------------------------------------


def _children(pid: int) -> list[int]:
    out = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == pid:
                out.append(int(entry.name))
    return out


def pyspark_daemon() -> int | None:
    """The `python -m pyspark.daemon pyspark.worker` under our JVM, which forks the workers that
    run tasks (other daemons, `pyspark.daemon pyspark.sql.worker.*`, plan and commit)."""
    todo, seen = [os.getpid()], set()
    while todo:
        pid = todo.pop()
        if pid in seen:
            continue
        seen.add(pid)
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().rstrip(b"\0").split(b"\0")
        except OSError:
            continue
        if b"pyspark.daemon" in cmdline and cmdline[-1] == b"pyspark.worker":
            return pid
        todo.extend(_children(pid))
    return None


@contextmanager
def profiled(directory: str | None, name: str) -> Iterator[None]:
    pyspy = shutil.which("py-spy", path=f"{VENV_BIN}:{os.environ.get('PATH', '')}")
    daemon = pyspark_daemon() if directory else None
    if not directory or pyspy is None or daemon is None:
        yield
        return
    out = Path(directory) / f"{name}.txt"
    out.parent.mkdir(parents=True, exist_ok=True)
    proc = subprocess.Popen(
        [
            pyspy,
            "record",
            "--pid",
            str(daemon),
            "--subprocesses",
            "--nonblocking",
            "--format",
            "raw",
            "--rate",
            "200",
            "-o",
            str(out),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    time.sleep(1.0)  # py-spy needs a moment to attach
    try:
        yield
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
        top = ROOT / "bench" / "pyspy_top.py"
        if out.exists() and top.exists():
            print(f"\n--- py-spy profile of Spark's Python workers: {name} ({out}) ---")
            subprocess.run([sys.executable, str(top), str(out), "--top", "12"], check=False)


# --- main --------------------------------------------------------------------------------------


def run_server(kind: str, spark: Any, args: Any, work: str) -> dict[str, Any]:
    result: dict[str, Any] = {"server": kind}
    with server(kind) as url:
        if url is None:
            result["skipped"] = "no JetStream (the server did not answer $JS.API.INFO)"
            print(f"{kind}: skipped, {result['skipped']}")
            return result
        count, size = args.count, args.size
        create_stream(url, "R", ["R.>"])
        create_stream(url, "W", ["W.>"])
        create_stream(url, "WARM", ["WARM.>"])
        result["fill"] = fill(url, "R", count, size)
        fill(url, "WARM", min(WARM_COUNT, count), size)
        result["client"], result["client_arrow_share"] = client_read(url, "R", count)

        # Warm-up: start the Python workers and plan once, so the timed phases measure work.
        result["warmup_read_s"] = timed(
            lambda: batch_to_parquet(spark, url, "WARM", f"{work}/{kind}-warm", args)
        ) + timed(lambda: batch_to_noop(spark, url, "WARM", args))
        result["warmup_write_s"] = timed(lambda: write_rows(spark, url, "WARM", 10_000, size, args))
        write_core_rows(spark, url, "WARM.core", 10_000, size, args)

        with profiled(args.profile, f"{kind}-batch"):
            seconds = timed_cpu(
                result,
                "batch",
                url,
                count,
                lambda: batch_to_parquet(spark, url, "R", f"{work}/{kind}-batch", args),
            )
        result["batch"] = count / seconds
        rows = spark.read.parquet(f"{work}/{kind}-batch").count()
        assert rows == count, f"batch parquet holds {rows} rows, expected {count}"

        seconds = timed_cpu(
            result,
            "stream",
            url,
            count,
            lambda: stream_to_parquet(spark, url, "R", f"{work}/{kind}-stream", args),
        )
        result["stream"] = count / seconds
        rows = spark.read.parquet(f"{work}/{kind}-stream").count()
        assert rows == count, f"stream parquet holds {rows} rows, expected {count}"

        seconds = timed_cpu(
            result, "noop", url, count, lambda: batch_to_noop(spark, url, "R", args)
        )
        result["noop"] = count / seconds
        pushed: list[tuple[int, int]] = []
        seconds = timed(lambda: pushed.append(pushdown_read(spark, url, "R", args)))
        result["pushdown_rows"], result["pushdown_fetched"] = pushed[0]
        result["pushdown_s"] = seconds
        expected = len(range(7, count, 100))
        assert pushed[0][0] == expected, f"pushdown read {pushed[0][0]} rows, not {expected}"

        with profiled(args.profile, f"{kind}-write"):
            seconds = timed_cpu(
                result,
                "write",
                url,
                count,
                lambda: write_rows(spark, url, "W", count, size, args),
            )
        result["write"] = count / seconds
        stored = stream_messages(url, "W")
        assert stored == count, f"stream W holds {stored} messages, expected {count}"

        with core_counter(url, "C.core", count) as got:
            started = time.monotonic()
            timed_cpu(
                result,
                "write_core",
                url,
                count,
                lambda: write_core_rows(spark, url, "C.core", count, size, args),
            )
            written = time.monotonic()
        # Delivered messages over the time until the last was delivered (or the write returned:
        # its final PING/PONG means the server has taken every publish).
        result["write_core_delivered"] = int(got["delivered"])
        result["write_core"] = got["delivered"] / (max(written, got["last"]) - started)
        if got["delivered"] < count:
            print(f"{kind}: core write: {count - int(got['delivered']):,} of {count:,} lost")
    return result


def median_result(reps: list[dict[str, Any]]) -> dict[str, Any]:
    """One server's runs as one: the median of every figure (element-wise for CPU splits)."""
    out: dict[str, Any] = {"server": reps[0]["server"], "runs": len(reps)}
    for key, value in reps[0].items():
        if key == "server":
            continue
        if isinstance(value, list):
            out[key] = [statistics.median(r[key][i] for r in reps) for i in range(len(value))]
        elif isinstance(value, int | float):
            out[key] = statistics.median(r[key] for r in reps)
    return out


PHASES = [
    ("fill", "publish with acks (client alone)"),
    ("client", "read, client alone (1 process)"),
    ("batch", "stream -> Parquet, batch"),
    ("stream", "stream -> Parquet, streaming availableNow"),
    ("noop", "stream -> noop sink (read path only)"),
    ("write", "rows -> JetStream with acks"),
    ("write_core", "rows -> core subject, delivered"),
]


def report(runs: dict[str, list[dict[str, Any]]], args: Any, master: str, startup: float) -> None:
    """The median table of one master; `ratio` is the median of the per-pair ratios
    (pynatsd / nats-server of the same repeat)."""
    ran = {k: reps for k, reps in runs.items() if reps and "skipped" not in reps[0]}
    print(
        f"\n{args.count:,} messages of {args.size} B, Spark {master}, "
        f"{os.cpu_count()} CPUs, Python {platform.python_version()}; "
        f"SparkSession start-up {startup:.1f} s; median of {args.repeat} interleaved run(s); "
        f"load average {os.getloadavg()[0]:.2f}"
    )
    for kind, reps in runs.items():
        if reps and "skipped" in reps[0]:
            print(f"{kind}: skipped ({reps[0]['skipped']})")
    if not ran:
        return
    med = [median_result(reps) for reps in ran.values()]
    pair = len(med) == 2
    header = f"{'phase':44}" + "".join(f"{r['server']:>14}" for r in med)
    print(header + (f"{'ratio':>8}" if pair else "") + "   target")
    for key, label in PHASES:
        line = f"{label:44}" + "".join(f"{r[key]:>12,.0f}/s" for r in med)
        if pair:
            a, b = ran.values()
            line += f"{statistics.median(y[key] / x[key] for x, y in zip(a, b, strict=True)):>8.2f}"
        target = SPARK_TARGETS.get(key)
        if target:
            verdicts = ", ".join(
                f"{r['server']} {'ok' if r[key] >= target else 'missed'}" for r in med
            )
            line += f"   >= {target // 1000}k/s: {verdicts}"
        print(line)
    cores = os.cpu_count() or 1
    print(
        "\nCPU per message in us: server + Spark's JVM + Python (driver and Spark's Python "
        f"workers: the connector), and the rate {cores} CPUs would give to this alone"
    )
    for key in ("batch", "stream", "noop", "write", "write_core"):
        line = f"{key:10}"
        for r in med:
            server_us, jvm_us, python_us = r[key + "_cpu"]
            total = server_us + jvm_us + python_us
            line += (
                f"  {r['server']}: {server_us:5.2f} + {jvm_us:5.2f} + {python_us:5.2f} -> "
                f"{cores / total * 1e6:>9,.0f}/s"
            )
        print(line)
    for r in med:
        lost = args.count - r["write_core_delivered"]
        print(
            f"{r['server']}: core write delivered {r['write_core_delivered']:,.0f} of "
            f"{args.count:,} ({lost:,.0f} lost, median); pushdown, subject = one of 100: "
            f"{r['pushdown_rows']:,.0f} rows, {r['pushdown_fetched']:,.0f} messages fetched "
            f"({100 * r['pushdown_fetched'] / args.count:.2f}% of the stream) in "
            f"{r['pushdown_s']:.2f} s"
        )
    for r in med:
        print(
            f"{r['server']}: warm-up read {r['warmup_read_s']:.1f} s, warm-up write "
            f"{r['warmup_write_s']:.1f} s; Arrow building is "
            f"{100 * r['client_arrow_share']:.0f}% of the client-alone read"
        )


def main() -> int:
    if len(sys.argv) == 5 and sys.argv[1] == "--count-core":
        count_core(sys.argv[2], sys.argv[3], int(sys.argv[4]), idle=10.0)
        return 0
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--count", type=int, default=1_000_000)
    parser.add_argument("--size", type=int, default=100)
    parser.add_argument(
        "--servers", default="nats-server,pynatsd", help="comma list of nats-server, pynatsd"
    )
    parser.add_argument(
        "--master",
        default="local[2],standalone",
        help="comma list of Spark masters; `standalone` starts a 2-worker cluster on loopback",
    )
    parser.add_argument(
        "--repeat",
        type=int,
        default=1,
        help="runs per server, alternating which goes first; the tables show medians",
    )
    parser.add_argument("--partitions", type=int, default=2, help="minPartitions")
    parser.add_argument(
        "--fetch-batch", type=int, default=None, help="fetchBatchSize (the option's default)"
    )
    parser.add_argument(
        "--profile",
        default=None,
        metavar="DIR",
        help="py-spy the Spark Python workers (batch and write phases)",
    )
    parser.add_argument("--json", default=None, metavar="FILE")
    args = parser.parse_args()

    documents = []
    for master in [m.strip() for m in args.master.split(",") if m.strip()]:
        runs, startup, warm = run_master(master, args)
        print(f"\n{master}: JVM Parquet warm-up {warm:.1f} s")
        report(runs, args, master, startup)
        documents.append({"master": master, "startup_s": startup, "jvm_warmup_s": warm, **runs})
    if args.json:
        document = {
            "count": args.count,
            "size": args.size,
            "repeat": args.repeat,
            "loadavg_end": os.getloadavg(),
            "runs": documents,
        }
        Path(args.json).write_text(json.dumps(document, indent=2))
    return 0


def warm_jvm(spark: Any, out: str, count: int, size: int) -> float:
    """Seconds to write `count` synthetic rows of the read's schema to Parquet: the JIT
    compiles the JVM's Parquet path here, not in the first server's measured phases."""
    rows = spark.range(0, count, 1, 2).selectExpr(
        "concat('R.', cast(id % 100 as string)) as subject",
        f"cast(lpad(cast(id as string), {size}, 'x') as binary) as data",
        "'R' as stream",
        "id as seq",
        "current_timestamp() as timestamp",
    )
    return timed(lambda: rows.write.mode("overwrite").parquet(out))


def run_master(master: str, args: Any) -> tuple[dict[str, list[dict[str, Any]]], float, float]:
    """Every server's phases with the driver on `master` (`standalone`: a master and two
    workers of 1 core and 1 GiB on loopback, started here, the package shipped as a zip),
    `--repeat` times with the servers' order alternating."""
    work = tempfile.mkdtemp(prefix="bench-spark-out-")
    cluster = None
    if master == "standalone":
        sys.path.insert(0, str(ROOT / "tests"))
        from support.spark_standalone import StandaloneCluster, pynatsd_archive

        cluster = StandaloneCluster(Path(work) / "standalone")
        cluster.start()
    kinds = [s.strip() for s in args.servers.split(",") if s.strip()]
    runs: dict[str, list[dict[str, Any]]] = {kind: [] for kind in kinds}
    try:
        started = time.perf_counter()
        spark = spark_session(cluster.url if cluster else master, standalone=cluster is not None)
        spark.sparkContext.setLogLevel("ERROR")
        if cluster is not None:
            spark.sparkContext.addPyFile(str(pynatsd_archive(Path(work))))
        startup = time.perf_counter() - started
        try:
            warm = warm_jvm(spark, f"{work}/jvm-warm", args.count, args.size)
            for rep in range(args.repeat):
                order = kinds[:] if rep % 2 == 0 else kinds[::-1]
                for kind in order:
                    # A directory per run: a streaming query's checkpoint must not carry over to
                    # the next run's new server (it would resume past the whole stream).
                    result = run_server(kind, spark, args, f"{work}/run{rep}")
                    runs[kind].append(result)
                    if "skipped" in result:
                        kinds.remove(kind)
        finally:
            spark.stop()
    finally:
        if cluster is not None:
            cluster.stop()
        shutil.rmtree(work, ignore_errors=True)
    return runs, startup, warm


if __name__ == "__main__":
    sys.exit(main())
