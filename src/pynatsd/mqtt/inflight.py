"""QoS 1 and 2 messages sent to one MQTT client and not yet acknowledged.

Corresponds to nats-server's `mqttSession.trackPublish`, `untrackPublish`, `trackAsPubRel` and
`bumpPI` (server/mqtt.go), where the pending messages are a JetStream consumer's: packet ids
are handed out in turn and never reused while in flight, at most `max_ack_pending` messages
are in flight (later ones wait in a backlog), and a message not acknowledged within
`ack_wait` is sent again with DUP set.
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


class InFlight:
    __slots__ = ("_backlog", "_last_id", "_timer", "max_pending", "pending")

    def __init__(self, max_pending: int) -> None:
        self.pending: dict[int, Pending] = {}
        self._backlog: deque[Pending] = deque()
        self._last_id = 0
        self.max_pending = max_pending or 0xFFFF
        self._timer: asyncio.TimerHandle | None = None

    def _next_id(self) -> int:
        for _ in range(0xFFFF):
            self._last_id = self._last_id % 0xFFFF + 1
            if self._last_id not in self.pending:
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

    def acked(self, packet_id: int) -> None:
        """PUBACK (QoS 1) or PUBCOMP (QoS 2): done with the message."""
        self.pending.pop(packet_id, None)

    def received(self, packet_id: int) -> None:
        """PUBREC (QoS 2): the client has the message; PUBREL follows."""
        entry = self.pending.get(packet_id)
        if entry is not None:
            entry.released = True
            entry.sent_at = time.monotonic()

    def expired(self, ack_wait: float) -> list[tuple[int, Pending]]:
        now = time.monotonic()
        out = [(pid, e) for pid, e in self.pending.items() if now - e.sent_at >= ack_wait]
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
