"""Delivery plans: a publisher's cache of who receives each of its PUB lines.

nats-server keeps a per-connection cache of SubList results (`c.in.results`) keyed by subject;
pynatsd goes one step further and keeps, per PUB control line, the receivers and their ready-made
MSG lines (RMSG lines for another server's interest), valid while the account's SubList
generation holds. A plan holds only receivers for
which `server.delivery.deliver` would check nothing per message (no auto-unsubscribe, no
deny-on-deliver, no trace), so sending through it is the same delivery, done without the
checks. An internal receiver is planned when its subscription takes a line's messages at once
(`InternalSubscription.take_line`: a stream capturing the subject), for a line without a
header: it is handed the line's subject, reply and payloads instead of frames.

Compiled by mypyc (native.COMPILED_MODULES): `PlanCache.send` and `PlanCache.send_run` are the
per-message path of every planned publish, `send_run` taking a whole run of messages with one
line (`PubRun`) at once: one frame per receiver and run, its MSG line before each payload. What
the classes hold is typed for that (native attributes, no dynamic dispatch in the loops); the
types of interpreted modules (`Subscription`, `Receiver`, `Pub`) are `Any` here, since mypyc
would check each value against them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from mypy_extensions import i64

from pynatsd.protocol.events import Pub
from pynatsd.protocol.frames import msg_head
from pynatsd.protocol.runs import PubRun
from pynatsd.server.outbound import Outbound
from pynatsd.server.reserved import JS_ACK_PREFIX, RESERVED_REPLY_PREFIXES

if TYPE_CHECKING:
    from pynatsd.sublist import SubList

# One receiver of a planned delivery: (its outbound queue, the subscription, its MSG line).
Target = tuple[Outbound, Any, bytes]

# Distinct PUB lines with a cached delivery plan, per connection; cleared wholesale when full.
PLAN_CACHE_SIZE = 1024
# Distinct ack subject prefixes (`$JS.ACK.<stream>.<consumer>.`) with a shared SubList result,
# per connection; cleared wholesale when full.
ACK_PREFIX_CACHE_SIZE = 64


class Plan:
    """The receivers of one PUB line under one SubList generation. Deliveries to the plain
    receivers are counted here and added to their statistics once per read (`settle`), not once
    per message and receiver."""

    __slots__ = (
        "count",
        "genid",
        "groups",
        "internal",
        "nbytes",
        "reply",
        "rr",
        "subject",
        "sublist",
        "targets",
    )

    def __init__(
        self,
        genid: int,
        targets: tuple[Target, ...],
        groups: tuple[tuple[Target, ...], ...],
        sublist: SubList[Any] | None = None,
        internal: tuple[Any, ...] = (),
        subject: bytes = b"",
        reply: bytes = b"",
    ) -> None:
        self.genid = genid
        # The SubList whose generation `genid` is, for a connection whose lines belong to
        # several accounts (a route's); None when the owner knows its one SubList.
        self.sublist = sublist
        self.targets = targets
        self.groups = groups
        # Internal subscriptions that take the line's messages (`take_line`), and the line's
        # subject and reply they are handed.
        self.internal = internal
        self.subject = subject
        self.reply = reply
        self.count = 0
        self.nbytes = 0
        # The queue groups' turn: message k of this line goes to member (rr + k) % members.
        self.rr = 0

    def settle(self) -> None:
        count, nbytes = self.count, self.nbytes
        self.count = self.nbytes = 0
        for _, sub, _ in self.targets:
            sub.delivered += count
            sub.client.stats.sent(count, nbytes)
        for sub in self.internal:
            sub.delivered += count
            sub.client.stats.sent(count, nbytes)

    def send(self, payload: bytes, dirty: list[Outbound], touched: list[Plan]) -> None:
        """One message to every receiver of the plan: its MSG line and the payload."""
        self.send_tail(payload + b"\r\n", len(payload), dirty, touched)

    def send_tail(self, tail: bytes, size: int, dirty: list[Outbound], touched: list[Plan]) -> None:
        """One message, its payload of `size` bytes with its CRLF (`tail`), to every receiver
        of the plan: its MSG line and the tail."""
        if not self.count:
            touched.append(self)
        self.count += 1
        self.nbytes += size
        for outbound, _, head in self.targets:
            outbound.queue_message(head, tail, dirty)
        for group in self.groups:
            rr = self.rr
            self.rr = rr + 1
            outbound, sub, head = group[rr % len(group)]
            sub.delivered += 1
            sub.client.stats.sent(1, size)
            outbound.queue_message(head, tail, dirty)
        for sub in self.internal:
            sub.take_line(sub, self.subject, self.reply, [tail])

    def send_run(
        self, tails: list[bytes], size: int, dirty: list[Outbound], touched: list[Plan]
    ) -> None:
        """Messages of one line, each payload of `size` bytes with its CRLF (`tails`): one
        frame per receiver, its MSG line before each payload. Receivers with the same MSG line
        (the same sid on other connections) share the frame."""
        n = len(tails)
        if n == 1:
            self.send_tail(tails[0], size, dirty, touched)
            return
        if not n:
            return
        if not self.count:
            touched.append(self)
        self.count += n
        self.nbytes += n * size
        last_head = b""
        block = b""
        for outbound, _, head in self.targets:
            if head != last_head:
                block = head + head.join(tails)
                last_head = head
            outbound.queue(block, dirty)
        for group in self.groups:
            members = len(group)
            rr = self.rr
            self.rr = rr + n
            for k in range(min(members, n)):
                # Messages k, k + members, ... of the run go to member (rr + k) % members.
                outbound, sub, head = group[(rr + k) % members]
                mine = tails[k::members] if members > 1 else tails
                taken = len(mine)
                sub.delivered += taken
                sub.client.stats.sent(taken, taken * size)
                outbound.queue(head + head.join(mine), dirty)
        for sub in self.internal:
            sub.take_line(sub, self.subject, self.reply, tails)


class PlanCache:
    """A connection's plans by PUB line, and those used during the current read."""

    __slots__ = ("ack_results", "ack_sublist", "by_line", "last_line", "last_plan", "touched")

    def __init__(self) -> None:
        self.by_line: dict[bytes, Plan] = {}
        # SubList results by ack subject prefix, with the generation they hold for
        # (`match_ack`); made at the first ack, for the SubList `ack_sublist`.
        self.ack_results: dict[bytes, tuple[int, Any]] | None = None
        self.ack_sublist: Any = None
        # The plan used last, by identity of its line: the parser hands out one bytes object
        # per distinct PUB line.
        self.last_line = b""
        self.last_plan: Plan | None = None
        # Plans used during the current read, whose delivery counts are still to be settled.
        self.touched: list[Plan] = []

    def lookup(self, line: bytes) -> Plan | None:
        if line is self.last_line:
            return self.last_plan
        plan = self.by_line.get(line)
        self.last_line = line
        self.last_plan = plan
        return plan

    def send(self, line: bytes, payload: bytes, genid: int, dirty: list[Outbound]) -> bool:
        """Deliver one message by the plan of its PUB `line`, if one is valid for the SubList
        generation `genid`: True when it was."""
        plan = self.last_plan if line is self.last_line else self.lookup(line)
        if plan is None or plan.genid != genid:
            return False
        plan.send(payload, dirty, self.touched)
        return True

    def send_run(
        self,
        line: bytes,
        tails: list[bytes],
        start: int,
        size: int,
        genid: int,
        dirty: list[Outbound],
    ) -> bool:
        """Deliver the messages of a run of one PUB `line` from `start` on (`tails`: payloads
        with their CRLF) by the line's plan, if one is valid for the SubList generation
        `genid`: True when it was."""
        plan = self.last_plan if line is self.last_line else self.lookup(line)
        if plan is None or plan.genid != genid:
            return False
        plan.send_run(tails[start:] if start else tails, size, dirty, self.touched)
        return True

    def send_events(
        self, events: list[Any], start: int, genid: int, dirty: list[Outbound], stats: Any
    ) -> int:
        """Deliver the messages of a read's events from `start` on by their plans, as long as
        each is a plain `Pub` or `PubRun` whose line has a plan valid for the SubList
        generation `genid`, and count them into the publisher's `stats`: the index of the
        first event left to the caller (every check of the slow path was made when the plan
        was). The per-message loop of a publisher, compiled. It stops after a plan with an
        internal receiver, whose work (a stream storing) may change the SubList: the caller
        reads its generation again."""
        i = start
        n = len(events)
        msgs = 0
        nbytes = 0
        touched = self.touched
        while i < n:
            ev = events[i]
            kind = type(ev)
            if kind is Pub:
                line: bytes = ev[4]
                if not line:
                    break
                plan = self.last_plan if line is self.last_line else self.lookup(line)
                if plan is None or plan.genid != genid:
                    break
                payload: bytes = ev[2]
                plan.send(payload, dirty, touched)
                msgs += 1
                nbytes += len(payload)
                if plan.internal:
                    i += 1
                    break
            elif kind is PubRun:
                run: PubRun = ev
                line = run.line
                plan = self.last_plan if line is self.last_line else self.lookup(line)
                if plan is None or plan.genid != genid:
                    break
                tails = run.tails
                size = run.size
                plan.send_run(tails, size, dirty, touched)
                msgs += len(tails)
                nbytes += len(tails) * size
                if plan.internal:
                    i += 1
                    break
            else:
                break
            i += 1
        if msgs:
            stats.in_msgs += msgs
            stats.in_bytes += nbytes
        return i

    def settle(self) -> None:
        touched = self.touched
        if touched:
            for plan in touched:
                plan.settle()
            touched.clear()

    def clear(self) -> None:
        self.by_line.clear()
        self.last_line = b""
        self.last_plan = None
        self.ack_results = None

    def match_ack(self, sublist: Any, subject: bytes) -> Any:
        """What `sublist.match_bytes(subject)` returns for a JetStream ack subject
        (`$JS.ACK.<stream>.<consumer>.<sequences...>`, a new one for every message): the
        result of the first ack of a consumer serves all its acks while no subscription can
        tell them apart (every one that collides with `$JS.ACK.<stream>.<consumer>.>` ends in
        a `>` within its first five tokens: the consumer's own, a `$JS.ACK.>` or `>` watcher,
        an import, a route's interest) and the SubList generation holds. nats-server's
        per-connection result cache misses on every ack; this does not."""
        # One split, its tokens compared in compiled code: `b"*" in subject` would cost more
        # than the split (CPython tries the needle as an integer first, raising and clearing a
        # TypeError each time).
        tokens = subject.split(b".")
        if len(tokens) < 5:
            return sublist.match_bytes(subject)
        for token in tokens:
            if not token or token == b"*" or token == b">":
                return sublist.match_bytes(subject)  # not an ack's shape: nothing to share
        results = self.ack_results
        if results is None or sublist is not self.ack_sublist:
            results = self.ack_results = {}
            self.ack_sublist = sublist
        prefix = subject[: len(tokens[0]) + len(tokens[1]) + len(tokens[2]) + len(tokens[3]) + 4]
        genid: int = sublist.genid
        entry = results.get(prefix)
        if entry is not None and entry[0] == genid:
            shared = entry[1]
            return shared if shared is not None else sublist.match_bytes(subject)
        result = sublist.match_bytes(subject)
        if len(results) >= ACK_PREFIX_CACHE_SIZE:
            results.clear()
        results[prefix] = (genid, result if _shared_by_prefix(sublist, prefix) else None)
        return result

    def ack_run(self, sublist: Any, events: list[Any], start: int) -> tuple[int, Any, int]:
        """The run of JetStream acks from `events[start]` on that `match_ack` sends to one
        subscription that takes runs (an internal one with a `run`) and nowhere else: the
        index after it, that subscription and the run's payload bytes; `(start, None, 0)`
        when `events[start]` starts no such run (found at the first event, so that a read of
        acks to someone else costs no second look at each). An ack here is a `Pub` without a
        PUB line (none is planned), without a header, on `$JS.ACK.`, whose reply is not in a
        reserved space (the caller's slow path judges those). Compiled, and without a match
        per ack: while the first ack's result is shared by its prefix (`match_ack`), an ack
        with the same prefix and a tail `match_ack` would share it for (one or more tokens,
        none empty, no `*` or `>` in them) takes it as it is."""
        ack_prefix = JS_ACK_PREFIX
        reserved = RESERVED_REPLY_PREFIXES
        n = len(events)
        j = start
        target: Any = None
        prefix = b""  # the ack subject prefix whose shared result routes to `target`
        nbytes = 0
        while j < n:
            ev = events[j]
            if type(ev) is not Pub:
                break
            if ev[4] or ev[3] > 0:
                break
            subject: bytes = ev[0]
            reply: bytes = ev[1]
            if not subject.startswith(ack_prefix):
                break
            if reply and reply.startswith(reserved):
                break
            if not (prefix and subject.startswith(prefix) and _plain_tail(subject, len(prefix))):
                result = self.match_ack(sublist, subject)
                if result.qsubs or len(result.psubs) != 1:
                    break
                sub = result.psubs[0]
                if target is None:
                    if getattr(sub, "run", None) is None:
                        break  # it takes no runs: the caller goes the usual way at once
                    target = sub
                    prefix = self._shared_prefix(sublist, subject, result)
                elif sub is not target:
                    break
            payload: bytes = ev[2]
            nbytes += len(payload)
            j += 1
        return j, target, nbytes

    def _shared_prefix(self, sublist: Any, subject: bytes, result: Any) -> bytes:
        """The prefix of the ack `subject` when `match_ack` just gave `result` as the one it
        shares by that prefix, else b\"\"."""
        end = subject.find(b".", len(JS_ACK_PREFIX))  # after the stream's token
        end = subject.find(b".", end + 1) if end > 0 else -1  # after the consumer's
        results = self.ack_results
        if end < 0 or results is None or sublist is not self.ack_sublist:
            return b""
        prefix = subject[: end + 1]
        entry = results.get(prefix)
        if entry is None or entry[0] != sublist.genid or entry[1] is not result:
            return b""
        return prefix

    def remember(
        self,
        publisher: Any,
        ev: Any,
        result: Any,
        genid: int,
        sublist: SubList[Any] | None = None,
        needs_receiver: bool = False,
    ) -> None:
        """Cache the receivers of a plain PUB line (`ev`, a `Pub`; `result`, its
        `SubListResult`): every plain subscriber, the internal ones that take a line's
        messages at once, and the members of each queue group to pick from; no plan when any
        receiver needs a check per message. A line without receivers gets a plan too, with
        nobody in it: the message is only counted; unless `needs_receiver` (a request whose
        publisher wants "no responders" when nobody gets it)."""
        receivers: list[Target] = []
        internal: list[Any] = []
        remotes: set[Any] = set()
        for sub in result.psubs:
            if sub.remote:
                # Another server: one RMSG however many of its subscriptions match.
                if sub.closed or sub.client.closed or sub.client.outbound is None:
                    return
                if (sub.gateway or sub.leaf) and not sub.client.plannable(ev):
                    # Another cluster or a leaf: a subject denied, a reply to map, a subject
                    # to route back.
                    return
                perms = sub.client.perms
                if perms.delivery_filter and perms.deny_delivery(
                    ev.subject.decode("utf-8", "surrogateescape"), sub.queue
                ):
                    continue  # the route's export deny list: never sent this subject
                if sub.client not in remotes:
                    remotes.add(sub.client)
                    receivers.append(_remote_target(sub, ev))
                continue
            if not _plannable(sub):
                if ev.header_size < 0 and _takes_line(sub):
                    internal.append(sub)
                    continue
                return
            if sub.client is publisher and not publisher.echo:
                continue
            receivers.append(_target(sub, ev))
        groups: list[tuple[Target, ...]] = []
        for group in result.qsubs:
            members: list[Target] = []
            for sub in group:
                # A queue group with remote members is picked by weight (delivery.fan_out).
                if sub.remote or not _plannable(sub):
                    return
                if sub.client is publisher and not publisher.echo:
                    continue
                members.append(_target(sub, ev))
            if members:
                groups.append(tuple(members))
        if needs_receiver and not (receivers or internal or groups):
            return
        by_line = self.by_line
        self.last_line = b""
        if len(by_line) >= PLAN_CACHE_SIZE:
            by_line.clear()
        # Receivers with the same MSG line next to each other: `Plan.send_run` builds their
        # frame once.
        receivers.sort(key=_head_of)
        by_line[ev.line] = Plan(
            genid, tuple(receivers), tuple(groups), sublist, tuple(internal), ev.subject, ev.reply
        )


