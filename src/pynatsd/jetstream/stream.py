"""A stream: captures its subjects into a store, acknowledges publishers, feeds consumers.

Corresponds to nats-server's `server/stream.go` (`processJetStreamMsg`): size limits, the
`Nats-Msg-Id` duplicate window, the `Nats-Expected-*` checks, `Nats-Rollup`, and the PubAck that
is sent only once the record is durable (see `StreamStore.when_durable`).
"""

from __future__ import annotations

import asyncio
from collections import deque
from typing import TYPE_CHECKING, Any

from pynatsd.jetstream import errors
from pynatsd.jetstream.config import stream_config_reply
from pynatsd.jetstream.errors import ApiError
from pynatsd.jetstream.store.base import StoreError, StreamLimits, StreamStore
from pynatsd.jetstream.util import go_json, now_ns, rfc3339_ns
from pynatsd.logger import log
from pynatsd.protocol.events import Pub
from pynatsd.protocol.headers import header_value
from pynatsd.server.subscription import InternalClient, InternalSubscription
from pynatsd.subjects import match_literal

if TYPE_CHECKING:
    from pynatsd.jetstream.consumer import Consumer
    from pynatsd.jetstream.manager import AccountJetStream
    from pynatsd.server.client import Client


def limits_of(config: dict[str, Any]) -> StreamLimits:
    return StreamLimits(
        max_msgs=config["max_msgs"],
        max_bytes=config["max_bytes"],
        max_age=config["max_age"],
        max_msgs_per_subject=config["max_msgs_per_subject"],
        max_msg_size=config["max_msg_size"],
        discard=config["discard"],
        discard_new_per_subject=config.get("discard_new_per_subject", False),
    )


