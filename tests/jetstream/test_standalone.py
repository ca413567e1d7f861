"""Which JetStream server of a cluster serves (jetstream/standalone.py), decided from the peers'
route INFOs: the rule alone, on one server told of peers directly (the cluster tests run it
across real routes)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

import pynatsd
from pynatsd.jetstream import JetStream, jetstream_of


@pytest.fixture
async def js(tmp_path: Path) -> AsyncIterator[JetStream]:
    async with pynatsd.Server(server_name="m", jetstream=True, store_dir=str(tmp_path)) as server:
        part = jetstream_of(server)
        assert part is not None
        yield part


def info(name: str, jetstream: bool = True) -> dict[str, object]:
    return {"server_name": name, "jetstream": jetstream}


async def test_a_peer_without_jetstream_changes_nothing(js: JetStream) -> None:
    js.peers.peer_changed("ID-A", info("a", jetstream=False))
    assert (js.standing_down, js.conflict) == ("", "")
    assert js.accounts


async def test_a_later_name_leaves_this_server_serving(js: JetStream) -> None:
    js.peers.peer_changed("ID-Z", info("z"))
    assert js.standing_down == ""
    assert '"z"' in js.conflict
    assert "$G" in js.accounts
    js.peers.peer_changed("ID-Z", None)
    assert js.conflict == ""  # it left


async def test_an_earlier_name_serves_and_this_one_stops_for_good(js: JetStream) -> None:
    sublist = js.server.global_account.sublist
    assert sublist.has_interest("$JS.API.INFO")
    js.peers.peer_changed("ID-A", info("a"))
    assert js.standing_down.startswith('JetStream is served by server "a"')
    assert not js.accounts and not sublist.has_interest("$JS.API.INFO")
    js.peers.peer_changed("ID-A", None)
    assert js.standing_down  # not taken back: the store is no replica


async def test_the_same_name_is_decided_by_server_id(js: JetStream) -> None:
    own = js.server.server_id
    js.peers.peer_changed(own + "Z", info("m"))  # same name, later id
    assert js.standing_down == ""
    js.peers.peer_changed(own[:-1] + chr(ord(own[-1]) - 1), info("m"))  # earlier id
    assert js.standing_down
