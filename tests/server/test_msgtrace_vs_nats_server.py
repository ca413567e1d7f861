"""Message tracing (`Nats-Trace-Dest`, `Nats-Trace-Only`, `traceparent`), side by side with
nats-server.

Each scenario runs against the real nats-server and against pynatsd with the same configuration:
raw clients subscribe to the trace destination and to the traced subjects, publish with the
trace headers, and record every frame they get. The frames must be the same bytes, except the
trace events, which are compared as JSON after the values that must differ are replaced (server
name, id, sequence and time, the events' timestamps, client ids by the name of the client that
has them); key order, fields present or left out, and counts are compared as they are. Receivers
(egress, stream) come in SubList order, which nats-server does not keep: the events from the
first receiver on are compared sorted (the ingress and the subject mapping and service import
events before it, in order).
"""

from __future__ import annotations

import asyncio
import gzip
import json
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, cast

import pytest

from support.jwts import Key, account_jwt, account_key, make_operator, user_jwt, user_key
from support.natsserver import nats_server_binary
from support.normalise import split_frames
from support.processes import PYNATSD, start_server
from support.rawclient import RawClient

NATS_SERVER = nats_server_binary()
pytestmark = pytest.mark.skipif(NATS_SERVER is None, reason="nats-server binary not found")

TRACE = "trace.dest"
# The subjects trace events go to in these scenarios.
TRACE_SUBJECTS = (TRACE.encode(), b"acc.trace")


class Conn:
    """A raw client that knows its client id and records what the server sends it."""

    def __init__(self, run: Run, raw: RawClient, name: str, cid: int) -> None:
        self.run, self.raw, self.name, self.cid = run, raw, name, cid

    async def send(self, data: bytes) -> None:
        await self.raw.send(data)

    async def hpub(
        self,
        subject: str,
        headers: list[tuple[str, str]],
        body: bytes = b"hello",
        reply: str = "",
    ) -> None:
        block = b"NATS/1.0\r\n"
        block += b"".join(f"{k}: {v}\r\n".encode() for k, v in headers) + b"\r\n"
        head = f"HPUB {subject} {reply + ' ' if reply else ''}{len(block)} {len(block) + len(body)}"
        await self.raw.send(head.encode() + b"\r\n" + block + body + b"\r\n")

    async def frames(self) -> list[Any]:
        """Everything received up to a PONG, the trace events decoded and normalised."""
        await asyncio.sleep(0.05)  # nats-server sends trace events from another goroutine
        await self.raw.send(b"PING\r\n")
        data = await self.raw.read_until(b"PONG\r\n")
        out: list[Any] = []
        for frame in split_frames(data)[:-1]:
            if frame != b"PING\r\n":  # the servers' first PING comes at its own time
                out.append(self.run.normalise(frame))
        return out