class Stream:
    def __init__(
        self,
        ajs: AccountJetStream,
        config: dict[str, Any],
        store: StreamStore,
        created_ns: int,
    ) -> None:
        self.ajs = ajs
        self.config = config
        self.store = store
        self.created_ns = created_ns
        self.consumers: dict[str, Consumer] = {}
        self._owner = InternalClient(ajs.account, f"stream:{config['name']}")
        self._subs: list[InternalSubscription] = []
        # Nats-Msg-Id -> (seq, ts) inside the duplicate window, oldest first in `_msg_id_order`.
        self._msg_ids: dict[str, tuple[int, int]] = {}
        self._msg_id_order: deque[tuple[int, str]] = deque()
        self.last_msg_id = ""
        self.closed = False
        self._expiry_timer: asyncio.TimerHandle | None = None
        self._expiry_at = 0

    @property
    def name(self) -> str:
        return str(self.config["name"])

    # -- subjects --------------------------------------------------------------------------------

    def schedule_expiry(self) -> None:
        """max_age: remove messages when they age out, not only when the next one arrives."""
        when = self.store.next_expiry()
        if when is None or self.closed:
            return
        if self._expiry_at and self._expiry_timer is not None and self._expiry_at <= when:
            return
        if self._expiry_timer is not None:
            self._expiry_timer.cancel()
        self._expiry_at = when
        delay = max((when - now_ns()) / 1e9, 0.0)
        self._expiry_timer = self.ajs.loop.call_later(delay, self._on_expiry)

    def _on_expiry(self) -> None:
        self._expiry_timer = None
        self._expiry_at = 0
        if self.closed:
            return
        self.store.expire()
        self.schedule_expiry()

    def subscribe(self) -> None:
        self.schedule_expiry()
        sublist = self.ajs.account.sublist
        for subject in self.config["subjects"]:
            sub = InternalSubscription(self._owner, subject, self._on_message)
            sublist.insert(sub)
            self._subs.append(sub)

    def unsubscribe(self) -> None:
        if self._subs:
            for sub in self._subs:
                sub.closed = True
            self.ajs.account.sublist.remove_batch(self._subs)
            self._subs = []

    def update_config(self, config: dict[str, Any]) -> None:
        subjects_changed = config["subjects"] != self.config["subjects"]
        self.config = config
        self.store.update_limits(limits_of(config))
        self._cancel_expiry()
        self._expiry_at = 0
        self.schedule_expiry()
        if subjects_changed:
            self.unsubscribe()
            self.subscribe()

    # -- publishing ------------------------------------------------------------------------------

    def _on_message(self, sub: InternalSubscription, publisher: Client | None, ev: Pub) -> None:
        if self.closed:
            return
        hs = ev.header_size
        payload = ev.payload
        header = payload[:hs] if hs > 0 else b""
        data = payload[hs:] if hs > 0 else payload
        subject = ev.subject.decode("utf-8", "surrogateescape")
        reply = ev.reply.decode("utf-8", "surrogateescape")
        try:
            seq, duplicate = self.process_message(subject, header, data)
        except ApiError as e:
            if reply:
                body = {"error": e.to_json(), "stream": self.name, "seq": 0}
                self.ajs.reply(reply, go_json(body))
            return
        if not reply or self.config.get("no_ack"):
            return
        domain = self.ajs.domain
        ack = b'{"stream":%s,"seq":%d' % (go_json(self.name), seq)
        if domain:
            ack += b',"domain":' + go_json(domain)
        if duplicate:
            # nats-server writes this one by hand, with the space.
            self.ajs.reply(reply, ack + b',"duplicate": true}')
            return
        ack += b"}"
        self.store.when_durable(seq, lambda: self.ajs.reply(reply, ack))

    def process_message(self, subject: str, header: bytes, data: bytes) -> tuple[int, bool]:
        """Store one message; returns (seq, duplicate). Raises ApiError for a rejected one."""
        cfg = self.config
        if cfg["sealed"]:
            raise errors.stream_sealed()
        max_size = cfg["max_msg_size"]
        if max_size >= 0 and len(header) + len(data) > max_size:
            raise errors.message_size_exceeds()
        msg_id = ""
        rollup = ""
        if header:
            msg_id = header_value(header, "Nats-Msg-Id") or ""
            if msg_id:
                self._expire_msg_ids(now_ns())
                seen = self._msg_ids.get(msg_id)
                if seen is not None:
                    return seen[0], True
            self._check_expectations(subject, header)
            rollup = header_value(header, "Nats-Rollup") or ""
            if rollup:
                if not cfg["allow_rollup_hdrs"]:
                    raise errors.rollup_failed("rollup not permitted")
                if rollup not in ("sub", "all"):
                    raise errors.rollup_failed(f"rollup value invalid: {rollup}")
        try:
            seq, ts = self.store.store_msg(subject, header, data)
        except StoreError as e:
            raise errors.stream_store_failed(e.description) from None
        if msg_id:
            self._msg_ids[msg_id] = (seq, ts)
            self._msg_id_order.append((ts, msg_id))
            self.last_msg_id = msg_id
        if rollup == "sub":
            self.store.purge(subject=subject, seq=seq)
        elif rollup == "all":
            self.store.purge(seq=seq)
        self._after_store(seq, subject)
        if self._expiry_timer is None:
            self.schedule_expiry()
        return seq, False

    def _check_expectations(self, subject: str, header: bytes) -> None:
        expected_stream = header_value(header, "Nats-Expected-Stream")
        if expected_stream is not None and expected_stream != self.name:
            raise errors.stream_not_match()
        expected_last = header_value(header, "Nats-Expected-Last-Sequence")
        if expected_last is not None:
            last = self.store.state().last_seq
            if _as_int(expected_last) != last:
                raise errors.wrong_last_sequence(last)
        expected_subject_seq = header_value(header, "Nats-Expected-Last-Subject-Sequence")
        if expected_subject_seq is not None:
            last_msg = self.store.load_last_msg(subject)
            last = last_msg.seq if last_msg is not None else 0
            if _as_int(expected_subject_seq) != last:
                raise errors.wrong_last_sequence(last)
        expected_id = header_value(header, "Nats-Expected-Last-Msg-Id")
        if expected_id is not None and expected_id != self.last_msg_id:
            raise errors.wrong_last_msg_id(self.last_msg_id)

    def _expire_msg_ids(self, now: int) -> None:
        window = self.config["duplicate_window"]
        order = self._msg_id_order
        while order and order[0][0] + window < now:
            _, msg_id = order.popleft()
            entry = self._msg_ids.get(msg_id)
            if entry is not None and entry[1] + window < now:
                del self._msg_ids[msg_id]

    def rebuild_msg_ids(self) -> None:
        """After a restart: the duplicate window is rebuilt from the stored headers."""
        window = self.config["duplicate_window"]
        start = self.store.seq_for_time(now_ns() - window)
        seq = max(start, 1)
        while True:
            msg = self.store.load_next_msg("", seq)
            if msg is None:
                break
            msg_id = header_value(msg.header, "Nats-Msg-Id") if msg.header else None
            if msg_id:
                self._msg_ids[msg_id] = (msg.seq, msg.ts)
                self._msg_id_order.append((msg.ts, msg_id))
                self.last_msg_id = msg_id
            seq = msg.seq + 1

    def _after_store(self, seq: int, subject: str) -> None:
        retention = self.config["retention"]
        if retention != "limits":
            interested = [c for c in self.consumers.values() if c.wants(subject)]
            if not interested:
                # Interest and work-queue streams keep nothing nobody will consume.
                self.store.remove_msg(seq)
                return
        for consumer in list(self.consumers.values()):
            consumer.on_new_message()

    def on_acked(self, seq: int) -> None:
        """A consumer acknowledged `seq`: work-queue and interest streams may drop it."""
        retention = self.config["retention"]
        if retention == "workqueue":
            self.store.remove_msg(seq)
        elif retention == "interest":
            msg = self.store.load_msg(seq)
            if msg is None:
                return
            if all(c.has_acked(seq) for c in self.consumers.values() if c.wants(msg.subject)):
                self.store.remove_msg(seq)

    # -- reporting -------------------------------------------------------------------------------

    def state_json(
        self, subjects_filter: str = "", deleted_details: bool = False
    ) -> dict[str, Any]:
        st = self.store.state()
        out: dict[str, Any] = {
            "messages": st.messages,
            "bytes": st.bytes,
            "first_seq": st.first_seq,
            "first_ts": rfc3339_ns(st.first_ts),
            "last_seq": st.last_seq,
            "last_ts": rfc3339_ns(st.last_ts),
        }
        if st.num_subjects:
            out["num_subjects"] = st.num_subjects
        if subjects_filter:
            subjects = self.store.subjects_state(subjects_filter)
            if subjects:
                out["subjects"] = subjects
        if st.num_deleted:
            out["num_deleted"] = st.num_deleted
        out["consumer_count"] = len(self.consumers)
        return out

    def info(self, full_metadata: bool = True, subjects_filter: str = "") -> dict[str, Any]:
        return {
            "config": stream_config_reply(self.config, full_metadata),
            "created": rfc3339_ns(self.created_ns),
            "state": self.state_json(subjects_filter),
        }

    def matches(self, subject: str) -> bool:
        return any(match_literal(subject, s) for s in self.config["subjects"])

    # -- lifecycle -------------------------------------------------------------------------------

    def _cancel_expiry(self) -> None:
        if self._expiry_timer is not None:
            self._expiry_timer.cancel()
            self._expiry_timer = None

    def stop(self) -> None:
        """Stop capturing and close the store (server shutdown); data stays on disk."""
        self.closed = True
        self._cancel_expiry()
        self.unsubscribe()
        for consumer in list(self.consumers.values()):
            consumer.stop()
        try:
            self.store.close()
        except Exception:  # a failing disk must not stop the shutdown of the rest
            log.exception("closing stream %s", self.name)

    def delete(self) -> None:
        self.closed = True
        self._cancel_expiry()
        self.unsubscribe()
        for consumer in list(self.consumers.values()):
            consumer.delete()
        self.store.delete()


def _as_int(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        return -1
