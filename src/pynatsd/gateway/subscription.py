"""The interest of another cluster, learned from a gateway (nats-server keeps it per outbound
connection in `outsim`; here it enters the account SubList as the interest of routes does, so
one match finds every receiver)."""

from __future__ import annotations

from typing import Any

from pynatsd.server.subscription import RemoteSubscription


class GatewaySubscription(RemoteSubscription):
    """An RS+ received on an outbound gateway connection, or the route back of a reply that
    came across it (a request's `_GR_.` reply, mapped for a little while)."""

    __slots__ = ()

    gateway = True

    def __init__(self, owner: Any, account: bytes, subject: bytes, queue: bytes) -> None:
        # Queue groups across gateways always weigh 1 (nats-server sends " 1").
        super().__init__(owner, account, subject, queue, 1 if queue else 0)
