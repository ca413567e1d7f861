"""The `cluster {}` block, side by side: each file goes through `nats-server -t -c` and
pynatsd's `-t` check, and both must accept it or report the same errors and warnings (text and
position). nats-server walks the block in Go map order, so lines are compared as sets and each
file holds at most one error that ends the block (a failed type assertion)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from cryptography.x509.oid import NameOID

from pynatsd.config import ConfigError, check_config, load_config, startup_errors
from support.certs import make_ca, make_cert
from support.configcheck import assert_check_agrees, nats_server_startup_error
from support.natsserver import nats_server_binary

NATS_SERVER = nats_server_binary()
pytestmark = pytest.mark.skipif(NATS_SERVER is None, reason="nats-server binary not found")

CONFIGS = {
    "every key": """
cluster {
  name: "C1"
  listen: "127.0.0.1:6222"
  routes: [
    "nats-route://127.0.0.1:6223"
    "nats://user:pass@127.0.0.1:6224"
  ]
  authorization {
    user: ruser
    password: rpass
    timeout: 3
  }
  permissions {
    import: {allow: ["a.>"], deny: "a.b"}
    export: ["c.>", "d"]
  }
  advertise: "10.0.0.1:6222"
  no_advertise: true
  connect_retries: 3
  connect_backoff: true
  pool_size: 5
  accounts: [A, B]
  compression: s2_auto
  ping_interval: "10s"
  ping_max: 3
  write_deadline: "5s"
  write_timeout: close
}
""",
    "host and port": "cluster {\n  host: 127.0.0.1\n  port: 6222\n  cluster_advertise: x\n}\n",
    "net alias and a bare port": "cluster {\n  net: 127.0.0.1\n  listen: 6222\n}\n",
    "name with a space": 'cluster {\n  name: "a b"\n  port: 6222\n}\n',
    "bad listen port": 'cluster {\n  listen: "127.0.0.1:x"\n}\n',
    "bad listen address": 'cluster {\n  listen: "foo"\n}\n',
    "listen of a wrong type": "cluster {\n  listen: true\n}\n",
    "port of a wrong type": 'cluster {\n  port: "x"\n}\n',
    "name of a wrong type": "cluster {\n  name: 5\n}\n",
    "routes of a wrong type": 'cluster {\n  routes: "nats://a:1"\n}\n',
    "route of a wrong type": "cluster {\n  routes: [\n    5\n  ]\n  foo: 1\n}\n",
    "duplicate and bad routes": """
cluster {
  port: 6222
  routes: [
    "nats://a:1"
    "nats://a:1"
    "://bad"
    "nats://b:x"
    "nats://c:1/%zz"
    "nats://[::1"
  ]
}
""",
    "users in authorization": """
cluster {
  authorization {
    users: [{user: a, password: b}]
  }
}
""",
    "token in authorization": "cluster {\n  authorization {\n    token: abc\n  }\n}\n",
    "permissions in authorization": """
cluster {
  port: 6222
  authorization {
    user: a
    password: b
    permissions { import: "x" }
  }
}
""",
    "queue in permissions": 'cluster {\n  permissions {\n    export: "foo bar"\n  }\n}\n',
    "bad subject in permissions": 'cluster {\n  permissions {\n    import: "a..b"\n  }\n}\n',
    "responses in permissions": """
cluster {
  permissions {
    import: "a"
    allow_responses: true
  }
}
""",
    "ping interval over the cap": 'cluster {\n  port: 6222\n  ping_interval: "1m"\n}\n',
    "ping interval in seconds": "cluster {\n  port: 6222\n  ping_interval: 60\n}\n",
    "bad ping interval": 'cluster {\n  ping_interval: "x"\n}\n',
    "write deadline in seconds": "cluster {\n  write_deadline: 5\n}\n",
    "bad write timeout": "cluster {\n  write_timeout: sometimes\n}\n",
    "compression forms": """
cluster {
  port: 6222
  compression: {mode: s2_auto, rtt_thresholds: ["10ms", "50ms", "100ms"]}
}
""",
    "compression on": "cluster {\n  compression: true\n}\n",
    "compression of a wrong type": "cluster {\n  compression: 5\n}\n",
    "bad compression threshold": """
