"""The `mqtt {}` block as nats-server's parseMQTT reads it, and the start-up checks of its
validateMQTTOptions; the start-up refusal compared with nats-server's."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from pynatsd.config import load_config, startup_errors
from pynatsd.config.mqtt import NEEDS_JETSTREAM, USER_WITH_USERS
from pynatsd.flags import apply_flags
from pynatsd.options import Options
from support.certs import loopback_server_files
from support.natsserver import NATS_SERVER, require_nats_server
from support.processes import PYNATSD


def load(tmp_path: Path, text: str) -> Options:
    path = tmp_path / "server.conf"
    path.write_text(text)
    return load_config(path).options


def test_block_fields(tmp_path: Path) -> None:
    opts = load(
        tmp_path,
        """mqtt {
            listen: "127.0.0.1:1884"
            authorization { user: "m", password: "p", timeout: 3 }
            no_auth_user: "x"
            ack_wait: "5s"
            max_ack_pending: 100
            js_domain: "d"
            stream_replicas: 1
            consumer_memory_storage: true
            consumer_inactive_threshold: "1m"
            reject_qos2_publish: true
            downgrade_qos2_subscribe: true
        }""",
    )
    mqtt = opts.mqtt
    assert mqtt is not None
    assert (mqtt.host, mqtt.port) == ("127.0.0.1", 1884)
    assert (mqtt.username, mqtt.password, mqtt.auth_timeout) == ("m", "p", 3.0)
    assert (mqtt.ack_wait, mqtt.max_ack_pending, mqtt.js_domain) == (5.0, 100, "d")
    assert mqtt.consumer_memory_storage and mqtt.reject_qos2_publish
    assert mqtt.downgrade_qos2_subscribe and mqtt.consumer_inactive_threshold == 60.0


def test_tls_block(tmp_path: Path) -> None:
    """The block's `tls` is read as the client listener's (parseTLS), its files read."""
    cert, key, ca = loopback_server_files(tmp_path)
    opts = load(
        tmp_path,
        f"""mqtt {{ port: 1883, tls {{
            cert_file: "{cert}", key_file: "{key}", ca_file: "{ca}"
            verify_and_map: true, timeout: 3, pinned_certs: ["{"ab" * 32}"]
        }} }}""",
    )
    mqtt = opts.mqtt
    assert mqtt is not None
    assert (mqtt.tls_cert, mqtt.tls_key, mqtt.tls_ca_cert) == (cert, key, ca)
    assert mqtt.tls_verify and mqtt.tls_map and mqtt.tls_timeout == 3.0
    assert mqtt.tls_pinned_certs == ["ab" * 32]


def test_startup_checks(tmp_path: Path) -> None:
    assert startup_errors(load(tmp_path, "mqtt { port: 1883 }")) == [NEEDS_JETSTREAM]
    assert startup_errors(load(tmp_path, "jetstream: true\nmqtt { port: 1883 }")) == []
    assert startup_errors(load(tmp_path, "mqtt { host: x }")) == []  # no port: no listener
    users = "jetstream: true\nauthorization { users: [{user: a, password: b}] }\n"
    text = users + "mqtt { port: 1883, authorization { user: m, password: p } }"
    assert startup_errors(load(tmp_path, text)) == [USER_WITH_USERS]
    # A leaf node may use a JetStream elsewhere (js_domain): no local one needed.
    leaf = "leafnodes { port: 7422 }\nmqtt { port: 1883, js_domain: hub }"
    assert startup_errors(load(tmp_path, leaf)) == []
    remote = "leafnodes { remotes: [{url: nats://h:7422}] }\nmqtt { port: 1883 }"
    assert startup_errors(load(tmp_path, remote)) == []


def test_mqtt_port_flag() -> None:
    opts = apply_flags(Options(), {"mqtt_port": 1999})
    assert opts.mqtt is not None and opts.mqtt.port == 1999


@pytest.mark.parametrize(
    "conf",
    [
        "mqtt { port: 0 }\nmqtt { port: 18999 }",
        "jetstream: true\nauthorization { users: [{user: a, password: b}] }\n"
        "mqtt { port: 18999, authorization { token: t } }",
        "gateway { name: a, port: -1 }\nmqtt { port: 18999 }",
        "jetstream: true\n"
        'mqtt { port: 18999, tls { cert_file: "/no.pem", key_file: "/no-key.pem" } }',
    ],
)
def test_startup_refusal_vs_nats_server(tmp_path: Path, conf: str) -> None:
    """Both refuse to start with the same error line (after the program's name)."""
    require_nats_server()
    path = tmp_path / "server.conf"
    path.write_text(conf)
    lines = {}
    for name, cmd in (("nats-server", [str(NATS_SERVER)]), ("pynatsd", list(PYNATSD))):
        done = subprocess.run(
            [*cmd, "-c", str(path), "-p", "-1"], capture_output=True, timeout=30, text=True
        )
        assert done.returncode == 1
        last = (done.stderr or done.stdout).strip().splitlines()[-1]
        lines[name] = last.split(": ", 1)[1]
    assert lines["pynatsd"] == lines["nats-server"]
