"""Side by side with nats-server -js: run the same steps against the real server and pynatsd,
record what each answers, normalise what legitimately differs (times, generated names, server
ids), and compare the two transcripts.

A step is a tuple:

- ``("req", subject, body)``: a request; records the reply's headers and JSON body.
- ``("pub", subject, data[, headers])``: a publish expecting a PubAck; records it.
- ``("send", subject, data[, reply])``: a publish with no reply (an ack, for instance), or
  with the given reply subject (a pull request whose messages a ``watch`` collects).
- ``("ack", subject, data)``: an acknowledgement sent as a request (`ack_sync`); records the
  reply, or that none came within 0.3 s.
- ``("fetch", subject, body, seconds)``: a request whose answers arrive on a private inbox
  (`MSG.NEXT`, direct get batches); records every message received in `seconds`.
- ``("watch", subject[, queue])``: subscribe and keep what arrives (push deliveries).
- ``("collect", subject, seconds)``: after `seconds`, record what the watch got so far;
  ``("collect_unique", ...)`` records each distinct message once (heartbeats: how many arrive in
  a given time is a matter of timers, what they say is not).
- ``("answer_fc", subject)``: answer the last flow-control request the watch received.
- ``("sleep", seconds)``.

A pinned pull consumer's `Nats-Pin-Id` is recorded as ``<pin>``; the text ``<pin>`` in a later
step's body stands for the last pin id the run received.
"""

from __future__ import annotations

import asyncio
import base64
import json
import re
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager, suppress
from pathlib import Path
from typing import Any

import nats
from nats.aio.client import Client as NATS

import pynatsd
from support.natsserver import nats_server_binary
from support.processes import start_server

Step = tuple[Any, ...]

_VOLATILE = {
    "created",
    "ts",
    "first_ts",
    "last_ts",
    "time",
    "last_active",
    "timestamp",
    "id",
    "pause_remaining",
    "active",
    "pinned_id",
    "pinned_client_id",
}
_GENERATED = re.compile(r"^[A-Za-z0-9]{8}$")


@asynccontextmanager
async def go_server(store_dir: Path, config: str = "") -> AsyncIterator[str]:
    binary = nats_server_binary()
    assert binary is not None
    args = ["-js", "-sd", str(store_dir)]
    if config:
        conf = store_dir / "server.conf"
        conf.write_text(config)
        args += ["-c", str(conf)]
    server = start_server([binary], args)
    try:
        yield server.url
    finally:
        server.stop()


@asynccontextmanager
async def py_server(store_dir: Path) -> AsyncIterator[str]:
    async with pynatsd.Server(port=0, jetstream=True, store_dir=str(store_dir)) as srv:
        yield srv.client_url


def _normalize(value: Any, key: str = "") -> Any:
    if isinstance(value, dict):
        out = {}
        for k, v in value.items():
            if k in _VOLATILE and isinstance(v, (str, int)) and not isinstance(v, bool):
                out[k] = "<volatile>"
            elif k == "cluster":
                out[k] = "<cluster>"
            elif k == "pinned_ts" and isinstance(v, str) and not v.startswith("0001-"):
                out[k] = "<volatile>"
            else:
                out[k] = _normalize(v, k)
        return out
    if isinstance(value, list):
        return [_normalize(v, key) for v in value]
    if isinstance(value, str) and key in ("name", "consumers") and _GENERATED.match(value):
        return "<generated>"
    return value


def normalize_ack_subject(subject: str) -> str:
    """The timestamp token of `$JS.ACK.<s>.<c>.<dc>.<sseq>.<dseq>.<ts>.<pending>`, and the
    random token of a flow-control reply `$JS.FC.<s>.<c>.<token>`."""
    parts = subject.split(".")
    if len(parts) == 5 and parts[:2] == ["$JS", "FC"]:
        parts[4] = "<token>"
    if len(parts) == 9 and parts[:2] == ["$JS", "ACK"]:
        parts[7] = "<ts>"
        if _GENERATED.match(parts[3]):
            parts[3] = "<generated>"
    return ".".join(parts)