def _plain_tail(subject: bytes, start: i64) -> bool:
    """Whether `subject[start:]`, after an ack prefix (which ends in a dot), is one or more
    tokens, none empty and none with a wildcard character: a tail `match_ack` would share
    the prefix's result for. (It shares it for `a*b` too; such a tail is matched.) A loop over
    the bytes: compiled, a `find` would cost more (a method call parsing its arguments)."""
    n: i64 = len(subject)
    token: i64 = start  # where the current token starts
    i: i64 = start
    while i < n:
        c: i64 = subject[i]
        if c == 46:  # "."
            if i == token:
                return False  # an empty token
            token = i + 1
        elif c == 42 or c == 62:  # "*" or ">"
            return False
        i += 1
    return token < n  # and the last token is not empty


def _shared_by_prefix(sublist: Any, prefix: bytes) -> bool:
    """Whether every subject `prefix` + one or more tokens matches the same subscriptions of
    `sublist`: those that collide with `prefix>` all end in `>` right after the prefix or
    before it."""
    colliding = sublist.reverse_match(prefix.decode("utf-8", "surrogateescape") + ">")
    depth = prefix.count(b".")
    found = False
    for sub in colliding.psubs:
        if not _ends_within(sub.subject, depth):
            return False
        found = True
    for group in colliding.qsubs:
        for sub in group:
            if not _ends_within(sub.subject, depth):
                return False
            found = True
    return found  # none: an invalid prefix, or nobody to share with


