"""A mirror or source whose origin is not in this server: its `external.api` prefix is answered
elsewhere, typically by another JetStream domain across a leaf node connection
(`$JS.<domain>.API`, what `StreamSource(domain=...)` sets in the clients).

As nats-server's `setupMirrorConsumer`/`trySetupSourceConsumer` do it for every mirror and
source: the stream asks the origin for an ephemeral push consumer by an API request on that
prefix (`CONSUMER.CREATE`, a stable name `JS_MIRROR_<hash>`/`JS_SRC_<hash>` with `direct`
and `sourcing`, acks none, heartbeats every second, flow control, starting after the last
message copied) with a reply subject of its own (`$JSC.R.<id>`). Once the reply names the
consumer it listens on the consumer's deliver subject (`$JS.M.<id>`, `$JS.S.<id>`, under
`external.deliver` when there is one) and copies each delivery, whose `$JS.ACK` reply gives
the origin's sequence, the delivery sequence and the count left. It answers flow-control
requests with the sequences it stored; a heartbeat that shows a delivery it missed, a gap it
cannot explain, or ten seconds without anything (the link down, the origin gone) drops the
consumer and asks again from the last message stored, with nats-server's pace (at most one
request in 2 s, a backoff of 10 s per failure up to 2 minutes, a 30 s wait for an answer).
A server that does not know `sourcing` (an older API level, or a JSON error) is asked again
without it under a unique name, as nats-server does.
"""

from __future__ import annotations

import json
import random
import time
from typing import TYPE_CHECKING, Any

from pynatsd.gofmt import rfc3339_ns
from pynatsd.jetstream.config import (
    NS,
    REQUIRED_API_LEVEL_HEADER,
    STREAM_IDENTITY_HEADER,
    ephemeral_name,
)
from pynatsd.jetstream.durable_source import AckInfo, DurableSource
from pynatsd.jetstream.errors import js_error
from pynatsd.jetstream.util import go_hash, now_ns
from pynatsd.logger import log
from pynatsd.protocol.headers import header_value
from pynatsd.server.accounts import service_import_target
from pynatsd.server.subscription import InternalSubscription

if TYPE_CHECKING:
    import asyncio

    from pynatsd.jetstream.manager import AccountJetStream
    from pynatsd.jetstream.stream import Stream
    from pynatsd.jetstream.stream_config import ExternalStream, StreamSource
    from pynatsd.protocol.events import Pub
    from pynatsd.server.client import Client

# nats-server's sourceHealthHB, sourceHealthCheckInterval, srcConsumerWaitTime,
# sourceConsumerRetryThreshold, retryBackOff and retryMaximum.
HEARTBEAT = 1.0
HEALTH_CHECK = 10.0
CREATE_WAIT = 30.0
RETRY_THRESHOLD = 2.0
RETRY_BACKOFF = 5.0
RETRY_MAXIMUM = 120.0
_ACK_WAIT = 22 * 3600 * NS
# Errors of a server that does not know `sourcing`: JSRequiredApiLevelErr, JSInvalidJSONErr.
_DOWNGRADE = (10185, 10025)
_IDENTITY_MISMATCH = 10225


def served_elsewhere(ajs: AccountJetStream, ext: ExternalStream | None) -> bool:
    """The origin of a mirror or source with `ext` is reached over the network: its API prefix
    is neither this server's own (nats-server leaves a mirror through its own domain's prefix
    empty, `sourcing.py`) nor imported from another account of this server."""
    if ext is None or not ext.api:
        return False
    api = ext.api.rstrip(".")
    if api in ajs.api_prefixes():
        return False
    probe = f"{api}.CONSUMER.CREATE.x"
    account, _ = service_import_target(ajs.server, ajs.account, probe)
    return account is ajs.account


def retry_backoff(fails: int) -> float:
    """nats-server's calculateRetryBackoff."""
    return min(RETRY_BACKOFF * fails * 2, RETRY_MAXIMUM)


