"""A push consumer's flow control and idle heartbeats.

From nats-server's `server/consumer.go`: sendFlowControl, processFlowControl, needFlowControl
and the idle heartbeat timer of loopAndGatherMsgs. Flow control: `$JS.FC.` requests, answered
by the client, and a window that grows from 2 MiB to 32 MiB as Go's does; what is delivered
and not yet covered by an answer counts against the window, and the pump stops while it is
over. Idle heartbeats carry the last consumer and stream sequences (what ordered consumers
check for gaps). What this needs of its consumer is a `FlowOwner`.
"""

from __future__ import annotations

import random
import string
from typing import TYPE_CHECKING, Protocol

from pynatsd.jetstream.consumer.state import NS
from pynatsd.jetstream.consumer.status import heartbeat
from pynatsd.protocol.headers import header_value

if TYPE_CHECKING:
    import asyncio

    from pynatsd.jetstream.consumer.ports import ConsumedStream, ConsumerHost
    from pynatsd.jetstream.consumer.state import ConsumerState
    from pynatsd.jetstream.consumer_config import ConsumerConfig
    from pynatsd.protocol.events import Pub
    from pynatsd.server.client import Client
    from pynatsd.server.subscription import InternalSubscription

# Flow control: nats-server's JsFlowControlMaxPending, and the first window is 1/16 of it.
FC_MAX_PENDING = 32 * 1024 * 1024
_B62 = string.ascii_letters + string.digits
_FC_REQUEST = b"NATS/1.0 100 FlowControl Request\r\n\r\n"


class FlowOwner(Protocol):
    """What flow control and heartbeats use of their consumer."""

    @property
    def name(self) -> str: ...

    @property
    def closed(self) -> bool: ...

    @property
    def config(self) -> ConsumerConfig: ...

    @property
    def push(self) -> bool: ...

    @property
    def active(self) -> bool:
        """The deliver subject has interest."""

    @property
    def stream(self) -> ConsumedStream: ...

    @property
    def ajs(self) -> ConsumerHost: ...

    @property
    def state(self) -> ConsumerState:
        """The sequences a heartbeat carries, what awaits acks."""

    def ack(self, sseq: int, dseq: int) -> bool:
        """A flow control answer acknowledges up to `sseq` (ack policy flow_control)."""

    def signal(self) -> None: ...


class PushFlow:
    """The flow control window of a push consumer and its idle heartbeat timer."""

    def __init__(self, owner: FlowOwner) -> None:
        self._owner = owner
        self._ajs = owner.ajs
        self.pbytes = 0  # Go's pbytes: bytes delivered and not yet covered by flow control
        self.pblimit = 0  # Go's pblimit: the largest flow control window
        self.maxpb = 0  # Go's maxpb: the current flow control window (0 = no flow control)
        self.fcid = ""  # Go's fcid: reply subject of the outstanding flow control request
        self.fcsz = 0  # Go's fcsz: `pbytes` when that request went out
        if owner.config.flow_control:
            self.pblimit = FC_MAX_PENDING
            self.maxpb = FC_MAX_PENDING // 16
        self._hbtmr: asyncio.TimerHandle | None = None  # idle heartbeat timer

    def delivered(self, size: int) -> None:
        """A push delivery of `size` bytes went out (with flow control on): ask for an
        answer when the window needs one."""
        self.pbytes += size
        if self._need_flow_control(size):
            self.send_flow_control()

    def reset_heartbeat(self) -> None:
        owner = self._owner
        hb = owner.config.idle_heartbeat
        if not owner.push or hb <= 0 or owner.closed:
            return
        if self._hbtmr is not None:
            self._hbtmr.cancel()
        self._hbtmr = self._ajs.loop.call_later(hb / NS, self._on_heartbeat)

    def _on_heartbeat(self) -> None:
        self._hbtmr = None
        owner = self._owner
        if owner.closed:
            return
        if owner.active:
            subject = owner.config.deliver_subject
            state = owner.state
            header = heartbeat(state.dseq - 1, state.sseq - 1, self.fcid)
            self._ajs.deliver_push(subject, subject, b"", header, b"")
            if owner.config.ack_policy == "flow_control" and state.pending and not self.fcid:
                # Flow control on an idle stream too: it is how what was delivered gets acked.
                self.send_flow_control()
        self.reset_heartbeat()

    def _need_flow_control(self, size: int) -> bool:
        if self.maxpb == 0:
            return False
        if not self.fcid and self.pbytes > self.maxpb // 2:
            return True
        config = self._owner.config
        if (
            not self.fcid
            and config.ack_policy == "flow_control"
            and 0 < config.max_ack_pending <= len(self._owner.state.pending)
        ):
            # Acknowledged by flow-control replies: ask for one when the window is full.
            return True
        if self.fcid and (self.pbytes - self.fcsz) >= self.maxpb:
            self.fcsz += size
        return False

    def send_flow_control(self) -> None:
        owner = self._owner
        if not owner.push:
            return
        token = "".join(random.choice(_B62) for _ in range(4))
        self.fcid = f"$JS.FC.{owner.stream.name}.{owner.name}.{token}"
        self.fcsz = self.pbytes
        subject = owner.config.deliver_subject
        self._ajs.deliver_push(subject, subject, self.fcid.encode(), _FC_REQUEST, b"")

    def on_flow_control(self, sub: InternalSubscription, publisher: Client | None, ev: Pub) -> None:
        """Go's processFlowControl: the client caught up; open (and widen) the window."""
        owner = self._owner
        subject = ev.subject.decode("utf-8", "surrogateescape")
        if subject != self.fcid or owner.closed:
            return
        if self.maxpb < self.pblimit:
            self.maxpb = min(self.maxpb * 2, self.pblimit)
        self.pbytes = max(self.pbytes - self.fcsz, 0)
        self.fcid, self.fcsz = "", 0
        if owner.config.ack_policy == "flow_control" and ev.header_size > 0:
            # The reply says up to where the sourcing stream stored: everything up to there
            # is acknowledged (ack policy flow_control acks as `all` does).
            header = ev.payload[: ev.header_size]
            stream_seq = _int_header(header, "Nats-Last-Stream")
            if stream_seq > 0:
                owner.ack(stream_seq, max(_int_header(header, "Nats-Last-Consumer"), 0))
        owner.signal()

    def stop(self) -> None:
        if self._hbtmr is not None:
            self._hbtmr.cancel()
        self._hbtmr = None


def _int_header(header: bytes, key: str) -> int:
    value = header_value(header, key)
    try:
        return int(value) if value else 0
    except ValueError:
        return 0
