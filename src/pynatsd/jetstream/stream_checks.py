"""The checks of a stream configuration: nats-server's checkStreamCfg (validation and the
defaults it fills in) and configUpdateCheck (what an update may not change), from
`server/stream.go`, with the same error codes and texts.
"""

from __future__ import annotations

import copy
import dataclasses

from pynatsd.jetstream import errors
from pynatsd.jetstream.config import (
    DEFAULT_DUPLICATE_WINDOW,
    MAX_DESCRIPTION_LEN,
    MAX_METADATA_LEN,
    MAX_NAME_LEN,
    MS,
    NS,
    STREAM_MAX_REPLICAS,
    pedantic_error,
    valid_name,
)
from pynatsd.jetstream.errors import js_error
from pynatsd.jetstream.gostruct import is_zero
from pynatsd.jetstream.stream_config import StreamConfig, StreamSource
from pynatsd.subjects import is_literal, is_subset_match, is_valid_subject, subjects_collide
from pynatsd.transform import TransformError, validate_mapping


def check_stream_config(
    config: StreamConfig, pedantic: bool, streams: dict[str, StreamConfig]
) -> StreamConfig:
    """nats-server's checkStreamCfg: validate and fill in the defaults. `streams` maps the other
    streams of the account to their configs (mirror and source checks)."""
    cfg = copy.copy(config)
    invalid = errors.stream_invalid_config
    name = cfg.name
    if not valid_name(name):
        raise invalid("stream name is required and can not contain '.', '*', '>', '\\', '/'")
    if len(name) > MAX_NAME_LEN:
        raise invalid(f"stream name is too long, maximum allowed is {MAX_NAME_LEN}")
    if len(cfg.description) > MAX_DESCRIPTION_LEN:
        raise invalid(f"stream description is too long, maximum allowed is {MAX_DESCRIPTION_LEN}")
    if sum(len(k) + len(v) for k, v in cfg.metadata.items()) > MAX_METADATA_LEN:
        raise invalid(f"stream metadata exceeds maximum size of {MAX_METADATA_LEN} bytes")
    if cfg.num_replicas == 0:
        cfg.num_replicas = 1
    if cfg.num_replicas > STREAM_MAX_REPLICAS:
        raise invalid(f"maximum replicas is {STREAM_MAX_REPLICAS}")
    if cfg.num_replicas < 0:
        raise js_error("ReplicasCountCannotBeNegative")
    for key in ("max_msgs", "max_msgs_per_subject", "max_bytes", "max_msg_size", "max_consumers"):
        value = getattr(cfg, key)
        if value == 0 or value < -1:
            if pedantic and value < -1:
                raise pedantic_error(f"{key} must be set to -1")
            setattr(cfg, key, -1)
    if cfg.max_age < 0:
        raise invalid("max age can not be negative")
    if cfg.max_age != 0 and cfg.max_age < 100 * MS:
        raise invalid("max age needs to be >= 100ms")
    if cfg.duplicate_window == 0 and cfg.mirror is None and not cfg.sources:
        window = DEFAULT_DUPLICATE_WINDOW
        if cfg.max_age != 0 and cfg.max_age < window:
            if pedantic:
                raise pedantic_error("duplicate window cannot be bigger than max age")
            cfg.duplicate_window = cfg.max_age
        else:
            cfg.duplicate_window = window
    if cfg.duplicate_window < 0:
        raise invalid("duplicates window can not be negative")
    if cfg.max_age != 0 and cfg.duplicate_window > cfg.max_age:
        raise invalid("duplicates window can not be larger then max age")
    if 0 < cfg.duplicate_window < 100 * MS:
        raise invalid("duplicates window needs to be >= 100ms")
    if cfg.deny_purge and cfg.allow_rollup_hdrs:
        raise invalid("roll-ups require the purge permission")
    if cfg.allow_msg_counter:
        if cfg.discard == "new":
            raise invalid("counter stream cannot use discard new")
        if cfg.allow_msg_ttl:
            raise invalid("counter stream cannot use message TTLs")
        if cfg.allow_msg_schedules:
            raise invalid("counter stream cannot use message schedules")
        if cfg.retention != "limits":
            raise invalid("counter stream can only use limits retention")
    if cfg.discard_new_per_subject:
        if cfg.discard != "new":
            raise invalid("discard new per subject requires discard new policy to be set")
        if cfg.max_msgs_per_subject <= 0:
            raise invalid("discard new per subject requires max msgs per subject > 0")
    marker_ttl = cfg.subject_delete_marker_ttl
    if marker_ttl > 0:
        if marker_ttl < NS:
            raise invalid("subject delete marker TTL must be at least 1 second")
        if not cfg.allow_msg_ttl:
            if pedantic:
                raise invalid("subject delete marker cannot be set if message TTLs are disabled")
            cfg.allow_msg_ttl = True
        if not cfg.allow_rollup_hdrs:
            if pedantic:
                raise invalid("subject delete marker cannot be set if roll-ups are disabled")
            cfg.allow_rollup_hdrs, cfg.deny_purge = True, False
    elif marker_ttl < 0:
        raise invalid("subject delete marker TTL must not be negative")
    if cfg.allow_msg_schedules:
        if cfg.discard == "new":
            raise invalid("message scheduling cannot use discard new")
        if not cfg.allow_rollup_hdrs:
            if pedantic:
                raise invalid("message scheduling cannot be set if roll-ups are disabled")
            cfg.allow_rollup_hdrs, cfg.deny_purge = True, False
    if cfg.persist_mode == "async":
        if cfg.storage != "file":
            raise invalid("async persist mode is only supported on file storage")
        if cfg.num_replicas > 1:
            raise invalid("async persist mode is not supported on replicated streams")
        if cfg.allow_atomic:
            raise invalid("async persist mode is not supported with atomic batch publish")
    _check_mirror_and_sources(cfg, pedantic, streams)
    subjects = cfg.subjects
    if not subjects:
        if cfg.mirror is None and not cfg.sources:
            cfg.subjects = [name]
    else:
        if cfg.mirror is not None:
            raise js_error("MirrorWithSubjects")
        seen: set[str] = set()
        for i, subj in enumerate(subjects):
            if not is_valid_subject(subj):
                raise invalid("invalid subject")
            if subj in seen:
                raise invalid("duplicate subjects detected")
            if subj == ">":
                if not cfg.no_ack:
                    raise invalid("capturing all subjects requires no-ack to be true")
                if cfg.num_replicas != 1:
                    raise invalid("capturing all subjects requires replicas of 1")
            if not cfg.no_ack:
                for namespace in ("$JS.>", "$JSC.>", "$NRG.>"):
                    if subjects_collide(subj, namespace) and not is_subset_match(
                        subj, "$JS.EVENT.>"
                    ):
                        raise invalid(
                            "subjects that overlap with jetstream api require no-ack to be true"
                        )
                if subjects_collide(subj, "$SYS.>") and not is_subset_match(subj, "$SYS.ACCOUNT.>"):
                    raise invalid("subjects that overlap with system api require no-ack to be true")
            for other in subjects[i + 1 :]:
                if subjects_collide(other, subj):
                    raise invalid(f'subject "{subj}" overlaps with "{other}"')
            seen.add(subj)
    if not cfg.subjects and not cfg.sources and cfg.mirror is None:
        raise invalid("stream needs at least one configured subject or be a source/mirror")
    transform = cfg.subject_transform
    if transform is not None:
        if transform.src and not is_valid_subject(transform.src):
            raise js_error("StreamTransformInvalidSource", err=f"invalid subject {transform.src}")
        try:
            validate_mapping(transform.src, transform.dest)
        except TransformError as e:
            raise js_error("StreamTransformInvalidDestination", err=str(e)) from None
    republish = cfg.republish
    if republish is not None:
        if not republish.src:
            if pedantic:
                raise pedantic_error("republish source can not be empty")
            republish = cfg.republish = dataclasses.replace(republish, src=">")
        if any(subjects_collide(republish.dest, s) for s in cfg.subjects):
            raise invalid("stream configuration for republish destination forms a cycle")
        try:
            validate_mapping(republish.src, republish.dest)
        except TransformError:
            raise invalid(
                "stream configuration for republish with transform from "
                f"'{republish.src}' to '{republish.dest}' not valid"
            ) from None
    placement = cfg.placement
    if placement is not None and is_zero(placement):
        cfg.placement = None
    elif placement is not None and placement.preferred:
        raise invalid("preferred server not permitted in placement")
    return cfg


