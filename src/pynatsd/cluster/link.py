"""What every connection to another server (a route, a leaf node connection) does alike as an
asyncio protocol: close when the peer goes, pass write pressure to its `Outbound`, write a
frame at once, close as a slow consumer, and deliver a message by its plan (the ROUTER and
LEAF kinds of nats-server's `client.go`, which share these paths with clients)."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from pynatsd.logger import log
from pynatsd.protocol.errors import CloseReason

if TYPE_CHECKING:
    from pynatsd.cluster.protocol import RouteMsg
    from pynatsd.server.outbound import Outbound
    from pynatsd.server.plans import Plan, PlanCache
    from pynatsd.server.server import Server


class ServerLink(asyncio.Protocol):
    """The shared half of a connection to another server; the subclass has `server`,
    `outbound`, `closed`, `label`, `plans` and `close`."""

    server: Server
    outbound: Outbound
    closed: bool
    label: str
    # Delivery plans of the peer's message lines (server/plans.py), for local receivers.
    plans: PlanCache

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

    def _delivered_by_plan(self, ev: RouteMsg, genid: int) -> bool:
        """Deliver a message naming no queue group by the plan of its line, if one is valid
        for the SubList generation `genid`: True when it was."""
        msg = ev.msg
        line = msg.line
        if not line or ev.queues:
            return False
        plan = self.plans.lookup(line)
        if plan is None or plan.genid != genid:
            return False
        self._send_planned(plan, msg.payload)
        return True

    def _send_planned(self, plan: Plan, payload: bytes) -> None:
        """The planned delivery of a message from the peer (as ClientSession._process_pub
        does it for a client's PUB)."""
        tail = payload + b"\r\n"
        dirty = self.server.dirty
        if not plan.count:
            self.plans.touched.append(plan)
        plan.count += 1
        plan.nbytes += len(payload)
        for outbound, _, head in plan.targets:
            frames = outbound.frames
            frames.append(head)
            frames.append(tail)
            if not outbound.dirty:
                outbound.dirty = True
                dirty.append(outbound)
