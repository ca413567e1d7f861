"""Delivery: the loop that lets a consumer's messages out, push and pull.

From nats-server's `server/consumer.go`: loopAndGatherMsgs, getNextMsg, deliverMsg, the idle
heartbeats, flow control (processFlowControl) and the count of messages not yet delivered
(`num_pending`, Go's npc). Go's consumer runs a goroutine that sleeps on channels; here
`pump()` runs whenever something may let a message out (a new message, a pull request, an
ack, a flow-control reply, interest appearing). The reply subject of every delivered message
is the ack subject
`$JS.ACK.<stream>.<consumer>.<delivered count>.<stream seq>.<consumer seq>.<ts>.<pending>`.

Push consumers publish to their deliver subject while it has interest, with flow control
(`$JS.FC.` requests answered by the client, a window that grows from 2 MiB to 32 MiB as Go's
does) and idle heartbeats carrying the last consumer and stream sequences (what ordered
consumers check for gaps). Pull consumers hand messages to the waiting requests
(`waiting.py`, with the priority group rules of `priority.py`).
"""

from __future__ import annotations

import random
from typing import TYPE_CHECKING

from pynatsd.jetstream.advisories import TERM_UNACKED_DELETED
from pynatsd.jetstream.consumer_state import B62, NS, pending_extra, status
from pynatsd.jetstream.pending import AckTracker, Pending
from pynatsd.jetstream.priority import PriorityGroups, pin_header
from pynatsd.jetstream.pullrun import PullRun
from pynatsd.jetstream.util import now_ns
from pynatsd.protocol.headers import header_value
from pynatsd.server.delivery import plain_stored_outbound, settle_stored

if TYPE_CHECKING:
    from pynatsd.jetstream.store.base import StoredMsg
    from pynatsd.jetstream.waiting import PullRequest
    from pynatsd.protocol.events import Pub
    from pynatsd.server.client import Client
    from pynatsd.server.subscription import InternalSubscription

_FC_REQUEST = b"NATS/1.0 100 FlowControl Request\r\n\r\n"
# How many messages one pump delivers before yielding to the event loop (a push consumer on a
# large stream must not starve every other client).
_PUMP_BUDGET = 1000
# Messages a pump round reads from the store at once (Delivery._next_from_stream).
_READ_AHEAD = 128
# At most this many messages in one run of Delivery._pull_run (one store read): the run's
# own cost (its checks, the consumer's state once) is shared by more messages than a
# read-ahead's; what the requests do not take waits in the read-ahead.
_RUN_READ = 512
# A run (Delivery._pull_run) is tried while at most this many pull requests wait.
_RUN_REQUESTS = 16


