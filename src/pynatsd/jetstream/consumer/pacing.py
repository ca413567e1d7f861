"""The pace of a consumer's deliveries: `replay_policy: original` (messages as far apart as
they were stored, until the consumer has caught up with what the stream held when it
started) and `rate_limit_bps` (a token bucket of bytes per second), as nats-server's
`loopAndGatherMsgs` waits before `deliverMsg` (`o.replay`, `o.rlimit`, golang.org/x/time/rate).

A delivery larger than the burst (subject, reply, header and body together) is never allowed,
so such a consumer stops there, as nats-server's does. A consumer with neither has no
`Pacing` at all. With one, the delivery loop asks `wait()`
before each delivery; a positive answer puts the message back and the loop resumes after that
many seconds, when the same message goes out without waiting again.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import asyncio

    from pynatsd.jetstream.consumer_config import ConsumerConfig

# Go waits only for replay gaps above a millisecond.
_MIN_REPLAY_GAP = 1_000_000
# A delivery larger than the burst can never be allowed by Go's limiter (its reservation
# fails and the consumer waits for ever); a year stands for that.
FOREVER = 365 * 86400.0


class Pacing:
    """`last_seq`: the stream's last sequence when the consumer starts; `burst`: the
    largest message the stream may hold (its max_msg_size, else the server's max_payload)."""

    def __init__(self, config: ConsumerConfig, last_seq: int, burst: int) -> None:
        self.replay = config.replay_policy == "original"
        # Replay ends once the consumer is past what the stream held at the start (Go's lseq).
        self.replay_until = last_seq if self.replay else 0
        self.lts = 0  # Go's lts: the stored time of the last message delivered
        self.rate = 0.0  # bytes per second
        self.burst = 0
        self.set_rate(config.rate_limit_bps, burst)
        self._replay_served = 0  # the sequence whose replay wait is over
        self._rate_served = 0  # the sequence whose rate wait is over
        self.timer: asyncio.TimerHandle | None = None

    @staticmethod
    def wanted(config: ConsumerConfig) -> bool:
        return config.replay_policy == "original" or config.rate_limit_bps > 0

    def set_rate(self, bps: int, burst: int) -> None:
        """Go's setRateLimit: bits per second as bytes, a burst of one largest message."""
        self.rate = bps / 8 if bps > 0 else 0.0
        self.burst = burst
        self._tokens = float(self.burst)
        self._at = time.monotonic()

    def wait(self, seq: int, ts: int, size: int) -> float:
        """Seconds to wait before delivering message `seq` (stored at `ts`, `size` bytes);
        0 to deliver it now."""
        if self.replay and self.lts > 0 and seq != self._replay_served:
            gap = ts - self.lts
            if gap > _MIN_REPLAY_GAP:
                self._replay_served = seq
                return gap / 1e9
        self.lts = ts
        if self.rate > 0 and seq != self._rate_served:
            if size > self.burst:
                return FOREVER
            now = time.monotonic()
            self._tokens = min(self.burst, self._tokens + (now - self._at) * self.rate)
            self._at = now
            self._tokens -= size
            if self._tokens < 0:
                self._rate_served = seq
                return -self._tokens / self.rate
        self._replay_served = self._rate_served = 0
        return 0.0

    def caught_up(self, next_seq: int) -> None:
        """No message left to deliver: replay is over once past the starting point."""
        if self.replay and next_seq > self.replay_until:
            self.replay = False
