"""A Spark standalone cluster on loopback: a master and workers started from the pip
distribution's `spark-class`, each worker with its own cores, memory and work directory.

The daemons get a clean environment (PATH, HOME, JAVA_HOME, nothing of the test process: no
PYTHONPATH, no PYSPARK_* variables) and a working directory of their own, so the executors
they launch can only use what the application ships them. `pynatsd_archive` builds the zip the
docs tell users to ship (`spark.submit.pyFiles` / `--py-files`)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import time
import urllib.request
import zipfile
from pathlib import Path
from typing import IO, Any

from support.ports import LOOPBACK, free_port

SRC = Path(__file__).resolve().parents[2] / "src"
START_TIMEOUT = 90.0


def spark_class() -> Path:
    import pyspark

    return Path(pyspark.__file__).parent / "bin" / "spark-class"


def clean_env() -> dict[str, str]:
    env = {k: os.environ[k] for k in ("PATH", "HOME", "JAVA_HOME", "LANG") if k in os.environ}
    env["SPARK_LOCAL_IP"] = LOOPBACK
    return env


def pynatsd_archive(directory: Path) -> Path:
    """`pynatsd` and `pyspark_nats` from this checkout as one zip (Python imports from it)."""
    path = directory / "pynatsd.zip"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.write(SRC / "pyspark_nats.py", "pyspark_nats.py")
        for file in sorted((SRC / "pynatsd").rglob("*")):
            if file.is_file() and "__pycache__" not in file.parts:
                zf.write(file, str(file.relative_to(SRC)))
    return path


class StandaloneCluster:
    """`workers` workers of `cores` cores and `memory` each, and their master."""

    def __init__(self, directory: Path, workers: int = 2, cores: int = 1, memory: str = "1g"):
        self.directory = directory
        self.port = free_port()
        self.ui_port = free_port()
        self.url = f"spark://{LOOPBACK}:{self.port}"
        self.workers = workers
        self.cores = cores
        self.memory = memory
        self._procs: list[subprocess.Popen[bytes]] = []
        self._logs: list[IO[bytes]] = []

    def _daemon(self, name: str, cls: str, *args: str) -> None:
        home = self.directory / name
        home.mkdir(parents=True, exist_ok=True)
        log = open(home / "daemon.log", "wb")  # noqa: SIM115 (closed in stop)
        self._logs.append(log)
        argv = [str(spark_class()), cls, *args]
        proc = subprocess.Popen(argv, cwd=home, env=clean_env(), stdout=log, stderr=log)
        self._procs.append(proc)

    def _await_log(self, name: str, pattern: str, deadline: float) -> str:
        """The first group of `pattern` once the daemon's log shows it."""
        log = self.directory / name / "daemon.log"
        while True:
            found = re.search(pattern, log.read_text(errors="replace"))
            if found:
                return found.group(1)
            if time.monotonic() > deadline or any(p.poll() is not None for p in self._procs):
                self.stop()
                raise RuntimeError(f"the Spark standalone cluster did not start:\n{self.logs()}")
            time.sleep(0.2)

    def start(self) -> None:
        deadline = time.monotonic() + START_TIMEOUT
        self._daemon(
            "master",
            "org.apache.spark.deploy.master.Master",
            *("--host", LOOPBACK, "--port", str(self.port), "--webui-port", str(self.ui_port)),
        )
        # A port that free_port saw free may be taken by the time the JVM binds (another test
        # run on the machine): Spark then tries the next one, so read the ports it bound.
        self.url = self._await_log("master", r"Starting Spark master at (spark://\S+)", deadline)
        self.ui_port = int(
            self._await_log("master", r"MasterWebUI: .* started at \S+:(\d+)", deadline)
        )
        for i in range(self.workers):
            work = self.directory / f"worker{i}" / "work"
            self._daemon(
                f"worker{i}",
                "org.apache.spark.deploy.worker.Worker",
                *("--host", LOOPBACK, "--cores", str(self.cores), "--memory", self.memory),
                *("--webui-port", str(free_port()), "--work-dir", str(work), self.url),
            )
        while self.alive_workers() < self.workers:
            if time.monotonic() > deadline or any(p.poll() is not None for p in self._procs):
                self.stop()
                raise RuntimeError(f"the Spark standalone cluster did not start:\n{self.logs()}")
            time.sleep(0.5)

    def state(self) -> dict[str, Any]:
        url = f"http://{LOOPBACK}:{self.ui_port}/json/"
        with urllib.request.urlopen(url, timeout=2) as r:
            state: dict[str, Any] = json.load(r)
            return state

    def alive_workers(self) -> int:
        try:
            return sum(1 for w in self.state().get("workers", []) if w.get("state") == "ALIVE")
        except OSError:
            return 0

    def logs(self) -> str:
        return "\n".join(
            f"--- {p}:\n{p.read_text(errors='replace')[-3000:]}"
            for p in sorted(self.directory.glob("*/daemon.log"))
        )

    def stop(self) -> None:
        for proc in reversed(self._procs):  # workers first, then the master
            if proc.poll() is None:
                proc.terminate()
        for proc in self._procs:
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(10)
        for log in self._logs:
            log.close()
        self._procs.clear()
        self._logs.clear()
