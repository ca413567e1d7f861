"""A peer server's stream of messages as the receiving side of a leaf or gateway connection sees
it from a forwarding server: runs of one line (taken as one batch by the receiver), other
lines, a message with headers and a PING in between, and one subject nats-server never lets
through. Used by the side-by-side run tests of tests/leafnode and tests/gateway, which feed it
from a raw peer and compare what local subscribers get with what nats-server's get."""

from __future__ import annotations

from support.rawclient import RawClient

COUNT = 300
# The subscriptions of the first subscriber: (subject, sid).
SUBSCRIPTIONS = ((b"run.foo", b"1"), (b"run.bar", b"2"), (b"$JS.API.>", b"3"))


# The reply of three messages in every 60: routed back to another cluster (a gateway's mapping).
ROUTED_REPLY = b"_GR_.Zc5mfN.Y9x2aB.inbox.1"


def stream(head: bytes, start: int, count: int) -> bytes:
    """`count` messages from number `start` on: mostly `run.foo`, every 50th `run.bar`, every
    70th on `$JS.API.INFO` (never across a leaf of a non-system account), every 90th with a
    header block (HMSG), three in every 60 with a routed reply (`ROUTED_REPLY`); `head` is
    what comes before the subject ("LMSG ", "RMSG $G ")."""
    data = b""
    for i in range(start, start + count):
        payload = b"%03d" % i
        if i % 90 == 89:
            hmsg = b"HMSG" + head[4:]
            header = b"NATS/1.0\r\nK: v\r\n\r\n"
            data += hmsg + b"run.foo %d %d\r\n%s%s\r\n" % (
                len(header),
                len(header) + 3,
                header,
                payload,
            )
            continue
        subject = b"run.bar" if i % 50 == 49 else b"$JS.API.INFO" if i % 70 == 69 else b"run.foo"
        reply = ROUTED_REPLY + b" " if i % 60 >= 57 else b""
        data += head + b"%s %s3\r\n%s\r\n" % (subject, reply, payload)
        if i == start + 120:
            data += b"PING\r\n"
    return data


def chunks(data: bytes) -> list[bytes]:
    """Reads that split runs (and one message) anywhere."""
    return [data[:1000], data[1000:1007], data[1007:]]


async def sync(peer: RawClient, pongs: int) -> None:
    """Until the server has read everything `peer` sent so far: the answer to its PING, after
    the `pongs` - 1 its stream asked for."""
    await peer.send(b"PING\r\n")
    for _ in range(pongs):
        await peer.read_until(b"PONG\r\n")


async def deliveries(
    port: int, peer: RawClient, head: bytes
) -> tuple[list[tuple[bytes, ...]], list[tuple[bytes, ...]]]:
    """The stream sent by `peer` to the server whose client port is `port`, in reads that split
    it anywhere, and then (after a second subscriber on `run.foo` came) more of it: what the
    first subscriber (`SUBSCRIPTIONS`) and the second got."""
    first = await subscriber(port, SUBSCRIPTIONS)
    for data in chunks(stream(head, 0, COUNT)):
        await peer.send(data)
    await sync(peer, 2)  # the stream has a PING
    second = await subscriber(port, ((b"run.foo", b"7"),))
    await peer.send(head + b"run.foo 3\r\n300\r\n" + stream(head, 301, 99))
    await sync(peer, 1)
    got = await received(first), await received(second)
    await first.close()
    await second.close()
    return got


async def subscriber(port: int, subscriptions: tuple[tuple[bytes, bytes], ...]) -> RawClient:
    client = await RawClient.connect(port)
    subs = b"".join(b"SUB %s %s\r\n" % pair for pair in subscriptions)
    await client.send(b'CONNECT {"headers":true}\r\n' + subs + b"PING\r\n")
    await client.read_until(b"PONG\r\n")
    return client


async def received(client: RawClient) -> list[tuple[bytes, ...]]:
    """(subject, sid, reply, payload without headers) of every message until the client's
    PONG, in order."""
    await client.send(b"PING\r\n")
    data = await client.read_until(b"PONG\r\n")
    out: list[tuple[bytes, ...]] = []
    pos = 0
    while True:
        nl = data.find(b"\r\n", pos)
        if nl < 0:
            return out
        op, *args = data[pos:nl].split(b" ")
        pos = nl + 2
        if op not in (b"MSG", b"HMSG"):
            continue
        headers = op == b"HMSG"
        size = int(args[-1])
        reply = args[2] if len(args) == (5 if headers else 4) else b""
        body = data[pos : pos + size][int(args[-2]) if headers else 0 :]
        out.append((args[0], args[1], reply, body))
        pos += size + 2
