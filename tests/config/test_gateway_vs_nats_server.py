"""The `gateway {}` block, side by side: each file goes through `nats-server -t -c` and pynatsd's
`-t` check, and both must accept it or report the same errors and warnings; then what both
refuse to start with (validateGatewayOptions, and the gateway and cluster names that must
agree)."""

from __future__ import annotations

from pathlib import Path

import pytest

from pynatsd.config import ConfigError, check_config, load_config, startup_errors
from support.configcheck import assert_check_agrees, nats_server_startup_error
from support.natsserver import nats_server_binary

NATS_SERVER = nats_server_binary()
pytestmark = pytest.mark.skipif(NATS_SERVER is None, reason="nats-server binary not found")

CONFIGS = {
    "every key": """
gateway {
  name: "A"
  listen: "127.0.0.1:7222"
  authorization {
    user: gwu
    password: gwp
    timeout: 3
  }
  advertise: "10.0.0.1:7222"
  connect_retries: 3
  connect_backoff: true
  reject_unknown_cluster: true
  write_deadline: "5s"
  gateways: [
    {name: "B", url: "nats://127.0.0.1:7223"}
    {name: "C", urls: ["nats://127.0.0.1:7224", "nats://u:p@127.0.0.1:7225"]}
  ]
}
""",
    "host and port": "gateway {\n  name: A\n  host: 127.0.0.1\n  port: 7222\n}\n",
    "name with a space": 'gateway {\n  name: "a b"\n  port: 7222\n}\n',
    "name of a wrong type": "gateway {\n  name: 5\n}\n",
    "bad listen port": 'gateway {\n  listen: "127.0.0.1:x"\n}\n',
    "port of a wrong type": 'gateway {\n  port: "x"\n}\n',
    "users in authorization": """
gateway {
  authorization {
    users: [{user: a, password: b}]
  }
}
""",
    "token in authorization": "gateway {\n  authorization {\n    token: abc\n  }\n}\n",
    "gateways of a wrong type": "gateway {\n  name: A\n  gateways: 5\n}\n",
    "gateway entry of a wrong type": "gateway {\n  name: A\n  gateways: [\n    5\n  ]\n}\n",
    "bad gateway url": """
gateway {
  name: A
  gateways: [
    {name: B, url: "nats://[::1"}
  ]
}
""",
    "duplicate gateway urls": """
gateway {
  name: A
  port: 7222
  gateways: [
    {name: B, urls: ["nats://a:1", "nats://a:1"]}
  ]
}
""",
    "unknown gateway entry field": """
gateway {
  name: A
  gateways: [
    {name: B, url: "nats://a:1", foo: 1}
  ]
}
""",
    "unknown field": "gateway {\n  name: A\n  foo: 1\n}\n",
    "not a map": "gateway: 5\n",
    "reject unknown of a wrong type": 'gateway {\n  reject_unknown: "x"\n}\n',
}


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_gateway_block_agrees(name: str, tmp_path: Path) -> None:
    assert_check_agrees(CONFIGS[name], tmp_path, check_config, ConfigError)


def test_gateway_block_values(tmp_path: Path) -> None:
    path = tmp_path / "main.conf"
    path.write_text(CONFIGS["every key"])
    gateway = load_config(path).options.gateway
    assert gateway is not None
    assert (gateway.name, gateway.host, gateway.port) == ("A", "127.0.0.1", 7222)
    assert (gateway.username, gateway.password, gateway.auth_timeout) == ("gwu", "gwp", 3)
    assert (gateway.advertise, gateway.connect_retries, gateway.connect_backoff) == (
        "10.0.0.1:7222",
        3,
        True,
    )
    assert gateway.reject_unknown and gateway.write_deadline == 5
    assert [(r.name, r.urls) for r in gateway.gateways] == [
        ("B", ["nats://127.0.0.1:7223"]),
        ("C", ["nats://127.0.0.1:7224", "nats://u:p@127.0.0.1:7225"]),
    ]


STARTUP = {
    "no name": "gateway { port: -1 }\n",
    "no port": "gateway { name: A }\n",
    "remote without a name": 'gateway { name: A, port: -1, gateways: [{url: "nats://a:1"}] }\n',
    "remote without a url": "gateway { name: A, port: -1, gateways: [{name: B}] }\n",
    "cluster name conflict": "cluster { name: C, port: -1 }\ngateway { name: A, port: -1 }\n",
}


@pytest.mark.parametrize("name", sorted(STARTUP))
def test_gateway_startup_errors_agree(name: str, tmp_path: Path) -> None:
    """What both servers refuse to start with (not a `-t` error)."""
    path = tmp_path / "main.conf"
    path.write_text(STARTUP[name])
    assert startup_errors(load_config(path).options) == [nats_server_startup_error(path)]


def test_gateway_name_becomes_the_cluster_name(tmp_path: Path) -> None:
    path = tmp_path / "main.conf"
    path.write_text("cluster { port: -1 }\ngateway { name: A, port: -1 }\n")
    options = load_config(path).options
    assert options.cluster is not None and options.cluster.name == "A"
    assert startup_errors(options) == []
