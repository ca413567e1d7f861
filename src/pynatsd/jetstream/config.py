"""Stream and consumer configurations: strict decoding, validation and defaults.

The JSON field names, their order in replies, the defaults filled in and the error texts follow
nats-server (`StreamConfig` in `server/stream.go`, `ConsumerConfig` in `server/consumer.go`,
`checkStreamCfg` and `setConsumerConfigDefaults`). Decoding is strict as in nats-server's API:
an unknown field or a value of the wrong JSON type is an `invalid JSON` error.
"""

from __future__ import annotations

import secrets
import string
from typing import Any

from pynatsd.jetstream import errors
from pynatsd.subjects import is_valid_subject, subjects_collide

NS = 1_000_000_000
DEFAULT_DUPLICATE_WINDOW = 120 * NS
DEFAULT_ACK_WAIT = 30 * NS
DEFAULT_MAX_WAITING = 512
DEFAULT_MAX_ACK_PENDING = 1000
DEFAULT_EPHEMERAL_INACTIVE = 5 * NS
SERVER_VERSION = "2.15.1"
API_LEVEL = "5"

# field -> Go type name (for decode errors); "enum:" types list their accepted values.
_STREAM_FIELDS: dict[str, str] = {
    "name": "string",
    "description": "string",
    "subjects": "[]string",
    "retention": "enum:limits,interest,workqueue",
    "max_consumers": "int",
    "max_msgs": "int64",
    "max_bytes": "int64",
    "max_age": "time.Duration",
    "max_msgs_per_subject": "int64",
    "max_msg_size": "int32",
    "discard": "enum:old,new",
    "storage": "enum:file,memory",
    "num_replicas": "int",
    "no_ack": "bool",
    "duplicate_window": "time.Duration",
    "placement": "object",
    "mirror": "object",
    "sources": "array",
    "compression": "enum:none,s2",
    "first_seq": "uint64",
    "subject_transform": "object",
    "republish": "object",
    "allow_direct": "bool",
    "mirror_direct": "bool",
    "discard_new_per_subject": "bool",
    "sealed": "bool",
    "deny_delete": "bool",
    "deny_purge": "bool",
    "allow_rollup_hdrs": "bool",
    "consumer_limits": "object",
    "allow_msg_ttl": "bool",
    "subject_delete_marker_ttl": "time.Duration",
    "allow_msg_counter": "bool",
    "allow_atomic": "bool",
    "allow_msg_schedules": "bool",
    "persist_mode": "string",
    "allow_batched": "bool",
    "metadata": "map[string]string",
    "pedantic": "bool",
}

_CONSUMER_FIELDS: dict[str, str] = {
    "durable_name": "string",
    "name": "string",
    "description": "string",
    "deliver_policy": "enum:all,last,new,by_start_sequence,by_start_time,last_per_subject",
    "opt_start_seq": "uint64",
    "opt_start_time": "time.Time",
    "ack_policy": "enum:none,all,explicit",
    "ack_wait": "time.Duration",
    "max_deliver": "int",
    "backoff": "[]time.Duration",
    "filter_subject": "string",
    "filter_subjects": "[]string",
    "replay_policy": "enum:instant,original",
    "rate_limit_bps": "uint64",
    "sample_freq": "string",
    "max_waiting": "int",
    "max_ack_pending": "int",
    "flow_control": "bool",
    "headers_only": "bool",
    "max_batch": "int",
    "max_expires": "time.Duration",
    "max_bytes": "int",
    "deliver_subject": "string",
    "deliver_group": "string",
    "idle_heartbeat": "time.Duration",
    "inactive_threshold": "time.Duration",
    "num_replicas": "int",
    "mem_storage": "bool",
    "direct": "bool",
    "metadata": "map[string]string",
    "pause_until": "time.Time",
    "priority_groups": "[]string",
    "priority_policy": "string",
    "priority_timeout": "time.Duration",
}

# Reply order of stream config keys, and which are left out when empty (Go `omitempty`).
_STREAM_ORDER = list(_STREAM_FIELDS)
_STREAM_OMITEMPTY = {
    "description",
    "subjects",
    "max_msg_size",
    "no_ack",
    "duplicate_window",
    "placement",
    "mirror",
    "sources",
    "first_seq",
    "subject_transform",
    "republish",
    "discard_new_per_subject",
    "subject_delete_marker_ttl",
    "allow_msg_counter",
    "allow_atomic",
    "allow_msg_schedules",
    "persist_mode",
    "allow_batched",
    "metadata",
}
_CONSUMER_ALWAYS = {"deliver_policy", "ack_policy", "replay_policy", "num_replicas"}