class Run:
    """One scenario on one server."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.names: dict[int, str] = {}

    async def connect(
        self, name: str, creds: tuple[str, Key] | None = None, **options: Any
    ) -> Conn:
        """A client named `name` (CONNECT `options`); `creds` is a user JWT and its key."""
        raw = await RawClient.connect(self.port)
        info = json.loads(raw.info[5:])
        cid = info["client_id"]
        connect = {"verbose": False, "pedantic": False, "headers": True, "protocol": 1}
        connect.update(options)
        if creds is not None:
            connect.update(jwt=creds[0], sig=creds[1].sign_nonce(info["nonce"]))
        if name:
            connect["name"] = name
        await raw.send(b"CONNECT " + json.dumps(connect).encode() + b"\r\nPING\r\n")
        await raw.read_until(b"PONG\r\n")
        await raw.send(b"PING\r\n")  # past the INFO that follows the first PONG
        await raw.read_until(b"PONG\r\n")
        self.names[cid] = name or f"cid{len(self.names)}"
        return Conn(self, raw, name, cid)

    def normalise(self, frame: bytes) -> Any:
        line, _, rest = frame.partition(b"\r\n")
        words = line.split()
        if len(words) < 2 or words[1] not in TRACE_SUBJECTS:
            return frame
        payload = rest[: int(words[-1])]
        header = b""
        if words[0] == b"HMSG":
            header, payload = payload[: int(words[-2])], payload[int(words[-2]) :]
            if b"Content-Encoding: gzip" in header:
                payload = gzip.decompress(payload)
        # The size differs with the server's name and the times; nats-server also writes the
        # empty reply of its internal messages (`MSG trace.dest 1  <size>`).
        return {"op": words[0].decode(), "header": header.decode(), "event": self._event(payload)}

    def _event(self, payload: bytes) -> Any:
        event = json.loads(payload)
        server = event["server"]
        for key in ("name", "id", "time"):
            server[key] = f"<{key}>"
        server["seq"] = 0
        for item in event["events"]:
            item["ts"] = "<ts>"
            if "cid" in item:
                item["cid"] = self.names.get(item["cid"], item["cid"])
        # The ingress, then what happened to the message as a whole (subject mapping, service
        # import) stay in order; the receivers from the first one on are sorted.
        events = event["events"]
        first = next(
            (i for i, e in enumerate(events) if i and e["type"] not in ("sm", "si")), len(events)
        )
        event["events"] = events[:first] + sorted(events[first:], key=lambda e: json.dumps(e))
        return json.dumps(event)


Script = Callable[[Run], Awaitable[list[Any]]]


def run_both(tmp_path: Path, conf: str, script: Script) -> None:
    """Run `script` against nats-server and pynatsd with `conf`; what it records must match."""
    seen = []
    for name, command in (("nats-server", [str(NATS_SERVER)]), ("pynatsd", list(PYNATSD))):
        directory = tmp_path / name
        directory.mkdir()
        path = directory / "server.conf"
        path.write_text(conf.replace("STORE_DIR", str(directory / "js")) or "# empty\n")
        server = start_server(command, ["-c", str(path)])
        try:
            seen.append(asyncio.run(script(Run(server.port))))
        finally:
            server.stop()
    for index, (theirs, ours) in enumerate(zip(seen[0], seen[1], strict=True)):
        assert ours == theirs, f"step {index}:\n{theirs!r}\n{ours!r}"


def trace_to(dest: str = TRACE, only: bool = False) -> list[tuple[str, str]]:
    headers = [("Nats-Trace-Dest", dest)]
    if only:
        headers.append(("Nats-Trace-Only", "true"))
    return headers


# -- scenarios ---------------------------------------------------------------------------------


async def _fan_out(run: Run) -> list[Any]:
    """Plain subscribers, wildcards, two queue groups, a client without headers; delivered and
    trace only."""
    tracer = await run.connect("tracer")
    await tracer.send(f"SUB {TRACE} 1\r\n".encode())
    sub1 = await run.connect("sub1")
    # Two members of q1 on one connection: whichever takes the message, the egress is the same.
    await sub1.send(b"SUB foo 1\r\nSUB foo 2\r\nSUB * 3\r\nSUB foo q1 4\r\nSUB foo q1 6\r\n")
    await sub1.send(b"SUB foo q2 5\r\n")
    plain = await run.connect("", headers=False)
    await plain.send(b"SUB foo 1\r\n")
    pub = await run.connect("pub")
    await tracer.frames(), await sub1.frames(), await plain.frames()
    seen: list[Any] = []
    for only in (False, True):
        await pub.hpub("foo", [("Some-App-Header", "some value"), *trace_to(only=only)])
        await pub.hpub("foo", [("Nats-Trace-Dest", TRACE), ("Accept-Encoding", "gzip")])
        await pub.send(b"PUB foo 2\r\nhi\r\n")  # untraced, between traced ones
        for conn in (pub, sub1, plain, tracer):
            frames = await conn.frames()
            if conn is sub1:
                frames = sorted(f.replace(b"foo 6 ", b"foo 4 ") for f in frames)
            seen.append((conn.name, frames))
    return seen


async def _no_interest_and_refusals(run: Run) -> list[Any]:
    """No subscriber (with no_responders), an invalid destination, the origin-account header,
    a disabled destination, a traceparent without an account destination, several values."""
    tracer = await run.connect("tracer")
    await tracer.send(f"SUB {TRACE} 1\r\n".encode())
    sub = await run.connect("sub")
    await sub.send(b"SUB foo 1\r\n")
    pub = await run.connect("pub", no_responders=True)
    await pub.send(b"SUB inbox 9\r\n")
    await tracer.frames(), await sub.frames(), await pub.frames()
    cases: list[tuple[str, list[tuple[str, str]], str]] = [
        ("nobody", trace_to(only=True), "inbox"),
        ("nobody", trace_to(), "inbox"),
        ("foo", trace_to("bad..dest"), ""),
        ("foo", trace_to("bad.*", only=True), ""),
        ("foo", [*trace_to(), ("Nats-Trace-Origin-Account", "X")], ""),
        ("foo", [("A", "1"), *trace_to(), ("Nats-Trace-Origin-Account", "X"), ("B", "2")], ""),
        ("foo", [*trace_to(), ("Nats-Trace-Only", "on"), ("Nats-Trace-Origin-Account", "X")], ""),
        ("foo", trace_to("trace disabled"), ""),
        ("foo", [("traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")], ""),
        ("foo", [*trace_to(), *trace_to("x"), ("B", "x"), ("A", ""), ("Nats-Trace-Only", "0")], ""),
        ("foo", [*trace_to(), ("Nats-Trace-Only", "TRUE")], ""),
        ("foo", [("Nats-Trace-Dest ", TRACE), ("nats-trace-dest", TRACE)], ""),
    ]
    seen: list[Any] = []
    for subject, headers, reply in cases:
        await pub.hpub(subject, headers, reply=reply)
        seen.append([await conn.frames() for conn in (pub, sub, tracer)])
    return seen


async def _deliver_and_trace_only(run: Run) -> list[Any]:
    """One traced message delivered, one trace only (for configurations that change both)."""
    tracer = await run.connect("tracer")
    await tracer.send(f"SUB {TRACE} 1\r\nSUB foo 2\r\n".encode())
    pub = await run.connect("pub")
    await tracer.frames()
    seen: list[Any] = []
    for only in (False, True):
        await pub.hpub("foo", trace_to(only=only))
        seen.append(await tracer.frames())
    return seen


PERMISSIONS_CONF = """
accounts {
  A {
    users: [
      {user: tracer, password: pwd, permissions: {subscribe: ["trace.>", "foo"]}}
      {user: pub, password: pwd, permissions: {
        publish: {allow: ["foo", "bar.>", "trace.dest", "$NRG.x"], deny: ["bar.baz"]}
        subscribe: {allow: ["foo", "bar.>"], deny: ["bar.bat"]}
      }}
      {user: nodest, password: pwd, permissions: {publish: ["foo"]}}
    ]
  }
}
"""


async def _permissions(run: Run) -> list[Any]:
    """A publish the publisher may not make, a trace destination it may not publish to, a
    reserved destination, a subscription that denies the subject, no echo."""
    tracer = await run.connect("tracer", user="tracer", **{"pass": "pwd"})
    await tracer.send(f"SUB {TRACE} 1\r\nSUB foo 2\r\n".encode())
    pub = await run.connect("pub", user="pub", **{"pass": "pwd"}, echo=False)
    await pub.send(b"SUB bar.> 1\r\nSUB foo 2\r\n")
    nodest = await run.connect("nodest", user="nodest", **{"pass": "pwd"})
    await tracer.frames(), await pub.frames()
    seen: list[Any] = []
    for only in (False, True):
        for conn, subject, headers in (
            (pub, "bar.baz", trace_to(only=only)),
            (pub, "bar.bat", trace_to(only=only)),
            (pub, "foo", trace_to(only=only)),
            (pub, "foo", trace_to("$NRG.x", only=only)),
            (pub, "foo", trace_to("_GR_.x", only=only)),
            (nodest, "foo", trace_to(only=only)),
        ):
            await conn.hpub(subject, headers)
            seen.append([await c.frames() for c in (conn, tracer)])
    return seen


MAX_PAYLOAD_CONF = """
max_payload: 1024
accounts {
  A {
    users: [
      {user: tracer, password: pwd}
      {user: pub, password: pwd, permissions: {publish: ["foo"]}}
    ]
  }
}
"""


async def _max_payload(run: Run) -> list[Any]:
    """An HPUB over the maximum payload whose header asks for a trace: the trace shows the
    error (the connection is closed); not when the header is only in the payload, nor to a
    destination the publisher may not publish to."""
    tracer = await run.connect("tracer", user="tracer", **{"pass": "pwd"})
    await tracer.send(f"SUB {TRACE} 1\r\nSUB foo 2\r\n".encode())
    await tracer.frames()
    seen: list[Any] = []
    for user, header in (
        ("tracer", f"NATS/1.0\r\nNats-Trace-Dest:{TRACE}\r\nNats-Trace-Only:true\r\n\r\n"),
        ("tracer", f"NATS/1.0\r\nNats-Trace-Dest:{TRACE}\r\n\r\n"),
        ("tracer", f"NATS/1.0\r\n\r\nAA\r\nNats-Trace-Dest:{TRACE}\r\n"),
        ("pub", f"NATS/1.0\r\nNats-Trace-Dest:{TRACE}\r\n\r\n"),
    ):
        pub = await run.connect("pub", user=user, **{"pass": "pwd"})
        size = len("NATS/1.0\r\n\r\n") if "AA" in header else len(header)
        await pub.send(f"HPUB foo {size} 2048\r\n{header}AAAAAAAAAA".encode())
        data, closed = await pub.raw.read_all()
        seen.append((data, closed, await tracer.frames()))
    return seen


TRACEPARENT_CONF = """
accounts {
  A {
    users: [{user: a, password: pwd}]
    msg_trace: {dest: "acc.trace", sampling: 100%}
  }
}
"""


async def _traceparent(run: Run) -> list[Any]:
    """An account with a trace destination traces messages whose traceparent is sampled."""
    tracer = await run.connect("tracer", user="a", **{"pass": "pwd"})
    await tracer.send(f"SUB acc.trace 1\r\nSUB {TRACE} 2\r\nSUB foo 3\r\n".encode())
    pub = await run.connect("pub", user="a", **{"pass": "pwd"})
    await tracer.frames()
    seen: list[Any] = []
    parent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7"
    for headers in (
        [("traceparent", parent + "-01")],
        [("TraceParent", parent + "-03"), ("Nats-Trace-Only", "true")],
        [("traceparent", parent + "-00")],
        [("traceparent", parent + "-ff")],
        [("traceparent", parent + "-01"), *trace_to()],
    ):
        await pub.hpub("foo", headers)
        seen.append(await tracer.frames())
    return seen


OPERATOR = make_operator()
TRACED_ACCOUNT = account_key()
JWT_CONF = (
    f"operator: {OPERATOR.jwt}\nresolver: MEMORY\nresolver_preload {{\n"
    f"  {OPERATOR.system.public}: {OPERATOR.system_jwt}\n"
    f"  {TRACED_ACCOUNT.public}: "
    f"{account_jwt(OPERATOR.signing, TRACED_ACCOUNT, trace={'dest': 'acc.trace'})}\n}}\n"
)


async def _jwt_account(run: Run) -> list[Any]:
    """An account JWT's trace claim gives the account its trace destination."""
    key = user_key()
    user = (user_jwt(TRACED_ACCOUNT, key), key)
    tracer = await run.connect("tracer", user)
    await tracer.send(b"SUB acc.trace 1\r\nSUB foo 2\r\n")
    pub = await run.connect("pub", user)
    await tracer.frames()
    parent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7"
    seen: list[Any] = []
    for flags in ("01", "00"):
        await pub.hpub("foo", [("traceparent", f"{parent}-{flags}")])
        seen.append(await tracer.frames())
    assert any(isinstance(frame, dict) for frame in seen[0])  # a trace event came
    return seen


