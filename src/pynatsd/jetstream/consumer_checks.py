"""The checks of a consumer configuration, with nats-server's error codes and texts:
checkConsumerCfg (a new config), checkNewConsumerConfig (what an update may not change) and
the work-queue rules of addConsumer, from `server/consumer.go`.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from pynatsd.jetstream import errors
from pynatsd.jetstream.config import (
    MAX_DESCRIPTION_LEN,
    MAX_METADATA_LEN,
    MS,
    NS,
    ephemeral_name,
    valid_name,
)
from pynatsd.jetstream.errors import ApiError, js_error
from pynatsd.jetstream.util import go_duration, parse_go_time
from pynatsd.subjects import (
    is_literal,
    is_subset_match,
    is_valid_subject,
    match_literal,
    subjects_collide,
)

if TYPE_CHECKING:
    from pynatsd.jetstream.consumer_config import ConsumerConfig
    from pynatsd.jetstream.stream import Stream
    from pynatsd.jetstream.stream_config import StreamConfig

GROUP_NAME = re.compile(r"^[a-zA-Z0-9/_=-]{1,16}$")


def check_consumer_config(
    cfg: ConsumerConfig, stream_cfg: StreamConfig, acc_max_ack_pending: int = 0
) -> None:
    """nats-server's checkConsumerCfg."""
    invalid = errors.stream_invalid_config
    if cfg.name and not valid_name(cfg.name):
        raise invalid("consumer name can not contain '.', '*', '>', '\\', '/'")
    if cfg.durable_name and not valid_name(cfg.durable_name):
        raise invalid("consumer durable name can not contain '.', '*', '>', '\\', '/'")
    if cfg.num_replicas > 0 and cfg.num_replicas > stream_cfg.num_replicas:
        raise js_error("ConsumerReplicasExceedsStream")
    if cfg.num_replicas < 0:
        raise js_error("ReplicasCountCannotBeNegative")
    if (
        stream_cfg.retention in ("interest", "workqueue")
        and cfg.num_replicas != 0
        and cfg.num_replicas != stream_cfg.num_replicas
    ):
        raise js_error("ConsumerReplicasShouldMatchStream")
    if any(b < 0 for b in cfg.backoff):
        raise js_error("ConsumerBackOffNegative")
    if cfg.ack_wait < 0:
        raise js_error("ConsumerAckWaitNegative")
    push = bool(cfg.deliver_subject)
    if cfg.ack_policy == "flow_control":
        if not push:
            raise js_error("ConsumerAckFCRequiresPush")
        if not cfg.flow_control:
            raise js_error("ConsumerAckFCRequiresFC")
        if cfg.idle_heartbeat != NS:
            raise invalid("flow control ack policy heartbeat needs to be 1s")
        if cfg.max_ack_pending <= 0:
            raise js_error("ConsumerAckFCRequiresMaxAckPending")
        if cfg.ack_wait != 0 or cfg.backoff:
            raise js_error("ConsumerAckFCRequiresNoAckWait")
        if cfg.max_deliver > 0:
            raise js_error("ConsumerAckFCRequiresNoMaxDeliver")
    if cfg.backoff and cfg.max_deliver != -1 and len(cfg.backoff) > cfg.max_deliver:
        raise js_error("ConsumerMaxDeliverBackoff")
    if len(cfg.description) > MAX_DESCRIPTION_LEN:
        raise js_error("ConsumerDescriptionTooLong", max=MAX_DESCRIPTION_LEN)
    if push:
        deliver = cfg.deliver_subject
        if not is_literal(deliver):
            raise js_error("ConsumerDeliverToWildcards")
        if not is_valid_subject(deliver):
            raise js_error("ConsumerInvalidDeliverSubject")
        if any(match_literal(deliver, s) for s in stream_cfg.subjects):
            raise js_error("ConsumerDeliverCycle")
        if cfg.max_waiting != 0:
            raise js_error("ConsumerPushMaxWaiting")
        if cfg.max_ack_pending > 0 and cfg.ack_policy == "none":
            raise js_error("ConsumerMaxPendingAckPolicyRequired")
        if 0 < cfg.idle_heartbeat < 100 * MS:
            raise js_error("ConsumerSmallHeartbeat")
    else:
        if cfg.ack_policy == "none" and stream_cfg.retention == "workqueue":
            raise js_error("ConsumerPullRequiresAck")
        if cfg.rate_limit_bps > 0:
            raise js_error("ConsumerPullWithRateLimit")
        if cfg.max_waiting < 0:
            raise js_error("ConsumerMaxWaitingNegative")
        if cfg.idle_heartbeat > 0:
            raise js_error("ConsumerHBRequiresPush")
        if cfg.flow_control:
            raise js_error("ConsumerFCRequiresPush")
        if cfg.max_batch < 0:
            raise js_error("ConsumerMaxRequestBatchNegative")
        if cfg.max_expires != 0 and cfg.max_expires < MS:
            raise js_error("ConsumerMaxRequestExpiresTooSmall")
    if 0 < acc_max_ack_pending < cfg.max_ack_pending:
        raise js_error("ConsumerMaxPendingAckExcess", limit=acc_max_ack_pending)
    limits = stream_cfg.consumer_limits
    if 0 < limits.max_ack_pending < cfg.max_ack_pending:
        raise js_error("ConsumerMaxPendingAckExcess", limit=limits.max_ack_pending)
    if 0 < limits.inactive_threshold < cfg.inactive_threshold:
        raise js_error(
            "ConsumerInactiveThresholdExcess", limit=go_duration(limits.inactive_threshold)
        )
    if cfg.direct:
        if not push:
            raise js_error("ConsumerDirectRequiresPush")
        if cfg.durable_name:
            raise js_error("ConsumerDirectRequiresEphemeral")
    if cfg.filter_subject and cfg.filter_subjects:
        raise js_error("ConsumerDuplicateFilterSubjects")
    if cfg.filter_subject and not is_valid_subject(cfg.filter_subject):
        raise invalid("invalid subject")
    if any(f == "" for f in cfg.filter_subjects):
        raise js_error("ConsumerEmptyFilter")
    filters = cfg.filters()
    for i, f in enumerate(filters):
        if not is_valid_subject(f):
            raise invalid("invalid subject")
        for j, other in enumerate(filters):
            if i != j and is_subset_match(f, other):
                raise js_error("ConsumerOverlappingSubjectFilters")
    _check_start_policy(cfg)
    if cfg.sample_freq:
        text = cfg.sample_freq.removesuffix("%")
        if not text.isdigit():
            raise js_error(
                "ConsumerInvalidSampling", err=f'strconv.Atoi: parsing "{text}": invalid syntax'
            )
    if cfg.flow_control and cfg.idle_heartbeat == 0:
        raise js_error("ConsumerWithFlowControlNeedsHeartbeats")
    if cfg.durable_name and cfg.name and cfg.name != cfg.durable_name:
        raise js_error("ConsumerCreateDurableAndNameMismatch")
    if sum(len(k) + len(v) for k, v in cfg.metadata.items()) > MAX_METADATA_LEN:
        raise js_error("ConsumerMetadataLength", limit=f"{MAX_METADATA_LEN // 1024}KB")
    if cfg.priority_policy not in ("", "none"):
        if push:
            raise js_error("ConsumerPushWithPriorityGroup")
        if not cfg.priority_groups:
            raise js_error("ConsumerPriorityPolicyWithoutGroup")
        for group in cfg.priority_groups:
            if not group:
                raise js_error("ConsumerEmptyGroupName")
            if not GROUP_NAME.match(group):
                raise js_error("ConsumerInvalidGroupName")
    else:
        if cfg.priority_groups:
            raise js_error("ConsumerPriorityGroupWithPolicyNone")
        if cfg.priority_timeout > 0:
            raise js_error("ConsumerPinnedTTLWithoutPriorityPolicyNone")


