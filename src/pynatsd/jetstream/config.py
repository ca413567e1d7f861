"""Stream and consumer configurations: strict decoding, validation, defaults and the reply form.

The JSON field names, their order in replies, which ones Go leaves out when empty (`omitempty`),
the defaults filled in and the error texts follow nats-server: `StreamConfig` and
`checkStreamCfg` in `server/stream.go`, `ConsumerConfig`, `setConsumerConfigDefaults` and
`checkConsumerCfg` in `server/consumer.go`. Decoding is strict as in nats-server's API: an
unknown field or a value of the wrong JSON type is an `invalid JSON` error naming the field the
way Go's decoder does.

A configuration is kept as a plain dict holding every field (zero values included), so that
comparing two of them is comparing dicts; `stream_config_reply`/`consumer_config_reply` turn one
into the JSON nats-server would write.
"""

from __future__ import annotations

import json
import re
import secrets
import string
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pynatsd.jetstream import errors
from pynatsd.jetstream.errors import ApiError, js_error
from pynatsd.jetstream.util import format_go_time, go_duration, parse_go_time

if TYPE_CHECKING:
    from pynatsd.jetstream.stream_config import StreamConfig
from pynatsd.subjects import (
    is_literal,
    is_valid_subject,
    match_literal,
)

NS = 1_000_000_000
MS = 1_000_000
DEFAULT_DUPLICATE_WINDOW = 120 * NS
DEFAULT_ACK_WAIT = 30 * NS
DEFAULT_MAX_WAITING = 512
DEFAULT_MAX_ACK_PENDING = 1000
DEFAULT_EPHEMERAL_INACTIVE = 5 * NS
DEFAULT_PINNED_TTL = 120 * NS
SERVER_VERSION = "2.15.1"
API_LEVEL = "5"
MAX_NAME_LEN = 255
MAX_DESCRIPTION_LEN = 4 * 1024
MAX_METADATA_LEN = 128 * 1024
STREAM_MAX_REPLICAS = 5
_DYNAMIC_METADATA = ("_nats.ver", "_nats.level")
_GROUP_NAME = re.compile(r"^[a-zA-Z0-9/_=-]{1,16}$")


# -- Go struct descriptions ---------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Field:
    """One field of a Go struct: JSON key, Go type, `omitempty`. Types: string, bool, int,
    int32, int64, uint64, duration, time, []string, []duration, map, enum:a,b and struct:Name
    (a value), *struct:Name (a pointer: absent when nil) or []*struct:Name."""

    key: str
    go: str
    omitempty: bool = False


_GO_NAMES = {
    "duration": "time.Duration",
    "time": "time.Time",
    "map": "map[string]string",
    "[]duration": "time.Duration",
}

