"""Delivery plans: a publisher's cache of who receives each of its PUB lines.

nats-server keeps a per-connection cache of SubList results (`c.in.results`) keyed by subject;
pynatsd goes one step further and keeps, per PUB control line, the receivers and their ready-made
MSG lines (RMSG lines for another server's interest), valid while the account's SubList
generation holds. A plan holds only receivers for
which `server.delivery.deliver` would check nothing per message (no auto-unsubscribe, no
deny-on-deliver, no internal callback, no trace), so sending through it is the same delivery,
done without the checks. The loop that sends through a plan is inlined in
`ClientSession._process_pub`, the hottest function of the server.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pynatsd.protocol.frames import msg_head

if TYPE_CHECKING:
    from pynatsd.protocol.events import Pub
    from pynatsd.server.delivery import Receiver
    from pynatsd.server.outbound import Outbound
    from pynatsd.server.subscription import Subscription
    from pynatsd.sublist import SubList, SubListResult

# One receiver of a planned delivery: (its outbound queue, the subscription, its MSG line).
Target = tuple["Outbound", "Subscription", bytes]

# Distinct PUB lines with a cached delivery plan, per connection; cleared wholesale when full.
PLAN_CACHE_SIZE = 1024


class Plan:
    """The receivers of one PUB line under one SubList generation. Deliveries to the plain
    receivers are counted here and added to their statistics once per read (`settle`), not once
    per message and receiver."""

    __slots__ = ("count", "genid", "groups", "nbytes", "sublist", "targets")

    def __init__(
        self,
        genid: int,
        targets: tuple[Target, ...],
        groups: tuple[tuple[Target, ...], ...],
        sublist: SubList[Subscription] | None = None,
    ) -> None:
        self.genid = genid
        # The SubList whose generation `genid` is, for a connection whose lines belong to
        # several accounts (a route's); None when the owner knows its one SubList.
        self.sublist = sublist
        self.targets = targets
        self.groups = groups
        self.count = 0
        self.nbytes = 0

    def settle(self) -> None:
        count, nbytes = self.count, self.nbytes
        self.count = self.nbytes = 0
        for _, sub, _ in self.targets:
            sub.delivered += count
            sub.client.stats.sent(count, nbytes)


class PlanCache:
    """A connection's plans by PUB line, and those used during the current read."""

    __slots__ = ("by_line", "last_line", "last_plan", "touched")

    def __init__(self) -> None:
        self.by_line: dict[bytes, Plan] = {}
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

    def remember(
        self,
        publisher: Receiver,
        ev: Pub,
        result: SubListResult[Subscription],
        genid: int,
        sublist: SubList[Subscription] | None = None,
    ) -> None:
        """Cache the receivers of a plain PUB line: every plain subscriber, and the members of
        each queue group to pick from; no plan when any receiver needs a check per message."""
        receivers: list[Target] = []
        remotes: set[Receiver] = set()
        for sub in result.psubs:
            if sub.remote:
                # Another server: one RMSG however many of its subscriptions match.
                if sub.closed or sub.client.closed or sub.client.outbound is None:
                    return
                if (sub.gateway or sub.leaf) and not sub.client.plannable(ev):  # type: ignore[attr-defined]
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
        by_line = self.by_line
        self.last_line = b""
        if len(by_line) >= PLAN_CACHE_SIZE:
            by_line.clear()
        by_line[ev.line] = Plan(genid, tuple(receivers), tuple(groups), sublist)


def _plannable(sub: Subscription) -> bool:
    receiver = sub.client
    return (
        not sub.max_msgs
        and not sub.closed
        and sub.callback is None
        and receiver.plain
        and receiver.outbound is not None
    )


def _remote_target(sub: Subscription, ev: Pub) -> Target:
    outbound = sub.client.outbound
    assert outbound is not None
    account: bytes = sub.wire_account  # type: ignore[attr-defined]
    head = b"%s %s%s %s%s\r\n" % (
        sub.msg_op,  # type: ignore[attr-defined]
        account + b" " if account else b"",
        ev.subject,
        ev.reply + b" " if ev.reply else b"",
        ev.size_text,
    )
    return (outbound, sub, head)


def _target(sub: Subscription, ev: Pub) -> Target:
    outbound = sub.client.outbound
    assert outbound is not None
    return (outbound, sub, msg_head(ev.subject, sub.sid, ev.reply, ev.size_text))