def _check_mirror_and_sources(
    cfg: StreamConfig, pedantic: bool, streams: dict[str, StreamConfig]
) -> None:
    mirror = cfg.mirror
    if mirror is not None:
        if cfg.first_seq > 0:
            raise js_error("MirrorWithFirstSeq")
        if cfg.subjects:
            raise js_error("MirrorWithSubjects")
        if cfg.sources:
            raise js_error("MirrorWithSources")
        if cfg.allow_msg_counter:
            raise js_error("MirrorWithCounters")
        if cfg.allow_atomic:
            raise js_error("MirrorWithAtomicPublish")
        if cfg.allow_batched:
            raise js_error("MirrorWithBatchPublish")
        if cfg.allow_msg_schedules:
            raise js_error("MirrorWithMsgSchedules")
        if not _durable_consumer_source_ok(mirror):
            raise js_error("MirrorDurableConsumerCfgInvalid")
        if mirror.filter_subject and mirror.subject_transforms:
            raise js_error("MirrorMultipleFiltersNotAllowed")
        if cfg.subject_delete_marker_ttl > 0:
            raise errors.stream_invalid_config("subject delete markers forbidden on mirrors")
        transforms = mirror.subject_transforms
        for i, tr in enumerate(transforms):
            if tr.src and not is_valid_subject(tr.src):
                raise js_error("MirrorInvalidSubjectFilter", err=f"invalid subject {tr.src}")
            try:
                validate_mapping(tr.src, tr.dest)
            except TransformError as e:
                raise js_error("MirrorInvalidTransformDestination", err=str(e)) from None
            for j, other in enumerate(transforms):
                if i != j and subjects_collide(tr.src, other.src):
                    raise js_error("MirrorOverlappingSubjectFilters")
        if mirror.external is None:
            if not valid_name(mirror.name):
                raise js_error("MirrorInvalidStreamName")
            origin = streams.get(mirror.name)
            if origin is not None:
                if 0 < cfg.max_msg_size < origin.max_msg_size:
                    raise js_error("MirrorMaxMessageSizeTooBig")
                if pedantic and cfg.mirror_direct != origin.allow_direct:
                    raise pedantic_error("origin stream has direct get set, mirror has it disabled")
                cfg.mirror_direct = origin.allow_direct
    sources = cfg.sources
    if sources and cfg.allow_msg_schedules:
        raise js_error("SourceWithMsgSchedules")
    seen: set[str] = set()
    consumer_names: set[str] = set()
    for src in sources:
        if src is None or not valid_name(src.name):
            raise js_error("SourceInvalidStreamName")
        iname = _source_iname(src)
        if iname in seen:
            raise js_error("SourceDuplicateDetected")
        seen.add(iname)
        transforms = src.subject_transforms
        if src.filter_subject and transforms:
            raise js_error("SourceMultipleFiltersNotAllowed")
        for tr in transforms:
            if tr.src and not is_valid_subject(tr.src):
                raise js_error("SourceInvalidSubjectFilter", err=f"invalid subject {tr.src}")
            try:
                validate_mapping(tr.src, tr.dest)
            except TransformError as e:
                raise js_error("SourceInvalidTransformDestination", err=str(e)) from None
        for i, tr in enumerate(transforms):
            for j, other in enumerate(transforms):
                if i != j and is_subset_match(tr.src, other.src):
                    raise js_error("SourceOverlappingSubjectFilters")
        if src.consumer is not None:
            if not _durable_consumer_source_ok(src):
                raise js_error("SourceDurableConsumerCfgInvalid")
            cname = f"{src.name} {src.external.api if src.external else ''} {src.consumer.name}"
            if cname in consumer_names:
                raise js_error("SourceDurableConsumerDuplicateDetected")
            consumer_names.add(cname)
        if src.external is None:
            origin = streams.get(src.name)
            if origin is not None and 0 < cfg.max_msg_size < origin.max_msg_size:
                raise js_error("SourceMaxMessageSizeTooBig")


