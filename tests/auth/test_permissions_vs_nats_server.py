"""Permission decisions side by side with the real nats-server.

One nats-server runs with users whose permissions cover the interesting cases; a raw client sends
each SUB/PUB and records whether -ERR came back. `PermissionChecker`, built from the same
configuration by our loader, must decide the same way and our error texts must match.
"""

from __future__ import annotations

import pytest

from pynatsd.auth import PermissionChecker
from pynatsd.config import load_config
from pynatsd.protocol import errors
from support.lineclient import LineClient
from support.natsserver import NATS_SERVER
from support.processes import run_nats_server

pytestmark = pytest.mark.skipif(not NATS_SERVER.exists(), reason="nats-server binary not found")

CONF = """
authorization {
  users = [
    {user: a, password: a, permissions: {
      publish: {allow: ["foo.>", "bar", "*.baz", "lit.*"], deny: ["foo.secret", "foo.x.>"]}
      subscribe: {
        allow: ["foo.>", "q.* v1", "r", "r v2", "w.> w.*", "lit.x"]
        deny: ["foo.secret", "foo.deny.* dq", "foo.never"]
      }
    }}
    {user: b, password: b, permissions: {publish: {deny: ">"}, subscribe: {deny: ["> *.prod"]}}}
    {user: c, password: c, permissions: {publish: {allow: []}, subscribe: {allow: []}}}
    {user: d, password: d, permissions: {
      publish: "x.>", subscribe: "x.*", allow_responses: {max: 2, expires: "1m"}
    }}
    {user: e, password: e}
    {user: f, password: f, permissions: {publish: {deny: "a"}, allow_responses: true}}
  ]
}
"""

SUBS = {
    "a": [
        ("foo.bar", None),
        ("foo.*", None),
        ("foo.>", None),
        ("foo", None),
        (">", None),
        ("foo.secret", None),
        ("foo.secret", "g1"),
        ("foo.never", None),
        ("foo.deny.x", None),
        ("foo.deny.x", "dq"),
        ("foo.deny.x", "other"),
        ("q.a", None),
        ("q.a", "v1"),
        ("q.a", "v2"),
        ("q.*", "v1"),
        ("r", None),
        ("r", "v2"),
        ("r", "v3"),
        ("w.a.b", "w.x"),
        ("w.a.b", "w.x.y"),
        ("w.a.b", None),
        ("lit.x", None),
        ("lit.*", None),
        ("lit.>", None),
        ("foo.bar", "_sys_"),
    ],
    "b": [
        ("anything", None),
        ("a.b", "q"),
        ("a.b", "eu.prod"),
        ("a.b", "prod"),
        ("a.b", "x.y.prod"),
        ("x", "_sys_"),
    ],
    "c": [("anything", None), ("a.b", "q")],
    "d": [("x.y", None), ("x.y.z", None), ("y", None)],
    "e": [("foo", None), ("foo", "_sys_"), ("foo", "q")],
}

PUBS = {
    "a": [
        "foo.bar",
        "foo.secret",
        "foo.x.y",
        "foo.x",
        "foo",
        "bar",
        "bar.baz",
        "a.baz",
        "a.b.baz",
        "lit.*",
        "lit.>",
        "foo.*",
        "_INBOX.x",
    ],
    "b": ["foo", "a.b.c"],
    "c": ["foo", "bar"],
    "d": ["x.y", "y", "_INBOX.r1"],
    "e": ["anything"],
    "f": ["foo", "a"],
}


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    directory = tmp_path_factory.mktemp("perms")
    with run_nats_server(CONF, directory) as port:
        path = directory / "ours.conf"
        path.write_text(CONF)
        yield port, load_config(path).options


def _checker(options, user: str) -> PermissionChecker:  # type: ignore[no-untyped-def]
    for u in options.users:
        if u.username == user:
            return PermissionChecker(u.permissions)
    raise AssertionError(user)


@pytest.mark.parametrize("user", sorted(SUBS))
def test_subscribe_decisions(server, user: str) -> None:  # type: ignore[no-untyped-def]
    port, options = server
    conn = LineClient(port)
    assert conn.connect(user=user, **{"pass": user}) == "PONG"
    checker = _checker(options, user)
    mismatches = []
    for i, (subject, queue) in enumerate(SUBS[user]):
        line = f"SUB {subject} {queue} {i}\r\n" if queue else f"SUB {subject} {i}\r\n"
        real = conn.exchange(line)
        ours = checker.can_subscribe(subject, queue)
        expected = "PONG" if ours else f"-ERR '{errors.permissions_subscribe(subject, queue)}'"
        if real != expected:
            mismatches.append((subject, queue, real, expected))
    conn.close()
    assert mismatches == []


@pytest.mark.parametrize("user", sorted(PUBS))
def test_publish_decisions(server, user: str) -> None:  # type: ignore[no-untyped-def]
    port, options = server
    conn = LineClient(port)
    assert conn.connect(user=user, **{"pass": user}) == "PONG"
    checker = _checker(options, user)
    mismatches = []
    for subject in PUBS[user]:
        real = conn.exchange(f"PUB {subject} 2\r\nhi\r\n")
        ours = checker.can_publish(subject)
        expected = "PONG" if ours else f"-ERR '{errors.permissions_publish(subject)}'"
        if real != expected:
            mismatches.append((subject, real, expected))
    conn.close()
    assert mismatches == []


def test_deny_checked_at_delivery(server) -> None:  # type: ignore[no-untyped-def]
    port, options = server
    receiver, sender = LineClient(port), LineClient(port)
    assert receiver.connect(user="a", **{"pass": "a"}) == "PONG"
    assert sender.connect(user="e", **{"pass": "e"}) == "PONG"
    assert receiver.exchange("SUB foo.> 1\r\n") == "PONG"
    for subject in ("foo.ok", "foo.secret", "foo.never", "foo.deny.z"):
        sender.exchange(f"PUB {subject} 1\r\nx\r\n")
    receiver.exchange("")
    real = sorted(receiver.msgs)
    checker = _checker(options, "a")
    assert checker.can_subscribe("foo.>") and checker.delivery_filter
    ours = sorted(
        [
            s
            for s in ("foo.ok", "foo.secret", "foo.never", "foo.deny.z")
            if not checker.deny_delivery(s)
        ]
        # foo.deny.z reaches the plain subscription foo.> (its deny entry names a queue)
    )
    assert real == ours == ["foo.deny.z", "foo.ok"]
    assert checker.deny_delivery("foo.deny.z", "dq")
    receiver.close()
    sender.close()


def test_allow_responses(server) -> None:  # type: ignore[no-untyped-def]
    port, options = server
    responder, requester = LineClient(port), LineClient(port)
    assert responder.connect(user="d", **{"pass": "d"}) == "PONG"
    assert requester.connect(user="e", **{"pass": "e"}) == "PONG"
    checker = _checker(options, "d")
    assert responder.exchange("SUB x.req 1\r\n") == "PONG"
    real = [responder.exchange("PUB _INBOX.r1 2\r\nno\r\n")]
    ours = [checker.can_publish("_INBOX.r1")]
    requester.exchange("PUB x.req _INBOX.r1 3\r\nreq\r\n")
    responder.exchange("")
    checker.track_request("_INBOX.r1")
    for _ in range(3):
        real.append(responder.exchange("PUB _INBOX.r1 2\r\nok\r\n"))
        ours.append(checker.can_publish("_INBOX.r1"))
    denied = f"-ERR '{errors.permissions_publish('_INBOX.r1')}'"
    assert real == [denied, "PONG", "PONG", denied]
    assert ours == [False, True, True, False]
    responder.close()
    requester.close()