STRUCTS: dict[str, list[Field]] = {
    "StreamConfig": [
        Field("name", "string"),
        Field("description", "string", True),
        Field("subjects", "[]string", True),
        Field("retention", "enum:limits,interest,workqueue"),
        Field("max_consumers", "int"),
        Field("max_msgs", "int64"),
        Field("max_bytes", "int64"),
        Field("max_age", "duration"),
        Field("max_msgs_per_subject", "int64"),
        Field("max_msg_size", "int32", True),
        Field("discard", "enum:old,new"),
        Field("storage", "enum:file,memory"),
        Field("num_replicas", "int"),
        Field("no_ack", "bool", True),
        Field("duplicate_window", "duration", True),
        Field("placement", "*struct:Placement", True),
        Field("mirror", "*struct:StreamSource", True),
        Field("sources", "[]*struct:StreamSource", True),
        Field("compression", "enum:none,s2"),
        Field("first_seq", "uint64", True),
        Field("subject_transform", "*struct:SubjectTransformConfig", True),
        Field("republish", "*struct:RePublish", True),
        Field("allow_direct", "bool"),
        Field("mirror_direct", "bool"),
        Field("discard_new_per_subject", "bool", True),
        Field("sealed", "bool"),
        Field("deny_delete", "bool"),
        Field("deny_purge", "bool"),
        Field("allow_rollup_hdrs", "bool"),
        Field("consumer_limits", "struct:StreamConsumerLimits"),
        Field("allow_msg_ttl", "bool"),
        Field("subject_delete_marker_ttl", "duration", True),
        Field("allow_msg_counter", "bool", True),
        Field("allow_atomic", "bool", True),
        Field("allow_msg_schedules", "bool", True),
        Field("persist_mode", "enum:default,async", True),
        Field("allow_batched", "bool", True),
        Field("metadata", "map", True),
    ],
    "Placement": [
        Field("cluster", "string", True),
        Field("tags", "[]string", True),
        Field("preferred", "string", True),
    ],
    "StreamSource": [
        Field("name", "string"),
        Field("opt_start_seq", "uint64", True),
        Field("opt_start_time", "time", True),
        Field("filter_subject", "string", True),
        Field("subject_transforms", "[]struct:SubjectTransformConfig", True),
        Field("external", "*struct:ExternalStream", True),
        Field("consumer", "*struct:StreamConsumerSource", True),
    ],
    "ExternalStream": [Field("api", "string"), Field("deliver", "string")],
    "StreamConsumerSource": [
        Field("name", "string", True),
        Field("deliver_subject", "string", True),
    ],
    "SubjectTransformConfig": [Field("src", "string"), Field("dest", "string")],
    "RePublish": [
        Field("src", "string", True),
        Field("dest", "string"),
        Field("headers_only", "bool", True),
    ],
    "StreamConsumerLimits": [
        Field("inactive_threshold", "duration", True),
        Field("max_ack_pending", "int", True),
    ],
    "ConsumerConfig": [
        Field("durable_name", "string", True),
        Field("name", "string", True),
        Field("description", "string", True),
        Field(
            "deliver_policy", "enum:all,last,new,by_start_sequence,by_start_time,last_per_subject"
        ),
        Field("opt_start_seq", "uint64", True),
        Field("opt_start_time", "time", True),
        Field("ack_policy", "enum:none,all,explicit,flow_control"),
        Field("ack_wait", "duration", True),
        Field("max_deliver", "int", True),
        Field("backoff", "[]duration", True),
        Field("filter_subject", "string", True),
        Field("filter_subjects", "[]string", True),
        Field("replay_policy", "enum:instant,original"),
        Field("rate_limit_bps", "uint64", True),
        Field("sample_freq", "string", True),
        Field("max_waiting", "int", True),
        Field("max_ack_pending", "int", True),
        Field("flow_control", "bool", True),
        Field("headers_only", "bool", True),
        Field("max_batch", "int", True),
        Field("max_expires", "duration", True),
        Field("max_bytes", "int", True),
        Field("deliver_subject", "string", True),
        Field("deliver_group", "string", True),
        Field("idle_heartbeat", "duration", True),
        Field("inactive_threshold", "duration", True),
        Field("num_replicas", "int"),
        Field("mem_storage", "bool", True),
        Field("direct", "bool", True),
        Field("sourcing", "bool", True),
        Field("metadata", "map", True),
        Field("pause_until", "time", True),
        Field("priority_groups", "[]string", True),
        Field("priority_policy", "enum:none,overflow,pinned_client,prioritized", True),
        Field("priority_timeout", "duration", True),
    ],
}

# The request wrappers: their own fields besides the embedded config.
_STREAM_REQUEST_EXTRA = {"pedantic": "bool"}
_ENUM_ZERO = {
    "retention": "limits",
    "discard": "old",
    "storage": "file",
    "compression": "none",
    "persist_mode": "",
    "deliver_policy": "all",
    "ack_policy": "none",
    "replay_policy": "instant",
    "priority_policy": "",
}


def _zero(f: Field) -> Any:
    go = f.go
    if go.startswith("enum:"):
        return _ENUM_ZERO.get(f.key, "")
    if go in ("string", "time"):
        return ""
    if go == "bool":
        return False
    if go in ("int", "int32", "int64", "uint64", "duration"):
        return 0
    if go.startswith("[]"):
        return []
    if go == "map":
        return {}
    if go.startswith("*"):
        return None
    if go.startswith("struct:"):
        return complete(go[7:], {})
    raise AssertionError(go)


def complete(struct: str, cfg: dict[str, Any]) -> dict[str, Any]:
    """`cfg` with every field of `struct` present (zero values for the missing ones)."""
    out: dict[str, Any] = {}
    for f in STRUCTS[struct]:
        out[f.key] = cfg[f.key] if f.key in cfg else _zero(f)
    return out


