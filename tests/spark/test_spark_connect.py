"""Spark Connect: reads, writes and a streaming query through a Spark Connect server
(`sc://`), with the `nats` source installed on the server side and a client that does not
have it. The client runs in its own process (tests/spark/connect_client.py)."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from support.spark import create_stream, publish, unique
from support.spark_connect import ConnectServer
from support.spark_standalone import clean_env

pytestmark = pytest.mark.timeout(300)

CLIENT = Path(__file__).with_name("connect_client.py")


@pytest.fixture(scope="module")
def connect_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ConnectServer]:
    pytest.importorskip("grpc", reason="pyspark[connect] is not installed")
    server = ConnectServer(tmp_path_factory.mktemp("connect"))
    server.start()
    try:
        yield server
    finally:
        server.stop()


def test_reads_writes_and_streaming_through_spark_connect(
    connect_server: Any, js_server: Any, tmp_path: Path
) -> None:
    url = js_server.url
    stream, copy = unique("CONN"), unique("CCOPY")
    create_stream(url, stream, [f"{stream}.>"])
    create_stream(url, copy, [f"{copy}.>"])
    publish(url, 100, f"{stream}.x", headers=lambda i: {"K": str(i)} if i < 2 else None)
    # A client without pynatsd on its path: only the server knows the `nats` source.
    done = subprocess.run(
        [sys.executable, str(CLIENT), connect_server.url, url, stream, copy, str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=240,
        env=clean_env(),
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    got = json.loads(done.stdout.strip().splitlines()[-1])
    assert got["columns"] == ["subject", "data", "stream", "seq", "timestamp"]
    assert got["count"] == 100
    assert got["range"] == list(range(11, 21))
    assert got["headers"] == [{"K": ["0"]}, {"K": ["1"]}]
    assert got["copied"] == 100
    assert got["streamed"] == list(range(1, 101))
    # (Connect hands the options over lower-cased.)
    hint = "option 'startingoffset': unknown option; did you mean 'startingOffsets'?"
    assert hint in got["error"]
