"""The INFO frames a client gets after the greeting, side by side with nats-server.

nats-server sends a client two kinds of later INFO: the `connect_info` INFO after the first PONG
(protocol 1 clients only) and updates to clients that have had it (lame duck mode's `ldm`,
a cluster's changed `connect_urls`). Both are built from the server's own INFO fields, not from
the greeting: `auth_required` is there even when a `no_auth_user` took it out of the greeting,
the nonce is not, and `max_payload` is the connection's own limit (its account's, once bound).
A configuration reload sends no INFO at all.
"""

from __future__ import annotations

import signal
import time
from collections.abc import Iterator
from pathlib import Path

import nkeys
import pytest

from support.natsserver import require_nats_server
from support.normalise import normalise, split_frames
from support.processes import PYNATSD, ServerProcess, start_server
from support.recording import RecordingClient, drain


def _nkey_user() -> str:
    seed = nkeys.encode_seed(bytes(32), nkeys.PREFIX_BYTE_USER)
    return str(nkeys.from_seed(bytearray(seed)).public_key.decode())


CONF = f"""
accounts {{
  A {{ users [{{user: a, password: a}}], limits {{ max_payload: 100 }} }}
  SYS {{ users [{{user: s, password: s}}] }}
  N {{ users [{{nkey: {_nkey_user()}}}] }}
}}
system_account: SYS
no_auth_user: a
lame_duck_grace_period: 10s
lame_duck_duration: 30s
"""

# Each connection: what it sends before lame duck mode starts.
SCRIPT = {
    # the no_auth_user's account, with a payload limit of its own
    "anonymous": b'CONNECT {"protocol":1,"verbose":false}\r\nPING\r\n',
    "system": b'CONNECT {"protocol":1,"verbose":false,"user":"s","pass":"s"}\r\nPING\r\n',
    # protocol 0: no INFO after the greeting, ever
    "protocol0": b'CONNECT {"protocol":0,"verbose":false}\r\nPING\r\n',
    # no PING yet, so no connect_info INFO: not ready for updates either
    "no_ping_yet": b'CONNECT {"protocol":1,"verbose":false}\r\n',
}


def _transcript(received: bytes) -> list[bytes]:
    # The server's first keepalive PING comes about two seconds in, at either server's pace.
    return [f for f in split_frames(normalise(received)) if f != b"PING\r\n"]


def _run(server: ServerProcess, reload_first: bool) -> dict[str, list[bytes]]:
    clients = {name: RecordingClient(server.host, server.port) for name in SCRIPT}
    try:
        for name, data in SCRIPT.items():
            clients[name].send(data)
        drain(clients.values(), quiet=0.3)
        if reload_first:
            server.proc.send_signal(signal.SIGHUP)
            time.sleep(0.5)
        server.proc.send_signal(signal.SIGUSR2)
        drain(clients.values(), quiet=0.6)
        return {name: _transcript(bytes(c.received)) for name, c in clients.items()}
    finally:
        for c in clients.values():
            c.close()


@pytest.fixture(scope="module")
def conf(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    path = tmp_path_factory.mktemp("asyncinfo") / "server.conf"
    path.write_text(CONF)
    yield path


@pytest.mark.parametrize("reload_first", [False, True], ids=["ldm", "reload-then-ldm"])
def test_async_info_matches_nats_server(conf: Path, reload_first: bool) -> None:
    binary = require_nats_server()
    results = []
    for cmd in ([binary], list(PYNATSD)):
        server = start_server(cmd, ["-c", str(conf)])
        try:
            results.append(_run(server, reload_first))
        finally:
            # nats-server ignores SIGTERM in lame duck mode: it is ending on its own.
            server.proc.kill()
            server.stop()
    ref, cand = results
    # The reference shows what the case is about.
    assert b'"auth_required":true' not in ref["anonymous"][0]  # the greeting
    assert b'"connect_info":true' in ref["anonymous"][2]
    assert b'"auth_required":true' in ref["anonymous"][2]
    assert b'"max_payload":100' in ref["anonymous"][2]
    assert b'"acc_is_sys":true' in ref["system"][2]
    assert any(b'"ldm":true' in f for f in ref["system"])
    assert not any(f.startswith(b"INFO") for f in ref["protocol0"][1:])
    assert not any(f.startswith(b"INFO") for f in ref["no_ping_yet"][1:])
    for name in SCRIPT:
        assert cand[name] == ref[name], (
            f"{name}:\n  nats-server: {ref[name]}\n  pynatsd:     {cand[name]}"
        )