def _empty(value: Any) -> bool:
    return value is None or value is False or value == 0 or value == "" or value in ([], {})


def encode(struct: str, cfg: dict[str, Any]) -> dict[str, Any]:
    """The JSON object Go's encoder writes for `cfg`: struct order, `omitempty` applied."""
    out: dict[str, Any] = {}
    for f in STRUCTS[struct]:
        value = cfg.get(f.key, _zero(f))
        if f.omitempty and _empty(value):
            continue
        go = f.go
        if go.startswith("*struct:") and value is not None:
            value = encode(go[8:], value)
        elif go.startswith("struct:"):
            value = encode(go[7:], value or {})
        elif go.startswith("[]*struct:") or go.startswith("[]struct:"):
            name = go.split(":", 1)[1]
            value = [encode(name, v) for v in value]
        elif go == "map" and value is not None:
            value = dict(sorted(value.items()))
        out[f.key] = value
    return out


def _json_kind(value: Any) -> str:
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    if isinstance(value, dict):
        return "object"
    return "null"


def _unmarshal_error(value: Any, path: str, go_type: str, element: bool = False) -> ApiError:
    kind = _json_kind(value)
    if (kind == "number" and isinstance(value, float) and not float(value).is_integer()) or (
        kind == "number" and go_type in ("uint64",) and isinstance(value, int) and value < 0
    ):
        kind = f"number {value}"
    where = path if element else f"Go struct field {path}"
    return errors.invalid_json(f"json: cannot unmarshal {kind} into {where} of type {go_type}")


_INT_RANGES = {
    "int": (-(2**63), 2**63 - 1),
    "int64": (-(2**63), 2**63 - 1),
    "int32": (-(2**31), 2**31 - 1),
    "uint64": (0, 2**64 - 1),
    "duration": (-(2**63), 2**63 - 1),
}


def _decode_int(value: Any, path: str, go: str, element: bool = False) -> int:
    gname = _GO_NAMES.get(go, go)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise _unmarshal_error(value, path, gname, element)
    if isinstance(value, float):
        if not value.is_integer():
            raise _unmarshal_error(value, path, gname, element)
        value = int(value)
    lo, hi = _INT_RANGES[go]
    if not lo <= value <= hi:
        raise errors.invalid_json(
            f"json: cannot unmarshal number {value} into "
            f"{path if element else 'Go struct field ' + path} of type {gname}"
        )
    return int(value)


def _decode_value(value: Any, f: Field, path: str) -> Any:
    go = f.go
    if go.startswith("enum:"):
        if not isinstance(value, str) or value not in go[5:].split(","):
            # Go's UnmarshalJSON of these enums: `can not unmarshal %q` of the raw JSON.
            raise errors.invalid_json(f"can not unmarshal {json.dumps(json.dumps(value))}")
        # Go keeps the zero value of these enums, which `omitempty` then leaves out.
        if (f.key, value) in (("persist_mode", "default"), ("priority_policy", "none")):
            return ""
        return value
    if go == "string":
        if not isinstance(value, str):
            raise _unmarshal_error(value, path, "string")
        return value
    if go == "time":
        if not isinstance(value, str):
            raise _unmarshal_error(value, path, "time.Time")
        try:
            return format_go_time(*parse_go_time(value))
        except ValueError:
            raise errors.invalid_json(
                f'parsing time "{value}" as "2006-01-02T15:04:05Z07:00": '
                f'cannot parse "{value}" as "2006"'
            ) from None
    if go == "bool":
        if not isinstance(value, bool):
            raise _unmarshal_error(value, path, "bool")
        return value
    if go in _INT_RANGES:
        return _decode_int(value, path, go)
    if go.startswith("[]"):
        if not isinstance(value, list):
            raise _unmarshal_error(value, path, "[]" + _GO_NAMES.get(go[2:], go[2:]))
        elem = go[2:]
        out: list[Any] = []
        for i, v in enumerate(value):
            epath = f"{path}.{i}"
            if elem == "string":
                if not isinstance(v, str):
                    raise _unmarshal_error(v, epath, "string", element=True)
                out.append(v)
            elif elem == "duration":
                out.append(_decode_int(v, epath, "duration", element=True))
            elif elem.startswith("*struct:") or elem.startswith("struct:"):
                name = elem.split(":", 1)[1]
                if v is None and elem.startswith("*"):
                    out.append(None)
                    continue
                if not isinstance(v, dict):
                    raise _unmarshal_error(v, epath, "server." + name, element=True)
                out.append(decode(name, v, path))
            else:
                raise AssertionError(elem)
        return out
    if go == "map":
        if not isinstance(value, dict):
            raise _unmarshal_error(value, path, "map[string]string")
        for k, v in value.items():
            if not isinstance(v, str):
                raise _unmarshal_error(v, f"{path}.{k}", "string")
        return dict(value)
    if go.startswith("*struct:") or go.startswith("struct:"):
        name = go.split(":", 1)[1]
        if not isinstance(value, dict):
            raise _unmarshal_error(value, path, "server." + name)
        return decode(name, value, path)
    raise AssertionError(go)


