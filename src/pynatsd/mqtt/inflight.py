"""QoS 1 and 2 messages sent to one MQTT client and not yet acknowledged.

Corresponds to nats-server's `mqttSession.trackPublish`, `untrackPublish`, `trackAsPubRel`,
`untrackPubRel` and `bumpPI` (server/mqtt.go). Most pending messages are a JetStream
consumer's deliveries (`track_stored`): the packet id is kept per consumer and stream sequence,
so a redelivery goes out with the same id, and the consumer's ack subject is what PUBACK or
PUBCOMP acknowledges; at most `max_ack_pending` are in flight (the consumer redelivers the
others later). Messages with no consumer behind them (retained messages, accounts without
JetStream) are tracked here alone: they wait in a backlog when too many are in flight, and one
not acknowledged within `ack_wait` is sent again with DUP set.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


@dataclass(slots=True)
class Pending:
    topic: bytes
    payload: bytes
    qos: int
    retain: bool
    sent_at: float = 0.0
    # QoS 2: PUBREC came back, PUBREL was sent; the message itself is not sent again.
    released: bool = False
    properties: dict[int, Any] | None = None  # MQTT 5
    # A consumer's delivery: its ack subject, and its key (durable, stream sequence).
    ack: bytes = b""
    key: tuple[str, int] | None = None


class InFlight:
    __slots__ = ("_backlog", "_by_seq", "_last_id", "_timer", "max_pending", "pending", "pubrel")

    def __init__(self, max_pending: int) -> None:
        self.pending: dict[int, Pending] = {}
        # Consumer deliveries by (durable, stream sequence) -> packet id.
        self._by_seq: dict[tuple[str, int], int] = {}
        # QoS 2 packet ids past PUBREC, waiting for PUBCOMP -> the PUBREL's ack subject (b""
        # until the PUBREL consumer delivered it).
        self.pubrel: dict[int, bytes] = {}
        self._backlog: deque[Pending] = deque()
        self._last_id = 0
        self.max_pending = max_pending or 0xFFFF
        self._timer: asyncio.TimerHandle | None = None

    def _next_id(self) -> int:
        for _ in range(0xFFFF):
            self._last_id = self._last_id % 0xFFFF + 1
            if self._last_id not in self.pending and self._last_id not in self.pubrel:
                return self._last_id
        return 0

    def track(
        self,
        topic: bytes,
        payload: bytes,
        qos: int,
        retain: bool,
        properties: dict[int, Any] | None = None,
    ) -> int:
        """The packet id to send a message with, or 0 when it must wait in the backlog."""
        entry = Pending(topic, payload, qos, retain, properties=properties)
        if len(self.pending) >= self.max_pending or self._backlog:
            self._backlog.append(entry)
            return 0
        packet_id = self._next_id()
        if not packet_id:
            self._backlog.append(entry)
            return 0
        entry.sent_at = time.monotonic()
        self.pending[packet_id] = entry
        return packet_id

    def track_stored(self, durable: str, reply: bytes) -> tuple[int, bool]:
        """A consumer's delivery: the packet id to send it with (0: not now, the consumer
        redelivers it later) and whether it is a redelivery (DUP)."""
        seq, count = ack_reply_info(reply)
        key = (durable, seq)
        packet_id = self._by_seq.get(key, 0)
        if packet_id:
            if packet_id in self.pubrel:
                return 0, False  # PUBREC came back already: the PUBREL is what goes
            entry = self.pending.get(packet_id)
            if entry is not None:
                entry.ack = reply
                return packet_id, count > 1
        if len(self.pending) >= self.max_pending:
            return 0, False
        packet_id = self._next_id()
        if not packet_id:
            return 0, False
        self._by_seq[key] = packet_id
        self.pending[packet_id] = Pending(b"", b"", 0, False, ack=reply, key=key)
        return packet_id, count > 1

    def forget(self, durable: str) -> None:
        """A consumer is gone: its deliveries no longer hold packet ids."""
        for key in [k for k in self._by_seq if k[0] == durable]:
            self.pending.pop(self._by_seq.pop(key), None)

    def release_backlog(self) -> list[tuple[int, Pending]]:
        """Messages of the backlog that now fit, with their packet ids."""
        out: list[tuple[int, Pending]] = []
        while self._backlog and len(self.pending) < self.max_pending:
            packet_id = self._next_id()
            if not packet_id:
                break
            entry = self._backlog.popleft()
            entry.sent_at = time.monotonic()
            self.pending[packet_id] = entry
            out.append((packet_id, entry))
        return out

    def acked(self, packet_id: int) -> bytes:
        """PUBACK (QoS 1) or PUBCOMP (QoS 2): done with the message; the consumer's ack
        subject to acknowledge (b"" for none)."""
        if packet_id in self.pubrel:
            return self.pubrel.pop(packet_id)
        entry = self.pending.pop(packet_id, None)
        if entry is None:
            return b""
        if entry.key is not None:
            self._by_seq.pop(entry.key, None)
        return entry.ack

    def received(self, packet_id: int) -> bytes | None:
        """PUBREC (QoS 2): the client has the message; PUBREL follows. For a consumer's
        delivery, its ack subject (the PUBREL is stored and sent by the PUBREL consumer);
        None for a message tracked here alone, whose PUBREL goes now."""
        entry = self.pending.get(packet_id)
        if entry is None or not entry.ack:
            if entry is not None:
                entry.released = True
                entry.sent_at = time.monotonic()
            return None
        del self.pending[packet_id]
        if entry.key is not None:
            self._by_seq.pop(entry.key, None)
        self.pubrel[packet_id] = b""
        return entry.ack

    def expired(self, ack_wait: float) -> list[tuple[int, Pending]]:
        now = time.monotonic()
        out = [
            (pid, e) for pid, e in self.pending.items() if not e.ack and now - e.sent_at >= ack_wait
        ]
        for _, entry in out:
            entry.sent_at = now
        return out

    @property
    def timer_armed(self) -> bool:
        return self._timer is not None

    def arm(
        self, loop: asyncio.AbstractEventLoop, delay: float, callback: Callable[[], None]
    ) -> None:
        def fire() -> None:
            self._timer = None
            callback()

        self._timer = loop.call_later(delay, fire)

    def stop(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None


def ack_reply_info(reply: bytes) -> tuple[int, int]:
    """The stream sequence and delivery count of a consumer's ack subject (nats-server's
    ackReplyInfo), both the short form `$JS.ACK.<stream>.<consumer>.<count>.<sseq>...` and
    the one with domain and account hash."""
    tokens = reply.split(b".")
    try:
        if len(tokens) == 9:
            return int(tokens[5]), int(tokens[4])
        if len(tokens) >= 11:
            return int(tokens[7]), int(tokens[6])
    except ValueError:
        pass
    return 0, 0
