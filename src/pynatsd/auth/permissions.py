"""Publish and subscribe permissions of one connection (nats-server client.go semantics).

Matching follows nats-server, which stores permission subjects in a SubList and matches the
subject being checked against it *as a literal*: a `*` or `>` inside a SUB subject is plain text
that only a wildcard of the permission can match. So `allow: "foo.>"` permits `SUB foo.*`,
`allow: "foo.bar"` does not permit `SUB foo.*`, and `deny: "foo.secret"` does not stop
`SUB foo.>` -- that one is filtered at delivery time instead (`deny_delivery`).

- Deny wins over allow; no allow list allows everything not denied. An empty publish allow list
  allows nothing (what `allow_responses` alone gives); an empty subscribe allow list is no list.
- Queue permissions are written "subject queue": an entry with a queue matches only queue
  subscriptions in a matching group (the queue may hold wildcards); an entry without one matches
  plain and queue subscriptions alike, unless an entry with a queue also matches the subject.
- Publish decisions are cached per connection (an LRU of 128 entries) so that the check costs a
  dict lookup on the hot path. Replies allowed by `allow_responses` are never cached: each use
  counts against `max`.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable, Iterable

from pynatsd.options import Permissions, SubjectPermission
from pynatsd.subjects import is_subset_match_tokens, is_valid_subject, subjects_collide

__all__ = [
    "DENY_CACHE_SIZE",
    "PERM_CACHE_SIZE",
    "SYS_QUEUE",
    "PermissionChecker",
    "SubjectMatcher",
]

PERM_CACHE_SIZE = 128  # nats-server maxPermCacheSize
DENY_CACHE_SIZE = 256  # nats-server maxDenyPermCacheSize
SYS_QUEUE = "_sys_"  # nats-server sysGroup: reserved, never granted to a client
# Tracked reply subjects are pruned after this many new ones or this long (replyPermLimit,
# replyPruneTime in client.go).
_REPLY_PRUNE_COUNT = 4096
_REPLY_PRUNE_INTERVAL = 1.0


def _tokens(subject: str) -> list[str] | None:
    """The tokens of a subject to check, or None when a token is empty: nats-server's SubList
    matches nothing at all for such a subject (so it is neither allowed nor denied by a list)."""
    tokens = subject.split(".")
    if "" in tokens:
        return None
    return tokens


def _matches(tokens: list[str], pattern: tuple[str, ...]) -> bool:
    last = len(pattern) - 1
    n = len(tokens)
    for i, p in enumerate(pattern):
        if p == ">" and i == last:
            return n > i
        if i >= n:
            return False
        if p != "*" and p != tokens[i]:
            return False
    return n == len(pattern)


def _has_wildcard(subject: str) -> bool:
    return any(t in ("*", ">") for t in subject.split("."))


def _queue_matches(queue: str, names: Iterable[str]) -> bool:
    """nats-server queueMatches: a literal name, or a name with wildcards matching `queue`."""
    for name in names:
        if queue == name:
            return True
        if _has_wildcard(name) and is_subset_match_tokens(queue.split("."), name.split(".")):
            return True
    return False


class SubjectMatcher:
    """A list of permission subjects, some with a queue ("subject queue").

    `match(subject)` answers like a SubList match: (any plain entry matched, the queue names of
    the queue entries that matched)."""

    __slots__ = ("_literal", "_literal_queues", "_wild", "_wild_queues", "entries")

    def __init__(self, entries: Iterable[str], allow_queue: bool) -> None:
        self.entries: list[str] = []
        self._literal: set[str] = set()
        self._wild: list[tuple[str, ...]] = []
        self._literal_queues: dict[str, list[str]] = {}
        self._wild_queues: list[tuple[tuple[str, ...], str]] = []
        for entry in entries:
            parsed = _split_entry(entry, allow_queue)
            if parsed is None:
                continue  # nats-server logs and skips an entry it cannot parse
            subject, queue = parsed
            self.entries.append(entry)
            wild = _has_wildcard(subject)
            if queue:
                if wild:
                    self._wild_queues.append((tuple(subject.split(".")), queue))
                else:
                    self._literal_queues.setdefault(subject, []).append(queue)
            elif wild:
                self._wild.append(tuple(subject.split(".")))
            else:
                self._literal.add(subject)

    def match_plain(self, subject: str) -> bool:
        """True if an entry without a queue matches `subject` (SubList NumInterest > 0)."""
        if subject in self._literal:
            return _tokens(subject) is not None
        if not self._wild:
            return False
        tokens = _tokens(subject)
        if tokens is None:
            return False
        return any(_matches(tokens, pattern) for pattern in self._wild)

    def match(self, subject: str) -> tuple[bool, list[str]]:
        tokens = _tokens(subject)
        if tokens is None:
            return False, []
        plain = subject in self._literal or any(_matches(tokens, p) for p in self._wild)
        queues = list(self._literal_queues.get(subject, ()))
        queues.extend(q for p, q in self._wild_queues if _matches(tokens, p))
        return plain, queues

    def subjects(self) -> list[str]:
        """The subjects of every entry, without queues (for collision checks)."""
        return [entry.split()[0] for entry in self.entries]


def _split_entry(entry: str, allow_queue: bool) -> tuple[str, str] | None:
    """nats-server splitSubjectQueue: "subject" or "subject queue", both valid subjects."""
    if is_valid_subject(entry):
        return entry, ""
    parts = entry.split()
    if not parts or len(parts) > 2:
        return None
    subject, queue = parts[0], parts[1] if len(parts) == 2 else ""
    if not is_valid_subject(subject) or (queue and not is_valid_subject(queue)):
        return None
    # A queue qualifier means nothing for publish; the subject scope is kept (setPermissions).
    return subject, queue if allow_queue else ""


class PermissionChecker:
    """The permission state of one connection: built at CONNECT from the user's Permissions.

    `PermissionChecker(None)` allows everything but the reserved `_sys_` queue."""

    __slots__ = (
        "_clock",
        "_deny_cache",
        "_last_prune",
        "_pub_allow",
        "_pub_cache",
        "_pub_deny",
        "_replies",
        "_replies_since_prune",
        "_sub_allow",
        "_sub_deny",
        "delivery_filter",
        "permissions",
        "publish_restricted",
        "response_expires",
        "response_max",
        "sub_restricted",
        "watching",
    )

    def __init__(
        self, permissions: Permissions | None, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.permissions = permissions
        self._clock = clock
        self._pub_allow: SubjectMatcher | None = None
        self._pub_deny: SubjectMatcher | None = None
        self._sub_allow: SubjectMatcher | None = None
        self._sub_deny: SubjectMatcher | None = None
        self._pub_cache: OrderedDict[str, bool] = OrderedDict()
        self._deny_cache: dict[tuple[str, str], bool] = {}
        # reply subject -> [time tracked, uses]; None when allow_responses is off.
        self._replies: dict[str, list[float]] | None = None
        self._replies_since_prune = 0
        self._last_prune = clock()
        self.response_max = 0
        self.response_expires = 0.0
        # True once a subscription may receive a message its deny list forbids (a wildcard or
        # queue subscription overlapping a deny entry): deliveries must then be checked.
        self.delivery_filter = False
        pub: SubjectPermission | None = permissions.publish if permissions else None
        sub: SubjectPermission | None = permissions.subscribe if permissions else None
        if pub is not None:
            if pub.allow is not None:
                self._pub_allow = SubjectMatcher(pub.allow, allow_queue=False)
            if pub.deny:
                self._pub_deny = SubjectMatcher(pub.deny, allow_queue=False)
        if sub is not None:
            # Unlike publish, an empty subscribe allow list is "no list" (len() > 0 in Go).
            if sub.allow:
                self._sub_allow = SubjectMatcher(sub.allow, allow_queue=True)
            if sub.deny:
                self._sub_deny = SubjectMatcher(sub.deny, allow_queue=True)
        response = permissions.response if permissions else None
        if response is not None:
            self._replies = {}
            self.response_max = response.max_msgs
            self.response_expires = response.expires
        # True when deliveries to this connection need a per-message check: a deny list its
        # wider subscriptions overlap (`delivery_filter`, set by can_subscribe), or replies to
        # track for allow_responses. Read on every delivery, so kept rather than derived.
        self.watching = self._replies is not None
        # False: every publish is allowed and callers may skip can_publish altogether.
        self.publish_restricted = self._pub_allow is not None or self._pub_deny is not None
        # False: every plain (non-queue) subscription is allowed without asking can_subscribe.
        self.sub_restricted = self._sub_allow is not None or self._sub_deny is not None

    # -- publish ---------------------------------------------------------------------------

    def can_publish(self, subject: str) -> bool:
        """May this connection publish to `subject`? A reply allowed by allow_responses
        counts as one use of it."""
        if not self.publish_restricted:
            return True
        if self.allowed_by_rules(subject):
            return True
        return self._replies is not None and self._response_allowed(subject)

    def allowed_by_rules(self, subject: str) -> bool:
        """The allow/deny lists' (cached) decision alone, without response permissions. A
        publish allowed here is allowed for the connection's life, so a delivery plan cached
        for its PUB line needs no further check."""
        cache = self._pub_cache
        decision = cache.get(subject)
        if decision is not None:
            cache.move_to_end(subject)
            return decision
        allowed = True
        if self._pub_allow is not None:
            allowed = self._pub_allow.match_plain(subject)
        if allowed and self._pub_deny is not None:
            allowed = not self._pub_deny.match_plain(subject)
        cache[subject] = allowed
        if len(cache) > PERM_CACHE_SIZE:
            cache.popitem(last=False)
        return allowed

    def _response_allowed(self, subject: str) -> bool:
        replies = self._replies
        assert replies is not None
        entry = replies.get(subject)
        if entry is None:
            return False
        entry[1] += 1
        if self.response_max > 0 and entry[1] > self.response_max:
            del replies[subject]
            return False
        if self.response_expires > 0 and self._clock() - entry[0] > self.response_expires:
            del replies[subject]
            return False
        return True

    def track_request(self, reply: str) -> None:
        """Call when this connection is sent a message with a reply subject: with
        allow_responses it may then publish to `reply` (up to max times, within expires)."""
        replies = self._replies
        if replies is None or not reply:
            return
        if self.allowed_by_rules(reply):
            return
        # nats-server checks with pubAllowedFullCheck, which counts a use of a reply already
        # tracked; when that use is over the limit, the reply is tracked afresh.
        if self._response_allowed(reply):
            return
        now = self._clock()
        replies[reply] = [now, 0]
        self._replies_since_prune += 1
        if (
            self._replies_since_prune > _REPLY_PRUNE_COUNT
            or now - self._last_prune > _REPLY_PRUNE_INTERVAL
        ):
            self._prune_replies(now)

    def _prune_replies(self, now: float) -> None:
        replies = self._replies
        assert replies is not None
        limit, ttl = self.response_max, self.response_expires
        for reply, (since, uses) in list(replies.items()):
            if (limit > 0 and uses >= limit) or (ttl > 0 and now - since > ttl):
                del replies[reply]
        self._replies_since_prune = 0
        self._last_prune = now

    @property
    def tracked_replies(self) -> int:
        return len(self._replies) if self._replies is not None else 0

    # -- subscribe ---------------------------------------------------------------------------

    def can_subscribe(self, subject: str, queue: str | None = None) -> bool:
        """May this connection subscribe to `subject` (in queue group `queue`)? The reserved
        `_sys_` queue is refused to everyone."""
        if queue == SYS_QUEUE:
            return False
        queue = queue or ""
        allowed = True
        if self._sub_allow is not None:
            plain, queues = self._sub_allow.match(subject)
            allowed = plain
            if queue and queues:
                # A queue entry matching the subject decides for queue subscriptions.
                allowed = _queue_matches(queue, queues)
        if allowed and self._sub_deny is not None:
            plain, queues = self._sub_deny.match(subject)
            allowed = not plain
            if allowed and queue and queues:
                allowed = not _queue_matches(queue, queues)
        deny = self._sub_deny
        if allowed and deny is not None and not self.delivery_filter:
            # Like nats-server's lazily loaded delivery filter: only a wildcard or queue
            # subscription can receive what its deny list forbids.
            self.delivery_filter = bool(queue or _has_wildcard(subject)) and any(
                subjects_collide(entry, subject) for entry in deny.subjects()
            )
            self.watching = self.delivery_filter or self._replies is not None
        return allowed

    def deny_delivery(self, subject: str, queue: str | None = None) -> bool:
        """True if a message on `subject` (to a subscription in `queue`) must not be delivered:
        the subscribe deny list forbids it although a wider subscription matched. Cheap to skip
        while `delivery_filter` is False."""
        deny = self._sub_deny
        if deny is None:
            return False
        key = (subject, queue or "")
        cache = self._deny_cache
        denied = cache.get(key)
        if denied is not None:
            return denied
        plain, queues = deny.match(subject)
        denied = plain or bool(queue and queues and _queue_matches(queue, queues))
        if len(cache) >= DENY_CACHE_SIZE:
            cache.clear()
        cache[key] = denied
        return denied
