"""Protocol fuzzing of a live pynatsd: many connections send valid and mutated frames.

The server runs in-process (same event loop). Each connection sends a batch of frames, some of them
mutated (byte flips, truncations, insertions, deletions, duplications, case changes, lost CRs),
written in randomly sized pieces so the server sees arbitrary read boundaries. After the batch
comes a sentinel (SUB + PUB on a private subject) and then a run of newlines long enough to end
any state the parser can be in (a pending payload of up to max_payload, a partial line, a PING
waiting for its LF) with a parse error, so every connection ends with the server closing it and
nothing is left to guess with timeouts.

Counting is honest too: a frame counts as sent only if it was handed to the socket in full before
the server closed, and as processed only if its connection's sentinel came back (so the server
certainly parsed everything before it). The target is on processed frames.

What is checked:
- everything the server sends parses as server frames (INFO, MSG, HMSG, PING, PONG, +OK, -ERR with
  a known text), and nothing follows an -ERR that closes the connection;
- connections that sent only valid frames ("clean") get exactly the expected number of messages
  and PONGs, and the sentinel;
- the server closed every connection (no hang), `server.clients` empties, memory stays bounded,
  and afterwards a raw PING gets PONG and nats-py can publish and subscribe.
"""

from __future__ import annotations

import asyncio
import bisect
import contextlib
import itertools
import json
import random
from dataclasses import dataclass, field

import nats

import pynatsd
from pynatsd.protocol import errors
from support.memory import rss_bytes
from support.parserfuzz import mutate

SEED = 20261122
MAX_PAYLOAD = 1024
# Frames the server must have certainly parsed (connections whose sentinel came back); about
# twice as many are sent in all.
TARGET_FRAMES = 150_000
FRAMES_PER_CONNECTION = 300
WORKERS = 16
# The fuzz loop stops starting connections after this long, whatever the frame count (a quiet
# machine needs a fraction of it; a loaded CI box several times more); the count
# is asserted afterwards, so a slow machine fails loudly instead of running forever.
FUZZ_BUDGET_S = 90.0
RSS_GROWTH_LIMIT = 50 * 1024 * 1024
# Per connection: the share of frames that get mutated. Zero means a clean connection whose output
# is checked exactly.
MUTATION_RATES = (0.0, 0.0, 0.001, 0.005, 0.02, 0.1, 0.5)

# -ERR texts that close the connection; anything after one of them is a server bug.
FATAL_ERRORS = {
    errors.UNKNOWN_PROTOCOL_OPERATION,
    errors.AUTHORIZATION_VIOLATION,
    errors.MAXIMUM_PAYLOAD_VIOLATION,
    errors.MAXIMUM_CONTROL_LINE_EXCEEDED,
    errors.INVALID_CLIENT_PROTOCOL,
    errors.NO_RESPONDERS_REQUIRES_HEADERS,
    errors.STALE_CONNECTION,
}
# -ERR texts a fuzzed client can provoke without being closed.
SOFT_ERRORS = {errors.INVALID_SUBJECT, errors.INVALID_PUBLISH_SUBJECT}

CONNECT_OPTS = {
    "verbose": False,
    "pedantic": False,
    "protocol": 1,
    "headers": True,
    "echo": True,
    "no_responders": False,
    "name": "fuzz",
}


class BadServerOutput(AssertionError):
    pass


@dataclass
class ServerFrame:
    op: bytes
    args: list[bytes]
    payload: bytes = b""


