"""The scheduler's bookkeeping (jetstream/schedules.py): a schedule rewritten often does not
grow its heap without end, and the rebuild after a restart trusts what the stored messages
say, including a delayed message produced just before a crash that did not get to purge its
schedule (so it is not produced twice)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import nats

from pynatsd import Server
from pynatsd.jetstream import jetstream_of
from pynatsd.jetstream.stream import Stream
from pynatsd.server.accounts import GLOBAL_ACCOUNT

CONFIG = {"name": "S", "subjects": ["sched.>", "out.>"], "allow_msg_schedules": True}


def _stream(server: Server) -> Stream:
    jetstream = jetstream_of(server)
    assert jetstream is not None
    return jetstream.accounts[GLOBAL_ACCOUNT].streams["S"]


async def test_rewritten_schedules_keep_the_heap_small(tmp_path: Path) -> None:
    async with Server(jetstream=True, store_dir=str(tmp_path)) as server:
        nc = await nats.connect(server.client_url)
        await nc.request("$JS.API.STREAM.CREATE.S", json.dumps(CONFIG).encode())
        headers = {"Nats-Schedule": "@yearly", "Nats-Schedule-Target": "out.x"}
        for i in range(1000):
            await nc.request(f"sched.{i % 3}", b"", headers=headers)
        scheduling = _stream(server).scheduling
        assert scheduling is not None
        assert len(scheduling.schedules) == 3
        assert len(scheduling._due) <= 2 * 3 + 65
        await nc.close()


async def test_rebuild_finishes_a_purge_lost_in_a_crash(tmp_path: Path) -> None:
    async with Server(jetstream=True, store_dir=str(tmp_path)) as server:
        nc = await nats.connect(server.client_url)
        await nc.request("$JS.API.STREAM.CREATE.S", json.dumps(CONFIG).encode())
        await nc.request(
            "sched.once",
            b"",
            headers={"Nats-Schedule": "@at 2020-01-01T00:00:00Z", "Nats-Schedule-Target": "out.x"},
        )
        stream = _stream(server)
        assert stream.scheduling is not None
        stream.scheduling.stop()  # hold the timer: write by hand what a crash could leave
        header = b"NATS/1.0\r\nNats-Scheduler: sched.once\r\nNats-Schedule-Next: purge\r\n\r\n"
        stream.store.store_msg("out.x", header, b"")  # produced, but the purge never ran
        stream.scheduling.schedules.clear()
        stream.scheduling.closed = False
        stream.scheduling.rebuild()
        assert stream.scheduling.schedules == {}
        await asyncio.sleep(0.4)  # the scheduler's shortest wait: nothing fires
        assert stream.store.state().messages == 2
        await nc.close()
