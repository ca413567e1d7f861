"""Benchmark of the `nats` Spark data source, side by side on nats-server -js and pynatsd -js.

    python bench/bench_spark.py                       # 1M 100-byte messages, both servers
    python bench/bench_spark.py --count 100000        # a quick run
    python bench/bench_spark.py --servers nats-server --profile /tmp/spark-prof --json out.json

For each server (pynatsd is skipped, with a note, while it does not serve JetStream):
  fill        COUNT messages of SIZE bytes published with acks (the data source's own client)
  client      the same stream read by one process with the client alone (no Spark)
  batch       spark.read.format("nats") -> Parquet, local[2]                      (target 300k/s)
  stream      readStream ... trigger(availableNow) -> Parquet with a checkpoint
  noop        the batch read into Spark's `noop` sink: the read path without Parquet
  write       COUNT rows -> JetStream with acks and Nats-Msg-Id, local[2]         (target 300k/s)
  pushdown    `subject = 'R.7'` (1% of the stream) with filter pushdown: rows, and messages the
              server sent meanwhile (/varz out_msgs)
Each master of `--master` (default `local[2],standalone`) runs every phase; `standalone` is a
master and two workers of 1 core / 1 GiB on loopback (tests/support/spark_standalone.py), the
package shipped to the executors as a zip, as docs/spark.md describes.
Each Spark phase also reports the CPU per message of the server, of Spark's JVM and of the Python
side (the driver and Spark's Python workers, where the data source runs), read from /proc, and the
rate the machine's CPUs would give to that work alone: on a shared machine the wall-clock rates
swing with the load, the CPU per message much less.
Spark phases are timed after session start-up and after a warm-up query (the first query of a
Python data source in a session starts its Python workers); both costs are printed too.
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
from pynatsd.spark.options import ConnectOptions, parse_servers  # noqa: E402
from pynatsd.spark.schema import arrow_schema, chunk_to_batch, stream_schema  # noqa: E402
from pynatsd.spark.wire import Connection, new_inbox  # noqa: E402

SPARK_TARGETS = {"batch": 300_000, "write": 300_000}  # issue 18


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
            batch_size=5000,
            chunk_rows=20_000,
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
    spark: Any, url: str, stream: str, partitions: int, batch: int, streaming: bool = False
) -> Any:
    source = spark.readStream if streaming else spark.read
    return (
        source.format("nats")
        .option("servers", url)
        .option("stream", stream)
        .option("minPartitions", str(partitions))
        .option("fetchBatchSize", str(batch))
        .load()
    )


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
        todo.extend(c for c in _children(pid) if c != server_pid)
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
        fill(url, "WARM", min(10_000, count), size)
        result["client"], result["client_arrow_share"] = client_read(url, "R", count)

        # Warm-up: start the Python workers and plan once, so the timed phases measure work.
        result["warmup_read_s"] = timed(
            lambda: batch_to_parquet(spark, url, "WARM", f"{work}/{kind}-warm", args)
        )
        result["warmup_write_s"] = timed(lambda: write_rows(spark, url, "WARM", 10_000, size, args))

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
    return result


def report(results: list[dict[str, Any]], args: Any, master: str, startup: float) -> None:
    print(
        f"\n{args.count:,} messages of {args.size} B, Spark {master}, "
        f"{os.cpu_count()} CPUs, Python {platform.python_version()}; "
        f"SparkSession start-up {startup:.1f} s"
    )
    phases = [
        ("fill", "publish with acks (client alone)"),
        ("client", "read, client alone (1 process)"),
        ("batch", "stream -> Parquet, batch"),
        ("stream", "stream -> Parquet, streaming availableNow"),
        ("noop", "stream -> noop sink (read path only)"),
        ("write", "rows -> JetStream with acks"),
    ]
    ran = [r for r in results if "skipped" not in r]
    if not ran:
        for r in results:
            print(f"{r['server']}: skipped ({r['skipped']})")
        return
    header = f"{'phase':44}" + "".join(f"{r['server']:>14}" for r in ran)
    if len(ran) == 2:
        header += f"{'ratio':>8}"
    print(header + "   target")
    for key, label in phases:
        line = f"{label:44}" + "".join(f"{r[key]:>12,.0f}/s" for r in ran)
        if len(ran) == 2:
            line += f"{ran[1][key] / ran[0][key]:>8.2f}"
        target = SPARK_TARGETS.get(key)
        if target:
            verdicts = ", ".join(
                f"{r['server']} {'ok' if r[key] >= target else 'missed'}" for r in ran
            )
            line += f"   >= {target // 1000}k/s: {verdicts}"
        print(line)
    cores = os.cpu_count() or 1
    print(
        "\nCPU per message in us: server + Spark's JVM + Python (driver and Spark's Python "
        f"workers: the connector), and the rate {cores} CPUs would give to this alone"
    )
    for key in ("batch", "stream", "noop", "write"):
        line = f"{key:8}"
        for r in ran:
            server_us, jvm_us, python_us = r[key + "_cpu"]
            total = server_us + jvm_us + python_us
            line += (
                f"  {r['server']}: {server_us:5.2f} + {jvm_us:5.2f} + {python_us:5.2f} -> "
                f"{cores / total * 1e6:>9,.0f}/s"
            )
        print(line)
    for r in ran:
        print(
            f"{r['server']}: pushdown, subject = one of 100: {r['pushdown_rows']:,} rows, "
            f"{r['pushdown_fetched']:,} messages fetched "
            f"({100 * r['pushdown_fetched'] / args.count:.2f}% of the stream) in "
            f"{r['pushdown_s']:.2f} s"
        )
    for r in ran:
        print(
            f"{r['server']}: warm-up read {r['warmup_read_s']:.1f} s, warm-up write "
            f"{r['warmup_write_s']:.1f} s; Arrow building is "
            f"{100 * r['client_arrow_share']:.0f}% of the client-alone read"
        )
    for r in results:
        if "skipped" in r:
            print(f"{r['server']}: skipped ({r['skipped']})")


def main() -> int:
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
    parser.add_argument("--partitions", type=int, default=2, help="minPartitions")
    parser.add_argument("--fetch-batch", type=int, default=5000, help="fetchBatchSize")
    parser.add_argument(
        "--profile",
        default=None,
        metavar="DIR",
        help="py-spy the Spark Python workers (batch and write phases)",
    )
    parser.add_argument("--json", default=None, metavar="FILE")
    args = parser.parse_args()

    runs = []
    for master in [m.strip() for m in args.master.split(",") if m.strip()]:
        results, startup = run_master(master, args)
        report(results, args, master, startup)
        runs.append({"master": master, "startup_s": startup, "results": results})
    if args.json:
        document = {"count": args.count, "size": args.size, "runs": runs}
        Path(args.json).write_text(json.dumps(document, indent=2))
    return 0


def run_master(master: str, args: Any) -> tuple[list[dict[str, Any]], float]:
    """Every server's phases with the driver on `master` (`standalone`: a master and two
    workers of 1 core and 1 GiB on loopback, started here, the package shipped as a zip)."""
    work = tempfile.mkdtemp(prefix="bench-spark-out-")
    cluster = None
    if master == "standalone":
        sys.path.insert(0, str(ROOT / "tests"))
        from support.spark_standalone import StandaloneCluster, pynatsd_archive

        cluster = StandaloneCluster(Path(work) / "standalone")
        cluster.start()
    results = []
    try:
        started = time.perf_counter()
        spark = spark_session(cluster.url if cluster else master, standalone=cluster is not None)
        spark.sparkContext.setLogLevel("ERROR")
        if cluster is not None:
            spark.sparkContext.addPyFile(str(pynatsd_archive(Path(work))))
        startup = time.perf_counter() - started
        try:
            for kind in [s.strip() for s in args.servers.split(",") if s.strip()]:
                results.append(run_server(kind, spark, args, work))
        finally:
            spark.stop()
    finally:
        if cluster is not None:
            cluster.stop()
        shutil.rmtree(work, ignore_errors=True)
    return results, startup


if __name__ == "__main__":
    sys.exit(main())
