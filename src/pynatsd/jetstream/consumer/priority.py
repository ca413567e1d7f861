"""Priority groups of a pull consumer (ADR-42): `pinned_client`, `overflow`, `prioritized`.

From nats-server's `server/consumer.go`: the priority checks of processNextMsgRequest,
nextWaiting with its pin and overflow rules, setPinnedTimer, assignNewPinId, unassignPinId,
the pinned/unpinned advisories, the waitQueue's addPrioritized and popAndRequeue, and the
`priority_groups` state in consumer info; the unpin request of `server/jetstream_api.go`
(jsConsumerUnpinRequest) calls `unpin` here.

- `pinned_client`: the first request of the group to get a message is pinned: the server
  gives it an id, sent in the `Nats-Pin-Id` header of every message it delivers while the pin
  holds, and from then on only requests carrying that `id` get messages (requests without one
  wait, requests with another id are ended with `423`). The pin ends when no request with the
  id arrived for `priority_timeout`, or by `$JS.API.CONSUMER.UNPIN.<stream>.<consumer>`.
- `overflow`: a request with `min_pending` and/or `min_ack_pending` gets messages only while
  the consumer has at least that many messages pending (or awaiting acks).
- `prioritized`: requests are served by their `priority`, 0 first, arrival order within one.

nats-server supports one group per consumer for pins (its state names the first group only);
so does this. A consumer without a priority policy never calls into this module. What the
groups need of their consumer is a `PriorityOwner`; the queue itself is the consumer's
`PullQueue`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

from pynatsd.jetstream.consumer.state import NS
from pynatsd.jetstream.consumer.status import pending_extra, status
from pynatsd.jetstream.util import now_ns, rfc3339_ns

if TYPE_CHECKING:
    import asyncio

    from pynatsd.jetstream.consumer.ports import ConsumerHost
    from pynatsd.jetstream.consumer.state import ConsumerState
    from pynatsd.jetstream.consumer.waiting import PriorityRequest, PullQueue, PullRequest
    from pynatsd.jetstream.consumer_config import ConsumerConfig

# Go's waitQueue orders a request without priority fields after every other one.
_NO_PRIORITY = 2**31 - 1


def pin_header(header: bytes, pin_id: str) -> bytes:
    """Go's genHeader(hdr, "Nats-Pin-Id", id): the message's header block plus the pin."""
    line = b"Nats-Pin-Id: " + pin_id.encode() + b"\r\n\r\n"
    if len(header) > 2:
        return header[:-2] + line
    return b"NATS/1.0\r\n" + line


def _priority_of(wr: PullRequest) -> int:
    return wr.pg.priority if wr.pg is not None else _NO_PRIORITY


class PriorityOwner(Protocol):
    """What the priority groups use of their consumer."""

    @property
    def closed(self) -> bool: ...

    @property
    def config(self) -> ConsumerConfig: ...

    @property
    def ajs(self) -> ConsumerHost: ...

    @property
    def state(self) -> ConsumerState:
        """What awaits acks (`min_ack_pending`)."""

    def num_pending(self) -> int:
        """Messages not yet delivered (`min_pending`)."""

    def signal(self) -> None: ...

    def new_pin_id(self) -> str: ...

    def advise_pinned(self, group: str, pin_id: str) -> None: ...

    def advise_unpinned(self, group: str, reason: str) -> None: ...


class PriorityGroups:
    """The pull request queue with a priority policy: who may get the next message."""

    def __init__(self, owner: PriorityOwner, queue: PullQueue) -> None:
        self._owner = owner
        self._queue = queue
        self.pin_id = ""  # Go's currentPinId: the pinned client's id (pinned_client policy)
        self.pinned_ts = 0  # Go's pinnedTS: when that pin was given (ns)
        self._pin_tmr: asyncio.TimerHandle | None = None  # Go's pinnedTtl: the pin's expiry

    def accept_priority_request(self, reply: str, pg: PriorityRequest) -> bool:
        """The checks processNextMsgRequest makes of a request's priority fields, in Go's
        order; a refused request is answered here."""
        config = self._owner.config
        policy = config.priority_policy

        def refuse(code: int, text: str) -> bool:
            self._queue.send_status(reply, status(code, text))
            return False

        if (pg.min_pending or pg.min_ack_pending) and policy != "overflow":
            return refuse(400, "Bad Request - Not a Overflow Priority consumer")
        if pg.id and policy != "pinned_client":
            return refuse(400, "Bad Request - Not a Pinned Client Priority consumer")
        if not 0 <= pg.priority <= 9:
            return refuse(400, "Bad Request - Priority must be between 0 and 9")
        if not policy:
            return True
        if not pg.group:
            return refuse(400, "Bad Request - Priority Group missing")
        if pg.group not in config.priority_groups:
            return refuse(400, "Bad Request - Invalid Priority Group")
        if self.pin_id:
            if pg.id == self.pin_id:
                self._set_pin_timer(pg.group)  # the pinned client is still there
            elif pg.id:
                return refuse(423, "Nats-Pin-Id mismatch")
        return True

    # -- the queue -------------------------------------------------------------------------------

    def add_prioritized(self, wr: PullRequest) -> None:
        """Go's insertAtPosition: before the first waiting request with a higher number
        (walking from the head, as Go does: cycling may have left the queue out of order)."""
        priority = _priority_of(wr)
        waiting = self._queue.requests
        for i, other in enumerate(waiting):
            if _priority_of(other) > priority:
                waiting.insert(i, wr)
                return
        waiting.append(wr)

    def _cycle(self) -> None:
        """Go's waitQueue.cycle: the head goes to the back (in every policy)."""
        self._queue.requests.rotate(-1)

    def _end_wrong_pin(self, wr: PullRequest) -> None:
        self._queue.requests.popleft()
        self._queue.send_status(
            wr.reply, status(423, "Nats-Wrong-Pin-Id", pending_extra(wr.n, wr.b))
        )

    def next_waiting(self, size: int, now: int) -> PullRequest | None:
        """Go's nextWaiting for a consumer with a priority policy."""
        policy = self._owner.config.priority_policy
        queue = self._queue
        waiting = queue.requests
        need_new_pin = not self.pin_id and policy == "pinned_client"
        cycled = 0
        while waiting:
            wr = waiting[0]
            pg = wr.pg
            if wr.expires_ns and now >= wr.expires_ns:
                waiting.popleft()
                queue.send_status(
                    wr.reply, status(408, "Request Timeout", pending_extra(wr.n, wr.b))
                )
                continue
            assigned_pin = False
            if need_new_pin:
                if pg is None or not pg.id:
                    self._assign_new_pin(wr)
                    assigned_pin = True
                else:  # an old pin id, most likely
                    self._end_wrong_pin(wr)
                    continue
            elif self.pin_id:
                if pg is None or not pg.id:
                    # Not the pinned client: it waits while the pin holds.
                    self._cycle()
                    cycled += 1
                    if cycled >= len(waiting):
                        return None
                    continue
                if pg.id != self.pin_id:
                    self._end_wrong_pin(wr)
                    continue
            if (
                policy == "overflow"
                and pg is not None
                and (pg.min_pending > 0 or pg.min_ack_pending > 0)
                and not self._overflowing(pg)
            ):
                self._cycle()
                cycled += 1
                if cycled >= len(waiting):
                    return None
                continue
            if wr.b > 0 and not queue.take_bytes(wr, size):
                if assigned_pin:
                    self._unassign_pin()
                waiting.popleft()
                continue
            if wr.interest_gen != self._owner.ajs.account.sublist.genid and not queue.find_target(
                wr
            ):
                waiting.popleft()
                continue
            wr.d += 1
            wr.n -= 1
            if wr.n <= 0:
                waiting.popleft()
            elif len(waiting) > 1:
                waiting.popleft()
                if policy == "prioritized":
                    self.add_prioritized(wr)  # Go's popAndRequeue
                else:
                    waiting.append(wr)
            return wr
        return None

    def _overflowing(self, pg: PriorityRequest) -> bool:
        """Whether the consumer is far enough behind for an overflow request. The message
        being handed out is still counted as pending (Go compares with npc+1)."""
        if pg.min_pending > 0 and pg.min_pending <= self._owner.num_pending() + 1:
            return True
        return pg.min_ack_pending > 0 and pg.min_ack_pending <= len(self._owner.state.pending)

    # -- the pin ---------------------------------------------------------------------------------

    def _assign_new_pin(self, wr: PullRequest) -> None:
        """Go's assignNewPinId: the request (and whoever sends its id later) is pinned."""
        pg = wr.pg
        if pg is None or not pg.group:
            return
        self.pin_id = self._owner.new_pin_id()
        self.pinned_ts = now_ns()
        pg.id = self.pin_id
        self._set_pin_timer(pg.group)
        self._owner.advise_pinned(pg.group, self.pin_id)

    def _unassign_pin(self) -> None:
        """Go's unassignPinId."""
        self.pin_id = ""
        self.pinned_ts = 0
        self.stop()

    def _set_pin_timer(self, group: str) -> None:
        """Go's setPinnedTimer: the pin ends `priority_timeout` after it was last used."""
        owner = self._owner
        if self._pin_tmr is not None:
            self._pin_tmr.cancel()
        self._pin_tmr = owner.ajs.loop.call_later(
            owner.config.priority_timeout / NS, self._on_pin_timeout, group
        )

    def _on_pin_timeout(self, group: str) -> None:
        self._pin_tmr = None
        if self._owner.closed or not self.pin_id:
            return
        self._unassign_pin()
        self._owner.advise_unpinned(group, "timeout")
        self._owner.signal()

    def unpin(self, group: str) -> None:
        """`$JS.API.CONSUMER.UNPIN`: end the pin, whoever holds it; the next request of the
        group to get a message is pinned anew."""
        self._unassign_pin()
        self._owner.advise_unpinned(group, "admin")
        self._owner.signal()

    def info(self) -> list[dict[str, Any]]:
        """Consumer info's `priority_groups` (Go's PriorityGroupState), for the first group."""
        groups = self._owner.config.priority_groups
        if not groups:
            return []
        state: dict[str, Any] = {"group": groups[0]}
        if self.pin_id:
            state["pinned_client_id"] = self.pin_id
        state["pinned_ts"] = rfc3339_ns(self.pinned_ts)
        return [state]

    def stop(self) -> None:
        if self._pin_tmr is not None:
            self._pin_tmr.cancel()
        self._pin_tmr = None
