"""JetStream advisories and metrics: the JSON events on `$JS.EVENT.ADVISORY.>` and
`$JS.EVENT.METRIC.>`.

nats-server's `server/jetstream_events.go` (the event structs, `publishAdvisory`) and the places
that send them: `stream.go` (sendCreateAdvisory, sendUpdateAdvisoryLocked,
sendDeleteAdvisoryLocked), `consumer.go` (sendCreateAdvisory, sendDeleteAdvisoryLocked,
sendPauseAdvisoryLocked, sampleAck, notifyDeliveryExceeded, processNak, processTerm,
sendPinnedAdvisoryLocked, sendUnpinnedAdvisoryLocked) and `jetstream_api.go`
(sendJetStreamAPIAuditAdvisory, the snapshot and restore handlers).

Each event is a dict whose keys are the Go struct's JSON names in the struct's order, with
`omitempty` fields left out when empty, written by Go's encoder (`gofmt.go_json`). Every event
is published in the account of its stream, and only when someone there listens on its subject:
the interest check comes first, so nothing is built (no id, no time, no JSON) for an event
nobody receives. On a single server the leader-elected and quorum-lost advisories are never
sent (nats-server sends them from its clustering code only).
"""

from __future__ import annotations

import random
import secrets
from typing import TYPE_CHECKING, Any, Protocol

from pynatsd.jetstream.util import ZERO_TIME, go_json, now_ns, parse_go_time, rfc3339_ns
from pynatsd.server.events import client_info

if TYPE_CHECKING:
    from pynatsd.jetstream.consumer_config import ConsumerConfig
    from pynatsd.jetstream.manager import AccountJetStream
    from pynatsd.jetstream.stream import Stream
    from pynatsd.server.session import ClientSession

ADVISORY_PREFIX = "$JS.EVENT.ADVISORY"
METRIC_PREFIX = "$JS.EVENT.METRIC"
API_AUDIT_SUBJECT = ADVISORY_PREFIX + ".API"
_ADVISORY = "io.nats.jetstream.advisory.v1."
_METRIC = "io.nats.jetstream.metric.v1."

# The ways a stream or a consumer changes (Go's ActionAdvisoryType).
CREATE = "create"
DELETE = "delete"
MODIFY = "modify"


class Nuid:
    """NATS unique ids as github.com/nats-io/nuid makes them (every advisory's `id`): a random
    12-character prefix and a 10-character sequence that grows by a random step, in base 62."""

    DIGITS = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
    _PRE_LEN = 12
    _SEQ_LEN = 10
    _MAX_SEQ = 62**10

    def __init__(self) -> None:
        self._randomize_prefix()
        self._seq = secrets.randbelow(self._MAX_SEQ)
        self._inc = 33 + secrets.randbelow(333 - 33)

    def _randomize_prefix(self) -> None:
        self._prefix = "".join(self.DIGITS[b % 62] for b in secrets.token_bytes(self._PRE_LEN))

    def next(self) -> str:
        self._seq += self._inc
        if self._seq >= self._MAX_SEQ:
            self._randomize_prefix()
            self._seq = secrets.randbelow(self._MAX_SEQ)
            self._inc = 33 + secrets.randbelow(333 - 33)
        seq, digits = self._seq, []
        for _ in range(self._SEQ_LEN):
            seq, d = divmod(seq, 62)
            digits.append(self.DIGITS[d])
        return self._prefix + "".join(reversed(digits))


_nuid = Nuid()


def new_nuid() -> str:
    """A new NUID (advisory ids, priority group pin ids)."""
    return _nuid.next()


def _typed_event(kind: str) -> dict[str, Any]:
    """Go's TypedEvent: `type`, `id`, `timestamp` (UTC, RFC 3339 with nanoseconds)."""
    return {"type": kind, "id": _nuid.next(), "timestamp": rfc3339_ns(now_ns())}


def _send(ajs: AccountJetStream, subject: str, event: dict[str, Any]) -> None:
    if ajs.domain:
        event["domain"] = ajs.domain
    ajs.reply(subject, go_json(event))


# -- streams ---------------------------------------------------------------------------------


