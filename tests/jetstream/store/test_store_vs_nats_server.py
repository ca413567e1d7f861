"""Differential test: the same operations on nats-server -js (over the wire) and on our stores.

Compares the stream state the Go server reports (messages, bytes, first/last sequence, deleted,
subjects) and the errors of discard new, for memory and file storage. This is what pins our
byte accounting and limit semantics to memstore.go / filestore.go.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from pynatsd.jetstream.store import (
    StoreError,
    StreamLimits,
    open_file_store,
    open_memory_store,
)
from support.natsserver import nats_server_binary
from support.processes import start_server
from support.rawclient import RawRequester


@pytest.fixture(scope="module")
def nats_server() -> Iterator[int]:
    binary = nats_server_binary()
    if binary is None:
        pytest.skip("nats-server not installed")
    # Outside pytest's numbered temporary directories, which a concurrent pytest session may
    # prune while this server still writes there.
    sd = tempfile.mkdtemp(prefix="store-diff-js-")
    server = start_server([binary], ["-js", "-sd", sd])
    try:
        yield server.port
    finally:
        server.stop()
        shutil.rmtree(sd, ignore_errors=True)


@pytest.fixture
async def raw(nats_server: int) -> AsyncIterator[RawRequester]:
    client = await RawRequester.connect(nats_server)
    yield client
    client.close()


H1 = b"NATS/1.0\r\nFoo: bar\r\n\r\n"
H2 = b"NATS/1.0\r\nNats-Msg-Id: id-%d\r\nX: y\r\n\r\n"


def ops_plain() -> list[tuple[Any, ...]]:
    ops: list[tuple[Any, ...]] = []
    for i in range(10):
        # Distinct Nats-Msg-Id values: deduplication is the API layer's, not the store's.
        header = [b"", H1, H2 % i][i % 3]
        ops.append(("pub", f"s.{i % 3}", header, b"data-%d" % i * (i + 1)))
    ops += [("del", 3), ("del", 1), ("del", 10)]
    return ops


SCENARIOS: list[tuple[str, dict[str, Any], list[tuple[Any, ...]]]] = [
    ("plain", {}, ops_plain()),
    ("max_msgs", {"max_msgs": 5}, [("pub", f"s.{i % 2}", b"", b"x" * i) for i in range(12)]),
    ("max_bytes", {"max_bytes": 500}, [("pub", "s.a", H1, b"y" * 40) for _ in range(20)]),
    (
        "per_subject",
        {"max_msgs_per_subject": 2},
        [("pub", f"s.{i % 3}", b"", b"%d" % i) for i in range(10)],
    ),
    ("discard_new", {"max_msgs": 3, "discard": "new"}, [("pub", "s.a", b"", b"1")] * 5),
    (
        "discard_new_bytes",
        {"max_bytes": 300, "discard": "new"},
        [("pub", "s.a", H1, b"z" * 30) for _ in range(8)],
    ),
    (
        "discard_new_per_subject",
        {
            "max_msgs_per_subject": 1,
            "discard": "new",
            "discard_new_per_subject": True,
        },
        [("pub", "s.a", b"", b"1"), ("pub", "s.b", b"", b"1"), ("pub", "s.a", b"", b"2")],
    ),
    (
        "discard_new_at_subject_limit",
        {"max_msgs": 2, "max_msgs_per_subject": 1, "discard": "new"},
        [("pub", s, b"", b"1") for s in ["s.a", "s.b", "s.a", "s.c"]],
    ),
    (
        "purges",
        {},
        [("pub", f"s.{i % 3}", b"", b"%d" % i) for i in range(20)]
        + [
            ("purge", {"filter": "s.1", "keep": 2}),
            ("purge", {"seq": 5}),
            ("purge", {"filter": "s.0", "seq": 14}),
            ("purge", {"keep": 4}),
        ],
    ),
    (
        "purge_all_then_more",
        {},
        [("pub", "s.a", b"", b"1")] * 3 + [("purge", {}), ("pub", "s.b", b"", b"2")],
    ),
    ("purge_past_end", {}, [("pub", "s.a", b"", b"1"), ("purge", {"seq": 100})]),
    ("alone_over_max_bytes", {"max_bytes": 60}, [("pub", "s.a", b"", b"q" * 100)]),
    (
        "update_limits",
        {},
        [("pub", f"s.{i % 4}", b"", b"%d" % i) for i in range(30)]
        + [
            ("update", {"max_msgs_per_subject": 5}),
            ("update", {"max_msgs_per_subject": 5, "max_msgs": 12}),
            ("update", {"max_msgs_per_subject": 5, "max_msgs": 12, "max_bytes": 400}),
            ("pub", "s.9", b"", b"after"),
        ],
    ),
]


@pytest.mark.parametrize("storage", ["file", "memory"])
@pytest.mark.parametrize(("name", "limits", "ops"), SCENARIOS, ids=[s[0] for s in SCENARIOS])
async def test_same_state_as_nats_server(
    raw: RawRequester,
    tmp_path: Path,
    storage: str,
    name: str,
    limits: dict[str, Any],
    ops: list[tuple[Any, ...]],
) -> None:
    stream = f"D_{name}_{storage}".upper()
    prefix = stream.lower()
    cfg = {"name": stream, "subjects": [f"{prefix}.>"], "storage": storage, **limits}
    created = await raw.api(f"$JS.API.STREAM.CREATE.{stream}", cfg)
    assert "error" not in created, created
    lim = StreamLimits(**limits)
    store = (
        open_file_store(str(tmp_path / "s"), lim) if storage == "file" else open_memory_store(lim)
    )
    try:
        for op in ops:
            if op[0] == "pub":
                _, subject, header, data = op
                ack = await raw.request(f"{prefix}.{subject}", data, header)
                try:
                    seq, _ = store.store_msg(f"{prefix}.{subject}", header, data)
                    assert ack.get("seq") == seq, (ack, seq)
                except StoreError as err:
                    assert "error" in ack, ack
                    assert ack["error"]["description"] == err.description
            elif op[0] == "update":
                resp = await raw.api(f"$JS.API.STREAM.UPDATE.{stream}", {**cfg, **op[1]})
                assert "error" not in resp, resp
                store.update_limits(StreamLimits(**{**limits, **op[1]}))
            elif op[0] == "del":
                resp = await raw.api(f"$JS.API.STREAM.MSG.DELETE.{stream}", {"seq": op[1]})
                assert resp.get("success", False) == store.remove_msg(op[1])
            else:
                req = dict(op[1])
                if "filter" in req:
                    req["filter"] = f"{prefix}.{req['filter']}"
                resp = await raw.api(f"$JS.API.STREAM.PURGE.{stream}", req)
                got = store.purge(req.get("filter", ""), req.get("seq", 0), req.get("keep", 0))
                assert resp["purged"] == got, (req, resp)
        info = await raw.api(f"$JS.API.STREAM.INFO.{stream}")
        theirs = info["state"]
        ours = store.state()
        assert {
            "messages": ours.messages,
            "bytes": ours.bytes,
            "first_seq": ours.first_seq,
            "last_seq": ours.last_seq,
            "num_deleted": ours.num_deleted,
            "num_subjects": ours.num_subjects,
        } == {
            "messages": theirs["messages"],
            "bytes": theirs["bytes"],
            "first_seq": theirs["first_seq"],
            "last_seq": theirs["last_seq"],
            "num_deleted": theirs.get("num_deleted", 0),
            "num_subjects": theirs.get("num_subjects", 0),
        }
    finally:
        # Streams are not deleted: nats-server removes a deleted stream's directory in the
        # background, and a create right after can then race with it ("could not create
        # storage directory"). Each scenario has its own stream name instead.
        store.close()
