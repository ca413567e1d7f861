"""CPU per message on the receiving server, without sockets: a route, a leaf connection and an
inbound gateway connection of one server are fed batches of RMSG/LMSG frames (as a peer that
forwards a publisher's stream sends them), and the process CPU time is counted per message, so
a loaded machine inflates the figures less than wall time would.

    python bench/bench_link_cpu.py                       # route, leaf, gateway; 16 B
    python bench/bench_link_cpu.py --kinds leaf --size 1024 --profile /tmp/leaf.prof
    python bench/bench_link_cpu.py --mixed               # two subjects taking turns (no runs)
    python bench/bench_link_cpu.py --read 4096           # smaller reads (cut messages more often)

Receivers get a transport that only counts bytes (bench_client_cpu's): what is measured is the
link's parser, its delivery plans and the outbound buffering of one local subscriber, i.e. the
per-message Python work of `Link.data_received` on the receiving side of bench_leaf.py,
bench_gateway.py and bench_cluster.py.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import time
from collections.abc import Callable

from bench_client_cpu import CountingTransport, connect
from pynatsd.cluster.link import Link
from pynatsd.cluster.route import Route
from pynatsd.embedded import Server
from pynatsd.gateway.connection import GatewayConnection
from pynatsd.leafnode.connection import Leaf
from pynatsd.options import ClusterOptions, GatewayOptions, LeafNodeOptions, Options

PEER_ID = "NBENCHPEERBENCHPEERBENCHPEERBENCHPEERBENCHPEERBENCHPEER"


# Each kind: how to make one on a server, what its peer says first (CONNECT, and INFO on a
# route or gateway), and what comes before the subject of its messages.
KINDS: dict[str, tuple[Callable[[Server], Link], bytes, bytes]] = {
    "route": (
        lambda server: Route(server.parts["cluster"], solicited=False),  # type: ignore[arg-type]
        b'CONNECT {"verbose":false,"pedantic":false,"headers":true,"cluster":"A"}\r\n'
        b'INFO {"server_id":"%s","cluster":"A","headers":true}\r\n' % PEER_ID.encode(),
        b"RMSG $G ",
    ),
    "leaf": (
        lambda server: Leaf(server.parts["leafnodes"]),  # type: ignore[arg-type]
        b'CONNECT {"server_id":"%s","name":"L","cluster":"L","headers":true,'
        b'"remote_account":"$G","protocol":1}\r\n' % PEER_ID.encode(),
        b"LMSG ",
    ),
    "gateway": (
        lambda server: GatewayConnection(server.parts["gateway"]),  # type: ignore[arg-type]
        b'CONNECT {"gateway":"B","name":"%s","headers":true}\r\n'
        b'INFO {"gateway":"B","server_id":"%s","server_name":"b1","headers":true}\r\n'
        % (PEER_ID.encode(), PEER_ID.encode()),
        b"RMSG $G ",
    ),
}


def _open(kind: str, server: Server) -> tuple[Link, bytes]:
    """A link of `kind` past its handshake, and the head of its messages."""
    make, hello, op = KINDS[kind]
    link = make(server)
    link.connection_made(CountingTransport())  # type: ignore[arg-type]
    link.data_received(hello)
    return link, op


async def link_cpu(
    kind: str, size: int, batches: int, read: int, mixed: bool, profile: str | None
) -> tuple[float, int]:
    """CPU µs per message, and the bytes the subscriber was sent."""
    options = Options(
        port=0,
        host="127.0.0.1",
        cluster=ClusterOptions(name="A", host="127.0.0.1", port=-1),
        gateway=GatewayOptions(name="A", host="127.0.0.1", port=-1),
        leafnodes=LeafNodeOptions(host="127.0.0.1", port=-1),
    )
    server = Server(options)
    await server.start()
    quiet = b'CONNECT {"verbose":false,"pedantic":false,"protocol":1,"headers":true}\r\n'
    subscriber = connect(server, quiet + b"SUB foo.* 1\r\n")
    await asyncio.sleep(0)
    link, op = _open(kind, server)
    subjects = [b"foo.bar", b"foo.baz"] if mixed else [b"foo.bar"]
    frames = [op + b"%s %d\r\n%s\r\n" % (s, size, b"x" * size) for s in subjects]
    count = batches * max(1, read // len(frames[0]))
    data = b"".join(frames[i % len(frames)] for i in range(count))
    # Reads of `read` bytes, cut wherever that falls (a message goes on in the next read).
    reads = [data[i : i + read] for i in range(0, len(data), read)]
    profiler = cProfile.Profile() if profile else None
    start = time.process_time()
    if profiler is not None:
        profiler.enable()
    for chunk in reads:
        link.data_received(chunk)
    if profiler is not None:
        profiler.disable()
        profiler.dump_stats(profile)  # type: ignore[arg-type]
    elapsed = time.process_time() - start
    transport = subscriber.transport
    written = transport.written if isinstance(transport, CountingTransport) else 0
    await server.shutdown()
    return elapsed / count * 1e6, written


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--kinds", default="route,leaf,gateway")
    parser.add_argument("--size", type=int, default=16)
    parser.add_argument("--batches", type=int, default=100, help="reads")
    parser.add_argument("--read", type=int, default=65000, help="bytes per read")
    parser.add_argument("--mixed", action="store_true", help="two subjects taking turns")
    parser.add_argument("--profile", default=None, help="cProfile output (one kind)")
    args = parser.parse_args()
    for kind in args.kinds.split(","):
        us, written = asyncio.run(
            link_cpu(kind, args.size, args.batches, args.read, args.mixed, args.profile)
        )
        print(
            f"{kind:<8} {'mixed' if args.mixed else 'run'} {args.size} B: "
            f"{us:.3f} us CPU per message (subscriber sent {written} B)"
        )


if __name__ == "__main__":
    main()
