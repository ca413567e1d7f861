"""The delivery pump: the loop that lets a consumer's messages out, push and pull.

From nats-server's `server/consumer.go`: loopAndGatherMsgs, getNextMsg and deliverMsg. Go's
consumer runs a goroutine that sleeps on channels; here
`pump()` runs whenever something may let a message out (a new message, a pull request, an
ack, a flow-control reply, interest appearing). The reply subject of every delivered message
is the ack subject
`$JS.ACK.<stream>.<consumer>.<delivered count>.<stream seq>.<consumer seq>.<ts>.<pending>`.

Push consumers publish to their deliver subject while it has interest and the flow control
window allows (`flow.py`, with the idle heartbeats). Pull consumers hand messages to the
waiting requests (`waiting.py`, with the priority group rules of `priority.py`). The pump
works on its consumer's other parts, which it is handed, and needs of the consumer itself
what a `PumpOwner` names.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from pynatsd.jetstream.consumer.count import PendingCount
from pynatsd.jetstream.consumer.flow import PushFlow
from pynatsd.jetstream.consumer.priority import PriorityGroups, pin_header
from pynatsd.jetstream.consumer.pullrun import PullRun
from pynatsd.jetstream.consumer.reader import StreamReader
from pynatsd.jetstream.consumer.redelivery import Redelivery
from pynatsd.jetstream.consumer.state import ConsumerState, Pending
from pynatsd.jetstream.consumer.status import pending_extra, status
from pynatsd.jetstream.consumer.waiting import PullQueue
from pynatsd.jetstream.util import now_ns
from pynatsd.server.delivery import plain_stored_outbound, settle_stored

if TYPE_CHECKING:
    import asyncio

    from pynatsd.jetstream.consumer.pacing import Pacing
    from pynatsd.jetstream.consumer.ports import ConsumedStream, ConsumerHost
    from pynatsd.jetstream.consumer.waiting import PullRequest
    from pynatsd.jetstream.consumer_config import ConsumerConfig
    from pynatsd.jetstream.store.base import StoredMsg

# How many messages one pump delivers before yielding to the event loop (a push consumer on a
# large stream must not starve every other client).
_PUMP_BUDGET = 1000
# At most this many messages in one run of DeliveryPump._pull_run (one store read): the run's
# own cost (its checks, the consumer's state once) is shared by more messages than a
# read-ahead's; what the requests do not take waits in the read-ahead.
_RUN_READ = 512
# A run (DeliveryPump._pull_run) is tried while at most this many pull requests wait.
_RUN_REQUESTS = 16


class PumpOwner(Protocol):
    """What the pump uses of its consumer."""

    @property
    def closed(self) -> bool: ...

    @property
    def config(self) -> ConsumerConfig: ...

    @property
    def push(self) -> bool: ...

    @property
    def active(self) -> bool:
        """A push consumer's deliver subject has interest."""

    @property
    def filters(self) -> list[str]: ...

    @property
    def pacing(self) -> Pacing | None:
        """replay_policy original and rate_limit_bps; None for the usual consumer."""

    @property
    def dthresh(self) -> int:
        """The inactivity threshold (ns, 0: none): deliveries to requests are activity."""

    @property
    def stream(self) -> ConsumedStream: ...

    @property
    def ajs(self) -> ConsumerHost: ...

    @property
    def state(self) -> ConsumerState: ...

    def wants(self, subject: str) -> bool: ...

    def paused(self) -> bool: ...

    def save(self) -> None: ...

    def interest_lost(self) -> None:
        """A push delivery reached nobody: look at the deliver subject's interest again."""