def decode(
    struct: str, raw: dict[str, Any], path: str, extra: dict[str, str] | None = None
) -> dict[str, Any]:
    """Decode a JSON object into `struct` as Go's strict decoder would (unknown fields are an
    error, JSON null leaves the zero value); the result holds every field."""
    fields = {f.key: f for f in STRUCTS[struct]}
    out = complete(struct, {})
    for key, value in raw.items():
        f = fields.get(key)
        if f is None:
            if extra is not None and key in extra:
                if value is not None:
                    out[key] = _decode_value(value, Field(key, extra[key]), f"{path}.{key}")
                continue
            raise errors.invalid_json(f'json: unknown field "{key}"')
        if value is None:
            if f.go.startswith("enum:"):
                raise errors.invalid_json('can not unmarshal "null"')
            continue
        out[key] = _decode_value(value, f, f"{path}.{key}")
    return out


# -- names --------------------------------------------------------------------------------------


def valid_name(name: str) -> bool:
    """nats-server's isValidAssetName."""
    return bool(name) and not any(c in name for c in " \t\r\n\f.*>\\/")


def has_path_separators(name: str) -> bool:
    return "/" in name or "\\" in name


def _pedantic(detail: str) -> ApiError:
    return js_error("Pedantic", err=detail)


def _subset(subject: str, pattern: str) -> bool:
    """nats-server's subjectIsSubsetMatch: every subject matching `subject` matches `pattern`."""
    st, pt = subject.split("."), pattern.split(".")
    for i, p in enumerate(pt):
        if i >= len(st):
            return False
        s = st[i]
        if p == ">":
            return True
        if p == "*":
            if s == ">":
                return False
            continue
        if s != p:
            return False
    return len(st) == len(pt)


pedantic_error = _pedantic
subject_is_subset = _subset


def static_metadata(metadata: dict[str, str], level: int) -> dict[str, str]:
    """The user's metadata without the dynamic keys, plus `_nats.req.level`: the API level the
    features in use need (jetstream_versioning.go)."""
    out = {k: v for k, v in metadata.items() if k not in _DYNAMIC_METADATA}
    out["_nats.req.level"] = str(level)
    return out


def reply_metadata(metadata: dict[str, str], full_metadata: bool) -> dict[str, str]:
    """The metadata as a reply shows it, in key order; info and create replies carry the
    server's own keys too."""
    out = dict(metadata)
    if full_metadata:
        out["_nats.level"] = API_LEVEL
        out["_nats.ver"] = SERVER_VERSION
    return dict(sorted(out.items()))


# -- consumers ----------------------------------------------------------------------------------


