"""The cluster part: the route listener, the routes we dial, gossip, and the local interest
announced to every route.

Corresponds to the server half of nats-server's `server/route.go` (`startRouteAcceptLoop`,
`connectToRoute`, `addRoute`, `forwardNewRouteInfoToKnownServers`, `processImplicitRoute`,
`updateRouteSubscriptionMap`, `sendSubsToRoute`) and the `connect_urls` updates of
`server.go`. Each peer is reached by a pool of connections as nats-server pools them
(`cluster/pool.py`), or by one carrying every account with `pool_size: -1`; no `compression`
is announced, so a Go peer talks plain text to us (see docs/clustering.md).

Local interest (clients, the server's internal subscriptions) is learned through each account
SubList's watcher (`add_watcher`), the one hook in the core: RS+ when a subject's count goes
0 -> 1, RS- when it goes back to 0, and for a queue group an RS+ with the new weight at every
change. Interest learned from a route is never announced to another route; that of a leaf node
that dialed us is, counted apart per leaf cluster: as `LS+ <origin>` to a peer that announced
`lnoc` (so that it never sends that cluster's messages back to it), as RS+ to one that did not.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import secrets
import socket
from collections.abc import Coroutine, Iterator
from typing import TYPE_CHECKING, Any, Protocol, TypeVar
from urllib.parse import unquote, urlparse

from pynatsd.cluster.link import RETRY_DELAY, LinkListener, RetryDelays, count_interest
from pynatsd.cluster.link_tls import first_host_name, server_name
from pynatsd.cluster.permissions import (
    export_changed,
    importable,
    info_fields,
    reload_permissions,
    route_permissions,
)
from pynatsd.cluster.pinned import PinnedAccounts
from pynatsd.cluster.pool import Peer, Slot
from pynatsd.cluster.protocol import (
    ls_minus_frame,
    ls_plus_frame,
    rs_minus_frame,
    rs_plus_frame,
)
from pynatsd.cluster.route import Route, route_info_frame
from pynatsd.cluster.route_tls import TLSRoute
from pynatsd.logger import log
from pynatsd.protocol.errors import CloseReason
from pynatsd.protocol.frames import go_json_bytes
from pynatsd.server.delivery import enable_remote_delivery
from pynatsd.server.listen import WILDCARD_HOSTS, join_host_port
from pynatsd.tls import PeerTLS, peer_contexts
from pynatsd.version import COMPAT_VERSION

if TYPE_CHECKING:
    from pynatsd.cluster.protocol import RouteMsg
    from pynatsd.options import ClusterOptions
    from pynatsd.server.accounts import Account
    from pynatsd.server.server import Server
    from pynatsd.server.subscription import Subscription

_T = TypeVar("_T")

# The route protocol version announced: 2 (accounts), not 3 (message tracing), so a Go peer
# never forwards us trace-only messages, which this server would deliver.
ROUTE_PROTO = 2
# Explicit routes are retried forever, every second (RETRY_DELAY) plus up to 100 ms of jitter.
RETRY_JITTER = 0.1
CLUSTER_TLS_INSECURE_WARNING = (
    "TLS certificate chain and hostname of solicited routes will not be verified. "
    "DO NOT USE IN PRODUCTION!"
)


def _retry_delay() -> float:
    return RETRY_DELAY + random.random() * RETRY_JITTER


def _host_port(url: str) -> tuple[str, int]:
    parsed = urlparse(url if "://" in url else f"nats-route://{url}")
    return parsed.hostname or "127.0.0.1", parsed.port or 6222


class Gateways(Protocol):
    """What the cluster asks of the gateways of its server, if any (the gateway part sets
    itself as `Cluster.gateways`; the cluster does not import it)."""

    url: str  # this server's gateway URL, announced in route INFO (`gateway_url`)

    def info_from_route(self, info: dict[str, Any]) -> None:
        """A gateway INFO a peer forwarded (forwardNewGatewayToLocalCluster)."""

    def frames_for_route(self) -> bytes:
        """What a new route is told about the gateways we dial (sendGatewayConfigsToRoute)."""

    def route_gateway_url(self, url: str, added: bool) -> None:
        """A peer's gateway URL came or went (addGatewayURL, removeGatewayURL)."""

    def message_from_route(self, route: Route, account: Account, ev: RouteMsg) -> bool:
        """A routed message with a gateway-routed subject or reply: handled (True)."""


