"""A consumer's configuration, typed: nats-server's `ConsumerConfig`, its defaults and what it
means (filters, delete threshold).

Field names are the JSON keys of nats-server's `server/consumer.go` (as nats.py's
`nats.js.api.ConsumerConfig` has them), in Go's struct order, each with its Go type and
`omitempty` (see `gostruct.py`), so that `to_json()` writes exactly what nats-server writes.
Durations are integers of nanoseconds, times strings as Go formats them. From nats-server:
`setConsumerConfigDefaults`, `gatherSubjectFilters`, `updateInactiveThreshold`,
`setStaticConsumerMetadata`. The checks (checkConsumerCfg, checkNewConsumerConfig, the
work-queue rules) are in `consumer_checks.py`.
"""

from __future__ import annotations

import dataclasses
import random
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pynatsd.jetstream import errors
from pynatsd.jetstream.config import (
    DEFAULT_ACK_WAIT,
    DEFAULT_EPHEMERAL_INACTIVE,
    DEFAULT_MAX_ACK_PENDING,
    DEFAULT_MAX_WAITING,
    DEFAULT_PINNED_TTL,
    MS,
    NS,
    pedantic_error,
    reply_metadata,
    static_metadata,
)
from pynatsd.jetstream.gostruct import (
    decode,
    encode,
    from_stored,
    go,
    go_struct,
    to_stored,
    unmarshal_error,
)
from pynatsd.jetstream.util import parse_go_time

if TYPE_CHECKING:
    from pynatsd.jetstream.stream_config import StreamConfig


@go_struct
@dataclass(slots=True)
class ConsumerConfig:
    """Go's ConsumerConfig."""

    durable_name: str = go("string", True)
    name: str = go("string", True)
    description: str = go("string", True)
    deliver_policy: str = go(
        "enum:all,last,new,by_start_sequence,by_start_time,last_per_subject", default="all"
    )
    opt_start_seq: int = go("uint64", True)
    opt_start_time: str = go("time", True)
    ack_policy: str = go("enum:none,all,explicit,flow_control", default="none")
    ack_wait: int = go("duration", True)
    max_deliver: int = go("int", True)
    backoff: list[int] = go("[]duration", True)
    filter_subject: str = go("string", True)
    filter_subjects: list[str] = go("[]string", True)
    replay_policy: str = go("enum:instant,original", default="instant")
    rate_limit_bps: int = go("uint64", True)
    sample_freq: str = go("string", True)
    max_waiting: int = go("int", True)
    max_ack_pending: int = go("int", True)
    flow_control: bool = go("bool", True)
    headers_only: bool = go("bool", True)
    max_batch: int = go("int", True)
    max_expires: int = go("duration", True)
    max_bytes: int = go("int", True)
    deliver_subject: str = go("string", True)
    deliver_group: str = go("string", True)
    idle_heartbeat: int = go("duration", True)
    inactive_threshold: int = go("duration", True)
    num_replicas: int = go("int")
    mem_storage: bool = go("bool", True)
    direct: bool = go("bool", True)
    sourcing: bool = go("bool", True)
    metadata: dict[str, str] = go("map", True)
    pause_until: str = go("time", True)
    priority_groups: list[str] = go("[]string", True)
    # Go's zero value stands for "none" (decoding "none" gives "").
    priority_policy: str = go("enum:none,overflow,pinned_client,prioritized", True)
    priority_timeout: int = go("duration", True)

    @classmethod
    def from_json(
        cls, raw: dict[str, Any], path: str = "CreateConsumerRequest.config"
    ) -> ConsumerConfig:
        """Strict decoding as nats-server's API does it (`path` names the struct in errors);
        defaults and checks that need the stream come after (`set_consumer_defaults`,
        `consumer_checks.py`)."""
        return decode(cls, raw, path)

    def to_json(self) -> dict[str, Any]:
        """The JSON object nats-server writes for this config (struct order, `omitempty`)."""
        return encode(self)

    def to_reply(self, full_metadata: bool = True) -> dict[str, Any]:
        """The config as nats-server writes it in replies; info and create replies carry the
        server's own metadata keys, lists do not (setDynamicConsumerMetadata)."""
        out = encode(self)
        metadata = reply_metadata(self.metadata, full_metadata)
        # Go writes the map in key order, in the struct's place (after `sourcing`), even empty.
        rebuilt: dict[str, Any] = {}
        placed = False
        for key, value in out.items():
            if key in _AFTER_METADATA and not placed:
                rebuilt["metadata"] = metadata
                placed = True
            if key == "metadata":
                continue
            rebuilt[key] = value
        if not placed:
            rebuilt["metadata"] = metadata
        return rebuilt

    @classmethod
    def from_stored(cls, data: dict[str, Any]) -> ConsumerConfig:
        """A config read back from a consumer's saved state (perhaps an older pynatsd's)."""
        return from_stored(cls, data)

    def to_stored(self) -> dict[str, Any]:
        """The form the consumer's saved state keeps: every field, zero values included."""
        return to_stored(self)

    def filters(self) -> list[str]:
        """nats-server's gatherSubjectFilters."""
        if self.filter_subjects:
            return list(self.filter_subjects)
        if self.filter_subject:
            return [self.filter_subject]
        return []


_AFTER_METADATA = ("pause_until", "priority_groups", "priority_policy", "priority_timeout")


