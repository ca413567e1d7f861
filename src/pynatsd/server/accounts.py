"""Accounts: isolated subject spaces, each with its own SubList.

Corresponds to nats-server's `server/accounts.go`. Clients without an account are in the global
account `$G`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pynatsd.sublist import SubList

if TYPE_CHECKING:
    from pynatsd.server.subscription import Subscription

GLOBAL_ACCOUNT = "$G"
SYSTEM_ACCOUNT = "$SYS"


class Account:
    __slots__ = ("name", "sublist")

    def __init__(self, name: str, cache: bool = True) -> None:
        self.name = name
        self.sublist: SubList[Subscription] = SubList(cache=cache)

    def __repr__(self) -> str:
        return f"<Account {self.name}>"
