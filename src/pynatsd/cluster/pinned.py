"""Accounts pinned to a route connection of their own, added or removed by a configuration reload.

Corresponds to nats-server's `reloadClusterPoolAndAccounts` (`server/reload.go`) and the
`route_acc_add_reqid` branch of `processRouteInfo` (`server/route.go`). An account added to
`cluster { accounts }` moves off the pool: the reloaded server tells each peer, on the pool
connection that carried the account, with an INFO naming the account and a request id; the peer
forgets the interest it had learned for that account there, takes the account as pinned (a
connection for it will be accepted) and answers with the same INFO without the account. Once
every peer has answered (or after 2 s, with nats-server's warning) the reloaded server dials
the new connection to each peer. An account removed from the list has its connections closed
("Route Removed", not dialed again) and goes back to the pool connection of its index, where
its local interest is announced again.
"""

from __future__ import annotations

import asyncio
import secrets
from typing import TYPE_CHECKING, Any

from pynatsd.cluster.protocol import bare_info
from pynatsd.logger import log
from pynatsd.protocol.errors import CloseReason
from pynatsd.protocol.frames import go_json_bytes

if TYPE_CHECKING:
    from pynatsd.cluster.cluster import Cluster
    from pynatsd.cluster.route import Route

# How long the reloaded server waits for the peers' answers before dialing anyway.
CONFIRM_TIMEOUT = 2.0
CONFIRM_TIMED_OUT = (
    "Timed out waiting for confirmation from all routes regarding per-account routes changes"
)


def account_added_info(pool_size: int, account: str, request_id: str) -> bytes:
    """The INFO announcing (or, without `account`, confirming) a newly pinned account: Go's
    Info with only those fields set, so its fields without omitempty come along empty."""
    account_field = {"route_account": account} if account else {}
    info = bare_info(route_pool_size=pool_size, **account_field, route_acc_add_reqid=request_id)
    return b"INFO " + go_json_bytes(info) + b"\r\n"


class PinnedAccounts:
    """The cluster's pinned accounts as a reload changes them."""

    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster
        self._request_id = ""  # of the announcement waiting for answers
        self._answers = 0
        self._expected = 0
        self._all_answered: asyncio.Future[None] | None = None

    def reload(self, accounts: frozenset[bytes]) -> None:
        """`cluster { accounts }` now says `accounts` (the system account included)."""
        cluster = self.cluster
        if not cluster.pool_size:
            return
        old = cluster.pinned_accounts
        removed, added = old - accounts, accounts - old
        if removed:
            self._remove(removed)
        if added:
            cluster.spawn(self._add(added))

    # -- this server's reload --------------------------------------------------------------------

    async def _add(self, added: frozenset[bytes]) -> None:
        cluster = self.cluster
        request_id = secrets.token_hex(11)
        cluster.pinned_accounts = cluster.pinned_accounts | added
        sent = 0
        for peer in cluster.pooled_peers():
            for account in sorted(added):
                conn = peer.conn_for(account)
                if conn is None:
                    continue
                conn.drop_interest(account)
                conn.send_now(account_added_info(cluster.pool_size, account.decode(), request_id))
                sent += 1
            peer.pinned = peer.pinned | added
        if sent:
            self._request_id, self._answers, self._expected = request_id, 0, sent
            self._all_answered = cluster.server.loop.create_future()
            try:
                await asyncio.wait_for(self._all_answered, CONFIRM_TIMEOUT)
            except TimeoutError:
                log.warning(CONFIRM_TIMED_OUT)
            finally:
                self._request_id, self._all_answered = "", None
        for peer in cluster.pooled_peers():
            for account in sorted(added):
                cluster.dial_pinned(peer, account)

    def _remove(self, removed: frozenset[bytes]) -> None:
        cluster = self.cluster
        cluster.pinned_accounts = cluster.pinned_accounts - removed
        for peer in cluster.pooled_peers():
            peer.pinned = peer.pinned - removed
            for account in sorted(removed):
                conn = peer.slots.get(account)
                if conn is not None:
                    conn.configured = conn.solicited = conn.retry = False
                    conn.close(CloseReason.ROUTE_REMOVED)
        for peer in cluster.pooled_peers():
            for account in sorted(removed):
                conn = peer.conn_for(account)
                if conn is not None:
                    conn.send_now(cluster.interest_frames(conn, only=account))

    # -- a peer's reload -------------------------------------------------------------------------

    def peer_request(self, route: Route, info: dict[str, Any]) -> None:
        """An INFO with `route_acc_add_reqid` from a registered peer: its announcement of an
        account it now pins, or its answer to ours."""
        request_id = str(info.get("route_acc_add_reqid") or "")
        name = str(info.get("route_account") or "")
        if not name:
            if request_id == self._request_id and self._all_answered is not None:
                self._answers += 1
                if self._answers >= self._expected and not self._all_answered.done():
                    self._all_answered.set_result(None)
            return
        cluster = self.cluster
        if name not in cluster.server.accounts:
            log.error('Error looking up account "%s": account missing', name)
            return
        account = name.encode()
        cluster.pinned_accounts = cluster.pinned_accounts | {account}
        for peer in cluster.pooled_peers():
            if account in peer.pinned:
                continue
            conn = peer.conn_for(account)
            if conn is not None:
                conn.drop_interest(account)
            peer.pinned = peer.pinned | {account}
        answer = {key: value for key, value in info.items() if key != "route_account"}
        route.send_now(b"INFO " + go_json_bytes(answer) + b"\r\n")