def decode_consumer_request(raw: dict[str, Any]) -> tuple[str, dict[str, Any] | None, str, bool]:
    """A `CreateConsumerRequest`: (stream_name, config or None, action, pedantic)."""
    for key in raw:
        if key not in ("stream_name", "config", "action", "pedantic"):
            raise errors.invalid_json(f'json: unknown field "{key}"')
    stream = raw.get("stream_name")
    if stream is not None and not isinstance(stream, str):
        raise _unmarshal_error(stream, "CreateConsumerRequest.stream_name", "string")
    action = raw.get("action")
    if action is None:
        action = ""
    if action not in ("", "create", "update", "create_or_update"):
        raise errors.invalid_json(f'can not unmarshal "\\"{action}\\""')
    pedantic = raw.get("pedantic")
    if pedantic is not None and not isinstance(pedantic, bool):
        raise _unmarshal_error(pedantic, "CreateConsumerRequest.pedantic", "bool")
    config = raw.get("config")
    if config is None:
        return stream or "", None, action, bool(pedantic)
    if not isinstance(config, dict):
        raise _unmarshal_error(config, "CreateConsumerRequest.config", "server.ConsumerConfig")
    return (
        stream or "",
        decode("ConsumerConfig", config, "CreateConsumerRequest.config"),
        action,
        (bool(pedantic)),
    )


def set_static_consumer_metadata(cfg: dict[str, Any]) -> None:
    metadata = {k: v for k, v in (cfg.get("metadata") or {}).items() if k not in _DYNAMIC_METADATA}
    level = 0
    if cfg["pause_until"] and parse_go_time(cfg["pause_until"])[0] > 0:
        level = 1
    if (
        cfg["priority_policy"] not in ("", "none")
        or cfg["priority_timeout"]
        or cfg["priority_groups"]
    ):
        level = 1
    if cfg["ack_policy"] == "flow_control":
        level = 4
    metadata["_nats.req.level"] = str(level)
    cfg["metadata"] = metadata


def set_consumer_defaults(
    cfg: dict[str, Any], stream_cfg: StreamConfig, pedantic: bool, acc_max_ack_pending: int = 0
) -> None:
    """nats-server's setConsumerConfigDefaults."""
    if cfg["max_deliver"] == 0 or cfg["max_deliver"] < -1:
        if pedantic and cfg["max_deliver"] < -1:
            raise _pedantic("max_deliver must be set to -1")
        cfg["max_deliver"] = -1
    if cfg["max_waiting"] < 0:
        if pedantic:
            raise _pedantic("max_waiting must not be negative")
        cfg["max_waiting"] = 0
    if cfg["max_ack_pending"] < -1:
        if pedantic:
            raise _pedantic("max_ack_pending must be set to -1")
        cfg["max_ack_pending"] = -1
    for key, label in (
        ("max_batch", "max_batch"),
        ("max_expires", "max_expires"),
        ("max_bytes", "max_bytes"),
        ("idle_heartbeat", "idle_heartbeat"),
        ("inactive_threshold", "inactive_threshold"),
        ("priority_timeout", "priority_timeout"),
    ):
        if cfg[key] < 0:
            if pedantic:
                raise _pedantic(f"{label} must not be negative")
            cfg[key] = 0
    if not cfg["deliver_subject"] and cfg["max_waiting"] == 0:
        cfg["max_waiting"] = DEFAULT_MAX_WAITING
    if cfg["ack_wait"] == 0 and cfg["ack_policy"] in ("explicit", "all"):
        cfg["ack_wait"] = DEFAULT_ACK_WAIT
    if cfg["backoff"]:
        if pedantic and cfg["ack_wait"] != cfg["backoff"][0]:
            raise _pedantic("first backoff value has to equal batch AckWait")
        cfg["ack_wait"] = cfg["backoff"][0]
    limits = stream_cfg.consumer_limits
    if cfg["max_ack_pending"] == 0:
        if pedantic and limits.max_ack_pending > 0:
            raise _pedantic("max_ack_pending must be set if it's configured in stream limits")
        cfg["max_ack_pending"] = limits.max_ack_pending
    if cfg["inactive_threshold"] == 0:
        if pedantic and limits.inactive_threshold > 0:
            raise _pedantic("inactive_threshold must be set if it's configured in stream limits")
        cfg["inactive_threshold"] = limits.inactive_threshold
    if cfg["max_ack_pending"] == 0 and cfg["ack_policy"] != "none":
        pending = DEFAULT_MAX_ACK_PENDING
        if 0 < acc_max_ack_pending < pending:
            pending = acc_max_ack_pending
        cfg["max_ack_pending"] = pending
    if cfg["priority_policy"] == "pinned_client" and cfg["priority_timeout"] == 0:
        cfg["priority_timeout"] = DEFAULT_PINNED_TTL
    if cfg["ack_policy"] == "flow_control" and not pedantic:
        cfg["flow_control"] = True
        cfg["idle_heartbeat"] = NS


