"""Route TLS side by side with nats-server: the same `cluster { tls {} }` on every node makes a
cluster of pynatsd nodes, of pynatsd and nats-server nodes, and (the reference) of nats-server
nodes, with messages crossing; a peer that does not speak TLS, or whose certificate another CA
signed, is refused by a TLS node of either kind with the same log line, and no route forms."""

from __future__ import annotations

import json
import re
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from cryptography.x509.oid import NameOID

from support.certs import make_ca, make_cert
from support.cluster import GO, PY, ProcessCluster
from support.ports import LOOPBACK

REFUSAL_TIMEOUT = 15.0


def _tls_block(directory: Path, name: str = "route", ca_name: str = "ca") -> str:
    ca = make_ca(f"{ca_name} CA")
    ca_path, _ = ca.write(directory, ca_name)
    cert = make_cert(ca, [(NameOID.COMMON_NAME, name)], ips=(LOOPBACK,), dns=("localhost",))
    cert_path, key_path = cert.write(directory, f"{name}-{ca_name}")
    return (
        "  tls {\n"
        f'    cert_file: "{cert_path}"\n    key_file: "{key_path}"\n    ca_file: "{ca_path}"\n'
        "    timeout: 3\n  }\n"
    )


@pytest.fixture
def tls_block(tmp_path: Path) -> str:
    return _tls_block(tmp_path)


@pytest.mark.parametrize(
    "kinds", [(PY, PY), (PY, GO), (GO, PY), (GO, GO)], ids=["py-py", "py-go", "go-py", "go-go"]
)
def test_tls_cluster_forms_and_carries_messages(
    tmp_path: Path, tls_block: str, kinds: tuple[str, str]
) -> None:
    with ProcessCluster(kinds, tmp_path, cluster_config=tls_block) as cluster:
        cluster.start()  # returns once messages cross both ways
        for index in range(2):
            varz = cluster.varz(index)["cluster"]
            assert (varz.get("tls_required"), varz.get("tls_verify")) == (True, True)
            assert cluster.routez(index)["num_routes"] >= 1


def _routes(port: int) -> int:
    with urllib.request.urlopen(f"http://{LOOPBACK}:{port}/routez", timeout=2) as r:
        return int(json.loads(r.read())["num_routes"])


def _wait_for_log(cluster: ProcessCluster, index: int, pattern: str) -> str:
    """The first line of node `index`'s log that matches `pattern`, without its prefix."""
    deadline = time.monotonic() + REFUSAL_TIMEOUT
    while True:
        for line in cluster.nodes[index].log_text().splitlines():
            if re.search(pattern, line):
                # "[pid] date time [ERR] 127.0.0.1:port - rid:N - text" -> "[ERR] text"
                level = re.search(r"\[(ERR|WRN|INF)\]", line)
                return f"[{level.group(1) if level else '?'}] {line.rsplit(' - ', 1)[-1]}"
        if time.monotonic() > deadline:
            raise AssertionError(f"no log line {pattern!r}:{cluster.describe()}")
        time.sleep(0.1)


def _refusal(tmp_path: Path, tls_kind: str, peer_config: str) -> tuple[str, int, int]:
    """A TLS node of `tls_kind` and a nats-server peer with `peer_config` in its cluster
    block, each dialing the other: the TLS node's handshake error line and both nodes'
    route counts once it is logged."""
    tls = _tls_block(tmp_path)
    with ProcessCluster([tls_kind, GO], tmp_path, cluster_config=[tls, peer_config]) as cluster:
        cluster.start(wait=False)
        line = _wait_for_log(cluster, 0, r"TLS route handshake error")
        return line, _routes(cluster.nodes[0].http_port), _routes(cluster.nodes[1].http_port)


def _both(tmp_path: Path, peer_config: str) -> Iterator[tuple[str, int, int]]:
    for kind in (GO, PY):
        directory = tmp_path / kind
        directory.mkdir()
        yield _refusal(directory, kind, peer_config)


def test_a_peer_without_tls_is_refused(tmp_path: Path) -> None:
    go, py = _both(tmp_path, "")
    not_tls = "tls: first record does not look like a TLS handshake"
    assert go[0] == f"[ERR] TLS route handshake error: {not_tls}"
    assert py == go
    assert go[1:] == (0, 0)


def test_a_peer_with_a_certificate_of_another_ca_is_refused(tmp_path: Path) -> None:
    other = _tls_block(tmp_path, name="intruder", ca_name="other")
    go, py = _both(tmp_path, other)
    assert go[0].startswith("[ERR] TLS route handshake error: ")
    assert py[0].startswith("[ERR] TLS route handshake error: ")
    assert py[1:] == go[1:] == (0, 0)