def _ends_within(pattern: str, depth: int) -> bool:
    """`pattern` ends in the token `>` as one of its first `depth` + 1 tokens."""
    return (pattern == ">" or pattern.endswith(".>")) and pattern.count(".") <= depth


def _head_of(target: Target) -> bytes:
    return target[2]


def _plannable(sub: Any) -> bool:
    receiver = sub.client
    return bool(
        not sub.max_msgs
        and not sub.closed
        and sub.callback is None
        and receiver.plain
        and receiver.outbound is not None
    )


def _takes_line(sub: Any) -> bool:
    """An internal subscription that takes a line's messages at once (`take_line`), with
    nothing `deliver` would check per message: no auto-unsubscribe, no permissions."""
    return bool(
        sub.callback is not None
        and getattr(sub, "take_line", None) is not None
        and not sub.max_msgs
        and not sub.closed
        and not sub.client.closed
        and not sub.client.perms.watching
    )


def _remote_target(sub: Any, ev: Any) -> Target:
    outbound = sub.client.outbound
    assert outbound is not None
    account: bytes = sub.wire_account
    reply: bytes = ev.reply
    head = b"%s %s%s %s%s\r\n" % (
        sub.msg_op,
        account + b" " if account else b"",
        ev.subject,
        reply + b" " if reply else b"",
        ev.size_text,
    )
    return (outbound, sub, head)


def _target(sub: Any, ev: Any) -> Target:
    outbound = sub.client.outbound
    assert outbound is not None
    return (outbound, sub, msg_head(ev.subject, sub.sid, ev.reply, ev.size_text))
