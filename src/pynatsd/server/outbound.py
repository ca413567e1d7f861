"""Outbound flow control of one connection: frames queued during a read, written once at its end.

Corresponds to the outbound half of nats-server's `client.go` (`queueOutbound`, `flushOutbound`,
the slow consumer checks and the write deadline). What it promises:
- a read adds at most its own size (times the fan-out) to a receiver before the pending bytes are
  checked against `max_pending`: over it, the receiver is a slow consumer and is closed;
- a transport that stops taking bytes (asyncio calls `pause_writing`) starts the write deadline,
  and the connection being read (the producer) is stalled for a moment, as nats-server stalls
  fast producers; the producer is never blocked for long.

Compiled by mypyc (native.COMPILED_MODULES): every planned delivery appends to `frames` and
every read ends in `flush`. The transport and the timers are typed by what is used of them
(`Transport`, `Any`): uvloop's do not subclass asyncio's classes, and mypyc checks the classes
it is told of.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

# High-water mark of the transport buffer: above it asyncio pauses us and the write deadline runs.
WRITE_HIGH_WATER = 1024 * 1024


class FlushQueue(Protocol):
    """Where an outbound queue announces that it has frames to write (the server's list of
    receivers touched during the current read), and the producer of that read."""

    dirty: list[Outbound]
    producer: Producer | None
    stall_producers: bool


class Transport(Protocol):
    """What an outbound queue uses of its asyncio (or uvloop, or TLS) transport."""

    def write(self, data: bytes) -> None: ...

    def get_write_buffer_size(self) -> int: ...

    def set_write_buffer_limits(self, high: int | None = None, low: int | None = None) -> None: ...

    def close(self) -> None: ...

    def abort(self) -> None: ...


class Producer(Protocol):
    """A connection whose reads can be paused for a moment (a fast producer)."""

    def stall(self, receiver: Outbound) -> None: ...

    def unstall(self) -> None: ...


class Outbound:
    """The frames waiting for one transport, and the flow control around it."""

    __slots__ = (
        "_on_slow_consumer",
        "_write_timer",
        "congested",
        "dirty",
        "flush_queue",
        "frames",
        "max_pending",
        "stalled_producers",
        "transport",
        "write_deadline",
    )

    def __init__(
        self,
        flush_queue: FlushQueue,
        max_pending: int,
        write_deadline: float,
        on_slow_consumer: Callable[[str], None],
    ) -> None:
        self.frames: list[bytes] = []
        self.dirty = False  # in `flush_queue.dirty`, waiting for the end of the read
        self.flush_queue = flush_queue
        self.transport: Transport | None = None
        self.max_pending = max_pending
        self.write_deadline = write_deadline
        # Called with "pending" or "deadline" when the peer does not keep up.
        self._on_slow_consumer = on_slow_consumer
        self.congested = False  # asyncio paused writing to us: the transport buffer is full
        self._write_timer: Any = None  # the write deadline's TimerHandle, while it runs
        self.stalled_producers: list[Producer] = []

    def attach(self, transport: Transport) -> None:
        self.transport = transport
        transport.set_write_buffer_limits(high=WRITE_HIGH_WATER)

    def push(self, frame: bytes) -> None:
        """Queue a frame; written at the end of the current read (or by `flush`)."""
        self.frames.append(frame)
        if not self.dirty:
            self.dirty = True
            self.flush_queue.dirty.append(self)

    def queue(self, frame: bytes, dirty: list[Outbound]) -> None:
        """`push`, for the planned deliveries, which hold the read's list of touched queues."""
        self.frames.append(frame)
        if not self.dirty:
            self.dirty = True
            dirty.append(self)

    def queue_message(self, head: bytes, tail: bytes, dirty: list[Outbound]) -> None:
        """A message's MSG line and its payload with the CRLF (`tail`), as `queue` does."""
        frames = self.frames
        frames.append(head)
        frames.append(tail)
        if not self.dirty:
            self.dirty = True
            dirty.append(self)

    def flush(self) -> None:
        self.dirty = False
        frames = self.frames
        transport = self.transport
        if not frames or transport is None:
            return
        data = frames[0] if len(frames) == 1 else b"".join(frames)
        frames.clear()
        transport.write(data)
        if transport.get_write_buffer_size() > self.max_pending:
            self._on_slow_consumer("pending")
        elif self.congested:
            queue = self.flush_queue
            producer = queue.producer
            if producer is not None and queue.stall_producers:
                producer.stall(self)

    @property
    def transport_pending(self) -> int:
        """Bytes written to the transport that it has not sent yet."""
        transport = self.transport
        return transport.get_write_buffer_size() if transport is not None else 0

    @property
    def pending_bytes(self) -> int:
        transport = self.transport
        buffered = transport.get_write_buffer_size() if transport is not None else 0
        return sum(map(len, self.frames)) + buffered

    # -- asyncio's write flow control ------------------------------------------------------------

    def pause_writing(self, loop: Any) -> None:
        self.congested = True
        if self.write_deadline > 0 and self._write_timer is None:
            self._write_timer = loop.call_later(self.write_deadline, self._deadline_hit)

    def resume_writing(self) -> None:
        self.congested = False
        if self._write_timer is not None:
            self._write_timer.cancel()
            self._write_timer = None
        self.release_producers()

    def _deadline_hit(self) -> None:
        self._write_timer = None
        self._on_slow_consumer("deadline")

    def release_producers(self) -> None:
        producers = self.stalled_producers
        if producers:
            self.stalled_producers = []
            for producer in producers:
                producer.unstall()

    # -- closing ---------------------------------------------------------------------------------

    def close(self, abort: bool) -> None:
        """Stop the timers and end the transport: aborted (queued frames dropped), or closed
        after what is queued is written."""
        if self._write_timer is not None:
            self._write_timer.cancel()
            self._write_timer = None
        self.release_producers()
        transport = self.transport
        if transport is None:
            return
        self.transport = None  # nothing is written after the close
        if abort:
            self.frames.clear()
            transport.abort()
            return
        if self.frames:
            transport.write(b"".join(self.frames))
            self.frames.clear()
        transport.close()


def flush_all(dirty: list[Outbound]) -> None:
    """The end of a read: each outbound queue it touched writes once."""
    for outbound in dirty:
        outbound.flush()