def _durable_consumer_source_ok(src: StreamSource) -> bool:
    """A mirror or source through an existing consumer (ADR-60) names a valid consumer and a
    literal deliver subject, and leaves the starting point and the filter to that consumer."""
    c = src.consumer
    if c is None:
        return True
    return (
        valid_name(c.name)
        and is_literal(c.deliver_subject)
        and is_valid_subject(c.deliver_subject)
        and src.opt_start_seq == 0
        and not src.opt_start_time
        and not src.filter_subject
    )


def _source_iname(src: StreamSource) -> str:
    """nats-server's composeIName: the source's identity (name, filters, transforms)."""
    parts = [src.name]
    if src.external is not None:
        parts.append(src.external.api)
    if src.consumer is not None:
        parts.append(f"C={src.consumer.name}")
    filters = [src.filter_subject or ">"] if not src.subject_transforms else []
    filters += [f"{t.src}:{t.dest}" for t in src.subject_transforms]
    return " ".join(parts + sorted(filters))


def check_stream_update(old: StreamConfig, new: StreamConfig) -> None:
    """What nats-server's configUpdateCheck refuses to change on STREAM.UPDATE."""
    invalid = errors.stream_invalid_config
    if new.name != old.name:
        raise invalid("stream configuration name must match original")
    if new.num_replicas > 1:
        raise errors.replicas_not_supported()
    if old.storage != new.storage:
        raise invalid("stream configuration update can not change storage type")
    if old.retention != new.retention and "workqueue" in (old.retention, new.retention):
        raise invalid(
            "stream configuration update can not change retention policy to/from workqueue"
        )
    if old.sealed and not new.sealed:
        raise invalid("stream configuration update can not unseal a sealed stream")
    if old.deny_delete and not new.deny_delete:
        raise invalid("stream configuration update can not cancel deny message deletes")
    if old.deny_purge and not new.deny_purge:
        raise invalid("stream configuration update can not cancel deny purge")
    if new.mirror is not None and new.mirror != old.mirror:
        raise js_error("StreamMirrorNotUpdatable")
    if old.allow_msg_ttl and not new.allow_msg_ttl:
        raise invalid("message TTL status can not be disabled")
    if new.allow_msg_counter != old.allow_msg_counter:
        raise invalid("stream configuration update can not change message counter setting")
    if old.allow_msg_schedules and not new.allow_msg_schedules:
        raise invalid("message schedules can not be disabled")
    if old.persist_mode != new.persist_mode:
        raise invalid("stream configuration update can not change persist mode")
    if new.sealed:
        new.max_age = 0
        new.discard = "new"
        new.deny_delete = new.deny_purge = True
        new.allow_rollup_hdrs = False
