"""Batch publishing side by side with nats-server -js: atomic batches (`allow_atomic`,
`Nats-Batch-*` headers) and fast-ingest batches (`allow_batched`, the `.$FI` reply pattern).

The same raw publishes go to both servers; every reply (empty staging replies, PubAcks, flow
acks, gaps, errors) arrives on one wildcard subscription, and the transcripts are compared in
arrival order after normalising times. Both servers run with small batch limits (3 inflight
batches per stream, 5 messages per atomic batch, a 700 ms timeout) so the limits are quick
to reach.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import nats
import pytest

from support.jspair import _normalize, assert_same
from support.natsserver import nats_server_binary
from support.processes import PYNATSD, start_server

pytestmark = pytest.mark.skipif(nats_server_binary() is None, reason="nats-server not available")

CONFIG = """
jetstream {
  store_dir: "%s"
  limits { batch { max_inflight_per_stream: 3, max_msgs: 5, timeout: "700ms" } }
}
"""

Step = tuple[Any, ...]


def stream(name: str, subjects: list[str], **extra: Any) -> Step:
    body = {"name": name, "subjects": subjects, "storage": "file", **extra}
    return ("req", f"$JS.API.STREAM.CREATE.{name}", body)


def batch(
    subject: str, batch_id: str, seq: int | str | None, commit: str | None = None, **h: str
) -> Step:
    headers = {"Nats-Batch-Id": batch_id}
    if seq is not None:
        headers["Nats-Batch-Sequence"] = str(seq)
    if commit is not None:
        headers["Nats-Batch-Commit"] = commit
    headers.update({k.replace("_", "-"): v for k, v in h.items()})
    return ("pub", subject, f"{batch_id}:{seq}", headers, None)


def fast(
    subject: str, batch_id: str, seq: int, op: int, flow: int = 2, gap: str = "fail", **h: str
) -> Step:
    reply = f"R.{batch_id}.{flow}.{gap}.{seq}.{op}.$FI"
    headers = {k.replace("_", "-"): v for k, v in h.items()}
    return ("pub", subject, f"{batch_id}:{seq}", headers, reply)


def info(name: str) -> Step:
    return ("req", f"$JS.API.STREAM.INFO.{name}", {})


def get(name: str, seq: int) -> Step:
    return ("req", f"$JS.API.STREAM.MSG.GET.{name}", {"seq": seq})


def _order(subject: str) -> tuple[int, str]:
    tail = subject[2:]
    return (int(tail), "") if tail.isdigit() else (0, tail)


async def run(url: str, steps: list[Step]) -> list[Any]:
    nc = await nats.connect(url)
    got: list[Any] = []
    out: list[Any] = []

    async def keep(msg: Any) -> None:
        body: Any = msg.data.decode()
        if msg.data[:1] == b"{":
            body = _normalize(json.loads(msg.data))
        got.append([msg.subject, body])

    await nc.subscribe("R.>", cb=keep)
    n = 0
    try:
        for step in steps:
            if step[0] == "req":
                msg = await nc.request(step[1], json.dumps(step[2]).encode(), timeout=3)
                body = _normalize(json.loads(msg.data))
                if isinstance(body, dict) and isinstance(body.get("message"), dict):
                    body["message"].pop("time", None)
                out.append([step[0], step[1], body])
            elif step[0] == "pub":
                n += 1
                reply = step[4] or f"R.{n}"
                await nc.publish(step[1], step[2].encode(), reply=reply, headers=step[3] or None)
            elif step[0] == "collect":
                await nc.flush()
                await asyncio.sleep(step[1])
                # Replies to different publishes may cross (a PubAck waits for the fsync in
                # pynatsd): in publish order, and in arrival order for one publish.
                got.sort(key=lambda m: _order(m[0]))
                out.append(["collect", "", list(got)])
                got.clear()
            elif step[0] == "sleep":
                await asyncio.sleep(step[1])
    finally:
        await nc.close()
    return out


async def side_by_side(tmp_path: Path, steps: list[Step]) -> tuple[list[Any], list[Any]]:
    binary = nats_server_binary()
    assert binary is not None
    results = []
    for name, cmd in (("go", [binary]), ("py", PYNATSD)):
        d = tmp_path / name
        d.mkdir()
        conf = d / "server.conf"
        conf.write_text(CONFIG % (d / "store"))
        server = start_server(cmd, ["-c", str(conf)])
        try:
            results.append(await run(server.url, steps))
        finally:
            server.stop()
    return results[0], results[1]


C = 0.25  # how long to wait for the replies of a step


ATOMIC: list[Step] = [
    stream("A", ["a.>"], allow_atomic=True, allow_rollup_hdrs=True),
    stream("B", ["b.>"], allow_atomic=True),
    stream("N", ["n.>"]),
    stream("D", ["d.>"], allow_atomic=True, max_msgs=3, discard="new"),
    # Refused on a stream without allow_atomic.
    batch("n.1", "x", 1),
    ("collect", C),
    # The happy path: staged replies are empty, the commit gets the PubAck with batch/count.
    batch("a.1", "b1", 1),
    batch("a.2", "b1", 2),
    batch("a.3", "b1", 3, "1"),
    ("collect", C),
    info("A"),
    get("A", 3),
    # Commit by end-of-batch: the marker is not stored, the last message gets the commit.
    batch("a.4", "b2", 1),
    batch("a.5", "b2", 2),
    batch("a.x", "b2", 3, "eob"),
    ("collect", C),
    get("A", 5),
    # The malformed ones.
    batch("a.1", "b3", None),
    batch("a.1", "b" * 65, 1),
    batch("a.1", "b4", 1, "2"),
    batch("a.1", "b5", 2),
    batch("a.1", "b6", 9),
    batch("a.1", "b7", 1, "eob"),
    batch("a.1", "b8", 1),
    batch("a.1", "b8", 3, "1"),
    ("collect", C),
    # Too large: 5 messages at most.
    *[batch("a.1", "big", i) for i in range(1, 6)],
    batch("a.1", "big", 6, "1"),
    batch("a.1", "big2", 7, "1"),
    ("collect", C),
    # Expected last sequence: only the first message of a batch may carry one.
    batch("a.1", "e1", 1, Nats_Expected_Last_Sequence="5"),
    batch("a.2", "e1", 2, "1", Nats_Expected_Last_Sequence="6"),
    batch("a.1", "e2", 1, "1", Nats_Expected_Last_Sequence="4"),
    batch("a.1", "e3", 1, Nats_Expected_Last_Sequence="5"),
    batch("a.2", "e3", 2, "1"),
    ("collect", C),
    # Expected last subject sequence: not for a subject already in the batch.
    batch("a.9", "s1", 1, Nats_Expected_Last_Subject_Sequence="0"),
    batch("a.9", "s1", 2, "1", Nats_Expected_Last_Subject_Sequence="0"),
    batch("a.9", "s2", 1, Nats_Expected_Last_Subject_Sequence="3"),
    batch("a.8", "s2", 2, "1"),
    ("collect", C),
    # Duplicates, unsupported headers, rollups.
    batch("a.1", "m1", 1, Nats_Msg_Id="one"),
    batch("a.1", "m1", 2, "1", Nats_Msg_Id="one"),
    batch("a.1", "m2", 1, "1", Nats_Msg_Id="two"),
    batch("a.1", "m3", 1, "1", Nats_Msg_Id="two"),
    batch("a.1", "m4", 1, "1", Nats_Expected_Last_Msg_Id="x"),
    batch("a.1", "r1", 1),
    batch("a.2", "r1", 2, "1", Nats_Rollup="all"),
    batch("a.1", "r2", 1),
    batch("a.1", "r2", 2, "1", Nats_Rollup="sub"),
    batch("b.1", "r3", 1, "1", Nats_Rollup="sub"),
    ("collect", C),
    # Across two streams: each stream only sees part of the batch.
    batch("a.1", "two", 1),
    batch("b.1", "two", 2),
    batch("a.1", "two", 3, "1"),
    ("collect", C),
    # Discard new: the batch as a whole must fit.
    batch("d.1", "dn", 1),
    batch("d.1", "dn", 2),
    batch("d.1", "dn", 3),
    batch("d.1", "dn", 4, "1"),
    ("collect", C),
    info("D"),
    # Inflight: 3 open batches per stream.
    batch("b.1", "i1", 1),
    batch("b.1", "i2", 1),
    batch("b.1", "i3", 1),
    batch("b.1", "i4", 1),
    ("collect", C),
    # Abandoned batches time out (700 ms).
    ("sleep", 1.0),
    batch("b.1", "i1", 2, "1"),
    batch("b.1", "i5", 1, "1"),
    ("collect", C),
    info("A"),
    info("B"),
]


FAST: list[Step] = [
    stream("F", ["f.>"], allow_batched=True),
    stream("N", ["n.>"]),
    fast("n.1", "x", 1, 0),
    ("pub", "f.1", "bad", {}, "R.nope.$FI"),
    ("pub", "f.1", "bad", {}, "R.id.2.fail.2.0.$FI"),
    ("collect", C),
    # Happy path, flow acks every 2 (the client's initial flow), ramping up.
    *[fast("f.1", "h1", i, 0 if i == 1 else 1) for i in range(1, 12)],
    fast("f.1", "h1", 12, 2),
    ("collect", C),
    info("F"),
    # Commit by end of batch.
    fast("f.2", "h2", 1, 0),
    fast("f.2", "h2", 2, 1),
    fast("f.2", "h2", 3, 3),
    ("collect", C),
    # Unknown batch, a gap with gap fail, a gap with gap ok, a ping.
    fast("f.1", "u1", 2, 1),
    fast("f.1", "g1", 1, 0),
    fast("f.1", "g1", 3, 1),
    ("collect", C),
    fast("f.1", "g2", 1, 0, gap="ok"),
    fast("f.1", "g2", 3, 1, gap="ok"),
    fast("f.1", "g2", 3, 4, gap="ok"),
    fast("f.1", "g2", 4, 2, gap="ok"),
    ("collect", C),
    fast("f.1", "p1", 1, 0, flow=100),
    fast("f.1", "p1", 1, 4, flow=100),
    fast("f.1", "p1", 5, 4, flow=100),
    ("collect", C),
    # An error inside a batch, and at its first message.
    fast("f.1", "e1", 1, 0),
    fast("f.1", "e1", 2, 1, Nats_Expected_Last_Sequence="1"),
    fast("f.1", "e2", 1, 0, Nats_Expected_Last_Sequence="1"),
    fast("f.1", "e3", 1, 0, Nats_Msg_Id="d1"),
    fast("f.1", "e3", 2, 2),
    fast("f.1", "e4", 1, 0, Nats_Msg_Id="d1"),
    ("collect", C),
    # Inflight limit (3 per stream), then the timeout.
    fast("f.1", "i1", 1, 0),
    fast("f.1", "i2", 1, 0),
    fast("f.1", "i3", 1, 0),
    fast("f.1", "i4", 1, 0),
    ("collect", C),
    ("sleep", 1.0),
    fast("f.1", "i1", 2, 2),
    ("collect", C),
    info("F"),
    # An object store put through fast ingest: the chunks as one batch, then the meta
    # message (a rollup of the object's meta subject), as a client writing objects does.
    stream(
        "OBJ_b",
        ["$O.b.C.>", "$O.b.M.>"],
        allow_batched=True,
        allow_rollup_hdrs=True,
        allow_direct=True,
        discard="new",
    ),
    *[fast("$O.b.C.nuid1", "o1", i, 0 if i == 1 else 1, flow=3) for i in range(1, 5)],
    fast("$O.b.C.nuid1", "o1", 5, 3, flow=3),
    ("collect", C),
    ("pub", "$O.b.M.b2Jq", '{"name":"obj","chunks":4}', {"Nats-Rollup": "sub"}, None),
    ("collect", C),
    info("OBJ_b"),
]


async def test_atomic_batch_vs_nats_server(tmp_path: Path) -> None:
    expected, got = await side_by_side(tmp_path, ATOMIC)
    assert_same(expected, got)


async def test_fast_batch_vs_nats_server(tmp_path: Path) -> None:
    expected, got = await side_by_side(tmp_path, FAST)
    assert_same(expected, got)