def _type_ok(value: Any, go_type: str) -> bool:
    if go_type.startswith("enum:"):
        return isinstance(value, str)
    if go_type in ("string", "time.Time"):
        return isinstance(value, str)
    if go_type == "bool":
        return isinstance(value, bool)
    if go_type in ("int", "int32", "int64", "uint64", "time.Duration"):
        return isinstance(value, int) and not isinstance(value, bool)
    if go_type in ("[]string", "[]time.Duration", "array"):
        return isinstance(value, list)
    if go_type in ("object", "map[string]string"):
        return isinstance(value, dict)
    return True


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


def decode_strict(
    raw: dict[str, Any], fields: dict[str, str], struct: str, allowed_extra: tuple[str, ...] = ()
) -> dict[str, Any]:
    """Check names and JSON types as Go's strict decoder would; JSON null means "not set"."""
    out: dict[str, Any] = {}
    for key, value in raw.items():
        if key in allowed_extra:
            continue
        go_type = fields.get(key)
        if go_type is None:
            raise errors.invalid_json(f'json: unknown field "{key}"')
        if value is None:
            continue
        if not _type_ok(value, go_type):
            shown = go_type.split(":")[0] if not go_type.startswith("enum:") else "string"
            raise errors.invalid_json(
                f"json: cannot unmarshal {_json_kind(value)} into Go struct field "
                f"{struct}.{key} of type {shown}"
            )
        if go_type.startswith("enum:") and value not in go_type[5:].split(","):
            raise errors.invalid_json(f'can not unmarshal "\\"{value}\\""')
        wrong = [v for v in value if not isinstance(v, str)] if go_type == "[]string" else []
        if wrong:
            raise errors.invalid_json(
                f"json: cannot unmarshal {_json_kind(wrong[0])} "
                f"into Go struct field {struct}.{key} of type string"
            )
        out[key] = value
    return out


def valid_name(name: str) -> bool:
    return bool(name) and not any(c in name for c in " \t\r\n.*>\\/")


def check_name_separators(name: str) -> bool:
    return "/" in name or "\\" in name


def normalize_stream_config(raw: dict[str, Any]) -> dict[str, Any]:
    """A stream config with nats-server's defaults filled in, in its reply order."""
    cfg = decode_strict(raw, _STREAM_FIELDS, "StreamConfigRequest")
    cfg.pop("pedantic", None)
    name = cfg.get("name", "")
    if check_name_separators(name):
        raise errors.stream_name_path_separators()
    if not valid_name(name):
        raise errors.stream_invalid_config(
            "stream name is required and can not contain '.', '*', '>', '\\', '/'"
        )
    if cfg.get("num_replicas", 0) > 1:
        raise errors.replicas_not_supported()
    if cfg.get("num_replicas", 0) < 0:
        raise errors.stream_invalid_config("replicas must be a positive number")
    for key in ("max_age", "duplicate_window"):
        if cfg.get(key, 0) < 0:
            label = "max age" if key == "max_age" else "duplicate window"
            raise errors.stream_invalid_config(f"{label} can not be negative")
    subjects = cfg.get("subjects") or [name]
    for subj in subjects:
        if not is_valid_subject(subj):
            raise errors.stream_invalid_config("invalid subject")
    for i, a in enumerate(subjects):
        for b in subjects[i + 1 :]:
            if a == b:
                raise errors.stream_invalid_config("duplicate subjects detected")
            if subjects_collide(a, b):
                raise errors.stream_invalid_config(f'subject "{a}" overlaps with "{b}"')
    out: dict[str, Any] = {
        "name": name,
        "description": cfg.get("description", ""),
        "subjects": list(subjects),
        "retention": cfg.get("retention", "limits"),
        "max_consumers": cfg.get("max_consumers") or -1,
        "max_msgs": cfg.get("max_msgs") or -1,
        "max_bytes": cfg.get("max_bytes") or -1,
        "max_age": cfg.get("max_age", 0),
        "max_msgs_per_subject": cfg.get("max_msgs_per_subject") or -1,
        "max_msg_size": cfg.get("max_msg_size") or -1,
        "discard": cfg.get("discard", "old"),
        "storage": cfg.get("storage", "file"),
        "num_replicas": cfg.get("num_replicas") or 1,
        "no_ack": cfg.get("no_ack", False),
        "duplicate_window": cfg.get("duplicate_window", 0),
        "compression": cfg.get("compression", "none"),
        "first_seq": cfg.get("first_seq", 0),
        "allow_direct": cfg.get("allow_direct", False),
        "mirror_direct": cfg.get("mirror_direct", False),
        "discard_new_per_subject": cfg.get("discard_new_per_subject", False),
        "sealed": cfg.get("sealed", False),
        "deny_delete": cfg.get("deny_delete", False),
        "deny_purge": cfg.get("deny_purge", False),
        "allow_rollup_hdrs": cfg.get("allow_rollup_hdrs", False),
        "consumer_limits": cfg.get("consumer_limits", {}),
        "allow_msg_ttl": cfg.get("allow_msg_ttl", False),
    }
    for key in ("placement", "mirror", "sources", "subject_transform", "republish"):
        if key in cfg:
            out[key] = cfg[key]
    if out["duplicate_window"] == 0:
        window = DEFAULT_DUPLICATE_WINDOW
        if 0 < out["max_age"] < window:
            window = out["max_age"]
        out["duplicate_window"] = window
    elif out["max_age"] and out["duplicate_window"] > out["max_age"]:
        raise errors.stream_invalid_config("duplicates window can not be larger then max age")
    if out["discard_new_per_subject"] and (
        out["discard"] != "new" or out["max_msgs_per_subject"] <= 0
    ):
        raise errors.stream_invalid_config(
            "discard new per subject requires discard new policy to be set"
        )
    metadata = dict(cfg.get("metadata") or {})
    metadata["_nats.req.level"] = "0"
    out["metadata"] = metadata
    return out


