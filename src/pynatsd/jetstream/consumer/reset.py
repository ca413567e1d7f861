"""Consumer reset: `$JS.API.CONSUMER.RESET.<stream>.<consumer>`.

From nats-server's `server/consumer.go`: processResetReq, resetStartingSeq(Locked) and
resetLocalStartingSeq. As in nats-server, each consumer subscribes its own reset subject
(push and pull alike), so a reset of a consumer that does not exist is answered by nobody.

An empty request moves the consumer back to its ack floor: everything delivered and not
acknowledged is forgotten (no longer pending, no redelivery count) and will be delivered again
as new. `{"seq": N}` moves it to stream sequence N instead, which the deliver policy must allow:
`all` any N, `by_start_sequence` no N below `opt_start_seq` ("below start seq"),
`by_start_time` no N below the first message at `opt_start_time` ("below start time"), the
other policies none ("not allowed"). Either way the consumer starts counting deliveries from
1 again, and the reply is the consumer info plus `reset_seq`, the sequence it resumes from
(with the stream's identity in a `Nats-Stream-Identity` header when the request had one).
What the reset needs of its consumer is a `ResetOwner`.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, Protocol

from pynatsd.jetstream import errors
from pynatsd.jetstream.config import api_level_unmet
from pynatsd.jetstream.errors import ApiError, js_error
from pynatsd.jetstream.gostruct import RawNumber, decode_int, json_kind
from pynatsd.jetstream.util import go_json, go_unmarshal_syntax_error, parse_go_time
from pynatsd.protocol.headers import header_value

if TYPE_CHECKING:
    from pynatsd.jetstream.consumer.ports import ConsumedStream, ConsumerHost
    from pynatsd.jetstream.consumer.state import ConsumerState
    from pynatsd.jetstream.consumer_config import ConsumerConfig
    from pynatsd.jetstream.store.base import StoredMsg
    from pynatsd.protocol.events import Pub
    from pynatsd.server.client import Client
    from pynatsd.server.subscription import InternalSubscription

_RESPONSE_TYPE = "io.nats.jetstream.api.v1.consumer_reset_response"
_REQUEST = "JSApiConsumerResetRequest"


def decode_reset_request(body: bytes) -> int:
    """The sequence a reset request asks for, 0 for the ack floor. Go decodes the body with
    json.Unmarshal: unknown fields are ignored and field names match in any case."""
    if not body:
        return 0
    text = body.decode("utf-8", "replace")
    try:
        data = json.loads(text, parse_float=RawNumber)
    except ValueError as e:
        raise errors.invalid_json(go_unmarshal_syntax_error(text, e)) from None
    if data is None:
        return 0
    if not isinstance(data, dict):
        raise errors.invalid_json(
            f"json: cannot unmarshal {json_kind(data)} into Go value of type server.{_REQUEST}"
        )
    value = data.get("seq")
    if value is None:
        value = next((v for k, v in data.items() if k.lower() == "seq"), None)
    if value is None:
        return 0
    if isinstance(value, RawNumber):
        raise errors.invalid_json(
            f"json: cannot unmarshal number {value} into Go struct field {_REQUEST}.seq "
            "of type uint64"
        )
    return decode_int(value, f"{_REQUEST}.seq", "uint64")


class ResetOwner(Protocol):
    """What the reset uses of its consumer."""

    @property
    def closed(self) -> bool: ...

    @property
    def config(self) -> ConsumerConfig: ...

    @property
    def stream(self) -> ConsumedStream: ...

    @property
    def ajs(self) -> ConsumerHost: ...

    @property
    def state(self) -> ConsumerState: ...

    def info_reply(self, full_metadata: bool = True) -> dict[str, Any]: ...

    def forget_delivered(self) -> None:
        """Nothing to redeliver, no ack timer, no read-ahead, the pending count afresh."""

    def load_next(self, start: int) -> StoredMsg | None:
        """The first message at or after `start` that the consumer's filters take."""

    def save(self) -> None: ...

    def signal(self) -> None: ...


class ConsumerReset:
    """Moving a consumer's starting point."""

    def __init__(self, owner: ResetOwner) -> None:
        self._owner = owner

    def on_reset(self, sub: InternalSubscription, publisher: Client | None, ev: Pub) -> None:
        """Go's processResetReq."""
        owner = self._owner
        if not ev.reply or owner.closed:
            return
        hs = ev.header_size
        header = ev.payload[:hs] if hs > 0 else b""
        body = ev.payload[hs:] if hs > 0 else ev.payload
        out: dict[str, Any] = {"type": _RESPONSE_TYPE}
        reply_header = b""
        try:
            if api_level_unmet(header):
                raise js_error("RequiredApiLevel")
            seq = self.reset_to(decode_reset_request(body))
        except ApiError as e:
            out["error"] = e.to_json()
            out["reset_seq"] = 0
        else:
            out.update(owner.info_reply())
            out["reset_seq"] = seq
            if header_value(header, "Nats-Stream-Identity") is not None:
                # The requester checks it was this stream, not one recreated under its name.
                identity = owner.stream.identity()
                reply_header = f"NATS/1.0\r\nNats-Stream-Identity: {identity}\r\n\r\n".encode()
        owner.ajs.reply(ev.reply, go_json(out), reply_header)

    def reset_to(self, seq: int) -> int:
        """Go's resetStartingSeqLocked: deliver from stream sequence `seq` (0: the ack floor)
        on. Returns the sequence the consumer resumes from."""
        owner = self._owner
        cfg = owner.config
        state = owner.state
        policy = cfg.deliver_policy
        if seq == 0:
            seq = state.asflr + 1
        elif policy == "by_start_sequence":
            if seq < cfg.opt_start_seq:
                raise js_error("ConsumerInvalidReset", err="below start seq")
        elif policy == "by_start_time":
            try:
                ts = parse_go_time(cfg.opt_start_time)[0]
            except ValueError:
                ts = 0
            if seq < owner.stream.store.seq_for_time(ts):
                raise js_error("ConsumerInvalidReset", err="below start time")
        elif policy != "all":
            raise js_error("ConsumerInvalidReset", err="not allowed")
        seq = max(seq, 1)
        # Go's resetLocalStartingSeq: nothing pending, nothing to redeliver, deliveries
        # counted from 1 again.
        state.reset_to(seq)
        owner.forget_delivered()
        owner.save()
        if owner.stream.config.retention == "interest":
            self._drop_uninteresting()
        owner.signal()
        return seq

    def _drop_uninteresting(self) -> None:
        """Go's checkStateForInterestStream after a reset: messages below the new start that
        no other consumer needs leave an interest stream, as if this one had acked them."""
        owner = self._owner
        stream = owner.stream
        state = owner.state
        st = stream.store.state()
        if state.asflr > st.last_seq:
            return  # as Go: the floor is past the stream, nothing is checked
        seq = st.first_seq
        while seq <= state.asflr:
            msg = owner.load_next(seq)
            if msg is None or msg.seq > state.asflr:
                break
            stream.on_acked(owner, msg.seq)
            seq = msg.seq + 1
