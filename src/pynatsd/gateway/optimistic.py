"""Optimistic sends to a remote that did not announce `gateway_iom` (nats-server before 2.9):
each account gets every message until the remote says what it does not want, subject by
subject (RS-) or the whole account (A-), and only what it subscribed to once it has switched
the account to interest-only mode (`INFO gateway_cmd` 2, its RS+, then 3).

Corresponds to the outbound half of nats-server's `outsie` in server/gateway.go
(`gatewayInterest`, `processGatewayRSub`, `processGatewayRUnsub`, `processGatewayAccountSub`,
`processGatewayAccountUnsub`, `gatewayAllSubsReceiveComplete`). The "everything" is a `>`
subscription of the remote in each account SubList until the account completes its switch;
what the remote refused is checked when a message is handed to the connection. Remotes that
announce `gateway_iom` (every nats-server since 2.9, and pynatsd) never need this.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pynatsd.gateway.subscription import GatewaySubscription
from pynatsd.subjects import is_subset_match

if TYPE_CHECKING:
    from pynatsd.gateway.connection import GatewayConnection
    from pynatsd.server.accounts import Account


class OptimisticSends:
    """Per account: the catch-all subscription, the subjects refused (`ni`), the accounts
    refused altogether (A-)."""

    def __init__(self, conn: GatewayConnection) -> None:
        self.conn = conn
        self.catch_all: dict[bytes, tuple[Account, GatewaySubscription]] = {}
        self.no_interest: dict[bytes, set[bytes]] = {}
        self.refused: set[bytes] = set()

    def add_account(self, account: Account) -> None:
        name = account.name.encode()
        if name in self.catch_all:
            return
        sub = GatewaySubscription(self.conn, name, b">", b"")
        account.sublist.insert(sub)
        self.catch_all[name] = (account, sub)

    def allows(self, account: bytes, subject: bytes, queues: list[bytes]) -> bool:
        """Whether a message for the remote goes out (a queue group it named always does)."""
        if queues:
            return True
        if account in self.refused:
            return False
        refused = self.no_interest.get(account)
        return not refused or subject not in refused

    def interest(self, account: bytes, subject: bytes) -> None:
        """RS+: the subject (or every subject a wildcard covers) is wanted again."""
        refused = self.no_interest.get(account)
        if not refused:
            return
        text = subject.decode(errors="replace")
        for other in [s for s in refused if is_subset_match(s.decode(errors="replace"), text)]:
            refused.discard(other)

    def no_interest_in(self, account: bytes, subject: bytes) -> bool:
        """RS- for a plain subject: True while the account is optimistic (the subject is
        refused), False once the remote sends the account's interest (remove it)."""
        if account not in self.catch_all:
            return False
        self.no_interest.setdefault(account, set()).add(subject)
        return True

    def account_refused(self, account: bytes, refused: bool) -> None:
        """A- (nothing in this account), A+ (optimistic again)."""
        if refused:
            self.refused.add(account)
        else:
            self.refused.discard(account)
            self.no_interest.pop(account, None)

    def complete(self, account: bytes) -> None:
        """The remote sent the account's whole interest: only that from now on."""
        entry = self.catch_all.pop(account, None)
        self.no_interest.pop(account, None)
        self.refused.discard(account)
        if entry is not None:
            owner, sub = entry
            sub.closed = True
            owner.sublist.remove(sub)

    def close(self) -> None:
        for name in list(self.catch_all):
            self.complete(name)