def _record_msg(msg: Any) -> dict[str, Any]:
    headers = dict(msg.headers or {})
    for k in ("Nats-Time-Stamp", "Nats-Stream-Identity"):
        if k in headers:
            headers[k] = "<volatile>"
    if headers.get("Nats-Pin-Id"):
        headers["Nats-Pin-Id"] = "<pin>"
    if "Nats-Consumer-Stalled" in headers:
        headers["Nats-Consumer-Stalled"] = normalize_ack_subject(headers["Nats-Consumer-Stalled"])
    body: Any = msg.data.decode("utf-8", "replace")
    with suppress(ValueError):
        body = _normalize(json.loads(msg.data)) if msg.data[:1] == b"{" else body
    subject = msg.subject
    if subject.startswith("_INBOX."):
        subject = "<inbox>"
    return {
        "subject": subject,
        "reply": normalize_ack_subject(msg.reply) if msg.reply else "",
        "headers": headers,
        "body": body,
    }


async def run_steps(url: str, steps: list[Step]) -> list[Any]:
    nc: NATS = await nats.connect(url)
    out: list[Any] = []
    watched: dict[str, list[Any]] = {}
    last_fc: dict[str, str] = {}
    pin = [""]

    def seen(msg: Any) -> Any:
        if msg.headers and msg.headers.get("Nats-Pin-Id"):
            pin[0] = msg.headers["Nats-Pin-Id"]
        return msg

    def body(value: Any) -> bytes:
        data = _bytes(value)
        return data.replace(b"<pin>", pin[0].encode()) if pin[0] else data

    try:
        for step in steps:
            kind = step[0]
            if kind == "watch":
                got_msgs: list[Any] = []
                watched[step[1]] = got_msgs

                async def keep(msg: Any, into: list[Any] = got_msgs, key: str = step[1]) -> None:
                    into.append(seen(msg))
                    if msg.reply.startswith("$JS.FC."):
                        last_fc[key] = msg.reply

                queue = step[2] if len(step) > 2 else ""
                await nc.subscribe(step[1], queue=queue, cb=keep)
                await nc.flush()
                continue
            if kind in ("collect", "collect_unique"):
                await asyncio.sleep(step[2])
                records = [_record_msg(m) for m in watched[step[1]]]
                watched[step[1]].clear()
                if kind == "collect_unique":
                    unique: list[Any] = []
                    for r in records:
                        if r not in unique:
                            unique.append(r)
                    records = unique
                out.append((kind, step[1], records))
                continue
            if kind == "answer_fc":
                await nc.publish(last_fc[step[1]], b"")
                await nc.flush()
                continue
            if kind == "sleep":
                await asyncio.sleep(step[1])
                continue
            if kind == "send":
                await nc.publish(step[1], body(step[2]), reply=step[3] if len(step) > 3 else "")
                await nc.flush()
                continue
            if kind == "ack":
                try:
                    msg = await nc.request(step[1], _bytes(step[2]), timeout=0.3)
                    out.append((kind, step[1], _record_msg(msg)))
                except Exception as e:
                    out.append((kind, step[1], type(e).__name__))
                continue
            if kind in ("req", "pub"):
                headers = step[3] if len(step) > 3 else None
                try:
                    msg = await nc.request(step[1], body(step[2]), timeout=2, headers=headers)
                    out.append((kind, step[1], _record_msg(seen(msg))))
                except Exception as e:  # no responders, timeout: part of the transcript
                    out.append((kind, step[1], type(e).__name__))
                continue
            if kind == "fetch":
                inbox = nc.new_inbox()
                got: list[dict[str, Any]] = []
                sub = await nc.subscribe(inbox)
                await nc.publish(step[1], body(step[2]), reply=inbox)
                deadline = time.monotonic() + step[3]
                while True:
                    left = deadline - time.monotonic()
                    if left <= 0:
                        break
                    try:
                        msg = await sub.next_msg(timeout=left)
                    except Exception:
                        break
                    got.append(_record_msg(seen(msg)))
                await sub.unsubscribe()
                out.append((kind, step[1], got))
                continue
            raise AssertionError(f"unknown step {step!r}")
    finally:
        await nc.close()
    return out


