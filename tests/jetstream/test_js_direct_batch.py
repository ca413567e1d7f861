"""Direct get batches side by side with nats-server -js: `batch`, `max_bytes`, `multi_last`,
`up_to_seq`/`up_to_time`, `start_time`, `no_hdr`, the `Nats-Num-Pending`/`Nats-Last-Sequence`
headers and the `204 EOB` status that ends a batch, and the status of every bad request."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from support.jspair import Step, assert_same, side_by_side
from support.natsserver import nats_server_binary

pytestmark = pytest.mark.skipif(nats_server_binary() is None, reason="nats-server not installed")

GET = "$JS.API.DIRECT.GET.D"
PAST = "2000-01-01T00:00:00Z"
FUTURE = "2100-01-01T00:00:00Z"


def get(body: Any) -> Step:
    return ("fetch", GET, body, 0.12)


SETUP: list[Step] = [
    ("req", "$JS.API.STREAM.CREATE.D", {"name": "D", "subjects": ["d.>"], "allow_direct": True}),
    ("pub", "d.a", "a1"),
    ("pub", "d.b", "b1" * 50),
    ("pub", "d.a", "a2", {"X-Key": "v"}),
    ("pub", "d.c.x", "c1"),
    ("pub", "d.b", "b2"),
    ("pub", "d.c.y", "c2" * 40),
]

SCENARIOS: dict[str, list[Step]] = {
    "batches": [
        get({"seq": 1, "batch": 3}),
        get({"seq": 2, "batch": 100}),
        get({"next_by_subj": "d.a", "batch": 5}),
        get({"next_by_subj": "d.c.*", "seq": 1, "batch": 5}),
        get({"seq": 1, "batch": 10, "max_bytes": 10}),
        get({"seq": 1, "batch": 10, "max_bytes": 120}),
        get({"seq": 1, "batch": 10, "max_bytes": 200}),
        get({"seq": 1, "batch": 3, "no_hdr": True}),
        get({"seq": 1, "batch": 3, "up_to_seq": 2}),
        get({"start_time": PAST, "batch": 2}),
        get({"start_time": FUTURE, "batch": 2}),
        get({"seq": 50, "batch": 3}),
        get({"next_by_subj": "d.zz", "batch": 3}),
        get({"seq": 1, "batch": -1}),
        get({"seq": 3, "no_hdr": True}),
        get({"seq": 1, "unknown_key": 1}),
    ],
    "multi last": [
        get({"multi_last": ["d.a", "d.b"]}),
        get({"multi_last": ["d.>"]}),
        get({"multi_last": ["d.>"], "batch": 2}),
        get({"multi_last": ["d.>"], "max_bytes": 50}),
        get({"multi_last": ["d.>"], "up_to_seq": 3}),
        get({"multi_last": ["d.>"], "seq": 4}),
        get({"multi_last": ["d.c.*", "d.c.x"]}),
        get({"multi_last": ["d.zz"]}),
        get({"multi_last": ["d.>"], "up_to_time": PAST}),
        get({"multi_last": ["d.>"], "up_to_time": FUTURE}),
        get({"multi_last": ["d.>"], "no_hdr": True}),
    ],
    "bad requests": [
        get(""),
        get("{bad"),
        get("[]"),
        get({}),
        get({"seq": "1"}),
        get({"seq": -1}),
        get({"batch": 2}),
        get({"seq": 1, "last_by_subj": "d.a"}),
        get({"seq": 1, "start_time": PAST}),
        get({"last_by_subj": "d.a", "batch": 2}),
        get({"last_by_subj": "d.a", "multi_last": ["d.a"]}),
        get({"next_by_subj": "d.a", "multi_last": ["d.a"]}),
        get({"multi_last": ["d.a"], "up_to_seq": 2, "up_to_time": PAST}),
        get({"start_time": "yesterday"}),
        get({"multi_last": "d.a"}),
        ("fetch", f"{GET}.d.a", "", 0.12),
        ("fetch", f"{GET}.d.a", {"batch": 2}, 0.12),
        ("fetch", f"{GET}.d.a", {"no_hdr": True}, 0.12),
        ("fetch", f"{GET}.d.a", "{bad", 0.12),
        ("fetch", f"{GET}.d.zz", "", 0.12),
    ],
}


@pytest.mark.parametrize("name", list(SCENARIOS))
async def test_direct_get_as_nats_server(tmp_path: Path, name: str) -> None:
    expected, got = await side_by_side(tmp_path, SETUP + SCENARIOS[name])
    assert_same(expected, got)


MIRROR_DIRECT: list[Step] = [
    ("req", "$JS.API.STREAM.CREATE.M", {"name": "M", "mirror": {"name": "D"}}),
    ("sleep", 0.5),
    ("req", "$JS.API.STREAM.INFO.M", ""),
    # With the origin gone, only the mirror (mirror_direct, inherited) answers its gets.
    ("req", "$JS.API.STREAM.DELETE.D", ""),
    ("fetch", GET, {"seq": 2}, 0.12),
    ("fetch", f"{GET}.d.a", "", 0.12),
    get({"seq": 1, "batch": 2}),
    ("fetch", "$JS.API.DIRECT.GET.M", {"seq": 2}, 0.12),
]


async def test_mirror_direct_as_nats_server(tmp_path: Path) -> None:
    expected, got = await side_by_side(tmp_path, SETUP + MIRROR_DIRECT)
    assert_same(expected, got)
