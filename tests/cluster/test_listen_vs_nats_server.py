"""A route port that cannot be had: nats-server's [FTL] line, word for word."""

from __future__ import annotations

import re
import socket
import subprocess

import pytest

import pynatsd
from pynatsd.options import ClusterOptions
from support.natsserver import require_nats_server
from support.ports import free_port


def _cluster_args(port: int) -> list[str]:
    return ["--cluster", f"nats://127.0.0.1:{port}", "--cluster_name", "C"]


async def test_route_port_in_use() -> None:
    binary = require_nats_server()
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        out = subprocess.run(
            [
                binary,
                "-p",
                str(free_port()),
                "-a",
                "127.0.0.1",
                "--cluster",
                f"nats://127.0.0.1:{port}",
                "--cluster_name",
                "C",
            ],
            capture_output=True,
            timeout=20,
            text=True,
        )
        go_line = re.search(r"\[FTL\] (.*)", out.stderr)
        assert out.returncode == 1 and go_line is not None
        server = pynatsd.Server(
            port=0, host="127.0.0.1", cluster=ClusterOptions(name="C", host="127.0.0.1", port=port)
        )
        with pytest.raises(pynatsd.ListenError) as raised:
            await server.start()
    assert str(raised.value) == go_line.group(1)