cluster {
  compression: {
    mode: s2_auto
    rtt_thresholds: ["1x"]
  }
}
""",
    "unknown compression field": "cluster {\n  compression: {\n    foo: 1\n  }\n}\n",
    "accounts of a wrong type": "cluster {\n  accounts: 5\n}\n",
    "account of a wrong type": "cluster {\n  accounts: [\n    A\n    5\n  ]\n}\n",
    "authorization of a wrong type": "cluster {\n  authorization: 5\n}\n",
    "permissions of a wrong type": "cluster {\n  permissions: 5\n}\n",
    "bad authorization timeout": 'cluster {\n  authorization {\n    timeout: "x"\n  }\n}\n',
    "compression mode of a wrong type": "cluster {\n  compression: {\n    mode: 5\n  }\n}\n",
    "pool size of a wrong type": "cluster {\n  pool_size: true\n}\n",
    "unknown field": "cluster {\n  port: 6222\n  foo: 1\n}\n",
    "not a map": "cluster: 5\n",
    "tls without a key": "cluster {\n  tls {\n    cert_file: x\n  }\n}\n",
    "tls with an unknown field": "cluster {\n  tls {\n    foo: x\n  }\n}\n",
}


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_cluster_block_agrees(name: str, tmp_path: Path) -> None:
    assert_check_agrees(CONFIGS[name], tmp_path, check_config, ConfigError)


def test_cluster_block_values(tmp_path: Path) -> None:
    """What the block sets, with nats-server's defaults settled (setBaselineOptions)."""
    path = tmp_path / "main.conf"
    path.write_text(CONFIGS["every key"])
    cluster = load_config(path).options.cluster
    assert cluster is not None
    assert (cluster.name, cluster.host, cluster.port) == ("C1", "127.0.0.1", 6222)
    assert cluster.routes == ["nats-route://127.0.0.1:6223", "nats://user:pass@127.0.0.1:6224"]
    assert (cluster.username, cluster.password, cluster.auth_timeout) == ("ruser", "rpass", 3)
    assert cluster.permissions is not None and cluster.permissions.publish is not None
    assert cluster.permissions.publish.allow == ["a.>"]
    assert cluster.permissions.publish.deny == ["a.b"]
    assert cluster.permissions.subscribe is not None
    assert cluster.permissions.subscribe.allow == ["c.>", "d"]
    assert (cluster.advertise, cluster.no_advertise) == ("10.0.0.1:6222", True)
    assert (cluster.connect_retries, cluster.connect_backoff) == (3, True)
    assert (cluster.pool_size, cluster.accounts) == (5, ["A", "B", "$SYS"])
    assert cluster.compression == "s2_auto"
    assert (cluster.ping_interval, cluster.ping_max) == (10, 3)
    assert (cluster.write_deadline, cluster.write_timeout) == (5, "close")


def test_cluster_defaults(tmp_path: Path) -> None:
    path = tmp_path / "main.conf"
    path.write_text("ping_interval: '45s'\ncluster { port: 6222 }\n")
    cluster = load_config(path).options.cluster
    assert cluster is not None
    assert (cluster.name, cluster.host, cluster.routes) == ("", "0.0.0.0", [])
    assert (cluster.auth_timeout, cluster.tls_timeout) == (2, 2)
    assert (cluster.pool_size, cluster.accounts, cluster.compression) == (3, ["$SYS"], "accept")
    # A route pings at the server's interval, capped at 30 s.
    assert (cluster.ping_interval, cluster.ping_max) == (30, 2)
    path.write_text("port: 4222\n")
    assert load_config(path).options.cluster is None


STARTUP = {
    "unknown compression": 'cluster { port: -1, compression: "bogus" }\n',
    "duplicate pinned account": "cluster { port: -1, accounts: [A, A] }\n",
    "pinned accounts without a pool": "cluster { port: -1, accounts: [A], pool_size: -1 }\n",
}


@pytest.mark.parametrize("name", sorted(STARTUP))
def test_cluster_startup_errors_agree(name: str, tmp_path: Path) -> None:
    """validateCluster: what both servers refuse to start with (not a `-t` error)."""
    path = tmp_path / "main.conf"
    path.write_text(STARTUP[name])
    assert startup_errors(load_config(path).options) == [nats_server_startup_error(path)]


@pytest.mark.parametrize(
    ("written", "mode"),
    [
        ("on", "s2_fast"),
        ("Auto", "s2_auto"),
        ("true", "s2_fast"),
        ("not_supported", "not supported"),
    ],
)
def test_compression_mode_is_settled_to_its_name(written: str, mode: str, tmp_path: Path) -> None:
    path = tmp_path / "main.conf"
    path.write_text(f'cluster {{ port: 6222, compression: "{written}" }}\n')
    cluster = load_config(path).options.cluster
    assert cluster is not None and cluster.compression == mode


def test_cluster_tls_is_read(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A valid route `tls {}` passes `-t` on both servers; pynatsd keeps its files and
    timeout for the routes (tests/cluster/test_tls_vs_nats_server.py runs them)."""
    ca = make_ca()
    ca_path, _ = ca.write(tmp_path, "ca")
    cert, key = make_cert(ca, [(NameOID.COMMON_NAME, "route")], ips=("127.0.0.1",)).write(
        tmp_path, "route"
    )
    (tmp_path / "main.conf").write_text(
        "cluster {\n  port: 6222\n  tls {\n"
        f'    cert_file: "{cert}"\n    key_file: "{key}"\n    ca_file: "{ca_path}"\n'
        "    verify: true\n    timeout: 3\n  }\n}\n"
    )
    assert NATS_SERVER is not None
    real = subprocess.run(
        [NATS_SERVER, "-t", "-c", "main.conf"], cwd=tmp_path, capture_output=True, timeout=30
    )
    assert real.returncode == 0
    monkeypatch.chdir(tmp_path)
    loaded = check_config("main.conf")
    assert loaded.ignored == []
    cluster = loaded.options.cluster
    assert cluster is not None and cluster.tls_timeout == 3
    assert cluster.tls is not None and (cluster.tls.cert_file, cluster.tls.timeout) == (cert, 3)