class Cluster(LinkListener[Route]):
    """The `cluster` part of a server."""

    name = "cluster"

    def __init__(self, server: Server) -> None:
        opts = server.options.cluster
        assert opts is not None
        super().__init__(server)
        self.opts: ClusterOptions = opts
        # The configured (explicit) route URLs being kept up; a reload may change them.
        self._explicit: set[str] = set()
        self.dynamic = not opts.name
        self.cluster_name = opts.name or secrets.token_hex(11).upper()
        self.peers: dict[str, Peer] = {}  # the other servers, by server_id
        # Connections per peer: `pool_size` (0: one carrying every account, nats-server's
        # -1) plus one per pinned account ($SYS unless there is no system account).
        self.pool_size = max(opts.pool_size, 0)
        self.pinned_accounts = self._pinned_of(opts)
        self.pinned_changes = PinnedAccounts(self)  # what a reload does to them
        self.self_urls: set[str] = set()  # configured URLs that turned out to be ourselves
        # `tls {}`: every route is TLS, both ways (its contexts built once).
        self.tls: PeerTLS | None = peer_contexts(opts.tls) if opts.tls is not None else None
        self._route_class: type[Route] = Route if self.tls is None else TLSRoute
        # The first host name among the configured routes: what a dialed TLS route verifies
        # when its URL names an IP (nats-server's routeTLSName).
        self._tls_name = first_host_name(_host_port(u)[0] for u in opts.routes)
        # `cluster { permissions { import } }`: which local interest is announced to peers.
        self.imports = route_permissions(opts.permissions)
        self.host = opts.host
        self._dialing: set[str] = set()
        self.gateways: Gateways | None = None
        # Local interest per account: (subject, queue) -> number of local subscriptions.
        self._interest: dict[str, dict[tuple[bytes, bytes], int]] = {}
        # Interest of leaf nodes of a named cluster that dialed us, per account:
        # (subject, queue, origin cluster) -> number of subscriptions (nats-server's "L" keys).
        self._leaf_interest: dict[str, dict[tuple[bytes, bytes, bytes], int]] = {}

    # -- the part --------------------------------------------------------------------------------

    async def start(self) -> None:
        """Bind the route port now (a port that cannot be had fails the start with
        nats-server's [FTL] text); accept and dial once the server is ready."""
        self.bind_port(self.opts.host, self.opts.port, "router port")
        enable_remote_delivery()
        server = self.server
        server.cluster_name = self.cluster_name
        for account in list(server.accounts.values()):
            self._watch(account)
        server.account_added_hooks.append(self._watch)
        server.lame_duck_hooks.append(self._announce_lame_duck)
        server.ready_hooks.append(lambda: self.spawn(self._serve()))

    async def _serve(self) -> None:
        opts = self.opts
        # The class read per connection: a reload that turns TLS on or off applies to the next.
        if not await self.serve(lambda: self._route_class(self, solicited=False)):
            return
        log.info("Cluster name is %s", self.cluster_name)
        log.info("Listening for route connections on %s", join_host_port(opts.host, self.port))
        if opts.tls is not None and opts.tls.insecure:
            log.warning(CLUSTER_TLS_INSECURE_WARNING)
        for url in opts.routes:
            self._explicit.add(url)
            self.spawn(self._keep_route(url))

    # -- configuration reload (called by pynatsd.reload) -----------------------------------------

    def reload_options(self, cluster: ClusterOptions) -> None:
        """The cluster block changed (other than its routes, host and port, which a reload
        refuses to change): its settings apply from here on, and the pinned accounts move."""
        old, self.opts = self.opts, cluster
        if cluster.tls != old.tls:
            # New connections only, as nats-server: the routes up stay as they are.
            self.tls = peer_contexts(cluster.tls) if cluster.tls is not None else None
            self._route_class = Route if self.tls is None else TLSRoute
        if cluster.permissions != old.permissions:
            reload_permissions(self, cluster.permissions)
        self.pinned_changes.reload(self._pinned_of(cluster))

    def _pinned_of(self, opts: ClusterOptions) -> frozenset[bytes]:
        """The accounts with a connection of their own: `accounts` and the system account,
        when the routes are pooled."""
        if not self.pool_size:
            return frozenset()
        server = self.server
        pinned = {name.encode() for name in opts.accounts}
        if not server.options.no_system_account:
            pinned.add(server.system_account.name.encode())
        return frozenset(pinned)

    def reload_routes(self, routes: list[str]) -> None:
        """The explicit routes changed (nats-server's routesOption.Apply): the added ones are
        dialed, the routes to removed ones closed and not dialed again."""
        wanted = set(routes)
        for url in sorted(self._explicit - wanted):
            self._explicit.discard(url)
            route = self._route_for_url(url)
            if route is None:
                continue
            log.info("Removed route %s", url)
            peer = self.peers.get(route.remote_id)
            # Every connection to that peer: the pool and the pinned ones.
            for conn in list(peer.slots.values()) if peer is not None else [route]:
                conn.configured = conn.solicited = conn.retry = False
                conn.close(CloseReason.CLIENT_CLOSED)
        for url in routes:
            if url not in self._explicit:
                self._explicit.add(url)
                self.spawn(self._keep_route(url))

    async def stop(self) -> None:
        self.stop_listening()
        for route in list(self.connecting):
            route.close(CloseReason.SERVER_SHUTDOWN)
        self.server.connect_urls = []

    def spawn(self, coro: Coroutine[Any, Any, None]) -> None:
        """A background task of the cluster's (dials, also those of pinned.py)."""
        self._spawn(coro)

    # -- what we tell peers ----------------------------------------------------------------------

    def route_url(self) -> str:
        """host:port peers reach our route listener at."""
        if self.opts.advertise:
            return self.opts.advertise
        return join_host_port(self.host, self.port)

    def client_urls(self) -> list[str]:
        """This server's client URLs, as nats-server lists them in connect_urls."""
        server = self.server
        opts = server.options
        if opts.client_advertise:
            return [opts.client_advertise]
        if server.port <= 0:
            return []  # not bound yet
        if opts.host in WILDCARD_HOSTS:
            return [join_host_port(ip, server.port) for ip in non_local_ips()]
        return [join_host_port(opts.host, server.port)]

    def route_info(self, route: Route | None = None, **extra: Any) -> dict[str, Any]:
        """The INFO we send a route (nats-server's route INFO, without compression)."""
        server = self.server
        opts = self.opts
        info: dict[str, Any] = {
            "server_id": server.server_id,
            "server_name": server.server_name,
            "version": COMPAT_VERSION,
            "proto": ROUTE_PROTO,
            "host": self.host,
            "port": self.port,
            "headers": not server.options.no_header_support,
        }
        if opts.username:
            info["auth_required"] = True
        if self.tls is not None:
            info["tls_required"] = info["tls_verify"] = True
        info["max_payload"] = server.options.max_payload
        if server.options.jetstream:
            info["jetstream"] = True
        if opts.advertise:
            info["ip"] = f"nats-route://{opts.advertise}/"
        info["cluster"] = self.cluster_name
        if self.dynamic:
            info["cluster_dynamic"] = True
        if not opts.no_advertise:
            urls = self.client_urls()
            if urls:
                info["connect_urls"] = urls
        if server.lame_duck:
            info["ldm"] = True
        info.update(info_fields(opts.permissions))
        # LS+/LMSG with a leaf's origin cluster are understood, and LS- with it.
        info["lnoc"] = info["lnocu"] = True
        if self.pool_size:
            info["route_pool_size"] = self.pool_size
            if route is not None and route.solicited:
                if route.pinned_account:
                    info["route_account"] = route.pinned_account.decode()
                elif route.slot:
                    info["route_pool_idx"] = route.slot
        if self.gateways is not None and self.gateways.url:
            info["gateway_url"] = self.gateways.url
        info.update(extra)
        return info

    def info_frame(self) -> bytes:
        """The route INFO as a reload sends it to every route (no pool place)."""
        return route_info_frame(self.route_info())

    def connect_frame(self, url: str) -> bytes:
        """The CONNECT a dialed route sends first; the URL's user and password go in it."""
        connect: dict[str, Any] = {"echo": True, "verbose": False, "pedantic": False}
        parsed = urlparse(url)
        if parsed.username:
            connect["user"] = unquote(parsed.username)
            connect["pass"] = unquote(parsed.password or "")
        elif self.opts.username:
            connect["user"] = self.opts.username
            connect["pass"] = self.opts.password
        connect["tls_required"] = self.tls is not None
        connect["headers"] = not self.server.options.no_header_support
        connect["name"] = self.server.server_id
        connect["cluster"] = self.cluster_name
        if self.dynamic:
            connect["cluster_dynamic"] = True
        connect["lnoc"] = True
        return b"CONNECT " + go_json_bytes(connect) + b"\r\n"

    def tls_server_name(self, url: str) -> str:
        """The name a dialed TLS route checks the peer's certificate against: the URL's host,
        or for an IP the first host name among the configured routes, if any."""
        return server_name(_host_port(url)[0], self._tls_name)

    def authorized(self, connect: dict[str, Any]) -> bool:
        """The cluster's one user (`authorization { user, password }`), if any."""
        if not self.opts.username:
            return True
        return (
            connect.get("user") == self.opts.username and connect.get("pass") == self.opts.password
        )

    def adopt_name(self, name: str) -> None:
        """A dynamic (generated) cluster name takes a configured peer's name."""
        self.cluster_name = name
        self.dynamic = False
        self.server.cluster_name = name

    # -- routes come and go ----------------------------------------------------------------------

    @property
    def routes(self) -> dict[str, Route]:
        """Each peer's connection carrying the global account (its only one without a pool)."""
        return {pid: peer.conn_for(b"$G") or peer.first for pid, peer in self.peers.items()}

    def connections(self) -> list[Route]:
        """Every registered route connection, pooled and pinned."""
        return [route for peer in self.peers.values() for route in peer.slots.values()]

    def register(self, route: Route) -> bool:
        """Keep `route` as the connection of its slot to its peer; False for a duplicate (the
        first one registered stays, as in nats-server, and reconnects if it closes)."""
        peer = self.peers.get(route.remote_id)
        new = peer is None
        if peer is None:
            peer_pool = int(route.remote_info.get("route_pool_size") or 0)
            # Effective pool size: the larger of both sides', none if either does not pool.
            size = max(self.pool_size, peer_pool) if self.pool_size and peer_pool > 0 else 0
            peer = Peer(route.remote_id, size, self.pinned_accounts if size else frozenset())
            peer.url = route.url or self._peer_url(route)
        slot = route.slot
        if isinstance(slot, bytes):
            if not peer.pool_size:
                return False
            peer.pinned = peer.pinned | {slot}
        elif not peer.pool_size:
            slot = 0
        elif not 0 <= slot < peer.pool_size:
            return False
        existing = peer.slots.get(slot)
        if existing is not None:
            existing.retry = True
            if route.solicited and not existing.solicited:
                existing.solicited = True
                existing.url = route.url
            if route.configured:
                existing.configured = True
                existing.url = route.url
            return False
        route.slot = slot
        peer.slots[slot] = route
        if new:
            self.peers[route.remote_id] = peer
            if route.remote_info.get("gossip_mode") != 1:
                self._forward_new_route(route)
            self._update_connect_urls()
            for hook in self.server.peer_hooks:
                hook(route.remote_id, route.remote_info)
            gateway_url = str(route.remote_info.get("gateway_url") or "")
            if self.gateways is not None and gateway_url:
                self.gateways.route_gateway_url(gateway_url, True)
        return True

    def pool_problem(self, route: Route) -> str:
        """Why the pool place a peer's INFO gives `route` cannot be (nats-server's addRoute
        checks, its texts), or "" when it can."""
        info = route.remote_info
        peer_pool = int(info.get("route_pool_size") or 0)
        if peer_pool <= 0 or not self.pool_size:
            return ""  # one connection carrying every account
        index = int(info.get("route_pool_idx") or 0)
        if route.solicited:
            # The accepting side never names an index.
            return f"Route pool index should not be set but is set to {index}" if index else ""
        if isinstance(route.slot, bytes):
            if route.slot in self.pinned_accounts:
                return ""
            return f'No route for account "{route.slot.decode(errors="replace")}"'
        if not 0 <= index < max(self.pool_size, peer_pool):
            return f"Invalid route pool index: {index} - pool size is {peer_pool}"
        return ""

    def fill_pool(self, route: Route) -> None:
        """After a connection we dialed registers: dial the peer's next missing slot (pool
        indexes first, then the pinned accounts), one at a time, as nats-server does."""
        peer = self.peers.get(route.remote_id)
        if peer is None or not peer.pool_size or not self.running:
            return
        for slot in peer.wanted():
            if slot not in peer.slots:
                url = route.url or peer.url
                self.spawn(self._dial_slot(peer, slot, url))
                return

    def pooled_peers(self) -> list[Peer]:
        return [peer for peer in self.peers.values() if peer.pool_size]

    def dial_pinned(self, peer: Peer, account: bytes) -> None:
        """Open `account`'s own connection to `peer` (after a reload pinned it)."""
        if account not in peer.slots and self.running:
            self.spawn(self._dial_slot(peer, account, peer.url))

    async def _dial_slot(self, peer: Peer, slot: Slot, url: str, delay: float = 0.0) -> None:
        if delay:
            await asyncio.sleep(delay)
        if not self.running or self.peers.get(peer.remote_id) is not peer or slot in peer.slots:
            return
        await self._dial(url, False, 1, slot)

    def route_closed(self, route: Route) -> None:
        self.connecting.discard(route)
        peer = self.peers.get(route.remote_id)
        if peer is None or peer.slots.get(route.slot) is not route:
            return
        del peer.slots[route.slot]
        if peer.slots:
            # The peer is still there: this slot is dialed again by the side that dialed it.
            if self.running and (route.solicited or route.retry):
                self.spawn(self._dial_slot(peer, route.slot, route.url or peer.url, RETRY_DELAY))
            return
        del self.peers[route.remote_id]
        self._update_connect_urls()
        for hook in self.server.peer_hooks:
            hook(route.remote_id, None)
        gateway_url = str(route.remote_info.get("gateway_url") or "")
        if self.gateways is not None and gateway_url:
            self.gateways.route_gateway_url(gateway_url, False)
        if self.running and not route.configured and (route.solicited or route.retry):
            self.spawn(self._dial_implicit(peer.url, retry=True))

    def _peer_url(self, route: Route) -> str:
        info = route.remote_info
        ip = str(info.get("ip") or "")
        if ip:
            return ip
        host = str(info.get("host") or "")
        if not host or host in WILDCARD_HOSTS:
            host = route.host
        return f"nats-route://{join_host_port(host, int(info.get('port') or 0))}/"

    def _forward_new_route(self, route: Route) -> None:
        """Tell the other peers about a new peer so they dial it (gossip): its INFO on each
        peer's first connection, and a copy naming the account on each pinned connection
        (nats-server's forwardNewRouteInfoToKnownServers: a Go peer dials the pinned
        connections, `$SYS` first of all, only when told so)."""
        others = [peer for pid, peer in self.peers.items() if pid != route.remote_id]
        if not others:
            return
        info = dict(route.remote_info)
        for key in ("nonce", "route_account", "route_pool_idx"):
            info.pop(key, None)
        info["ip"] = self._peer_url(route)
        info["gossip_mode"] = 1
        frame = b"INFO " + go_json_bytes(info) + b"\r\n"
        for peer in others:
            peer.first.send_now(frame)
            for slot, conn in list(peer.slots.items()):
                if isinstance(slot, bytes):
                    pinned = {**info, "route_account": slot.decode()}
                    conn.send_now(b"INFO " + go_json_bytes(pinned) + b"\r\n")

    def gossip(self, route: Route, info: dict[str, Any]) -> None:
        """An INFO about another server: dial it unless we know it already."""
        server_id = str(info.get("server_id") or "")
        if server_id == self.server.server_id or server_id in self.peers:
            return
        url = str(info.get("ip") or "")
        if not url:
            url = (
                f"nats-route://{join_host_port(str(info.get('host')), int(info.get('port') or 0))}/"
            )
        if url in self.self_urls or url in self._dialing:
            return
        self.spawn(self._dial_implicit(url, retry=False))

    def broadcast_info(self, frame: bytes) -> None:
        """An INFO for every peer (on its first connection)."""
        for peer in self.peers.values():
            peer.first.send_now(frame)

    def peer_update(self, route: Route, info: dict[str, Any]) -> None:
        """An INFO from a registered peer about itself: lame duck, new client URLs, its
        route permissions changed by a reload."""
        if not info.get("ldm") and info.get("export") != route.remote_info.get("export"):
            export_changed(self, route, route.remote_info.get("export"), info.get("export"))
        route.remote_info.update(info)
        for key in ("import", "export"):
            if key not in info:
                route.remote_info.pop(key, None)
        self._update_connect_urls()

    def _update_connect_urls(self) -> None:
        server = self.server
        if self.opts.no_advertise:
            return
        urls = list(self.client_urls())
        for peer in self.peers.values():
            info = peer.first.remote_info
            if info.get("ldm"):
                continue
            for url in info.get("connect_urls") or ():
                if url not in urls:
                    urls.append(url)
        if len(urls) <= 1 and not server.connect_urls:
            # nats-server's client INFO carries connect_urls from the first peer on (and
            # then its own URL even when the peers are gone).
            return
        if urls != server.connect_urls:
            server.connect_urls = urls
            if server.running:
                server.send_async_info()

    def _announce_lame_duck(self) -> None:
        for route in self.connections():
            route.send_now(route_info_frame(self.route_info(route=route, ldm=True)))

    # -- dialing ---------------------------------------------------------------------------------

    async def _dial(self, url: str, configured: bool, attempt: int, slot: Slot = 0) -> Route | None:
        host, port = _host_port(url)
        route_class = self._route_class
        try:
            _, protocol = await self.server.loop.create_connection(
                lambda: route_class(
                    self, solicited=True, url=url, configured=configured, slot=slot
                ),
                host,
                port,
            )
        except OSError as e:
            reason = e.strerror or str(e)
            if isinstance(e, ConnectionRefusedError):
                reason = "connection refused"
            log.error(
                "Error trying to connect to route (attempt %d): dial tcp %s: connect: %s",
                attempt,
                join_host_port(host, port),
                reason.lower(),
            )
            return None
        return protocol

    def _route_for_url(self, url: str) -> Route | None:
        host, port = _host_port(url)
        for route in self.connections():
            if route.url == url:
                return route
            info = route.remote_info
            if info.get("port") == port and info.get("host") in (host, route.host):
                return route
        return None

    async def _keep_route(self, url: str) -> None:
        """An explicit route: connected, and dialed again a second after it closes, forever
        (unless it leads to ourselves)."""
        delays = RetryDelays(self.opts.connect_backoff)
        attempt = 0
        while self.running and url in self._explicit:
            if url in self.self_urls:
                return
            route = self._route_for_url(url)
            if route is not None and not route.configured:
                # The peer dialed first: nats-server's own dial would be the duplicate, and
                # the routes kept become the configured ones that reconnect.
                peer = self.peers.get(route.remote_id)
                for conn in peer.slots.values() if peer is not None else (route,):
                    conn.configured = conn.solicited = True
                    conn.url = url
            if route is None:
                attempt += 1
                route = await self._dial(url, True, attempt)
                if route is None:
                    await asyncio.sleep(delays.next())
                    continue
            attempt = 0
            delays.reset()
            await route.done
            await asyncio.sleep(_retry_delay())

    async def _dial_implicit(self, url: str, retry: bool) -> None:
        """A route learned by gossip (or kept over a duplicate): `connect_retries` + 1
        attempts."""
        self._dialing.add(url)
        delays = RetryDelays(self.opts.connect_backoff)
        try:
            for attempt in range(1, self.opts.connect_retries + 2):
                if attempt > 1:
                    await asyncio.sleep(delays.next())
                elif retry:
                    await asyncio.sleep(_retry_delay())
                if not self.running or url in self.self_urls or self._route_for_url(url):
                    return
                route = await self._dial(url, False, attempt)
                if route is not None:
                    return
        finally:
            self._dialing.discard(url)

    # -- local interest --------------------------------------------------------------------------

    def _watch(self, account: Account) -> None:
        counts = self._interest.setdefault(account.name, {})
        name = account.name.encode()
        server = self.server

        leaf_counts = self._leaf_interest.setdefault(account.name, {})

        def changed(sub: Subscription, delta: int) -> None:
            origin = b""
            if sub.remote:
                if not sub.leaf or sub.from_hub:
                    # A route's interest is never announced to another route, nor what our
                    # own hub tells us; a leaf that dialed us counts as local (nats-server's
                    # processLeafSub updates the route map for it).
                    return
                origin = sub.client.remote_cluster.encode()  # type: ignore[attr-defined]
            if origin:
                key = (sub.subject_bytes, sub.queue_bytes, origin)
                old = leaf_counts.get(key, 0)
                if old + delta > 0:
                    leaf_counts[key] = old + delta
                else:
                    leaf_counts.pop(key, None)
            else:
                old = count_interest(counts, sub, delta)
            n = old + delta
            peers = self.peers
            if not peers:
                return
            if not importable(self.imports, sub.subject_bytes):
                return  # not for us to import: the peers are not told (importFilter)
            subject, queue = sub.subject_bytes, sub.queue_bytes
            if queue:
                plus = n > 0
            elif old <= 0 < n:
                plus = True
            elif n <= 0 < old:
                plus = False
            else:
                return
            frames: dict[tuple[bytes, bool, bool], bytes] = {}  # by what the frame depends on
            for peer in peers.values():
                # The account's own connection to the peer, its pool slot or the one pinned
                # to it (ops without the account): the one the peer sends its messages for
                # this account on, so that interest and the requests that need it (a reply
                # subject) keep their order, as between nats-server nodes.
                route = peer.conn_for(name)
                if route is None:
                    continue  # told when that connection registers (interest_frames)
                wire = b"" if route.pinned_account else name
                shape = (wire, route.lnoc, route.lnocu)
                frame = frames.get(shape)
                if frame is None:
                    frame = frames[shape] = interest_frame(
                        route, wire, subject, queue, origin, n if plus else 0
                    )
                route.outbound.push(frame)
            server.flush_soon()

        for sub in account.sublist.all():
            changed(sub, 1)
        account.sublist.add_watcher(changed)

    def _carried_accounts(
        self, route: Route, only: bytes | None, table: dict[str, _T]
    ) -> Iterator[tuple[bytes, _T]]:
        """The entries of `table` (by account name) for the accounts `route` carries (or for
        account `only`), each with the account as it goes on that connection (none on a
        pinned one)."""
        peer = self.peers.get(route.remote_id)
        for account, counts in table.items():
            name = account.encode()
            if only is not None and name != only:
                continue
            if peer is not None and not peer.carries(route, name):
                continue
            yield (b"" if route.pinned_account else name), counts

    def carried_interest(
        self, route: Route, only: bytes | None = None
    ) -> Iterator[tuple[bytes, bytes, bytes, int]]:
        """The local interest of the accounts `route` carries (or of account `only`): the
        account as it goes on that connection (none on a pinned one), subject, queue, count."""
        for wire, counts in self._carried_accounts(route, only, self._interest):
            for (subject, queue), n in counts.items():
                yield wire, subject, queue, n

    def interest_frames(self, route: Route, only: bytes | None = None) -> bytes:
        """RS+ (LS+ for leaf nodes' interest) for the local interest `route` carries that this
        server may import: what a new connection is told after the handshake."""
        imports = self.imports
        plain = b"".join(
            rs_plus_frame(wire, subject, queue, n)
            for wire, subject, queue, n in self.carried_interest(route, only)
            if importable(imports, subject)
        )
        return plain + b"".join(
            interest_frame(route, wire, subject, queue, origin, n)
            for wire, counts in self._carried_accounts(route, only, self._leaf_interest)
            for (subject, queue, origin), n in counts.items()
            if importable(imports, subject)
        )

    # -- monitoring ------------------------------------------------------------------------------

    @property
    def num_routes(self) -> int:
        return len(self.connections())