def decode_consumer_request(raw: dict[str, Any]) -> tuple[str, ConsumerConfig | None, str, bool]:
    """A `CreateConsumerRequest`: (stream_name, config or None, action, pedantic)."""
    for key in raw:
        if key not in ("stream_name", "config", "action", "pedantic"):
            raise errors.invalid_json(f'json: unknown field "{key}"')
    stream = raw.get("stream_name")
    if stream is not None and not isinstance(stream, str):
        raise unmarshal_error(stream, "CreateConsumerRequest.stream_name", "string")
    action = raw.get("action")
    if action is None:
        action = ""
    if action not in ("", "create", "update", "create_or_update"):
        raise errors.invalid_json(f'can not unmarshal "\\"{action}\\""')
    pedantic = raw.get("pedantic")
    if pedantic is not None and not isinstance(pedantic, bool):
        raise unmarshal_error(pedantic, "CreateConsumerRequest.pedantic", "bool")
    config = raw.get("config")
    if config is None:
        return stream or "", None, action, bool(pedantic)
    if not isinstance(config, dict):
        raise unmarshal_error(config, "CreateConsumerRequest.config", "server.ConsumerConfig")
    return stream or "", ConsumerConfig.from_json(config), action, bool(pedantic)


def set_static_consumer_metadata(cfg: ConsumerConfig) -> None:
    """`_nats.req.level`: the API level the features in use need (jetstream_versioning.go)."""
    level = 0
    if cfg.pause_until and parse_go_time(cfg.pause_until)[0] > 0:
        level = 1
    if cfg.priority_policy not in ("", "none") or cfg.priority_timeout or cfg.priority_groups:
        level = 1
    if cfg.ack_policy == "flow_control":
        level = 4
    cfg.metadata = static_metadata(cfg.metadata, level)


def set_consumer_defaults(
    cfg: ConsumerConfig, stream_cfg: StreamConfig, pedantic: bool, acc_max_ack_pending: int = 0
) -> None:
    """nats-server's setConsumerConfigDefaults."""
    if cfg.max_deliver == 0 or cfg.max_deliver < -1:
        if pedantic and cfg.max_deliver < -1:
            raise pedantic_error("max_deliver must be set to -1")
        cfg.max_deliver = -1
    if cfg.max_waiting < 0:
        if pedantic:
            raise pedantic_error("max_waiting must not be negative")
        cfg.max_waiting = 0
    if cfg.max_ack_pending < -1:
        if pedantic:
            raise pedantic_error("max_ack_pending must be set to -1")
        cfg.max_ack_pending = -1
    for key, label in (
        ("max_batch", "max_batch"),
        ("max_expires", "max_expires"),
        ("max_bytes", "max_bytes"),
        ("idle_heartbeat", "idle_heartbeat"),
        ("inactive_threshold", "inactive_threshold"),
        ("priority_timeout", "priority_timeout"),
    ):
        if getattr(cfg, key) < 0:
            if pedantic:
                raise pedantic_error(f"{label} must not be negative")
            setattr(cfg, key, 0)
    if not cfg.deliver_subject and cfg.max_waiting == 0:
        cfg.max_waiting = DEFAULT_MAX_WAITING
    if cfg.ack_wait == 0 and cfg.ack_policy in ("explicit", "all"):
        cfg.ack_wait = DEFAULT_ACK_WAIT
    if cfg.backoff:
        if pedantic and cfg.ack_wait != cfg.backoff[0]:
            raise pedantic_error("first backoff value has to equal batch AckWait")
        cfg.ack_wait = cfg.backoff[0]
    limits = stream_cfg.consumer_limits
    if cfg.max_ack_pending == 0:
        if pedantic and limits.max_ack_pending > 0:
            raise pedantic_error("max_ack_pending must be set if it's configured in stream limits")
        cfg.max_ack_pending = limits.max_ack_pending
    if cfg.inactive_threshold == 0:
        if pedantic and limits.inactive_threshold > 0:
            raise pedantic_error(
                "inactive_threshold must be set if it's configured in stream limits"
            )
        cfg.inactive_threshold = limits.inactive_threshold
    if cfg.max_ack_pending == 0 and cfg.ack_policy != "none":
        pending = DEFAULT_MAX_ACK_PENDING
        if 0 < acc_max_ack_pending < pending:
            pending = acc_max_ack_pending
        cfg.max_ack_pending = pending
    if cfg.priority_policy == "pinned_client" and cfg.priority_timeout == 0:
        cfg.priority_timeout = DEFAULT_PINNED_TTL
    if cfg.ack_policy == "flow_control" and not pedantic:
        cfg.flow_control = True
        cfg.idle_heartbeat = NS


def consumers_equal(a: ConsumerConfig, b: ConsumerConfig) -> bool:
    """Equal configs, ignoring the server's own metadata keys (copyConsumerMetadata)."""
    if dataclasses.replace(a, metadata={}) != dataclasses.replace(b, metadata={}):
        return False
    ma = {k: v for k, v in a.metadata.items() if not k.startswith("_nats.")}
    mb = {k: v for k, v in b.metadata.items() if not k.startswith("_nats.")}
    return ma == mb


def delete_threshold(config: ConsumerConfig, durable: bool, push: bool) -> int:
    """Go's updateInactiveThreshold: how long (ns) the consumer may stay inactive before it
    is deleted, 0 for never. Ephemerals always have a threshold (5 s by default, written into
    the config as nats-server does); a pull consumer's gets 100 ms to 1 s of jitter."""
    if not durable and config.inactive_threshold <= 0:
        config.inactive_threshold = DEFAULT_EPHEMERAL_INACTIVE
        return DEFAULT_EPHEMERAL_INACTIVE + 100 * MS + random.randrange(900) * MS
    if config.inactive_threshold > 0:
        extra = 0 if push else 100 * MS + random.randrange(900) * MS
        return int(config.inactive_threshold) + extra
    return 0


def cheap_filters(filters: list[str]) -> bool:
    """No filter or one literal filter: the store counts pending messages in O(log n)."""
    return not filters or (len(filters) == 1 and "*" not in filters[0] and ">" not in filters[0])
