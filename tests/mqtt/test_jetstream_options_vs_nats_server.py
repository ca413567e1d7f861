"""The `mqtt {}` block's JetStream settings side by side: the domain (`js_domain`, or this
server's JetStream domain) in the session records' subjects; and `stream_replicas` and
`consumer_replicas` on a server that is not a clustered JetStream: the MQTT streams are made
with `stream_replicas` (1 when unset), so more than 1 refuses every MQTT client of an account
whose streams are still to be made, and streams made before with another count are used with
a warning; `consumer_replicas` is ignored with a warning when the configuration is read.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path

import pytest

from pynatsd.mqtt import packets as p
from support.mqtt import MQTTServer, NATSClient, connect_packet, mqtt_servers, raw_exchange
from support.natsserver import require_nats_server
from support.processes import wait_for_log_line

pytestmark = pytest.mark.timeout(120)


def logged(server: MQTTServer, pattern: str) -> str:
    """The server's first log line matching `pattern`, as "[LEVEL] text"."""
    line = wait_for_log_line(server.process.log_text, pattern)
    return re.sub(r"\[\d+\] \S+ \S+ \[\w+\] ", "", line)  # a line without a client


def side_by_side(
    directory: Path, mqtt_extra: str, scenario: Callable[[MQTTServer], object]
) -> object:
    require_nats_server()
    with mqtt_servers(directory, mqtt_extra=mqtt_extra) as servers:
        results = {s.name: scenario(s) for s in servers}
    assert results["pynatsd"] == results["nats-server"], results
    return results["pynatsd"]


def test_more_than_one_replica_refuses_clients(tmp_path: Path) -> None:
    def scenario(server: MQTTServer) -> object:
        answer = raw_exchange(server.mqtt_port, connect_packet("r1"))
        made = logged(server, "Creating MQTT streams")
        refused = logged(server, "unable to connect")
        return answer, made, refused

    assert side_by_side(tmp_path, "stream_replicas: 3", scenario) == (
        ([], True),
        '[INF] Creating MQTT streams/consumers with replicas 3 for account "$G"',
        '[ERR] unable to connect: create sessions stream for account "$G": '
        "replicas > 1 not supported in non-clustered mode (10074)",
    )


@pytest.mark.parametrize("setting", ["stream_replicas: 1", "consumer_replicas: 2"])
def test_one_replica_connects(tmp_path: Path, setting: str) -> None:
    def scenario(server: MQTTServer) -> object:
        answer = raw_exchange(server.mqtt_port, connect_packet("r2"))
        return answer, logged(server, "Creating MQTT streams")

    assert side_by_side(tmp_path, setting, scenario) == (
        ([p.ConnAck(False, 0)], False),
        '[INF] Creating MQTT streams/consumers with replicas 1 for account "$G"',
    )


def test_existing_streams_are_used_with_a_warning(tmp_path: Path) -> None:
    """Streams made with 1 replica, the server restarted with `stream_replicas: 2`: a warning
    per stream, and clients connect."""

    def scenario(server: MQTTServer) -> object:
        raw_exchange(server.mqtt_port, connect_packet("r3"))
        text = server.conf.read_text()
        server.conf.write_text(text.replace("mqtt {", "mqtt {\n stream_replicas: 2\n", 1))
        server.restart()
        answer = raw_exchange(server.mqtt_port, connect_packet("r3"))
        wait_for_log_line(server.process.log_text, "retained messages stream replicas mismatch")
        warnings = [
            line.split("[WRN] ", 1)[1]
            for line in server.process.log_text().splitlines()
            if "replicas mismatch" in line
        ]
        return answer, warnings

    answer, warnings = side_by_side(tmp_path, "", scenario)  # type: ignore[misc]
    assert answer == ([p.ConnAck(False, 0)], False)
    assert warnings[0] == (
        "MQTT sessions stream replicas mismatch: current is 1 but configuration is 2 "
        "for '$G > $MQTT_sess'"
    )
    assert len(warnings) == 5


def sessions_stream(server: MQTTServer) -> tuple[list[str], int]:
    """`$MQTT_sess`'s subjects and message count, as a NATS client asks for them."""
    nats = NATSClient(server.nats_port)
    try:
        nats.sub("_INBOX.sess", 9)
        nats.send("PUB $JS.API.STREAM.INFO.$MQTT_sess _INBOX.sess 0\r\n\r\n")
        info = json.loads(nats.read_msg().payload)
        return info["config"]["subjects"], info["state"]["messages"]
    finally:
        nats.close()


@pytest.mark.parametrize("js_domain", ["", "js_domain: D"])
def test_domain_names_the_session_subjects(tmp_path: Path, js_domain: str) -> None:
    """With a JetStream domain (this server's, or `js_domain` naming it), session records
    are on `$MQTT.sess.<domain>.<hash>`, and a persistent session resumes after a restart."""
    require_nats_server()
    with mqtt_servers(tmp_path, mqtt_extra=js_domain, js_extra="domain: D") as servers:
        results = {}
        for server in servers:
            first = raw_exchange(server.mqtt_port, connect_packet("dom", clean_start=False))
            made = logged(server, "Creating MQTT streams")
            stream = sessions_stream(server)
            server.restart()
            again = raw_exchange(server.mqtt_port, connect_packet("dom", clean_start=False))
            results[server.name] = (made, first, stream, again)
    assert results["pynatsd"] == results["nats-server"], results
    made, first, stream, again = results["pynatsd"]
    assert made.endswith('"$G" in domain "D"') == bool(js_domain)
    assert (first, stream, again) == (
        ([p.ConnAck(False, 0)], False),
        (["$MQTT.sess.D.>"], 1),
        ([p.ConnAck(True, 0)], False),
    )
