"""A mirror or source through a durable consumer of the origin (ADR-60: `consumer` with `name`
and `deliver_subject`), as nats-server's `setupMirrorConsumer`/`setupSourceConsumer` follow
one, instead of reading the origin's store (`sourcing.py`).

The consumer is the user's: a push consumer with `ack_policy: flow_control` delivering to
`deliver_subject`. The stream sends `CONSUMER.RESET.<origin>.<name>` (through an `external`
API prefix when there is one), which takes the consumer back to its ack floor; once the reply
shows the right consumer, it subscribes to the deliver subject in its own account and copies
what the consumer delivers. It
acknowledges by answering the consumer's flow-control requests with `Nats-Last-Consumer` and
`Nats-Last-Stream` (the last delivery and stream sequence it stored), and answers a stalled
heartbeat's `Nats-Consumer-Stalled`. A reset refused (no such consumer, another ack policy, no
answer) is the source's `error` in the stream info and is retried.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from pynatsd.jetstream.advisories import new_nuid
from pynatsd.jetstream.config import STREAM_IDENTITY_HEADER
from pynatsd.jetstream.errors import js_error
from pynatsd.jetstream.gostruct import encode
from pynatsd.jetstream.sourcing import Source
from pynatsd.jetstream.store.base import StoredMsg
from pynatsd.jetstream.util import now_ns
from pynatsd.logger import log
from pynatsd.protocol.events import Pub
from pynatsd.protocol.headers import header_value
from pynatsd.server.subscription import InternalClient, InternalSubscription

if TYPE_CHECKING:
    import asyncio

    from pynatsd.jetstream.stream import Stream
    from pynatsd.jetstream.stream_config import StreamSource
    from pynatsd.server.client import Client

# A delivery's consumer, delivery count, stream and delivery sequences, time and count left.
AckInfo = tuple[str, int, int, int, int, int]
# nats-server's srcDurableConsumerWaitTime and its retry pace for a failed setup.
_RESET_WAIT = 2.0
_RETRY = 2.0


class DurableSource(Source):
    def __init__(self, target: Stream, cfg: StreamSource, mirror: bool) -> None:
        super().__init__(target, cfg, mirror)
        # The origin's consumer (RemoteSource: the one it had created for it, once known).
        self.cname = cfg.consumer.name if cfg.consumer is not None else ""
        self.deliver = cfg.consumer.deliver_subject if cfg.consumer is not None else ""
        self.error: dict[str, Any] | None = None
        self.sseq = 0  # the last origin stream sequence stored
        self.dseq = 0  # the last delivery sequence of the consumer seen
        self.lag = 0
        self.ident = ""  # the origin's identity, from the reset's reply
        owner = InternalClient(target.ajs.account, f"source:{target.name}:{self.cname}")
        self._owner = owner
        self._subs: list[InternalSubscription] = []
        self._timer: asyncio.TimerHandle | None = None
        self._reply = ""
        self._delivering = False  # subscribed to the deliver subject

    # -- lifecycle -------------------------------------------------------------------------------

    def start(self) -> None:
        if self._stopped or self._subs:
            return
        self._reply = f"$JS.SRC.{new_nuid()}"
        self._subscribe(self._reply, self._on_reset_reply)
        if self.is_mirror:
            self.sseq = self.target.store.state().last_seq
        else:
            # After a restart: what the consumer sends again up to here is already stored.
            self.sseq = max(self._resume_from_headers() - 1, 0)
        self._send_reset()

    def _subscribe(self, subject: str, callback: Any) -> None:
        sub = InternalSubscription(self._owner, subject, callback)
        self.target.ajs.account.sublist.insert(sub)
        self._subs.append(sub)

    def _send_reset(self) -> None:
        self._timer = None
        if self._stopped:
            return
        subject = f"$JS.API.CONSUMER.RESET.{self.origin_name}.{self.cname}"
        ext = self.cfg.external
        if ext is not None:
            subject = subject.replace("$JS.API", ext.api, 1).replace("..", ".")
        header = f"NATS/1.0\r\n{STREAM_IDENTITY_HEADER}: {self.ident}\r\n\r\n".encode()
        ajs = self.target.ajs
        self._timer = ajs.loop.call_later(_RESET_WAIT, self._no_reset_reply)
        ajs.server.publish_internal(ajs.account, subject, self._reply, header, b"")

    def _no_reset_reply(self) -> None:
        self._timer = None
        self._retry()

    def _retry(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
        if not self._stopped:
            self._timer = self.target.ajs.loop.call_later(_RETRY, self._send_reset)

    def detach(self) -> None:
        """The origin went away: the consumer went with it; keep asking."""

    def stop(self) -> None:
        self._stopped = True
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self._subs:
            for s in self._subs:
                s.closed = True
            self.target.ajs.account.sublist.remove_batch(self._subs)
            self._subs = []
        self._delivering = False

    # -- the reset -------------------------------------------------------------------------------

    def _on_reset_reply(self, sub: InternalSubscription, publisher: Client | None, ev: Pub) -> None:
        if self._stopped or self._timer is None:
            return
        self._timer.cancel()
        self._timer = None
        hs = ev.header_size
        body = ev.payload[hs:] if hs > 0 else ev.payload
        try:
            reply = json.loads(body)
        except ValueError:
            reply = {}
        if not isinstance(reply, dict):
            reply = {}
        kind = "Mirror" if self.is_mirror else "Source"
        if "error" in reply or not isinstance(reply.get("config"), dict):
            invalid = js_error(f"{kind}ConsumerSetupFailed", err="invalid consumer create response")
            self.error = reply.get("error") or invalid.to_json()
            self._retry()
            return
        if reply["config"].get("ack_policy") != "flow_control":
            self.error = js_error(f"{kind}ConsumerRequiresAckFC").to_json()
            self._retry()
            return
        self.error = None
        if not self._delivering:
            # As nats-server: the deliver subject is listened to only once the consumer is
            # known to be right (before that, its interest would start the deliveries).
            self._delivering = True
            self._subscribe(self.deliver, self._on_delivery)
        if hs > 0:
            self.ident = header_value(ev.payload[:hs], STREAM_IDENTITY_HEADER) or self.ident
        delivered = int((reply.get("delivered") or {}).get("stream_seq") or 0)
        self.dseq = 0
        if self.is_mirror:
            last = self.target.store.state().last_seq
            if last < delivered:
                self._skip_to(delivered + 1)
            self.sseq = max(delivered, self.target.store.state().last_seq)
        else:
            self.sseq = max(self.sseq, delivered)

    # -- deliveries ------------------------------------------------------------------------------

    def _on_delivery(self, sub: InternalSubscription, publisher: Client | None, ev: Pub) -> None:
        if self._stopped or self.target.closed:
            return
        self._take(ev)

    def _take(self, ev: Pub) -> None:
        """One message on the deliver subject: a status (flow control, a heartbeat), or a
        delivery copied when it is the next one."""
        hs = ev.header_size
        header = ev.payload[:hs] if hs > 0 else b""
        reply = ev.reply.decode("utf-8", "surrogateescape")
        if header.startswith(b"NATS/1.0 100"):
            self._on_control(header, reply)
            return
        info = ack_info(reply)
        if info is None:
            return
        self.last_active = now_ns()
        if not self._next_delivery(info):
            return
        _, _, sseq, dseq, ts, pending = info
        self.dseq, self.sseq = dseq, sseq
        self.lag = max(pending - 1, 0)
        data = ev.payload[hs:] if hs > 0 else ev.payload
        subject = ev.subject.decode("utf-8", "surrogateescape")
        msg = StoredMsg(subject=subject, header=header, data=data, seq=sseq, ts=ts)
        try:
            self._copy(msg)
        except Exception as e:  # a refused copy (limits) must not stop the others
            log.debug("JetStream %s: source %s: %s", self.target.name, self.iname, e)

    def _next_delivery(self, info: AckInfo) -> bool:
        """A delivery to copy: a first delivery of something not stored yet (what is stored
        only moves the delivery sequence on)."""
        _, dc, sseq, dseq, _, _ = info
        if dc > 1:
            return False
        if sseq <= self.sseq:
            if dseq == self.dseq + 1:
                self.dseq = dseq
            return False
        return True

    def _on_control(self, header: bytes, reply: str) -> None:
        ajs = self.target.ajs
        self.last_active = now_ns()
        if reply:
            # A flow-control request: this is how the consumer learns what was stored.
            answer = (
                f"NATS/1.0\r\nNats-Last-Consumer: {self.dseq}\r\n"
                f"Nats-Last-Stream: {self.sseq}\r\n\r\n"
            ).encode()
            ajs.server.publish_internal(ajs.account, reply, "", answer, b"")
            return
        stalled = header_value(header, "Nats-Consumer-Stalled")
        if stalled:
            ajs.server.publish_internal(ajs.account, stalled, "", b"", b"")

    def _origin_identity(self) -> str:
        return self.ident

    # -- reporting -------------------------------------------------------------------------------

    def info(self) -> dict[str, Any]:
        out: dict[str, Any] = {"name": self.origin_name}
        if self.cfg.external is not None:
            out["external"] = encode(self.cfg.external)
        out["lag"] = self.lag
        if not self.is_mirror and self.sseq:
            out["seq"] = self.sseq
        out["active"] = now_ns() - self.last_active if self.last_active else -1
        if self.error is not None:
            out["error"] = self.error
        if self.cfg.filter_subject:
            out["filter_subject"] = self.cfg.filter_subject
        if self.cfg.subject_transforms:
            out["subject_transforms"] = [encode(t) for t in self.cfg.subject_transforms]
        return out


def ack_info(reply: str) -> AckInfo | None:
    """What the `$JS.ACK` reply of a delivery says, in both of its forms (nats-server's
    ackReplyInfo: 9 tokens, or 12 with the domain and account hash and a random token)."""
    tokens = reply.split(".")
    if len(tokens) == 9:
        first = 3
    elif len(tokens) >= 11:
        first = 5
    else:
        return None
    if tokens[:2] != ["$JS", "ACK"]:
        return None
    try:
        dc, sseq, dseq, ts, pending = (int(t) for t in tokens[first + 1 : first + 6])
    except ValueError:
        return None
    return tokens[first], dc, sseq, dseq, ts, pending
