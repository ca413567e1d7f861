"""Consumers: pull requests (`MSG.NEXT`), push delivery, acknowledgements and redelivery.

A port of nats-server's `server/consumer.go` to one event loop. A consumer walks its stream from
a starting sequence (`sseq`), numbers its deliveries (`dseq`), and tracks what waits for an
acknowledgement (`pending`, stream seq -> delivery seq and time). Redeliveries (ack wait, backoff,
-NAK) go through a queue that is served before new messages. The reply subject of every delivered
message is the ack subject
`$JS.ACK.<stream>.<consumer>.<delivered count>.<stream seq>.<consumer seq>.<ts>.<pending>`.

Pull consumers hand messages to waiting `MSG.NEXT` requests; push consumers publish to their
deliver subject while it has interest, with flow control (`$JS.FC.` requests answered by the
client, a window that grows from 2 MiB to 32 MiB as Go's does) and idle heartbeats carrying the
last consumer and stream sequences (what ordered consumers check for gaps).

Go's consumer runs a goroutine that sleeps on channels; here `pump()` runs whenever something
may let a message out (a new message, a pull request, an ack, a flow-control reply, interest
appearing) and a few loop timers stand in for Go's (pending check, heartbeat, delete).
"""

from __future__ import annotations

import asyncio
import json
import random
import string
from collections import deque
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pynatsd.jetstream import errors
from pynatsd.jetstream.config import (
    DEFAULT_EPHEMERAL_INACTIVE,
    consumer_config_reply,
    consumer_filters,
)
from pynatsd.jetstream.store.base import StoredMsg, StoreError
from pynatsd.jetstream.util import (
    go_duration,
    go_json,
    now_ns,
    parse_go_duration,
    parse_go_time,
    rfc3339_ns,
)
from pynatsd.logger import log
from pynatsd.protocol.events import Pub
from pynatsd.server.subscription import InternalClient, InternalSubscription
from pynatsd.subjects import match_literal, subjects_collide

if TYPE_CHECKING:
    from pynatsd.jetstream.stream import Stream
    from pynatsd.server.client import Client
    from pynatsd.server.subscription import Subscription

NS = 1_000_000_000
MS = 1_000_000
_NO_MESSAGES = b"NATS/1.0 404 No Messages\r\n\r\n"
_FC_REQUEST = b"NATS/1.0 100 FlowControl Request\r\n\r\n"
# Flow control: nats-server's JsFlowControlMaxPending, and the first window is 1/16 of it.
_FC_MAX_PENDING = 32 * 1024 * 1024
# How many messages one pump delivers before yielding to the event loop (a push consumer on a
# large stream must not starve every other client).
_PUMP_BUDGET = 1000
# Messages a pump round reads from the store at once (Consumer._next_from_stream).
_READ_AHEAD = 128
# Consumer state is written at most this often (seconds); see Consumer.save.
_SAVE_DELAY = 0.05
# Go adds 1 ms to ack-wait timers so that bursts are handled in one go (ackWaitDelay).
_ACK_WAIT_DELAY = MS
_ADVISORY = "io.nats.jetstream.advisory.v1."
_B62 = string.ascii_letters + string.digits


@dataclass(slots=True)
class PullRequest:
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


@dataclass(slots=True)
class Pending:
    dseq: int  # delivery sequence of the first delivery
    ts: int  # when last delivered (ns)


def _status(code: int, description: str, extra: str = "") -> bytes:
    return f"NATS/1.0 {code} {description}\r\n{extra}\r\n".encode()


def _pending_extra(n: int, b: int) -> str:
    return f"Nats-Pending-Messages: {n}\r\nNats-Pending-Bytes: {b}\r\n"


