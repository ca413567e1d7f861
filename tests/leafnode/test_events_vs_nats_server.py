"""Leaf connections in the system account's events, pynatsd against nats-server.

The hub announces a leaf that connects and disconnects: the account's connection counts
(`$SYS.ACCOUNT.<acc>.SERVER.CONNS` and the older `$SYS.SERVER.ACCOUNT.<acc>.CONNS`, with
`leafnodes`), `$SYS.ACCOUNT.<acc>.LEAFNODE.CONNECT` (only with gateways on, as nats-server's
sendLeafNodeConnect) and `$SYS.ACCOUNT.<acc>.DISCONNECT` with kind `Leafnode`. The leaf announces
its solicited connection the same way, with `$SYS.ACCOUNT.<acc>.CONNECT` too.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import nats

from leafnode.topology import Node, connect, eventually, hub_conf, leaf_conf, remote, running
from support.ports import LOOPBACK, free_port

ACCOUNTS = """
accounts {
  A: { users: [ {user: a, password: a} ] }
  SYS: { users: [ {user: sys, password: sys} ] }
}
system_account: SYS
"""
# What differs from run to run or between the two servers' internals.
VARIES = {"id", "timestamp", "time", "start", "stop", "seq", "rtt", "msgs", "bytes"}
VARIES |= {"num_subscriptions", "ver", "host"}


SERVER = {
    "host": "str",
    "id": "str",
    "ver": "str",
    "feature_flags": {
        "js_ack_fc_v2": False,
        "js_api_reply_v2": False,
        "js_raft_delete_range": True,
        "js_snapshot_sources": False,
    },
    "jetstream": False,
    "flags": 0,
    "seq": "int",
    "time": "str",
}
TRAFFIC = {"msgs": "int", "bytes": "int"}


def event(kind: str) -> dict[str, Any]:
    return {"type": kind, "id": "str", "timestamp": "str"}


def conns(server: dict[str, Any], leafnodes: int) -> dict[str, Any]:
    """An account_connections advisory for account A with no clients."""
    traffic = {**TRAFFIC, "gateways": TRAFFIC, "routes": TRAFFIC, "leafs": TRAFFIC}
    return {
        **event("io.nats.server.advisory.v1.account_connections"),
        "server": server,
        "acc": "A",
        "name": "A",
        "conns": 0,
        "leafnodes": leafnodes,
        "total_conns": leafnodes,
        "num_subscriptions": "int",
        "sent": traffic,
        "received": traffic,
        "slow_consumers": 0,
    }


def disconnect(server: dict[str, Any], client: dict[str, Any]) -> dict[str, Any]:
    return {
        **event("io.nats.server.advisory.v1.client_disconnect"),
        "server": server,
        "client": {**client, "name_tag": "A", "kind": "Leafnode"},
        "sent": TRAFFIC,
        "received": TRAFFIC,
        "reason": "Client Closed",
    }


def shape(value: Any, key: str = "") -> Any:
    """An event with what varies replaced by its JSON type."""
    if isinstance(value, dict):
        return {k: shape(v, k) for k, v in value.items()}
    if key in VARIES:
        return type(value).__name__
    return value


class Events:
    """A system user's view of one account's events, in the order the server sent them."""

    def __init__(self, account: str) -> None:
        self.account = account
        self.seen: list[tuple[str, Any]] = []

    async def subscribe(self, nc: nats.NATS) -> None:
        # One subscription: nats-py runs each one's callbacks apart, losing the order between them.
        prefixes = (f"$SYS.ACCOUNT.{self.account}.", f"$SYS.SERVER.ACCOUNT.{self.account}.")

        async def got(msg: Any) -> None:
            if msg.subject.startswith(prefixes):
                self.seen.append((msg.subject, shape(json.loads(msg.data))))

        await nc.subscribe("$SYS.>", cb=got)
        await nc.flush()

    def settle(self) -> None:
        """nats-server sends a closed connection's DISCONNECT from its own goroutine, racing
        the account's counts: it goes last here."""
        self.seen.sort(key=lambda event: event[0].endswith(".DISCONNECT"))

    async def wait_closed(self) -> None:
        """Until the leaf's disconnect (the last event) is in."""

        async def check() -> bool:
            closing = [
                s
                for s, body in self.seen
                if s.endswith(".DISCONNECT") or (s.endswith("CONNS") and body["total_conns"] == 0)
            ]
            return len(closing) == 3

        await eventually(check)


