"""The gateway part: the gateway listener, the outbound connections to the other clusters (one
per remote cluster), the inbound ones they make to us, gossip, and this cluster's interest
announced on every inbound connection.

Corresponds to the server half of nats-server's `server/gateway.go` (`startGateways`,
`solicitGateway`, `processImplicitGateway`, `gossipGatewaysToInboundGateway`,
`forwardNewGatewayToLocalCluster`, `sendGatewayConfigsToRoute`, `gatewayUpdateSubInterest`,
`switchAccountToInterestMode`, `handleGatewayReply`, `trackGWReply`).

Interest: every account is switched to interest-only mode as soon as an inbound connection
registers (nats-server does so since 2.9 and says it with `gateway_iom`), so a remote sends us
only what our cluster subscribes to. The interest of this cluster (local clients, the servers
behind our routes and the leafs that dialed us; never another gateway's, nor what our own hub
tells us over a leaf connection) is counted per account through each SubList's watcher: an RS+
when a subject's count goes 0 -> 1, an RS- when it drops to 0, and
for queue groups `RS+ <acc> <subject> <queue> 1`. What a remote tells us on our outbound
connection enters the account SubList as `GatewaySubscription`s, so one match finds every
receiver (see server/delivery.py for who gets a queue message).
"""

from __future__ import annotations

import asyncio
import base64
import random
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote, urlparse

from pynatsd.cluster.cluster import Cluster, non_local_ips
from pynatsd.cluster.link import LinkListener, RetryDelays, count_interest
from pynatsd.cluster.link_tls import first_host_name, server_name
from pynatsd.cluster.protocol import bare_info, rmsg_frame, rs_minus_frame, rs_plus_frame
from pynatsd.gateway import replies
from pynatsd.gateway.connection import CMD_GOSSIP, INTEREST_ONLY, GatewayConnection
from pynatsd.gateway.connection_tls import TLSGatewayConnection
from pynatsd.logger import log
from pynatsd.protocol.errors import CloseReason
from pynatsd.protocol.events import Pub
from pynatsd.protocol.frames import go_json_bytes
from pynatsd.server.delivery import enable_remote_delivery, fan_out_routed
from pynatsd.server.listen import join_host_port
from pynatsd.sublist import SubList
from pynatsd.tls import PeerTLS, peer_contexts
from pynatsd.version import COMPAT_VERSION

if TYPE_CHECKING:
    from pynatsd.cluster.protocol import RouteMsg
    from pynatsd.cluster.route import Route
    from pynatsd.options import GatewayOptions, RemoteGatewayOptions
    from pynatsd.server.accounts import Account
    from pynatsd.server.server import Server
    from pynatsd.server.subscription import Subscription

# nats-server waits this long after start-up before dialing the configured gateways, so that
# its cluster can form first (defaultSolicitGatewaysDelay).
SOLICIT_DELAY = 1.0
# nats-server's gatewayTLSInsecureWarning.
GATEWAY_TLS_INSECURE_WARNING = (
    "TLS certificate chain and hostname of solicited gateways will not be verified. "
    "DO NOT USE IN PRODUCTION!"
)
RECONNECT_DELAY = 1.0  # an explicit gateway's connection closed (defaultGatewayReconnectDelay)
# The gateway protocol version announced: 2, as for routes (no message tracing).
GATEWAY_PROTO = 2


class RemoteGateway:
    """A remote cluster we keep an outbound connection to (nats-server's gatewayCfg): from the
    configuration, or learned by gossip (implicit)."""

    def __init__(
        self,
        name: str,
        urls: list[str],
        implicit: bool,
        tls: PeerTLS | None = None,
        tls_timeout: float = 0.0,
    ) -> None:
        self.name = name
        self.urls: list[str] = []
        self.implicit = implicit
        self.hash = replies.gw_hash(name)
        self.old_hash = replies.old_hash(name)
        self.attempts = 0
        # Its TLS (its own block's, else the gateway's: every dial is TLS) and the handshake's
        # timeout; the first host name among its URLs, for dialing an IP (tlsName).
        self.tls = tls
        self.tls_timeout = tls_timeout
        self.tls_name = ""
        self.add_urls(urls)

    def add_urls(self, urls: list[str]) -> None:
        for url in urls:
            full = url if "://" in url else f"nats://{url}"
            if full not in self.urls and _host_port(full) not in map(_host_port, self.urls):
                self.urls.append(full)
                if self.tls is not None and not self.tls_name:
                    self.tls_name = first_host_name([_host_port(full)[0]])

    def tls_server_name(self, url: str) -> str:
        return server_name(_host_port(url)[0], self.tls_name)