def interest_frame(
    route: Route, wire: bytes, subject: bytes, queue: bytes, origin: bytes, n: int
) -> bytes:
    """RS+ (`n` > 0) or RS- for `route`; LS+/LS- for the interest of a leaf node of cluster
    `origin` when the peer announced `lnoc` (nats-server's addRouteSubOrUnsubProtoToBuf)."""
    if origin and route.lnoc:
        if n > 0:
            return ls_plus_frame(origin, wire, subject, queue, n)
        return ls_minus_frame(origin if route.lnocu else b"", wire, subject, queue)
    return rs_plus_frame(wire, subject, queue, n) if n > 0 else rs_minus_frame(wire, subject, queue)


def non_local_ips() -> list[str]:
    """The global unicast addresses of this host (nats-server's getNonLocalIPsIfHostIsIPAny);
    loopback when there is none."""
    found: list[str] = []
    with contextlib.suppress(OSError):
        for family, _, _, _, addr in socket.getaddrinfo(socket.gethostname(), None):
            ip = str(addr[0])
            if family not in (socket.AF_INET, socket.AF_INET6) or ip in found:
                continue
            if ip.startswith("127.") or ip == "::1" or ip.startswith("fe80"):
                continue
            found.append(ip)
    return found or ["127.0.0.1"]
