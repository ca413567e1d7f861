"""The leaf nodes part: the leaf listener (the hub role), the remotes this server dials (the leaf
role), the hub-side authorization, and the interest each leaf connection is told.

Corresponds to the server half of nats-server's `server/leafnode.go`
(`startLeafNodeAcceptLoop`, `solicitLeafNodeRemotes`, `connectToRemoteLeafNode`,
`addLeafNodeConnection`, `initLeafNodeSmapAndSendSubs`, `updateLeafNodes`, `updateSmap`) and
`auth.go` (`isLeafNodeAuthorized`).

Interest rules, as nats-server's: a connection we dialed (we are the spoke) is told only local
interest (clients, internal subscriptions, leafs that dialed us); a connection that dialed us
(we are the hub) is told all of the account's interest but its own, including what routes and
other leafs bring. Each account has a `$LDS.<nuid>` subject told on every leaf connection;
seeing it come back means a loop (connection.py). Local interest is followed through each
account SubList's watcher (`add_watcher`), chained after the cluster's and the gateways'.
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
import ssl
from typing import TYPE_CHECKING, Any

import bcrypt

from pynatsd.auth.authenticator import is_bcrypt
from pynatsd.auth.keys import decode_signature, new_nonce, verify_signature
from pynatsd.cluster.link import LinkListener
from pynatsd.config.leafnodes import is_websocket_url, remote_host_port, url_host
from pynatsd.leafnode.connection import Leaf
from pynatsd.leafnode.protocol import ls_minus_frame, ls_plus_frame
from pynatsd.leafnode.websocket import UPGRADE_WAIT, LeafWebSocket, upgrade_uri
from pynatsd.logger import log
from pynatsd.protocol.errors import CloseReason
from pynatsd.server.delivery import enable_remote_delivery
from pynatsd.server.listen import join_host_port
from pynatsd.tls import TLSConfigError, client_context, server_context
from pynatsd.version import COMPAT_VERSION, JS_API_LEVEL

if TYPE_CHECKING:
    from pynatsd.options import LeafNodeOptions, RemoteLeafOptions
    from pynatsd.server.accounts import Account
    from pynatsd.server.server import Server
    from pynatsd.server.subscription import Subscription

LEAF_PROTO = 1  # nats-server's leaf INFO `proto`


class LeafNodes(LinkListener[Leaf]):
    """The `leafnodes` part of a server."""

    name = "leafnodes"

    def __init__(self, server: Server) -> None:
        super().__init__(server)
        opts = server.options.leafnodes
        assert opts is not None
        self.opts: LeafNodeOptions = opts
        self.host = opts.host
        self.leafs: dict[int, Leaf] = {}  # registered ones, by connection id
        self._lds: dict[str, bytes] = {}  # account -> its loop detection subject
        # The listener's TLS (leafs upgrade after the INFO); a bad block fails the start.
        self.tls_context = server_context(opts.tls) if opts.tls is not None else None
        self._remote_contexts: dict[int, ssl.SSLContext] = {}
        self._watched: set[str] = set()

    # -- the part --------------------------------------------------------------------------------

    async def start(self) -> None:
        opts = self.opts
        if opts.port != 0:
            self.bind_port(opts.host, opts.port, "leafnode port")
        self.running = True
        enable_remote_delivery()
        server = self.server
        for account in list(server.accounts.values()):
            self._watch(account)
        server.account_added_hooks.append(self._watch)
        server.websocket_leaf = self._websocket_leaf
        server.ready_hooks.append(lambda: self._spawn(self._serve()))

    async def _serve(self) -> None:
        if await self.serve(lambda: Leaf(self)):
            log.info(
                "Listening for leafnode connections on %s", join_host_port(self.host, self.port)
            )
        if not self.running:
            return
        for remote in self.opts.remotes:
            if not remote.disabled and remote.urls:
                self._spawn(self._keep_remote(remote))

    async def stop(self) -> None:
        self.stop_listening()
        if self.server.websocket_leaf == self._websocket_leaf:
            self.server.websocket_leaf = None
        for leaf in list(self.connecting):
            leaf.close(CloseReason.SERVER_SHUTDOWN)

    def _websocket_leaf(self) -> Leaf:
        """A leaf that dialed the websocket listener: TLS, if any, is the listener's."""
        leaf = Leaf(self)
        leaf.websocket = True
        return leaf

    # -- the leaf role: remotes ------------------------------------------------------------------

    async def _keep_remote(self, remote: RemoteLeafOptions) -> None:
        """A remote is dialed, URL after URL, and again `reconnect_interval` after its
        connection closes (30 s after a loop was detected), for as long as we run."""
        attempt = 0
        index = 0
        while self.running:
            url = remote.urls[index % len(remote.urls)]
            index += 1
            attempt += 1
            leaf = await self._dial(remote, url, attempt)
            delay = self.opts.reconnect_interval
            if leaf is not None:
                attempt = 0
                await leaf.done
                delay = leaf.reconnect_delay or delay
            await asyncio.sleep(delay)

    async def _dial(self, remote: RemoteLeafOptions, url: str, attempt: int) -> Leaf | None:
        host, port = remote_host_port(url)
        try:
            if is_websocket_url(url):
                return await self._dial_websocket(remote, url, host, port)
            _, protocol = await asyncio.wait_for(
                self.server.loop.create_connection(
                    lambda: Leaf(self, remote=remote, url=url), host, port
                ),
                self.opts.dial_timeout or None,
            )
        except (TimeoutError, OSError) as e:
            reason = "connection refused" if isinstance(e, ConnectionRefusedError) else str(e)
            log.error(
                'Error trying to connect as leafnode to remote server "%s" (attempt %d): '
                "dial tcp %s: connect: %s",
                join_host_port(host, port),
                attempt,
                join_host_port(host, port),
                (reason or "i/o timeout").lower(),
            )
            return None
        return protocol

    async def _dial_websocket(
        self, remote: RemoteLeafOptions, url: str, host: str, port: int
    ) -> Leaf | None:
        """A `ws://` or `wss://` remote: TLS first for `wss://`, then the upgrade; None when the
        hub refused it (logged)."""
        context = None
        if url.lower().startswith("wss"):
            context = self.remote_tls_context(remote)
            if context is None:
                return None
        leaf = Leaf(self, remote=remote, url=url)
        _, adapter = await asyncio.wait_for(
            self.server.loop.create_connection(
                lambda: LeafWebSocket(leaf, upgrade_uri(url, host, port)),
                host,
                port,
                ssl=context,
                server_hostname=host if context is not None else None,
            ),
            self.opts.dial_timeout or None,
        )
        try:
            upgraded = await asyncio.wait_for(adapter.upgraded, UPGRADE_WAIT)
        except TimeoutError:
            log.error("Error soliciting websocket connection: i/o timeout")
            upgraded = False
        if not upgraded:
            if adapter.raw is not None:
                adapter.raw.close()
            return None
        return leaf

    def local_account_name(self, remote: RemoteLeafOptions) -> str:
        return remote.local_account or "$G"

    def cluster_name(self) -> str:
        """The cluster a leaf CONNECT names: ours, or our server name without a cluster (as
        nats-server's leafNoCluster)."""
        return self.server.cluster_name or self.server.server_name

    # -- the hub role ----------------------------------------------------------------------------

    def new_nonce(self) -> str:
        return new_nonce()

    def remote_tls_context(self, remote: RemoteLeafOptions) -> ssl.SSLContext | None:
        """The context a remote dials with (made once; None when its files are unusable,
        which is logged)."""
        context = self._remote_contexts.get(id(remote))
        if context is None:
            try:
                context = client_context(
                    remote.tls_ca_cert, remote.tls_cert, remote.tls_key, remote.tls_insecure
                )
            except TLSConfigError as e:
                log.error("Leafnode remote TLS configuration error: %s", e)
                return None
            self._remote_contexts[id(remote)] = context
        return context

    def auth_timeout(self) -> float:
        return self.opts.auth_timeout or self.server.options.auth_timeout or 2.0

    def leaf_urls(self) -> list[str]:
        if self.opts.no_advertise:
            return []
        if self.opts.advertise:
            return [self.opts.advertise]
        return [join_host_port(self.host, self.port)]

    def leaf_info(self, leaf: Leaf, *, connect_info: bool = False) -> dict[str, Any]:
        """The INFO a leaf is sent on accept, and (`connect_info`) once its CONNECT is in."""
        server = self.server
        info: dict[str, Any] = {
            "server_id": server.server_id,
            "server_name": server.server_name,
            "version": COMPAT_VERSION,
            "proto": LEAF_PROTO,
            "host": self.host,
            "port": self.port,
            "headers": not server.options.no_header_support,
            "auth_required": True,
        }
        if self.tls_context is not None:
            info["tls_required"] = True
            if self.opts.tls is not None and self.opts.tls.tls_verify:
                info["tls_verify"] = True
        info["max_payload"] = server.options.max_payload
        if server.cluster_name:
            info["cluster"] = server.cluster_name
        info["client_id"] = leaf.lid
        if connect_info:
            info["connect_info"] = True
            info["remote_account"] = leaf.account.name
        else:
            info["nonce"] = leaf.nonce
        info["api_lvl"] = JS_API_LEVEL
        info["info_on_connect"] = True
        info["leafnode_urls"] = self.leaf_urls()
        return info

    def authorize(self, leaf: Leaf, connect: dict[str, Any]) -> str | None:
        """The account a leaf's CONNECT binds to, None when refused (nats-server's
        isLeafNodeAuthorized: the leafnodes block's single user, its nkey, its users, then the
        server's own client authorization)."""
        opts = self.opts
        user = connect.get("user") if isinstance(connect.get("user"), str) else ""
        password = connect.get("pass") if isinstance(connect.get("pass"), str) else ""
        if opts.username:
            if user != opts.username or not _password_matches(opts.password, str(password)):
                return None
            return opts.account or "$G"
        if opts.nkey:
            if connect.get("nkey") != opts.nkey:
                return None
            sig = decode_signature(str(connect.get("sig") or ""))
            if sig is None or not verify_signature(opts.nkey, leaf.nonce.encode(), sig):
                return None
            return opts.account or "$G"
        if opts.users:
            for entry in opts.users:
                if entry.username == user:
                    if not _password_matches(entry.password, str(password)):
                        return None
                    return entry.account or "$G"
            return None
        result = self.server.authenticator.check(connect, leaf.nonce, None, "LEAFNODE", leaf.host)
        if result is None:
            return None
        if result.method == "none" and opts.account:
            return opts.account
        return result.account

    # -- connections come and go -----------------------------------------------------------------

    def register(self, leaf: Leaf) -> None:
        self.leafs[leaf.lid] = leaf
        self._watch(leaf.account)

    def leaf_closed(self, leaf: Leaf) -> None:
        self.connecting.discard(leaf)
        self.leafs.pop(leaf.lid, None)

    def account_leafs(self, account: Account) -> list[Leaf]:
        return [leaf for leaf in self.leafs.values() if leaf.account is account]

    # -- interest --------------------------------------------------------------------------------

    def lds_subject(self, account: Account) -> bytes:
        subject = self._lds.get(account.name)
        if subject is None:
            subject = self._lds[account.name] = b"$LDS." + secrets.token_urlsafe(16).encode()
        return subject

    def _watch(self, account: Account) -> None:
        if account.name in self._watched:
            return
        self._watched.add(account.name)

        def changed(sub: Subscription, delta: int) -> None:
            if self.leafs:
                self.interest_changed(account, sub, delta * _count(sub))

        account.sublist.add_watcher(changed)

    def interest_changed(self, account: Account, sub: Subscription, n: int) -> None:
        """`sub`'s interest changed by `n` members: each leaf connection of the account that
        should hear of it is told when its count crosses zero (a queue group: at every
        change, with the new weight)."""
        touched = False
        for leaf in self.account_leafs(account):
            if leaf.closed or not _tells(leaf, sub):
                continue
            frame = _update_smap(leaf, sub, n)
            if frame:
                leaf.outbound.push(frame)
                touched = True
        if touched:
            self.server.flush_soon()

    def initial_interest(self, leaf: Leaf) -> bytes:
        """LS+ for what a new leaf connection is told: the account's interest by the rules
        above, and the account's loop detection subject."""
        smap = leaf.smap
        smap.clear()
        for sub in leaf.account.sublist.all():
            if _tells(leaf, sub):
                key = (sub.subject_bytes, sub.queue_bytes)
                smap[key] = smap.get(key, 0) + _count(sub)
        smap[(self.lds_subject(leaf.account), b"")] = 1
        return b"".join(ls_plus_frame(subject, queue, n) for (subject, queue), n in smap.items())

    # -- monitoring ------------------------------------------------------------------------------

    def leafz(self, subs: bool, account: str) -> list[dict[str, Any]]:
        found = []
        for leaf in sorted(self.leafs.values(), key=lambda leaf: leaf.lid):
            if account and leaf.account.name != account:
                continue
            entry: dict[str, Any] = {
                "id": leaf.lid,
                "name": leaf.remote_name,
                "is_spoke": leaf.is_spoke,
                "account": leaf.account.name,
                "ip": leaf.host,
                "port": leaf.port,
                "rtt": leaf.rtt,  # seconds: the monitor formats it as Go does
                "in_msgs": leaf.stats.in_msgs,
                "out_msgs": leaf.stats.out_msgs,
                "in_bytes": leaf.stats.in_bytes,
                "out_bytes": leaf.stats.out_bytes,
                "subscriptions": len(leaf.subs),
            }
            if subs:
                entry["subscriptions_list"] = [
                    sub.subject_bytes.decode(errors="replace") for sub in leaf.subs.values()
                ]
            entry["compression"] = "off"
            found.append(entry)
        return found

    def varz(self) -> dict[str, Any]:
        """The /varz `leaf` section."""
        section: dict[str, Any] = {}
        if self.port:
            section = {
                "host": self.host,
                "port": self.port,
                "auth_timeout": self.auth_timeout(),
                "tls_timeout": self.opts.tls_timeout or 2.0,
            }
            if self.tls_context is not None:
                section["tls_required"] = True
        remotes = [
            _varz_remote(self.local_account_name(remote), remote) for remote in self.opts.remotes
        ]
        if remotes:
            section["remotes"] = remotes
        return section