def consumer_filters(cfg: dict[str, Any]) -> list[str]:
    """nats-server's gatherSubjectFilters."""
    if cfg.get("filter_subjects"):
        return list(cfg["filter_subjects"])
    if cfg.get("filter_subject"):
        return [cfg["filter_subject"]]
    return []


def check_consumer_config(
    cfg: dict[str, Any], stream_cfg: StreamConfig, acc_max_ack_pending: int = 0
) -> None:
    """nats-server's checkConsumerCfg."""
    invalid = errors.stream_invalid_config
    if cfg["name"] and not valid_name(cfg["name"]):
        raise invalid("consumer name can not contain '.', '*', '>', '\\', '/'")
    if cfg["durable_name"] and not valid_name(cfg["durable_name"]):
        raise invalid("consumer durable name can not contain '.', '*', '>', '\\', '/'")
    if cfg["num_replicas"] > 0 and cfg["num_replicas"] > stream_cfg.num_replicas:
        raise js_error("ConsumerReplicasExceedsStream")
    if cfg["num_replicas"] < 0:
        raise js_error("ReplicasCountCannotBeNegative")
    if (
        stream_cfg.retention in ("interest", "workqueue")
        and cfg["num_replicas"] != 0
        and cfg["num_replicas"] != stream_cfg.num_replicas
    ):
        raise js_error("ConsumerReplicasShouldMatchStream")
    if any(b < 0 for b in cfg["backoff"]):
        raise js_error("ConsumerBackOffNegative")
    if cfg["ack_wait"] < 0:
        raise js_error("ConsumerAckWaitNegative")
    push = bool(cfg["deliver_subject"])
    if cfg["ack_policy"] == "flow_control":
        if not push:
            raise js_error("ConsumerAckFCRequiresPush")
        if not cfg["flow_control"]:
            raise js_error("ConsumerAckFCRequiresFC")
        if cfg["idle_heartbeat"] != NS:
            raise invalid("flow control ack policy heartbeat needs to be 1s")
        if cfg["max_ack_pending"] <= 0:
            raise js_error("ConsumerAckFCRequiresMaxAckPending")
        if cfg["ack_wait"] != 0 or cfg["backoff"]:
            raise js_error("ConsumerAckFCRequiresNoAckWait")
        if cfg["max_deliver"] > 0:
            raise js_error("ConsumerAckFCRequiresNoMaxDeliver")
    if cfg["backoff"] and cfg["max_deliver"] != -1 and len(cfg["backoff"]) > cfg["max_deliver"]:
        raise js_error("ConsumerMaxDeliverBackoff")
    if len(cfg["description"]) > MAX_DESCRIPTION_LEN:
        raise js_error("ConsumerDescriptionTooLong", max=MAX_DESCRIPTION_LEN)
    if push:
        deliver = cfg["deliver_subject"]
        if not is_literal(deliver):
            raise js_error("ConsumerDeliverToWildcards")
        if not is_valid_subject(deliver):
            raise js_error("ConsumerInvalidDeliverSubject")
        if any(match_literal(deliver, s) for s in stream_cfg.subjects):
            raise js_error("ConsumerDeliverCycle")
        if cfg["max_waiting"] != 0:
            raise js_error("ConsumerPushMaxWaiting")
        if cfg["max_ack_pending"] > 0 and cfg["ack_policy"] == "none":
            raise js_error("ConsumerMaxPendingAckPolicyRequired")
        if 0 < cfg["idle_heartbeat"] < 100 * MS:
            raise js_error("ConsumerSmallHeartbeat")
    else:
        if cfg["ack_policy"] == "none" and stream_cfg.retention == "workqueue":
            raise js_error("ConsumerPullRequiresAck")
        if cfg["rate_limit_bps"] > 0:
            raise js_error("ConsumerPullWithRateLimit")
        if cfg["max_waiting"] < 0:
            raise js_error("ConsumerMaxWaitingNegative")
        if cfg["idle_heartbeat"] > 0:
            raise js_error("ConsumerHBRequiresPush")
        if cfg["flow_control"]:
            raise js_error("ConsumerFCRequiresPush")
        if cfg["max_batch"] < 0:
            raise js_error("ConsumerMaxRequestBatchNegative")
        if cfg["max_expires"] != 0 and cfg["max_expires"] < MS:
            raise js_error("ConsumerMaxRequestExpiresTooSmall")
    if 0 < acc_max_ack_pending < cfg["max_ack_pending"]:
        raise js_error("ConsumerMaxPendingAckExcess", limit=acc_max_ack_pending)
    limits = stream_cfg.consumer_limits
    if 0 < limits.max_ack_pending < cfg["max_ack_pending"]:
        raise js_error("ConsumerMaxPendingAckExcess", limit=limits.max_ack_pending)
    if 0 < limits.inactive_threshold < cfg["inactive_threshold"]:
        raise js_error(
            "ConsumerInactiveThresholdExcess", limit=go_duration(limits.inactive_threshold)
        )
    if cfg["direct"]:
        if not push:
            raise js_error("ConsumerDirectRequiresPush")
        if cfg["durable_name"]:
            raise js_error("ConsumerDirectRequiresEphemeral")
    if cfg["filter_subject"] and cfg["filter_subjects"]:
        raise js_error("ConsumerDuplicateFilterSubjects")
    if cfg["filter_subject"] and not is_valid_subject(cfg["filter_subject"]):
        raise invalid("invalid subject")
    if any(f == "" for f in cfg["filter_subjects"]):
        raise js_error("ConsumerEmptyFilter")
    filters = consumer_filters(cfg)
    for i, f in enumerate(filters):
        if not is_valid_subject(f):
            raise invalid("invalid subject")
        for j, other in enumerate(filters):
            if i != j and _subset(f, other):
                raise js_error("ConsumerOverlappingSubjectFilters")
    _check_start_policy(cfg)
    if cfg["sample_freq"]:
        text = cfg["sample_freq"].removesuffix("%")
        if not text.isdigit():
            raise js_error(
                "ConsumerInvalidSampling", err=f'strconv.Atoi: parsing "{text}": invalid syntax'
            )
    if cfg["flow_control"] and cfg["idle_heartbeat"] == 0:
        raise js_error("ConsumerWithFlowControlNeedsHeartbeats")
    if cfg["durable_name"] and cfg["name"] and cfg["name"] != cfg["durable_name"]:
        raise js_error("ConsumerCreateDurableAndNameMismatch")
    if sum(len(k) + len(v) for k, v in (cfg["metadata"] or {}).items()) > MAX_METADATA_LEN:
        raise js_error("ConsumerMetadataLength", limit=f"{MAX_METADATA_LEN // 1024}KB")
    if cfg["priority_policy"] not in ("", "none"):
        if push:
            raise js_error("ConsumerPushWithPriorityGroup")
        if not cfg["priority_groups"]:
            raise js_error("ConsumerPriorityPolicyWithoutGroup")
        for group in cfg["priority_groups"]:
            if not group:
                raise js_error("ConsumerEmptyGroupName")
            if not _GROUP_NAME.match(group):
                raise js_error("ConsumerInvalidGroupName")
    else:
        if cfg["priority_groups"]:
            raise js_error("ConsumerPriorityGroupWithPolicyNone")
        if cfg["priority_timeout"] > 0:
            raise js_error("ConsumerPinnedTTLWithoutPriorityPolicyNone")


