"""What every connection to another server (a route, a leaf node connection) does alike as an
asyncio protocol: close when the peer goes, pass write pressure to its `Outbound`, write a
frame at once, and close as a slow consumer (the ROUTER and LEAF kinds of nats-server's
`client.go`, which share these paths with clients)."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from pynatsd.logger import log
from pynatsd.protocol.errors import CloseReason

if TYPE_CHECKING:
    from pynatsd.server.outbound import Outbound
    from pynatsd.server.server import Server


class ServerLink(asyncio.Protocol):
    """The shared half of a connection to another server; the subclass has `server`,
    `outbound`, `closed`, `label` and `close`."""

    server: Server
    outbound: Outbound
    closed: bool
    label: str

    def close(self, reason: str, abort: bool = False) -> None:
        raise NotImplementedError

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.closed:
            self.close(CloseReason.CLIENT_CLOSED if exc is None else CloseReason.READ_ERROR)

    def pause_writing(self) -> None:
        self.outbound.pause_writing(self.server.loop)

    def resume_writing(self) -> None:
        self.outbound.resume_writing()

    def send_now(self, frame: bytes) -> None:
        if self.closed:
            return
        self.outbound.push(frame)
        self.outbound.flush()

    def _slow(self, kind: str) -> None:
        self.server.stats_slow_consumer()
        reason = (
            CloseReason.SLOW_CONSUMER_PENDING_BYTES
            if kind == "pending"
            else CloseReason.SLOW_CONSUMER_WRITE_DEADLINE
        )
        log.info("%s - Slow Consumer Detected", self.label)
        self.close(reason, abort=True)
