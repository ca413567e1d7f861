"""Gateway TLS side by side with nats-server: the same `gateway { tls {} }` on both clusters
joins a pynatsd cluster and a nats-server one (either dialing), two pynatsd clusters, and (the
reference) two nats-server clusters, messages crossing both ways and `/varz` saying TLS is
required; a TLS gateway dialing a cluster that does not speak TLS, or one whose certificate
another CA signed, logs the same handshake error line as nats-server and no gateway forms."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from gateway.test_gateway_faults_vs_nats_server import _across
from support.certs import server_tls_block
from support.cluster import GO, PY
from support.natsserver import nats_server_binary
from support.processes import wait_for_log_line
from support.supercluster import SuperCluster

pytestmark = pytest.mark.skipif(nats_server_binary() is None, reason="nats-server not found")

REFUSAL_TIMEOUT = 15.0


@pytest.mark.parametrize(
    "kinds", [(PY, GO), (GO, PY), (PY, PY), (GO, GO)], ids=["py-go", "go-py", "py-py", "go-go"]
)
async def test_tls_gateway_forms_and_carries_messages(
    tmp_path: Path, kinds: tuple[str, str]
) -> None:
    tls = server_tls_block(tmp_path, "gateway")
    clusters = {"A": [kinds[0]], "B": [kinds[1]]}
    with SuperCluster(
        tmp_path, clusters, dials={"A": ["B"]}, gateway_extra={"A": tls, "B": tls}
    ) as sc:
        await asyncio.to_thread(sc.start)
        a, b = sc.cluster("A")[0], sc.cluster("B")[0]
        assert await _across(a.url, b.url) == ["to.a:y", "to.b:x"]
        for node in (a, b):
            varz = node.http("/varz")["gateway"]
            assert (varz.get("tls_required"), varz.get("tls_verify")) == (True, True), node.name
            assert varz["tls_timeout"] == 3


def _refusal(directory: Path, kind: str, peer_tls: str) -> tuple[str, int, int]:
    """A TLS cluster A (one server of `kind`) dialing a nats-server cluster B with `peer_tls`
    in its gateway block: A's handshake error line, and the gateways each has once logged."""
    directory.mkdir()
    tls = server_tls_block(directory, "gateway")
    with SuperCluster(
        directory,
        {"A": [kind], "B": [GO]},
        dials={"A": ["B"]},
        gateway_extra={"A": tls, "B": peer_tls},
    ) as sc:
        sc.start(wait=False)
        a, b = sc.cluster("A")[0], sc.cluster("B")[0]
        assert a.process is not None
        line = wait_for_log_line(
            a.process.log_text, r"TLS gateway handshake error", REFUSAL_TIMEOUT
        )
        return line, _gateways(a.http("/gatewayz")), _gateways(b.http("/gatewayz"))


def _gateways(gatewayz: dict[str, object]) -> int:
    return sum(
        len(gatewayz.get(key) or {})  # type: ignore[arg-type]
        for key in ("outbound_gateways", "inbound_gateways")
    )


def test_a_remote_without_tls_is_refused(tmp_path: Path) -> None:
    go = _refusal(tmp_path / GO, GO, "")
    py = _refusal(tmp_path / PY, PY, "")
    not_tls = "tls: first record does not look like a TLS handshake"
    assert go[0] == f"[ERR] TLS gateway handshake error: {not_tls}"
    assert py == go
    assert go[1:] == (0, 0)


def test_a_remote_with_a_certificate_of_another_ca_is_refused(tmp_path: Path) -> None:
    results = []
    for kind in (GO, PY):
        other = server_tls_block(tmp_path, name=f"intruder-{kind}", ca_name=f"other-{kind}")
        results.append(_refusal(tmp_path / kind, kind, other))
    go, py = results
    assert go[0].startswith("[ERR] TLS gateway handshake error: ")
    assert py[0].startswith("[ERR] TLS gateway handshake error: ")
    assert py[1:] == go[1:] == (0, 0)
