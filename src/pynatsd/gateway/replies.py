"""Gateway-routed replies: the `_GR_.<cluster hash>.<server hash>.` prefix a request's reply
gets when it crosses to another cluster, so that the answer finds its way back to the server
of the requester (nats-server's `gwReplyPrefix`, `getGWHash`, `isGWRoutedReply`,
`getSubjectFromGWRoutedReply` in server/gateway.go). Peers older than 2.2 (no `gateway_nrp` in
their INFO) know only `$GR.<4 hex of the cluster name>.`.
"""

from __future__ import annotations

import hashlib

from pynatsd.jetstream.util import go_hash

PREFIX = b"_GR_."  # gwReplyPrefix
HASH_LEN = 6
CLUSTER_OFFSET = len(PREFIX)
SERVER_OFFSET = CLUSTER_OFFSET + HASH_LEN + 1
SUBJECT_OFFSET = SERVER_OFFSET + HASH_LEN + 1
OLD_PREFIX = b"$GR."  # oldGWReplyPrefix
OLD_SUBJECT_OFFSET = len(OLD_PREFIX) + 5  # the prefix, 4 hex digits and a dot
PREFIXES = (PREFIX, OLD_PREFIX)

# How long a reply stays mapped, and a new subscription counts as "recent" (a request on it
# gets its reply mapped): nats-server's defaultGatewayRecentSubExpiration.
RECENT_EXPIRATION = 2.0


def gw_hash(name: str) -> bytes:
    """getGWHash: 6 base-62 characters of the name's SHA-256."""
    return go_hash(name, HASH_LEN).encode()


def old_hash(name: str) -> bytes:
    """getOldHash: the first 4 hex digits of the name's SHA-256."""
    return hashlib.sha256(name.encode()).hexdigest()[:4].encode()


def reply_prefix(cluster: str, server_id: str) -> bytes:
    return PREFIX + gw_hash(cluster) + b"." + gw_hash(server_id) + b"."


def old_reply_prefix(cluster: str) -> bytes:
    return OLD_PREFIX + old_hash(cluster) + b"."


def routed(subject: bytes) -> tuple[bytes, bytes, bytes] | None:
    """(cluster hash, server hash, the original subject) of a gateway-routed subject, None for
    any other; the old form has no server hash."""
    if len(subject) > SUBJECT_OFFSET and subject.startswith(PREFIX):
        return (
            subject[CLUSTER_OFFSET : CLUSTER_OFFSET + HASH_LEN],
            subject[SERVER_OFFSET : SERVER_OFFSET + HASH_LEN],
            subject[SUBJECT_OFFSET:],
        )
    if len(subject) > OLD_SUBJECT_OFFSET and subject.startswith(OLD_PREFIX):
        return subject[4:8], b"", subject[OLD_SUBJECT_OFFSET:]
    return None