def _varz_remote(account: str, remote: RemoteLeafOptions) -> dict[str, Any]:
    """One remote in /varz (RemoteLeafOptsVarz): URLs as Go's url.URL.Host, no credentials."""
    entry: dict[str, Any] = {"local_account": account, "urls": [url_host(u) for u in remote.urls]}
    deny = {"exports": remote.deny_exports, "imports": remote.deny_imports}
    deny = {key: value for key, value in deny.items() if value}
    if deny:
        entry["deny"] = deny
    return entry


def _count(sub: Subscription) -> int:
    """How many members a subscription stands for in a leaf's interest."""
    if not sub.queue_bytes:
        return 1
    if sub.leaf:
        return int(sub.queue_weight)  # type: ignore[attr-defined]
    if sub.remote:
        return max(int(sub.weight), 1)  # type: ignore[attr-defined]
    return 1


def _tells(leaf: Leaf, sub: Subscription) -> bool:
    """nats-server's rules for what interest crosses a leaf connection."""
    owner = sub.client
    if owner is leaf:
        return False
    if not leaf.wants_interest(sub.subject_bytes):
        return False
    if leaf.is_spoke:
        # Only local interest, and that of leafs that dialed us, goes to our hub.
        return not sub.remote or (sub.leaf and not owner.is_spoke)  # type: ignore[attr-defined]
    if sub.leaf:
        return not leaf.same_origin(owner)  # type: ignore[arg-type]
    # A route's LS+: never back to a leaf of the cluster it stands for.
    origin: bytes = getattr(sub, "origin", b"")
    return not origin or origin.decode(errors="replace") != leaf.remote_cluster


def _update_smap(leaf: Leaf, sub: Subscription, n: int) -> bytes:
    key = (sub.subject_bytes, sub.queue_bytes)
    smap = leaf.smap
    old = smap.get(key, 0)
    if n < 0 and key not in smap:
        return b""
    new = old + n
    if new > 0:
        smap[key] = new
    else:
        smap.pop(key, None)
    queue = sub.queue_bytes
    if queue:
        return ls_plus_frame(key[0], queue, new) if new > 0 else ls_minus_frame(key[0], queue)
    if old <= 0 < new:
        return ls_plus_frame(key[0])
    if new <= 0 < old:
        return ls_minus_frame(key[0])
    return b""


def _password_matches(expected: str, given: str) -> bool:
    if is_bcrypt(expected):
        with contextlib.suppress(ValueError):
            return bool(bcrypt.checkpw(given.encode()[:72], expected.encode()))
        return False
    return secrets.compare_digest(expected.encode(), given.encode())
