"""An account's connection counts in the system account, for plain client connections, side by
side with nats-server: `$SYS.ACCOUNT.<acc>.SERVER.CONNS` and the older
`$SYS.SERVER.ACCOUNT.<acc>.CONNS` (`account_connections`) when a client of the account
connects and when it leaves, and again every 30 s while the account has connections
(nats-server's eventsHBInterval); never for the global account."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import nats
import pytest

from support.natsserver import NATS_SERVER
from support.processes import PYNATSD, ServerProcess, start_server

pytestmark = pytest.mark.skipif(not NATS_SERVER.exists(), reason="nats-server binary not found")

CONF = """
accounts {
  SYS: { users: [{user: sys, password: sys}] }
  A: { users: [{user: a, password: a}] }
}
no_auth_user: g
system_account: SYS
authorization { users: [{user: g, password: g}] }
"""
# The global account's would be on these too: nats-server sends none.
SUBJECTS = ["$SYS.ACCOUNT.*.SERVER.CONNS", "$SYS.SERVER.ACCOUNT.*.CONNS"]
# nats-server's eventsHBInterval, and a little slack for a loaded machine.
REPEAT = 30.0
SLACK = 4.0


def _start(kind: str, directory: Path) -> ServerProcess:
    path = directory / f"{kind}.conf"
    path.write_text(CONF)
    cmd = [str(NATS_SERVER)] if kind == "nats-server" else list(PYNATSD)
    return start_server(cmd, ["-c", str(path)])


def _seen(msg: Any) -> tuple[str, Any, Any, Any, Any]:
    body = json.loads(msg.data)
    return (msg.subject, body["type"], body["acc"], body["conns"], body["total_conns"])


async def _observe(url: str, wait_repeat: bool) -> list[tuple[str, Any, Any, Any, Any]]:
    """The counts the system account sees while a client of A connects, (optionally) stays
    past one repeat, and leaves; and a client of the global account comes and goes."""
    system = await nats.connect(url, user="sys", password="sys")
    seen: list[tuple[str, Any, Any, Any, Any]] = []

    async def on_msg(msg: Any) -> None:
        if ".SYS." not in msg.subject:  # the system user's own account repeats too
            seen.append(_seen(msg))

    for subject in SUBJECTS:
        await system.subscribe(subject, cb=on_msg)
    await system.flush()
    try:
        glob = await nats.connect(url)  # the global account's: no counts
        await glob.close()
        client = await nats.connect(url, user="a", password="a")
        await client.flush()
        await asyncio.sleep(0.5)
        if wait_repeat:
            seen.append(("-- repeat --", None, None, None, None))
            await asyncio.sleep(REPEAT - 0.5 + SLACK)
        await client.close()
        await asyncio.sleep(0.5)
        return seen
    finally:
        await system.close()


@pytest.mark.parametrize("wait_repeat", [False, True], ids=["connect-close", "30s-repeat"])
async def test_client_counts_as_nats_server(tmp_path: Path, wait_repeat: bool) -> None:
    servers = {kind: _start(kind, tmp_path) for kind in ("nats-server", "pynatsd")}
    try:
        runs = await asyncio.gather(*(_observe(proc.url, wait_repeat) for proc in servers.values()))
    finally:
        for proc in servers.values():
            proc.stop()
    reference, ours = runs
    connected = [
        (
            "$SYS.SERVER.ACCOUNT.A.CONNS",
            "io.nats.server.advisory.v1.account_connections",
            "A",
            1,
            1,
        ),
        (
            "$SYS.ACCOUNT.A.SERVER.CONNS",
            "io.nats.server.advisory.v1.account_connections",
            "A",
            1,
            1,
        ),
    ]
    closed = [(s, t, a, 0, 0) for s, t, a, _, _ in connected]
    marker = [("-- repeat --", None, None, None, None)] if wait_repeat else []
    repeated = connected if wait_repeat else []
    assert reference == [*connected, *marker, *repeated, *closed]
    assert ours == reference
