"""The pull request waiting queue of a consumer (`$JS.API.CONSUMER.MSG.NEXT`).

From nats-server's `server/consumer.go`: processNextMsgRequest, nextReqFromMsg, the waitQueue,
processWaiting and nextWaiting. A request waits until it has its batch, runs out of bytes,
expires or loses interest; each end is answered with the status nats-server sends (404 No
Messages, 408 Request Timeout, 409 ...). What a request's priority group fields (`group`,
`id`, `min_pending`, `min_ack_pending`, `priority`) do lives in `priority.py`; a consumer
without a priority policy never reaches it. What the queue needs of its consumer is a
`PullOwner`.
"""

from __future__ import annotations

import json
from collections import deque
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from pynatsd.jetstream.config import api_level_unmet
from pynatsd.jetstream.consumer.state import NS
from pynatsd.jetstream.consumer.status import heartbeat, pending_extra, status
from pynatsd.jetstream.gostruct import RawNumber, json_kind
from pynatsd.jetstream.util import go_duration, now_ns

if TYPE_CHECKING:
    import asyncio

    from pynatsd.jetstream.consumer.ports import ConsumerHost
    from pynatsd.jetstream.consumer.state import ConsumerState
    from pynatsd.jetstream.consumer_config import ConsumerConfig
    from pynatsd.protocol.events import Pub
    from pynatsd.server.client import Client
    from pynatsd.server.subscription import InternalSubscription, Subscription

_NO_MESSAGES = b"NATS/1.0 404 No Messages\r\n\r\n"
_REQUIRED_API_LEVEL = b"NATS/1.0 412 Required Api Level\r\n\r\n"


@dataclass(slots=True)
class PriorityRequest:
    """The priority group fields of a pull request (Go's PriorityGroup, embedded in
    JSApiConsumerGetNextRequest)."""

    group: str = ""
    min_pending: int = 0
    min_ack_pending: int = 0
    id: str = ""  # the pin id the client holds (pinned_client)
    priority: int = 0  # 0 (first) to 9 (prioritized)


@dataclass(slots=True)
class PullRequest:
    """One waiting `MSG.NEXT` request (Go's waitingRequest)."""

    reply: str
    n: int  # messages still wanted
    b: int  # bytes still allowed (0 = no limit)
    no_wait: bool
    expires_ns: int  # absolute, 0 = never
    hb_ns: int
    hbt_ns: int  # next heartbeat, 0 = none
    d: int = 0  # delivered
    interest_gen: int = -1  # SubList generation at which `target` was looked up
    target: Subscription | None = None  # who receives on `reply` (deliver_as picks the same)
    # Go's wr.priorityGroup: None for a request that was not a JSON object.
    pg: PriorityRequest | None = None


class PullOwner(Protocol):
    """What the pull request queue uses of its consumer."""

    @property
    def closed(self) -> bool: ...

    @property
    def config(self) -> ConsumerConfig: ...

    @property
    def push(self) -> bool: ...

    @property
    def ajs(self) -> ConsumerHost: ...

    @property
    def state(self) -> ConsumerState:
        """The sequences a heartbeat carries."""

    def pump_round(self) -> None:
        """Deliver what the requests may take now (a round of the pump)."""

    def backlog(self) -> int:
        """Messages the consumer could deliver now: not yet delivered plus redeliveries."""

    def accept_priority_request(self, reply: str, pg: PriorityRequest) -> bool:
        """The priority group checks of a request (priority.py); False: refused, answered."""

    def add_prioritized(self, wr: PullRequest) -> None:
        """Queue a request of a `prioritized` consumer by its priority (priority.py)."""


