"""PermissionChecker, table-driven: publish, subscribe (queues too), delivery deny, responses."""

from __future__ import annotations

import pytest

from pynatsd.auth import SYS_QUEUE, PermissionChecker
from pynatsd.auth.permissions import PERM_CACHE_SIZE
from pynatsd.options import Permissions, ResponsePermission, SubjectPermission


def perms(
    pub_allow: list[str] | None = None,
    pub_deny: list[str] | None = None,
    sub_allow: list[str] | None = None,
    sub_deny: list[str] | None = None,
    response: ResponsePermission | None = None,
) -> Permissions:
    return Permissions(
        publish=SubjectPermission(pub_allow, pub_deny),
        subscribe=SubjectPermission(sub_allow, sub_deny),
        response=response,
    )


PUBLISH = [
    # (allow, deny, subject, allowed)
    (None, None, "anything", True),
    (["foo.>"], None, "foo.bar", True),
    (["foo.>"], None, "foo", False),
    (["foo.*"], None, "foo.bar.baz", False),
    (["*.bar"], None, "foo.bar", True),
    (["foo.>"], ["foo.secret"], "foo.secret", False),
    (["foo.>"], ["foo.secret"], "foo.public", True),
    (None, [">"], "foo", False),
    (None, ["foo.*"], "foo.bar", False),
    (None, ["foo.*"], "foo.bar.baz", True),
    ([], None, "foo", False),  # allow_responses alone: an empty allow list
    (["foo.*"], None, "foo.*", True),  # a literal `*` published: matched by the wildcard
    (["foo.bar"], None, "foo.*", False),  # ... but not by a literal
    (["foo.>"], None, "foo..bar", False),  # empty tokens match nothing
    (None, ["foo.>"], "foo..bar", True),
    (["foo.>"], None, "", False),
]


@pytest.mark.parametrize(("allow", "deny", "subject", "allowed"), PUBLISH)
def test_can_publish(
    allow: list[str] | None, deny: list[str] | None, subject: str, allowed: bool
) -> None:
    checker = PermissionChecker(perms(pub_allow=allow, pub_deny=deny))
    assert checker.can_publish(subject) is allowed
    assert checker.can_publish(subject) is allowed  # from the cache


SUBSCRIBE = [
    # (allow, deny, subject, queue, allowed)
    (None, None, "foo", None, True),
    (None, None, "foo", SYS_QUEUE, False),
    (["foo"], None, "foo", None, True),
    (["foo"], None, "foo", "any", True),
    (["foo v1"], None, "foo", None, False),
    (["foo v1"], None, "foo", "v1", True),
    (["foo v1"], None, "foo", "v2", False),
    (["foo", "foo v1"], None, "foo", None, True),
    (["foo", "foo v1"], None, "foo", "v2", False),
    (["foo.* v.*"], None, "foo.x", "v.1", True),
    (["foo.* v.*"], None, "foo.x", "w.1", False),
    (["foo.* v.>"], None, "foo.x", "v.1.2", True),
    (["foo.>"], None, "foo.*", None, True),
    (["foo.>"], None, "foo.>", None, True),
    (["foo.*"], None, "foo.>", None, True),  # `>` is a literal token here, `*` matches it
    (["foo.bar"], None, "foo.*", None, False),
    (["foo.>"], None, ">", None, False),
    ([], None, "foo", None, True),  # an empty subscribe allow list is no list
    (None, [">"], "foo", None, False),
    (None, ["foo.secret"], "foo.>", None, True),  # filtered at delivery instead
    (None, ["foo.secret"], "foo.secret", None, False),
    (None, ["> *.prod"], "a", None, True),
    (None, ["> *.prod"], "a", "eu.prod", False),
    (None, ["> *.prod"], "a", "prod", True),
    (None, ["foo.* q"], "foo.a", "q", False),
    (None, ["foo.* q"], "foo.a", None, True),
    (["foo.>"], ["foo.bar"], "foo.bar", None, False),
    (["foo.>"], None, "foo..bar", None, False),
]


@pytest.mark.parametrize(("allow", "deny", "subject", "queue", "allowed"), SUBSCRIBE)
def test_can_subscribe(
    allow: list[str] | None,
    deny: list[str] | None,
    subject: str,
    queue: str | None,
    allowed: bool,
) -> None:
    checker = PermissionChecker(perms(sub_allow=allow, sub_deny=deny))
    assert checker.can_subscribe(subject, queue) is allowed