class RemoteSource(DurableSource):
    def __init__(self, target: Stream, cfg: StreamSource, mirror: bool) -> None:
        super().__init__(target, cfg, mirror)
        self._sourcing = True  # the origin knows sourcing consumers (API level 4)
        self._api_level = 4 if mirror else 5
        self._name = ""
        self._reply_sub: InternalSubscription | None = None
        self._deliver_sub: InternalSubscription | None = None
        self._setup_timer: asyncio.TimerHandle | None = None
        self._health: asyncio.TimerHandle | None = None
        self._requested = 0.0  # when the last create was sent (monotonic)
        self._fails = 0
        self._in_progress = False
        self._restart = False  # the origin was recreated: start over (sources)
        self._started = False

    # -- lifecycle -------------------------------------------------------------------------------

    def start(self) -> None:
        if self._stopped or self._started:
            return
        self._started = True
        if not self.is_mirror:
            self.sseq = max(self._resume_from_headers() - 1, 0)
        self._schedule()
        self._health = self.target.ajs.loop.call_later(HEALTH_CHECK, self._check_health)

    def stop(self) -> None:
        self._cancel()
        for timer in (self._setup_timer, self._health):
            if timer is not None:
                timer.cancel()
        self._setup_timer = self._health = None
        super().stop()

    def detach(self) -> None:
        """The origin is in another server: nothing here follows it."""

    def forget(self) -> None:
        """The stream or this mirror or source is going away: ask the origin once to delete
        the consumer by its stable name (nats-server's tryDeleteSourcingConsumer; it exists
        under that name only on an origin with interest or work-queue retention, where it is
        durable; elsewhere the ephemeral consumer goes when nobody listens)."""
        ajs = self.target.ajs
        name = f"{'JS_MIRROR' if self.is_mirror else 'JS_SRC'}_{self._stable_hash()}"
        subject = f"$JS.API.CONSUMER.DELETE.{self.origin_name}.{name}"
        ext = self.cfg.external
        if ext is not None:
            subject = subject.replace("$JS.API", ext.api, 1).replace("..", ".")
        reply = f"$JSC.R.{ephemeral_name()}"  # the answer is not awaited
        ajs.server.publish_internal(ajs.account, subject, reply, b"", b"")

    def _cancel(self) -> None:
        """Drop the current consumer (nats-server's cancelSourceInfo): stop listening."""
        for sub in (self._reply_sub, self._deliver_sub):
            if sub is not None:
                self._unsubscribe(sub)
        self._reply_sub = self._deliver_sub = None
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._in_progress = False
        self.cname = ""

    def _unsubscribe(self, sub: InternalSubscription) -> None:
        sub.closed = True
        self.target.ajs.account.sublist.remove(sub)
        if sub in self._subs:
            self._subs.remove(sub)

    def _schedule(self) -> None:
        """Ask for a consumer as soon as the pace allows (nats-server's
        scheduleSetupMirrorConsumerRetry and setupSourceConsumer)."""
        if self._stopped or self._setup_timer is not None:
            return
        delay = max(RETRY_THRESHOLD - (time.monotonic() - self._requested), 0.0)
        if not self._requested:
            delay = 0.0
        if self._fails:
            delay += retry_backoff(self._fails)
        delay += 0.1 + random.random() * 0.1  # jitter
        self._setup_timer = self.target.ajs.loop.call_later(delay, self._setup)

    def _retry(self) -> None:
        self._cancel()
        if self.is_mirror:
            self.sseq = self.target.store.state().last_seq
        self._schedule()

    def _failed(self, error: dict[str, Any] | None) -> None:
        self.error = error
        self._fails += 1
        self._cancel()
        self._schedule()

    def retry_if_disconnected(self) -> None:
        """A leaf connection came up (nats-server's retryDisconnectedSyncConsumers): a source
        not being set up that has no consumer, or a stalled one, asks again now, its failures
        forgotten (a retry already waiting is brought forward)."""
        if self._stopped or not self._started or self._in_progress:
            return
        stalled = now_ns() - self.last_active > HEALTH_CHECK * NS
        if self._deliver_sub is not None and not stalled:
            return
        if self._setup_timer is not None:
            self._setup_timer.cancel()
            self._setup_timer = None
        self._fails = 0
        self._retry()

    def _check_health(self) -> None:
        """Every 10 s: a consumer set up that has sent nothing for that long is stalled."""
        self._health = None
        if self._stopped:
            return
        stalled = now_ns() - self.last_active > HEALTH_CHECK * NS
        if stalled and not self._in_progress and self._setup_timer is None:
            log.debug("Retrying %s consumer for '%s'", self._kind.lower(), self.target.name)
            self._retry()
        self._health = self.target.ajs.loop.call_later(HEALTH_CHECK, self._check_health)

    @property
    def _kind(self) -> str:
        return "Mirror" if self.is_mirror else "Source"

    # -- the create request ----------------------------------------------------------------------

    def _setup(self) -> None:
        self._setup_timer = None
        if self._stopped or self.target.closed:
            return
        self._cancel()
        self._requested = time.monotonic()
        self._in_progress = True
        if self.is_mirror:
            self.sseq = self.target.store.state().last_seq
        self._name = f"{'JS_MIRROR' if self.is_mirror else 'JS_SRC'}_{self._stable_hash()}"
        if not self._sourcing:
            self._name += "_" + ephemeral_name()
        self._send_create()

    def _send_create(self) -> None:
        ajs = self.target.ajs
        reply = f"$JSC.R.{ephemeral_name()}"
        self._reply_sub = InternalSubscription(self._owner, reply, self._on_create_reply)
        ajs.account.sublist.insert(self._reply_sub)
        self._subs.append(self._reply_sub)
        config = self._consumer_config()
        subject = f"$JS.API.CONSUMER.CREATE.{self.origin_name}"
        filtered = config.get("filter_subject")
        if filtered:
            subject += f".{config['name']}.{filtered}"
        ext = self.cfg.external
        if ext is not None:
            subject = subject.replace("$JS.API", ext.api, 1).replace("..", ".")
        body = json.dumps({"stream_name": self.origin_name, "config": config, "action": ""})
        header = b""
        if self._sourcing:
            lines = [f"{REQUIRED_API_LEVEL_HEADER}: {self._api_level}"]
            if self._api_level >= 5:
                lines.append(f"{STREAM_IDENTITY_HEADER}: {self.ident}")
            header = ("NATS/1.0\r\n" + "\r\n".join(lines) + "\r\n\r\n").encode()
        self._timer = ajs.loop.call_later(CREATE_WAIT, self._no_create_reply)
        ajs.server.publish_internal(ajs.account, subject, reply, header, body.encode())

    def _stable_hash(self) -> str:
        """nats-server's createStableConsumerHash (and createSourcingConsumerHash: a stream
        sourcing one origin twice tells the two apart by their index names)."""
        ajs = self.target.ajs
        ident = f"{self.target.name} {ajs.account.name}"
        if ajs.js.domain:
            ident += f" {ajs.js.domain}"
        if not self.is_mirror:
            same = [
                s for s in self.target.config.sources if s is not None and s.name == self.cfg.name
            ]
            if len(same) > 1:
                ident += f" {self.iname}"
        return go_hash(ident)

    def _deliver_subject(self) -> str:
        token = "M" if self.is_mirror else "S"
        ext = self.cfg.external
        if ext is not None and ext.deliver:
            return f"{ext.deliver}.{token}.{ephemeral_name()}".replace("..", ".")
        return f"$JS.{token}.{ephemeral_name()}"

    def _consumer_config(self) -> dict[str, Any]:
        ajs = self.target.ajs
        key = "mirror" if self.is_mirror else "src"
        metadata = {f"_nats.{key}.acc": ajs.account.name, f"_nats.{key}.stream": self.target.name}
        if ajs.js.domain:
            metadata[f"_nats.{key}.domain"] = ajs.js.domain
        config: dict[str, Any] = {
            "name": self._name,
            "deliver_policy": "all",
            "ack_policy": "none",
            "ack_wait": _ACK_WAIT,
            "max_deliver": 1,
            "replay_policy": "instant",
            "flow_control": True,
            "deliver_subject": self._deliver_subject(),
            "idle_heartbeat": int(HEARTBEAT * NS),
            "inactive_threshold": int(HEALTH_CHECK * NS),
            "num_replicas": 0,
            "direct": True,
            "sourcing": self._sourcing,
            "metadata": dict(sorted(metadata.items())),
        }
        if not self._sourcing:
            del config["sourcing"]
        self._start_position(config)
        filters = [t.src for t in self.transforms] or (
            [self.cfg.filter_subject] if self.cfg.filter_subject else []
        )
        if len(filters) == 1:
            config["filter_subject"] = filters[0]
        elif filters:
            config["filter_subjects"] = filters
        return config

    def _start_position(self, config: dict[str, Any]) -> None:
        """Where the consumer starts: after the last message copied, or where the
        configuration says on the first set-up."""
        cfg = self.cfg
        st = self.target.store.state()
        if self.is_mirror:
            if st.messages == 0 and st.first_seq == 0:
                _start_at(config, cfg.opt_start_seq, cfg.opt_start_time)
            else:
                _start_at(config, st.last_seq + 1)
        elif self.sseq and not self._restart:
            _start_at(config, self.sseq + 1)
        elif cfg.opt_start_seq or cfg.opt_start_time:
            _start_at(config, cfg.opt_start_seq, cfg.opt_start_time)
        elif st.first_seq > 1 and st.last_ts and not self._restart:
            # A source added to a stream that holds messages: what came after them.
            _start_at(config, start_time=rfc3339_ns(st.last_ts))

    def _no_create_reply(self) -> None:
        self._timer = None
        self._failed(self.error)

    def _on_create_reply(
        self, sub: InternalSubscription, publisher: Client | None, ev: Pub
    ) -> None:
        if sub is not self._reply_sub or self._stopped:
            return
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        hs = ev.header_size
        try:
            reply = json.loads(ev.payload[hs:] if hs > 0 else ev.payload)
        except ValueError:
            reply = None
        if not isinstance(reply, dict):
            self._failed(js_error("InvalidJSON", err="bad consumer create response").to_json())
            return
        error = reply.get("error")
        config = reply.get("config")
        if isinstance(error, dict) or not isinstance(config, dict):
            code = error.get("err_code") if isinstance(error, dict) else None
            if code == _IDENTITY_MISMATCH:
                # The origin was deleted and created again: copy it from its start.
                self.sseq, self.ident, self._restart = 0, "", True
                self._cancel()
                self._schedule()
                return
            if self._sourcing and code in _DOWNGRADE:
                self._unsubscribe(sub)
                self._reply_sub = None
                if self._api_level > 4:
                    self._api_level -= 1
                else:
                    self._sourcing = False
                    self._name += "_" + ephemeral_name()
                self._send_create()
                return
            fallback = js_error(
                f"{self._kind}ConsumerSetupFailed", err="invalid consumer create response"
            )
            self._failed(error if isinstance(error, dict) else fallback.to_json())
            return
        self._consumer_ready(reply, config, ev.payload[:hs] if hs > 0 else b"")

    def _consumer_ready(self, reply: dict[str, Any], config: dict[str, Any], header: bytes) -> None:
        if self._reply_sub is not None:
            self._unsubscribe(self._reply_sub)
            self._reply_sub = None
        self._in_progress = False
        self._fails = 0
        self.error = None
        delivered = int((reply.get("delivered") or {}).get("stream_seq") or 0)
        if self.is_mirror:
            st = self.target.store.state()
            if st.last_seq < delivered:
                self._skip_to(delivered + 1)
            self.sseq = max(delivered, self.target.store.state().last_seq)
        else:
            ident = header_value(header, STREAM_IDENTITY_HEADER) if header else None
            if self._restart or (ident and self.ident and ident != self.ident):
                log.warning(
                    "JetStream source stream %r for stream '%s > %s' was recreated, "
                    "resetting source state",
                    self.origin_name,
                    self.target.ajs.account.name,
                    self.target.name,
                )
                self.sseq = 0
            self.ident = ident or self.ident
            self._restart = False
            self.sseq = max(self.sseq, delivered)
        self.cname = str(reply.get("name") or config.get("name") or "")
        self.dseq = 0
        self.last_active = now_ns()
        deliver = str(config.get("deliver_subject") or "")
        self._deliver_sub = InternalSubscription(self._owner, deliver, self._on_delivery)
        self.target.ajs.account.sublist.insert(self._deliver_sub)
        self._subs.append(self._deliver_sub)

    # -- deliveries ------------------------------------------------------------------------------

    def _on_delivery(self, sub: InternalSubscription, publisher: Client | None, ev: Pub) -> None:
        if sub is not self._deliver_sub or self._stopped or self.target.closed:
            return
        self.last_active = now_ns()
        self._take(ev)

    def _next_delivery(self, info: AckInfo) -> bool:
        """nats-server's processInboundMirrorMsg/processInboundSourceMsg: only the current
        consumer's; a mirror copies the next stream sequence, or across a gap the next
        delivery (the origin removed messages); anything else was missed, and the consumer is
        asked for again."""
        cname, _, sseq, dseq, _, _ = info
        if cname != self.cname or not super()._next_delivery(info):
            return False
        if (self.is_mirror and sseq == self.sseq + 1) or dseq == self.dseq + 1:
            return True
        if self.is_mirror or dseq > self.dseq:
            self._retry()
        return False

    def _on_control(self, header: bytes, reply: str) -> None:
        """Flow control asks what was stored; a heartbeat shows the last delivery made."""
        if not reply:
            last = header_value(header, "Nats-Last-Consumer")
            if last and last.isdigit() and int(last) > 0 and int(last) != self.dseq:
                self._retry()
                return
        super()._on_control(header, reply)


def _start_at(config: dict[str, Any], seq: int = 0, start_time: str = "") -> None:
    """A consumer configuration starting at a stream sequence or a time (else at the start)."""
    if seq:
        config["deliver_policy"] = "by_start_sequence"
        config["opt_start_seq"] = seq
    elif start_time:
        config["deliver_policy"] = "by_start_time"
        config["opt_start_time"] = start_time
