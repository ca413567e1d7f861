"""Consumers: pull requests (`MSG.NEXT`), push delivery, acknowledgements and redelivery.

Corresponds to nats-server's `server/consumer.go`. A consumer walks its stream from a starting
sequence, hands messages to waiting pull requests (or to its deliver subject), and tracks what is
pending acknowledgement. The reply subject of every delivered message is the ack subject
`$JS.ACK.<stream>.<consumer>.<delivered>.<stream seq>.<consumer seq>.<ts>.<pending>`.
"""

from __future__ import annotations

import asyncio
import json
from collections import deque
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pynatsd.jetstream import errors
from pynatsd.jetstream.config import consumer_config_reply, consumer_filters
from pynatsd.jetstream.store.base import StoredMsg
from pynatsd.jetstream.util import now_ns, parse_rfc3339_ns, rfc3339_ns
from pynatsd.logger import log
from pynatsd.protocol.events import Pub
from pynatsd.server.subscription import InternalClient, InternalSubscription
from pynatsd.subjects import match_literal

if TYPE_CHECKING:
    from pynatsd.jetstream.stream import Stream
    from pynatsd.server.client import Client

NS = 1_000_000_000
_NO_MESSAGES = b"NATS/1.0 404 No Messages\r\n\r\n"
_IDLE_HEARTBEAT = b"NATS/1.0 100 Idle Heartbeat\r\n\r\n"
# How long a consumer waits before looking again for messages past their ack wait.
_MIN_REDELIVERY_CHECK = 0.05


@dataclass(slots=True)
class PullRequest:
    reply: str
    batch: int
    max_bytes: int
    no_wait: bool
    expires_ns: int  # absolute, 0 = never
    heartbeat_ns: int
    delivered: int = 0
    bytes_left: int = 0
    next_heartbeat_ns: int = 0


@dataclass(slots=True)
class Pending:
    dseq: int
    ts: int  # when last delivered
    deliveries: int


@dataclass(slots=True)
class ConsumerState:
    delivered_dseq: int = 0
    delivered_sseq: int = 0
    ack_floor_dseq: int = 0
    ack_floor_sseq: int = 0
    last_active: int = 0
    pending: dict[int, Pending] = field(default_factory=dict)
    redelivered: dict[int, int] = field(default_factory=dict)


def _status(code: str, description: str, extra: str = "") -> bytes:
    return f"NATS/1.0 {code} {description}\r\n{extra}\r\n".encode()


