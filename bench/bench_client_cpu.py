"""CPU per message inside the server, without sockets: feed a `Client` batches of PUB frames and
count the process CPU time (so a loaded machine inflates the figures less than wall time would).

    python bench/bench_client_cpu.py [--subs 1,5] [--batches 200] [--subscribe 100000]
    python bench/bench_client_cpu.py --js 200000 --profile /tmp/js.prof

`--js N` also publishes N messages to a JetStream file stream the way the Spark writer does
(HPUB with `Nats-Msg-Id` and `Nats-Expected-Stream`, a new reply subject each, PubAcks after
the group-commit fsync) and reports the CPU per acknowledged message; `--profile FILE` writes a
cProfile of that run.

The cycle collector is tuned as the server's runner tunes it (`runner.tune_gc`). Receivers get a
transport that only counts bytes; what is measured is the parser, the delivery
plan and the outbound buffering, i.e. the per-message Python work of `Client.data_received`.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import os
import re
import sys
import tempfile
import time
from typing import Any

from pynatsd.embedded import Server
from pynatsd.jetstream import jetstream_of
from pynatsd.options import Options
from pynatsd.runner import tune_gc
from pynatsd.server.client import Client


class CountingTransport:
    def __init__(self) -> None:
        self.written = 0

    def write(self, data: bytes) -> None:
        self.written += len(data)

    def get_write_buffer_size(self) -> int:
        return 0

    def set_write_buffer_limits(self, high: int | None = None, low: int | None = None) -> None:
        pass

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return ("127.0.0.1", 1234) if name == "peername" else default

    def close(self) -> None:
        pass

    def abort(self) -> None:
        pass

    def pause_reading(self) -> None:
        pass

    def resume_reading(self) -> None:
        pass


def connect(server: Server, connect: bytes) -> Client:
    client = Client(server)
    client.connection_made(CountingTransport())  # type: ignore[arg-type]
    client.data_received(connect)
    return client


async def pub_cpu(subs: int, batches: int, subjects: int = 1) -> float:
    """PUBs of 16 B to `subs` subscribers of `foo.*`. With one subject a batch repeats one PUB
    line (runs, the common stream); with more the lines cycle over `subjects` subjects (each
    message its own event, as bench_server's subs100k publisher)."""
    tune_gc()  # as the server's runner does
    server = Server(Options(port=0, host="127.0.0.1"))
    await server.start()
    quiet = b'CONNECT {"verbose":false,"pedantic":false,"protocol":1,"headers":true}\r\n'
    publisher = connect(server, quiet)
    for _ in range(subs):
        connect(server, quiet + b"SUB foo.* 1\r\n")
    names = [b"foo.bar"] if subjects == 1 else [b"foo.s%d" % k for k in range(subjects)]
    batch = b"".join(
        b"PUB %s 16\r\n" % names[i % len(names)] + b"x" * 16 + b"\r\n" for i in range(1000)
    )
    start = time.process_time()
    for _ in range(batches):
        publisher.data_received(batch)
    elapsed = time.process_time() - start
    await server.shutdown()
    return elapsed / (batches * 1000) * 1e6


# bench_server.py's subs100k subjects (80% wildcards), for `crowd`.
_CROWD_SHAPES = (b"bench.h%d.data", b"bench.h%d.*", b"bench.*.h%d", b"bench.h%d.>", b"*.h%d.data")


async def sub_cpu(count: int, crowd: int = 0) -> float:
    """CPU per SUB of `count` SUB lines on one connection. With `crowd`: bench_server.py's
    subs100k lines instead, the first `count` of `crowd` (so that making them costs the same
    for any count), and the process ends right after the reads, without the close that
    removes every subscription again (bench_instructions.py --subscribe-crowd)."""
    tune_gc()
    server = Server(Options(port=0, host="127.0.0.1"))
    await server.start()
    client = connect(server, b'CONNECT {"verbose":false,"pedantic":false}\r\n')
    if crowd:
        made = [b"SUB %s %d\r\n" % (_CROWD_SHAPES[i % 5] % i, i + 1) for i in range(crowd)]
        lines = b"".join(made[:count])
    else:
        lines = b"".join(b"SUB foo.%d.*.bar.%d %d\r\n" % (i % 1000, i, i) for i in range(count))
    start = time.process_time()
    for i in range(0, len(lines), 65536):
        client.data_received(lines[i : i + 65536])
    elapsed = time.process_time() - start
    if crowd:
        sys.stdout.flush()
        os._exit(0)
    await server.shutdown()
    return elapsed / count * 1e6


async def js_publish_cpu(count: int, profile: str | None, plain: bool = False) -> float:
    with tempfile.TemporaryDirectory(prefix="bench-js-cpu-") as store:
        server = Server(Options(port=0, host="127.0.0.1", jetstream=True, store_dir=store))
        await server.start()
        transport = CountingTransport()
        publisher = Client(server)
        publisher.connection_made(transport)  # type: ignore[arg-type]
        publisher.data_received(
            b'CONNECT {"verbose":false,"pedantic":false,"protocol":1,"headers":true}\r\n'
            b"SUB _INBOX.bench.* 1\r\n"
        )
        create = b'{"name":"W","subjects":["W.>"],"storage":"file"}'
        publisher.data_received(
            b"PUB $JS.API.STREAM.CREATE.W _INBOX.bench.0 %d\r\n%s\r\n" % (len(create), create)
        )
        js = jetstream_of(server)
        assert js is not None
        stream = next(iter(js.accounts.values())).streams["W"]
        frames = []
        for i in range(count if not plain else 0):
            header = (
                b"NATS/1.0\r\nNats-Msg-Id: 0123456789abcdef0123456789abcdef:%d\r\n"
                b"Nats-Expected-Stream: W\r\n\r\n" % i
            )
            frames.append(
                b"HPUB W.%d _INBOX.bench.%d %d %d\r\n%s%s\r\n"
                % (i % 10, i + 1, len(header), len(header) + 100, header, b"x" * 100)
            )
        if plain:
            # As bench_js.py publishes: PUB of 16 B, one reply subject for every PubAck.
            frames = [b"PUB W.1 _INBOX.bench.1 16\r\n%s\r\n" % (b"x" * 16)] * count
        data = b"".join(frames)
        chunks = [data[i : i + 65536] for i in range(0, len(data), 65536)]
        profiler = cProfile.Profile() if profile else None
        start = time.process_time()
        if profiler is not None:
            profiler.enable()
        for chunk in chunks:
            publisher.data_received(chunk)
            await asyncio.sleep(0)  # let group-commit fsyncs finish and their acks go out
        while stream.store.state().messages < count or server.dirty:
            await asyncio.sleep(0.001)
        if profiler is not None:
            profiler.disable()
            profiler.dump_stats(profile)
        elapsed = time.process_time() - start
        await server.shutdown()
    return elapsed / count * 1e6


async def js_fetch_cpu(count: int, ack: bool, profile: str | None, fill: int = 0) -> float:
    """CPU per message a pull consumer fetches (batches of 1000, as bench_js.py asks), with
    ack policy none or one +ACK per message, from a stream of `fill` (at least `count`)
    messages."""
    with tempfile.TemporaryDirectory(prefix="bench-js-cpu-") as store:
        server = Server(Options(port=0, host="127.0.0.1", jetstream=True, store_dir=store))
        await server.start()
        client = Client(server)
        transport = FrameTransport()
        client.connection_made(transport)  # type: ignore[arg-type]
        client.data_received(
            b'CONNECT {"verbose":false,"pedantic":false,"protocol":1,"headers":true}\r\n'
            b"SUB _INBOX.> 1\r\n"
        )
        create = b'{"name":"F","subjects":["f"],"storage":"file"}'
        client.data_received(
            b"PUB $JS.API.STREAM.CREATE.F _INBOX.c %d\r\n%s\r\n" % (len(create), create)
        )
        js = jetstream_of(server)
        assert js is not None
        stream = next(iter(js.accounts.values())).streams["F"]
        for _ in range(max(count, fill)):
            stream.store.store_msg("f", b"", b"x" * 16)
        stream.store.flush()
        policy = b"explicit" if ack else b"none"
        consumer = b'{"stream_name":"F","config":{"durable_name":"C","ack_policy":"%s"}}' % policy
        client.data_received(
            b"PUB $JS.API.CONSUMER.CREATE.F.C _INBOX.c %d\r\n%s\r\n" % (len(consumer), consumer)
        )
        await asyncio.sleep(0.01)
        request = b'{"batch":1000,"expires":5000000000}'
        next_frame = b"PUB $JS.API.CONSUMER.MSG.NEXT.F.C _INBOX.f %d\r\n%s\r\n" % (
            len(request),
            request,
        )
        profiler = cProfile.Profile() if profile else None
        transport.frames.clear()
        start = time.process_time()
        if profiler is not None:
            profiler.enable()
        got = 0
        while got < count:
            client.data_received(next_frame)
            await asyncio.sleep(0)
            if not ack:
                got += transport.take_count()
                continue
            replies = transport.take_replies()
            got += len(replies)
            if replies:
                client.data_received(b"".join(b"PUB %s 0\r\n\r\n" % r for r in replies))
        if profiler is not None:
            profiler.disable()
            profiler.dump_stats(profile)
        elapsed = time.process_time() - start
        await server.shutdown()
    return elapsed / count * 1e6


class FrameTransport(CountingTransport):
    """Keeps what the server writes, to find the ack subjects of delivered messages."""

    def __init__(self) -> None:
        super().__init__()
        self.frames: list[bytes] = []

    def write(self, data: bytes) -> None:
        self.frames.append(data)

    def writelines(self, data: list[bytes]) -> None:
        self.frames.append(b"".join(data))

    def take_count(self) -> int:
        data = b"".join(self.frames)
        self.frames.clear()
        return data.count(b"MSG f ")

    def take_replies(self) -> list[bytes]:
        data = b"".join(self.frames)
        self.frames.clear()
        return re.findall(rb"MSG f \d+ (\$JS\.ACK\.\S+) \d+\r\n", data)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--subs", default="1,5", help="fan-outs to measure")
    parser.add_argument("--batches", type=int, default=200, help="batches of 1000 PUBs")
    parser.add_argument("--subscribe", type=int, default=100_000, help="SUB lines to insert")
    parser.add_argument("--subjects", type=int, default=256, help="subjects to cycle over")
    parser.add_argument("--js", type=int, default=0, help="JetStream publishes to measure")
    parser.add_argument("--js-plain", action="store_true", help="--js with PUB 16 B, no header")
    parser.add_argument("--js-fetch", type=int, default=0, help="messages to fetch (pull)")
    parser.add_argument("--ack", action="store_true", help="--js-fetch with explicit acks")
    parser.add_argument("--profile", default=None, help="cProfile output of the --js run")
    args = parser.parse_args()
    if args.js:
        us = asyncio.run(js_publish_cpu(args.js, args.profile, args.js_plain))
        what = "PUB 16 B" if args.js_plain else "HPUB 100 B"
        print(f"JetStream {what} with ack (file store): {us:.2f} us CPU per message")
        return
    if args.js_fetch:
        us = asyncio.run(js_fetch_cpu(args.js_fetch, args.ack, args.profile))
        what = "explicit acks" if args.ack else "ack none"
        print(f"JetStream pull fetch 16 B ({what}): {us:.2f} us CPU per message")
        return
    for subs in (int(x) for x in args.subs.split(",")):
        us = asyncio.run(pub_cpu(subs, args.batches))
        print(f"PUB 16 B -> {subs} sub(s): {us:.2f} us CPU per message")
    if args.subjects > 1:
        us = asyncio.run(pub_cpu(1, args.batches, args.subjects))
        print(f"PUB 16 B, {args.subjects} subjects in turn -> 1 sub: {us:.2f} us CPU per message")
    us = asyncio.run(sub_cpu(args.subscribe))
    print(f"SUB (wildcard, 5 tokens) x {args.subscribe}: {us:.2f} us CPU per subscription")


if __name__ == "__main__":
    main()