IMPORTS_CONF = """
accounts {
  A {
    users: [{user: a, password: pwd}]
    exports: [
      {stream: "news.>"}
      {service: "svc.traced", allow_trace: true}
      {service: "svc.plain"}
    ]
  }
  B {
    users: [{user: b, password: pwd}]
    imports: [
      {stream: {account: A, subject: "news.>"}, prefix: "imp"}
      {stream: {account: A, subject: "news.x"}, to: "tnews", allow_trace: true}
      {service: {account: A, subject: "svc.traced"}}
      {service: {account: A, subject: "svc.plain"}, to: "plain"}
    ]
  }
}
"""


async def _imports(run: Run) -> list[Any]:
    """Stream imports (with and without allow_trace) and service imports (the export allows
    tracing or not): the trace reports the import, and the receivers behind it if allowed."""
    in_a = {"user": "a", "pass": "pwd"}
    in_b = {"user": "b", "pass": "pwd"}
    tracer_a = await run.connect("ta", **in_a)
    await tracer_a.send(f"SUB {TRACE} 1\r\n".encode())
    tracer_b = await run.connect("tb", **in_b)
    await tracer_b.send(f"SUB {TRACE} 1\r\n".encode())
    sub_a = await run.connect("sa", **in_a)
    await sub_a.send(b"SUB news.> 1\r\nSUB svc.traced 2\r\nSUB svc.plain 3\r\n")
    sub_b = await run.connect("sb", **in_b)
    await sub_b.send(b"SUB imp.news.> 1\r\nSUB tnews 2\r\n")
    pub_a = await run.connect("pa", **in_a)
    pub_b = await run.connect("pb", **in_b)
    conns = (tracer_a, tracer_b, sub_a, sub_b)
    for conn in conns:
        await conn.frames()
    seen: list[Any] = []
    for only in (False, True):
        for pub, subject in ((pub_a, "news.x"), (pub_b, "svc.traced"), (pub_b, "plain")):
            await pub.hpub(subject, trace_to(only=only))
            seen.append([[_imported(f) for f in await conn.frames()] for conn in conns])
    return seen


