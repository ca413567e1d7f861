"""Route TLS side by side with nats-server: the same `cluster { tls {} }` on every node makes a
cluster of pynatsd nodes, of pynatsd and nats-server nodes, and (the reference) of nats-server
nodes, with messages crossing; a peer that does not speak TLS, or whose certificate another CA
signed, is refused by a TLS node of either kind with the same log line, and no route forms."""

from __future__ import annotations

import json
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from support.certs import server_tls_block
from support.cluster import GO, PY, ProcessCluster
from support.ports import LOOPBACK
from support.processes import wait_for_log_line

REFUSAL_TIMEOUT = 15.0


@pytest.fixture
def tls_block(tmp_path: Path) -> str:
    return server_tls_block(tmp_path, "route")


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


def _refusal(tmp_path: Path, tls_kind: str, peer_config: str) -> tuple[str, int, int]:
    """A TLS node of `tls_kind` and a nats-server peer with `peer_config` in its cluster
    block, each dialing the other: the TLS node's handshake error line and both nodes'
    route counts once it is logged."""
    tls = server_tls_block(tmp_path, "route")
    with ProcessCluster([tls_kind, GO], tmp_path, cluster_config=[tls, peer_config]) as cluster:
        cluster.start(wait=False)
        line = wait_for_log_line(
            cluster.nodes[0].log_text,
            r"TLS route handshake error",
            REFUSAL_TIMEOUT,
            f":{cluster.describe()}",
        )
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
    other = server_tls_block(tmp_path, name="intruder", ca_name="other")
    go, py = _both(tmp_path, other)
    assert go[0].startswith("[ERR] TLS route handshake error: ")
    assert py[0].startswith("[ERR] TLS route handshake error: ")
    assert py[1:] == go[1:] == (0, 0)
