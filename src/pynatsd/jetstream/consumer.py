"""A JetStream consumer: its lifecycle, its state on disk, and what ties its parts together.

A port of nats-server's `server/consumer.go` to one event loop, in parts of one job each:
`consumer_state.py` (the fields and shared helpers), `pending.py` (acks and redelivery),
`waiting.py` (pull requests), `priority.py` (priority groups of pull requests), `delivery.py`
(the delivery loop, push flow control and heartbeats), `reset.py` (CONSUMER.RESET) and
`consumer_config.py` (what the configuration means). This module starts and
stops a consumer, restores and saves its state, follows interest in a push consumer's deliver
subject, deletes it when inactive, and answers for it (info, updates, pause, stream purges).
"""

from __future__ import annotations

from typing import Any

from pynatsd.jetstream import advisories
from pynatsd.jetstream.consumer_config import ConsumerConfig, cheap_filters
from pynatsd.jetstream.consumer_state import MS, NS, status
from pynatsd.jetstream.pacing import Pacing
from pynatsd.jetstream.pending import Pending
from pynatsd.jetstream.reset import ConsumerReset
from pynatsd.jetstream.store.base import StoreError
from pynatsd.jetstream.util import now_ns, parse_go_time, rfc3339_ns
from pynatsd.logger import log
from pynatsd.server.subscription import InternalSubscription

# Consumer state is written at most this often (seconds); see Consumer.save.
_SAVE_DELAY = 0.05


