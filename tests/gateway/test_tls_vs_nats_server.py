"""Gateway TLS side by side with nats-server: the same `gateway { tls {} }` on both clusters
joins a pynatsd cluster and a nats-server one (either dialing), two pynatsd clusters, and (the
reference) two nats-server clusters, messages crossing both ways and `/varz` saying TLS is
required; a TLS gateway dialing a cluster that does not speak TLS, or one whose certificate
another CA signed, logs the same handshake error line as nats-server and no gateway forms."""

from __future__ import annotations

import asyncio
import re
import signal
from collections.abc import Iterator
from contextlib import contextmanager
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


@contextmanager
def _refused(
    directory: Path, kind: str, a_tls: str, b_tls: str
) -> Iterator[tuple[SuperCluster, str]]:
    """A cluster A (one server of `kind`) dialing a nats-server cluster B, with `a_tls` and
    `b_tls` in their gateway blocks, once A has logged a handshake error: the super-cluster
    and that line."""
    with SuperCluster(
        directory,
        {"A": [kind], "B": [GO]},
        dials={"A": ["B"]},
        gateway_extra={"A": a_tls, "B": b_tls},
    ) as sc:
        sc.start(wait=False)
        a = sc.cluster("A")[0]
        assert a.process is not None
        line = wait_for_log_line(
            a.process.log_text, r"TLS gateway handshake error", REFUSAL_TIMEOUT
        )
        yield sc, line


def _refusal(directory: Path, kind: str, peer_tls: str) -> tuple[str, int, int]:
    """A TLS cluster A (one server of `kind`) dialing a nats-server cluster B with `peer_tls`
    in its gateway block: A's handshake error line, and the gateways each has once logged."""
    directory.mkdir()
    tls = server_tls_block(directory, "gateway")
    with _refused(directory, kind, tls, peer_tls) as (sc, line):
        a, b = sc.cluster("A")[0], sc.cluster("B")[0]
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


def _reload_cluster_a(sc: SuperCluster, gateway_extra: str) -> None:
    """Cluster A's server reads its file again (SIGHUP) with `gateway_extra` in its gateway."""
    a = sc.cluster("A")[0]
    sc.gateway_extra["A"] = gateway_extra
    (sc.directory / f"{a.name}.conf").write_text(sc.config_text(a))
    assert a.process is not None
    a.process.proc.send_signal(signal.SIGHUP)


async def _tls_reload(directory: Path, kind: str) -> tuple[str, list[str], str, str]:
    """A cluster A (one server of `kind`) whose certificate cluster B does not trust is given
    B's TLS block by a reload: the gateway forms and carries messages. A reload that changes
    anything else in the gateway block is refused and the gateway stays up; one that pins
    certificates B's is not among closes the connections. Returns what A logged at the
    refused handshake, what crossed, the refusal's opening words and the closing line."""
    directory.mkdir()
    good = server_tls_block(directory, "gateway")
    other = server_tls_block(directory, name="stranger", ca_name="other")
    with _refused(directory, kind, other, good) as (sc, refused):
        a, b = sc.cluster("A")[0], sc.cluster("B")[0]
        assert a.process is not None
        _reload_cluster_a(sc, good)
        await asyncio.to_thread(sc.wait_up)
        crossed = await _across(a.url, b.url)
        _reload_cluster_a(sc, good + "  reject_unknown_cluster: true\n")
        wait_for_log_line(
            a.process.log_text, r"config reload not supported for Gateway", REFUSAL_TIMEOUT
        )
        # The old and new values are each server's own print of its options.
        refusal = re.search(r"\[ERR\] ([^\n]*? for Gateway): old=", a.process.log_text())
        assert refusal is not None
        assert await _across(a.url, b.url) == crossed
        # Pinned certificates that leave B's out: the connections up are closed.
        pinned = good.replace("timeout: 3", f'timeout: 3\n    pinned_certs: ["{"0" * 64}"]')
        _reload_cluster_a(sc, pinned)
        dropped = wait_for_log_line(a.process.log_text, r"pinned certs reload", REFUSAL_TIMEOUT)
        return refused.split(":")[0], crossed, refusal.group(1), dropped.rsplit("] ", 1)[-1]


async def test_a_reload_changes_the_gateway_tls(tmp_path: Path) -> None:
    go = await _tls_reload(tmp_path / GO, GO)
    py = await _tls_reload(tmp_path / PY, PY)
    assert go == (
        "[ERR] TLS gateway handshake error",
        ["to.a:y", "to.b:x"],
        "Failed to reload server configuration: config reload not supported for Gateway",
        "Disconnect 2 clients due to pinned certs reload",
    )
    assert py == go
