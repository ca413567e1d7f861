"""Bad JetStream API input gets nats-server's own error JSON (code, err_code, description),
never a crash or a half-created stream: every row is sent to nats-server -js and to pynatsd and
the replies are compared; then the stream list must be the same on both."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from support.jspair import Step, assert_same, side_by_side
from support.natsserver import nats_server_binary

pytestmark = pytest.mark.skipif(nats_server_binary() is None, reason="nats-server not installed")

API = "$JS.API"


def create(name: str, body: Any) -> Step:
    return ("req", f"{API}.STREAM.CREATE.{name}", body)


def consumer(body: Any, tail: str = "") -> Step:
    return ("req", f"{API}.CONSUMER.CREATE.S{tail}", body)


def ccfg(**cfg: Any) -> dict[str, Any]:
    return {"stream_name": "S", "config": cfg}


SETUP: list[Step] = [create("S", {"name": "S", "subjects": ["s.>"]})]

CASES: dict[str, list[Step]] = {
    "malformed json": [
        create("X", "{"),
        create("X", '{"name":'),
        create("X", "[]"),
        create("X", '"X"'),
        create("X", "123"),
        create("X", "{'name': 'X'}"),
        consumer("{bad"),
        consumer('{"stream_name":"S","config":'),
        ("req", f"{API}.STREAM.PURGE.S", "{x"),
        ("req", f"{API}.STREAM.MSG.GET.S", "{"),
        ("req", f"{API}.STREAM.NAMES", "[1]"),
        ("req", f"{API}.STREAM.INFO.S", "nope"),
    ],
    "unknown fields": [
        create("X", {"name": "X", "bogus": 1}),
        create("X", {"name": "X", "placement": {"where": "here"}}),
        create("X", {"name": "X", "consumer_limits": {"max": 1}}),
        consumer(ccfg(bogus=1)),
        consumer({"stream_name": "S", "config": {}, "extra": True}),
        ("req", f"{API}.STREAM.PURGE.S", {"subject": "s.a"}),
        ("req", f"{API}.STREAM.MSG.GET.S", {"sequence": 1}),
        ("req", f"{API}.STREAM.INFO.S", {"filter": "s.a"}),
        ("req", f"{API}.STREAM.NAMES", {"name": "S"}),
    ],
    "wrong types": [
        create("X", {"name": "X", "max_msgs": "10"}),
        create("X", {"name": "X", "subjects": "x"}),
        create("X", {"name": "X", "subjects": ["x", 1]}),
        create("X", {"name": "X", "retention": 5}),
        create("X", {"name": "X", "storage": "disk"}),
        create("X", {"name": "X", "discard": "oldest"}),
        create("X", {"name": "X", "num_replicas": "1"}),
        create("X", {"name": "X", "max_age": 1.5}),
        create("X", {"name": "X", "sealed": "yes"}),
        create("X", {"name": "X", "metadata": {"a": 1}}),
        create("X", {"name": "X", "max_msg_size": 2**40}),
        create("X", {"name": 7}),
        consumer(ccfg(ack_policy="maybe")),
        consumer(ccfg(deliver_policy=3)),
        consumer(ccfg(max_deliver="x")),
        consumer(ccfg(filter_subjects="s.a")),
        consumer(ccfg(backoff=[1, "2"])),
        consumer(ccfg(opt_start_seq=-1)),
        consumer({"stream_name": 1, "config": {}}),
        consumer({"stream_name": "S", "config": []}),
        ("req", f"{API}.STREAM.PURGE.S", {"seq": "1"}),
        ("req", f"{API}.STREAM.MSG.GET.S", {"seq": -1}),
        ("req", f"{API}.STREAM.MSG.DELETE.S", {"seq": "2"}),
    ],
    "invalid names and subjects": [
        create("a.b", {"name": "a.b"}),
        create("X", {"name": "a*"}),
        create("X", {"name": "Y"}),
        create("X", {}),
        create("a/b", {"name": "a/b"}),
        create("X", {"name": "X", "subjects": ["a..b"]}),
        create("X", {"name": "X", "subjects": ["a.>.b"]}),
        create("X", {"name": "X", "subjects": ["x", "x"]}),
        create("X", {"name": "X", "subjects": ["x.*", "x.a"]}),
        create("X", {"name": "X", "subjects": ["s.a"]}),
        create("X", {"name": "X", "subjects": [">"]}),
        create("X", {"name": "X", "subjects": ["$JS.API.x"]}),
        create("X", {"name": "X", "description": "d" * 5000}),
        consumer(ccfg(durable_name="c.d"), ".c.d"),
        consumer(ccfg(durable_name="c d")),
        consumer(ccfg(name="c/d"), ".c/d"),
        consumer(ccfg(name="a", durable_name="b"), ".a"),
        consumer(ccfg(durable_name="a")),
        consumer(ccfg(filter_subject="s..a")),
        consumer(ccfg(filter_subject="s.b"), ".n.s.a"),
        consumer(ccfg(filter_subjects=["s.a"]), ".n.s.a"),
        consumer(ccfg(filter_subjects=["s.a", "s.*"])),
        consumer(ccfg(filter_subjects=["s.a", ""])),
        consumer(ccfg(filter_subject="s.a", filter_subjects=["s.b"])),
        ("req", f"{API}.CONSUMER.CREATE.NOPE", {"stream_name": "NOPE", "config": {}}),
        ("req", f"{API}.CONSUMER.CREATE.S", {"stream_name": "T", "config": {}}),
        ("req", f"{API}.CONSUMER.CREATE.S", {"stream_name": "S"}),
        ("req", f"{API}.CONSUMER.DURABLE.CREATE.S.x", ccfg()),
        ("req", f"{API}.CONSUMER.DURABLE.CREATE.S.x", ccfg(durable_name="y")),
        ("req", f"{API}.CONSUMER.INFO.S.none", ""),
        ("req", f"{API}.CONSUMER.DELETE.S.none", ""),
    ],
    "limits out of range": [
        create("X", {"name": "X", "max_age": 50_000_000}),
        create("X", {"name": "X", "max_age": -1}),
        create("X", {"name": "X", "max_age": 10**9, "duplicate_window": 2 * 10**9}),
        create("X", {"name": "X", "duplicate_window": 10}),
        create("X", {"name": "X", "num_replicas": 3}),
        create("X", {"name": "X", "num_replicas": 6}),
        create("X", {"name": "X", "num_replicas": -1}),
        create("X", {"name": "X", "deny_purge": True, "allow_rollup_hdrs": True}),
        create("X", {"name": "X", "subject_delete_marker_ttl": 500_000_000}),
        create("X", {"name": "X", "discard_new_per_subject": True}),
        create("X", {"name": "X", "discard": "new", "discard_new_per_subject": True}),
        create("X", {"name": "X", "allow_msg_counter": True, "discard": "new"}),
        create("X", {"name": "X", "persist_mode": "async", "storage": "memory"}),
        create("X", {"name": "X", "mirror": {"name": "S"}, "first_seq": 5}),
        create("X", {"name": "X", "sealed": True}),
        create("X", {"name": "X", "subject_transform": {"src": "x", "dest": "{{nope()}}"}}),
        consumer(ccfg(ack_wait=-1, ack_policy="explicit")),
        consumer(ccfg(backoff=[1, -1], ack_policy="explicit")),
        consumer(ccfg(ack_policy="explicit", backoff=[10**9, 10**9, 10**9], max_deliver=2)),
        consumer(ccfg(deliver_subject="d", idle_heartbeat=50_000_000)),
        consumer(ccfg(deliver_subject="d", max_waiting=1)),
        consumer(ccfg(max_waiting=-1)),
        consumer(ccfg(idle_heartbeat=10**9)),
        consumer(ccfg(rate_limit_bps=100)),
        consumer(ccfg(max_batch=-1)),
        consumer(ccfg(max_expires=1000)),
        consumer(ccfg(num_replicas=3)),
        consumer(ccfg(deliver_policy="by_start_sequence")),
        consumer(ccfg(deliver_policy="by_start_time")),
        consumer(ccfg(deliver_policy="last_per_subject")),
        consumer(ccfg(deliver_policy="new", opt_start_seq=3)),
        consumer(ccfg(sample_freq="abc")),
        consumer(ccfg(priority_policy="pinned_client")),
        consumer(ccfg(priority_groups=["g"])),
        consumer(ccfg(description="d" * 5000)),
        ("req", f"{API}.STREAM.PURGE.S", {"seq": 5, "keep": 1}),
        ("req", f"{API}.STREAM.PURGE.S", {"filter": "s..a"}),
        ("req", f"{API}.STREAM.MSG.DELETE.S", {"seq": 0}),
        ("req", f"{API}.STREAM.NAMES", ""),
        ("req", f"{API}.STREAM.LIST", ""),
    ],
}


@pytest.mark.parametrize("name", list(CASES))
async def test_bad_input_same_error_as_nats_server(tmp_path: Path, name: str) -> None:
    steps = [
        *SETUP,
        *CASES[name],
        ("req", f"{API}.STREAM.NAMES", {}),
        ("req", f"{API}.CONSUMER.NAMES.S", {}),
    ]
    expected, got = await side_by_side(tmp_path, steps)
    assert_same(expected, got)