class Consumer(ConsumerReset):
    """One consumer of a stream (Go's `consumer`)."""

    # How long a change waits before the state is saved; a clustered consumer's leader saves
    # (and so replicates, jetstream/cluster/consumer_replica.py) at the end of the turn.
    save_delay = _SAVE_DELAY

    def start(self, restored: dict[str, Any] | None = None) -> None:
        if restored is not None:
            self._restore(restored)
        else:
            self._select_starting_seq()
        sl = self.ajs.account.sublist
        stream, name = self.stream.name, self.name
        if self.config.ack_policy != "none":
            # As nats-server: an ack-none consumer does not listen for acks at all (an ack sent
            # as a request then gets "no responders").
            acks = InternalSubscription(self._owner, f"$JS.ACK.{stream}.{name}.>", self._on_ack)
            acks.run = self._on_acks
            self._subs.append(acks)
        for api in self.ajs.api_prefixes():
            self._subs.append(
                InternalSubscription(
                    self._owner, f"{api}.CONSUMER.MSG.NEXT.{stream}.{name}", self._on_next_request
                )
            )
            self._subs.append(
                InternalSubscription(
                    self._owner, f"{api}.CONSUMER.RESET.{stream}.{name}", self._on_reset
                )
            )
        if self.config.flow_control:
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
        opt_seq = cfg.opt_start_seq
        policy = cfg.deliver_policy
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
                if self.stream.config.max_msgs_per_subject == 1:
                    sseq = st.first_seq
                else:
                    seqs = self._multi_last_seqs()
                    self.lss = seqs
                    self.lss_resume = st.last_seq
                    sseq = seqs[0] if seqs else st.last_seq
            elif cfg.opt_start_time:
                try:
                    ts = parse_go_time(cfg.opt_start_time)[0]
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

    def snapshot(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "config": self.config.to_stored(),
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
        # As nats-server's applyState: what was pending at shutdown is redelivered when its ack
        # wait runs out (start() sets the timer), not at once; a reconnecting client's acks
        # for it are still welcome.

    def save(self) -> None:
        """Persist the state soon: at most one snapshot per `_SAVE_DELAY`, as nats-server's
        consumer store flushes about ten times a second under load. An ack storm then costs a
        few writes, not one JSON encoding of the pending map per read; a crash loses at most
        that interval, and the consumer redelivers, which at-least-once delivery allows."""
        if self._state_store is None or self._save_handle is not None or self.closed:
            return
        self._save_handle = self.ajs.loop.call_later(self.save_delay, self._save_now)

    def save_at_once(self) -> None:
        """Persist the state now, not after `_SAVE_DELAY`: a durable made on a client's behalf
        (MQTT's) is on disk before the client is answered, as nats-server writes a consumer's
        meta when it creates it."""
        if self._save_handle is not None:
            self._save_handle.cancel()
            self._save_handle = None
        self._save_now()

    def _save_now(self) -> None:
        self._save_handle = None
        if self._state_store is not None and not self.closed:
            try:
                self._state_store.save(self.snapshot())
            except OSError:
                log.exception("saving consumer %s state", self.name)

    def _has_delivery_interest(self) -> bool:
        """Interest as nats-server's sublist notification sees it: a plain subscriber on the
        deliver subject, or a member of the deliver group when there is one, here or behind
        a stream import."""
        group = self.config.deliver_group
        if self.ajs.account.stream_import_subs:
            return self.ajs.has_delivery_interest(self.config.deliver_subject, group)
        result = self.ajs.account.sublist.match(self.config.deliver_subject)
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
            advisories.terminated(
                self, p.dseq, seq, self._delivery_count(seq), advisories.TERM_UNACKED_DELETED
            )
            self.rdc.pop(seq, None)
            self._remove_from_rdq(seq)
            self._move_ack_floor(p.dseq, seq)
            self.save()
            self.signal()

    def set_pause(self, until: str) -> None:
        changed = until != self.config.pause_until
        self.config.pause_until = until
        self._update_pause_timer()
        if changed:
            advisories.consumer_pause(self)
        self.save()
        self.signal()

    def _update_pause_timer(self) -> None:
        self._cancel(self._pause_tmr)
        self._pause_tmr = None
        until = self.config.pause_until
        if not until:
            return
        try:
            delay = parse_go_time(until)[0] - now_ns()
        except ValueError:
            return
        if delay > 0:
            self._pause_tmr = self.ajs.loop.call_later(delay / NS, self._pause_ended)

    def _pause_ended(self) -> None:
        self._pause_tmr = None
        advisories.consumer_pause(self)
        self.signal()

    def update_config(self, cfg: ConsumerConfig) -> None:
        """Go's updateConfig, after check_consumer_update allowed it."""
        old = self.config
        self.config = cfg
        if cfg.deliver_subject != old.deliver_subject:
            self.active = self._has_delivery_interest()
            self._update_delivery_interest(self.active)
        if cfg.inactive_threshold != old.inactive_threshold:
            self._update_inactive_threshold()
            self._cancel(self._dtmr)
            self._dtmr = None
            if self.dthresh > 0 and not (self.push and self.active):
                self._dtmr = self.ajs.loop.call_later(self.dthresh / NS, self._delete_not_active)
        if cfg.pause_until != old.pause_until:
            self._update_pause_timer()
            advisories.consumer_pause(self)
        if cfg.filters() != self.filters:
            self.filters = cfg.filters()
            self._cheap_pending = cheap_filters(self.filters)
            self._npc = None
        if cfg.ack_wait != old.ack_wait and self._ptmr is not None:
            self._reset_ptmr(now_ns() + 100 * MS)
        if cfg.rate_limit_bps != old.rate_limit_bps:
            if self.pacing is None and Pacing.wanted(cfg):
                self.pacing = Pacing(cfg, self.stream)
            elif self.pacing is not None:
                self.pacing.set_rate(cfg.rate_limit_bps, self.stream)
        self.save()
        self.signal()

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
            "config": self.config.to_reply(full_metadata),
            "delivered": delivered,
            "ack_floor": ack_floor,
            "num_ack_pending": len(self.pending),
            "num_redelivered": 0 if self.config.max_deliver == 1 else len(self.rdc),
            "num_waiting": len(self.waiting),
            "num_pending": self.num_pending(),
        }
        if self.push and self.active:
            out["push_bound"] = True
        until = self.config.pause_until
        if until:
            remaining = parse_go_time(until)[0] - now_ns()
            if remaining > 0:
                out["paused"] = True
                out["pause_remaining"] = remaining
        return out

    def info_reply(self, full_metadata: bool = True) -> dict[str, Any]:
        """The consumer info an API reply carries (Go's ConsumerInfo): `info()`, the time, and
        the priority groups' state."""
        out = self.info(full_metadata)
        out["ts"] = rfc3339_ns(now_ns())
        groups = self.priority_groups_info()
        if groups:
            out["priority_groups"] = groups
        return out

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
            self._pin_tmr,
            self._pump_handle,
            self.pacing.timer if self.pacing is not None else None,
        ):
            self._cancel(handle)
        self._ptmr = self._wtmr = self._hbtmr = self._dtmr = self._pause_tmr = None
        self._pin_tmr = None
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
        advisories.consumer_action(self, advisories.DELETE)
        for wr in self.waiting:
            self._send_status(wr.reply, status(409, "Consumer Deleted"))
        self.waiting.clear()
        if self._state_store is not None:
            self._state_store.delete()