def split_server_frames(data: bytes) -> list[ServerFrame]:
    """Cut what the server sent into frames; raise BadServerOutput on anything malformed."""
    frames: list[ServerFrame] = []
    pos = 0
    while pos < len(data):
        end = data.find(b"\r\n", pos)
        if end < 0:
            raise BadServerOutput(f"unterminated line at {pos}: {data[pos : pos + 80]!r}")
        line = data[pos:end]
        pos = end + 2
        op, _, rest = line.partition(b" ")
        if op in (b"PING", b"PONG", b"+OK") and not rest:
            frames.append(ServerFrame(op, []))
        elif op == b"-ERR":
            if not (rest.startswith(b"'") and rest.endswith(b"'") and len(rest) >= 2):
                raise BadServerOutput(f"bad -ERR line {line!r}")
            text = rest[1:-1].decode()
            if text not in FATAL_ERRORS | SOFT_ERRORS:
                raise BadServerOutput(f"unexpected -ERR text {text!r}")
            frames.append(ServerFrame(op, [rest[1:-1]]))
        elif op == b"INFO":
            # nats-server's INFO ends with a space before the CRLF.
            if not rest.endswith(b"} ") or not isinstance(json.loads(rest), dict):
                raise BadServerOutput(f"bad INFO line {line!r}")
            frames.append(ServerFrame(op, []))
        elif op in (b"MSG", b"HMSG"):
            args = rest.split(b" ")
            arity = (3, 4) if op == b"MSG" else (4, 5)
            if len(args) not in arity or not all(args):
                raise BadServerOutput(f"bad {op!r} line {line!r}")
            total = int(args[-1])
            if op == b"HMSG":
                hdr = int(args[-2])
                # The header block itself is forwarded as the client wrote it (nats-server
                # does not validate it either), so only the sizes are checked.
                if not 0 <= hdr <= total:
                    raise BadServerOutput(f"bad HMSG sizes {line!r}")
            payload = data[pos : pos + total]
            if len(payload) != total or data[pos + total : pos + total + 2] != b"\r\n":
                raise BadServerOutput(f"payload of {line!r} not framed by its size")
            pos += total + 2
            frames.append(ServerFrame(op, args, payload))
        else:
            raise BadServerOutput(f"unknown server op in {line!r}")
    return frames


# -- frame generation ---------------------------------------------------------------------------


@dataclass
class CleanModel:
    """What the server must deliver to a clean connection: its subscriptions on its private
    subjects (no other connection can publish there), with auto-unsubscribe limits."""

    # sid -> (subject pattern tokens, queue, delivered, max or None)
    subs: dict[bytes, list[object]] = field(default_factory=dict)
    expected_msgs: int = 0
    pings: int = 0

    @staticmethod
    def matches(pattern: list[bytes], subject: list[bytes]) -> bool:
        for i, tok in enumerate(pattern):
            if tok == b">":
                return len(subject) > i
            if i >= len(subject) or (tok != b"*" and tok != subject[i]):
                return False
        return len(pattern) == len(subject)

    def publish(self, subject: bytes) -> None:
        tokens = subject.split(b".")
        queues: set[bytes] = set()
        for sid, sub in list(self.subs.items()):
            pattern, queue, delivered, max_msgs = sub
            assert isinstance(pattern, list) and isinstance(queue, bytes)
            assert isinstance(delivered, int)
            if not self.matches(pattern, tokens):
                continue
            if queue:
                # One delivery per queue group; clean streams never put limits on queue subs,
                # so which member receives it does not matter for the count.
                if queue not in queues:
                    queues.add(queue)
                    self.expected_msgs += 1
                continue
            self.expected_msgs += 1
            sub[2] = delivered + 1
            if max_msgs is not None and delivered + 1 >= max_msgs:  # type: ignore[operator]
                del self.subs[sid]


class FrameGen:
    """Random valid frames. `prefix` is the subject namespace: shared by fuzzed connections so
    their messages cross, private for clean connections so their output can be predicted."""

    def __init__(self, rng: random.Random, prefix: bytes, model: CleanModel | None) -> None:
        self.rng = rng
        self.prefix = prefix
        self.model = model
        self.next_sid = 1

    def subject(self, wildcards: bool) -> bytes:
        last = [b"a", b"b", b"c"] + ([b"*", b">"] if wildcards else [])
        mid = self.rng.choice([b"", b"x.", b"y."])
        return self.prefix + b"." + mid + self.rng.choice(last)

    def frame(self) -> bytes:
        rng = self.rng
        r = rng.random()
        model = self.model
        if r < 0.45:
            subject = self.subject(wildcards=False)
            reply = rng.choice([b"", b" " + self.prefix + b".reply"])
            payload = rng.randbytes(rng.randint(0, 48))
            if model is not None:
                model.publish(subject)
            if rng.random() < 0.3:
                header = b"NATS/1.0\r\nK: " + b"%d" % rng.randint(0, 9) + b"\r\n\r\n"
                body = header + payload
                return b"HPUB %s%s %d %d\r\n%s\r\n" % (
                    subject,
                    reply,
                    len(header),
                    len(body),
                    body,
                )
            return b"PUB %s%s %d\r\n%s\r\n" % (subject, reply, len(payload), payload)
        if r < 0.70:
            subject = self.subject(wildcards=True)
            sid = b"%d" % self.next_sid
            self.next_sid += 1
            queue = rng.choice([b"", b"", b"q1", b"q2"])
            if model is not None:
                model.subs[sid] = [subject.split(b"."), queue, 0, None]
            if queue:
                return b"SUB %s %s %s\r\n" % (subject, queue, sid)
            return b"SUB %s %s\r\n" % (subject, sid)
        if r < 0.82:
            sid = b"%d" % rng.randint(1, max(1, self.next_sid))
            sub = model.subs.get(sid) if model is not None else None
            # Limits only on plain subs in clean streams (see CleanModel.publish).
            if rng.random() < 0.5 and (model is None or (sub is not None and not sub[1])):
                max_msgs = rng.randint(1, 4)
                if sub is not None:
                    delivered = sub[2]
                    assert isinstance(delivered, int)
                    if max_msgs > delivered:
                        sub[3] = max_msgs
                    else:
                        del model.subs[sid]  # type: ignore[union-attr]
                return b"UNSUB %s %d\r\n" % (sid, max_msgs)
            if model is not None:
                model.subs.pop(sid, None)
            return b"UNSUB %s\r\n" % sid
        if r < 0.92:
            if model is not None:
                model.pings += 1
            return b"PING\r\n"
        if r < 0.97:
            return rng.choice([b"PONG\r\n", b"+OK\r\n", b'INFO {"x":1}\r\n'])
        # A second CONNECT drops every subscription of the connection.
        if model is not None:
            model.subs.clear()
        return b"CONNECT " + json.dumps(CONNECT_OPTS).encode() + b"\r\n"


