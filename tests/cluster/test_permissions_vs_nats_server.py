"""Route permissions side by side with nats-server: a node with `cluster { permissions }`
(pynatsd or nats-server) next to a nats-server node without any. What its clients receive from
the other node is limited to its `import`, what the other node's clients receive from it to its
`export` (a wider subscription the export allows still misses what the export denies), and
/routez shows the permissions on both nodes."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import nats
import pytest

from support.cluster import GO, PY, ProcessCluster, arrives, reaches

PERMISSIONS = """  permissions {
    import: ["imp.>", "ready.>"]
    export: { allow: ["exp.>", "wild.>", "ready.>"], deny: ["wild.secret"] }
  }
"""
# The limited node's permissions after a reload: other.> imported, noexp.> exported too.
WIDER = """  permissions {
    import: ["imp.>", "other.>", "ready.>"]
    export: { allow: ["exp.>", "wild.>", "ready.>", "noexp.>"], deny: ["wild.secret"] }
  }
"""
END_TIMEOUT = 10.0


async def _received(client: Any, subjects: list[str], end: str, publish: Any) -> list[str]:
    """The subjects `client`'s subscriptions to `subjects` receive of what `publish()` sends,
    which ends with `end` (its own subscription): sent last on the same route, `end` arrives
    after everything before it, and a PING after it finds every earlier message queued."""
    subs = [await client.subscribe(subject) for subject in subjects]
    last = await client.subscribe(end)
    await client.flush()
    await publish()
    await last.next_msg(timeout=END_TIMEOUT)
    await client.flush()
    got = []
    for sub in subs:
        while sub.pending_msgs:
            got.append((await sub.next_msg()).subject)
        await sub.unsubscribe()
    return sorted(s for s in got if "probe" not in s)


async def _observe(cluster: ProcessCluster) -> dict[str, Any]:
    limited, other = [await nats.connect(n.url) for n in cluster.nodes]
    seen: dict[str, Any] = {}
    try:
        # Into the limited node: only what it imports.
        async def into() -> None:
            assert await reaches(other, limited, "imp.probe")
            for subject in ("imp.x", "other.x", "exp.x", "imp.end"):
                await other.publish(subject, b"")
            await other.flush()

        seen["imported"] = await _received(limited, ["imp.x", "other.x", "exp.x"], "imp.end", into)

        # Out of the limited node: only what it exports (wild.> is, but not wild.secret).
        async def out_of() -> None:
            assert await reaches(limited, other, "exp.probe")
            for subject in ("exp.y", "noexp.y", "wild.ok", "wild.secret", "exp.end"):
                await limited.publish(subject, b"")
            await limited.flush()

        seen["exported"] = await _received(other, ["exp.y", "noexp.y", "wild.>"], "exp.end", out_of)

        # Subscriptions made before a reload widens the permissions get messages after it:
        # the limited node announces other.late, the other one noexp.late when told of it.
        late_in = await limited.subscribe("other.late")
        late_out = await other.subscribe("noexp.late")
        await limited.flush()
        await other.flush()
        await asyncio.to_thread(cluster.reload, 0, WIDER)
        seen["reloaded.imported"] = await arrives(other, late_in)
        seen["reloaded.exported"] = await arrives(limited, late_out)

        routez = [cluster.routez(i) for i in range(2)]
        seen["routez.limited"] = (routez[0].get("import"), routez[0].get("export"))
        seen["routez.other"] = {
            (str(r.get("import")), str(r.get("export"))) for r in routez[1]["routes"]
        }
    finally:
        await limited.close()
        await other.close()
    return seen


def _run(tmp_path: Path, kinds: tuple[str, str]) -> dict[str, Any]:
    directory = tmp_path / "-".join(kinds)
    directory.mkdir()
    with ProcessCluster(kinds, directory, cluster_config=[PERMISSIONS, ""]) as cluster:
        cluster.start()
        return asyncio.run(_observe(cluster))


@pytest.mark.parametrize("kinds", [(PY, GO), (PY, PY), (GO, PY)], ids=["py-go", "py-py", "go-py"])
def test_route_permissions_as_nats_server(tmp_path: Path, kinds: tuple[str, str]) -> None:
    """`kinds`: the node with permissions, then the other one."""
    go = _run(tmp_path, (GO, GO))
    assert go["imported"] == ["imp.x"]
    assert go["exported"] == ["exp.y", "wild.ok"]
    assert (go["reloaded.imported"], go["reloaded.exported"]) == (True, True)
    assert go["routez.limited"] == (
        {"allow": ["imp.>", "other.>", "ready.>"]},
        {"allow": ["exp.>", "wild.>", "ready.>", "noexp.>"], "deny": ["wild.secret"]},
    )
    assert _run(tmp_path, kinds) == go