class Consumer:
    def __init__(self, stream: Stream, config: dict[str, Any], created_ns: int) -> None:
        self.stream = stream
        self.config = config
        self.name: str = config["name"]
        self.created_ns = created_ns
        self.filters = consumer_filters(config)
        self.state = ConsumerState()
        self.waiting: deque[PullRequest] = deque()
        self.redeliver: deque[int] = deque()
        self.next_sseq = 1
        self.closed = False
        self.durable = bool(config.get("durable_name"))
        self._owner = InternalClient(stream.ajs.account, f"consumer:{self.name}")
        self._ack_sub: InternalSubscription | None = None
        self._timer: asyncio.TimerHandle | None = None
        self._save_handle: asyncio.Handle | None = None
        self._last_activity_ns = now_ns()
        self._state_store = stream.store.consumer_state_store(self.name) if self.durable else None
        self._pumping = False

    # -- set-up ----------------------------------------------------------------------------------

    def start(self, restored: dict[str, Any] | None = None) -> None:
        if restored is not None:
            self._restore(restored)
        else:
            self.next_sseq = self._start_sequence()
        prefix = f"$JS.ACK.{self.stream.name}.{self.name}.>"
        self._ack_sub = InternalSubscription(self._owner, prefix, self._on_ack)
        self.stream.ajs.account.sublist.insert(self._ack_sub)
        self._schedule()
        self.save()

    def _start_sequence(self) -> int:
        store = self.stream.store
        st = store.state()
        policy = self.config["deliver_policy"]
        if policy == "all":
            return max(st.first_seq, 1)
        if policy == "new":
            return st.last_seq + 1
        if policy == "last":
            last = self._last_matching()
            return last if last else st.last_seq + 1
        if policy == "by_start_sequence":
            return max(int(self.config["opt_start_seq"]), 1)
        if policy == "by_start_time":
            try:
                ts = parse_rfc3339_ns(self.config["opt_start_time"])
            except ValueError:
                ts = 0
            return max(store.seq_for_time(ts), 1)
        if policy == "last_per_subject":
            return max(st.first_seq, 1)
        return max(st.first_seq, 1)

    def _last_matching(self) -> int:
        store = self.stream.store
        if not self.filters:
            return store.state().last_seq
        best = 0
        for f in self.filters:
            msg = store.load_last_msg(f)
            if msg is not None:
                best = max(best, msg.seq)
        return best

    def wants(self, subject: str) -> bool:
        return not self.filters or any(match_literal(subject, f) for f in self.filters)

    def has_acked(self, seq: int) -> bool:
        return seq < self.next_sseq and seq not in self.state.pending

    # -- persistence -----------------------------------------------------------------------------

    def snapshot(self) -> dict[str, Any]:
        st = self.state
        return {
            "config": self.config,
            "created": self.created_ns,
            "next_sseq": self.next_sseq,
            "delivered": [st.delivered_dseq, st.delivered_sseq],
            "ack_floor": [st.ack_floor_dseq, st.ack_floor_sseq],
            "pending": {str(s): [p.dseq, p.ts, p.deliveries] for s, p in st.pending.items()},
            "redelivered": {str(s): n for s, n in st.redelivered.items()},
        }

    def _restore(self, data: dict[str, Any]) -> None:
        st = self.state
        self.next_sseq = int(data.get("next_sseq", 1))
        st.delivered_dseq, st.delivered_sseq = data.get("delivered", [0, 0])
        st.ack_floor_dseq, st.ack_floor_sseq = data.get("ack_floor", [0, 0])
        st.pending = {int(s): Pending(*v) for s, v in data.get("pending", {}).items()}
        st.redelivered = {int(s): int(n) for s, n in data.get("redelivered", {}).items()}
        # Everything pending at shutdown is due for redelivery.
        self.redeliver.extend(sorted(st.pending))

    def save(self) -> None:
        """Persist the state soon (coalesced: many acks in one read cost one write)."""
        if self._state_store is None or self._save_handle is not None or self.closed:
            return
        self._save_handle = self.stream.ajs.loop.call_soon(self._save_now)

    def _save_now(self) -> None:
        self._save_handle = None
        if self._state_store is not None and not self.closed:
            try:
                self._state_store.save(self.snapshot())
            except OSError:
                log.exception("saving consumer %s state", self.name)

    # -- pull requests ---------------------------------------------------------------------------

    def process_next_request(self, reply: str, body: bytes) -> None:
        if not reply:
            return
        self._last_activity_ns = now_ns()
        batch, max_bytes, no_wait, expires, heartbeat = 1, 0, False, 0, 0
        body = body.strip()
        if body and body[:1] == b"{":
            try:
                req = json.loads(body)
            except ValueError:
                req = None
            if not isinstance(req, dict):
                self._send_status(reply, _status("400", "Bad Request"))
                return
            batch = int(req.get("batch") or 1)
            max_bytes = int(req.get("max_bytes") or 0)
            no_wait = bool(req.get("no_wait"))
            expires = int(req.get("expires") or 0)
            heartbeat = int(req.get("idle_heartbeat") or 0)
        elif body:
            try:
                batch = int(body)
            except ValueError:
                batch = 1
        if batch <= 0:
            self._send_status(reply, _status("400", "Bad Request"))
            return
        if self.config.get("deliver_subject"):
            self._send_status(reply, _status("409", "Consumer is push based"))
            return
        if len(self.waiting) >= self.config.get("max_waiting", 512):
            self._send_status(reply, _status("409", "Exceeded MaxWaiting"))
            return
        if no_wait and not expires and not self._has_more():
            self._send_status(reply, _NO_MESSAGES)
            return
        now = now_ns()
        request = PullRequest(
            reply=reply,
            batch=batch,
            max_bytes=max_bytes,
            no_wait=no_wait,
            expires_ns=now + expires if expires > 0 else 0,
            heartbeat_ns=heartbeat,
            bytes_left=max_bytes,
            next_heartbeat_ns=now + heartbeat if heartbeat else 0,
        )
        self.waiting.append(request)
        self.pump()
        self._schedule()

    def _has_more(self) -> bool:
        return bool(self.redeliver) or self._peek_next() is not None

    def _peek_next(self) -> StoredMsg | None:
        store = self.stream.store
        if not self.filters:
            return store.load_next_msg("", self.next_sseq)
        best: StoredMsg | None = None
        for f in self.filters:
            msg = store.load_next_msg(f, self.next_sseq)
            if msg is not None and (best is None or msg.seq < best.seq):
                best = msg
        return best

    def _next_message(self) -> tuple[StoredMsg, bool] | None:
        """The next message to deliver (redeliveries first) and whether it is a redelivery."""
        store = self.stream.store
        while self.redeliver:
            seq = self.redeliver.popleft()
            if seq not in self.state.pending:
                continue
            msg = store.load_msg(seq)
            if msg is None:
                self.state.pending.pop(seq, None)
                continue
            return msg, True
        max_ack_pending = self.config.get("max_ack_pending", 1000)
        if self.config["ack_policy"] != "none" and len(self.state.pending) >= max_ack_pending:
            return None
        msg = self._peek_next()
        if msg is None:
            return None
        if self.config["deliver_policy"] == "last_per_subject":
            last = store.load_last_msg(msg.subject)
            if last is not None and last.seq != msg.seq:
                self.next_sseq = msg.seq + 1
                return self._next_message()
        return msg, False

    def on_new_message(self) -> None:
        if self.waiting or self.config.get("deliver_subject"):
            self.pump()

    def pump(self) -> None:
        """Deliver while there are requests (or a push subscriber) and messages."""
        if self._pumping or self.closed:
            return
        self._pumping = True
        try:
            if self.config.get("deliver_subject"):
                self._pump_push()
            else:
                self._pump_pull()
        finally:
            self._pumping = False

    def _pump_pull(self) -> None:
        ajs = self.stream.ajs
        now = now_ns()
        while self.waiting:
            request = self.waiting[0]
            if request.expires_ns and now >= request.expires_ns:
                self._expire(self.waiting.popleft())
                continue
            if not ajs.has_interest(request.reply):
                self.waiting.popleft()
                continue
            found = self._next_message()
            if found is None:
                break
            msg, redelivery = found
            size = len(msg.subject) + len(msg.header) + len(msg.data)
            if request.max_bytes:
                if size > request.bytes_left:
                    if redelivery:
                        self.redeliver.appendleft(msg.seq)
                    self.waiting.popleft()
                    if request.delivered == 0:
                        self._send_status(
                            request.reply, _status("409", "Message Size Exceeds MaxBytes")
                        )
                    else:
                        self._send_status(request.reply, _NO_MESSAGES)
                    continue
                request.bytes_left -= size
            self._deliver(msg, request.reply, redelivery)
            request.delivered += 1
            if request.delivered >= request.batch:
                self.waiting.popleft()
        # Nothing more to hand out: no_wait requests end now.
        if self.waiting and not self._has_more():
            keep: deque[PullRequest] = deque()
            for request in self.waiting:
                if request.no_wait and (request.delivered > 0 or not request.expires_ns):
                    self._send_status(request.reply, _NO_MESSAGES)
                else:
                    keep.append(request)
            self.waiting = keep

    def _pump_push(self) -> None:
        ajs = self.stream.ajs
        subject = self.config["deliver_subject"]
        if not ajs.has_interest(subject):
            return
        while True:
            found = self._next_message()
            if found is None:
                return
            msg, redelivery = found
            self._deliver(msg, subject, redelivery)

    def _deliver(self, msg: StoredMsg, inbox: str, redelivery: bool) -> None:
        st = self.state
        now = now_ns()
        st.delivered_dseq += 1
        dseq = st.delivered_dseq
        if not redelivery:
            self.next_sseq = msg.seq + 1
            st.delivered_sseq = max(st.delivered_sseq, msg.seq)
        st.last_active = now
        self._last_activity_ns = now
        ack_none = self.config["ack_policy"] == "none"
        deliveries = 1
        if not ack_none:
            entry = st.pending.get(msg.seq)
            if entry is not None:
                entry.deliveries += 1
                entry.dseq = dseq
                entry.ts = now
                deliveries = entry.deliveries
                st.redelivered[msg.seq] = deliveries
            else:
                st.pending[msg.seq] = Pending(dseq, now, 1)
        pending = self.num_pending()
        reply = (
            f"$JS.ACK.{self.stream.name}.{self.name}.{deliveries}.{msg.seq}.{dseq}"
            f".{msg.ts}.{pending}"
        )
        self.stream.ajs.deliver(inbox, msg.subject, reply, msg.header, msg.data)
        if ack_none:
            st.ack_floor_dseq, st.ack_floor_sseq = dseq, msg.seq
        self.save()

    def _expire(self, request: PullRequest) -> None:
        extra = (
            f"Nats-Pending-Messages: {request.batch - request.delivered}\r\n"
            f"Nats-Pending-Bytes: {request.bytes_left}\r\n"
        )
        self._send_status(request.reply, _status("408", "Request Timeout", extra))

    def _send_status(self, reply: str, header: bytes) -> None:
        self.stream.ajs.deliver(reply, reply, "", header, b"")

    # -- acknowledgements ------------------------------------------------------------------------

    def _on_ack(self, sub: InternalSubscription, publisher: Client | None, ev: Pub) -> None:
        tokens = ev.subject.split(b".")
        if len(tokens) < 9:
            return
        try:
            sseq = int(tokens[5])
        except ValueError:
            return
        hs = ev.header_size
        body = ev.payload[hs:] if hs > 0 else ev.payload
        reply = ev.reply.decode()
        self._last_activity_ns = now_ns()
        kind = body[:4]
        if not body or kind == b"+ACK":
            self.ack(sseq)
        elif kind == b"-NAK":
            delay = 0
            rest = body[4:].strip()
            if rest.startswith(b"{"):
                try:
                    delay = int(json.loads(rest).get("delay", 0))
                except (ValueError, AttributeError):
                    delay = 0
            self.nak(sseq, delay)
        elif kind == b"+WPI":
            entry = self.state.pending.get(sseq)
            if entry is not None:
                entry.ts = now_ns()
        elif kind == b"+TER":
            self.term(sseq)
        elif kind == b"+NXT":
            self.ack(sseq)
        if reply:
            # A synchronous ack (ack_sync/double ack) waits for an empty reply.
            self.stream.ajs.reply(reply, b"")

    def ack(self, sseq: int) -> None:
        st = self.state
        policy = self.config["ack_policy"]
        if policy == "none":
            return
        acked: list[int] = []
        if policy == "all":
            acked = [s for s in st.pending if s <= sseq]
        elif sseq in st.pending:
            acked = [sseq]
        for s in acked:
            st.pending.pop(s, None)
            st.redelivered.pop(s, None)
        self._update_ack_floor()
        for s in acked:
            self.stream.on_acked(s)
        self.save()
        if self.waiting:
            self.pump()

    def nak(self, sseq: int, delay_ns: int = 0) -> None:
        if sseq not in self.state.pending:
            return
        if delay_ns > 0:
            entry = self.state.pending[sseq]
            # Redeliver when the delay is up: pretend it was delivered so long ago.
            entry.ts = now_ns() - self.config.get("ack_wait", 30 * NS) + delay_ns
            self._schedule()
            return
        self.redeliver.append(sseq)
        self.pump()

    def term(self, sseq: int) -> None:
        if self.state.pending.pop(sseq, None) is not None:
            self.state.redelivered.pop(sseq, None)
            self._update_ack_floor()
            self.stream.on_acked(sseq)
            self.save()

    def _update_ack_floor(self) -> None:
        st = self.state
        if not st.pending:
            st.ack_floor_dseq, st.ack_floor_sseq = st.delivered_dseq, st.delivered_sseq
            return
        lowest = min(st.pending)
        st.ack_floor_sseq = max(st.ack_floor_sseq, lowest - 1)
        st.ack_floor_dseq = max(st.ack_floor_dseq, st.pending[lowest].dseq - 1)

    # -- timers ----------------------------------------------------------------------------------

    def _schedule(self) -> None:
        """One timer per consumer: the soonest of request expiry, heartbeat, redelivery and
        inactivity."""
        if self.closed:
            return
        loop = self.stream.ajs.loop
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        deadlines: list[int] = []
        for request in self.waiting:
            if request.expires_ns:
                deadlines.append(request.expires_ns)
            if request.next_heartbeat_ns:
                deadlines.append(request.next_heartbeat_ns)
        ack_wait = self.config.get("ack_wait", 0)
        if ack_wait and self.state.pending:
            oldest = min(p.ts for p in self.state.pending.values())
            deadlines.append(oldest + ack_wait)
        threshold = self.config.get("inactive_threshold", 0)
        if threshold and not self.durable:
            deadlines.append(self._last_activity_ns + threshold)
        if not deadlines:
            return
        delay = max((min(deadlines) - now_ns()) / NS, _MIN_REDELIVERY_CHECK)
        self._timer = loop.call_later(delay, self._on_timer)

    def _on_timer(self) -> None:
        self._timer = None
        if self.closed:
            return
        now = now_ns()
        keep: deque[PullRequest] = deque()
        for request in self.waiting:
            if request.expires_ns and now >= request.expires_ns:
                self._expire(request)
                continue
            if request.next_heartbeat_ns and now >= request.next_heartbeat_ns:
                self._send_status(request.reply, _IDLE_HEARTBEAT)
                request.next_heartbeat_ns = now + request.heartbeat_ns
            keep.append(request)
        self.waiting = keep
        ack_wait = self.config.get("ack_wait", 0)
        max_deliver = self.config.get("max_deliver", -1)
        if ack_wait:
            due = sorted(
                seq
                for seq, p in self.state.pending.items()
                if now - p.ts >= ack_wait and seq not in self.redeliver
            )
            for seq in due:
                entry = self.state.pending[seq]
                if max_deliver > 0 and entry.deliveries >= max_deliver:
                    continue
                entry.ts = now  # do not queue it again before its next delivery
                self.redeliver.append(seq)
        threshold = self.config.get("inactive_threshold", 0)
        if (
            threshold
            and not self.durable
            and not self.waiting
            and now - self._last_activity_ns >= threshold
        ):
            log.debug("ephemeral consumer %s > %s inactive, deleting", self.stream.name, self.name)
            self.stream.ajs.delete_consumer(self.stream, self.name)
            return
        self.pump()
        self._schedule()

    # -- reporting -------------------------------------------------------------------------------

    def num_pending(self) -> int:
        store = self.stream.store
        if not self.filters:
            return store.num_pending(self.next_sseq, "")
        return sum(store.num_pending(self.next_sseq, f) for f in self.filters)

    def info(self) -> dict[str, Any]:
        st = self.state
        delivered: dict[str, Any] = {
            "consumer_seq": st.delivered_dseq,
            "stream_seq": st.delivered_sseq,
        }
        if st.last_active:
            delivered["last_active"] = rfc3339_ns(st.last_active)
        return {
            "stream_name": self.stream.name,
            "name": self.name,
            "created": rfc3339_ns(self.created_ns),
            "config": consumer_config_reply(self.config),
            "delivered": delivered,
            "ack_floor": {"consumer_seq": st.ack_floor_dseq, "stream_seq": st.ack_floor_sseq},
            "num_ack_pending": len(st.pending),
            "num_redelivered": len(st.redelivered),
            "num_waiting": len(self.waiting),
            "num_pending": self.num_pending(),
        }

    # -- lifecycle -------------------------------------------------------------------------------

    def stop(self) -> None:
        if self._save_handle is not None:
            self._save_handle.cancel()
            self._save_handle = None
            if self._state_store is not None:
                try:
                    self._state_store.save(self.snapshot())
                except OSError:
                    log.exception("saving consumer %s state", self.name)
        self.closed = True
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self._ack_sub is not None:
            self._ack_sub.closed = True
            self.stream.ajs.account.sublist.remove(self._ack_sub)
            self._ack_sub = None

    def delete(self) -> None:
        self.stop()
        for request in self.waiting:
            self._send_status(request.reply, _status("409", "Consumer Deleted"))
        self.waiting.clear()
        if self._state_store is not None:
            self._state_store.delete()


def check_workqueue(stream: Stream, config: dict[str, Any]) -> None:
    """Work-queue streams: explicit acks, and no two consumers for the same messages."""
    if stream.config["retention"] != "workqueue":
        return
    if config["ack_policy"] != "explicit":
        raise errors.consumer_wq_requires_explicit_ack()
    filters = consumer_filters(config)
    for other in stream.consumers.values():
        if other.name == config["name"]:
            continue
        if not filters or not other.filters:
            raise errors.consumer_wq_multiple_unfiltered()
        from pynatsd.subjects import subjects_collide

        if any(subjects_collide(a, b) for a in filters for b in other.filters):
            raise errors.consumer_wq_not_unique()