def _check_start_policy(cfg: dict[str, Any]) -> None:
    def bad_start(policy: str, start: str) -> ApiError:
        return errors.consumer_invalid_policy(
            f"consumer delivery policy is deliver {policy}, but optional start {start} is also set"
        )

    def not_set(policy: str, what: str) -> ApiError:
        return errors.consumer_invalid_policy(
            f"consumer delivery policy is deliver {policy}, but optional {what} is not set"
        )

    policy = cfg["deliver_policy"]
    seq, start_time = cfg["opt_start_seq"], cfg["opt_start_time"]
    label = {
        "all": "all",
        "last": "last",
        "last_per_subject": "last per subject",
        "new": "new",
    }.get(policy)
    if label is not None:
        if seq > 0:
            raise bad_start(label, "sequence")
        if start_time:
            raise bad_start(label, "time")
        if policy == "last_per_subject" and not consumer_filters(cfg):
            raise not_set("last per subject", "filter subject")
    elif policy == "by_start_sequence":
        if seq == 0:
            raise not_set("by start sequence", "start sequence")
        if start_time:
            raise bad_start("by start sequence", "time")
    elif policy == "by_start_time":
        if not start_time:
            raise not_set("by start time", "start time")
        if seq != 0:
            raise bad_start("by start time", "start sequence")