def stream_config_reply(cfg: dict[str, Any], full_metadata: bool = True) -> dict[str, Any]:
    """The config as nats-server writes it in replies: its key order, `omitempty` applied, and
    the server's own metadata keys added (create/info/update replies carry all of them)."""
    out: dict[str, Any] = {}
    for key in _STREAM_ORDER:
        if key not in cfg or key == "pedantic":
            continue
        value = cfg[key]
        if key in _STREAM_OMITEMPTY and value in ("", 0, False, None, [], {}):
            continue
        if key == "max_msg_size" and value == -1:
            out[key] = value
            continue
        out[key] = value
    metadata = dict(cfg.get("metadata") or {})
    if full_metadata:
        metadata["_nats.level"] = API_LEVEL
        metadata["_nats.ver"] = SERVER_VERSION
    out["metadata"] = dict(sorted(metadata.items()))
    return out


def stream_configs_equal(a: dict[str, Any], b: dict[str, Any]) -> bool:
    return stream_config_reply(a) == stream_config_reply(b)


def check_stream_update(old: dict[str, Any], new: dict[str, Any]) -> None:
    """What nats-server refuses to change on STREAM.UPDATE."""
    if old["storage"] != new["storage"]:
        raise errors.stream_invalid_config(
            "stream configuration update can not change storage type"
        )
    if old["retention"] != new["retention"]:
        raise errors.stream_invalid_config(
            "stream configuration update can not change retention policy"
        )
    if old["sealed"] and not new["sealed"]:
        raise errors.stream_invalid_config(
            "stream configuration update can not unseal a sealed stream"
        )
    if old["deny_delete"] and not new["deny_delete"]:
        raise errors.stream_invalid_config(
            "stream configuration update can not cancel deny message deletes"
        )
    if old["deny_purge"] and not new["deny_purge"]:
        raise errors.stream_invalid_config("stream configuration update can not cancel deny purge")


def _ephemeral_name() -> str:
    alphabet = string.ascii_letters + string.digits
    return "".join(secrets.choice(alphabet) for _ in range(8))