async def watch_a_leaf(tmp_path: Path, setup: tuple[str, str], side: str) -> list[Any]:
    """The system events of account A that `side` ("hub" or "leaf") sends while a leaf connects
    and its hub stops (or the leaf does); the hub runs a gateway when it is the one watched."""
    hub_kind, leaf_kind = setup
    port = free_port()
    gateway = f"gateway {{ name: HUB, listen: {LOOPBACK}:{free_port()} }}\n"
    users = "authorization { users: [ {user: ra, password: xa, account: A} ] }"
    hub_extra = ACCOUNTS + (gateway if side == "hub" else "")
    hub = Node(hub_kind, "HUB", hub_conf(port, hub_extra, users), tmp_path)
    leaf_remote = remote(f"nats-leaf://ra:xa@{LOOPBACK}:{port}", ", account: A")
    leaf = Node(leaf_kind, "LEAF", leaf_conf(leaf_remote, ACCOUNTS), tmp_path)
    watched, other = (hub, leaf) if side == "hub" else (leaf, hub)
    events = Events("A")
    async with running(watched):
        system = await connect(watched, user="sys", password="sys")
        await events.subscribe(system)
        async with running(other):
            await eventually(_any_leafnodes(events))
            # nats-server measures a leaf's RTT by its first PING, a second in.
            await eventually(_rtt_known(watched))
        await events.wait_closed()
        await system.flush()
        await system.close()
    events.settle()
    return events.seen


def subjects(announce: str) -> list[str]:
    """The subjects of the events in order: the counts, `announce`, the counts, DISCONNECT."""
    counts = ["$SYS.SERVER.ACCOUNT.A.CONNS", "$SYS.ACCOUNT.A.SERVER.CONNS"]
    return [*counts, announce, *counts, "$SYS.ACCOUNT.A.DISCONNECT"]


async def test_hub_announces_a_leaf(tmp_path: Path, setup: tuple[str, str]) -> None:
    seen = await watch_a_leaf(tmp_path, setup, "hub")
    assert [subject for subject, _ in seen] == subjects("$SYS.ACCOUNT.A.LEAFNODE.CONNECT")
    server = {**SERVER, "name": "HUB", "cluster": "HUB"}
    assert seen[0][1] == seen[1][1] == conns(server, leafnodes=1)
    assert seen[2][1] == {"server": server, "acc": "A"}
    assert seen[3][1] == seen[4][1] == conns(server, leafnodes=0)
    client = {"start": "str", "host": "str", "id": "int", "acc": "A", "user": "ra"}
    client |= {"name": "LEAF", "ver": "str", "rtt": "int", "stop": "str"}
    assert seen[5][1] == disconnect(server, client)


async def test_leaf_announces_its_connection(tmp_path: Path, setup: tuple[str, str]) -> None:
    seen = await watch_a_leaf(tmp_path, setup, "leaf")
    assert [subject for subject, _ in seen] == subjects("$SYS.ACCOUNT.A.CONNECT")
    server = {**SERVER, "name": "LEAF", "cluster": "LEAF"}
    assert seen[0][1] == seen[1][1] == conns(server, leafnodes=1)
    client = {"start": "str", "host": "str", "id": "int", "acc": "A"}
    assert seen[2][1] == {
        **event("io.nats.server.advisory.v1.client_connect"),
        "server": server,
        "client": {**client, "name_tag": "A", "kind": "Leafnode"},
    }
    assert seen[3][1] == seen[4][1] == conns(server, leafnodes=0)
    assert seen[5][1] == disconnect(server, {**client, "rtt": "int", "stop": "str"})


def _rtt_known(node: Node) -> Any:
    async def check() -> bool:
        leafs = (await node.leafz())["leafs"]
        return bool(leafs) and leafs[0]["rtt"] != "0s"

    return check


def _any_leafnodes(events: Events) -> Any:
    async def check() -> bool:
        return any(body.get("leafnodes") for _, body in events.seen)

    return check
