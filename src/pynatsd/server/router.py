"""Delivery of one published message to the subscriptions a SubList match returned.

Corresponds to `processMsgResults`, `deliverMsg` and `msgHeader` in nats-server's
`server/client.go`: every plain subscription gets the message, each queue group gets it once,
echo and auto-unsubscribe limits are honoured, and clients that did not declare header support get
the payload without headers. Sizes are copied into MSG lines exactly as the publisher wrote them.
"""

from __future__ import annotations

from itertools import count
from typing import TYPE_CHECKING

from pynatsd.protocol.events import Pub
from pynatsd.sublist import SubListResult

if TYPE_CHECKING:
    from pynatsd.server.client import Client
    from pynatsd.server.subscription import Subscription

# Rotates the starting member of queue groups so load spreads evenly.
queue_rr = count()


def msg_head(ev: Pub, sid: bytes, with_headers: bool) -> bytes:
    """The MSG or HMSG control line (with CRLF) for one receiver of `ev`."""
    reply = b" " + ev.reply if ev.reply else b""
    if ev.header_size > 0:
        if with_headers:
            sizes = ev.header_text + b" " + ev.size_text
            return b"HMSG %s %s%s %s\r\n" % (ev.subject, sid, reply, sizes)
        return b"MSG %s %s%s %d\r\n" % (ev.subject, sid, reply, len(ev.payload) - ev.header_size)
    return b"MSG %s %s%s %s\r\n" % (ev.subject, sid, reply, ev.size_text)


def _deliver_one(publisher: Client | None, sub: Subscription, ev: Pub) -> bool:
    if sub.callback is not None:
        if sub.closed:
            return False
        sub.delivered += 1
        sub.callback(sub, publisher, ev)  # type: ignore[arg-type]
        return True
    client = sub.client
    if sub.closed or client.closed or (client is publisher and not client.echo):
        return False
    perms = client.perms
    if perms.watching:
        # Deny lists are checked at delivery too: a `foo.>` subscriber denied `foo.secret`
        # never gets it; and a request's reply becomes publishable under allow_responses.
        if perms.delivery_filter and perms.deny_delivery(
            ev.subject.decode("utf-8", "surrogateescape"), sub.queue
        ):
            return False
        if ev.reply:
            perms.track_request(ev.reply.decode("utf-8", "surrogateescape"))
    sub.delivered += 1
    if sub.max_msgs:
        if sub.delivered > sub.max_msgs:
            client.unsubscribe(sub)
            return False
        if sub.delivered == sub.max_msgs:
            client.unsubscribe(sub)
    payload = ev.payload
    if ev.header_size > 0 and not client.headers:
        payload = payload[ev.header_size :]
    client.out_msgs += 1
    client.out_bytes += len(payload)
    head = msg_head(ev, sub.sid, client.headers)
    if client.trace:
        client.trace_out(head)
    client.enqueue(head + payload + b"\r\n")
    return True


def deliver(publisher: Client | None, result: SubListResult[Subscription], ev: Pub) -> bool:
    """Deliver to every match; True when at least one subscription received the message."""
    delivered = False
    for sub in result.psubs:
        if _deliver_one(publisher, sub, ev):
            delivered = True
    for group in result.qsubs:
        n = len(group)
        start = next(queue_rr) % n
        for i in range(n):
            if _deliver_one(publisher, group[(start + i) % n], ev):
                delivered = True
                break
    return delivered


def deliver_to(sub: Subscription, subject: bytes, reply: bytes, header: bytes, data: bytes) -> bool:
    """Deliver to one subscription already found: a pull request's inbox (looked up once per
    request, not per message), or the one receiver of a server reply. The plain case, a
    client with headers on and nothing to check per message (no permissions, no
    auto-unsubscribe, no trace), is formatted straight into the client's output; everything
    else takes `_deliver_one`'s full road."""
    client = sub.client
    if (
        sub.callback is None
        and not sub.max_msgs
        and not sub.closed
        and not client.closed
        and (client.headers or not header)
        and not client.perms.watching
        and not client.trace
    ):
        sub.delivered += 1
        client.out_msgs += 1
        size = len(header) + len(data)
        client.out_bytes += size
        sp = b" " if reply else b""
        if header:
            client.enqueue(
                b"HMSG %s %s%s%s %d %d\r\n%s%s\r\n"
                % (subject, sub.sid, sp, reply, len(header), size, header, data)
            )
        else:
            client.enqueue(
                b"MSG %s %s%s%s %d\r\n%s\r\n" % (subject, sub.sid, sp, reply, size, data)
            )
        return True
    return _deliver_one(
        None, sub, Pub(subject, reply, header + data, len(header) if header else -1)
    )


def deliver_as(
    result: SubListResult[Subscription], subject: bytes, reply: bytes, header: bytes, data: bytes
) -> bool:
    """Deliver to the first subscription of `result` with `subject` shown in the MSG line: how
    JetStream hands a stored message to the inbox of a pull request (the MSG line shows the
    stream subject, not the inbox)."""
    payload = header + data
    ev = Pub(subject, reply, payload, len(header) if header else -1)
    for sub in result.psubs:
        if _deliver_one(None, sub, ev):
            return True
    for group in result.qsubs:
        for sub in group:
            if _deliver_one(None, sub, ev):
                return True
    return False
