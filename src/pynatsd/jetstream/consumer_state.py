"""The state every part of a consumer shares, and the small helpers they all use.

nats-server keeps one `consumer` struct in `server/consumer.go`; here its fields live in
`ConsumerState`, and each concern is a class of its own module built on it: the pending/ack/
redelivery tracker (`pending.py`), the pull request queue (`waiting.py`), delivery
(`delivery.py`), and `Consumer` (`consumer.py`), which ties them together with its lifecycle and
state saving. Where a field keeps Go's name, its comment says what the name means.
"""

from __future__ import annotations

import asyncio
import string
from collections import deque
from typing import TYPE_CHECKING

from pynatsd.jetstream.consumer_config import cheap_filters, delete_threshold
from pynatsd.jetstream.pacing import Pacing
from pynatsd.jetstream.util import now_ns, parse_go_time
from pynatsd.server.subscription import InternalClient, InternalSubscription
from pynatsd.subjects import match_literal

if TYPE_CHECKING:
    from pynatsd.jetstream.consumer_config import ConsumerConfig
    from pynatsd.jetstream.pending import Pending
    from pynatsd.jetstream.store.base import StoredMsg
    from pynatsd.jetstream.stream import Stream
    from pynatsd.jetstream.waiting import PullRequest

NS = 1_000_000_000
MS = 1_000_000
# Flow control: nats-server's JsFlowControlMaxPending, and the first window is 1/16 of it.
FC_MAX_PENDING = 32 * 1024 * 1024
B62 = string.ascii_letters + string.digits


def status(code: int, description: str, extra: str = "") -> bytes:
    """A status-only header block (`NATS/1.0 404 No Messages`...)."""
    return f"NATS/1.0 {code} {description}\r\n{extra}\r\n".encode()


def pending_extra(n: int, b: int) -> str:
    """The headers telling a pull request what it still had open."""
    return f"Nats-Pending-Messages: {n}\r\nNats-Pending-Bytes: {b}\r\n"