def _imported(frame: Any) -> Any:
    """A request through a service import, without what differs by design: the
    Nats-Request-Info header (pynatsd does not add it yet) and the name of the response
    import the trace destination points to."""
    if not isinstance(frame, bytes) or not frame.startswith(b"HMSG "):
        return frame
    line, _, rest = frame.partition(b"\r\n")
    words = line.split()
    header, body = rest[: int(words[-2])], rest[int(words[-2]) : int(words[-1])]
    kept = [
        b"Nats-Trace-Dest: _R_.<id>" if h.startswith(b"Nats-Trace-Dest: _R_.") else h
        for h in header.split(b"\r\n")
        if not h.startswith(b"Nats-Request-Info:")
    ]
    return (words[:-2], b"\r\n".join(kept), body)


JETSTREAM_CONF = """
jetstream {store_dir: "STORE_DIR"}
"""


async def _jetstream(run: Run) -> list[Any]:
    """A stream stores a traced message (its trace destination switched off), checks a
    trace-only one without storing it, reports its refusals, and interest retention."""
    tracer = await run.connect("tracer")
    await tracer.send(f"SUB {TRACE} 1\r\nSUB _R.> 2\r\n".encode())
    await tracer.frames()
    streams = [
        {
            "name": "TEST",
            "subjects": ["foo"],
            "storage": "memory",
            "subject_transform": {"src": "foo", "dest": "bar"},
        },
        {"name": "INTEREST", "subjects": ["baz"], "retention": "interest", "storage": "memory"},
    ]
    for config in streams:
        body = json.dumps(config).encode()
        subject = f"$JS.API.STREAM.CREATE.{config['name']}"
        await tracer.send(f"PUB {subject} _R.c {len(body)}\r\n".encode() + body + b"\r\n")
    await tracer.frames()  # the creation replies differ in their times: not compared
    seen: list[Any] = []
    for subject, headers in (
        ("foo", trace_to()),
        ("foo", trace_to(only=True)),
        ("foo", [*trace_to(only=True), ("Nats-Expected-Stream", "WRONG")]),
        ("foo", [*trace_to(only=True), ("Nats-Expected-Last-Sequence", "10")]),
        ("foo", [*trace_to(only=True), ("Nats-Rollup", "wrong")]),
        ("baz", trace_to(only=True)),
        ("baz", trace_to()),
    ):
        await tracer.hpub(subject, headers, reply="_R.ack")
        # The ack and the event come from different places: in any order.
        seen.append(sorted(await tracer.frames(), key=repr))
    # The stored message: Nats-Trace-Dest is "trace disabled" in it.
    body = json.dumps({"seq": 1}).encode()
    await tracer.send(b"PUB $JS.API.STREAM.MSG.GET.TEST _R.get %d\r\n%s\r\n" % (len(body), body))
    frames = await tracer.frames()
    reply = json.loads(frames[0].split(b"\r\n", 1)[1].split(b"\r\n")[0])
    seen.append((reply["message"]["subject"], reply["message"]["hdrs"]))
    info = json.dumps({}).encode()
    await tracer.send(b"PUB $JS.API.STREAM.INFO.TEST _R.i %d\r\n%s\r\n" % (len(info), info))
    frames = await tracer.frames()
    seen.append(json.loads(frames[0].split(b"\r\n", 1)[1].split(b"\r\n")[0])["state"]["messages"])
    return seen