def test_no_permissions_allow_everything_but_the_sys_queue() -> None:
    checker = PermissionChecker(None)
    assert not checker.publish_restricted
    assert checker.can_publish("a.b") and checker.can_subscribe(">", "q")
    assert not checker.can_subscribe("a", SYS_QUEUE)
    assert not checker.deny_delivery("a.b")


DELIVERY = [
    # (deny, subscription, queue, delivered subject, filter on, denied)
    (["foo.secret"], "foo.>", None, "foo.secret", True, True),
    (["foo.secret"], "foo.>", None, "foo.public", True, False),
    (["foo.secret"], "bar.>", None, "bar.x", False, False),
    (["foo.a.* q"], "foo.>", None, "foo.a.b", True, False),
    (["foo.a.* q"], "foo.>", "q", "foo.a.b", True, True),
    (["foo.a.* q"], "foo.>", "r", "foo.a.b", True, False),
    (["foo.a.* q.*"], "foo.>", "q.1", "foo.a.b", True, True),
    (["foo.secret"], "foo.public", "q", "foo.public", False, False),
]


@pytest.mark.parametrize(("deny", "sub", "queue", "subject", "filtering", "denied"), DELIVERY)
def test_deny_delivery(
    deny: list[str], sub: str, queue: str | None, subject: str, filtering: bool, denied: bool
) -> None:
    checker = PermissionChecker(perms(sub_deny=deny))
    assert not checker.delivery_filter
    assert checker.can_subscribe(sub, queue)
    assert checker.delivery_filter is filtering
    assert checker.deny_delivery(subject, queue) is denied
    assert checker.deny_delivery(subject, queue) is denied  # from the cache


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_responses_max_and_expiry() -> None:
    clock = Clock()
    checker = PermissionChecker(
        perms(pub_allow=[], response=ResponsePermission(max_msgs=2, expires=10.0)), clock
    )
    assert not checker.can_publish("_INBOX.a")
    checker.track_request("_INBOX.a")
    assert checker.can_publish("_INBOX.a")
    assert checker.can_publish("_INBOX.a")
    assert not checker.can_publish("_INBOX.a")  # max 2
    checker.track_request("_INBOX.b")
    clock.now += 11
    assert not checker.can_publish("_INBOX.b")  # expired
    assert checker.tracked_replies == 0


def test_responses_unlimited_and_allowed_replies_not_tracked() -> None:
    checker = PermissionChecker(
        perms(pub_allow=["ok.>"], response=ResponsePermission(max_msgs=-1, expires=-1))
    )
    checker.track_request("ok.reply")  # already allowed: nothing to track
    assert checker.tracked_replies == 0
    checker.track_request("r")
    assert all(checker.can_publish("r") for _ in range(100))
    assert not checker.can_publish("other")


def test_responses_are_pruned() -> None:
    clock = Clock()
    checker = PermissionChecker(
        perms(pub_allow=[], response=ResponsePermission(max_msgs=1, expires=5.0)), clock
    )
    for i in range(100):
        checker.track_request(f"r.{i}")
    assert checker.tracked_replies == 100
    clock.now += 6
    checker.track_request("r.new")  # a second has passed since the last prune: prune
    assert checker.tracked_replies == 1


def test_publish_cache_is_a_bounded_lru() -> None:
    checker = PermissionChecker(perms(pub_allow=["a.>"], pub_deny=["a.x"]))
    assert checker.can_publish("a.hot")
    for i in range(PERM_CACHE_SIZE * 3):
        checker.can_publish(f"a.{i}")
        assert checker.can_publish("a.hot")  # kept warm: never evicted
    cache = checker._pub_cache
    assert len(cache) == PERM_CACHE_SIZE
    assert "a.hot" in cache and "a.0" not in cache
    assert not checker.can_publish("a.x")


def test_allowed_by_rules_ignores_responses() -> None:
    checker = PermissionChecker(perms(pub_allow=[], response=ResponsePermission()))
    checker.track_request("r")
    assert not checker.allowed_by_rules("r")
    assert checker.can_publish("r")
    assert not checker.can_publish("r")


def test_bad_permission_entries_are_skipped() -> None:
    # nats-server logs and skips an entry it cannot parse (only reachable without the loader).
    checker = PermissionChecker(perms(pub_allow=["a b c", "ok"], sub_allow=["x y z", "s"]))
    assert checker.can_publish("ok") and not checker.can_publish("a")
    assert checker.can_subscribe("s") and not checker.can_subscribe("x")