def normalize_consumer_config(raw: dict[str, Any], name_from_subject: str = "") -> dict[str, Any]:
    """A pull or push consumer config with nats-server's defaults, in its reply order."""
    cfg = decode_strict(raw, _CONSUMER_FIELDS, "ConsumerConfig")
    durable = cfg.get("durable_name", "")
    name = cfg.get("name", "")
    if durable and name and durable != name:
        raise errors.consumer_durable_name_mismatch()
    if name_from_subject:
        name = name_from_subject
    name = name or durable
    for n in (name, durable):
        if n and check_name_separators(n):
            raise errors.consumer_name_path_separators()
        if n and not valid_name(n):
            raise errors.consumer_create(
                "consumer name can not contain '.', '*', '>' or whitespace"
            )
    if "filter_subject" in cfg and cfg.get("filter_subjects"):
        raise errors.consumer_duplicate_filters()
    for f in [cfg.get("filter_subject", ""), *(cfg.get("filter_subjects") or [])]:
        if f and not is_valid_subject(f):
            raise errors.consumer_create("consumer filter subject is not a valid subset")
    ack_policy = cfg.get("ack_policy", "none")
    deliver_policy = cfg.get("deliver_policy", "all")
    if deliver_policy == "by_start_sequence" and not cfg.get("opt_start_seq"):
        raise errors.consumer_invalid_policy(
            "consumer deliver policy by_start_sequence requires a start sequence"
        )
    if deliver_policy == "by_start_time" and not cfg.get("opt_start_time"):
        raise errors.consumer_invalid_policy(
            "consumer deliver policy by_start_time requires a start time"
        )
    if cfg.get("opt_start_seq") and deliver_policy != "by_start_sequence":
        raise errors.consumer_invalid_policy(
            "consumer deliver policy requires no start sequence or start time"
        )
    push = bool(cfg.get("deliver_subject"))
    if push and "max_waiting" in cfg:
        raise errors.consumer_push_max_waiting()
    if cfg.get("max_waiting", 0) < 0:
        raise errors.consumer_max_waiting_negative()
    out: dict[str, Any] = {}
    if durable:
        out["durable_name"] = durable
    out["name"] = name or _ephemeral_name()
    if cfg.get("description"):
        out["description"] = cfg["description"]
    out["deliver_policy"] = deliver_policy
    if cfg.get("opt_start_seq"):
        out["opt_start_seq"] = cfg["opt_start_seq"]
    if cfg.get("opt_start_time"):
        out["opt_start_time"] = cfg["opt_start_time"]
    out["ack_policy"] = ack_policy
    if ack_policy != "none":
        out["ack_wait"] = cfg.get("ack_wait") or DEFAULT_ACK_WAIT
    out["max_deliver"] = cfg.get("max_deliver") or -1
    if cfg.get("backoff"):
        out["backoff"] = cfg["backoff"]
    if cfg.get("filter_subject") and cfg["filter_subject"] != ">":
        out["filter_subject"] = cfg["filter_subject"]
    if cfg.get("filter_subjects"):
        out["filter_subjects"] = cfg["filter_subjects"]
    out["replay_policy"] = cfg.get("replay_policy", "instant")
    for key in ("rate_limit_bps", "sample_freq"):
        if cfg.get(key):
            out[key] = cfg[key]
    if not push:
        out["max_waiting"] = cfg.get("max_waiting") or DEFAULT_MAX_WAITING
    if ack_policy != "none":
        out["max_ack_pending"] = cfg.get("max_ack_pending") or DEFAULT_MAX_ACK_PENDING
    for key in (
        "flow_control",
        "headers_only",
        "max_batch",
        "max_expires",
        "max_bytes",
        "deliver_subject",
        "deliver_group",
        "idle_heartbeat",
    ):
        if cfg.get(key):
            out[key] = cfg[key]
    threshold = cfg.get("inactive_threshold", 0)
    if not durable and not threshold:
        threshold = DEFAULT_EPHEMERAL_INACTIVE
    if threshold:
        out["inactive_threshold"] = threshold
    out["num_replicas"] = cfg.get("num_replicas", 0)
    if cfg.get("mem_storage"):
        out["mem_storage"] = True
    metadata = dict(cfg.get("metadata") or {})
    metadata["_nats.req.level"] = "0"
    out["metadata"] = metadata
    return out


def consumer_config_reply(cfg: dict[str, Any]) -> dict[str, Any]:
    out = dict(cfg)
    metadata = dict(cfg.get("metadata") or {})
    metadata["_nats.level"] = API_LEVEL
    metadata["_nats.ver"] = SERVER_VERSION
    out["metadata"] = dict(sorted(metadata.items()))
    return out


def consumer_filters(cfg: dict[str, Any]) -> list[str]:
    if cfg.get("filter_subjects"):
        return list(cfg["filter_subjects"])
    if cfg.get("filter_subject"):
        return [cfg["filter_subject"]]
    return []