class Delivery(PriorityGroups, AckTracker):
    """The delivery loop and what it needs: the next message, the ack reply, push flow
    control and heartbeats, the count of what is left."""

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

    def on_new_messages(self, first_seq: int, subjects: list[str]) -> None:
        """`on_new_message` for messages stored together (sequences from `first_seq`), with
        one pump for all of them."""
        if self._npc is not None and not self._cheap_pending:
            start = self._pending_start()
            wants = self.wants
            seq = first_seq
            new = 0
            for subject in subjects:
                if seq >= start and wants(subject):
                    new += 1
                seq += 1
            self._npc += new
        if self.push or self.waiting:
            self.pump()

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
        headers_only = self.config.headers_only
        # Chosen once a round: a consumer without priority groups pays nothing for them.
        policy = self.config.priority_policy
        next_waiting = self._next_waiting_priority if policy else self._next_waiting
        pinned = policy == "pinned_client"
        hit_max_ack_pending = False
        yielded = False
        pacing = self.pacing  # None unless replay_policy original or rate_limit_bps
        # A pull consumer of the common kind delivers runs of messages (_pull_run).
        fast_pull = (
            not push
            and not policy
            and pacing is None
            and not headers_only
            and len(self.filters) <= 1
            and self.stream.config.retention == "limits"
        )
        while True:
            if self.paused() or (pacing is not None and pacing.timer is not None):
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
            if fast_pull and not self.rdq and self.lss is None and not self._ahead:
                sent = self._pull_run(budget)
                if sent:
                    budget -= sent
                    continue
            found = self._get_next_msg()
            if found is None:
                hit_max_ack_pending = self._at_max_ack_pending()
                if pacing is not None:
                    pacing.caught_up(self.sseq)
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
            if pacing is not None:
                delay = pacing.wait(msg.seq, msg.ts, size)
                if delay > 0:
                    self._did_not_take(msg.seq, dc, self._from_lss)
                    pacing.timer = self.ajs.loop.call_later(delay, self._paced)
                    break
            now = now_ns()
            wr: PullRequest | None = None
            if push:
                dsubj = self.config.deliver_subject
            else:
                wr = next_waiting(size, now)
                if wr is None:
                    self._did_not_take(msg.seq, dc, self._from_lss)
                    break
                dsubj = wr.reply
                if pinned:
                    header = pin_header(header, self.pin_id)
            delivered = self._deliver(dsubj, msg, reply, header, data, dc, now, wr)
            budget -= 1
            if wr is not None:
                if wr.n <= 0 and wr.b > 0:
                    self._send_status(
                        dsubj, status(409, "Batch Completed", pending_extra(wr.n, wr.b))
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

    def _pull_run(self, budget: int) -> int:
        """The round's loop for a run of first deliveries to simple pull requests: what
        `_get_next_msg`, `_next_waiting` and `_deliver` do for each, with what stays the same
        along the run worked out once (the store read, the ack deadline, the pending count).
        Stops at the first request that needs more care (a byte limit, heartbeats, an expiry
        due, its receiver to be looked up again); the rest of the run waits in the
        read-ahead for the general path. Returns how many were delivered."""
        waiting = self.waiting
        want = min(sum(wr.n for wr in waiting), budget, _RUN_READ)
        ack_none = self.ack_none
        pending = self.pending
        if not ack_none:
            maxp = self.config.max_ack_pending
            if maxp > 0:
                want = min(want, maxp - len(pending))
        if want <= 0:
            return 0
        now = now_ns()
        genid = self.ajs.account.sublist.genid
        if len(waiting) > _RUN_REQUESTS:
            return 0
        for wr in waiting:
            if wr.interest_gen != genid and not self._find_target(wr):
                return 0
            target = wr.target
            # A receiver without an outbound (an internal subscription) is called back at
            # once and may change the stream under the run: the general path checks for that.
            if target is None or target.client.outbound is None:
                return 0
            if wr.b > 0 or wr.hb_ns or (wr.expires_ns and now >= wr.expires_ns):
                return 0
        npc = self.num_pending()
        filters = self.filters
        msgs = self.stream.store.load_next_msgs(filters[0] if filters else "", self.sseq, want)
        if not msgs:
            return 0
        first_dseq = self.dseq
        run = PullRun(
            self._ack_prefix, first_dseq, npc, None if ack_none else pending, now, Pending
        )
        # Each request's receiver is checked once for the run: a plain one has its frames put
        # straight into its queue (pullrun.py, compiled) and counted after the loop
        # (deliver_stored, inlined); any other receiver goes through deliver_to.
        requests = list(waiting)
        outbounds = []
        for wr in requests:
            target = wr.target
            assert target is not None
            outbound = plain_stored_outbound(target)
            outbounds.append(outbound)
            frames = outbound.frames if outbound is not None else None
            run.add_request(wr.n, frames, target.sid, target.client.headers)
        # The consumer's sequences are set once after the loop: a receiver with an outbound
        # (all of them here) is not called back during it.
        deliver_to = self.ajs.deliver_to
        i = 0
        count = len(msgs)
        while True:
            i = run.frame_msgs(msgs, i)
            if i >= count or not run.queue:
                break
            # The request at the head needs the general delivery (see frame_msgs).
            msg = msgs[i]
            wr = requests[run.take()]
            reply = run.next_reply(msg.seq, msg.ts)
            target = wr.target
            assert target is not None
            subject, header, data = msg.subject, msg.header, msg.data
            if not deliver_to(target, subject.encode(), reply, header, data):
                self.ajs.deliver(wr.reply, subject, reply, header, data)
            i += 1
        if i < count:
            # Every request is served: the rest waits for the next (read-ahead).
            self._ahead.extend(msgs[i:])
        for k, wr in enumerate(requests):
            wr.n = run.left[k]
            wr.d += run.given[k]
            outbound = outbounds[k]
            if outbound is not None:
                target = wr.target
                assert target is not None
                settle_stored(target, outbound, run.sent[k], run.nbytes[k])
        waiting.clear()
        waiting.extend(requests[k] for k in run.order())
        dseq, seq, npc = run.dseq, run.seq, run.npc
        sent = dseq - first_dseq
        self.dseq = dseq
        self.sseq = seq + 1
        self.delivered_sseq = seq
        if ack_none:
            self.adflr, self.asflr = dseq - 1, seq
        if self._npc is not None:
            self._npc = npc
        self.ldt = now
        if self.dthresh > 0:
            self.waiting_last = now
        if not ack_none:
            deadline = now + self._ack_wait_for(self.sseq - 1)
            if self._ptmr is None or self._ptmr_end > deadline:
                self._reset_ptmr(deadline)
        self.save()
        return sent

    def _paced(self) -> None:
        if self.pacing is not None:
            self.pacing.timer = None
        self.signal()

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
        """Go's getNextMsg: redeliveries first, then the skip list, then the stream. Returns
        the message and its delivery count (Go's dc: 1 for a first delivery)."""
        store = self.stream.store
        max_deliver = self.config.max_deliver
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
                    self._process_term(seq, p.dseq, dc - 1, TERM_UNACKED_DELETED)
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
        if ack_none and self.stream.config.retention != "limits":
            self.stream.on_acked(self, msg.seq)
        self.save()
        return bool(delivered)

    def _reset_heartbeat(self) -> None:
        hb = self.config.idle_heartbeat
        if not self.push or hb <= 0 or self.closed:
            return
        self._cancel(self._hbtmr)
        self._hbtmr = self.ajs.loop.call_later(hb / NS, self._on_heartbeat)

    def _on_heartbeat(self) -> None:
        self._hbtmr = None
        if self.closed:
            return
        if self.active:
            self._send_heartbeat(self.config.deliver_subject)
            if self.config.ack_policy == "flow_control" and self.pending and not self.fcid:
                # Flow control on an idle stream too: it is how what was delivered gets acked.
                self._send_flow_control()
        self._reset_heartbeat()

    def _need_flow_control(self, size: int) -> bool:
        if self.maxpb == 0:
            return False
        if not self.fcid and self.pbytes > self.maxpb // 2:
            return True
        if (
            not self.fcid
            and self.config.ack_policy == "flow_control"
            and 0 < self.config.max_ack_pending <= len(self.pending)
        ):
            # Acknowledged by flow-control replies: ask for one when the window is full.
            return True
        if self.fcid and (self.pbytes - self.fcsz) >= self.maxpb:
            self.fcsz += size
        return False

    def _send_flow_control(self) -> None:
        if not self.push:
            return
        token = "".join(random.choice(B62) for _ in range(4))
        self.fcid = f"$JS.FC.{self.stream.name}.{self.name}.{token}"
        self.fcsz = self.pbytes
        subject = self.config.deliver_subject
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
        if self.config.ack_policy == "flow_control" and ev.header_size > 0:
            # The reply says up to where the sourcing stream stored: everything up to there
            # is acknowledged (ack policy flow_control acks as `all` does).
            header = ev.payload[: ev.header_size]
            stream_seq = _int_header(header, "Nats-Last-Stream")
            if stream_seq > 0:
                self.ack(stream_seq, max(_int_header(header, "Nats-Last-Consumer"), 0))
        self.signal()

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


def _int_header(header: bytes, key: str) -> int:
    value = header_value(header, key)
    try:
        return int(value) if value else 0
    except ValueError:
        return 0


def _headers_only(header: bytes, size: int) -> bytes:
    """Go's convertToHeadersOnly: the headers plus `Nats-Msg-Size`, no payload."""
    line = f"Nats-Msg-Size: {size}\r\n\r\n".encode()
    if not header:
        return b"NATS/1.0\r\n" + line
    return header[:-2] + line