class Consumer:
    def __init__(self, stream: Stream, config: dict[str, Any], created_ns: int, name: str) -> None:
        self.stream = stream
        self.ajs = stream.ajs
        self.config = config
        self.name = name
        self.created_ns = created_ns
        self.durable = bool(config["durable_name"])
        self.filters = consumer_filters(config)
        self._npc: int | None = None
        self._npc_mark = (0, 0)  # the store's change_mark() when _npc was counted (cheap filters)
        self._from_lss = False  # the last message _get_next_msg gave came from the skip list
        self._cheap_pending = _cheap_filters(self.filters)
        # Neither changes on an update (Go refuses a new ack policy), and both are read per message.
        self.ack_none = config["ack_policy"] == "none"
        self._ack_prefix = f"$JS.ACK.{stream.name}.{name}.".encode()
        self.closed = False
        # Delivery state (Go's o.sseq, o.dseq, o.adflr, o.asflr, o.pending, o.rdc, o.rdq).
        self.sseq = 1
        self.dseq = 1
        self.adflr = 0
        self.asflr = 0
        self.delivered_sseq = 0  # stream seq of the last first-time delivery (store state)
        self.pending: dict[int, Pending] = {}
        self.rdc: dict[int, int] = {}
        self.rdq: deque[int] = deque()
        self.rdqi: set[int] = set()
        self._ahead: deque[StoredMsg] = deque()  # read-ahead of one pump round
        self.lss: list[int] | None = None  # last-per-subject skip list
        self.lss_resume = 0
        self.ldt = 0  # last delivery time
        self.lat = 0  # last ack time
        # Pull mode.
        self.waiting: deque[PullRequest] = deque()
        self.waiting_last = now_ns()
        # Push mode.
        self.active = False
        self.pbytes = 0
        self.pblimit = 0
        self.maxpb = 0
        self.fcid = ""
        self.fcsz = 0
        if config["flow_control"]:
            self.pblimit = _FC_MAX_PENDING
            self.maxpb = _FC_MAX_PENDING // 16
        self.dthresh = 0
        self._update_inactive_threshold()
        self._owner = InternalClient(self.ajs.account, f"consumer:{self.name}")
        self._subs: list[InternalSubscription] = []
        self._ptmr: asyncio.TimerHandle | None = None
        self._ptmr_end = 0
        self._wtmr: asyncio.TimerHandle | None = None
        self._hbtmr: asyncio.TimerHandle | None = None
        self._dtmr: asyncio.TimerHandle | None = None
        self._pause_tmr: asyncio.TimerHandle | None = None
        self._save_handle: asyncio.Handle | None = None
        self._pump_handle: asyncio.Handle | None = None
        self._pumping = False
        self._state_store = stream.store.consumer_state_store(self.name) if self.durable else None

    # -- properties ------------------------------------------------------------------------------

    @property
    def push(self) -> bool:
        return bool(self.config["deliver_subject"])

    def _update_inactive_threshold(self) -> None:
        """Go's updateInactiveThreshold: ephemerals always have one (5 s by default)."""
        cfg = self.config
        if not self.durable and cfg["inactive_threshold"] <= 0:
            self.dthresh = DEFAULT_EPHEMERAL_INACTIVE + 100 * MS + random.randrange(900) * MS
            cfg["inactive_threshold"] = DEFAULT_EPHEMERAL_INACTIVE
        elif cfg["inactive_threshold"] > 0:
            extra = 0 if self.push else 100 * MS + random.randrange(900) * MS
            self.dthresh = cfg["inactive_threshold"] + extra
        else:
            self.dthresh = 0

    # -- set-up ----------------------------------------------------------------------------------

    def start(self, restored: dict[str, Any] | None = None) -> None:
        if restored is not None:
            self._restore(restored)
        else:
            self._select_starting_seq()
        sl = self.ajs.account.sublist
        stream, name = self.stream.name, self.name
        if self.config["ack_policy"] != "none":
            # As nats-server: an ack-none consumer does not listen for acks at all (an ack sent
            # as a request then gets "no responders").
            self._subs.append(
                InternalSubscription(self._owner, f"$JS.ACK.{stream}.{name}.>", self._on_ack)
            )
        for api in self.ajs.api_prefixes():
            self._subs.append(
                InternalSubscription(
                    self._owner, f"{api}.CONSUMER.MSG.NEXT.{stream}.{name}", self._on_next_request
                )
            )
        if self.config["flow_control"]:
            self._subs.append(
                InternalSubscription(
                    self._owner, f"$JS.FC.{stream}.{name}.*", self._on_flow_control
                )
            )
        for sub in self._subs:
            sl.insert(sub)
        if self.push:
            self.active = self._has_delivery_interest()
            self.ajs.watch_interest(self)
            if not self.active:
                self._update_delivery_interest(False)
            self._reset_heartbeat()
        elif self.dthresh > 0:
            self._dtmr = self.ajs.loop.call_later(self.dthresh / NS, self._delete_not_active)
        self._update_pause_timer()
        self._schedule_pending_check()
        self.save()
        self.signal()

    def _select_starting_seq(self) -> None:
        """Go's selectStartingSeqNo."""
        store = self.stream.store
        st = store.state()
        cfg = self.config
        opt_seq = cfg["opt_start_seq"]
        policy = cfg["deliver_policy"]
        sseq = 0
        if opt_seq == 0:
            if policy == "all":
                sseq = st.first_seq
            elif policy == "last":
                if not self.filters:
                    sseq = st.last_seq
                else:
                    for f in self.filters:
                        msg = store.load_last_msg(f)
                        if msg is not None and msg.seq > sseq:
                            sseq = msg.seq
            elif policy == "last_per_subject":
                if self.stream.config["max_msgs_per_subject"] == 1:
                    sseq = st.first_seq
                else:
                    seqs = self._multi_last_seqs()
                    self.lss = seqs
                    self.lss_resume = st.last_seq
                    sseq = seqs[0] if seqs else st.last_seq
            elif cfg["opt_start_time"]:
                try:
                    ts = parse_go_time(cfg["opt_start_time"])[0]
                except ValueError:
                    ts = 0
                sseq = store.seq_for_time(ts)
            else:
                sseq = st.last_seq + 1
        else:
            sseq = opt_seq
        if st.first_seq == 0 and opt_seq == 0:
            sseq = 1
        elif sseq > st.last_seq and opt_seq == 0:
            sseq = st.last_seq + 1
        elif sseq < st.first_seq:
            sseq = st.first_seq
        self.sseq = sseq
        self.dseq = 1
        self.adflr = 0
        self.asflr = sseq - 1
        self.delivered_sseq = sseq - 1

    def _multi_last_seqs(self) -> list[int]:
        """The last sequence of every subject matching the filters, sorted (MultiLastSeqs)."""
        store = self.stream.store
        seqs: set[int] = set()
        for f in self.filters or [">"]:
            for subject in store.subjects_state(f):
                msg = store.load_last_msg(subject)
                if msg is not None:
                    seqs.add(msg.seq)
        return sorted(seqs)

    def wants(self, subject: str) -> bool:
        return not self.filters or any(match_literal(subject, f) for f in self.filters)

    def needs_ack(self, seq: int, subject: str) -> bool:
        """Go's needAck: would this consumer still deliver or wait for an ack of `seq`?"""
        if not self.wants(subject):
            return False
        if self.config["ack_policy"] == "none":
            return seq >= self.sseq
        if seq in self.pending:
            return True
        return seq > self.asflr and seq >= self.sseq

    # -- persistence -----------------------------------------------------------------------------

    def snapshot(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "config": self.config,
            "created": self.created_ns,
            "next_sseq": self.sseq,
            "next_dseq": self.dseq,
            "delivered": [self.dseq - 1, self.delivered_sseq],
            "ack_floor": [self.adflr, self.asflr],
            "pending": {str(s): [p.dseq, p.ts] for s, p in self.pending.items()},
            "redelivered": {str(s): n for s, n in self.rdc.items()},
            "lss": self.lss,
            "lss_resume": self.lss_resume,
        }

    def _restore(self, data: dict[str, Any]) -> None:
        self.sseq = int(data.get("next_sseq", 1))
        delivered = data.get("delivered", [0, 0])
        self.dseq = int(data.get("next_dseq", delivered[0] + 1))
        self.delivered_sseq = int(delivered[1])
        self.adflr, self.asflr = (int(x) for x in data.get("ack_floor", [0, 0]))
        self.pending = {int(s): Pending(int(v[0]), int(v[1])) for s, v in data["pending"].items()}
        self.rdc = {int(s): int(n) for s, n in data.get("redelivered", {}).items()}
        lss = data.get("lss")
        self.lss = list(lss) if lss else None
        self.lss_resume = int(data.get("lss_resume", 0))
        # Everything pending at shutdown is due for redelivery.
        for seq in sorted(self.pending):
            self._add_to_rdq(seq)

    def save(self) -> None:
        """Persist the state soon: at most one snapshot per `_SAVE_DELAY`, as nats-server's
        consumer store flushes about ten times a second under load. An ack storm then costs a
        few writes, not one JSON encoding of the pending map per read; a crash loses at most
        that interval, and the consumer redelivers, which at-least-once delivery allows."""
        if self._state_store is None or self._save_handle is not None or self.closed:
            return
        self._save_handle = self.ajs.loop.call_later(_SAVE_DELAY, self._save_now)

    def _save_now(self) -> None:
        self._save_handle = None
        if self._state_store is not None and not self.closed:
            try:
                self._state_store.save(self.snapshot())
            except OSError:
                log.exception("saving consumer %s state", self.name)

    # -- interest (push) ------------------------------------------------------------------------

    def _has_delivery_interest(self) -> bool:
        """Interest as nats-server's sublist notification sees it: a plain subscriber on the
        deliver subject, or a member of the deliver group when there is one."""
        result = self.ajs.account.sublist.match(self.config["deliver_subject"])
        group = self.config["deliver_group"]
        if group:
            return any(g and g[0].queue == group for g in result.qsubs)
        return bool(result.psubs) or bool(result.qsubs)

    def interest_changed(self) -> None:
        """The account's subscriptions changed; called by the account's interest watcher."""
        if self.closed or not self.push:
            return
        interest = self._has_delivery_interest()
        if interest != self.active:
            self._update_delivery_interest(interest)

    def _update_delivery_interest(self, interest: bool) -> None:
        """Go's updateDeliveryInterest: track activity, run the delete timer meanwhile."""
        was = self.active
        self.active = interest
        if self._dtmr is not None and self.dthresh > 0 and not interest:
            return
        self._cancel(self._dtmr)
        self._dtmr = None
        if not interest and self.dthresh > 0:
            self._dtmr = self.ajs.loop.call_later(self.dthresh / NS, self._delete_not_active)
        if interest and not was:
            self.signal()

    def _delete_not_active(self) -> None:
        """Go's deleteNotActive: an ephemeral (or a durable with inactive_threshold) that nobody
        used for the threshold goes away."""
        self._dtmr = None
        if self.closed:
            return
        if self.push:
            if self.active:
                return
        else:
            elapsed = now_ns() - self.waiting_last
            if elapsed < self.dthresh:
                self._dtmr = self.ajs.loop.call_later(
                    (self.dthresh - elapsed) / NS, self._delete_not_active
                )
                return
            self._process_waiting(eos=True)
            if self.waiting:
                self._dtmr = self.ajs.loop.call_later(self.dthresh / NS, self._delete_not_active)
                return
            now = now_ns()
            delay = 0
            for seq, p in self.pending.items():
                due = p.ts + self._ack_wait_for(seq) + self.dthresh
                delay = max(delay, due - now)
            if delay > 0:
                self._dtmr = self.ajs.loop.call_later(delay / NS, self._delete_not_active)
                return
        log.debug("JetStream consumer %s > %s inactive, deleting", self.stream.name, self.name)
        self.ajs.delete_consumer(self.stream, self.name)

    # -- pull requests ---------------------------------------------------------------------------

    def _on_next_request(
        self, sub: InternalSubscription, publisher: Client | None, ev: Pub
    ) -> None:
        hs = ev.header_size
        body = ev.payload[hs:] if hs > 0 else ev.payload
        self.process_next_request(ev.reply.decode("utf-8", "surrogateescape"), body)

    def process_next_request(self, reply: str, body: bytes) -> None:
        """Go's processNextMsgRequest."""
        if not reply or self.closed:
            return

        def send_err(code: int, text: str) -> None:
            self._send_status(reply, _status(code, text))

        if self.push:
            send_err(409, "Consumer is push based")
            return
        try:
            batch, max_bytes, no_wait, expires, hb = self._parse_next_request(body)
        except ValueError as e:
            send_err(400, f"Bad Request - {e}")
            return
        cfg = self.config
        now = now_ns()
        if cfg["max_batch"] > 0 and batch > cfg["max_batch"]:
            send_err(409, f"Exceeded MaxRequestBatch of {cfg['max_batch']}")
            return
        if expires and cfg["max_expires"] > 0 and expires > cfg["max_expires"]:
            send_err(409, f"Exceeded MaxRequestExpires of {go_duration(cfg['max_expires'])}")
            return
        if max_bytes > 0 and cfg["max_bytes"] > 0 and max_bytes > cfg["max_bytes"]:
            send_err(409, f"Exceeded MaxRequestMaxBytes of {cfg['max_bytes']}")
            return
        if len(self.waiting) >= cfg["max_waiting"]:
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
        if len(self.waiting) >= cfg["max_waiting"]:
            if not hb:
                send_err(409, "Exceeded MaxWaiting")
            return
        self.waiting.append(
            PullRequest(
                reply=reply,
                n=batch,
                b=max_bytes,
                no_wait=no_wait,
                expires_ns=now + expires if expires > 0 else 0,
                hb_ns=hb,
                hbt_ns=now + hb if hb > 0 else 0,
            )
        )
        self.waiting_last = now
        self.pump()
        self._schedule_waiting()

    @staticmethod
    def _parse_next_request(body: bytes) -> tuple[int, int, bool, int, int]:
        """Go's nextReqFromMsg: (batch, max_bytes, no_wait, expires ns, heartbeat ns)."""
        req = body.strip()
        if not req:
            return 1, 0, False, 0, 0
        if req[:1] == b"{":
            try:
                data = json.loads(req)
            except ValueError as e:
                raise ValueError(f"invalid character {e}") from None
            if not isinstance(data, dict):
                raise ValueError("json: cannot unmarshal into Go value")

            def num(key: str) -> int:
                v = data.get(key) or 0
                if isinstance(v, bool) or not isinstance(v, int):
                    raise ValueError(f"json: cannot unmarshal into Go struct field .{key}")
                return v

            batch, max_bytes, expires, hb = (
                num("batch"),
                num("max_bytes"),
                num("expires"),
                num("idle_heartbeat"),
            )
            no_wait = bool(data.get("no_wait"))
            if hb > 0 and hb * 2 > expires:
                raise ValueError("heartbeat value too large")
            return batch, max_bytes, no_wait, expires, hb
        try:
            return int(req), 0, False, 0, 0
        except ValueError:
            return 1, 0, False, 0, 0

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
                        wr.reply, _status(408, "Request Timeout", _pending_extra(wr.n, wr.b))
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
        """Go's nextWaiting (no priority groups): the request to get a message of `size`."""
        while self.waiting:
            wr = self.waiting[0]
            if wr.expires_ns and now >= wr.expires_ns:
                self.waiting.popleft()
                self._send_status(
                    wr.reply, _status(408, "Request Timeout", _pending_extra(wr.n, wr.b))
                )
                continue
            if wr.b > 0:
                if size <= wr.b:
                    wr.b -= size
                    if wr.b == 0:
                        wr.n = 1
                else:
                    self.waiting.popleft()
                    self._send_status(
                        wr.reply,
                        _status(409, "Message Size Exceeds MaxBytes", _pending_extra(wr.n, wr.b)),
                    )
                    continue
            sublist = self.ajs.account.sublist
            if wr.interest_gen != sublist.genid:
                # Looked up again only when subscriptions changed, not for every message.
                result = sublist.match_bytes(wr.reply.encode())
                if result.psubs:
                    wr.target = result.psubs[0]
                elif result.qsubs:
                    wr.target = result.qsubs[0][0]
                else:
                    self.waiting.popleft()
                    continue
                wr.interest_gen = sublist.genid
            # Go's waitQueue.pop: a request that wants more goes to the back of the queue.
            wr.d += 1
            wr.n -= 1
            self.waiting.popleft()
            if wr.n > 0:
                self.waiting.append(wr)
            return wr
        return None

    # -- the delivery loop -----------------------------------------------------------------------

    def signal(self) -> None:
        """Something changed that may let messages out (Go's signalNewMessages)."""
        if self._pump_handle is None and not self.closed:
            self._pump_handle = self.ajs.loop.call_soon(self._pump_soon)

    def _pump_soon(self) -> None:
        self._pump_handle = None
        self.pump()

    def on_new_message(self, seq: int, subject: str) -> None:
        if (
            self._npc is not None
            and not self._cheap_pending
            and seq >= self._pending_start()
            and self.wants(subject)
        ):
            self._npc += 1
        if self.push or self.waiting:
            self.pump()

    def paused(self) -> bool:
        until = self.config["pause_until"]
        if not until:
            return False
        try:
            return now_ns() < parse_go_time(until)[0]
        except ValueError:
            return False

    def pump(self) -> None:
        """Go's loopAndGatherMsgs, one round: deliver while the consumer may."""
        if self._pumping or self.closed:
            return
        self._pumping = True
        try:
            self._pump()
        finally:
            self._pumping = False
            # Read-ahead lives for one round only: between rounds anything may change.
            self._ahead.clear()

    def _pump(self) -> None:
        budget = _PUMP_BUDGET
        push = self.push
        ack_prefix = self._ack_prefix
        headers_only = self.config["headers_only"]
        hit_max_ack_pending = False
        yielded = False
        while True:
            if self.paused():
                break
            if push:
                if not self.active or (self.maxpb > 0 and self.pbytes > self.maxpb):
                    break
            elif not self.waiting:
                break
            if budget <= 0:
                self.signal()  # more to do: continue after other work had its turn
                yielded = True
                break
            found = self._get_next_msg()
            if found is None:
                hit_max_ack_pending = self._at_max_ack_pending()
                break
            msg, dc = found
            reply = b"%s%d.%d.%d.%d.%d" % (
                ack_prefix,
                dc,
                msg.seq,
                self.dseq,
                msg.ts,
                self.num_pending(),
            )
            header, data = msg.header, msg.data
            if headers_only:
                header = _headers_only(header, len(data))
                data = b""
            size = len(msg.subject) + len(reply) + len(header) + len(data)
            now = now_ns()
            wr: PullRequest | None = None
            if push:
                dsubj = self.config["deliver_subject"]
            else:
                wr = self._next_waiting(size, now)
                if wr is None:
                    self._did_not_take(msg.seq, dc, self._from_lss)
                    break
                dsubj = wr.reply
            delivered = self._deliver(dsubj, msg, reply, header, data, dc, now, wr)
            budget -= 1
            if wr is not None:
                if wr.n <= 0 and wr.b > 0:
                    self._send_status(
                        dsubj, _status(409, "Batch Completed", _pending_extra(wr.n, wr.b))
                    )
                elif wr.n > 0 and wr.hb_ns:
                    wr.hbt_ns = now + wr.hb_ns
            else:
                self._reset_heartbeat()
                if not delivered:
                    self._did_not_deliver(msg.seq)
        if budget < _PUMP_BUDGET:
            self.ajs.server.flush_soon()
        if not push and not yielded:
            self._process_waiting(eos=not hit_max_ack_pending)
            self._schedule_waiting()

    def _at_max_ack_pending(self) -> bool:
        maxp: int = self.config["max_ack_pending"]
        return self.config["ack_policy"] != "none" and 0 < maxp <= len(self.pending)

    def _did_not_take(self, seq: int, dc: int, from_lss: bool) -> None:
        """No request could take the message after all: put it back (Go's "redo")."""
        if dc == 1 and from_lss:
            self.lss = [seq, *(self.lss or [])]
            self.sseq = seq
        elif dc == 1 and seq == self.sseq - 1:
            self.sseq -= 1
            if self._npc is not None:
                self._npc += 1
        elif seq not in self.rdqi:
            self._dec_delivery_count(seq)
            self._add_to_rdq(seq, front=True)

    def _did_not_deliver(self, seq: int) -> None:
        """A push delivery reached nobody: the consumer is not active after all."""
        self._dec_delivery_count(seq)
        self._update_delivery_interest(self._has_delivery_interest())

    def _get_next_msg(self) -> tuple[StoredMsg, int] | None:
        """Go's getNextMsg: redeliveries first, then the skip list, then the stream."""
        store = self.stream.store
        max_deliver = self.config["max_deliver"]
        self._from_lss = False
        while self.rdq:
            seq = self.rdq.popleft()
            self.rdqi.discard(seq)
            dc = self._inc_delivery_count(seq)
            if max_deliver > 0 and dc > max_deliver:
                if dc == max_deliver + 1:
                    self._notify_delivery_exceeded(seq, dc - 1)
                p = self.pending.pop(seq, None)
                if p is not None:
                    self._move_ack_floor(p.dseq, seq)
                continue
            msg = store.load_msg(seq)
            if msg is None:
                self._dec_delivery_count(seq)
                p = self.pending.get(seq)
                if p is not None:
                    self._process_term(seq, p.dseq, dc - 1, "Unacknowledged Message Removed")
                continue
            return msg, dc
        if self._at_max_ack_pending():
            return None
        if self.lss is not None:
            while self.lss:
                seq = self.lss.pop(0)
                if not self.lss:
                    self.sseq = self.lss_resume
                    self.lss = None
                else:
                    self.sseq = seq
                self.sseq += 1
                msg = store.load_msg(seq)
                if msg is not None:
                    self._from_lss = True
                    return msg, 1
            self.lss = None
            self.sseq = max(self.sseq, self.lss_resume + 1)
        msg = self._next_from_stream()
        if msg is None:
            last = store.state().last_seq
            if last >= self.sseq:
                self.sseq = last + 1
            return None
        self.sseq = msg.seq + 1
        if self._npc:
            self._npc -= 1
        return msg, 1

    def _next_from_stream(self) -> StoredMsg | None:
        """The next message at or after `sseq` for this consumer. Within one pump round the
        store is read a run at a time (as many as the waiting requests want, at most
        `_READ_AHEAD`); a message removed since the run was read is skipped, and every
        message that arrives later has a higher sequence than the run."""
        ahead = self._ahead
        store = self.stream.store
        while ahead:
            msg = ahead.popleft()
            if msg.seq >= self.sseq and store.msg_ts(msg.seq) is not None:
                return msg
        filters = self.filters
        if len(filters) > 1:
            return self._load_next(self.sseq)
        want = _READ_AHEAD if self.push else min(sum(wr.n for wr in self.waiting), _READ_AHEAD)
        flt = filters[0] if filters else ""
        if want <= 1:
            return store.load_next_msg(flt, self.sseq)
        ahead.extend(store.load_next_msgs(flt, self.sseq, want))
        return ahead.popleft() if ahead else None

    def _load_next(self, start: int) -> StoredMsg | None:
        store = self.stream.store
        if not self.filters:
            return store.load_next_msg("", start)
        if len(self.filters) == 1:
            return store.load_next_msg(self.filters[0], start)
        best: StoredMsg | None = None
        for f in self.filters:
            msg = store.load_next_msg(f, start)
            if msg is not None and (best is None or msg.seq < best.seq):
                best = msg
        return best

    def _deliver(
        self,
        dsubj: str,
        msg: StoredMsg,
        reply: bytes,
        header: bytes,
        data: bytes,
        dc: int,
        now: int,
        wr: PullRequest | None,
    ) -> bool:
        """Go's deliverMsg."""
        dseq = self.dseq
        self.dseq += 1
        self.ldt = now
        if dc == 1:
            self.delivered_sseq = msg.seq
        ack_none = self.ack_none
        if ack_none:
            self.adflr, self.asflr = dseq, msg.seq
        else:
            self._track_pending(msg.seq, dseq, now)
        if wr is None:
            delivered = self.ajs.deliver_push(dsubj, msg.subject, reply, header, data)
            size = len(dsubj) + len(reply) + len(header) + len(data)
            if self.maxpb > 0:
                self.pbytes += size
                if self._need_flow_control(size):
                    self._send_flow_control()
        else:
            target = wr.target
            delivered = (
                target is not None
                and self.ajs.deliver_to(target, msg.subject.encode(), reply, header, data)
            ) or self.ajs.deliver(dsubj, msg.subject, reply, header, data)
            if self.dthresh > 0:
                self.waiting_last = now
        if ack_none and self.stream.config["retention"] != "limits":
            self.stream.on_acked(self, msg.seq)
        self.save()
        return bool(delivered)

    def _track_pending(self, sseq: int, dseq: int, now: int) -> None:
        p = self.pending.get(sseq)
        if p is not None:
            p.ts = now  # keep the first delivery sequence
        else:
            self.pending[sseq] = Pending(dseq, now)
        deadline = now + self._ack_wait_for(sseq)
        if self._ptmr is None or self._ptmr_end > deadline:
            self._reset_ptmr(deadline)

    def _ack_wait_for(self, sseq: int) -> int:
        backoff = self.config["backoff"]
        if backoff:
            i = min(max(self.rdc.get(sseq, 0), 0), len(backoff) - 1)
            return int(backoff[i]) + _ACK_WAIT_DELAY
        return int(self.config["ack_wait"]) + _ACK_WAIT_DELAY

    # -- redelivery bookkeeping ------------------------------------------------------------------

    def _add_to_rdq(self, seq: int, front: bool = False) -> None:
        if front:
            self.rdq.appendleft(seq)
        else:
            self.rdq.append(seq)
        self.rdqi.add(seq)

    def _remove_from_rdq(self, seq: int) -> None:
        if seq in self.rdqi:
            self.rdqi.discard(seq)
            self.rdq.remove(seq)

    def _inc_delivery_count(self, sseq: int) -> int:
        self.rdc[sseq] = self.rdc.get(sseq, 0) + 1
        return self.rdc[sseq] + 1

    def _dec_delivery_count(self, sseq: int) -> None:
        n = self.rdc.get(sseq, 0) - 1
        if n > 0:
            self.rdc[sseq] = n
        else:
            self.rdc.pop(sseq, None)

    def _delivery_count(self, sseq: int) -> int:
        return max(self.rdc.get(sseq, 0), 1)

    def _has_max_deliveries(self, seq: int) -> bool:
        max_deliver = self.config["max_deliver"]
        if max_deliver <= 0:
            return False
        dc = self._delivery_count(seq)
        if dc < max_deliver:
            return False
        if dc == max_deliver:
            self._notify_delivery_exceeded(seq, dc)
        p = self.pending.pop(seq, None)
        if p is not None:
            self._move_ack_floor(p.dseq, seq)
            self.signal()
        self.rdc[seq] = dc
        return True

    def _notify_delivery_exceeded(self, sseq: int, dc: int) -> None:
        self._advisory(
            f"$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES.{self.stream.name}.{self.name}",
            "max_deliver",
            {"stream_seq": sseq, "deliveries": dc},
        )

    def _advisory(self, subject: str, kind: str, fields: dict[str, Any]) -> None:
        if not self.ajs.has_interest(subject):
            return
        body: dict[str, Any] = {
            "type": _ADVISORY + kind,
            "id": "".join(random.choice(_B62) for _ in range(22)),
            "timestamp": rfc3339_ns(now_ns()),
            "stream": self.stream.name,
            "consumer": self.name,
            **fields,
        }
        if self.ajs.domain:
            body["domain"] = self.ajs.domain
        self.ajs.reply(subject, go_json(body))

    # -- the pending timer (ack wait, backoff) ---------------------------------------------------

    def _reset_ptmr(self, deadline: int) -> None:
        self._cancel(self._ptmr)
        self._ptmr_end = deadline
        delay = max((deadline - now_ns()) / NS, 0.0)
        self._ptmr = self.ajs.loop.call_later(delay, self._check_pending)

    def _schedule_pending_check(self) -> None:
        if self.pending and self.config["ack_wait"] > 0:
            now = now_ns()
            self._reset_ptmr(min(p.ts + self._ack_wait_for(s) for s, p in self.pending.items()))
            if self._ptmr_end < now:
                self._reset_ptmr(now)

    def _check_pending(self) -> None:
        """Go's checkPending: queue what passed its ack wait (or backoff) for redelivery."""
        self._ptmr = None
        if self.closed or self.config["ack_wait"] == 0:
            return
        st = self.stream.store.state()
        now = now_ns()
        backoff = self.config["backoff"]
        nxt = self.config["ack_wait"] + _ACK_WAIT_DELAY
        if backoff:
            nxt = int(backoff[-1])
        expired: list[int] = []
        changed = False
        for seq, p in list(self.pending.items()):
            if seq < st.first_seq or seq <= self.asflr:
                del self.pending[seq]
                self.rdc.pop(seq, None)
                self._remove_from_rdq(seq)
                changed = True
                self.asflr = max(self.asflr, seq)
                self.adflr = max(self.adflr, p.dseq)
                continue
            elapsed = now - p.ts
            deadline = self.config["ack_wait"]
            if backoff:
                dc = max(self.rdc.get(seq, 0), 0)
                nbi = dc + 1
                if dc + 1 >= len(backoff):
                    dc = len(backoff) - 1
                    nbi = dc
                deadline = int(backoff[dc])
                nxt = min(nxt, int(backoff[nbi]))
            if elapsed >= deadline:
                if seq not in self.rdqi and not self._has_max_deliveries(seq):
                    expired.append(seq)
            elif deadline - elapsed < nxt:
                nxt = deadline - elapsed
        if expired:
            expired.sort()
            for seq in expired:
                self._add_to_rdq(seq)
            off = now - self.pending[expired[0]].ts
            for seq in expired:
                p2 = self.pending.get(seq)
                if p2 is not None:
                    p2.ts += off
            self.signal()
        if self.pending:
            self._reset_ptmr(now + max(nxt, 0))
        else:
            self.rdq.clear()
            self.rdqi.clear()
            self.adflr, self.asflr = self.dseq - 1, self.sseq - 1
        if changed:
            self.save()

    # -- pull request timer ----------------------------------------------------------------------

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

    # -- push: heartbeats and flow control -------------------------------------------------------

    def _reset_heartbeat(self) -> None:
        hb = self.config["idle_heartbeat"]
        if not self.push or hb <= 0 or self.closed:
            return
        self._cancel(self._hbtmr)
        self._hbtmr = self.ajs.loop.call_later(hb / NS, self._on_heartbeat)

    def _on_heartbeat(self) -> None:
        self._hbtmr = None
        if self.closed:
            return
        if self.active:
            self._send_heartbeat(self.config["deliver_subject"])
        self._reset_heartbeat()

    def _send_heartbeat(self, subject: str) -> None:
        extra = f"Nats-Last-Consumer: {self.dseq - 1}\r\nNats-Last-Stream: {self.sseq - 1}\r\n"
        if self.fcid:
            extra += f"Nats-Consumer-Stalled: {self.fcid}\r\n"
        header = _status(100, "Idle Heartbeat", extra)
        if self.push:
            self.ajs.deliver_push(subject, subject, b"", header, b"")
        else:
            self.ajs.deliver(subject, subject, b"", header, b"")

    def _need_flow_control(self, size: int) -> bool:
        if self.maxpb == 0:
            return False
        if not self.fcid and self.pbytes > self.maxpb // 2:
            return True
        if self.fcid and (self.pbytes - self.fcsz) >= self.maxpb:
            self.fcsz += size
        return False

    def _send_flow_control(self) -> None:
        if not self.push:
            return
        token = "".join(random.choice(_B62) for _ in range(4))
        self.fcid = f"$JS.FC.{self.stream.name}.{self.name}.{token}"
        self.fcsz = self.pbytes
        subject = self.config["deliver_subject"]
        self.ajs.deliver_push(subject, subject, self.fcid.encode(), _FC_REQUEST, b"")

    def _on_flow_control(
        self, sub: InternalSubscription, publisher: Client | None, ev: Pub
    ) -> None:
        """Go's processFlowControl: the client caught up; open (and widen) the window."""
        subject = ev.subject.decode("utf-8", "surrogateescape")
        if subject != self.fcid or self.closed:
            return
        if self.maxpb < self.pblimit:
            self.maxpb = min(self.maxpb * 2, self.pblimit)
        self.pbytes = max(self.pbytes - self.fcsz, 0)
        self.fcid, self.fcsz = "", 0
        self.signal()

    # -- acknowledgements ------------------------------------------------------------------------

    def _on_ack(self, sub: InternalSubscription, publisher: Client | None, ev: Pub) -> None:
        """Go's processAck."""
        if self.closed:
            return
        tokens = ev.subject.split(b".")
        sseq = dseq = dc = 0
        if len(tokens) >= 9:
            try:
                dc, sseq, dseq = int(tokens[4]), int(tokens[5]), int(tokens[6])
            except ValueError:
                sseq = 0
        hs = ev.header_size
        body = ev.payload[hs:] if hs > 0 else ev.payload
        reply = ev.reply.decode("utf-8", "surrogateescape") if ev.reply else ""
        skip_reply = sseq == 0
        if sseq:
            if not body or body in (b"+ACK", b"+OK"):
                skip_reply = not self.ack(sseq, dseq)
            elif body.startswith(b"+NXT"):
                self.ack(sseq, dseq)
                self.process_next_request(reply, body[4:])
                skip_reply = True
            elif body.startswith(b"-NAK"):
                self._process_nak(sseq, dseq, dc, body)
            elif body == b"+WPI":
                p = self.pending.get(sseq)
                if p is not None:
                    p.ts = now_ns()
                    self.save()
            elif body.startswith(b"+TERM"):
                reason = body[5:].strip().decode("utf-8", "replace")
                skip_reply = not self._process_term(sseq, dseq, dc, reason)
        if reply and not skip_reply:
            self.ajs.reply(reply, b"")

    def ack(self, sseq: int, dseq: int = 0) -> bool:
        """Go's processAckMsg. Returns whether an acknowledgement with a reply subject is
        answered (nats-server stays silent for an ack beyond what was delivered, and for an
        ack-none consumer on a limits stream)."""
        if self.closed:
            return False
        config = self.config
        if sseq >= self.sseq and not config["flow_control"]:
            return False
        policy = config["ack_policy"]
        acked: list[int] = []
        at_limit = self._at_max_ack_pending()
        if policy == "explicit":
            p = self.pending.pop(sseq, None)
            if p is not None:
                self._move_ack_floor(p.dseq, sseq)
                acked.append(sseq)
            if self.rdc:
                self.rdc.pop(sseq, None)
            if self.rdqi:
                self._remove_from_rdq(sseq)
        elif policy in ("all", "flow_control"):
            if dseq <= self.adflr or sseq <= self.asflr:
                return True
            self.adflr, self.asflr = dseq, sseq
            for seq in [s for s in self.pending if s <= sseq]:
                del self.pending[seq]
                acked.append(seq)
                self.rdc.pop(seq, None)
                self._remove_from_rdq(seq)
            if not self.pending:
                self.adflr, self.asflr = self.dseq - 1, self.sseq - 1
        else:
            return bool(self.stream.config["retention"] != "limits")
        self.lat = now_ns()
        if acked and self.stream.config["retention"] != "limits":
            for seq in sorted(acked):
                self.stream.on_acked(self, seq)
        self.save()
        if at_limit or self.waiting:
            self.signal()
        if not self.push and self.dthresh > 0 and self._dtmr is not None:
            # Acks show activity: restart the countdown from here.
            self._cancel(self._dtmr)
            self._dtmr = self.ajs.loop.call_later(self.dthresh / NS, self._delete_not_active)
        return True

    def _move_ack_floor(self, dseq: int, sseq: int) -> None:
        if not self.pending:
            self.adflr = self.dseq - 1
            self.asflr = self.sseq - 1
        elif dseq == self.adflr + 1:
            self.adflr, self.asflr = dseq, sseq
            for ss in range(sseq + 1, self.sseq):
                p = self.pending.get(ss)
                if p is not None:
                    if p.dseq > 0:
                        self.adflr, self.asflr = p.dseq - 1, ss - 1
                    break

    def _process_nak(self, sseq: int, dseq: int, dc: int, body: bytes) -> None:
        if dseq <= self.adflr or dseq > self.dseq or sseq not in self.pending:
            return
        self._advisory(
            f"$JS.EVENT.ADVISORY.CONSUMER.MSG_NAKED.{self.stream.name}.{self.name}",
            "nak",
            {"consumer_seq": dseq, "stream_seq": sseq, "deliveries": dc},
        )
        arg = body[4:].strip()
        if arg:
            delay = _parse_nak_delay(arg)
            if delay is not None:
                self._remove_from_rdq(sseq)
                p = self.pending.get(sseq)
                if p is not None:
                    p.ts = now_ns() - self.config["ack_wait"] + delay
                    self.save()
                    if self._ptmr is not None:
                        self._reset_ptmr(now_ns() + 10 * MS)
                return
        if sseq not in self.rdqi:
            self._add_to_rdq(sseq)
        self.signal()

    def _process_term(self, sseq: int, dseq: int, dc: int, reason: str) -> bool:
        """+TERM: acknowledged as far as redelivery goes, plus the advisory. Returns whether
        a reply is due (as for an ack)."""
        p = self.pending.get(sseq)
        answered = self.ack(sseq, p.dseq if p is not None else dseq)
        self._advisory(
            f"$JS.EVENT.ADVISORY.CONSUMER.MSG_TERMINATED.{self.stream.name}.{self.name}",
            "terminated",
            {"consumer_seq": dseq, "stream_seq": sseq, "deliveries": dc, "reason": reason},
        )
        return answered

    # -- stream changes --------------------------------------------------------------------------

    def on_purge(self, first_seq: int) -> None:
        """The stream was purged up to (not including) `first_seq`; Go's consumer.purge."""
        store = self.stream.store
        self._npc = None
        self.sseq = max(self.sseq, first_seq)
        for seq, p in list(self.pending.items()):
            if seq < first_seq or store.msg_ts(seq) is None:
                self.adflr = max(self.adflr, p.dseq)
                del self.pending[seq]
                self.rdc.pop(seq, None)
        self.asflr = max(self.asflr, first_seq - 1)
        if not self.pending:
            self.adflr, self.asflr = self.dseq - 1, self.sseq - 1
        for seq in list(self.rdq):
            if seq not in self.pending:
                self._remove_from_rdq(seq)
        if self.lss:
            self.lss = [s for s in self.lss if store.msg_ts(s) is not None]
        self.save()

    def on_msg_removed(self, seq: int) -> None:
        """A message was deleted: it no longer waits for an ack from this consumer."""
        self._npc = None
        p = self.pending.pop(seq, None)
        if p is not None:
            self.rdc.pop(seq, None)
            self._remove_from_rdq(seq)
            self._move_ack_floor(p.dseq, seq)
            self.save()
            self.signal()

    # -- pause -----------------------------------------------------------------------------------

    def set_pause(self, until: str) -> None:
        self.config["pause_until"] = until
        self._update_pause_timer()
        self.save()
        self.signal()

    def _update_pause_timer(self) -> None:
        self._cancel(self._pause_tmr)
        self._pause_tmr = None
        until = self.config["pause_until"]
        if not until:
            return
        try:
            delay = parse_go_time(until)[0] - now_ns()
        except ValueError:
            return
        if delay > 0:
            self._pause_tmr = self.ajs.loop.call_later(delay / NS, self.signal)

    # -- updates ---------------------------------------------------------------------------------

    def update_config(self, cfg: dict[str, Any]) -> None:
        """Go's updateConfig, after check_consumer_update allowed it."""
        old = self.config
        self.config = cfg
        if cfg["deliver_subject"] != old["deliver_subject"]:
            self.active = self._has_delivery_interest()
            self._update_delivery_interest(self.active)
        if cfg["inactive_threshold"] != old["inactive_threshold"]:
            self._update_inactive_threshold()
            self._cancel(self._dtmr)
            self._dtmr = None
            if self.dthresh > 0 and not (self.push and self.active):
                self._dtmr = self.ajs.loop.call_later(self.dthresh / NS, self._delete_not_active)
        if cfg["pause_until"] != old["pause_until"]:
            self._update_pause_timer()
        if consumer_filters(cfg) != self.filters:
            self.filters = consumer_filters(cfg)
            self._cheap_pending = _cheap_filters(self.filters)
            self._npc = None
        if cfg["ack_wait"] != old["ack_wait"] and self._ptmr is not None:
            self._reset_ptmr(now_ns() + 100 * MS)
        self.save()
        self.signal()

    # -- reporting -------------------------------------------------------------------------------

    def num_pending(self) -> int:
        """Messages not yet delivered (Go's o.npc). With a wildcard or several filters it is
        counted once and then kept up to date (delivery -1, new matching message +1; anything
        else, such as a purge or a limit dropping messages, forgets the count): each ack
        reply carries it, and a count over every subject per message would be quadratic."""
        extra = len(self.lss) if self.lss is not None else 0
        if self._cheap_pending:
            # Counted in O(log n), but still once per message delivered: the count is kept
            # while the store has not changed (delivery -1), and counted again once it has.
            mark = self.stream.store.change_mark()
            if self._npc is None or mark != self._npc_mark:
                self._npc = self._count_pending()
                self._npc_mark = mark
            return extra + self._npc
        if self._npc is None:
            self._npc = self._count_pending()
        return extra + self._npc

    def _pending_start(self) -> int:
        return self.lss_resume + 1 if self.lss is not None else self.sseq

    def _count_pending(self) -> int:
        store = self.stream.store
        start = self._pending_start()
        if not self.filters:
            return store.num_pending(start, "")
        if len(self.filters) == 1:
            return store.num_pending(start, self.filters[0])
        subjects: set[str] = set()
        for f in self.filters:
            subjects.update(store.subjects_state(f))
        return sum(store.num_pending(start, subject) for subject in subjects)

    def forget_pending_count(self) -> None:
        self._npc = None

    def info(self, full_metadata: bool = True) -> dict[str, Any]:
        self._npc = None  # count afresh, as Go's checkNumPending does for info
        delivered: dict[str, Any] = {
            "consumer_seq": max(self.dseq, 1) - 1,
            "stream_seq": self.delivered_sseq,
        }
        if self.ldt:
            delivered["last_active"] = rfc3339_ns(self.ldt)
        ack_floor: dict[str, Any] = {"consumer_seq": self.adflr, "stream_seq": self.asflr}
        if self.lat:
            ack_floor["last_active"] = rfc3339_ns(self.lat)
        if not self.push:
            self._process_waiting(eos=False)
        out: dict[str, Any] = {
            "stream_name": self.stream.name,
            "name": self.name,
            "created": rfc3339_ns(self.created_ns),
            "config": consumer_config_reply(self.config, full_metadata),
            "delivered": delivered,
            "ack_floor": ack_floor,
            "num_ack_pending": len(self.pending),
            "num_redelivered": 0 if self.config["max_deliver"] == 1 else len(self.rdc),
            "num_waiting": len(self.waiting),
            "num_pending": self.num_pending(),
        }
        if self.push and self.active:
            out["push_bound"] = True
        until = self.config["pause_until"]
        if until:
            remaining = parse_go_time(until)[0] - now_ns()
            if remaining > 0:
                out["paused"] = True
                out["pause_remaining"] = remaining
        return out

    def priority_groups_info(self) -> list[dict[str, Any]]:
        groups = self.config["priority_groups"]
        if not groups:
            return []
        return [{"group": groups[0], "pinned_ts": "0001-01-01T00:00:00Z"}]

    # -- sending ---------------------------------------------------------------------------------

    def _send_status(self, reply: str, header: bytes) -> None:
        self.ajs.deliver(reply, reply, b"", header, b"")

    # -- lifecycle -------------------------------------------------------------------------------

    @staticmethod
    def _cancel(handle: asyncio.TimerHandle | asyncio.Handle | None) -> None:
        if handle is not None:
            handle.cancel()

    def stop(self, save: bool = True) -> None:
        if self._save_handle is not None:
            self._save_handle.cancel()
            self._save_handle = None
        if save and self._state_store is not None and not self.closed:
            # Write the final state now, in this thread: a debounced write still waiting (or
            # not yet started) must not be what a restart finds.
            try:
                self._state_store.save(self.snapshot())
                self._state_store.flush()
            except (OSError, StoreError):
                log.exception("saving consumer %s state", self.name)
        self.closed = True
        for handle in (
            self._ptmr,
            self._wtmr,
            self._hbtmr,
            self._dtmr,
            self._pause_tmr,
            self._pump_handle,
        ):
            self._cancel(handle)
        self._ptmr = self._wtmr = self._hbtmr = self._dtmr = self._pause_tmr = None
        self._pump_handle = None
        if self.push:
            self.ajs.unwatch_interest(self)
        if self._subs:
            for sub in self._subs:
                sub.closed = True
            self.ajs.account.sublist.remove_batch(self._subs)
            self._subs = []

    def delete(self) -> None:
        self.stop(save=False)
        for wr in self.waiting:
            self._send_status(wr.reply, _status(409, "Consumer Deleted"))
        self.waiting.clear()
        if self._state_store is not None:
            self._state_store.delete()


