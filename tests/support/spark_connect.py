"""A Spark Connect server (`SparkConnectServer`, started with the pip distribution's
`spark-submit`) on a loopback port, in local mode, with the `nats` data source installed on the
server side: its Python workers import pynatsd from this checkout, the way a deployment has the
package installed where the server runs. Clients reach it at `sc://127.0.0.1:<port>`."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import IO

from support.ports import LOOPBACK, free_port
from support.spark_standalone import SRC, clean_env

START_TIMEOUT = 120.0


class ConnectServer:
    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.port = free_port()
        self.url = f"sc://{LOOPBACK}:{self.port}"
        self._proc: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None

    def start(self) -> None:
        import pyspark

        submit = Path(pyspark.__file__).parent / "bin" / "spark-submit"
        env = clean_env()
        env["PYSPARK_PYTHON"] = sys.executable
        env["PYTHONPATH"] = str(SRC)  # the server side has the package
        confs = {
            "spark.connect.grpc.binding.address": LOOPBACK,
            "spark.connect.grpc.binding.port": str(self.port),
            "spark.driver.host": LOOPBACK,
            "spark.ui.enabled": "false",
            "spark.sql.shuffle.partitions": "2",
            "spark.sql.session.timeZone": "UTC",
            # Error messages reach clients in gRPC metadata, cut to 1 KiB by default: a Python
            # data source's error is a traceback whose last line says what is wrong.
            "spark.connect.grpc.maxMetadataSize": "65536",
        }
        argv = [str(submit), "--class", "org.apache.spark.sql.connect.service.SparkConnectServer"]
        argv += ["--master", "local[2]"]
        for key, value in confs.items():
            argv += ["--conf", f"{key}={value}"]
        argv.append("spark-internal")
        self._log = open(self.directory / "connect-server.log", "wb")  # noqa: SIM115
        self._proc = subprocess.Popen(
            argv, cwd=self.directory, env=env, stdout=self._log, stderr=self._log
        )
        deadline = time.monotonic() + START_TIMEOUT
        while not self._listening():
            if time.monotonic() > deadline or self._proc.poll() is not None:
                self.stop()
                raise RuntimeError(f"the Spark Connect server did not start:\n{self.log()}")
            time.sleep(0.5)

    def _listening(self) -> bool:
        try:
            socket.create_connection((LOOPBACK, self.port), 1).close()
            return True
        except OSError:
            return False

    def log(self) -> str:
        path = self.directory / "connect-server.log"
        return path.read_text(errors="replace")[-3000:] if path.exists() else ""

    def stop(self) -> None:
        if self._proc is not None and self._proc.poll() is None:
            self._proc.terminate()
            try:
                self._proc.wait(30)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait(10)
        if self._log is not None:
            self._log.close()
            self._log = None
