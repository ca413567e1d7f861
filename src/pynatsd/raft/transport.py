"""The asyncio layer under one RAFT node: its messages on the system account's `$NRG.>`
subjects (nats-server's `defaultTransport`, `server/raft_transport.go`), and its timer.

A node never takes what its own server published: nats-server's send queue publishes with
`noIcb` (no internal callbacks), so a leader does not read its own append entries. Here the
server's own publishes reach internal subscriptions with no publishing client, and those are
dropped. Everything else (routes, a system-account client) comes in as usual.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TYPE_CHECKING

from pynatsd.logger import log
from pynatsd.raft.node import (
    Committed,
    LeaderChanged,
    Publish,
    RaftNode,
    Subscribe,
    Unsubscribe,
)
from pynatsd.raft.wire import (
    WireError,
    decode_append_entry,
    decode_append_entry_response,
    decode_vote_request,
    decode_vote_response,
)
from pynatsd.server.subscription import InternalClient, InternalSubscription

if TYPE_CHECKING:
    from pynatsd.protocol.events import Pub
    from pynatsd.server.accounts import Account
    from pynatsd.server.client import Client


def _payload(msg: Pub) -> bytes:
    hs = msg.header_size
    return bytes(msg.payload[hs:] if hs > 0 else msg.payload)


class NrgTransport:
    """Feeds a RaftNode from its subscriptions and timer, and carries out what it asks.

    `on_commit` gets each committed entry batch (the upper layer calls `node.on_applied`),
    `on_leader` each leadership change.
    """

    def __init__(
        self,
        node: RaftNode,
        account: Account,
        publish: Callable[[Account, str, str, bytes, bytes], object],
        on_commit: Callable[[Committed], None],
        on_leader: Callable[[bool], None],
    ) -> None:
        self.node = node
        self.account = account
        self._publish = publish
        self.on_commit = on_commit
        self.on_leader = on_leader
        self._owner = InternalClient(account, f"raft-{node.group}")
        self._subs: dict[str, InternalSubscription] = {}
        self._timer: asyncio.TimerHandle | None = None
        self._timer_at = 0.0
        self._closed = False
        self._flush_scheduled = False

    def start(self) -> None:
        node = self.node
        handlers = {
            node.vote_subject: self._on_vote_request,
            node.append_subject: self._on_append_entry,
            node.proposal_subject: self._on_proposal,
            node.remove_peer_subject: self._on_remove_peer,
            node.vote_reply: self._on_vote_response,
            node.append_reply: self._on_append_response,
        }
        for subject, handler in handlers.items():
            self._subscribe(subject, handler)
        self.pump()

    def close(self) -> None:
        if self._closed:
            return
        self.node.close()
        self._carry_out()
        self._closed = True
        for sub in self._subs.values():
            self._owner.unsubscribe(sub)
        self._subs.clear()
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    # ----- in
    def _subscribe(self, subject: str, handler: Callable[[bytes, str], None]) -> None:
        def on_message(sub: InternalSubscription, publisher: Client | None, msg: Pub) -> None:
            if publisher is None or self._closed:
                return  # our own server's publish (noIcb)
            try:
                handler(_payload(msg), msg.reply.decode())
                self.pump()
            except WireError as e:
                log.warning("RAFT [%s - %s] %s on %s", self.node.id, self.node.group, e, subject)
            except Exception:  # a fault in one group must not close the route it came on
                log.exception("RAFT [%s - %s] failed on %s", self.node.id, self.node.group, subject)

        sub = InternalSubscription(self._owner, subject, on_message)
        self.account.sublist.insert(sub)
        self._subs[subject] = sub

    def _on_vote_request(self, payload: bytes, reply: str) -> None:
        self.node.handle_vote_request(decode_vote_request(payload), reply)

    def _on_vote_response(self, payload: bytes, reply: str) -> None:
        self.node.handle_vote_response(decode_vote_response(payload))

    def _on_append_entry(self, payload: bytes, reply: str) -> None:
        self.node.handle_append_entry(decode_append_entry(payload), reply)

    def _on_append_response(self, payload: bytes, reply: str) -> None:
        self.node.handle_append_entry_response(decode_append_entry_response(payload), reply)

    def _on_proposal(self, payload: bytes, reply: str) -> None:
        if self.node.is_leader:
            self.node.handle_forwarded_proposal(payload, reply)

    def _on_remove_peer(self, payload: bytes, reply: str) -> None:
        if self.node.is_leader:
            self.node.handle_forwarded_remove_peer(payload)

    def _catchup_handler(self, inbox: str) -> Callable[[bytes, str], None]:
        def on_entry(payload: bytes, reply: str) -> None:
            self.node.handle_catchup_entry(decode_append_entry(payload), inbox, reply)

        return on_entry

    # ----- out
    def pump(self) -> None:
        """Carry out what the node asked for at the end of this turn of the event loop: what
        arrived in one read of a route is handled first, then the log is made durable once
        (group commit) and only then do the node's messages go out (a vote or a success is
        never sent for something not yet on disk)."""
        if not self._flush_scheduled and not self._closed:
            self._flush_scheduled = True
            asyncio.get_running_loop().call_soon(self._flush)

    def _flush(self) -> None:
        self._flush_scheduled = False
        try:
            self._carry_out()
        except Exception:  # the group must go on whatever its upper layer did
            log.exception("RAFT [%s - %s] failed", self.node.id, self.node.group)
            if not self._closed:
                self._arm_timer()

    def _carry_out(self) -> None:
        node = self.node
        while outputs := node.take_outputs():
            node.log.sync()
            for output in outputs:
                if isinstance(output, Publish):
                    self._publish(self.account, output.subject, output.reply, b"", output.payload)
                elif isinstance(output, Committed):
                    self.on_commit(output)
                elif isinstance(output, LeaderChanged):
                    self.on_leader(output.is_leader)
                elif isinstance(output, Subscribe):
                    self._subscribe(output.subject, self._catchup_handler(output.subject))
                elif isinstance(output, Unsubscribe):
                    sub = self._subs.pop(output.subject, None)
                    if sub is not None:
                        self._owner.unsubscribe(sub)
        if not self._closed:
            self._arm_timer()

    def _arm_timer(self) -> None:
        at = self.node.next_deadline()
        if self._timer is not None:
            if at == self._timer_at:
                return
            self._timer.cancel()
        loop = asyncio.get_running_loop()
        self._timer_at = at
        self._timer = loop.call_at(at, self._on_timer)

    def _on_timer(self) -> None:
        self._timer = None
        if self._closed:
            return
        try:
            self.node.tick()
            self._carry_out()
        except Exception:  # the group's clock must keep running whatever failed
            log.exception("RAFT [%s - %s] failed on its timer", self.node.id, self.node.group)
            self._arm_timer()
