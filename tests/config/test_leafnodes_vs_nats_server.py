"""The `leafnodes {}` block, side by side: each file goes through `nats-server -t -c` and
pynatsd's `-t` check, and both must accept it or report the same errors (text and position);
then the values pynatsd reads from a full block, and what both refuse to start with."""

from __future__ import annotations

from pathlib import Path

import pytest

from pynatsd.config import ConfigError, check_config, load_config, startup_errors
from support.configcheck import assert_check_agrees, nats_server_startup_error
from support.natsserver import nats_server_binary

pytestmark = pytest.mark.skipif(nats_server_binary() is None, reason="nats-server not found")

FULL = """
accounts { A: {}, B: {} }
leafnodes {
  listen: "127.0.0.1:7422"
  authorization {
    users: [ {user: la, password: pa, account: A}, {user: lb, password: pb, account: B} ]
    timeout: 3
  }
  advertise: "10.0.0.1:7422"
  no_advertise: true
  reconnect: "2s"
  remotes: [
    { url: "nats-leaf://u:p@127.0.0.1:7500", account: A, deny_imports: ["x.>"],
      deny_exports: "y.>" }
    { urls: ["nats-leaf://127.0.0.1:7501", "nats-leaf://127.0.0.1:7502"], account: B }
  ]
}
"""

CONFIGS = {
    "every key": FULL,
    "not a map": "leafnodes: 5\n",
    "unknown field": "leafnodes {\n  port: 7422\n  foo: 1\n}\n",
    "unknown remote field": 'leafnodes {\n  remotes: [ { url: "nats://h:1", foo: 1 } ]\n}\n',
    "remotes not an array": "leafnodes {\n  remotes: 5\n}\n",
    "bad remote url": "leafnodes {\n  remotes: [ { url: 5 } ]\n}\n",
    "bad nkey seed": 'leafnodes {\n  remotes: [ { url: "nats://h:1", nkey: "SUBAD" } ]\n}\n',
    "bad authorization nkey": "leafnodes {\n  authorization { nkey: UBAD }\n}\n",
    "unknown authorization field": "leafnodes {\n  authorization { foo: 1 }\n}\n",
    "port of a wrong type": "leafnodes {\n  port: true\n}\n",
}


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_leafnodes_block_agrees(name: str, tmp_path: Path) -> None:
    assert_check_agrees(CONFIGS[name], tmp_path, check_config, ConfigError)


def test_leafnodes_block_values(tmp_path: Path) -> None:
    path = tmp_path / "leaf.conf"
    path.write_text(FULL)
    leaf = load_config(path).options.leafnodes
    assert leaf is not None
    assert (leaf.host, leaf.port, leaf.advertise, leaf.no_advertise) == (
        "127.0.0.1",
        7422,
        "10.0.0.1:7422",
        True,
    )
    assert [(u.username, u.account) for u in leaf.users] == [("la", "A"), ("lb", "B")]
    assert (leaf.auth_timeout, leaf.reconnect_interval) == (3.0, 2.0)
    first, second = leaf.remotes
    assert first.urls == ["nats-leaf://u:p@127.0.0.1:7500"]
    assert (first.local_account, first.deny_imports, first.deny_exports) == ("A", ["x.>"], ["y.>"])
    assert second.urls == ["nats-leaf://127.0.0.1:7501", "nats-leaf://127.0.0.1:7502"]


def test_leaf_listener_and_gateway_need_a_system_account(tmp_path: Path) -> None:
    """Not a `-t` error: both servers refuse to start with it."""
    path = tmp_path / "main.conf"
    path.write_text("leafnodes { port: -1 }\ngateway { name: A, port: -1 }\n")
    assert check_config(path).warnings == []
    assert startup_errors(load_config(path).options) == [nats_server_startup_error(path)]


def test_a_remote_mixing_websocket_and_plain_urls(tmp_path: Path) -> None:
    """Not a `-t` error: both servers refuse to start with it, the password redacted."""
    path = tmp_path / "main.conf"
    urls = '["ws://u:pw@127.0.0.1:1", "nats-leaf://127.0.0.1:2"]'
    path.write_text(f"leafnodes {{ remotes: [ {{ urls: {urls} }} ] }}\n")
    assert check_config(path).warnings == []
    assert startup_errors(load_config(path).options) == [nats_server_startup_error(path)]


@pytest.mark.parametrize(
    "text",
    [
        # A system account named (nats-server starts with it).
        "leafnodes { port: -1 }\ngateway { name: A, port: -1 }\n"
        "accounts { SYS: {} }\nsystem_account: SYS\n",
        # Remotes without a leaf listener need none (nor does nats-server).
        'leafnodes { remotes: [{url: "nats://127.0.0.1:1"}] }\ngateway { name: A, port: -1 }\n',
    ],
    ids=["system account named", "remotes only"],
)
def test_leafs_and_gateway_that_start(text: str, tmp_path: Path) -> None:
    path = tmp_path / "main.conf"
    path.write_text(text)
    assert startup_errors(load_config(path).options) == []