# -- one connection -----------------------------------------------------------------------------


@dataclass
class Stats:
    frames_sent: int = 0
    # Frames of connections whose sentinel came back: certainly parsed by the server.
    frames_processed: int = 0
    mutated_sent: int = 0
    connections: int = 0
    clean_connections: int = 0
    sentinels_seen: int = 0
    errors_seen: dict[str, int] = field(default_factory=dict)
    failures: list[str] = field(default_factory=list)


async def fuzz_connection(port: int, rng: random.Random, index: int, stats: Stats) -> None:
    rate = rng.choice(MUTATION_RATES)
    token = b"c%d" % index
    model = CleanModel() if rate == 0 else None
    gen = FrameGen(rng, token if model is not None else b"fz", model)
    frames = [b"CONNECT " + json.dumps(CONNECT_OPTS).encode() + b"\r\n"]
    frames += [gen.frame() for _ in range(FRAMES_PER_CONNECTION)]
    if rate:
        for i, f in enumerate(frames):
            if rng.random() < rate:
                frames[i] = mutate(f, rng)
                stats.mutated_sent += 1
    sentinel_subject = b"s" + token + b".sentinel"
    sentinel = b"SUB %s zz\r\nPUB %s 2\r\nok\r\n" % (sentinel_subject, sentinel_subject)
    expected_sentinel = b"MSG %s zz 2\r\nok\r\n" % sentinel_subject
    # Enough newlines to finish a pending payload of max_payload bytes, then fail on an empty line.
    closer = b"\n" * (MAX_PAYLOAD + 4)
    data = b"".join(frames) + sentinel + closer

    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    received = bytearray()

    async def read_all() -> None:
        while chunk := await reader.read(65536):
            received.extend(chunk)

    read_task = asyncio.create_task(read_all())
    pos = 0
    try:
        # Stop once the server has closed: later writes would only be counted, not parsed.
        while pos < len(data) and not read_task.done():
            # Random read boundaries: tiny pieces now and then, otherwise up to a few KiB.
            size = rng.choice((1, 2, 7, rng.randint(1, 4096)))
            writer.write(data[pos : pos + size])
            pos += size
            if rng.random() < 0.2:
                await writer.drain()
                await asyncio.sleep(0)
    except (ConnectionError, OSError):
        pass  # the server closed first; what it sent is still in `received`
    # Frames handed to the socket in full before the server closed.
    ends = list(itertools.accumulate(len(f) for f in frames))
    stats.frames_sent += bisect.bisect_right(ends, pos)
    stats.connections += 1
    try:
        # The closer guarantees a parse error, so the server must close; a timeout is a hang.
        await asyncio.wait_for(read_task, 15)
    except TimeoutError:
        stats.failures.append(f"conn {index}: server never closed (rate {rate})")
        read_task.cancel()
    except (ConnectionError, OSError):
        pass
    writer.close()
    with contextlib.suppress(ConnectionError, OSError):
        await writer.wait_closed()
    if check_output(bytes(received), index, model, expected_sentinel, stats):
        stats.frames_processed += len(frames)


