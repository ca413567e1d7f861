"""Subjects and reply subjects the server keeps for itself, which a client may not publish on.

nats-server's `isReservedReply`, `isServiceReply`, `isJSAckSubject` (server/client.go) and
`hasGWRoutedReplyPrefix` (server/gateway.go), checked by `processInboundClientMsg`:

- a subject starting `_GR_.` (a gateway-routed reply) is refused before the permission check;
- a subject starting `$NRG.` (RAFT traffic) is refused after it, unless the publisher is in the
  system account (message tracing refuses both as a trace destination, `msgtrace.begin`);
- a reply starting `_R_.` (a service import's reply), `$JS.ACK.` (a JetStream ack, which a client
  must not forge) or `_GR_.` is refused last.

Each refusal is a permissions violation (`-ERR`, no `+OK`, the connection stays open, the message
is dropped). The length tests are nats-server's: the bare prefix `_GR_.` is not reserved, while
`_R_.` alone is.
"""

from __future__ import annotations

GATEWAY_REPLY_PREFIX = b"_GR_."  # gwReplyPrefix
SERVICE_REPLY_PREFIX = b"_R_."  # replyPrefix
JS_ACK_PREFIX = b"$JS.ACK."  # jsAckPre
NRG_PREFIX = b"$NRG."  # clientNRGPrefix

# Cheap first tests on the publish path, before the exact ones below: the first byte of a
# reserved subject, the prefixes of a reserved reply.
RESERVED_FIRST_BYTES = frozenset(b"_$")
RESERVED_REPLY_PREFIXES = (SERVICE_REPLY_PREFIX, JS_ACK_PREFIX, GATEWAY_REPLY_PREFIX)


def is_gateway_routed(subject: bytes) -> bool:
    """hasGWRoutedReplyPrefix: `_GR_.` and at least one more byte."""
    return len(subject) > 5 and subject.startswith(GATEWAY_REPLY_PREFIX)


def is_reserved_subject(subject: bytes, system_account: bool) -> bool:
    """A subject a client may not publish to (nor name as its trace destination): a
    gateway-routed reply, or RAFT traffic from outside the system account."""
    return is_gateway_routed(subject) or (subject.startswith(NRG_PREFIX) and not system_account)


def is_reserved_reply(reply: bytes) -> bool:
    """isReservedReply: a service import reply, a JetStream ack or a gateway-routed reply."""
    return (
        reply.startswith(SERVICE_REPLY_PREFIX)
        or (len(reply) > 8 and reply.startswith(JS_ACK_PREFIX))
        or is_gateway_routed(reply)
    )