MAPPINGS_CONF = """
mappings {
  "orders.*": "mapped.$1"
  same: same
  "id.*": "id.$1"
  fixed: [{destination: fixed.a, weight: 100%}, {destination: fixed.b, weight: 0%}]
  w: [{destination: w.a, weight: 50%}, {destination: w.b, weight: 50%}]
  half: [{destination: half.a, weight: 50%}]
  lossy: [{destination: lossy.kept, weight: 50%}, {destination: lossy, weight: 0%}]
  drop: [{destination: drop.never, weight: 0%}, {destination: drop, weight: 0%}]
  nobody: nobody.here
  gr: "_GR_.x"
  nrg: "$NRG.x"
}
"""


async def _mappings(run: Run) -> list[Any]:
    """A traced message whose subject a mapping changes (or maps onto itself, or drops): the
    `sm` event after the ingress, which keeps the published subject; a mapping onto a reserved
    subject; a reserved reply; no responders under the mapped subject; delivered and trace
    only."""
    tracer = await run.connect("tracer")
    await tracer.send(f"SUB {TRACE} 1\r\n".encode())
    sub = await run.connect("sub")
    await sub.send(
        b"SUB orders.* 1\r\nSUB mapped.* 2\r\nSUB same 3\r\nSUB id.* 4\r\nSUB fixed.* 5\r\n"
        b"SUB plain 6\r\nSUB _GR_.x 7\r\nSUB $NRG.x 8\r\n"
    )
    pub = await run.connect("pub", no_responders=True)
    await pub.send(b"SUB inbox 1\r\n")
    await tracer.frames(), await sub.frames(), await pub.frames()
    seen: list[Any] = []
    for only in (False, True):
        for subject, reply in (
            ("orders.x", ""),
            ("same", ""),
            ("id.7", ""),
            ("fixed", ""),
            ("plain", ""),
            ("gr", ""),
            ("nrg", ""),
            ("orders.x", "_R_.x"),
            ("plain", "_R_.x"),
            ("nobody", "inbox"),
            ("drop", "inbox"),
        ):
            await pub.hpub(subject, trace_to(only=only), reply=reply)
            seen.append([await conn.frames() for conn in (pub, sub, tracer)])
    return seen