class ConsumerState:
    """Go's `consumer` struct: configuration, sequences, timers. No behaviour of its own
    beyond the helpers every part uses; the parts declare here (raising NotImplementedError)
    the few methods of another part they call."""

    def __init__(self, stream: Stream, config: ConsumerConfig, created_ns: int, name: str) -> None:
        self.stream = stream
        self.ajs = stream.ajs
        self.config = config
        self.name = name
        self.created_ns = created_ns
        self.durable = bool(config.durable_name)
        self.filters = config.filters()
        self.closed = False
        # Neither changes on an update (Go refuses a new ack policy), and both are read per message.
        self.ack_none = config.ack_policy == "none"
        self._ack_prefix = f"$JS.ACK.{stream.name}.{name}.".encode()

        # -- where delivery stands (Go's o.sseq, o.dseq) --
        self.sseq = 1  # stream sequence: the next stream message to look at
        self.dseq = 1  # delivery (consumer) sequence: the number the next delivery gets
        self.delivered_sseq = 0  # stream seq of the last first-time delivery (store state)
        self.lss: list[int] | None = None  # Go's lss: last-per-subject skip list, seqs to send
        self.lss_resume = 0  # where the stream walk resumes once `lss` is used up
        self.ldt = 0  # Go's ldt: last delivery time (ns)
        self._ahead: deque[StoredMsg] = deque()  # read-ahead of one pump round
        self._from_lss = False  # the last message _get_next_msg gave came from the skip list
        # Go's npc (num pending count): messages matching the filters not yet delivered,
        # None when it must be counted afresh.
        self._npc: int | None = None
        self._npc_mark = (0, 0)  # the store's change_mark() when _npc was counted (cheap filters)
        self._cheap_pending = cheap_filters(self.filters)

        # -- acknowledgements (pending.py) --
        self.adflr = 0  # Go's adflr: ack floor, delivery sequence (all at or below are acked)
        self.asflr = 0  # Go's asflr: ack floor, stream sequence
        self.pending: dict[int, Pending] = {}  # stream seq -> delivery awaiting its ack
        self.rdc: dict[int, int] = {}  # Go's rdc: redelivery count per stream seq
        self.rdq: deque[int] = deque()  # Go's rdq: stream seqs queued for redelivery
        self.rdqi: set[int] = set()  # Go's rdqi: the same seqs, for membership tests
        self.lat = 0  # Go's lat: last ack time (ns)
        self._ptmr: asyncio.TimerHandle | None = None  # Go's ptmr: the pending (ack wait) timer
        self._ptmr_end = 0  # when `_ptmr` fires (ns)

        # -- pull mode (waiting.py) --
        self.waiting: deque[PullRequest] = deque()  # Go's waiting: the pull request queue
        self.waiting_last = now_ns()  # last pull activity, for the inactive threshold
        self._wtmr: asyncio.TimerHandle | None = None  # expiry and heartbeat timer of requests

        # -- priority groups of a pull consumer (priority.py) --
        self.pin_id = ""  # Go's currentPinId: the pinned client's id (pinned_client policy)
        self.pinned_ts = 0  # Go's pinnedTS: when that pin was given (ns)
        self._pin_tmr: asyncio.TimerHandle | None = None  # Go's pinnedTtl: the pin's expiry

        # -- push mode (delivery.py) --
        self.active = False  # the deliver subject has interest
        self.pbytes = 0  # Go's pbytes: bytes delivered and not yet covered by flow control
        self.pblimit = 0  # Go's pblimit: the largest flow control window
        self.maxpb = 0  # Go's maxpb: the current flow control window (0 = no flow control)
        self.fcid = ""  # Go's fcid: reply subject of the outstanding flow control request
        self.fcsz = 0  # Go's fcsz: `pbytes` when that request went out
        if config.flow_control:
            self.pblimit = FC_MAX_PENDING
            self.maxpb = FC_MAX_PENDING // 16
        self._hbtmr: asyncio.TimerHandle | None = None  # idle heartbeat timer
        # replay_policy original and rate_limit_bps (pacing.py); None for the usual consumer.
        self.pacing = Pacing(config, stream) if Pacing.wanted(config) else None

        # -- lifecycle (consumer.py) --
        self.dthresh = 0  # Go's dthresh: delete after this long inactive (ns, 0 = never)
        self._update_inactive_threshold()
        self._dtmr: asyncio.TimerHandle | None = None  # Go's dtmr: the delete-when-inactive timer
        self._pause_tmr: asyncio.TimerHandle | None = None
        self._owner = InternalClient(self.ajs.account, f"consumer:{self.name}")
        self._subs: list[InternalSubscription] = []
        self._save_handle: asyncio.Handle | None = None
        self._pump_handle: asyncio.Handle | None = None
        self._pumping = False
        self._state_store = stream.store.consumer_state_store(self.name) if self.durable else None

    # -- what another part implements -----------------------------------------------------------

    def pump(self) -> None:
        raise NotImplementedError  # delivery.py

    def num_pending(self) -> int:
        raise NotImplementedError  # delivery.py

    def process_next_request(self, reply: str, body: bytes) -> None:
        raise NotImplementedError  # waiting.py

    def save(self) -> None:
        raise NotImplementedError  # consumer.py

    def _has_delivery_interest(self) -> bool:
        raise NotImplementedError  # consumer.py

    def _update_delivery_interest(self, interest: bool) -> None:
        raise NotImplementedError  # consumer.py

    def _delete_not_active(self) -> None:
        raise NotImplementedError  # consumer.py

    # -- shared helpers --------------------------------------------------------------------------

    @property
    def push(self) -> bool:
        return bool(self.config.deliver_subject)

    def _update_inactive_threshold(self) -> None:
        self.dthresh = delete_threshold(self.config, self.durable, self.push)

    def wants(self, subject: str) -> bool:
        return not self.filters or any(match_literal(subject, f) for f in self.filters)

    def signal(self) -> None:
        """Something changed that may let messages out (Go's signalNewMessages)."""
        if self._pump_handle is None and not self.closed:
            self._pump_handle = self.ajs.loop.call_soon(self._pump_soon)

    def _pump_soon(self) -> None:
        self._pump_handle = None
        self.pump()

    def paused(self) -> bool:
        until = self.config.pause_until
        if not until:
            return False
        try:
            return now_ns() < parse_go_time(until)[0]
        except ValueError:
            return False

    def _send_status(self, reply: str, header: bytes) -> None:
        self.ajs.deliver(reply, reply, b"", header, b"")

    def _send_heartbeat(self, subject: str) -> None:
        extra = f"Nats-Last-Consumer: {self.dseq - 1}\r\nNats-Last-Stream: {self.sseq - 1}\r\n"
        if self.fcid:
            extra += f"Nats-Consumer-Stalled: {self.fcid}\r\n"
        header = status(100, "Idle Heartbeat", extra)
        if self.push:
            self.ajs.deliver_push(subject, subject, b"", header, b"")
        else:
            self.ajs.deliver(subject, subject, b"", header, b"")

    @staticmethod
    def _cancel(handle: asyncio.TimerHandle | asyncio.Handle | None) -> None:
        if handle is not None:
            handle.cancel()
