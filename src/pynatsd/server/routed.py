"""Deliveries routed on one subject and shown under another, across stream imports.

JetStream routes a push consumer's message on its deliver subject but the MSG line shows the
stream subject (nats-server's `pa.deliver`). nats-server carries such a message into an
importing account by a shadow subscription: the importer's subscriber gets it as it is, routed
on the (mapped) deliver subject. pynatsd wires a stream import as one subscription in the
exporter that republishes into the importer (server/accounts.py), which routes on the subject
it is shown; for these deliveries `deliver_routed` follows the import with the routing subject
instead, and `has_routed_interest` tells whether a subscriber anywhere behind the imports would
get it, as nats-server's SubList sees interest through shadow subscriptions (a push consumer's
`push_bound`).

Such a message carries its routing subject in a `ShownPub`, so that a receiver that forwards
it to another server (a route) can send it on the routing subject, as nats-server does (the
shown subject then travels after the reply's `@`, see cluster/protocol.py).
"""

from __future__ import annotations

from collections.abc import Callable
from operator import itemgetter
from typing import TYPE_CHECKING

from pynatsd.protocol.events import Pub
from pynatsd.server.delivery import fan_out
from pynatsd.server.subscription import InternalSubscription
from pynatsd.sublist import SubListResult

if TYPE_CHECKING:
    from pynatsd.server.accounts import Account
    from pynatsd.server.subscription import InternalCallback, InternalClient, Subscription

# How many imports deep a delivery or interest check follows (nats-server stops searching
# account cycles at about this depth too).
_MAX_DEPTH = 10


class ShownPub(Pub):
    """A message shown under `subject` but routed on `routing` (nats-server's `pa.subject` and
    `pa.deliver`): a JetStream delivery to an inbox or a push consumer's deliver subject. Local
    receivers read it as any `Pub`; a route reads `routing` (cluster/route.py)."""

    __slots__ = ()

    if TYPE_CHECKING:
        routing: bytes
    else:
        routing = property(itemgetter(7))

    def __new__(
        cls, subject: bytes, reply: bytes, payload: bytes, header_size: int, routing: bytes
    ) -> ShownPub:
        size = b"%d" % len(payload)
        hdr = b"%d" % header_size if header_size >= 0 else b""
        return tuple.__new__(cls, (subject, reply, payload, header_size, b"", size, hdr, routing))


def shown(subject: bytes, reply: bytes, payload: bytes, header_size: int, routing: bytes) -> Pub:
    """The message to deliver on `routing` showing `subject`: a plain `Pub` when they agree."""
    if subject == routing:
        return Pub(subject, reply, payload, header_size)
    return ShownPub(subject, reply, payload, header_size, routing)


def rerouted(ev: Pub, routing: str) -> Pub:
    """`ev` delivered on `routing` (an import maps the routing subject; the shown one stays)."""
    return shown(ev.subject, ev.reply, ev.payload, ev.header_size, routing.encode())


class StreamImportSubscription(InternalSubscription):
    """The exporter's side of a stream import: `importer` receives, on `to_importer(subject)`."""

    __slots__ = ("importer", "to_importer")

    def __init__(
        self,
        owner: InternalClient,
        subject: str,
        callback: InternalCallback,
        importer: Account,
        to_importer: Callable[[str], str],
    ) -> None:
        super().__init__(owner, subject, callback)
        self.importer = importer
        self.to_importer = to_importer


def deliver_routed(account: Account, routing: str, ev: Pub, depth: int = 0) -> bool:
    """Deliver `ev` (shown under its own subject) to the subscribers of `routing` in `account`
    and, through stream imports, in the accounts that import it; True if anyone got it."""
    ev = rerouted(ev, routing)
    result = account.sublist.match(routing)
    if not account.stream_import_subs:
        return bool(result.psubs or result.qsubs) and fan_out(None, result, ev)
    delivered = False
    local: list[Subscription] = []
    for sub in result.psubs:
        if isinstance(sub, StreamImportSubscription):
            if depth < _MAX_DEPTH and not sub.closed:
                mapped = sub.to_importer(routing)
                delivered = deliver_routed(sub.importer, mapped, ev, depth + 1) or delivered
        else:
            local.append(sub)
    if local or result.qsubs:
        rest: SubListResult[Subscription] = SubListResult(tuple(local), result.qsubs)
        delivered = fan_out(None, rest, ev) or delivered
    return delivered


def has_routed_interest(account: Account, routing: str, group: str = "", depth: int = 0) -> bool:
    """A subscriber of `routing` (a member of queue `group` when one is named) in `account` or
    behind its stream imports."""
    result = account.sublist.match(routing)
    if group:
        if any(g and g[0].queue == group for g in result.qsubs):
            return True
    elif result.qsubs:
        return True
    for sub in result.psubs:
        if not isinstance(sub, StreamImportSubscription):
            if not group:
                return True
        elif (
            depth < _MAX_DEPTH
            and not sub.closed
            and has_routed_interest(sub.importer, sub.to_importer(routing), group, depth + 1)
        ):
            return True
    return False


def interest_generation(account: Account) -> tuple[int, ...]:
    """Changes with the SubList of `account` and of every account importing a stream from it:
    what a watcher of delivery interest compares."""
    subs = account.stream_import_subs
    if not subs:
        return (account.sublist.genid,)
    return (account.sublist.genid, *(sub.importer.sublist.genid for sub in subs))
