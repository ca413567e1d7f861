"""A stream's configuration, typed: nats-server's `StreamConfig` and the structs inside it.

Field names are the JSON keys of nats-server's `server/stream.go` (as nats.py's
`nats.js.api.StreamConfig` has them), in Go's struct order, each with its Go type and
`omitempty` (see `gostruct.py`): that order and those flags make `to_json()` write exactly what
nats-server writes. Durations are integers of nanoseconds, times are strings as Go formats
them. A config holds every field (zero values included), so two configs compare with `==`.

The checks of a new or updated config (checkStreamCfg, configUpdateCheck) are in
`stream_checks.py`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pynatsd.jetstream.config import reply_metadata, static_metadata
from pynatsd.jetstream.gostruct import decode, encode, from_stored, go, go_struct, to_stored


@go_struct
@dataclass(slots=True)
class Placement:
    """Where a stream's replicas go (Go's Placement)."""

    cluster: str = go("string", True)
    tags: list[str] = go("[]string", True)
    preferred: str = go("string", True)


@go_struct
@dataclass(slots=True)
class SubjectTransformConfig:
    """A subject mapping from `src` to `dest` (Go's SubjectTransformConfig)."""

    src: str = go("string")
    dest: str = go("string")


@go_struct
@dataclass(slots=True)
class ExternalStream:
    """A mirror or source in another domain or account: its API prefix and deliver prefix."""

    api: str = go("string")
    deliver: str = go("string")


@go_struct
@dataclass(slots=True)
class StreamConsumerSource:
    """Source through an existing consumer of the origin (Go's StreamConsumerSource)."""

    name: str = go("string", True)
    deliver_subject: str = go("string", True)


@go_struct
@dataclass(slots=True)
class StreamSource:
    """A mirror or one of the sources of a stream (Go's StreamSource)."""

    name: str = go("string")
    opt_start_seq: int = go("uint64", True)
    opt_start_time: str = go("time", True)
    filter_subject: str = go("string", True)
    subject_transforms: list[SubjectTransformConfig] = go("[]struct:SubjectTransformConfig", True)
    external: ExternalStream | None = go("*struct:ExternalStream", True)
    consumer: StreamConsumerSource | None = go("*struct:StreamConsumerSource", True)


@go_struct
@dataclass(slots=True)
class RePublish:
    """Republish stored messages from `src` to `dest` (Go's RePublish)."""

    src: str = go("string", True)
    dest: str = go("string")
    headers_only: bool = go("bool", True)


@go_struct
@dataclass(slots=True)
class StreamConsumerLimits:
    """Defaults and ceilings for the stream's consumers (Go's StreamConsumerLimits)."""

    inactive_threshold: int = go("duration", True)
    max_ack_pending: int = go("int", True)


@go_struct
@dataclass(slots=True)
class StreamConfig:
    """Go's StreamConfig."""

    name: str = go("string")
    description: str = go("string", True)
    subjects: list[str] = go("[]string", True)
    retention: str = go("enum:limits,interest,workqueue", default="limits")
    max_consumers: int = go("int")
    max_msgs: int = go("int64")
    max_bytes: int = go("int64")
    max_age: int = go("duration")
    max_msgs_per_subject: int = go("int64")
    max_msg_size: int = go("int32", True)
    discard: str = go("enum:old,new", default="old")
    storage: str = go("enum:file,memory", default="file")
    num_replicas: int = go("int")
    no_ack: bool = go("bool", True)
    duplicate_window: int = go("duration", True)
    placement: Placement | None = go("*struct:Placement", True)
    mirror: StreamSource | None = go("*struct:StreamSource", True)
    # Go's []*StreamSource: an element may be null in a request (refused by the checks).
    sources: list[StreamSource | None] = go("[]*struct:StreamSource", True)
    compression: str = go("enum:none,s2", default="none")
    first_seq: int = go("uint64", True)
    subject_transform: SubjectTransformConfig | None = go("*struct:SubjectTransformConfig", True)
    republish: RePublish | None = go("*struct:RePublish", True)
    allow_direct: bool = go("bool")
    mirror_direct: bool = go("bool")
    discard_new_per_subject: bool = go("bool", True)
    sealed: bool = go("bool")
    deny_delete: bool = go("bool")
    deny_purge: bool = go("bool")
    allow_rollup_hdrs: bool = go("bool")
    consumer_limits: StreamConsumerLimits = go("struct:StreamConsumerLimits")
    allow_msg_ttl: bool = go("bool")
    subject_delete_marker_ttl: int = go("duration", True)
    allow_msg_counter: bool = go("bool", True)
    allow_atomic: bool = go("bool", True)
    allow_msg_schedules: bool = go("bool", True)
    # Go's zero value stands for "default" (decoding "default" gives "").
    persist_mode: str = go("enum:default,async", True)
    allow_batched: bool = go("bool", True)
    metadata: dict[str, str] = go("map", True)

    @classmethod
    def from_json(cls, raw: dict[str, Any], path: str = "StreamConfig") -> StreamConfig:
        """Strict decoding as nats-server's API does it (`path` names the struct in errors);
        the checks that need the account come after, in `stream_checks.py`."""
        return decode(cls, raw, path)

    def to_json(self) -> dict[str, Any]:
        """The JSON object nats-server writes for this config (struct order, `omitempty`)."""
        return encode(self)

    def to_reply(self, full_metadata: bool = True) -> dict[str, Any]:
        """The config as replies show it; create, info and update replies carry the server's
        own metadata keys too (setDynamicStreamMetadata)."""
        out = encode(self)
        out.pop("metadata", None)
        metadata = reply_metadata(self.metadata, full_metadata)
        if metadata:
            out["metadata"] = metadata
        return out

    @classmethod
    def from_stored(cls, data: dict[str, Any]) -> StreamConfig:
        """A config read back from meta.json (perhaps written by an older pynatsd)."""
        return from_stored(cls, data)

    def to_stored(self) -> dict[str, Any]:
        """The form meta.json keeps: every field, zero values included."""
        return to_stored(self)


def decode_stream_request(raw: dict[str, Any]) -> tuple[StreamConfig, bool]:
    """A `StreamConfigRequest`: the config and the `pedantic` flag of the wrapper."""
    extra: dict[str, Any] = {}
    cfg = decode(StreamConfig, raw, "StreamConfigRequest", {"pedantic": "bool"}, extra)
    return cfg, bool(extra.get("pedantic", False))


def set_static_stream_metadata(cfg: StreamConfig) -> None:
    """`_nats.req.level`: the API level the features in use need (jetstream_versioning.go)."""
    level = 0
    if cfg.allow_msg_ttl or cfg.subject_delete_marker_ttl > 0:
        level = max(level, 1)
    if (
        cfg.allow_msg_counter
        or cfg.allow_atomic
        or cfg.allow_msg_schedules
        or cfg.persist_mode == "async"
    ):
        level = max(level, 2)
    if cfg.allow_batched:
        level = max(level, 4)
    cfg.metadata = static_metadata(cfg.metadata, level)


def stream_configs_equal(a: StreamConfig, b: StreamConfig) -> bool:
    """Equal as nats-server compares them: by what they encode to."""
    return a.to_json() == b.to_json()