class PullQueue:
    """Pull requests: accept, queue, pick the next one for a message, expire."""

    def __init__(self, owner: PullOwner) -> None:
        self._owner = owner
        self._ajs = owner.ajs
        # Go's waiting: the pull request queue. Always this deque, changed in place: the
        # consumer's parts keep it.
        self.requests: deque[PullRequest] = deque()
        self.waiting_last = now_ns()  # last pull activity, for the inactive threshold
        self._wtmr: asyncio.TimerHandle | None = None  # expiry and heartbeat timer of requests

    def send_status(self, reply: str, header: bytes) -> None:
        """A status-only message to one requester."""
        self._ajs.deliver(reply, reply, b"", header, b"")

    def on_next_request(self, sub: InternalSubscription, publisher: Client | None, ev: Pub) -> None:
        hs = ev.header_size
        body = ev.payload[hs:] if hs > 0 else ev.payload
        if hs > 0 and not self._owner.push and ev.reply and api_level_unmet(ev.payload[:hs]):
            self.send_status(ev.reply.decode("utf-8", "surrogateescape"), _REQUIRED_API_LEVEL)
            return
        self.process_next_request(ev.reply.decode("utf-8", "surrogateescape"), body)

    def process_next_request(self, reply: str, body: bytes) -> None:
        """Go's processNextMsgRequest."""
        owner = self._owner
        if not reply or owner.closed:
            return

        def send_err(code: int, text: str) -> None:
            self.send_status(reply, status(code, text))

        if owner.push:
            send_err(409, "Consumer is push based")
            return
        try:
            batch, max_bytes, no_wait, expires, hb, pg = self._parse_next_request(body)
        except ValueError as e:
            send_err(400, f"Bad Request - {e}")
            return
        cfg = owner.config
        now = now_ns()
        if cfg.max_batch > 0 and batch > cfg.max_batch:
            send_err(409, f"Exceeded MaxRequestBatch of {cfg.max_batch}")
            return
        if expires and cfg.max_expires > 0 and expires > cfg.max_expires:
            send_err(409, f"Exceeded MaxRequestExpires of {go_duration(cfg.max_expires)}")
            return
        if max_bytes > 0 and cfg.max_bytes > 0 and max_bytes > cfg.max_bytes:
            send_err(409, f"Exceeded MaxRequestMaxBytes of {cfg.max_bytes}")
            return
        if pg is not None and not owner.accept_priority_request(reply, pg):
            return
        waiting = self.requests
        if len(waiting) >= cfg.max_waiting:
            self.process_waiting(eos=False)
        if no_wait:
            msgs_pending = owner.backlog()
            if msgs_pending == 0 and not expires:
                self.waiting_last = now
                send_err(404, "No Messages")
                return
            if msgs_pending > 0:
                self.process_waiting(eos=False)
                if msgs_pending < sum(w.n for w in waiting):
                    self.waiting_last = now
                    send_err(408, "Requests Pending")
                    return
        if len(waiting) >= cfg.max_waiting:
            if not hb:
                send_err(409, "Exceeded MaxWaiting")
            return
        wr = PullRequest(
            reply=reply,
            n=batch,
            b=max_bytes,
            no_wait=no_wait,
            expires_ns=now + expires if expires > 0 else 0,
            hb_ns=hb,
            hbt_ns=now + hb if hb > 0 else 0,
            pg=pg,
        )
        if cfg.priority_policy == "prioritized":
            owner.add_prioritized(wr)
        else:
            waiting.append(wr)
        self.waiting_last = now
        owner.pump_round()
        self.schedule_waiting()

    @staticmethod
    def _parse_next_request(
        body: bytes,
    ) -> tuple[int, int, bool, int, int, PriorityRequest | None]:
        """Go's nextReqFromMsg: (batch, max_bytes, no_wait, expires ns, heartbeat ns, priority
        group fields). A JSON request always has the priority fields (Go embeds them)."""
        req = body.strip()
        if not req:
            return 1, 0, False, 0, 0, None
        if req[:1] == b"{":
            try:
                data = json.loads(req, parse_float=RawNumber)
            except ValueError as e:
                raise ValueError(f"invalid character {e}") from None
            if not isinstance(data, dict):
                raise ValueError("json: cannot unmarshal into Go value")

            def num(key: str, go_type: str) -> int:
                v = data.get(key)
                if v is None:
                    return 0
                if isinstance(v, RawNumber):
                    raise ValueError(
                        f"json: cannot unmarshal number {v} into Go struct field .{key} "
                        f"of type {go_type}"
                    )
                if isinstance(v, bool) or not isinstance(v, int):
                    raise ValueError(
                        f"json: cannot unmarshal {json_kind(v)} into Go struct field .{key} "
                        f"of type {go_type}"
                    )
                return v

            def text(key: str) -> str:
                v = data.get(key)
                if v is None:
                    return ""
                if not isinstance(v, str) or isinstance(v, RawNumber):
                    kind = "number" if isinstance(v, RawNumber) else json_kind(v)
                    raise ValueError(
                        f"json: cannot unmarshal {kind} into Go struct field .{key} of type string"
                    )
                return v

            batch = num("batch", "int")
            max_bytes = num("max_bytes", "int")
            expires = num("expires", "time.Duration")
            hb = num("idle_heartbeat", "time.Duration")
            no_wait = data.get("no_wait")
            if no_wait is not None and not isinstance(no_wait, bool):
                kind = "number" if isinstance(no_wait, RawNumber) else json_kind(no_wait)
                raise ValueError(
                    f"json: cannot unmarshal {kind} into Go struct field .no_wait of type bool"
                )
            pg = PriorityRequest(
                text("group"),
                num("min_pending", "int64"),
                num("min_ack_pending", "int64"),
                text("id"),
                num("priority", "int"),
            )
            if hb > 0 and hb * 2 > expires:
                raise ValueError("heartbeat value too large")
            return batch, max_bytes, bool(no_wait), expires, hb, pg
        try:
            return int(req), 0, False, 0, 0, None
        except ValueError:
            return 1, 0, False, 0, 0, None

    def process_waiting(self, eos: bool) -> tuple[int, int]:
        """Go's processWaiting: end expired (and, at the end of the stream, no_wait) requests,
        drop those without interest, send due heartbeats. Returns (pending messages asked,
        next deadline ns or 0)."""
        waiting = self.requests
        if not waiting:
            return 0, 0
        now = now_ns()
        keep: list[PullRequest] = []
        asked = 0
        deadline = 0
        for wr in waiting:
            expired = wr.expires_ns and now >= wr.expires_ns
            if (eos and wr.no_wait) or expired:
                if expired:
                    self.send_status(
                        wr.reply, status(408, "Request Timeout", pending_extra(wr.n, wr.b))
                    )
                    continue
                if not wr.expires_ns or wr.d > 0:
                    self.send_status(wr.reply, _NO_MESSAGES)
                    continue
            if not self._ajs.has_interest(wr.reply):
                continue
            asked += wr.n
            if wr.hbt_ns:
                if now >= wr.hbt_ns:
                    state = self._owner.state
                    self.send_status(wr.reply, heartbeat(state.dseq - 1, state.sseq - 1))
                    wr.hbt_ns = now + wr.hb_ns
                if not deadline or wr.hbt_ns < deadline:
                    deadline = wr.hbt_ns
            if wr.expires_ns and (not deadline or wr.expires_ns < deadline):
                deadline = wr.expires_ns
            keep.append(wr)
        waiting.clear()
        waiting.extend(keep)
        return asked, deadline

    def next_waiting(self, size: int, now: int) -> PullRequest | None:
        """Go's nextWaiting: the request to get a message of `size` (a consumer with a
        priority policy uses `PriorityGroups.next_waiting` instead; the pump picks once a
        round)."""
        waiting = self.requests
        while waiting:
            wr = waiting[0]
            if wr.expires_ns and now >= wr.expires_ns:
                waiting.popleft()
                self.send_status(
                    wr.reply, status(408, "Request Timeout", pending_extra(wr.n, wr.b))
                )
                continue
            if wr.b > 0 and not self.take_bytes(wr, size):
                waiting.popleft()
                continue
            if wr.interest_gen != self._ajs.account.sublist.genid and not self.find_target(wr):
                waiting.popleft()
                continue
            # Go's waitQueue.pop: a request that wants more goes to the back of the queue.
            wr.d += 1
            wr.n -= 1
            waiting.popleft()
            if wr.n > 0:
                waiting.append(wr)
            return wr
        return None

    def take_bytes(self, wr: PullRequest, size: int) -> bool:
        """Count a message of `size` against a request's max_bytes; False (the request told
        it is over) when the message does not fit."""
        if size <= wr.b:
            wr.b -= size
            if wr.b == 0:
                wr.n = 1  # deliver this one, then the request is done
            return True
        self.send_status(
            wr.reply, status(409, "Message Size Exceeds MaxBytes", pending_extra(wr.n, wr.b))
        )
        return False

    def find_target(self, wr: PullRequest) -> bool:
        """Who receives on the request's reply subject, looked up again only when the
        account's subscriptions changed (not for every message); False when nobody does. A
        requester on another server is not kept: its messages go by the reply subject."""
        sublist = self._ajs.account.sublist
        result = sublist.match_bytes(wr.reply.encode())
        if result.psubs:
            wr.target = result.psubs[0]
        elif result.qsubs:
            wr.target = result.qsubs[0][0]
        else:
            return False
        if wr.target.remote:
            wr.target = None
        wr.interest_gen = sublist.genid
        return True

    def schedule_waiting(self) -> None:
        if self._wtmr is not None:
            self._wtmr.cancel()
        self._wtmr = None
        if self._owner.closed or not self.requests:
            return
        deadline = 0
        for wr in self.requests:
            for t in (wr.expires_ns, wr.hbt_ns):
                if t and (not deadline or t < deadline):
                    deadline = t
        if deadline:
            delay = max((deadline - now_ns()) / NS, 0.001)
            self._wtmr = self._ajs.loop.call_later(delay, self._on_waiting_timer)

    def _on_waiting_timer(self) -> None:
        self._wtmr = None
        if self._owner.closed:
            return
        # Go's loop treats its request timer as an end of stream: a no_wait request that got
        # something is answered 404 now, even if it only stalled on max_ack_pending.
        self.process_waiting(eos=True)
        self._owner.pump_round()
        self.schedule_waiting()

    def end_all(self, header: bytes) -> None:
        """Answer every waiting request with `header` and forget them (a deleted consumer)."""
        for wr in self.requests:
            self.send_status(wr.reply, header)
        self.requests.clear()

    def stop(self) -> None:
        if self._wtmr is not None:
            self._wtmr.cancel()
        self._wtmr = None