def batch_abandoned(stream: Stream, batch_id: str, reason: str) -> None:
    """JSStreamBatchAbandonedAdvisory: an atomic batch dropped for a gap, its size or the
    timeout."""
    subject = f"{ADVISORY_PREFIX}.STREAM.BATCH_ABANDONED.{stream.name}"
    if not stream.ajs.has_interest(subject):
        return
    event = _typed_event(_ADVISORY + "stream_batch_abandoned")
    event["stream"] = stream.name
    if stream.ajs.domain:
        event["domain"] = stream.ajs.domain
    event["batch"] = batch_id
    event["reason"] = reason
    stream.ajs.reply(subject, go_json(event))


def stream_action(stream: Stream, action: str) -> None:
    """JSStreamActionAdvisory on `$JS.EVENT.ADVISORY.STREAM.CREATED|UPDATED|DELETED.<stream>`."""
    token = {CREATE: "CREATED", MODIFY: "UPDATED", DELETE: "DELETED"}[action]
    subject = f"{ADVISORY_PREFIX}.STREAM.{token}.{stream.name}"
    if not stream.ajs.has_interest(subject):
        return
    event = _typed_event(_ADVISORY + "stream_action")
    event["stream"] = stream.name
    event["action"] = action
    _send(stream.ajs, subject, event)


def snapshot_create(stream: Stream, state: dict[str, Any], client: ClientSession | None) -> None:
    """JSSnapshotCreateAdvisory (sent when `$JS.API.STREAM.SNAPSHOT` starts one)."""
    subject = f"{ADVISORY_PREFIX}.STREAM.SNAPSHOT_CREATE.{stream.name}"
    if not stream.ajs.has_interest(subject):
        return
    event = _typed_event(_ADVISORY + "snapshot_create")
    event["stream"] = stream.name
    event["state"] = state
    event["client"] = _client(client)
    _send(stream.ajs, subject, event)


def snapshot_complete(
    stream: Stream, start_ns: int, end_ns: int, client: ClientSession | None, error: str = ""
) -> None:
    """JSSnapshotCompleteAdvisory (its `error` comes after `domain`, as in Go's struct)."""
    subject = f"{ADVISORY_PREFIX}.STREAM.SNAPSHOT_COMPLETE.{stream.name}"
    if not stream.ajs.has_interest(subject):
        return
    event = _typed_event(_ADVISORY + "snapshot_complete")
    event["stream"] = stream.name
    event["start"] = rfc3339_ns(start_ns)
    event["end"] = rfc3339_ns(end_ns)
    event["client"] = _client(client)
    if stream.ajs.domain:
        event["domain"] = stream.ajs.domain
    if error:
        event["error"] = error
    stream.ajs.reply(subject, go_json(event))


def restore_create(ajs: AccountJetStream, stream_name: str, client: ClientSession | None) -> None:
    """JSRestoreCreateAdvisory (sent when `$JS.API.STREAM.RESTORE` is accepted)."""
    subject = f"{ADVISORY_PREFIX}.STREAM.RESTORE_CREATE.{stream_name}"
    if not ajs.has_interest(subject):
        return
    event = _typed_event(_ADVISORY + "restore_create")
    event["stream"] = stream_name
    event["client"] = _client(client)
    _send(ajs, subject, event)


def restore_complete(
    ajs: AccountJetStream,
    stream_name: str,
    start_ns: int,
    end_ns: int,
    size: int,
    client: ClientSession | None,
) -> None:
    """JSRestoreCompleteAdvisory: when a restore finished, with the bytes it read."""
    subject = f"{ADVISORY_PREFIX}.STREAM.RESTORE_COMPLETE.{stream_name}"
    if not ajs.has_interest(subject):
        return
    event = _typed_event(_ADVISORY + "restore_complete")
    event["stream"] = stream_name
    event["start"] = rfc3339_ns(start_ns)
    event["end"] = rfc3339_ns(end_ns)
    event["bytes"] = size
    event["client"] = _client(client)
    _send(ajs, subject, event)


# -- consumers -------------------------------------------------------------------------------


