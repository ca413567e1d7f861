"""One leaf node connection: the asyncio adapter over the leaf codec, and the receiver that stands
for the server at the other end in its bound account's SubList.

Corresponds to the connection half of nats-server's `server/leafnode.go` (`createLeafNode`,
`processLeafnodeInfo`, `processLeafNodeConnect`, `processLeafSub`, `processLeafUnsub`,
`processInboundLeafMsg`, `handleLeafNodeLoop`) and the LEAF kind of `client.go`. The
handshake, as nats-server does it: the accepting side (the hub) sends its INFO at once and
expects CONNECT first; the dialing side (the spoke) waits for that INFO, sends CONNECT, and
when the INFO said `info_on_connect` waits up to 2 s for the hub's INFO with `connect_info`
before it registers and sends its interest. pynatsd never compresses: it announces no
`compression`, so a nats-server peer speaks plain text.
"""

from __future__ import annotations

import asyncio
import base64
import re
import ssl
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import nkeys

from pynatsd.auth.permissions import SubjectMatcher
from pynatsd.cluster.link import Link
from pynatsd.cluster.protocol import (
    RouteMsg,
    RouteSub,
    RouteUnsub,
    shown_delivery,
    wire_delivery,
)
from pynatsd.config.leafnodes import remote_credentials, remote_host_port
from pynatsd.gateway import replies
from pynatsd.leafnode.protocol import LeafParser, lmsg_frame
from pynatsd.logger import log
from pynatsd.protocol import errors
from pynatsd.protocol.errors import CloseReason
from pynatsd.protocol.events import Pub
from pynatsd.protocol.frames import err_frame, go_json_bytes
from pynatsd.server import events
from pynatsd.server.delivery import fan_out_from_leaf
from pynatsd.server.routed import ShownPub
from pynatsd.server.subscription import LeafSubscription
from pynatsd.server.tls_session import NotTLS, TLSSession, TLSTransport
from pynatsd.version import COMPAT_VERSION

if TYPE_CHECKING:
    from pynatsd.leafnode.leafnodes import LeafNodes
    from pynatsd.options import RemoteLeafOptions
    from pynatsd.server.accounts import Account
    from pynatsd.server.delivery import Receiver
    from pynatsd.server.subscription import Subscription

LEAF_PING_INTERVAL = 30.0
# How long a soliciting leaf waits for the hub's INFO with `connect_info`.
CONNECT_INFO_WAIT = 2.0
# How long the side refused for a loop waits before dialing again.
LOOP_DELAY = 30.0
LDS_PREFIX = b"$LDS."
# nats-server's denyAllClientJs.
DENY_ALL_CLIENT_JS = ("$JS.API.>", "$KV.>", "$OBJ.>")

WRONG_PORT = "attempted to connect to wrong port"
LEAF_PORT = "attempted to connect to leaf node port"
SAME_CLUSTER = "remote leafnode has same cluster name"
STALE_LEAF = "Stale Leaf Node Connection - Closing"
_CREDS = re.compile(
    r"\s*(?:(?:[-]{3,}.*[-]{3,}\r?\n)([\w\-.=]+)(?:\r?\n[-]{3,}.*[-]{3,}(\r?\n|\Z)))"
)


def leaf_info_frame(info: dict[str, Any]) -> bytes:
    # As a client INFO: a space before the CRLF.
    return b"INFO " + go_json_bytes(info) + b" \r\n"


def loop_text(account: str, delay: float) -> str:
    return (
        f'Loop detected for leafnode account="{account}". Delaying attempt to reconnect for '
        f"{int(delay)}s"
    )


