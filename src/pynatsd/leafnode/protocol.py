"""Sans-IO codec of the leaf node protocol: `LeafParser.feed(bytes) -> list[event]`, and the
frames a server sends to a leaf connection.

Corresponds to the leaf half of nats-server's `server/parser.go` and the argument parsing of
`leafnode.go` (`processLeafSub`, `processLeafUnsub`, `processLeafMsgArgs`,
`processLeafHeaderMsgArgs`). A leaf connection is bound to one account, so its ops carry none:
`LS+ <subject> [<queue> <weight>]`, `LS- <subject> [<queue>]`, `LMSG <subject> [reply] <size>`
(queues as in RMSG: `+ <reply> <q...>` or `| <q...>`) and `HMSG` with a header size. The
parser is the route codec's (`cluster/protocol.py`, same events, same O(bytes) promise) with the
leaf op names; every event carries `ACCOUNT_TOKEN` as its account, which the connection
replaces with the account it is bound to.
"""

from __future__ import annotations

from pynatsd.cluster.protocol import RouteRunParser, _BadArgs, rmsg_head
from pynatsd.protocol.events import Event, Pub

__all__ = [
    "ACCOUNT_TOKEN",
    "LeafParser",
    "lmsg_frame",
    "lmsg_head",
    "ls_minus_frame",
    "ls_plus_frame",
]

# The account every leaf event names: the connection's bound account stands for it.
ACCOUNT_TOKEN = b"$leaf"

_LEAF_OPS = {
    b"LS+": "rsub",
    b"LS-": "runsub",
    b"LMSG": "rmsg",
    b"HMSG": "hmsg",
    b"PING": "ping",
    b"PONG": "pong",
    b"+OK": "ok",
    b"-ERR": "err",
    b"INFO": "info",
    b"CONNECT": "connect",
    # Route ops: nats-server closes a leaf connection that sends one, without a word.
    b"RS+": "route",
    b"RS-": "route",
    b"RMSG": "route",
}


class LeafParser(RouteRunParser):
    """The route parser reading leaf ops (an RS+ or RMSG on a leaf connection closes it, as in
    nats-server). `expect_connect` (an accepted leaf) makes any first op but CONNECT
    an authorization violation."""

    __slots__ = ()

    ops = _LEAF_OPS
    fast_op = b"LMSG "

    def __init__(self, expect_connect: bool = False) -> None:
        super().__init__(expect_connect=expect_connect, account=ACCOUNT_TOKEN)

    def _dispatch(self, kind: str, arg: bytes, events: list[Event | Pub]) -> None:
        if kind == "route":
            raise _BadArgs("route protocol on a leaf node connection")
        super()._dispatch(kind, arg, events)


def ls_plus_frame(subject: bytes, queue: bytes = b"", weight: int = 0) -> bytes:
    """LS+; a queue subscription carries its weight (members behind this side)."""
    if queue:
        return b"LS+ %s %s %d\r\n" % (subject, queue, weight)
    return b"LS+ " + subject + b"\r\n"


def ls_minus_frame(subject: bytes, queue: bytes = b"") -> bytes:
    if queue:
        return b"LS- " + subject + b" " + queue + b"\r\n"
    return b"LS- " + subject + b"\r\n"


def lmsg_head(
    subject: bytes,
    reply: bytes,
    queues: tuple[bytes, ...] | list[bytes],
    size: int,
    header_size: int = -1,
) -> bytes:
    """The LMSG control line (HMSG when `header_size` >= 0), CRLF included."""
    head = rmsg_head(b"", subject, reply, queues, size, header_size)
    return head if header_size >= 0 else b"LMSG" + head[4:]


def lmsg_frame(
    msg: Pub, queues: tuple[bytes, ...] | list[bytes] = (), headers: bool = True
) -> bytes:
    """A message for a leaf connection; header blocks are stripped for a peer without headers."""
    payload = msg.payload
    hdr = msg.header_size
    if hdr >= 0 and not headers:
        payload = payload[hdr:]
        hdr = -1
    return lmsg_head(msg.subject, msg.reply, queues, len(payload), hdr) + payload + b"\r\n"