class AdvisedConsumer(Protocol):
    """What a consumer's advisories read of it (`consumer.Consumer`)."""

    @property
    def name(self) -> str: ...

    @property
    def config(self) -> ConsumerConfig: ...

    @property
    def stream(self) -> Stream: ...

    @property
    def ajs(self) -> AccountJetStream: ...


def _consumer_event(o: AdvisedConsumer, kind: str) -> dict[str, Any]:
    event = _typed_event(kind)
    event["stream"] = o.stream.name
    event["consumer"] = o.name
    return event


def consumer_action(o: AdvisedConsumer, action: str) -> None:
    """JSConsumerActionAdvisory on `$JS.EVENT.ADVISORY.CONSUMER.CREATED|DELETED.<s>.<c>`
    (nats-server sends none when a consumer is updated)."""
    token = "CREATED" if action == CREATE else "DELETED"
    subject = f"{ADVISORY_PREFIX}.CONSUMER.{token}.{o.stream.name}.{o.name}"
    if not o.ajs.has_interest(subject):
        return
    event = _consumer_event(o, _ADVISORY + "consumer_action")
    event["action"] = action
    _send(o.ajs, subject, event)


def consumer_pause(o: AdvisedConsumer) -> None:
    """JSConsumerPauseAdvisory: the consumer's `pause_until` as its config holds it (Go's
    zero time when unset; `pause_until` has `omitempty`, which a struct never satisfies)
    and whether that is still ahead."""
    subject = f"{ADVISORY_PREFIX}.CONSUMER.PAUSE.{o.stream.name}.{o.name}"
    if not o.ajs.has_interest(subject):
        return
    event = _consumer_event(o, _ADVISORY + "consumer_pause")
    event["paused"] = paused_ahead(o)
    event["pause_until"] = o.config.pause_until or ZERO_TIME
    _send(o.ajs, subject, event)


def paused_ahead(o: AdvisedConsumer) -> bool:
    """Is the consumer paused until a time still to come? (nats-server's create request
    sends a pause advisory after its reply when so)."""
    until = o.config.pause_until
    if not until:
        return False
    try:
        return now_ns() < parse_go_time(until)[0]
    except ValueError:
        return False


def max_deliver(o: AdvisedConsumer, sseq: int, deliveries: int) -> None:
    """JSConsumerDeliveryExceededAdvisory: a message reached `max_deliver`."""
    subject = f"{ADVISORY_PREFIX}.CONSUMER.MAX_DELIVERIES.{o.stream.name}.{o.name}"
    if not o.ajs.has_interest(subject):
        return
    event = _consumer_event(o, _ADVISORY + "max_deliver")
    event["stream_seq"] = sseq
    event["deliveries"] = deliveries
    _send(o.ajs, subject, event)


def nak(o: AdvisedConsumer, dseq: int, sseq: int, deliveries: int) -> None:
    """JSConsumerDeliveryNakAdvisory: a delivery was -NAKed."""
    subject = f"{ADVISORY_PREFIX}.CONSUMER.MSG_NAKED.{o.stream.name}.{o.name}"
    if not o.ajs.has_interest(subject):
        return
    event = _consumer_event(o, _ADVISORY + "nak")
    event["consumer_seq"] = dseq
    event["stream_seq"] = sseq
    event["deliveries"] = deliveries
    _send(o.ajs, subject, event)


def terminated(o: AdvisedConsumer, dseq: int, sseq: int, deliveries: int, reason: str) -> None:
    """JSConsumerDeliveryTerminatedAdvisory: a +TERM (by the client, or by the server for a
    pending message that was deleted); `reason` is left out when empty."""
    subject = f"{ADVISORY_PREFIX}.CONSUMER.MSG_TERMINATED.{o.stream.name}.{o.name}"
    if not o.ajs.has_interest(subject):
        return
    event = _consumer_event(o, _ADVISORY + "terminated")
    event["consumer_seq"] = dseq
    event["stream_seq"] = sseq
    event["deliveries"] = deliveries
    if reason:
        event["reason"] = reason
    _send(o.ajs, subject, event)


