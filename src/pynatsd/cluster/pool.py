"""Route pooling: which connection to a peer carries which account.

Corresponds to nats-server's `computeRoutePoolIdx` and the pool bookkeeping of `addRoute`
(`server/route.go`). A peer is reached by `pool_size` connections (3 by default) plus one per
pinned account (`$SYS` and the `cluster.accounts`); an account goes on the connection of index
`fnv32a(name) % pool_size`, the same on every server, unless it is pinned. Ops on a pinned
connection carry no account. A peer that announces no `route_pool_size` takes one connection
carrying every account.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pynatsd.cluster.route import Route

# A connection's place: its pool index, or the account it is pinned to.
Slot = int | bytes

_FNV_OFFSET = 0x811C9DC5
_FNV_PRIME = 0x01000193


def fnv32a(data: bytes) -> int:
    h = _FNV_OFFSET
    for b in data:
        h ^= b
        h = (h * _FNV_PRIME) & 0xFFFFFFFF
    return h


def pool_index(account: bytes, pool_size: int) -> int:
    return fnv32a(account) % pool_size if pool_size > 1 else 0


class Peer:
    """Another server of the cluster and the connections we keep to it."""

    def __init__(self, remote_id: str, pool_size: int, pinned: frozenset[bytes]) -> None:
        self.remote_id = remote_id
        self.pool_size = pool_size  # effective: 0 when either side does not pool
        self.pinned = pinned  # accounts with their own connection to this peer
        self.slots: dict[Slot, Route] = {}
        self.url = ""  # where to dial it again

    def slot_of(self, account: bytes) -> Slot:
        if account in self.pinned:
            return account
        return pool_index(account, self.pool_size)

    def carries(self, route: Route, account: bytes) -> bool:
        return self.slots.get(self.slot_of(account)) is route

    def conn_for(self, account: bytes) -> Route | None:
        return self.slots.get(self.slot_of(account))

    def wanted(self) -> list[Slot]:
        """Every slot a full pool has, in the order nats-server dials them."""
        slots: list[Slot] = list(range(max(self.pool_size, 1)))
        slots += sorted(self.pinned)
        return slots

    @property
    def first(self) -> Route:
        return self.slots.get(0) or next(iter(self.slots.values()))
