"""The monitoring JSON of pynatsd and nats-server for the same scenario, key for key."""

from __future__ import annotations

import asyncio
import json
import subprocess
import time
import urllib.request
from pathlib import Path
from typing import Any

import nats
import pytest

from support.natsserver import nats_server_binary
from support.ports import free_port
from support.processes import PYNATSD

PATHS = [
    "/varz",
    "/connz?subs=detail",
    "/connz?state=closed",
    "/subsz?subs=1",
    "/healthz",
    "/accountz",
    "/jsz",
    "/routez",
    "/gatewayz",
    "/leafz",
]


def _keys(value: Any, prefix: str = "") -> set[str]:
    out: set[str] = set()
    if isinstance(value, dict):
        for k, v in value.items():
            out.add(prefix + k)
            out |= _keys(v, prefix + k + ".")
    elif isinstance(value, list):
        for item in value:
            out |= _keys(item, prefix + "[].")
    return out


async def _scenario(cmd: list[str], store: Path) -> dict[str, Any]:
    port, http_port = free_port(), free_port()
    proc = subprocess.Popen(
        [*cmd, "-a", "127.0.0.1", "-p", str(port), "-m", str(http_port), "-js", "-sd", str(store)],
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 15
        while True:
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{http_port}/healthz", timeout=1)
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                await asyncio.sleep(0.05)
        gone = await nats.connect(f"nats://127.0.0.1:{port}", name="gone")
        await gone.close()
        nc = await nats.connect(f"nats://127.0.0.1:{port}", name="watcher")
        await nc.subscribe("foo.>", queue="q")
        await nc.subscribe("bar")
        await nc.publish("foo.x", b"hi")
        await nc.flush()
        await asyncio.sleep(0.1)
        out = {}
        for path in PATHS:
            url = f"http://127.0.0.1:{http_port}{path}"
            raw = await asyncio.to_thread(lambda u=url: urllib.request.urlopen(u, timeout=5).read())
            out[path] = json.loads(raw)
        await nc.close()
        return out
    finally:
        proc.kill()
        proc.wait()


@pytest.fixture(scope="module")
def both(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    binary = nats_server_binary()
    if binary is None:
        pytest.skip("nats-server binary not installed")
    base = tmp_path_factory.mktemp("monitor-compare")
    return {
        "nats-server": asyncio.run(_scenario([binary], base / "go")),
        "pynatsd": asyncio.run(_scenario(list(PYNATSD), base / "py")),
    }


@pytest.mark.parametrize("path", PATHS)
def test_same_keys_as_nats_server(both: dict[str, dict[str, Any]], path: str) -> None:
    reference = _keys(both["nats-server"][path])
    ours = _keys(both["pynatsd"][path])
    assert reference - ours == set()
    assert ours - reference == set()


def test_top_level_key_order_matches(both: dict[str, dict[str, Any]]) -> None:
    for path in ("/varz", "/jsz", "/accountz"):
        ref = [k for k in both["nats-server"][path]]
        ours = [k for k in both["pynatsd"][path] if k in ref]
        assert ours == [k for k in ref if k in ours], path