def sample_freq(text: str) -> int:
    """The percentage of `sample_freq` ("30%" or "30"), 0 when it does not parse."""
    try:
        return int(text.removesuffix("%"))
    except ValueError:
        return 0


def ack_metric(
    o: AdvisedConsumer, dseq: int, sseq: int, deliveries: int, delivered_ns: int
) -> None:
    """JSConsumerAckMetric on `$JS.EVENT.METRIC.CONSUMER.ACK.<s>.<c>`: an explicit ack of a
    pending message, sampled at the consumer's `sample_freq` (nats-server's shouldSample:
    always at 100 or more, else when a draw below 100 is at most the frequency).
    `ack_time` is nanoseconds from the (last) delivery to the ack."""
    freq = sample_freq(o.config.sample_freq)
    if freq <= 0 or (freq < 100 and random.randrange(100) > freq):
        return
    subject = f"{METRIC_PREFIX}.CONSUMER.ACK.{o.stream.name}.{o.name}"
    if not o.ajs.has_interest(subject):
        return
    now = now_ns()
    event: dict[str, Any] = {
        "type": _METRIC + "consumer_ack",
        "id": _nuid.next(),
        "timestamp": rfc3339_ns(now),
    }
    event["stream"] = o.stream.name
    event["consumer"] = o.name
    event["consumer_seq"] = dseq
    event["stream_seq"] = sseq
    event["ack_time"] = now - delivered_ns
    event["deliveries"] = deliveries
    _send(o.ajs, subject, event)


def group_pinned(o: AdvisedConsumer, group: str, pin_id: str) -> None:
    """JSConsumerGroupPinnedAdvisory: a priority group pinned a new client."""
    _group_event(o, "PINNED", "consumer_group_pinned", group, "pinned_id", pin_id)


def group_unpinned(o: AdvisedConsumer, group: str, reason: str) -> None:
    """JSConsumerGroupUnpinnedAdvisory: the pin ended ("admin": the UNPIN API, "timeout")."""
    _group_event(o, "UNPINNED", "consumer_group_unpinned", group, "reason", reason)


def _group_event(
    o: AdvisedConsumer, token: str, kind: str, group: str, key: str, value: str
) -> None:
    subject = f"{ADVISORY_PREFIX}.CONSUMER.{token}.{o.stream.name}.{o.name}"
    if not o.ajs.has_interest(subject):
        return
    event = _typed_event(_ADVISORY + kind)
    event["account"] = o.ajs.account.name
    event["stream"] = o.stream.name
    event["consumer"] = o.name
    if o.ajs.domain:
        event["domain"] = o.ajs.domain
    event["group"] = group
    event[key] = value
    o.ajs.reply(subject, go_json(event))


# -- the API audit ---------------------------------------------------------------------------


def _client(client: ClientSession | None) -> dict[str, Any]:
    """ClientInfo.forAdvisory of the requester; a request made inside the server has none,
    which nats-server shows as an empty object, and so does one that came through a route
    (its publisher is the route: the client is on another server)."""
    if client is None or not hasattr(client, "connect_opts"):
        return {}
    return client_info(client, stopped=False)


def api_audit(
    ajs: AccountJetStream,
    client: ClientSession | None,
    subject: str,
    request: bytes,
    response: bytes,
) -> None:
    """JSAPIAudit on `$JS.EVENT.ADVISORY.API`: every `$JS.API` request answered, with its body
    (`request`, left out when empty) and the reply's JSON (`response`) as strings."""
    if not ajs.has_interest(API_AUDIT_SUBJECT):
        return
    if not subject.startswith("$JS.API."):
        # `$JS.<domain>.API.>` reaches nats-server's API mapped onto `$JS.API.>`.
        subject = "$JS.API." + subject.split(".", 3)[3]
    event = _typed_event(_ADVISORY + "api_audit")
    event["server"] = ajs.server.server_name
    event["client"] = _client(client)
    event["subject"] = subject
    if request:
        event["request"] = request.decode("utf-8", "surrogateescape")
    event["response"] = response.decode("utf-8", "surrogateescape")
    _send(ajs, API_AUDIT_SUBJECT, event)