def _bytes(value: Any) -> bytes:
    if isinstance(value, bytes):
        return value
    if isinstance(value, str):
        return value.encode()
    return json.dumps(value).encode()


async def run_configured(
    cmd: list[str] | tuple[str, ...],
    directory: Path,
    config: str,
    scenario: Callable[[str], Awaitable[Any]],
) -> Any:
    """`scenario(url)` against a server started by `cmd` with `-js`, a store in `directory`
    and the configuration text `config` (accounts, imports, a domain)."""
    directory.mkdir()
    conf = directory / "server.conf"
    conf.write_text(config)
    server = start_server(cmd, ["-js", "-sd", str(directory), "-c", str(conf)])
    try:
        return await scenario(server.url)
    finally:
        server.stop()


async def side_by_side(tmp_path: Path, steps: list[Step]) -> tuple[list[Any], list[Any]]:
    """(nats-server's transcript, pynatsd's transcript) for the same steps."""
    (tmp_path / "go").mkdir()
    (tmp_path / "py").mkdir()
    async with go_server(tmp_path / "go") as url:
        expected = await run_steps(url, steps)
    async with py_server(tmp_path / "py") as url:
        got = await run_steps(url, steps)
    return expected, got


def assert_same(expected: list[Any], got: list[Any]) -> None:
    """Compare step by step, so a failure names the first step that differs."""
    assert len(expected) == len(got)
    for want, have in zip(expected, got, strict=True):
        if have != want:
            raise AssertionError(
                f"step {want[0]} {want[1]}\n nats-server: {json.dumps(want[2], sort_keys=True)}"
                f"\n pynatsd:     {json.dumps(have[2], sort_keys=True)}"
            )


async def side_by_side_at_once(
    tmp_path: Path, steps: Callable[[], list[Step]]
) -> tuple[list[Any], list[Any]]:
    """`side_by_side` with both servers running the steps at the same time (for scenarios
    that wait on timers: half the wall time), each with the steps built as it starts (so that
    times in them are fresh)."""
    (tmp_path / "go").mkdir()
    (tmp_path / "py").mkdir()

    async def go() -> list[Any]:
        async with go_server(tmp_path / "go") as url:
            return await run_steps(url, steps())

    async def py() -> list[Any]:
        async with py_server(tmp_path / "py") as url:
            return await run_steps(url, steps())

    expected, got = await asyncio.gather(go(), py())
    return expected, got


async def request_json(nc: NATS, subject: str, body: Any = None) -> Any:
    """A JetStream API request with a JSON body (none when `body` is None); the reply's JSON."""
    data = json.dumps(body).encode() if body is not None else b""
    return json.loads((await nc.request(subject, data, timeout=2)).data)


async def stored_messages(nc: NATS, stream: str) -> list[Any]:
    """Every message of `stream` as (seq, subject, headers, base64 data), read with
    `STREAM.MSG.GET`; a `Nats-Stream-Source` header loses its last field, the origin's
    identity (a hash of its creation time, which differs between two servers)."""
    out: list[Any] = []
    seq = 1
    while True:
        body = {"next_by_subj": ">", "seq": seq}
        message = (await request_json(nc, f"$JS.API.STREAM.MSG.GET.{stream}", body)).get("message")
        if message is None:
            return out
        headers = base64.b64decode(message.get("hdrs", "")).decode()
        headers = "\r\n".join(
            " ".join(line.split(" ")[:-1]) if line.startswith("Nats-Stream-Source") else line
            for line in headers.split("\r\n")
        )
        out.append((message["seq"], message["subject"], headers, message.get("data", "")))
        seq = message["seq"] + 1


async def run_both(
    tmp_path: Path, scenario: Callable[[str], Awaitable[list[Any]]]
) -> tuple[list[Any], list[Any]]:
    """(nats-server's, pynatsd's) results of `scenario(url)`, each on a fresh `-js` server."""
    (tmp_path / "go").mkdir()
    (tmp_path / "py").mkdir()
    async with go_server(tmp_path / "go") as url:
        expected = await scenario(url)
    async with py_server(tmp_path / "py") as url:
        got = await scenario(url)
    return expected, got
