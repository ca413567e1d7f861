"""One gateway connection: the asyncio adapter over the route codec (gateways speak RS+, RS-,
RMSG, HMSG, A+, A-), and on an outbound connection the receiver that stands for the remote
cluster in the account SubLists.

Corresponds to the connection half of nats-server's `server/gateway.go` (`createGateway`,
`sendGatewayConnect`, `processGatewayConnect`, `processGatewayInfo`, `processGatewayRSub`,
`processGatewayRUnsub`, `processInboundGatewayMsg`, `gatewayAllSubsReceiveStart/Complete`) and
the GATEWAY kind of `client.go`. Connections are one-way, as there: on an *outbound*
connection (we dialed it) we send messages and receive the remote cluster's interest; on an
*inbound* one we send our cluster's interest and receive messages. The accepting side sends its
INFO at once and expects CONNECT (with `gateway`) first; the dialing side waits for that INFO,
then sends CONNECT and its own INFO.
"""

from __future__ import annotations

import asyncio
import base64
import time
from typing import TYPE_CHECKING, Any

from pynatsd.cluster.link import Link
from pynatsd.cluster.protocol import (
    AccountSub,
    AccountUnsub,
    RouteMsg,
    RouteRunParser,
    RouteSub,
    RouteUnsub,
    rmsg_frame,
    shown_delivery,
    wire_delivery,
)
from pynatsd.gateway import replies
from pynatsd.gateway.optimistic import OptimisticSends
from pynatsd.gateway.subscription import GatewaySubscription
from pynatsd.logger import log
from pynatsd.protocol import errors
from pynatsd.protocol.errors import CloseReason
from pynatsd.protocol.events import Event, Pub
from pynatsd.protocol.frames import err_frame
from pynatsd.server.delivery import fan_out_from_gateway
from pynatsd.server.routed import ShownPub

if TYPE_CHECKING:
    from pynatsd.gateway.gateway import Gateway, RemoteGateway
    from pynatsd.server.accounts import Account
    from pynatsd.server.delivery import Receiver
    from pynatsd.server.subscription import Subscription

GATEWAY_MAX_PING_INTERVAL = 15.0  # gwMaxPingInterval: gateways ping at least this often

# Interest modes per account (GatewayInterestMode), as /gatewayz names them.
OPTIMISTIC = "Optimistic"
TRANSITIONING = "Transitioning"
INTEREST_ONLY = "Interest-Only"

# gateway_cmd values of an INFO (gatewayCmdGossip, ...AllSubsStart, ...AllSubsComplete).
CMD_GOSSIP = 1
CMD_ALL_SUBS_START = 2
CMD_ALL_SUBS_COMPLETE = 3

WRONG_GATEWAY = "Wrong Gateway"
WRONG_PORT = "Wrong Port"