def _event(frames: list[Any]) -> dict[str, Any]:
    (event,) = [json.loads(f["event"]) for f in frames if isinstance(f, dict)]
    return cast("dict[str, Any]", event)


async def _weighted_mappings(run: Run) -> list[Any]:
    """Weighted mappings: the `sm` event names the destination chosen (the source itself, for
    the share a mapping leaves to it; empty, for a message dropped), and the message goes there.
    Random choices, so each server's outcomes are compared as a set (20 draws of 50%)."""
    tracer = await run.connect("tracer")
    await tracer.send(f"SUB {TRACE} 1\r\n".encode())
    sub = await run.connect("sub")
    await sub.send(b"SUB w.a 1\r\nSUB w.b 5\r\nSUB half 2\r\nSUB half.a 3\r\nSUB lossy.kept 4\r\n")
    pub = await run.connect("pub")
    await tracer.frames(), await sub.frames()
    outcomes: set[tuple[str, str, str]] = set()
    for subject in ("w", "half", "lossy"):
        for _ in range(20):
            await pub.hpub(subject, trace_to())
            event = _event(await tracer.frames())
            received = [
                f.split(b" ", 2)[1].decode() for f in await sub.frames() if f.startswith(b"HMSG")
            ]
            mapped = [e["to"] for e in event["events"] if e["type"] == "sm"]
            egress = [e["sub"] for e in event["events"] if e["type"] == "eg"]
            assert event["events"][0]["subj"] == subject
            assert len(mapped) == 1 and received == egress == ([mapped[0]] if mapped[0] else [])
            outcomes.add((subject, mapped[0], ",".join(received)))
    return sorted(outcomes)


