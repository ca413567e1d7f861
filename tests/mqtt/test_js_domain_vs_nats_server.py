"""MQTT on a leaf node whose state is in the hub's JetStream (`mqtt { js_domain: hub }`), side
by side with nats-server: the leaf runs no JetStream, the hub runs JetStream in domain "hub",
and the leaf's MQTT sends its JetStream requests to `$JS.hub.API` across the leaf connection.
A persistent session, its QoS 1 messages while away, retained messages and QoS 1 publish ->
subscribe behave as with a local JetStream, also after the leaf restarts (nothing is on it).
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from pynatsd.mqtt import frames
from pynatsd.mqtt import packets as p
from support.mqtt import (
    Client,
    RawMQTT,
    accepts,
    connect_packet,
    raw_exchange,
    wait_for,
)
from support.natsserver import NATS_SERVER, require_nats_server
from support.ports import free_port
from support.processes import PYNATSD, ServerProcess, start_server, wait_for_log_line

pytestmark = pytest.mark.timeout(180)

_ids = itertools.count()
# A delivery not acknowledged before a restart goes again when its ack_wait has passed.
ACK_WAIT = 'ack_wait: "2s"'


@dataclass
class Leaf:
    name: str
    mqtt_port: int
    process: ServerProcess

    def restart(self) -> None:
        self.process.stop()
        self.process.start()
        wait_for(lambda: accepts(self.mqtt_port), f"{self.name} MQTT listener")
        registered(self.process)


def registered(process: ServerProcess) -> None:
    """The leaf connection is up (its MQTT needs the hub's JetStream)."""
    wait_for_log_line(process.log_text, "Leafnode connection (registered|created)")


def start_hub(cmd: list[str], directory: Path, name: str) -> tuple[ServerProcess, int]:
    leaf_port = free_port()
    conf = directory / f"hub-{name}.conf"
    conf.write_text(
        f"server_name: hub_{name}\n"
        f'jetstream {{ store_dir: "{directory / ("hub-" + name)}", domain: hub }}\n'
        f"leafnodes {{ port: {leaf_port} }}\n"
    )
    return start_server(cmd, ["-c", str(conf)]), leaf_port


def start_leaf(
    cmd: list[str], directory: Path, name: str, hub_leaf_port: int, mqtt_extra: str = ""
) -> Leaf:
    mqtt_port = free_port()
    conf = directory / f"leaf-{name}.conf"
    conf.write_text(
        f"server_name: leaf_{name}\n"
        f'leafnodes {{ remotes [ {{ url: "nats://127.0.0.1:{hub_leaf_port}" }} ] }}\n'
        f"mqtt {{ port: {mqtt_port}, js_domain: hub\n{mqtt_extra}\n}}\n"
    )
    process = start_server(cmd, ["-c", str(conf)])
    wait_for(lambda: accepts(mqtt_port), f"{name} MQTT listener")
    registered(process)
    return Leaf(name, mqtt_port, process)


@pytest.fixture(scope="module")
def leaves(tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[Leaf]]:
    """A nats-server leaf on a nats-server hub, and a pynatsd leaf on a hub of each."""
    require_nats_server()
    directory = tmp_path_factory.mktemp("mqtt-js-domain")
    processes: list[ServerProcess] = []
    leaves: list[Leaf] = []
    try:
        hubs = {}
        for hub_name, hub_cmd in (("nats", [str(NATS_SERVER)]), ("py", list(PYNATSD))):
            hub, port = start_hub(hub_cmd, directory, hub_name)
            processes.append(hub)
            hubs[hub_name] = port
        for name, cmd, hub_name in (
            ("nats-server", [str(NATS_SERVER)], "nats"),
            ("pynatsd", list(PYNATSD), "nats"),
            ("pynatsd-on-pynatsd", list(PYNATSD), "py"),
        ):
            leaf = start_leaf(cmd, directory, name, hubs[hub_name], ACK_WAIT)
            leaves.append(leaf)
            processes.append(leaf.process)
        yield leaves
    finally:
        for process in reversed(processes):
            process.stop()


def each(leaves: list[Leaf], scenario: Callable[[Leaf, str], Any]) -> Any:
    """The scenario on each leaf (its own client ids and topics); the same outcome."""
    results = {leaf.name: scenario(leaf, f"d{next(_ids)}") for leaf in leaves}
    assert len({repr(r) for r in results.values()}) == 1, results
    return results["nats-server"]


def seen(client: Client, count: int) -> list[tuple[str, bytes, int, bool]]:
    return [
        (m.topic.split("/", 1)[1], m.payload, m.qos, m.retain) for m in client.wait_messages(count)
    ]


def test_persistent_session_gets_what_came_while_away(leaves: list[Leaf]) -> None:
    def scenario(leaf: Leaf, u: str) -> Any:
        sub = Client(leaf.mqtt_port, f"{u}-sub", clean=False)
        first = sub.connack
        granted = sub.subscribe((f"{u}/t", 1))
        sub.disconnect()
        pub = Client(leaf.mqtt_port, f"{u}-pub")
        pub.publish(f"{u}/t", b"while away", 1)
        sub = Client(leaf.mqtt_port, f"{u}-sub", clean=False)
        again = sub.connack
        away = seen(sub, 1)
        pub.publish(f"{u}/t", b"live", 1)
        both = seen(sub, 2)
        for c in (sub, pub):
            c.disconnect()
        return first, granted, again, away, both

    first, granted, again, away, both = each(leaves, scenario)
    assert (first, granted, again) == ((False, 0), [1], (True, 0))
    assert away == [("t", b"while away", 1, False)]
    assert both[1] == ("t", b"live", 1, False)


def test_retained_and_sessions_are_in_the_hub(leaves: list[Leaf]) -> None:
    """A retained message and a persistent session outlive a restart of the leaf, which keeps
    nothing itself."""
    units = {leaf.name: f"d{next(_ids)}" for leaf in leaves}
    for leaf in leaves:
        u = units[leaf.name]
        pub = Client(leaf.mqtt_port, f"{u}-pub")
        pub.publish(f"{u}/r", b"kept", 1, retain=True)
        sub = Client(leaf.mqtt_port, f"{u}-sub", clean=False)
        sub.subscribe((f"{u}/t", 1))
        for c in (pub, sub):
            c.disconnect()
        leaf.restart()

    def scenario(leaf: Leaf, _: str) -> Any:
        u = units[leaf.name]
        fresh = Client(leaf.mqtt_port, f"{u}-fresh")
        fresh.subscribe((f"{u}/r", 1))
        retained = seen(fresh, 1)
        sub = Client(leaf.mqtt_port, f"{u}-sub", clean=False)
        present = sub.connack
        pub = Client(leaf.mqtt_port, f"{u}-pub2")
        pub.publish(f"{u}/t", b"after restart", 1)
        delivered = seen(sub, 1)
        for c in (fresh, sub, pub):
            c.disconnect()
        return retained, present, delivered

    retained, present, delivered = each(leaves, scenario)
    assert retained == [("r", b"kept", 1, True)]
    assert present == (True, 0)
    assert delivered == [("t", b"after restart", 1, False)]


def test_clean_session_ends_the_stored_one(leaves: list[Leaf]) -> None:
    def scenario(leaf: Leaf, u: str) -> Any:
        sub = Client(leaf.mqtt_port, f"{u}-sub", clean=False)
        sub.subscribe((f"{u}/t", 1))
        sub.disconnect()
        clean = Client(leaf.mqtt_port, f"{u}-sub", clean=True)
        clean.disconnect()
        sub = Client(leaf.mqtt_port, f"{u}-sub", clean=False)
        present = sub.connack
        sub.disconnect()
        return clean.connack, present

    assert each(leaves, scenario) == ((False, 0), (False, 0))


def test_no_reply_refuses_the_client(tmp_path: Path) -> None:
    """A domain nobody answers for: the first client waits `js_api_timeout` for the stream
    lookup and is closed without CONNACK, with nats-server's log line."""
    require_nats_server()
    hub, port = start_hub([str(NATS_SERVER)], tmp_path, "lonely")
    lines = {}
    try:
        for name, cmd in (("nats-server", [str(NATS_SERVER)]), ("pynatsd", list(PYNATSD))):
            extra = 'js_domain: nowhere, js_api_timeout: "500ms"'
            leaf = start_leaf(cmd, tmp_path, f"{name}-nowhere", port, extra)
            try:
                answer = raw_exchange(leaf.mqtt_port, connect_packet("lonely"))
                line = wait_for_log_line(leaf.process.log_text, "unable to connect")
                line = re.sub(r'reply="[^"]*"', "reply=", line)
                lines[name] = (answer, re.sub(r"after [0-9.]+ms", "after <d>", line))
            finally:
                leaf.process.stop()
    finally:
        hub.stop()
    assert lines["pynatsd"] == lines["nats-server"]
    assert lines["pynatsd"] == (
        ([], True),
        '[ERR] unable to connect: lookup sessions stream for account "$G": timeout after <d>: '
        'request type "SL" on "$JS.nowhere.API.STREAM.INFO.$MQTT_sess" (reply=)',
    )


def test_qos2_both_ways(leaves: list[Leaf]) -> None:
    """A QoS 2 message waits in the hub's `$MQTT_qos2in` for its PUBREL and reaches a QoS 2
    subscription through the hub's consumers (its PUBREL through `$MQTT_out`)."""

    def scenario(leaf: Leaf, u: str) -> Any:
        sub = Client(leaf.mqtt_port, f"{u}-sub", clean=False)
        granted = sub.subscribe((f"{u}/q", 2))
        pub = Client(leaf.mqtt_port, f"{u}-pub")
        pub.publish(f"{u}/q", b"exactly once", 2)
        got = seen(sub, 1)
        for c in (sub, pub):
            c.disconnect()
        return granted, got

    assert each(leaves, scenario) == ([2], [("q", b"exactly once", 2, False)])


def test_qos2_waits_for_pubrel_in_the_hub(leaves: list[Leaf]) -> None:
    """A QoS 2 message received (PUBREC) and not released outlives a restart of the leaf in
    the hub's `$MQTT_qos2in`: the PUBREL after it releases it, once."""
    units = {leaf.name: f"d{next(_ids)}" for leaf in leaves}
    answers: dict[str, list[p.Packet]] = {}
    for leaf in leaves:
        u = units[leaf.name]
        watcher = Client(leaf.mqtt_port, f"{u}-watch", clean=False)
        watcher.subscribe((f"{u}/q2", 2))
        watcher.disconnect()
        raw = raw_session(leaf.mqtt_port, f"{u}-pub")
        raw.send(frames.publish(p.Publish(f"{u}/q2".encode(), b"held", 2, packet_id=7)))
        answers[leaf.name] = raw.read_packets(1)
        raw.close()
        leaf.restart()

    def scenario(leaf: Leaf, _: str) -> Any:
        u = units[leaf.name]
        raw = raw_session(leaf.mqtt_port, f"{u}-pub")
        raw.send(frames.pub_response(p.PUBREL, 7))
        got = answers[leaf.name] + raw.read_packets(1)
        raw.send(frames.pub_response(p.PUBREL, 7))  # again: nothing left to release
        got += raw.read_packets(1)
        raw.close()
        watcher = Client(leaf.mqtt_port, f"{u}-watch", clean=False)
        delivered = seen(watcher, 1)
        watcher.disconnect()
        return got, delivered

    assert each(leaves, scenario) == (
        [p.PubRec(7), p.PubComp(7), p.PubComp(7)],
        [("q2", b"held", 2, False)],
    )


def raw_session(port: int, client_id: str) -> RawMQTT:
    raw = RawMQTT(port)
    connect = p.Connect(
        protocol_name=b"MQTT",
        protocol_level=4,
        clean_start=False,
        keep_alive=60,
        client_id=client_id,
    )
    raw.send(frames.connect(connect))
    assert isinstance(raw.read_packets(1)[0], p.ConnAck)
    return raw


def test_pubrel_waits_for_pubcomp_in_the_hub(leaves: list[Leaf]) -> None:
    """QoS 2 to a subscriber: after its PUBREC the PUBREL waits in the hub's `$MQTT_out` until
    PUBCOMP; after a restart of the leaf the session's PUBREL consumer (named in its record)
    sends it again to the reconnecting session."""
    units = {leaf.name: f"d{next(_ids)}" for leaf in leaves}
    first: dict[str, list[p.Packet]] = {}
    for leaf in leaves:
        u = units[leaf.name]
        raw = raw_session(leaf.mqtt_port, f"{u}-sub")
        raw.send(frames.subscribe(p.Subscribe(1, ((f"{u}/t".encode(), 2),))))
        raw.read_packets(1)
        pub = Client(leaf.mqtt_port, f"{u}-pub")
        pub.publish(f"{u}/t", b"two", 2)
        pub.disconnect()
        packets = raw.read_packets(1)
        raw.send(frames.pub_response(p.PUBREC, packets[0].packet_id))  # type: ignore[attr-defined]
        first[leaf.name] = packets + raw.read_packets(1)
        raw.close()
        leaf.restart()

    def scenario(leaf: Leaf, _: str) -> Any:
        packets = first[leaf.name]
        packet_id = packets[0].packet_id  # type: ignore[attr-defined]
        raw = raw_session(leaf.mqtt_port, f"{units[leaf.name]}-sub")
        again = raw.read_packets(1)
        raw.send(frames.pub_response(p.PUBCOMP, packet_id))
        raw.send(frames.PINGREQ_FRAME)
        again += raw.read_packets(1)
        raw.close()
        shape = [type(x).__name__ for x in packets + again]
        same_id = [getattr(x, "packet_id", packet_id) == packet_id for x in packets + again]
        return shape, all(same_id)

    assert each(leaves, scenario) == (["Publish", "PubRel", "PubRel", "PingResp"], True)
