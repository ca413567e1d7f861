"""What a consumer's configuration means beyond its validation: the filters, the delete
threshold, and the work-queue checks made when a consumer is added.

From nats-server's `server/consumer.go` (updateInactiveThreshold, the work-queue part of
addConsumerWithAssignment, gatherSubjectFilters lives in `config.py`).
"""

from __future__ import annotations

import random
from typing import TYPE_CHECKING, Any

from pynatsd.jetstream import errors
from pynatsd.jetstream.config import DEFAULT_EPHEMERAL_INACTIVE, consumer_filters
from pynatsd.subjects import subjects_collide

if TYPE_CHECKING:
    from pynatsd.jetstream.stream import Stream

MS = 1_000_000


def delete_threshold(config: dict[str, Any], durable: bool, push: bool) -> int:
    """Go's updateInactiveThreshold: how long (ns) the consumer may stay inactive before it
    is deleted, 0 for never. Ephemerals always have a threshold (5 s by default, written into
    the config as nats-server does); a pull consumer's gets 100 ms to 1 s of jitter."""
    if not durable and config["inactive_threshold"] <= 0:
        config["inactive_threshold"] = DEFAULT_EPHEMERAL_INACTIVE
        return DEFAULT_EPHEMERAL_INACTIVE + 100 * MS + random.randrange(900) * MS
    if config["inactive_threshold"] > 0:
        extra = 0 if push else 100 * MS + random.randrange(900) * MS
        return int(config["inactive_threshold"]) + extra
    return 0


def cheap_filters(filters: list[str]) -> bool:
    """No filter or one literal filter: the store counts pending messages in O(log n)."""
    return not filters or (len(filters) == 1 and "*" not in filters[0] and ">" not in filters[0])


def check_workqueue(stream: Stream, config: dict[str, Any]) -> None:
    """Work-queue streams: explicit acks, deliver all, and no two consumers for the same
    messages (Go's addConsumer checks)."""
    if stream.config.retention != "workqueue" or config["direct"] or config["sourcing"]:
        return
    if config["ack_policy"] not in ("explicit", "flow_control"):
        raise errors.consumer_wq_requires_explicit_ack()
    if config["deliver_policy"] != "all":
        raise errors.js_error("ConsumerWQConsumerNotDeliverAll")
    if stream.consumers:
        filters = consumer_filters(config)
        if not filters:
            raise errors.consumer_wq_multiple_unfiltered()
        partition_unique(stream, config["name"], filters)


def partition_unique(stream: Stream, name: str, filters: list[str]) -> None:
    for other in stream.consumers.values():
        if other.name == name:
            continue
        if not other.filters:
            raise errors.consumer_wq_not_unique()
        if any(subjects_collide(a, b) for a in filters for b in other.filters):
            raise errors.consumer_wq_not_unique()
