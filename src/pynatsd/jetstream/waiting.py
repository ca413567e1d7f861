"""The pull request waiting queue of a consumer (`$JS.API.CONSUMER.MSG.NEXT`).

From nats-server's `server/consumer.go`: processNextMsgRequest, nextReqFromMsg, the waitQueue,
processWaiting and nextWaiting. A request waits until it has its batch, runs out of bytes,
expires or loses interest; each end is answered with the status nats-server sends (404 No
Messages, 408 Request Timeout, 409 ...). What a request's priority group fields (`group`,
`id`, `min_pending`, `min_ack_pending`, `priority`) do lives in `priority.py`; a consumer
without a priority policy never reaches it.
"""

from __future__ import annotations

import json
from collections import deque
from dataclasses import dataclass
from typing import TYPE_CHECKING

from pynatsd.jetstream.config import api_level_unmet
from pynatsd.jetstream.consumer_state import (
    NS,
    ConsumerState,
    pending_extra,
    status,
)
from pynatsd.jetstream.gostruct import RawNumber, json_kind
from pynatsd.jetstream.util import go_duration, now_ns

if TYPE_CHECKING:
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


class PullQueue(ConsumerState):
    """Pull requests: accept, queue, pick the next one for a message, expire."""

    def _on_next_request(
        self, sub: InternalSubscription, publisher: Client | None, ev: Pub
    ) -> None:
        hs = ev.header_size
        body = ev.payload[hs:] if hs > 0 else ev.payload
        if hs > 0 and not self.push and ev.reply and api_level_unmet(ev.payload[:hs]):
            self._send_status(ev.reply.decode("utf-8", "surrogateescape"), _REQUIRED_API_LEVEL)
            return
        self.process_next_request(ev.reply.decode("utf-8", "surrogateescape"), body)

    def process_next_request(self, reply: str, body: bytes) -> None:
        """Go's processNextMsgRequest."""
        if not reply or self.closed:
            return

        def send_err(code: int, text: str) -> None:
            self._send_status(reply, status(code, text))

        if self.push:
            send_err(409, "Consumer is push based")
            return
        try:
            batch, max_bytes, no_wait, expires, hb, pg = self._parse_next_request(body)
        except ValueError as e:
            send_err(400, f"Bad Request - {e}")
            return
        cfg = self.config
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
        if pg is not None and not self._accept_priority_request(reply, pg):
            return
        if len(self.waiting) >= cfg.max_waiting:
            self._process_waiting(eos=False)
        if no_wait:
            msgs_pending = self.num_pending() + len(self.rdq)
            if msgs_pending == 0 and not expires:
                self.waiting_last = now
                send_err(404, "No Messages")
                return
            if msgs_pending > 0:
                self._process_waiting(eos=False)
                if msgs_pending < sum(w.n for w in self.waiting):
                    self.waiting_last = now
                    send_err(408, "Requests Pending")
                    return
        if len(self.waiting) >= cfg.max_waiting:
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
            self._add_prioritized(wr)
        else:
            self.waiting.append(wr)
        self.waiting_last = now
        self.pump()
        self._schedule_waiting()

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

    def _process_waiting(self, eos: bool) -> tuple[int, int]:
        """Go's processWaiting: end expired (and, at the end of the stream, no_wait) requests,
        drop those without interest, send due heartbeats. Returns (pending messages asked,
        next deadline ns or 0)."""
        if not self.waiting:
            return 0, 0
        now = now_ns()
        keep: deque[PullRequest] = deque()
        asked = 0
        deadline = 0
        for wr in self.waiting:
            expired = wr.expires_ns and now >= wr.expires_ns
            if (eos and wr.no_wait) or expired:
                if expired:
                    self._send_status(
                        wr.reply, status(408, "Request Timeout", pending_extra(wr.n, wr.b))
                    )
                    continue
                if not wr.expires_ns or wr.d > 0:
                    self._send_status(wr.reply, _NO_MESSAGES)
                    continue
            if not self.ajs.has_interest(wr.reply):
                continue
            asked += wr.n
            if wr.hbt_ns:
                if now >= wr.hbt_ns:
                    self._send_heartbeat(wr.reply)
                    wr.hbt_ns = now + wr.hb_ns
                if not deadline or wr.hbt_ns < deadline:
                    deadline = wr.hbt_ns
            if wr.expires_ns and (not deadline or wr.expires_ns < deadline):
                deadline = wr.expires_ns
            keep.append(wr)
        self.waiting = keep
        return asked, deadline

    def _next_waiting(self, size: int, now: int) -> PullRequest | None:
        """Go's nextWaiting: the request to get a message of `size` (a consumer with a
        priority policy uses `_next_waiting_priority` instead; the pump picks once a round)."""
        while self.waiting:
            wr = self.waiting[0]
            if wr.expires_ns and now >= wr.expires_ns:
                self.waiting.popleft()
                self._send_status(
                    wr.reply, status(408, "Request Timeout", pending_extra(wr.n, wr.b))
                )
                continue
            if wr.b > 0 and not self._take_bytes(wr, size):
                self.waiting.popleft()
                continue
            if wr.interest_gen != self.ajs.account.sublist.genid and not self._find_target(wr):
                self.waiting.popleft()
                continue
            # Go's waitQueue.pop: a request that wants more goes to the back of the queue.
            wr.d += 1
            wr.n -= 1
            self.waiting.popleft()
            if wr.n > 0:
                self.waiting.append(wr)
            return wr
        return None

    def _take_bytes(self, wr: PullRequest, size: int) -> bool:
        """Count a message of `size` against a request's max_bytes; False (the request told
        it is over) when the message does not fit."""
        if size <= wr.b:
            wr.b -= size
            if wr.b == 0:
                wr.n = 1  # deliver this one, then the request is done
            return True
        self._send_status(
            wr.reply, status(409, "Message Size Exceeds MaxBytes", pending_extra(wr.n, wr.b))
        )
        return False

    def _find_target(self, wr: PullRequest) -> bool:
        """Who receives on the request's reply subject, looked up again only when the
        account's subscriptions changed (not for every message); False when nobody does. A
        requester on another server is not kept: its messages go by the reply subject."""
        sublist = self.ajs.account.sublist
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

    # -- what priority.py implements -------------------------------------------------------------

    def _accept_priority_request(self, reply: str, pg: PriorityRequest) -> bool:
        raise NotImplementedError  # priority.py

    def _add_prioritized(self, wr: PullRequest) -> None:
        raise NotImplementedError  # priority.py

    def _next_waiting_priority(self, size: int, now: int) -> PullRequest | None:
        raise NotImplementedError  # priority.py

    def _schedule_waiting(self) -> None:
        self._cancel(self._wtmr)
        self._wtmr = None
        if self.closed or not self.waiting:
            return
        deadline = 0
        for wr in self.waiting:
            for t in (wr.expires_ns, wr.hbt_ns):
                if t and (not deadline or t < deadline):
                    deadline = t
        if deadline:
            delay = max((deadline - now_ns()) / NS, 0.001)
            self._wtmr = self.ajs.loop.call_later(delay, self._on_waiting_timer)

    def _on_waiting_timer(self) -> None:
        self._wtmr = None
        if self.closed:
            return
        # Go's loop treats its request timer as an end of stream: a no_wait request that got
        # something is answered 404 now, even if it only stalled on max_ack_pending.
        self._process_waiting(eos=True)
        self.pump()
        self._schedule_waiting()