class DeliveryPump:
    """The delivery loop and what it needs: the next message, the ack reply, the delivery."""

    def __init__(
        self,
        owner: PumpOwner,
        redelivery: Redelivery,
        reader: StreamReader,
        queue: PullQueue,
        priority: PriorityGroups,
        count: PendingCount,
        flow: PushFlow,
        ack_prefix: bytes,
    ) -> None:
        self._owner = owner
        self._state = owner.state
        self._stream = owner.stream
        self._ajs = owner.ajs
        self._redelivery = redelivery
        self._reader = reader
        self._queue = queue
        self._waiting = queue.requests
        self._priority = priority
        self._count = count
        self._flow = flow
        self._ack_prefix = ack_prefix  # `$JS.ACK.<stream>.<consumer>.`
        # Does not change on an update (Go refuses a new ack policy), and is read per message.
        self._ack_none = owner.config.ack_policy == "none"
        self._pumping = False
        self._pump_handle: asyncio.Handle | None = None

    def signal(self) -> None:
        """Something changed that may let messages out (Go's signalNewMessages)."""
        if self._pump_handle is None and not self._owner.closed:
            self._pump_handle = self._ajs.loop.call_soon(self._pump_soon)

    def _pump_soon(self) -> None:
        self._pump_handle = None
        self.pump()

    def on_new_message(self, seq: int, subject: str) -> None:
        """The stream stored `seq`: count it if it is this consumer's, and deliver."""
        count = self._count
        owner = self._owner
        if (
            count.npc is not None
            and not count.cheap
            and seq >= count.start()
            and owner.wants(subject)
        ):
            count.npc += 1
        if owner.push or self._waiting:
            self.pump()

    def on_new_messages(self, first_seq: int, subjects: list[str]) -> None:
        """`on_new_message` for messages stored together (sequences from `first_seq`), with
        one pump for all of them."""
        count = self._count
        owner = self._owner
        if count.npc is not None and not count.cheap:
            start = count.start()
            wants = owner.wants
            seq = first_seq
            new = 0
            for subject in subjects:
                if seq >= start and wants(subject):
                    new += 1
                seq += 1
            count.npc += new
        if owner.push or self._waiting:
            self.pump()

    def pump(self) -> None:
        """Go's loopAndGatherMsgs, one round: deliver while the consumer may."""
        if self._pumping or self._owner.closed:
            return
        self._pumping = True
        try:
            self._pump()
        finally:
            self._pumping = False
            # Read-ahead lives for one round only: between rounds anything may change.
            self._reader.ahead.clear()

    def _pump(self) -> None:
        budget = _PUMP_BUDGET
        owner = self._owner
        state = self._state
        redelivery = self._redelivery
        flow = self._flow
        waiting = self._waiting
        config = owner.config
        push = owner.push
        ack_prefix = self._ack_prefix
        headers_only = config.headers_only
        num_pending = self._count.num_pending
        # Chosen once a round: a consumer without priority groups pays nothing for them.
        policy = config.priority_policy
        next_waiting = self._priority.next_waiting if policy else self._queue.next_waiting
        pinned = policy == "pinned_client"
        reader = self._reader
        hit_max_ack_pending = False
        yielded = False
        pacing = owner.pacing  # None unless replay_policy original or rate_limit_bps
        # A pull consumer of the common kind delivers runs of messages (_pull_run).
        fast_pull = (
            not push
            and not policy
            and pacing is None
            and not headers_only
            and len(owner.filters) <= 1
            and self._stream.config.retention == "limits"
        )
        while True:
            if owner.paused() or (pacing is not None and pacing.timer is not None):
                break
            if push:
                if not owner.active or (flow.maxpb > 0 and flow.pbytes > flow.maxpb):
                    break
            elif not waiting:
                break
            if budget <= 0:
                self.signal()  # more to do: continue after other work had its turn
                yielded = True
                break
            if fast_pull and not redelivery.rdq and state.lss is None and not reader.ahead:
                sent = self._pull_run(budget)
                if sent:
                    budget -= sent
                    continue
            found = reader.next_msg()
            if found is None:
                hit_max_ack_pending = redelivery.at_max_ack_pending()
                if pacing is not None:
                    pacing.caught_up(state.sseq)
                break
            msg, dc = found
            reply = b"%s%d.%d.%d.%d.%d" % (
                ack_prefix,
                dc,
                msg.seq,
                state.dseq,
                msg.ts,
                num_pending(),
            )
            header, data = msg.header, msg.data
            if headers_only:
                header = _headers_only(header, len(data))
                data = b""
            size = len(msg.subject) + len(reply) + len(header) + len(data)
            if pacing is not None:
                delay = pacing.wait(msg.seq, msg.ts, size)
                if delay > 0:
                    reader.put_back(msg.seq, dc)
                    pacing.timer = self._ajs.loop.call_later(delay, self._paced)
                    break
            now = now_ns()
            wr: PullRequest | None = None
            if push:
                dsubj = config.deliver_subject
            else:
                wr = next_waiting(size, now)
                if wr is None:
                    reader.put_back(msg.seq, dc)
                    break
                dsubj = wr.reply
                if pinned:
                    header = pin_header(header, self._priority.pin_id)
            delivered = self._deliver(dsubj, msg, reply, header, data, dc, now, wr)
            budget -= 1
            if wr is not None:
                if wr.n <= 0 and wr.b > 0:
                    self._queue.send_status(
                        dsubj, status(409, "Batch Completed", pending_extra(wr.n, wr.b))
                    )
                elif wr.n > 0 and wr.hb_ns:
                    wr.hbt_ns = now + wr.hb_ns
            else:
                flow.reset_heartbeat()
                if not delivered:
                    self._did_not_deliver(msg.seq)
        if budget < _PUMP_BUDGET:
            self._ajs.server.flush_soon()
        if not push and not yielded:
            self._queue.process_waiting(eos=not hit_max_ack_pending)
            self._queue.schedule_waiting()

    def _pull_run(self, budget: int) -> int:
        """The round's loop for a run of first deliveries to simple pull requests: what
        `StreamReader.next_msg`, `PullQueue.next_waiting` and `_deliver` do for each, with
        what stays the same along the run worked out once (the store read, the ack deadline,
        the pending count). Stops at the first request that needs more care (a byte limit,
        heartbeats, an expiry due, its receiver to be looked up again); the rest of the run
        waits in the read-ahead for the general path. Returns how many were delivered."""
        waiting = self._waiting
        state = self._state
        want = min(sum(wr.n for wr in waiting), budget, _RUN_READ)
        ack_none = self._ack_none
        pending = state.pending
        if not ack_none:
            maxp = self._owner.config.max_ack_pending
            if maxp > 0:
                want = min(want, maxp - len(pending))
        if want <= 0:
            return 0
        now = now_ns()
        ajs = self._ajs
        genid = ajs.account.sublist.genid
        if len(waiting) > _RUN_REQUESTS:
            return 0
        find_target = self._queue.find_target
        for wr in waiting:
            if wr.interest_gen != genid and not find_target(wr):
                return 0
            target = wr.target
            # A receiver without an outbound (an internal subscription) is called back at
            # once and may change the stream under the run: the general path checks for that.
            if target is None or target.client.outbound is None:
                return 0
            if wr.b > 0 or wr.hb_ns or (wr.expires_ns and now >= wr.expires_ns):
                return 0
        count = self._count
        npc = count.num_pending()
        filters = self._owner.filters
        msgs = self._stream.store.load_next_msgs(filters[0] if filters else "", state.sseq, want)
        if not msgs:
            return 0
        first_dseq = state.dseq
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
        deliver_to = ajs.deliver_to
        i = 0
        n_msgs = len(msgs)
        while True:
            i = run.frame_msgs(msgs, i)
            if i >= n_msgs or not run.queue:
                break
            # The request at the head needs the general delivery (see frame_msgs).
            msg = msgs[i]
            wr = requests[run.take()]
            reply = run.next_reply(msg.seq, msg.ts)
            target = wr.target
            assert target is not None
            subject, header, data = msg.subject, msg.header, msg.data
            if not deliver_to(target, subject.encode(), reply, header, data):
                ajs.deliver(wr.reply, subject, reply, header, data)
            i += 1
        if i < n_msgs:
            # Every request is served: the rest waits for the next (read-ahead).
            self._reader.ahead.extend(msgs[i:])
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
        state.dseq = dseq
        state.sseq = seq + 1
        state.delivered_sseq = seq
        if ack_none:
            state.adflr, state.asflr = dseq - 1, seq
        if count.npc is not None:
            count.npc = npc
        state.ldt = now
        if self._owner.dthresh > 0:
            self._queue.waiting_last = now
        if not ack_none:
            redelivery = self._redelivery
            redelivery.expect_acks_by(now + redelivery.ack_wait_for(state.sseq - 1))
        self._owner.save()
        return sent

    def _paced(self) -> None:
        pacing = self._owner.pacing
        if pacing is not None:
            pacing.timer = None
        self.signal()

    def _did_not_deliver(self, seq: int) -> None:
        """A push delivery reached nobody: the consumer is not active after all."""
        self._redelivery.dec_delivery_count(seq)
        self._owner.interest_lost()

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
        state = self._state
        dseq = state.dseq
        state.dseq += 1
        state.ldt = now
        if dc == 1:
            state.delivered_sseq = msg.seq
        ack_none = self._ack_none
        if ack_none:
            state.adflr, state.asflr = dseq, msg.seq
        else:
            self._redelivery.track_pending(msg.seq, dseq, now)
        ajs = self._ajs
        if wr is None:
            delivered = ajs.deliver_push(dsubj, msg.subject, reply, header, data)
            flow = self._flow
            if flow.maxpb > 0:
                flow.delivered(len(dsubj) + len(reply) + len(header) + len(data))
        else:
            target = wr.target
            delivered = (
                target is not None
                and ajs.deliver_to(target, msg.subject.encode(), reply, header, data)
            ) or ajs.deliver(dsubj, msg.subject, reply, header, data)
            if self._owner.dthresh > 0:
                self._queue.waiting_last = now
        if ack_none and self._stream.config.retention != "limits":
            self._stream.on_acked(self._owner, msg.seq)
        self._owner.save()
        return bool(delivered)

    def stop(self) -> None:
        if self._pump_handle is not None:
            self._pump_handle.cancel()
        self._pump_handle = None


def _headers_only(header: bytes, size: int) -> bytes:
    """Go's convertToHeadersOnly: the headers plus `Nats-Msg-Size`, no payload."""
    line = f"Nats-Msg-Size: {size}\r\n\r\n".encode()
    if not header:
        return b"NATS/1.0\r\n" + line
    return header[:-2] + line
