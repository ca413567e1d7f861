"""The cluster command-line flags, side by side with nats-server: the flags it refuses (same
text on stderr, same exit status), `--routes` over a file's routes, and the `/varz` cluster
section a server started with the flags nats.py's tests use shows."""

from __future__ import annotations

import json
import subprocess
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from pynatsd.cli import parse_flags
from pynatsd.config import ConfigError
from pynatsd.flags import apply_flags
from pynatsd.options import Options
from support.natsserver import nats_server_binary
from support.ports import free_port
from support.processes import PYNATSD, start_server

NATS_SERVER = nats_server_binary()
pytestmark = pytest.mark.skipif(NATS_SERVER is None, reason="nats-server binary not found")

REFUSED = {
    "routes without a cluster": ["--routes", "nats://127.0.0.1:4444"],
    "cluster URL without a port": ["--cluster", "foo"],
    "cluster URL host without a port": ["--cluster", "nats://127.0.0.1"],
    "cluster user without a password": ["--cluster", "nats://u@127.0.0.1:-1"],
    "cluster URL with a bad port": ["--cluster", "nats://127.0.0.1:x"],
    "cluster URL with a bad escape": ["--cluster_listen", "nats://127.0.0.1:6222/%zz"],
    "cluster URL without a scheme": ["--cluster", "://x"],
    "cluster name with a space": ["--cluster", "nats://127.0.0.1:-1", "--cluster_name", "a b"],
}


def _stderr_of(argv: list[str], cwd: Path) -> tuple[int, str]:
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=30, cwd=cwd)
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    return proc.returncode, lines[0].split(": ", 1)[1] if lines else ""


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_refused_cluster_flags_agree(name: str, tmp_path: Path) -> None:
    assert NATS_SERVER is not None
    flags = ["-p", "-1", "-a", "127.0.0.1", *REFUSED[name]]
    real = _stderr_of([NATS_SERVER, *flags], tmp_path)
    ours = _stderr_of([*PYNATSD, *flags], tmp_path)
    assert real[0] == 1
    assert ours == real


def test_routes_flag_needs_a_listen_from_flag_or_file(tmp_path: Path) -> None:
    """A file's cluster listener is enough for `--routes`; the flag replaces its routes."""
    conf = tmp_path / "c.conf"
    conf.write_text('cluster { listen: "127.0.0.1:6222", routes: ["nats://127.0.0.1:7000"] }\n')
    opts = apply_flags(
        Options(), parse_flags(["--cluster_listen", "nats://127.0.0.1:-1", "--routes", ""])
    )
    assert opts.cluster is not None and opts.cluster.routes == [] and opts.cluster.port == -1
    from pynatsd.cli import build_options

    opts, _, _ = build_options(parse_flags(["-c", str(conf), "--routes", "nats://a:1, nats://b:2"]))
    assert opts.cluster is not None
    assert opts.cluster.routes == ["nats://a:1", "nats://b:2"]
    assert (opts.cluster.host, opts.cluster.port) == ("127.0.0.1", 6222)


def test_cluster_flag_credentials() -> None:
    opts = apply_flags(Options(), parse_flags(["--cluster", "nats://ru:rp@127.0.0.1:6222"]))
    assert opts.cluster is not None
    assert (opts.cluster.username, opts.cluster.password) == ("ru", "rp")
    assert (opts.cluster.host, opts.cluster.port) == ("127.0.0.1", 6222)
    # `--cluster` with no credentials clears the file's, as nats-server's overrideCluster.
    opts.cluster.username = "x"
    apply_flags(opts, parse_flags(["--cluster_listen", "nats://127.0.0.1:6222"]))
    assert opts.cluster.username == opts.cluster.password == ""
    # The last of --cluster and --cluster_listen wins.
    flags = parse_flags(["--cluster", "nats://h:1", "--cluster_listen", "nats://h:2"])
    assert apply_flags(Options(), flags).cluster.port == 2  # type: ignore[union-attr]
    flags = parse_flags(["--cluster", ""])
    assert apply_flags(Options(), flags).cluster.port == 0  # type: ignore[union-attr]
    with pytest.raises(ConfigError, match="expected cluster password to be set"):
        apply_flags(Options(), parse_flags(["--cluster", "nats://u@h:1"]))


def test_other_cluster_flags() -> None:
    flags = parse_flags(
        [
            "--cluster_name",
            "C",
            "--cluster_advertise",
            "h:5",
            "--no_advertise",
            "--connect_retries",
            "4",
        ]
    )
    cluster = apply_flags(Options(), flags).cluster
    assert cluster is not None
    assert (cluster.name, cluster.advertise, cluster.no_advertise) == ("C", "h:5", True)
    assert (cluster.connect_retries, cluster.port) == (4, 0)


def _varz(port: int) -> dict[str, Any]:
    deadline = time.monotonic() + 10
    while True:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/varz", timeout=2) as r:
                result: dict[str, Any] = json.load(r)
                return result
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)


@pytest.mark.parametrize(
    "extra",
    [
        ["--routes", "nats://127.0.0.1:{r1},nats://u:p@127.0.0.1:{r2}", "--cluster_name", "CL"],
        ["-c", "{conf}"],
    ],
    ids=["nats.py flags", "file"],
)
def test_varz_cluster_section_agrees(extra: list[str], tmp_path: Path) -> None:
    """nats.py's legacy tests start servers with `-p -m -a --cluster_listen --routes
    --cluster_name`; `/varz` shows the same cluster section on both servers."""
    assert NATS_SERVER is not None
    conf = tmp_path / "c.conf"
    conf.write_text(
        "cluster {\n  name: X\n  pool_size: -1\n  write_deadline: '3s'\n  write_timeout: close\n"
        "  authorization { user: a, password: b, timeout: 0.5 }\n"
        '  routes: ["nats-route://127.0.0.1:1", "nats://127.0.0.1:2"]\n}\n'
    )
    sections = []
    values = {"r1": free_port(), "r2": free_port(), "conf": str(conf)}
    for command in ([NATS_SERVER], list(PYNATSD)):
        http_port, cluster_port = free_port(), free_port()
        args = [a.format(**values) for a in extra]
        server = start_server(
            command,
            ["-m", str(http_port), "--cluster_listen", f"nats://127.0.0.1:{cluster_port}", *args],
        )
        try:
            cluster = _varz(http_port)["cluster"]
        finally:
            server.stop()
        assert cluster.pop("cluster_port") == cluster_port
        sections.append(cluster)
    assert sections[1] == sections[0]


def _cluster_help(argv: list[str]) -> list[str]:
    text = subprocess.run(argv, capture_output=True, text=True, timeout=30).stdout
    section = text.split("Cluster Options:", 1)[1].split("\n\n", 1)[0]
    return section.strip("\n").splitlines()


def test_help_lists_the_cluster_flags_as_nats_server() -> None:
    assert NATS_SERVER is not None
    ours = _cluster_help([*PYNATSD, "--help"])
    assert ours == _cluster_help([NATS_SERVER, "--help"])
    assert len(ours) == 7