def check_output(
    out: bytes, index: int, model: CleanModel | None, expected_sentinel: bytes, stats: Stats
) -> bool:
    """Record what is wrong with one connection's output; True when the sentinel came back,
    i.e. the server parsed and acted on every frame the connection sent."""
    try:
        frames = split_server_frames(out)
    except BadServerOutput as e:
        stats.failures.append(f"conn {index}: {e}")
        return False
    if not frames or frames[0].op != b"INFO":
        stats.failures.append(f"conn {index}: no INFO greeting")
        return False
    for i, fr in enumerate(frames):
        if fr.op == b"-ERR":
            text = fr.args[0].decode()
            stats.errors_seen[text] = stats.errors_seen.get(text, 0) + 1
            if text in FATAL_ERRORS and i != len(frames) - 1:
                stats.failures.append(f"conn {index}: frames after fatal -ERR {text!r}")
    sentinel_seen = expected_sentinel in out
    if sentinel_seen:
        stats.sentinels_seen += 1
    if model is None:
        return sentinel_seen
    stats.clean_connections += 1
    msgs = [f for f in frames if f.op in (b"MSG", b"HMSG") and not f.args[0].startswith(b"s")]
    pongs = sum(1 for f in frames if f.op == b"PONG")
    errs = [f.args[0] for f in frames if f.op == b"-ERR"]
    problems = []
    if expected_sentinel not in out:
        problems.append("no sentinel")
    if len(msgs) != model.expected_msgs:
        problems.append(f"{len(msgs)} messages, expected {model.expected_msgs}")
    if pongs != model.pings:
        problems.append(f"{pongs} PONGs for {model.pings} PINGs")
    if errs != [errors.UNKNOWN_PROTOCOL_OPERATION.encode()]:
        problems.append(f"errors {errs!r}, expected only the closer's parse error")
    if problems:
        stats.failures.append(f"clean conn {index}: " + "; ".join(problems))
    return sentinel_seen


async def worker(port: int, seed: int, counter: list[int], stats: Stats, stop_at: float) -> None:
    loop = asyncio.get_running_loop()
    rng = random.Random(seed)
    while stats.frames_processed < TARGET_FRAMES and loop.time() < stop_at:
        counter[0] += 1
        await fuzz_connection(port, rng, counter[0], stats)


# -- the test -----------------------------------------------------------------------------------


async def test_fuzz_server_survives_mutated_frames() -> None:
    async with pynatsd.Server(port=0, max_payload=MAX_PAYLOAD) as server:
        # Warm up (imports, first allocations) before taking the memory baseline.
        await fuzz_connection(server.port, random.Random(0), 0, Stats())
        rss_before = rss_bytes()
        loop = asyncio.get_running_loop()
        stats = Stats()
        counter = [0]
        stop_at = loop.time() + FUZZ_BUDGET_S
        await asyncio.gather(
            *(worker(server.port, SEED + i, counter, stats, stop_at) for i in range(WORKERS))
        )

        assert stats.failures == [], "\n".join(stats.failures[:20])
        assert stats.frames_processed >= TARGET_FRAMES, stats
        # The run must have exercised both sides: streams that survive to the sentinel, and
        # mutations that the server rejects.
        assert stats.clean_connections >= 20, stats
        assert stats.sentinels_seen > stats.clean_connections, stats
        assert stats.mutated_sent >= TARGET_FRAMES // 20, stats
        assert (
            stats.errors_seen.get(errors.UNKNOWN_PROTOCOL_OPERATION, 0) >= stats.clean_connections
        )

        # Every connection was closed by the server; the registry must empty.
        for _ in range(200):
            if not server.clients:
                break
            await asyncio.sleep(0.01)
        assert len(server.clients) == 0
        assert rss_bytes() - rss_before < RSS_GROWTH_LIMIT

        # The server still serves: raw PING/PONG on a fresh connection ...
        reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
        assert (await asyncio.wait_for(reader.readline(), 5)).startswith(b"INFO ")
        writer.write(b"CONNECT {}\r\nPING\r\n")
        assert await asyncio.wait_for(reader.readuntil(b"PONG\r\n"), 5) == b"+OK\r\nPONG\r\n"
        writer.close()

        # ... and a real client can publish and subscribe.
        nc = await nats.connect(server.client_url, allow_reconnect=False)
        try:
            sub = await nc.subscribe("after.fuzz")
            await nc.publish("after.fuzz", b"still alive")
            msg = await sub.next_msg(timeout=5)
            assert msg.data == b"still alive"
        finally:
            await nc.close()
