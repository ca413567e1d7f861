"""Delivery of one published message to the subscriptions a SubList match returned.

Corresponds to `processMsgResults` and `deliverMsg` in nats-server's `server/client.go`: every plain
subscription gets the message, each queue group gets it once, echo and auto-unsubscribe limits are
honoured, and clients that did not declare header support get the payload without headers.
"""

from __future__ import annotations

from itertools import count
from typing import TYPE_CHECKING

from pynatsd.sublist import SubListResult

if TYPE_CHECKING:
    from pynatsd.server.client import Client
    from pynatsd.server.subscription import Subscription

# Rotates the starting member of queue groups so load spreads evenly.
_queue_rr = count()


def _frame(
    sub: Subscription, subject: bytes, reply: bytes, payload: bytes, header_size: int
) -> bytes:
    client = sub.client
    if header_size >= 0:
        if client.headers:
            if reply:
                line = b"HMSG %s %s %s %d %d\r\n" % (
                    subject,
                    sub.sid,
                    reply,
                    header_size,
                    len(payload),
                )
            else:
                line = b"HMSG %s %s %d %d\r\n" % (subject, sub.sid, header_size, len(payload))
            return line + payload + b"\r\n"
        payload = payload[header_size:]
    if reply:
        return b"MSG %s %s %s %d\r\n%s\r\n" % (subject, sub.sid, reply, len(payload), payload)
    return b"MSG %s %s %d\r\n%s\r\n" % (subject, sub.sid, len(payload), payload)


def _deliver_one(
    publisher: Client,
    sub: Subscription,
    subject: bytes,
    reply: bytes,
    payload: bytes,
    header_size: int,
) -> bool:
    client = sub.client
    if sub.closed or client.closed or (client is publisher and not publisher.echo):
        return False
    if sub.max_msgs:
        sub.delivered += 1
        if sub.delivered > sub.max_msgs:
            client.unsubscribe(sub)
            return False
        if sub.delivered == sub.max_msgs:
            client.unsubscribe(sub)
    else:
        sub.delivered += 1
    frame = _frame(sub, subject, reply, payload, header_size)
    client.out_msgs += 1
    client.out_bytes += len(payload) if header_size < 0 or client.headers else (
        len(payload) - header_size
    )
    client.enqueue(frame)
    return True


def deliver(
    publisher: Client,
    result: SubListResult[Subscription],
    subject: bytes,
    reply: bytes,
    payload: bytes,
    header_size: int,
) -> bool:
    """Deliver to every match; True when at least one subscription received the message."""
    delivered = False
    echo = publisher.echo
    if header_size < 0:
        # Plain messages: the common case, kept tight.
        size = len(payload)
        if reply:
            tail = b" %s %d\r\n%s\r\n" % (reply, size, payload)
        else:
            tail = b" %d\r\n%s\r\n" % (size, payload)
        head = b"MSG " + subject + b" "
        for sub in result.psubs:
            client = sub.client
            if sub.max_msgs or sub.closed or client.closed or (client is publisher and not echo):
                if _deliver_one(publisher, sub, subject, reply, payload, header_size):
                    delivered = True
                continue
            sub.delivered += 1
            client.out_msgs += 1
            client.out_bytes += size
            client.enqueue(head + sub.sid + tail)
            delivered = True
    else:
        for sub in result.psubs:
            if _deliver_one(publisher, sub, subject, reply, payload, header_size):
                delivered = True
    for group in result.qsubs:
        n = len(group)
        start = next(_queue_rr) % n
        for i in range(n):
            if _deliver_one(publisher, group[(start + i) % n], subject, reply, payload, header_size):
                delivered = True
                break
    return delivered
