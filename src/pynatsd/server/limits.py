"""The limits one client connection works under: the tightest of its user's, its account's and
the server's.

Corresponds to nats-server's `client.applyAccountLimits` (client.go), which runs each time a
client is registered with its account: at CONNECT and again for every client on a
configuration reload. The limits are computed from scratch each time, so a reload gives a live
connection exactly what a new connection with the same credentials gets.
"""

from __future__ import annotations

from dataclasses import dataclass

from pynatsd.options import NO_LIMIT, AccountConfig, Options


@dataclass(frozen=True, slots=True)
class ConnectionLimits:
    """`max_payload`: the largest message body accepted (nats-server's `mpay`);
    `max_subscriptions`: how many subscriptions the connection may hold, NO_LIMIT (-1) for
    no limit (nats-server's `msubs`); 0 allows none: a JWT's `subs: 0` ends the connection
    as it registers."""

    max_payload: int
    max_subscriptions: int


def _tighter(current: int, limit: int) -> int:
    """The lower of two limits where NO_LIMIT means none (nats-server's `minLimit`)."""
    if limit == NO_LIMIT:
        return current
    if current == NO_LIMIT:
        return limit
    return min(current, limit)


def connection_limits(
    options: Options,
    account: AccountConfig | None,
    user_max_payload: int = NO_LIMIT,
    user_max_subscriptions: int = NO_LIMIT,
) -> ConnectionLimits:
    """The limits of a connection bound to `account` (None: an account without configuration),
    whose user brings its own limits (a user JWT's; NO_LIMIT for none)."""
    payload, subs = user_max_payload, user_max_subscriptions
    if account is not None:
        payload = _tighter(payload, account.limits.max_payload)
        subs = _tighter(subs, account.limits.max_subscriptions)
    payload = _tighter(payload, options.max_payload)
    # The server's max_subscriptions says "no limit" with 0.
    subs = _tighter(subs, options.max_subscriptions or NO_LIMIT)
    return ConnectionLimits(payload, subs)