class GatewayConnection(Link):
    """A connection to a server of another cluster; an outbound one is also that cluster's
    receiver in every account SubList."""

    kind = stale_kind = "Gateway"
    label_tag = "gid"

    def __init__(
        self, gateway: Gateway, remote: RemoteGateway | None = None, url: str = ""
    ) -> None:
        server = gateway.server
        super().__init__(server, server.next_cid())
        self.gateway = self.listener = gateway
        self.remote = remote  # the configuration we dialed (None: accepted)
        self.is_outbound = remote is not None
        self.url = url  # the URL dialed (its user and password go in the CONNECT)
        self.name = remote.name if remote is not None else ""  # the remote gateway's name
        self.gid = self.link_id
        self.parser = RouteRunParser(expect_connect=not self.is_outbound)
        self.registered = False
        self.no_reconnect = False
        self.remote_id = ""  # the remote server's id (its CONNECT `name`, its INFO server_id)
        self.remote_server_name = ""
        self.use_old_prefix = False  # the remote knows only `$GR.` replies
        self._accounts: dict[bytes, Account] = {}
        # Outbound: the remote cluster's interest, (account, subject, queue) -> subscription;
        # and the interest mode of each account it told us about.
        # Both: per account, the mode told (inbound) or received (outbound); inbound accounts
        # we sent A- for map to "".
        self.modes: dict[bytes, str] = {}
        # Outbound to a remote without `gateway_iom`: what it refused (None: interest only).
        self.optimistic: OptimisticSends | None = None

    # -- the Receiver protocol -------------------------------------------------------------------

    def plannable(self, msg: Pub) -> bool:
        """A publisher may plan its deliveries to this cluster when the RMSG line never
        changes: no reply (it may get mapped), no reply route on the subject."""
        return not msg.reply and not self.reply_routes and self.optimistic is None

    def deliver(self, sub: Subscription, msg: Pub, publisher: Receiver | None) -> None:
        self.deliver_remote(sub, msg, [sub.queue_bytes] if sub.queue else [])

    def deliver_remote(self, sub: Subscription, msg: Pub, queues: list[bytes]) -> None:
        account: bytes = sub.account_name  # type: ignore[attr-defined]
        if type(msg) is ShownPub:
            msg = wire_delivery(msg)  # a JetStream delivery, as across a route
        subject = msg.subject
        if self.optimistic is not None and not self.optimistic.allows(account, subject, queues):
            return
        if self.reply_routes:
            # A reply going back to the requester's server.
            subject = self.routed_subject(account, subject)
        reply = msg.reply
        if reply and self.gateway.is_recent_interest(account, reply):
            reply = self.gateway.reply_prefix(self.use_old_prefix) + reply
        if subject is not msg.subject or reply is not msg.reply:
            msg = Pub(subject, reply, msg.payload, msg.header_size)
        self.stats.sent(1, len(msg.payload))
        self.last_activity = time.time()
        self.outbound.push(rmsg_frame(account, msg, queues, self.headers))

    # -- asyncio.Protocol ------------------------------------------------------------------------

    def _opened(self, base: asyncio.BaseTransport) -> bool:
        if not super()._opened(base):
            return False
        if self.is_outbound:
            log.info('%s - Creating outbound gateway connection to "%s"', self.label, self.name)
        else:
            log.info("%s - Processing inbound gateway connection", self.label)
        return True

    def _begin(self) -> None:
        """The gateway protocol starts (after the TLS handshake when TLS is on)."""
        if not self.is_outbound:
            self.send_now(self.gateway.info_frame())
        self.start_pinging()

    def data_received(self, data: bytes) -> None:
        if self.closed:
            return
        self.last_activity = time.time()
        self._handle_events(self.parser.feed(data))
        self.plans.settle()
        self.server.flush_dirty()

    # -- events ----------------------------------------------------------------------------------

    def _process_other(self, ev: Event) -> None:
        if isinstance(ev, (AccountSub, AccountUnsub)) and self.is_outbound:
            refused = isinstance(ev, AccountUnsub)
            self.modes[ev.account] = "" if refused else OPTIMISTIC
            if self.optimistic is not None:
                self.optimistic.account_refused(ev.account, refused)

    def _process_err(self, text: str) -> None:
        log.error("%s - Gateway Error %s", self.label, text)
        self.close(CloseReason.PARSE_ERROR)

    def _process_connect(self, opts: dict[str, Any]) -> None:
        """The CONNECT of a server that dialed us (processConnect's authentication, then
        processGatewayConnect)."""
        gateway = self.gateway
        if not gateway.authorized(opts):
            log.error("%s - authentication error", self.label)
            self.refuse(errors.AUTHORIZATION_VIOLATION, CloseReason.AUTHENTICATION_VIOLATION)
            return
        name = str(opts.get("gateway") or "")
        if not name:
            log.error("%s - attempted to connect to gateway port", self.label)
            self.refuse("attempted to connect to gateway port", WRONG_PORT)
            return
        if gateway.opts.reject_unknown and name not in gateway.configured_names():
            log.error('%s - Rejecting connection from gateway "%s"', self.label, name)
            self.refuse(f'Connection to gateway "{gateway.gateway_name}" rejected', WRONG_GATEWAY)
            return
        self.remote_id = str(opts.get("name") or "")
        self.headers = bool(opts.get("headers", True))

    def _process_info(self, info: dict[str, Any]) -> None:
        first = not self.registered and not self.remote_server_name
        if first:
            self.remote_id = str(info.get("server_id") or self.remote_id)
            self.remote_server_name = str(info.get("server_name") or "")
            if not self.is_outbound:
                self.name = str(info.get("gateway") or "")
        if self.is_outbound:
            self._process_outbound_info(info, first)
        elif first:
            self._register_inbound(info)

    def _process_outbound_info(self, info: dict[str, Any], first: bool) -> None:
        gateway = self.gateway
        remote_name = str(info.get("gateway") or "")
        if not remote_name:
            self.refuse(f'Attempt to connect to gateway "{self.name}" using wrong port', WRONG_PORT)
            return
        cmd = int(info.get("gateway_cmd") or 0)
        if remote_name != self.name:
            if not first and cmd == CMD_GOSSIP:
                if not gateway.opts.reject_unknown or remote_name in gateway.configured_names():
                    gateway.implicit(remote_name, info.get("gateway_urls") or [])
                return
            log.error(
                '%s - Failing connection to gateway "%s", remote gateway name is "%s"',
                self.label,
                self.name,
                remote_name,
            )
            self.send_now(
                err_frame(
                    f'Connection from "{gateway.gateway_name}" rejected, wanted to connect to '
                    f'"{self.name}", this is "{remote_name}"'
                )
            )
            self.no_reconnect = False
            self.close(WRONG_GATEWAY)
            return
        if info.get("gateway_urls") and self.remote is not None:
            self.remote.add_urls(info["gateway_urls"])
        if first:
            self.use_old_prefix = not info.get("gateway_nrp")
            self.headers = not self.server.options.no_header_support and bool(info.get("headers"))
            self.send_now(gateway.connect_frame(self) + gateway.info_frame())
            if not gateway.register_outbound(self):
                self.no_reconnect = True
                self.close(WRONG_GATEWAY)
                return
            self.registered = True
            if not info.get("gateway_iom"):
                self.start_optimistic()
            log.info(
                '%s - Outbound gateway connection to "%s" (%s) registered',
                self.label,
                self.name,
                self.remote_id,
            )
        elif cmd in (CMD_ALL_SUBS_START, CMD_ALL_SUBS_COMPLETE):
            account = self._command_account(info, cmd)
            if account:
                self.modes[account] = TRANSITIONING if cmd == CMD_ALL_SUBS_START else INTEREST_ONLY
                if cmd == CMD_ALL_SUBS_COMPLETE and self.optimistic is not None:
                    self.optimistic.complete(account)
            return
        elif cmd:
            log.warning('Received unknown command %d from gateway "%s"', cmd, self.name)
            return
        gateway.forward_to_cluster(remote_name, info.get("gateway_urls") or [])

    def start_optimistic(self) -> None:
        """A remote that does not switch accounts to interest-only mode at once: send it every
        account's messages until it says otherwise."""
        self.optimistic = OptimisticSends(self)
        for account in list(self.server.accounts.values()):
            self.optimistic.add_account(account)

    def _command_account(self, info: dict[str, Any], cmd: int) -> bytes:
        payload = info.get("gateway_cmd_payload")
        if payload:
            try:
                return base64.b64decode(str(payload))
            except ValueError:
                pass
        what = "start" if cmd == CMD_ALL_SUBS_START else "complete"
        self.refuse(
            f"Account absent from receive-all-subscriptions-{what} command",
            CloseReason.PROTOCOL_VIOLATION,
        )
        return b""

    def _register_inbound(self, info: dict[str, Any]) -> None:
        gateway = self.gateway
        self.registered = True
        gateway.inbound[self.gid] = self
        log.info(
            '%s - Inbound gateway connection from "%s" (%s) registered',
            self.label,
            self.name,
            self.remote_id,
        )
        self.outbound.push(gateway.queue_interest_frames())
        gateway.implicit(self.name, info.get("gateway_urls") or [])
        self.outbound.push(gateway.gossip_frames(self.name))
        for account in list(self.server.accounts.values()):
            self.switch_to_interest_only(account.name.encode())
        self.outbound.flush()

    def switch_to_interest_only(self, account: bytes) -> None:
        """Tell the remote that from now on it gets only what we have interest in: every
        plain subscription of the account between the start and complete commands
        (gatewaySwitchAccountToSendAllSubs)."""
        if self.modes.get(account) == INTEREST_ONLY:
            return
        gateway = self.gateway
        self.modes[account] = INTEREST_ONLY
        self.outbound.push(gateway.command_frame(CMD_ALL_SUBS_START, account))
        self.outbound.push(gateway.plain_interest_frames(account))
        self.outbound.push(gateway.command_frame(CMD_ALL_SUBS_COMPLETE, account))

    # -- interest and messages -------------------------------------------------------------------

    def _lookup(self, name: bytes) -> Account | None:
        account = self._accounts.get(name)
        if account is None:
            account = self.server.accounts.get(name.decode(errors="replace"))
            if account is not None:
                self._accounts[name] = account
        return account

    def _process_sub(self, ev: RouteSub) -> None:
        if not self.is_outbound:
            log.error("%s - Received RS+ from gateway on inbound connection", self.label)
            self.close(CloseReason.PROTOCOL_VIOLATION)
            return
        account = self._lookup(ev.account)
        key = (ev.account, ev.subject, ev.queue)
        if self.optimistic is not None and not ev.queue:
            self.optimistic.interest(ev.account, ev.subject)
        if account is None or key in self.subs:
            return
        sub = GatewaySubscription(self, ev.account, ev.subject, ev.queue)
        try:
            account.sublist.insert(sub)
        except ValueError:
            log.debug("%s - invalid gateway subscription %r", self.label, ev.subject)
            return
        self.subs[key] = sub

    def _process_unsub(self, ev: RouteUnsub) -> None:
        if not self.is_outbound:
            log.error("%s - Received RS- from gateway on inbound connection", self.label)
            self.close(CloseReason.PROTOCOL_VIOLATION)
            return
        if (
            self.optimistic is not None
            and not ev.queue
            and self.optimistic.no_interest_in(ev.account, ev.subject)
        ):
            self.modes.setdefault(ev.account, OPTIMISTIC)
        sub = self.subs.pop((ev.account, ev.subject, ev.queue), None)
        if sub is None:
            return
        sub.closed = True
        account = self._lookup(ev.account)
        if account is not None:
            account.sublist.remove(sub)

    def _process_msg(self, ev: RouteMsg) -> None:
        msg = ev.msg
        stats = self.stats
        stats.in_msgs += 1
        stats.in_bytes += len(msg.payload)
        routed = replies.routed(msg.subject)
        if routed is not None:
            self.gateway.routed_reply(self, ev, routed)
            return
        account = self._lookup(ev.account)
        if account is None:
            self.gateway.account_no_interest(self, ev.account)
            return
        self.deliver_inbound(account, ev)

    def deliver_inbound(self, account: Account, ev: RouteMsg) -> None:
        """A message from the remote cluster, to our cluster's receivers; a routed reply is
        shown to local clients without its prefix, and their answer routed back."""
        msg = ev.msg
        local = msg
        reply = msg.reply
        sublist = account.sublist
        line = msg.line if not ev.queues else b""
        if reply:
            routed = replies.routed(reply)
            if routed is not None:
                local = Pub(msg.subject, routed[2], msg.payload, msg.header_size)
                self.gateway.track_reply(ev.account, routed, reply)
                line = b""
            if local.reply.startswith(b"$JS.ACK."):
                # A JetStream delivery: our clients see the subject after the reply's `@`.
                local, line = shown_delivery(local), b""
        result = sublist.match_bytes(msg.subject)
        if result.psubs or result.qsubs:
            if line:
                # Our cluster's plain receivers (never another gateway), no queue group: the
                # next RMSG with this line goes by plan (Link._handle_events); a routed
                # subject or reply (`_GR_.`) or an unknown account never comes here with it.
                self.remember_plan(msg, tuple(s for s in result.psubs if not s.gateway), sublist)
            fan_out_from_gateway(self, result, msg, ev.queues, local)

    # -- replies routed back ---------------------------------------------------------------------

    def reply_route_subscription(self, account: bytes, reply: bytes) -> Subscription:
        return GatewaySubscription(self, account, reply, b"")

    # -- output and closing ----------------------------------------------------------------------

    def ping_settings(self) -> tuple[float, int]:
        opts = self.server.options
        return min(opts.ping_interval, GATEWAY_MAX_PING_INTERVAL), opts.ping_max

    def may_ping(self) -> bool:
        # An outbound connection says nothing before its CONNECT (the remote expects it
        # first); until then it only watches for the remote going stale.
        return self.registered or not self.is_outbound

    def closed_hook(self) -> None:
        if self.optimistic is not None:
            self.optimistic.close()
        self.gateway.connection_closed(self)