def _host_port(url: str) -> tuple[str, int]:
    parsed = urlparse(url if "://" in url else f"nats://{url}")
    return parsed.hostname or "127.0.0.1", parsed.port or 7222


class Gateway(LinkListener[GatewayConnection]):
    """The `gateway` part of a server."""

    name = "gateway"  # the part's name; the gateway's own is `gateway_name`

    def __init__(self, server: Server) -> None:
        opts = server.options.gateway
        assert opts is not None
        super().__init__(server)
        self.opts: GatewayOptions = opts
        self.gateway_name = opts.name
        # `tls {}`: every gateway connection is TLS, both ways (its contexts built once).
        self.tls: PeerTLS | None = peer_contexts(opts.tls) if opts.tls is not None else None
        self.remotes: dict[str, RemoteGateway] = {}
        for remote in opts.gateways:
            if remote.name != opts.name:
                self.remotes[remote.name] = self._remote(remote.name, remote.urls, remote)
        self.own_urls = [
            u for r in opts.gateways if r.name == opts.name for u in r.urls
        ]  # ownCfgURLs, for /varz
        self.outbound: dict[str, GatewayConnection] = {}
        self.inbound: dict[int, GatewayConnection] = {}
        self.host = opts.host
        self.url = ""  # this server's gateway URL, host:port
        self.urls: list[str] = []  # the gateway URLs of every server of this cluster
        self._reply_prefix = replies.reply_prefix(opts.name, server.server_id)
        self._old_reply_prefix = replies.old_reply_prefix(opts.name)
        self.cluster_hash = replies.gw_hash(opts.name)
        self._old_cluster_hash = replies.old_hash(opts.name)
        self.cluster: Cluster | None = None
        self.server_hash = replies.gw_hash(server.server_id)
        # This cluster's interest per account, nats-server's `pasi`: (subject, queue) -> count.
        self._interest: dict[bytes, dict[tuple[bytes, bytes], int]] = {}
        # Subscriptions made in the last seconds, per account: a request whose reply one of
        # them matches gets its reply mapped (shouldMapReplyForGatewaySend).
        self._recent: dict[bytes, SubList[Subscription]] = {}

    # -- the part --------------------------------------------------------------------------------

    async def start(self) -> None:
        opts = self.opts
        self.bind_port(opts.host, opts.port, "gateway port")
        self.url = opts.advertise or join_host_port(_advertised_host(opts.host), self.port)
        self.urls = [self.url]
        enable_remote_delivery()
        server = self.server
        if not server.cluster_name:
            server.cluster_name = opts.name
        cluster = server.parts.get("cluster")
        if isinstance(cluster, Cluster):
            cluster.gateways = self
        self.cluster = cluster if isinstance(cluster, Cluster) else None
        for account in list(server.accounts.values()):
            self._watch(account)
        server.account_added_hooks.append(self._account_added)
        server.ready_hooks.append(lambda: self._spawn(self._serve()))

    def _accepted(self) -> GatewayConnection:
        return GatewayConnection(self) if self.tls is None else TLSGatewayConnection(self)

    # -- configuration reload (called by pynatsd.reload) -----------------------------------------

    def reload_tls(self, opts: GatewayOptions) -> None:
        """A reload changed the gateway's TLS (nats-server refuses any other change to the
        block): the connections made from here on use it, each remote its own block or the
        gateway's (updateRemotesTLSConfig), and those whose peer's certificate new pinned
        certificates leave out are closed (recheckPinnedCerts); the rest stay as they are."""
        old_pins = self.opts.tls.pinned_certs if self.opts.tls is not None else []
        self.opts = opts
        self.tls = peer_contexts(opts.tls) if opts.tls is not None else None
        configured = {r.name: r for r in opts.gateways}
        for name, remote in self.remotes.items():
            fresh = self._remote(
                name, remote.urls, None if remote.implicit else configured.get(name)
            )
            remote.tls, remote.tls_timeout, remote.tls_name = (
                fresh.tls,
                fresh.tls_timeout,
                fresh.tls_name,
            )
        pins = opts.tls.pinned_certs if opts.tls is not None else []
        if pins == old_pins:
            return
        refused = [
            conn
            for conn in [*self.outbound.values(), *self.inbound.values()]
            if isinstance(conn, TLSGatewayConnection) and not conn.matches_pins(pins)
        ]
        if refused:
            log.info("Disconnect %d clients due to pinned certs reload", len(refused))
            for conn in refused:
                conn.close(CloseReason.TLS_HANDSHAKE_ERROR)

    def _remote(
        self, name: str, urls: list[str], opts: RemoteGatewayOptions | None
    ) -> RemoteGateway:
        """A remote cluster to dial, from the configuration (`opts`) or learned (None): with
        its own TLS block, else the gateway's (validateGatewayOptions)."""
        tls: PeerTLS | None
        if opts is not None and opts.tls is not None:
            tls = peer_contexts(opts.tls)
            timeout = opts.tls_timeout or self.opts.tls_timeout
        else:
            tls, timeout = self.tls, self.opts.tls_timeout
        return RemoteGateway(name, urls, opts is None, tls, timeout)

    async def _serve(self) -> None:
        # The class read per connection: a reload may turn TLS on or off for the next ones.
        if not await self.serve(self._accepted):
            return
        log.info("Gateway name is %s", self.gateway_name)
        log.info(
            "Listening for gateways connections on %s", join_host_port(self.opts.host, self.port)
        )
        if self.opts.advertise:
            log.info('Advertise address for gateway "%s" is set to %s', self.gateway_name, self.url)
        else:
            log.info('Address for gateway "%s" is %s', self.gateway_name, self.url)
        opts = self.opts
        if (opts.tls is not None and opts.tls.insecure) or any(
            r.tls is not None and r.tls.insecure for r in opts.gateways
        ):
            log.warning(GATEWAY_TLS_INSECURE_WARNING)
        await asyncio.sleep(SOLICIT_DELAY)
        for remote in list(self.remotes.values()):
            if not remote.implicit:
                self._spawn(self._solicit(remote))

    async def stop(self) -> None:
        self.stop_listening()
        for conn in list(self.connecting):
            conn.close(CloseReason.SERVER_SHUTDOWN)

    # -- what we tell remotes --------------------------------------------------------------------

    def info(self) -> dict[str, Any]:
        """The gateway INFO (nats-server's gateway `Info`, in its field order)."""
        server = self.server
        host, _, port = self.url.rpartition(":")
        info: dict[str, Any] = {
            "server_id": server.server_id,
            "server_name": server.server_name,
            "version": COMPAT_VERSION,
            "proto": GATEWAY_PROTO,
            "go": "",
            "host": host.strip("[]"),
            "port": int(port),
            "headers": not server.options.no_header_support,
        }
        if self.opts.username:
            info["auth_required"] = True
        if self.tls is not None:
            info["tls_required"] = info["tls_verify"] = True
        info["max_payload"] = server.options.max_payload
        info["gateway"] = self.gateway_name
        info["gateway_urls"] = list(self.urls)
        info["gateway_url"] = self.url
        info["gateway_nrp"] = True
        info["gateway_iom"] = True
        return info

    def info_frame(self) -> bytes:
        return b"INFO " + go_json_bytes(self.info()) + b"\r\n"

    def connect_frame(self, conn: GatewayConnection) -> bytes:
        """sendGatewayConnect: the URL's user and password, else the block's."""
        connect: dict[str, Any] = {"echo": False, "verbose": False, "pedantic": False}
        user = password = ""
        parsed = urlparse(conn.url)
        if parsed.username:
            user, password = unquote(parsed.username), unquote(parsed.password or "")
        elif self.opts.username:
            user, password = self.opts.username, self.opts.password
        if user:
            connect["user"] = user
            connect["pass"] = password
        connect["tls_required"] = conn.remote is not None and conn.remote.tls is not None
        connect["headers"] = False
        connect["name"] = self.server.server_id
        connect["cluster"] = ""
        connect["gateway"] = self.gateway_name
        return b"CONNECT " + go_json_bytes(connect) + b"\r\n"

    def command_frame(self, cmd: int, account: bytes) -> bytes:
        """An INFO carrying a command and its account (a bare Info with the gateway name)."""
        info = bare_info(
            gateway=self.gateway_name,
            gateway_cmd=cmd,
            gateway_cmd_payload=base64.b64encode(account).decode(),
        )
        return b"INFO " + go_json_bytes(info) + b"\r\n"

    def gossip_frames(self, skip: str) -> bytes:
        """gossipGatewaysToInboundGateway: an INFO per other gateway we know, so the remote
        dials it too (a full mesh of clusters)."""
        frames = []
        for name, remote in self.remotes.items():
            if name == skip or not remote.urls:
                continue
            info = bare_info(
                server_id=self.server.server_id,
                gateway=name,
                gateway_urls=[_url_host(u) for u in remote.urls],
                gateway_cmd=1,
            )
            frames.append(b"INFO " + go_json_bytes(info) + b"\r\n")
        return b"".join(frames)

    def authorized(self, connect: dict[str, Any]) -> bool:
        if not self.opts.username:
            return True
        return (
            connect.get("user") == self.opts.username and connect.get("pass") == self.opts.password
        )

    def configured_names(self) -> set[str]:
        return {r.name for r in self.opts.gateways}

    # -- connections come and go -----------------------------------------------------------------

    def register_outbound(self, conn: GatewayConnection) -> bool:
        if conn.name in self.outbound:
            return False
        self.outbound[conn.name] = conn
        if conn.remote is not None:
            conn.remote.attempts = 0
        return True

    def connection_closed(self, conn: GatewayConnection) -> None:
        self.connecting.discard(conn)
        self.inbound.pop(conn.gid, None)
        if self.outbound.get(conn.name) is conn:
            del self.outbound[conn.name]

    def implicit(self, name: str, urls: list[str]) -> None:
        """processImplicitGateway: a cluster we learned of (an inbound connection, gossip) that
        we have no outbound connection configured to: dial it."""
        if name == self.gateway_name or not name:
            return
        remote = self.remotes.get(name)
        if remote is not None:
            remote.add_urls(urls)
            return
        remote = self._remote(name, urls, None)
        if not remote.urls:
            return
        self.remotes[name] = remote
        self._spawn(self._solicit(remote))

    def forward_to_cluster(self, name: str, urls: list[str]) -> None:
        """forwardNewGatewayToLocalCluster: tell the other servers of our cluster (through the
        routes) about a gateway, so that each has its own outbound connection to it."""
        if self.cluster is None:
            return
        info = bare_info(
            server_id="GW" + self.server.server_id,
            server_name=self.server.server_name,
            gateway=name,
            gateway_urls=urls,
            gateway_cmd=1,
        )
        self.cluster.broadcast_info(b"INFO " + go_json_bytes(info) + b"\r\n")

    # -- the cluster's side (cluster.cluster.Gateways) -------------------------------------------

    def info_from_route(self, info: dict[str, Any]) -> None:
        if info.get("gateway_cmd") == CMD_GOSSIP:
            name = str(info.get("gateway") or "")
            if not self.opts.reject_unknown or name in self.configured_names():
                self.implicit(name, info.get("gateway_urls") or [])
        else:
            log.error(
                "Unknown command %d from server %s",
                int(info.get("gateway_cmd") or 0),
                str(info.get("server_id") or ""),
            )

    def frames_for_route(self) -> bytes:
        """sendGatewayConfigsToRoute: the gateways we have an outbound connection to."""
        frames = []
        for conn in self.outbound.values():
            if conn.remote is None or not conn.remote.urls:
                continue
            info = bare_info(
                server_id="GW" + self.server.server_id,
                gateway=conn.name,
                gateway_urls=[_url_host(u) for u in conn.remote.urls],
                gateway_cmd=CMD_GOSSIP,
            )
            frames.append(b"INFO " + go_json_bytes(info) + b"\r\n")
        return b"".join(frames)

    def route_gateway_url(self, url: str, added: bool) -> None:
        """A server of our cluster with its gateway URL joined or left: remotes that dial us
        learn every URL of the cluster from our INFO (sendAsyncGatewayInfo)."""
        if added and url not in self.urls:
            self.urls.append(url)
        elif not added and url in self.urls and url != self.url:
            self.urls.remove(url)
        else:
            return
        frame = self.info_frame()
        for conn in self.inbound.values():
            conn.send_now(frame)

    def message_from_route(self, route: Route, account: Account, ev: RouteMsg) -> bool:
        """handleGatewayReply for a routed message: a reply routed back to our cluster is
        delivered here under its own subject; a request whose reply is routed is shown to our
        clients with their own reply, and their answer goes back across."""
        msg = ev.msg
        if not (msg.subject.startswith(replies.PREFIXES) or msg.reply.startswith(replies.PREFIXES)):
            return False
        routed = replies.routed(msg.subject)
        if routed is not None:
            if routed[0] not in (self.cluster_hash, self._old_cluster_hash):
                return True  # for another cluster: dropped
            msg = Pub(routed[2], msg.reply, msg.payload, msg.header_size)
        routed_reply = replies.routed(msg.reply)
        if routed_reply is not None:
            self.track_reply(ev.account, routed_reply, msg.reply)
            msg = Pub(msg.subject, routed_reply[2], msg.payload, msg.header_size)
        result = account.sublist.match_bytes(msg.subject)
        if result.psubs or result.qsubs:
            fan_out_routed(route, result, msg, ev.queues)
        return True

    def send_to_server(self, server_hash: bytes, account: bytes, msg: Pub) -> bool:
        """A reply routed back to another server of our cluster: over its route, as is."""
        if self.cluster is None:
            return False
        for peer in self.cluster.peers.values():
            if replies.gw_hash(peer.remote_id) != server_hash:
                continue
            route = peer.conn_for(account) or peer.first
            wire = b"" if route.pinned_account else account
            route.outbound.push(rmsg_frame(wire, msg, (), route.headers))
            self.server.flush_soon()
            return True
        return False

    async def _solicit(self, remote: RemoteGateway) -> None:
        """solicitGateway: dial the remote's URLs in random order until one answers, then again
        after the connection closes (explicit gateways forever, implicit ones
        `connect_retries` + 1 times)."""
        delays = RetryDelays(self.opts.connect_backoff)
        kind = "implicit" if remote.implicit else "explicit"
        while self.running and self.remotes.get(remote.name) is remote:
            delays.reset()
            attempts = 0
            conn: GatewayConnection | None = None
            while self.running and conn is None:
                attempts += 1
                urls = list(remote.urls)
                random.shuffle(urls)
                for url in urls:
                    conn = await self._dial(remote, url, kind, attempts)
                    if conn is not None:
                        break
                if conn is not None:
                    break
                if (
                    remote.implicit
                    and attempts > self.opts.connect_retries
                    and not any(c.name == remote.name for c in self.inbound.values())
                ):
                    # Given up, unless the remote has dialed us meanwhile.
                    self.remotes.pop(remote.name, None)
                    return
                await asyncio.sleep(delays.next())
            if conn is None:
                return
            await conn.done
            if conn.no_reconnect:
                return
            pause = random.random() * 0.1
            await asyncio.sleep(pause if remote.implicit else pause + RECONNECT_DELAY)

    async def _dial(
        self, remote: RemoteGateway, url: str, kind: str, attempt: int
    ) -> GatewayConnection | None:
        host, port = _host_port(url)
        address = join_host_port(host, port)
        log.info(
            'Connecting to %s gateway "%s" (%s) at %s (attempt %d)',
            kind,
            remote.name,
            address,
            address,
            attempt,
        )
        try:
            connection = GatewayConnection if remote.tls is None else TLSGatewayConnection
            _, conn = await self.server.loop.create_connection(
                lambda: connection(self, remote, url), host, port
            )
        except OSError as e:
            reason = "connection refused" if isinstance(e, ConnectionRefusedError) else str(e)
            log.error(
                'Error connecting to %s gateway "%s" (%s) at %s (attempt %d): dial tcp %s: '
                "connect: %s",
                kind,
                remote.name,
                address,
                address,
                attempt,
                address,
                reason,
            )
            return None
        return conn

    # -- this cluster's interest -----------------------------------------------------------------

    def _account_added(self, account: Account) -> None:
        self._watch(account)
        for out in list(self.outbound.values()):
            if out.optimistic is not None:
                out.optimistic.add_account(account)
        name = account.name.encode()
        for conn in list(self.inbound.values()):
            conn.switch_to_interest_only(name)
            conn.outbound.flush()

    def _watch(self, account: Account) -> None:
        name = account.name.encode()
        counts = self._interest.setdefault(name, {})
        server = self.server

        def changed(sub: Subscription, delta: int) -> None:
            if sub.gateway or sub.from_hub:
                # Another cluster's interest is never announced to a gateway, nor what our
                # own hub told us over a leaf connection (a leaf that dialed us counts).
                return
            if delta > 0 and (not sub.remote or sub.leaf):
                # A request with a reply on it crosses with the reply mapped to _GR_., as the
                # interest may reach the other cluster after the answer.
                self._remember_recent(name, sub)
            old = count_interest(counts, sub, delta)
            n = old + delta
            if not self.inbound or (old > 0) == (n > 0):
                return
            queue = sub.queue_bytes
            if n > 0:
                frame = rs_plus_frame(name, sub.subject_bytes, queue, 1)
            else:
                frame = rs_minus_frame(name, sub.subject_bytes, queue)
            for conn in self.inbound.values():
                mode = conn.modes.get(name)
                if queue or mode == INTEREST_ONLY:
                    conn.outbound.push(frame)
                elif mode == "" and n > 0:
                    # We had said A- (no interest at all): now there is some.
                    del conn.modes[name]
                    conn.outbound.push(b"A+ " + name + b"\r\n")
            server.flush_soon()

        for sub in account.sublist.all():
            changed(sub, 1)
        account.sublist.add_watcher(changed)

    def queue_interest_frames(self) -> bytes:
        """sendQueueSubsToGateway: every queue group of every account, weight 1."""
        return b"".join(
            rs_plus_frame(account, subject, queue, 1)
            for account, counts in self._interest.items()
            for (subject, queue) in counts
            if queue
        )

    def plain_interest_frames(self, account: bytes) -> bytes:
        return b"".join(
            rs_plus_frame(account, subject)
            for (subject, queue) in self._interest.get(account, {})
            if not queue
        )

    def _remember_recent(self, account: bytes, sub: Subscription) -> None:
        recent = self._recent.get(account)
        if recent is None:
            recent = self._recent[account] = SubList(cache=False)
        try:
            recent.insert(sub)
        except ValueError:
            return
        self.server.loop.call_later(replies.RECENT_EXPIRATION, self._forget_recent, account, sub)

    def _forget_recent(self, account: bytes, sub: Subscription) -> None:
        recent = self._recent.get(account)
        if recent is not None:
            recent.remove(sub)
            if not recent.count():
                del self._recent[account]

    def is_recent_interest(self, account: bytes, reply: bytes) -> bool:
        recent = self._recent.get(account)
        return recent is not None and bool(recent.match_bytes(reply).psubs)

    def reply_prefix(self, old: bool) -> bytes:
        return self._old_reply_prefix if old else self._reply_prefix

    # -- messages in -----------------------------------------------------------------------------

    def account_no_interest(self, conn: GatewayConnection, account: bytes) -> None:
        """gatewayHandleAccountNoInterest: an unknown account: A- (once)."""
        if conn.modes.get(account) == "" or self._interest.get(account):
            return
        conn.modes[account] = ""
        conn.outbound.push(b"A- " + account + b"\r\n")

    def routed_reply(
        self, conn: GatewayConnection, ev: RouteMsg, routed: tuple[bytes, bytes, bytes]
    ) -> None:
        """handleGatewayReply: a reply routed back to this cluster. Ours, for this server:
        delivered under the original subject; for another server of the cluster: sent there
        over its route; for another cluster: dropped."""
        cluster_hash, server_hash, subject = routed
        if cluster_hash != (self.cluster_hash if server_hash else self._old_cluster_hash):
            return
        account = conn._lookup(ev.account)
        if account is None:
            self.account_no_interest(conn, ev.account)
            return
        if (
            server_hash
            and server_hash != self.server_hash
            and self.send_to_server(server_hash, ev.account, ev.msg)
        ):
            return  # the requester is on another server of our cluster
        msg = ev.msg
        ev.msg = Pub(subject, msg.reply, msg.payload, msg.header_size)
        conn.deliver_inbound(account, ev)

    def track_reply(self, account: bytes, routed: tuple[bytes, bytes, bytes], reply: bytes) -> None:
        """trackGWReply: the answer to `reply` (shown to our clients without its prefix) goes
        back to the cluster whose hash leads it, for a little while."""
        cluster_hash = routed[0]
        for conn in self.outbound.values():
            remote = conn.remote
            if remote is None or cluster_hash not in (remote.hash, remote.old_hash):
                continue
            account_obj = conn._lookup(account)
            if account_obj is not None:
                conn.add_reply_route(
                    account_obj, account, routed[2], reply, replies.RECENT_EXPIRATION
                )
            return

    # -- monitoring ------------------------------------------------------------------------------

    @property
    def num_outbound(self) -> int:
        return len(self.outbound)

    @property
    def num_inbound(self) -> int:
        return len(self.inbound)


def _url_host(url: str) -> str:
    host, port = _host_port(url)
    return join_host_port(host, port)


def _advertised_host(host: str) -> str:
    """The host put in our gateway URL: a wildcard listen address is replaced by the first
    non-local IP, as nats-server does."""
    if host not in ("", "0.0.0.0", "::"):
        return host
    return non_local_ips()[0]
