"""The status-only messages a consumer sends: `404 No Messages`, `408 Request Timeout`,
`409 ...`, `100 Idle Heartbeat` (nats-server's `server/consumer.go` writes them inline)."""

from __future__ import annotations

# nats-server's reason for a +TERM it makes itself when a pending message goes
# (consumer.go's ackTermUnackedLimitsReason).
TERM_UNACKED_DELETED = "Unacknowledged message was deleted"


def status(code: int, description: str, extra: str = "") -> bytes:
    """A status-only header block (`NATS/1.0 404 No Messages`...)."""
    return f"NATS/1.0 {code} {description}\r\n{extra}\r\n".encode()


def pending_extra(n: int, b: int) -> str:
    """The headers telling a pull request what it still had open."""
    return f"Nats-Pending-Messages: {n}\r\nNats-Pending-Bytes: {b}\r\n"


def heartbeat(last_dseq: int, last_sseq: int, stalled: str = "") -> bytes:
    """An idle heartbeat with the last consumer and stream sequences delivered (what
    ordered consumers check for gaps), and the flow control reply it waits for, if any."""
    extra = f"Nats-Last-Consumer: {last_dseq}\r\nNats-Last-Stream: {last_sseq}\r\n"
    if stalled:
        extra += f"Nats-Consumer-Stalled: {stalled}\r\n"
    return status(100, "Idle Heartbeat", extra)