def check_consumer_update(old: dict[str, Any], new: dict[str, Any], bound: bool) -> None:
    """nats-server's checkNewConsumerConfig: what an update may not change. `bound` says
    whether the old deliver subject has interest."""
    if old == new:
        return

    def fail(text: str) -> ApiError:
        return errors.consumer_create(text)

    checks = (
        ("deliver_policy", "deliver policy can not be updated"),
        ("mem_storage", "storage type can not be updated"),
        ("direct", "direct can not be updated"),
        ("sourcing", "sourcing can not be updated"),
        ("opt_start_seq", "start sequence can not be updated"),
        ("opt_start_time", "start time can not be updated"),
        ("ack_policy", "ack policy can not be updated"),
        ("replay_policy", "replay policy can not be updated"),
        ("idle_heartbeat", "heart beats can not be updated"),
        ("flow_control", "flow control can not be updated"),
    )
    for key, text in checks:
        if key == "opt_start_time":
            if (old[key] and new[key] and parse_go_time(old[key]) != parse_go_time(new[key])) or (
                bool(old[key]) != bool(new[key])
            ):
                raise fail(text)
            continue
        if old[key] != new[key]:
            raise fail(text)
    if old["deliver_subject"] != new["deliver_subject"]:
        if not old["deliver_subject"]:
            raise fail("can not update pull consumer to push based")
        if not new["deliver_subject"]:
            raise fail("can not update push consumer to pull based")
        if bound:
            raise errors.consumer_name_exist()
    if old["max_waiting"] != new["max_waiting"]:
        raise fail("max waiting can not be updated")
    if new["backoff"] and new["max_deliver"] != -1 and len(new["backoff"]) > new["max_deliver"]:
        raise js_error("ConsumerMaxDeliverBackoff")


def consumer_config_reply(cfg: dict[str, Any], full_metadata: bool = True) -> dict[str, Any]:
    """The config as nats-server writes it; info and create replies carry the server's own
    metadata keys, lists do not (setDynamicConsumerMetadata)."""
    out = encode("ConsumerConfig", cfg)
    metadata = dict(cfg.get("metadata") or {})
    if full_metadata:
        metadata["_nats.level"] = API_LEVEL
        metadata["_nats.ver"] = SERVER_VERSION
    # Go writes the map in key order, in the struct's place (after `sourcing`).
    rebuilt: dict[str, Any] = {}
    placed = False
    tail = ("pause_until", "priority_groups", "priority_policy", "priority_timeout")
    for key, value in out.items():
        if key in tail and not placed:
            rebuilt["metadata"] = dict(sorted(metadata.items()))
            placed = True
        if key == "metadata":
            continue
        rebuilt[key] = value
    if not placed:
        rebuilt["metadata"] = dict(sorted(metadata.items()))
    return rebuilt


def consumers_equal(a: dict[str, Any], b: dict[str, Any]) -> bool:
    """Equal configs, ignoring the server's own metadata keys (copyConsumerMetadata)."""
    skip = {"metadata"}
    if {k: v for k, v in a.items() if k not in skip} != {
        k: v for k, v in b.items() if k not in skip
    }:
        return False
    ma = {k: v for k, v in (a.get("metadata") or {}).items() if not k.startswith("_nats.")}
    mb = {k: v for k, v in (b.get("metadata") or {}).items() if not k.startswith("_nats.")}
    return ma == mb


def upgrade_consumer_config(cfg: dict[str, Any]) -> dict[str, Any]:
    return complete("ConsumerConfig", cfg)


def ephemeral_name() -> str:
    """nats-server's createConsumerName: 8 characters of a hash of a fresh NUID."""
    alphabet = string.ascii_letters + string.digits
    return "".join(secrets.choice(alphabet) for _ in range(8))