class Leaf(Link):
    """A leaf connection to one server; also that server's receiver in the bound account."""

    kind = "Leafnode"
    stale_kind = "Leaf"
    label_tag = "lid"

    def __init__(
        self, part: LeafNodes, *, remote: RemoteLeafOptions | None = None, url: str = ""
    ) -> None:
        server = part.server
        leaf_opts = server.options.leafnodes
        super().__init__(server, server.next_cid(), leaf_opts.write_deadline if leaf_opts else 0.0)
        self.part = self.listener = part
        self.remote = remote  # the remote we dialed (None: a leaf that dialed us)
        self.url = url
        self.solicited = remote is not None
        # We are the spoke on a connection we dialed (unless the remote says we are the hub).
        self.is_spoke = self.solicited and not (remote is not None and remote.hub)
        self.lid = self.link_id
        self.parser = LeafParser(expect_connect=not self.solicited)
        self.registered = False
        self._account: Account = server.global_account
        self.remote_name = ""
        self.remote_id = ""
        self.remote_cluster = ""
        # What the CONNECT of a leaf that dialed us said, for the system events.
        self.auth_user = ""
        self.remote_version = ""
        self.nonce = ""
        # The handshake's timer (authentication, the hub's INFO with `connect_info`).
        self._timer: asyncio.TimerHandle | None = None
        self._connect_sent = False
        self.tls: TLSTransport | None = None  # TLS after the INFO, when either side asks
        # Dialed over WebSocket (`ws://`, `wss://`): TLS, if any, came before the upgrade.
        self.websocket = False
        # After a loop was detected, the remote is dialed again only after this many seconds.
        self.reconnect_delay = 0.0
        # Interest told to the other side: (subject, queue) -> count (nats-server's smap).
        self.smap: dict[tuple[bytes, bytes], int] = {}
        # What never crosses this connection (a remote's deny_exports and deny_imports, and
        # JetStream's API once the account is known): None when nothing is denied.
        self._deny_exports: SubjectMatcher | None = None
        self._deny_imports: SubjectMatcher | None = None
        if remote is not None:
            self._set_denies(remote.deny_exports, remote.deny_imports)

    def _set_denies(self, exports: list[str], imports: list[str]) -> None:
        self.plans.clear()  # planned on what the lists let through
        self._deny_exports = SubjectMatcher(exports, False) if exports else None
        self._deny_imports = SubjectMatcher(imports, False) if imports else None

    def allows_export(self, subject: bytes) -> bool:
        """A message on `subject` may be sent to the other side."""
        deny = self._deny_exports
        return deny is None or not deny.match_plain(subject.decode("utf-8", "surrogateescape"))

    def plannable(self, msg: Pub) -> bool:
        """A publisher may plan its deliveries to this leaf (asked once per PUB line): the
        subject may cross, and the LMSG line never changes (no reply routed back on it)."""
        return not self.reply_routes and self.allows_export(msg.subject)

    def reply_route_subscription(self, account: bytes, reply: bytes) -> Subscription:
        # Kept from routes and gateways, as what our hub tells us is.
        return LeafSubscription(self, account, reply, b"", 1, True)

    # -- the Receiver protocol -------------------------------------------------------------------

    @property
    def account(self) -> Account:
        return self._account

    def deliver(self, sub: Subscription, msg: Pub, publisher: Receiver | None) -> None:
        self.deliver_remote(sub, msg, [sub.queue_bytes] if sub.queue else [])

    def deliver_remote(self, sub: Subscription, msg: Pub, queues: list[bytes]) -> None:
        if type(msg) is ShownPub:
            msg = wire_delivery(msg)  # a JetStream delivery, as across a route
        if self._deny_exports is not None and not self.allows_export(msg.subject):
            return
        if self.reply_routes:
            # An answer to a request from another cluster, back on its _GR_. subject.
            subject = self.routed_subject(self._account.name.encode(), msg.subject)
            if subject is not msg.subject:
                msg = Pub(subject, msg.reply, msg.payload, msg.header_size)
        self.stats.sent(1, len(msg.payload))
        self.last_activity = time.time()
        self.outbound.push(lmsg_frame(msg, queues, self.headers))

    def leaf_takes_routed(self, subject: bytes) -> bool:
        """A message from a route goes to a leaf that dialed us, or to our hub when it is a
        service reply (nats-server's `_R_.` exception)."""
        return not self.is_spoke or subject.startswith(b"_R_.")

    def same_origin(self, other: Leaf) -> bool:
        """Both connections lead to the same remote cluster: a message from one is not sent
        to the other."""
        return bool(self.remote_cluster) and self.remote_cluster == other.remote_cluster

    # -- asyncio.Protocol ------------------------------------------------------------------------

    def _begin(self) -> None:
        log.info("%s - Leafnode connection created%s", self.label, self._remote_label())
        if not self.solicited:
            self.nonce = self.part.new_nonce()
            info = leaf_info_frame(self.part.leaf_info(self))
            timeout = self.part.auth_timeout()
            self._timer = self.server.loop.call_later(timeout, self._auth_timeout)
            context = self.part.tls_context
            tls = self.part.opts.tls
            if context is None or self.websocket:
                self.send_now(info)
            elif tls is not None and tls.tls_handshake_first:
                self._handshake_first(context, info, tls.tls_handshake_first_fallback)
            else:
                self.send_now(info)
                # The leaf starts its TLS handshake once it has read the INFO.
                self._use_tls(TLSSession(context))
        elif self.remote is not None and self.remote.tls_handshake_first and not self.websocket:
            self._start_client_tls(self.remote)  # at once; the hub's INFO comes over it

    def _handshake_first(self, context: ssl.SSLContext, info: bytes, fallback: float) -> None:
        """`handshake_first` on our leaf listener: the INFO leaves only over TLS, once the
        leaf's handshake is done; with a fallback delay, a leaf that has said nothing by then
        is sent the INFO in plain text and upgrades after it (nats-server's
        createLeafNode)."""
        self._use_tls(TLSSession(context))
        self.send_now(info)  # waits in the TLS transport for the handshake
        if fallback > 0:
            self.server.loop.call_later(fallback, self._tls_first_fallback, context, info)

    def _tls_first_fallback(self, context: ssl.SSLContext, info: bytes) -> None:
        tls = self.tls
        if self.closed or tls is None or tls.session.received_any:
            return
        assert self.transport is not None
        self.tls = None
        self.outbound.attach(self.transport)
        self.send_now(info)
        self._use_tls(TLSSession(context))

    def _remote_label(self) -> str:
        if self.remote is None:
            return ""
        account = self.remote.local_account or "$G"
        return f" for account: {account}"

    def data_received(self, data: bytes) -> None:
        if self.closed:
            return
        self.last_activity = time.time()
        if self.tls is not None:
            try:
                data = self.tls.receive(data)
            except (NotTLS, ssl.SSLError) as e:
                log.error("%s - TLS handshake error: %s", self.label, e)
                self.close(CloseReason.TLS_HANDSHAKE_ERROR, abort=True)
                return
            if not data:
                return
        self._handle_events(self.parser.feed(data))
        self.plans.settle()
        self.server.flush_dirty()

    # -- events ----------------------------------------------------------------------------------

    def _process_err(self, text: str) -> None:
        text = text.strip().strip("'")
        if text.startswith("Loop detected"):
            # The other side found our interest coming back: wait before dialing again.
            if self.solicited:
                self.reconnect_delay = LOOP_DELAY
            log.error("%s - %s", self.label, loop_text(self._account.name, LOOP_DELAY))
        else:
            log.error("%s - Leafnode Error '%s'", self.label, text)
        self.close(CloseReason.PARSE_ERROR)

    # -- the dialing side (spoke) ----------------------------------------------------------------

    def _process_info(self, info: dict[str, Any]) -> None:
        if not self.solicited:
            return  # a leaf tells its hub nothing by INFO that we use
        if self._connect_sent:
            if info.get("connect_info") and not self.registered:
                self._finish_solicited(info)
            return
        if not info.get("client_id") or info.get("leafnode_urls") is None:
            log.error("%s - %s", self.label, WRONG_PORT)
            self.close(CloseReason.WRONG_PORT)
            return
        self.remote_id = str(info.get("server_id") or "")
        self.remote_name = str(info.get("server_name") or "")
        self.remote_cluster = str(info.get("cluster") or "")
        self.headers = bool(info.get("headers"))
        self.nonce = str(info.get("nonce") or "")
        remote = self.remote
        assert remote is not None
        upgrade = (info.get("tls_required") or remote.tls) and not self.websocket
        # TLS after the INFO (unless it came first), as nats-server's
        # leafClientHandshakeIfNeeded; the CONNECT below waits in the TLS transport until the
        # handshake is done.
        if upgrade and self.tls is None and not self._start_client_tls(remote):
            return
        self._send_connect(info)

    def _start_client_tls(self, remote: RemoteLeafOptions) -> bool:
        """The leaf's side of TLS with its hub, verified for the URL's host (False: the
        remote's TLS files are unusable, and the connection is closed)."""
        context = self.part.remote_tls_context(remote)
        if context is None:
            self.close(CloseReason.TLS_HANDSHAKE_ERROR)
            return False
        session = TLSSession(context, server_hostname=remote_host_port(self.url)[0])
        session.start()
        self._use_tls(session)
        return True

    def _use_tls(self, session: TLSSession) -> None:
        """From here on every byte in and out goes through `session`."""
        assert self.transport is not None
        self.tls = TLSTransport(self.transport, session)
        self.outbound.attach(self.tls)
        first = session.data_to_send()
        if first:
            self.transport.write(first)

    def _send_connect(self, info: dict[str, Any]) -> None:
        try:
            self.send_now(self._connect_frame())
        except (OSError, ValueError) as e:
            log.error("%s - Error signing the nonce: %s", self.label, e)
            self.close(CloseReason.AUTHENTICATION_VIOLATION)
            return
        self._connect_sent = True
        if info.get("info_on_connect"):
            self._timer = self.server.loop.call_later(CONNECT_INFO_WAIT, self._stale_handshake)
        else:
            self._finish_solicited(info)

    def _connect_frame(self) -> bytes:
        remote = self.remote
        assert remote is not None
        server = self.server
        connect: dict[str, Any] = {"version": COMPAT_VERSION}
        nonce = self.nonce.encode()
        if remote.credentials:
            contents = Path(remote.credentials).read_text()
            items = _CREDS.findall(contents)
            if len(items) < 2:
                raise ValueError("Credentials file malformed")
            pair = nkeys.from_seed(items[1][0].encode())
            connect["jwt"] = items[0][0]
            connect["sig"] = _sign(pair, nonce)
        elif remote.nkey:
            pair = nkeys.from_seed(remote.nkey.encode())
            connect["nkey"] = pair.public_key.decode()
            connect["sig"] = _sign(pair, nonce)
        userinfo = remote_credentials(self.url)
        if userinfo is not None:
            user, password = userinfo
            connect["user"] = user
            if password:
                connect["pass"] = password
            else:
                connect["auth_token"] = user
        connect["server_id"] = server.server_id
        connect["name"] = server.server_name
        if remote.hub:
            connect["is_hub"] = True
        connect["cluster"] = self.part.cluster_name()
        if not server.options.no_header_support:
            connect["headers"] = True
        if remote.deny_imports:
            connect["deny_pub"] = list(remote.deny_imports)
        connect["compress_mode"] = "off"
        connect["remote_account"] = self.part.local_account_name(remote)
        connect["protocol"] = 1
        return b"CONNECT " + go_json_bytes(connect) + b"\r\n"

    def _stale_handshake(self) -> None:
        self._timer = None
        if self.registered or self.closed:
            return
        self.send_now(err_frame(STALE_LEAF))
        log.error("%s - %s", self.label, STALE_LEAF)
        self.close(CloseReason.STALE_CONNECTION)

    def _finish_solicited(self, info: dict[str, Any]) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        remote = self.remote
        assert remote is not None
        self._account = self.server.get_account(self.part.local_account_name(remote))
        self._register()

    # -- the accepting side (hub) ----------------------------------------------------------------

    def _auth_timeout(self) -> None:
        self._timer = None
        if self.registered or self.closed:
            return
        log.error("%s - Authentication Timeout", self.label)
        self.send_now(err_frame(errors.AUTHENTICATION_TIMEOUT))
        self.close(CloseReason.AUTHENTICATION_TIMEOUT)

    def _process_connect(self, opts: dict[str, Any]) -> None:
        if self.solicited or self.registered:
            return
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        # Authorization first, then what the CONNECT says (nats-server's processConnect, then
        # processLeafNodeConnect).
        account_name = self.part.authorize(self, opts)
        if account_name is None:
            log.error("%s - Authorization Error", self.label)
            self._refuse(errors.AUTHORIZATION_VIOLATION, CloseReason.AUTHENTICATION_VIOLATION)
            return
        if opts.get("lang"):
            self._refuse(LEAF_PORT, CloseReason.WRONG_PORT)
            return
        cluster = str(opts.get("cluster") or "")
        if " " in cluster:
            self._refuse("cluster name cannot contain spaces", CloseReason.PROTOCOL_VIOLATION)
            return
        if cluster and cluster == self.server.cluster_name:
            self._refuse(SAME_CLUSTER, CloseReason.PROTOCOL_VIOLATION)
            return
        gateway = opts.get("gateway")
        if gateway:
            self._refuse(
                f'Rejecting connection from gateway "{gateway}" on the leafnode port',
                CloseReason.PROTOCOL_VIOLATION,
            )
            return
        self._account = self.server.get_account(account_name)
        self.headers = bool(opts.get("headers")) and not self.server.options.no_header_support
        self.remote_name = str(opts.get("name") or "")
        self.remote_id = str(opts.get("server_id") or "")
        self.remote_cluster = cluster
        self.auth_user = str(opts.get("user") or opts.get("nkey") or "")
        self.remote_version = str(opts.get("version") or "")
        if opts.get("is_hub"):
            self.is_spoke = True
        info = self.part.leaf_info(self, connect_info=True)
        self.send_now(leaf_info_frame(info))
        self._register()

    def _refuse(self, text: str, reason: str) -> None:
        log.error("%s - %s", self.label, text)
        self.refuse(text, reason)

    # -- both sides ------------------------------------------------------------------------------

    def _register(self) -> None:
        if self._account is not self.server.system_account:
            # nats-server's addLeafNodeConnection: JetStream's API, KV and object store
            # subjects never cross a leaf connection of a non-system account both ways, so two
            # JetStream servers never both answer one request (a domain's prefix does cross).
            remote = self.remote
            exports = [*(remote.deny_exports if remote else []), *DENY_ALL_CLIENT_JS]
            imports = [*(remote.deny_imports if remote else []), *DENY_ALL_CLIENT_JS]
            self._set_denies(exports, imports)
        self.registered = True
        self.part.register(self)
        log.info(
            "%s - Leafnode connection registered with %s (account %s)",
            self.label,
            self.remote_name or self.remote_id,
            self._account.name,
        )
        self.outbound.push(self.part.initial_interest(self))
        self._rtt_start = time.monotonic()
        self.outbound.flush()
        self.start_pinging()
        self._announce()
        for hook in self.server.leaf_registered_hooks:
            hook(self._account)

    def _announce(self) -> None:
        """The system events of a new leaf connection, in nats-server's order: the account's
        connection counts, then LEAFNODE.CONNECT (the accepting side) or the account's CONNECT
        (the dialing side)."""
        server = self.server
        for hook in server.account_conns_hooks:
            hook(self._account)
        if not self.solicited:
            events.leafnode_connect(server, self._account)
        elif self._account is not server.system_account:
            events.leaf_connected(server, self, self._event_info(stopped=False))

    def _event_info(self, stopped: bool) -> dict[str, Any]:
        name = "" if self.solicited else self.remote_name
        return events.leaf_info(self, self.auth_user, name, self.remote_version, stopped)

    def _process_sub(self, ev: RouteSub) -> None:
        if not self.registered:
            self._refuse(errors.AUTHORIZATION_VIOLATION, CloseReason.PROTOCOL_VIOLATION)
            return
        subject = ev.subject
        if subject.startswith(LDS_PREFIX) and subject == self.part.lds_subject(self._account):
            self._loop_detected()
            return
        name = self._account.name.encode()
        key = (name, subject, ev.queue)
        known = self.subs.get(key)
        if known is not None:
            old = cast(LeafSubscription, known)
            if ev.queue and ev.weight != old.queue_weight:
                was, old.queue_weight = old.queue_weight, max(ev.weight, 1)
                self.part.interest_changed(self._account, old, old.queue_weight - was)
            return
        sub = LeafSubscription(self, name, subject, ev.queue, max(ev.weight, 1), self.is_spoke)
        try:
            self._account.sublist.insert(sub)
        except ValueError:
            log.error("%s - Could not insert subscription: invalid subject", self.label)
            self.send_now(err_frame("Invalid Subscription"))
            return
        self.subs[key] = sub

    def _process_unsub(self, ev: RouteUnsub) -> None:
        if not self.registered:
            self._refuse(errors.AUTHORIZATION_VIOLATION, CloseReason.PROTOCOL_VIOLATION)
            return
        sub = self.subs.pop((self._account.name.encode(), ev.subject, ev.queue), None)
        if sub is None:
            return
        sub.closed = True
        self._account.sublist.remove(sub)

    def _loop_detected(self) -> None:
        if self.solicited:
            self.reconnect_delay = LOOP_DELAY
        text = loop_text(self._account.name, LOOP_DELAY)
        self.send_now(err_frame(text))
        log.error("%s - %s", self.label, text)
        self.close(CloseReason.PROTOCOL_VIOLATION)

    def _process_msg(self, ev: RouteMsg) -> None:
        msg = ev.msg
        stats = self.stats
        stats.in_msgs += 1
        stats.in_bytes += len(msg.payload)
        if not self.registered:
            return
        if self._deny_imports is not None and self._deny_imports.match_plain(
            msg.subject.decode("utf-8", "surrogateescape")
        ):
            return
        sublist = self._account.sublist
        line = msg.line if not ev.queues else b""
        if msg.reply.startswith(replies.PREFIXES):
            msg, line = self._unmap_reply(msg), b""
        elif msg.reply.startswith(b"$JS.ACK."):
            msg, line = shown_delivery(msg), b""
        result = sublist.match_bytes(ev.msg.subject)  # a JetStream delivery's routing subject
        if result.psubs or result.qsubs:
            if line and not any(sub.remote for sub in result.psubs):
                # Only local plain receivers (an LMSG naming no queue reaches no group): the
                # next LMSG with this line goes by plan (Link._handle_events), registered and
                # past deny_imports as this one.
                self.remember_plan(msg, result.psubs, sublist)
            fan_out_from_leaf(self, result, msg, ev.queues, not self.is_spoke)

    def _unmap_reply(self, msg: Pub) -> Pub:
        """A request from another cluster (its reply routed, `_GR_.`): shown here with the
        requester's own reply, whose answers go back on the routed subject for a little
        while (nats-server's leaf maps it per client: trackGWReply, handleGWReplyMap)."""
        routed = replies.routed(msg.reply)
        if routed is None:
            return msg
        name = self._account.name.encode()
        self.add_reply_route(self._account, name, routed[2], msg.reply, replies.RECENT_EXPIRATION)
        return Pub(msg.subject, routed[2], msg.payload, msg.header_size)

    def wants_interest(self, subject: bytes) -> bool:
        """Interest on `subject` may be told to the other side (deny_imports: we take no
        messages on those subjects, so we ask for none)."""
        if self._deny_imports is None or subject.startswith(LDS_PREFIX):
            return True
        return not self._deny_imports.match_plain(subject.decode("utf-8", "surrogateescape"))

    # -- output and closing ----------------------------------------------------------------------

    def ping_settings(self) -> tuple[float, int]:
        opts = self.server.options
        return min(opts.ping_interval, LEAF_PING_INTERVAL), opts.ping_max

    def closed_hook(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self.part.leaf_closed(self)
        if self.registered:
            server = self.server
            for hook in server.account_conns_hooks:
                hook(self._account)
            if self._account is not server.system_account:
                events.leaf_disconnected(server, self, self._event_info(stopped=True))


def _sign(pair: Any, nonce: bytes) -> str:
    return base64.urlsafe_b64encode(pair.sign(nonce)).rstrip(b"=").decode()