MAPPED_IMPORT_CONF = """
accounts {
  A {
    users: [{user: a, password: pwd}]
    exports: [{service: "svc.>", allow_trace: true}, {service: "plain.>"}]
    mappings { "svc.in": "svc.mapped", "plain.in": "plain.mapped" }
  }
  B {
    users: [{user: b, password: pwd}]
    imports: [
      {service: {account: A, subject: "svc.>"}}
      {service: {account: A, subject: "plain.>"}}
    ]
    mappings { "req": "svc.in", "preq": "plain.in" }
  }
}
"""


async def _mapped_service_import(run: Run) -> list[Any]:
    """A mapping in the importing account turns a request into a service import's subject (an
    `sm`, then the `si`); the exporting account's own mapping changes the subject the import
    delivers to (the `si` event's `to`; no `sm` for it)."""
    in_a = {"user": "a", "pass": "pwd"}
    in_b = {"user": "b", "pass": "pwd"}
    tracer = await run.connect("tb", **in_b)
    await tracer.send(f"SUB {TRACE} 1\r\n".encode())
    service = await run.connect("sa", **in_a)
    await service.send(b"SUB svc.> 1\r\nSUB plain.> 2\r\n")
    pub = await run.connect("pb", **in_b)
    await tracer.frames(), await service.frames()
    seen: list[Any] = []
    for only in (False, True):
        for subject in ("req", "svc.in", "svc.other", "preq"):
            await pub.hpub(subject, trace_to(only=only))
            seen.append([[_imported(f) for f in await conn.frames()] for conn in (tracer, service)])
    return seen


MAPPED_JETSTREAM_CONF = """
jetstream {store_dir: "STORE_DIR"}
accounts {
  A {
    jetstream: enabled
    users: [
      {user: a, password: pwd}
      {user: limited, password: pwd, permissions: {publish: ["in.*", "trace.dest"]}}
    ]
    mappings { "in.*": "st.$1" }
  }
}
"""


async def _mapped_jetstream(run: Run) -> list[Any]:
    """A stream captures the mapped subject (`sm`, then `js` with the subject stored); a
    publisher allowed the published subject but not the mapped one is refused under the
    mapped subject, the trace saying so."""
    tracer = await run.connect("tracer", user="a", **{"pass": "pwd"})
    await tracer.send(f"SUB {TRACE} 1\r\nSUB _R.> 2\r\n".encode())
    limited = await run.connect("limited", user="limited", **{"pass": "pwd"})
    await tracer.frames()
    body = json.dumps({"name": "ST", "subjects": ["st.*"], "storage": "memory"}).encode()
    await tracer.send(b"PUB $JS.API.STREAM.CREATE.ST _R.c %d\r\n%s\r\n" % (len(body), body))
    await tracer.frames()  # the creation reply differs in its times: not compared
    seen: list[Any] = []
    for only in (False, True):
        await tracer.hpub("in.1", trace_to(only=only), reply="_R.ack")
        seen.append(sorted(await tracer.frames(), key=repr))  # the ack and the event, any order
        await limited.hpub("in.2", trace_to(only=only))
        seen.append([await conn.frames() for conn in (limited, tracer)])
    return seen


@pytest.mark.parametrize(
    ("conf", "script"),
    [
        ("", _fan_out),
        ("", _no_interest_and_refusals),
        ("no_system_account: true", _deliver_and_trace_only),
        (PERMISSIONS_CONF, _permissions),
        (MAX_PAYLOAD_CONF, _max_payload),
        (TRACEPARENT_CONF, _traceparent),
        (JWT_CONF, _jwt_account),
        (IMPORTS_CONF, _imports),
        (JETSTREAM_CONF, _jetstream),
        (MAPPINGS_CONF, _mappings),
        (MAPPINGS_CONF, _weighted_mappings),
        (MAPPED_IMPORT_CONF, _mapped_service_import),
        (MAPPED_JETSTREAM_CONF, _mapped_jetstream),
    ],
    ids=[
        "fan-out",
        "no-interest-and-refusals",
        "no-system-account",
        "permissions",
        "max-payload",
        "traceparent",
        "jwt-account",
        "imports",
        "jetstream",
        "mappings",
        "weighted-mappings",
        "mapped-service-import",
        "mapped-jetstream",
    ],
)
def test_message_trace_like_nats_server(tmp_path: Path, conf: str, script: Script) -> None:
    run_both(tmp_path, conf, script)