def _cheap_filters(filters: list[str]) -> bool:
    """No filter or one literal filter: the store counts pending messages in O(log n)."""
    return not filters or (len(filters) == 1 and "*" not in filters[0] and ">" not in filters[0])


def _headers_only(header: bytes, size: int) -> bytes:
    """Go's convertToHeadersOnly: the headers plus `Nats-Msg-Size`, no payload."""
    line = f"Nats-Msg-Size: {size}\r\n\r\n".encode()
    if not header:
        return b"NATS/1.0\r\n" + line
    return header[:-2] + line


def _parse_nak_delay(arg: bytes) -> int | None:
    """The delay of `-NAK {"delay": ns}` or `-NAK 5s`; None means a plain NAK."""
    if arg[:1] == b"{":
        try:
            data = json.loads(arg)
        except ValueError:
            return None
        delay = data.get("delay") if isinstance(data, dict) else None
        return int(delay) if isinstance(delay, int) and not isinstance(delay, bool) else 0
    return parse_go_duration(arg.decode("utf-8", "replace"))


def check_workqueue(stream: Stream, config: dict[str, Any]) -> None:
    """Work-queue streams: explicit acks, deliver all, and no two consumers for the same
    messages (Go's addConsumer checks)."""
    if stream.config["retention"] != "workqueue" or config["direct"] or config["sourcing"]:
        return
    if config["ack_policy"] not in ("explicit", "flow_control"):
        raise errors.consumer_wq_requires_explicit_ack()
    if config["deliver_policy"] != "all":
        raise errors.js_error("ConsumerWQConsumerNotDeliverAll")
    if stream.consumers:
        filters = consumer_filters(config)
        if not filters:
            raise errors.consumer_wq_multiple_unfiltered()
        partition_unique(stream, config["name"], filters)


def partition_unique(stream: Stream, name: str, filters: list[str]) -> None:
    for other in stream.consumers.values():
        if other.name == name:
            continue
        if not other.filters:
            raise errors.consumer_wq_not_unique()
        if any(subjects_collide(a, b) for a in filters for b in other.filters):
            raise errors.consumer_wq_not_unique()