def _check_start_policy(cfg: ConsumerConfig) -> None:
    def bad_start(policy: str, start: str) -> ApiError:
        return errors.consumer_invalid_policy(
            f"consumer delivery policy is deliver {policy}, but optional start {start} is also set"
        )

    def not_set(policy: str, what: str) -> ApiError:
        return errors.consumer_invalid_policy(
            f"consumer delivery policy is deliver {policy}, but optional {what} is not set"
        )

    policy = cfg.deliver_policy
    seq, start_time = cfg.opt_start_seq, cfg.opt_start_time
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
        if policy == "last_per_subject" and not cfg.filters():
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


def check_consumer_update(old: ConsumerConfig, new: ConsumerConfig, bound: bool) -> None:
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
        before, after = getattr(old, key), getattr(new, key)
        if key == "opt_start_time":
            if (before and after and parse_go_time(before) != parse_go_time(after)) or (
                bool(before) != bool(after)
            ):
                raise fail(text)
            continue
        if before != after:
            raise fail(text)
    if old.deliver_subject != new.deliver_subject:
        if not old.deliver_subject:
            raise fail("can not update pull consumer to push based")
        if not new.deliver_subject:
            raise fail("can not update push consumer to pull based")
        if bound:
            raise errors.consumer_name_exist()
    if old.max_waiting != new.max_waiting:
        raise fail("max waiting can not be updated")
    if new.backoff and new.max_deliver != -1 and len(new.backoff) > new.max_deliver:
        raise js_error("ConsumerMaxDeliverBackoff")


def sourcing_consumer(stream: Stream, config: ConsumerConfig) -> None:
    """The consumer another stream's mirror or source asks for (direct, sourcing, with the
    stable name of its set-up): on a stream that removes what is consumed (interest or
    work-queue retention) it becomes a durable acknowledged through flow control, so that
    nothing goes before it was copied; elsewhere each set-up gets its own consumer, the name
    with a random suffix (nats-server's jsConsumerCreateRequest)."""
    if stream.config.retention != "limits":
        config.direct = False
        config.durable_name = config.name
        config.ack_policy = "flow_control"
        config.ack_wait = 0
        config.max_deliver = 0
        config.inactive_threshold = 0
    else:
        config.name = f"{config.name}-{ephemeral_name()}"


def check_workqueue(stream: Stream, config: ConsumerConfig) -> None:
    """Work-queue streams: explicit acks, deliver all, and no two consumers for the same
    messages (Go's addConsumer checks)."""
    if stream.config.retention != "workqueue" or config.direct or config.sourcing:
        return
    if config.ack_policy not in ("explicit", "flow_control"):
        raise errors.consumer_wq_requires_explicit_ack()
    if config.deliver_policy != "all":
        raise errors.js_error("ConsumerWQConsumerNotDeliverAll")
    if stream.consumers:
        filters = config.filters()
        if not filters:
            raise errors.consumer_wq_multiple_unfiltered()
        partition_unique(stream, config.name, filters)


def partition_unique(stream: Stream, name: str, filters: list[str]) -> None:
    for other in stream.consumers.values():
        if other.name == name:
            continue
        if not other.filters:
            raise errors.consumer_wq_not_unique()
        if any(subjects_collide(a, b) for a in filters for b in other.filters):
            raise errors.consumer_wq_not_unique()
