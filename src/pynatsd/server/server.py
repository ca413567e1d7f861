"""The server: listener, clients, accounts, INFO, lifecycle (start, lame duck, shutdown).

Corresponds to nats-server's `server/server.go`. Single-threaded asyncio: every client's reads are
processed in `Client.data_received`, and the frames they produce are written once per read by
`flush_dirty`.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import os
import platform
import random
import sys
import time
from collections import deque
from typing import TYPE_CHECKING, Any

import nkeys

from pynatsd.auth import Authenticator
from pynatsd.logger import log
from pynatsd.options import DEFAULT_HOST, Options
from pynatsd.protocol.errors import CloseReason
from pynatsd.protocol.events import Pub
from pynatsd.protocol.frames import info_frame
from pynatsd.server.accounts import (
    GLOBAL_ACCOUNT,
    SYSTEM_ACCOUNT,
    Account,
    install_mappings,
    wire_imports,
)
from pynatsd.server.client import Client
from pynatsd.server.delivery import Stats, deliver_stored, fan_out
from pynatsd.server.listen import bind, bound_port, go_quote, join_host_port
from pynatsd.server.outbound import Outbound, Producer, flush_all
from pynatsd.server.session import ClientSession
from pynatsd.server.tls_client import ConnectionRate, TLSClient
from pynatsd.tls import server_context
from pynatsd.version import COMPAT_VERSION, JS_API_LEVEL, PROTO_VERSION, __version__

if TYPE_CHECKING:
    from collections.abc import Callable

    from pynatsd.server.msgtrace import MsgTrace
    from pynatsd.server.parts import ServerPart

_PREFIX_CURVE = 23 << 3

# The INFO fields a client may get, in the order nats-server's Info struct writes them.
_INFO_FIELDS = (
    "server_id",
    "server_name",
    "version",
    "proto",
    "git_commit",
    "go",
    "host",
    "port",
    "headers",
    "auth_required",
    "tls_required",
    "tls_verify",
    "tls_available",
    "max_payload",
    "jetstream",
    "client_id",
    "client_ip",
    "nonce",
    "cluster",
    "domain",
    "connect_urls",
    "ws_connect_urls",
    "ldm",
    "connect_info",
    "remote_account",
    "acc_is_sys",
    "api_lvl",
    "xkey",
)


def _new_server_id() -> str:
    seed = nkeys.encode_seed(os.urandom(32), nkeys.PREFIX_BYTE_SERVER)
    key = nkeys.from_seed(bytearray(seed))
    return str(key.public_key.decode())


def _new_xkey() -> str:
    raw = bytes([_PREFIX_CURVE]) + os.urandom(32)
    crc = nkeys.crc16_checksum(raw)
    return base64.b32encode(raw + bytes(crc)).decode().rstrip("=")


class Server:
    """A NATS server. Use `await server.start()` / `await server.shutdown()`, or
    `async with Server(port=0) as server:` (see `pynatsd.embedded`)."""

    def __init__(self, options: Options | None = None) -> None:
        self.options = options or Options()
        self.server_id = _new_server_id()
        self.xkey = _new_xkey()
        self.server_name = self.options.server_name or self.server_id
        self.global_account = Account(GLOBAL_ACCOUNT, cache=not self.options.disable_sublist_cache)
        self.system_account = Account(SYSTEM_ACCOUNT)
        self.accounts: dict[str, Account] = {
            GLOBAL_ACCOUNT: self.global_account,
            SYSTEM_ACCOUNT: self.system_account,
        }
        # Called with each account made after start-up (operator mode makes an account as its
        # first client connects): the parts that serve every account (JetStream, the system
        # services) set it up.
        self.account_added_hooks: list[Callable[[Account], None]] = []
        self.authenticator = Authenticator(self.options)
        self._configure_accounts()
        self.clients: dict[int, Client] = {}
        self.closed_clients: deque[dict[str, Any]] = deque(
            maxlen=max(self.options.max_closed_clients, 0)
        )
        # Outbound queues with frames written during the current read (`flush_dirty`).
        self.dirty: list[Outbound] = []
        # The client whose read is being processed: the producer to stall if a receiver is full.
        self.producer: Producer | None = None
        self.stall_producers = not self.options.no_fast_producer_stall
        self.stalled_clients = 0
        self._flush_scheduled = False
        self._cid = 0
        self.loop: asyncio.AbstractEventLoop = None  # type: ignore[assignment]
        self._listener: asyncio.AbstractServer | None = None
        self._ws_listener: asyncio.Server | None = None
        self.websocket_port = 0
        opts = self.options
        # nats-server's WebSocket host defaults to 0.0.0.0, not to the client host.
        self.websocket_host = opts.websocket_host or DEFAULT_HOST
        self.websocket_tls = bool(not opts.websocket_no_tls and opts.websocket_tls_cert)
        # Optional parts attached by the composition root (pynatsd.assembly), by name, in the
        # order they start.
        self.parts: dict[str, ServerPart] = {}
        # Called with each client as it closes (the monitor keeps /connz?state=closed with it).
        self.client_closed_hooks: list[Callable[[Client], None]] = []
        # Called with an account whose local leaf connections changed (the system services
        # publish its connection counts, as nats-server's accConnsUpdate).
        self.account_conns_hooks: list[Callable[[Account], None]] = []
        # Called with the account a leaf connection was just registered with (JetStream sets
        # up again the mirrors and sources that lost their origin: checkInternalSyncConsumers).
        self.leaf_registered_hooks: list[Callable[[Account], None]] = []
        # Set by the leaf nodes part: makes a leaf connection of a websocket upgrade for the
        # `/leafnode` path (None: such an upgrade is a client, as without leaf nodes).
        self.websocket_leaf: Callable[[], asyncio.Protocol] | None = None
        # Set by the MQTT part: an MQTT connection for a websocket upgrade on `/mqtt` (None:
        # such an upgrade is refused with 404, as nats-server without MQTT).
        self.websocket_mqtt: Callable[[], asyncio.Protocol] | None = None
        # Run once the server is ready (its client port known), as nats-server starts its
        # routes after the client listener.
        self.ready_hooks: list[Callable[[], None]] = []
        # Run when lame duck mode starts, before clients are told (the cluster tells routes).
        self.lame_duck_hooks: list[Callable[[], None]] = []
        # Called by the cluster part with another server's id and its route INFO when it joins
        # the cluster, and with None when the last route to it closes (JetStream learns of the
        # other JetStream servers this way).
        self.peer_hooks: list[Callable[[str, dict[str, Any] | None], None]] = []
        # Set by the cluster part: the cluster's name and every node's client URL (own first),
        # which client INFOs carry (nats-server's info.Cluster and info.ClientConnectURLs).
        self.cluster_name = ""
        self.connect_urls: list[str] = []
        self.accepting = False
        self.lame_duck = False
        self.running = False
        self.start_time = time.time()
        self.config_load_time = self.start_time
        self.port = self.options.port
        self.http_port = 0
        self._shutdown_done: asyncio.Event | None = None
        self._ports_file = ""
        # Totals of closed connections, so /varz counts survive disconnects.
        self.total_connections = 0
        self.closed_stats = Stats()
        self.slow_consumers = 0
        self.stale_connections = 0
        self.http_req_stats: dict[str, int] = {}
        self.config_digest = ""
        self.tls_context = server_context(self.options)
        limit = self.options.tls_rate_limit
        self.tls_rate = ConnectionRate(limit) if self.tls_context and limit > 0 else None
        self._info_base: dict[str, Any] = {}

    # -- configuration-derived state -------------------------------------------------------------

    @property
    def auth_required(self) -> bool:
        return self.authenticator.auth_required

    def _configure_accounts(self) -> None:
        """Accounts from the configuration, then their imports (which need the exporters)."""
        cache = not self.options.disable_sublist_cache
        added: list[Account] = []
        for name, config in self.options.accounts.items():
            account = self.accounts.get(name)
            if account is None:
                account = self.accounts[name] = Account(name, cache=cache)
                added.append(account)
            account.config = config
        # `system_account: NAME` makes a configured account the one events go to.
        system_name = self.options.system_account
        if system_name and system_name in self.accounts:
            self.system_account = self.accounts[system_name]
        elif system_name and self.authenticator.lookup_account(system_name) is not None:
            # Operator mode: the operator's system account, from its JWT.
            self.system_account = self.get_account(system_name)
        install_mappings(self)
        wire_imports(self)
        # An account a reload adds (the parts' hooks are empty before start).
        for account in added:
            for hook in self.account_added_hooks:
                hook(account)

    def get_account(self, name: str) -> Account:
        """The account a client binds to; operator-mode accounts are made on first use."""
        account = self.accounts.get(name)
        if account is None:
            account = self.accounts[name] = Account(
                name, cache=not self.options.disable_sublist_cache
            )
            account.config = self.authenticator.lookup_account(name)
            if account.config is not None:
                account.set_mappings(account.config.mappings)
            wire_imports(self)
            for hook in self.account_added_hooks:
                hook(account)
        return account

    def _build_info_base(self) -> None:
        """nats-server's `s.info`: the fields every INFO to a client starts from."""
        opts = self.options
        tls = self.tls_context is not None
        info: dict[str, Any] = {
            "server_id": self.server_id,
            "server_name": self.server_name,
            "version": COMPAT_VERSION,
            "proto": PROTO_VERSION,
            "git_commit": f"pynatsd-{__version__}",
            "go": f"python{platform.python_version()}",
            "host": opts.host,
            "port": self.port,
            "headers": not opts.no_header_support,
        }
        if self.auth_required:
            info["auth_required"] = True
        # allow_non_tls: TLS is offered, not required (the client's first byte decides).
        if tls and not opts.allow_non_tls:
            info["tls_required"] = True
        if tls and opts.tls_verify:
            info["tls_verify"] = True
        if tls and opts.allow_non_tls:
            info["tls_available"] = True
        info["max_payload"] = opts.max_payload
        if opts.jetstream:
            info["jetstream"] = True
        if opts.jetstream_domain:
            info["domain"] = opts.jetstream_domain
        self._info_base = info

    def rebuild_info(self) -> None:
        """After a reload: INFO reflects the new options."""
        self._build_info_base()

    def add_part(self, part: ServerPart) -> None:
        """Attach an optional part (before `start`)."""
        self.parts[part.name] = part

    def reload_auth(self) -> None:
        """After a reload (clients are then checked and bound again): the new credentials, and
        every known account's configuration looked up anew, so an account dropped from the
        file keeps no limits, permissions or imports (in operator mode: from its JWT now)."""
        self.authenticator = Authenticator(self.options)
        for name, account in self.accounts.items():
            account.config = self.authenticator.lookup_account(name)
        self._configure_accounts()

    def client_info(self, client: ClientSession) -> dict[str, Any]:
        """The INFO that greets a new connection (nats-server's createClient)."""
        return self._client_info(client, greeting=True)

    def async_info(
        self, client: ClientSession, *, connect_info: bool = False, ldm: bool = False
    ) -> dict[str, Any]:
        """An INFO sent later: after the first PONG (`connect_info`, with the account bound to)
        or as an update (`ldm`: lame duck mode)."""
        return self._client_info(client, greeting=False, connect_info=connect_info, ldm=ldm)

    def _client_info(
        self,
        client: ClientSession,
        *,
        greeting: bool,
        connect_info: bool = False,
        ldm: bool = False,
    ) -> dict[str, Any]:
        """nats-server's generateClientInfoJSON over a copy of `s.info`, in its field order.

        Only the greeting drops `auth_required` for a `no_auth_user` and carries the nonce;
        the later INFOs are the server's own fields as they are, as nats-server sends them."""
        opts = self.options
        info = dict(self._info_base)
        if greeting:
            if opts.no_auth_user:
                info.pop("auth_required", None)
            if opts.tls_handshake_first and self.tls_context is not None:
                # TLS first always means TLS, allow_non_tls or not.
                info["tls_required"] = True
        # The adapter's flag (`Client.websocket`); a bare session is never a WebSocket.
        if getattr(client, "websocket", False):
            # A WebSocket client is told about the WebSocket listener.
            info["host"] = self.websocket_host
            info["port"] = self.websocket_port
            info.pop("tls_required", None)
            info.pop("tls_available", None)
            if self.websocket_tls:
                info["tls_required"] = info["tls_available"] = True
        info["max_payload"] = client.parser.max_payload
        info["client_id"] = client.cid
        info["client_ip"] = client.host
        if greeting and client.nonce:
            info["nonce"] = client.nonce
        if self.cluster_name:
            info["cluster"] = self.cluster_name
        if self.connect_urls:
            info["connect_urls"] = list(self.connect_urls)
        if ldm:
            info["ldm"] = True
        if connect_info:
            info["connect_info"] = True
            info["remote_account"] = client.account.name
            if client.account is self.system_account:
                info["acc_is_sys"] = True
        info["api_lvl"] = JS_API_LEVEL
        info["xkey"] = self.xkey
        return {key: info[key] for key in _INFO_FIELDS if key in info}

    def send_async_info(self, *, ldm: bool = False) -> None:
        """An INFO update to every client that takes them (nats-server's
        sendAsyncInfoToClients): its CONNECT said protocol 1 and its first PONG has gone out
        (a client not that far yet learns the state from its connect_info INFO)."""
        for client in list(self.clients.values()):
            if client.protocol >= 1 and client.first_pong_sent and not client.closed:
                client.send_now(info_frame(self.async_info(client, ldm=ldm)))

    # -- clients ---------------------------------------------------------------------------------

    def next_cid(self) -> int:
        self._cid += 1
        return self._cid

    def add_client(self, client: Client) -> None:
        self.clients[client.cid] = client
        self.total_connections += 1

    def remove_client(self, client: Client) -> None:
        if self.clients.pop(client.cid, None) is None:
            return
        self.closed_stats.add(client.stats)
        for hook in self.client_closed_hooks:
            hook(client)

    def publish_internal(
        self,
        account: Account,
        subject: str | bytes,
        reply: str = "",
        header: bytes = b"",
        data: bytes = b"",
        trace: MsgTrace | None = None,
    ) -> bool:
        """Publish as the server itself (API replies, acks, advisories, imports); True if
        delivered. The subject may come as the bytes it arrived in (a reply subject). An
        import passes on a traced message's trace (server/msgtrace.py)."""
        subj = subject if isinstance(subject, bytes) else subject.encode()
        result = account.sublist.match_bytes(subj)
        psubs = result.psubs
        if trace is not None:
            ev = Pub(subj, reply.encode(), header + data, len(header) if header else -1)
            delivered = bool(psubs or result.qsubs) and fan_out(None, result, ev, trace)
            self.flush_soon()
            return delivered
        if len(psubs) == 1 and not result.qsubs:
            # One receiver, an inbox most often (every reply and PubAck).
            delivered = deliver_stored(psubs[0], subj, reply.encode(), header, data)
        else:
            ev = Pub(subj, reply.encode(), header + data, len(header) if header else -1)
            delivered = bool(psubs or result.qsubs) and fan_out(None, result, ev)
        self.flush_soon()
        return delivered

    def flush_soon(self) -> None:
        """Write pending frames after the current callback, for work that happens outside a
        client's read (timers, storage callbacks)."""
        if self.dirty and not self._flush_scheduled:
            self._flush_scheduled = True
            self.loop.call_soon(self._scheduled_flush)

    def _scheduled_flush(self) -> None:
        self._flush_scheduled = False
        self.flush_dirty()

    def flush_dirty(self) -> None:
        dirty = self.dirty
        if not dirty:
            return
        self.dirty = []
        flush_all(dirty)

    def stats_slow_consumer(self) -> None:
        self.slow_consumers += 1

    def stats_stale_connection(self) -> None:
        self.stale_connections += 1

    def num_subscriptions(self) -> int:
        return sum(acc.sublist.count() for acc in self.accounts.values())

    # -- lifecycle -------------------------------------------------------------------------------

    @property
    def client_url(self) -> str:
        host = self.options.host
        if host in ("0.0.0.0", "::", ""):
            host = "127.0.0.1"
        return f"nats://{host}:{self.port}"

    async def start(self) -> None:
        """Start the parts and the listeners in nats-server's order (monitoring, JetStream,
        WebSocket, then the client port). A listener that cannot be opened raises
        `ListenError` (its text is nats-server's [FTL] line) and leaves nothing running."""
        self.loop = asyncio.get_running_loop()
        self._shutdown_done = asyncio.Event()
        opts = self.options
        self._log_banner()
        for warning in self.authenticator.startup_warnings():
            log.warning("%s", warning)
        started: list[ServerPart] = []
        try:
            for part in self.parts.values():
                await part.start()
                started.append(part)
            self.accepting = True
            self.running = True
            if opts.websocket_port:
                await self._start_websocket_listener()
            await self._start_client_listener()
        except BaseException:
            await self._abort_start(started)
            raise
        log.info("Listening for client connections on %s", join_host_port(opts.host, self.port))
        if self.tls_context is not None:
            # handshake_first without a fallback delay always requires the handshake.
            first_only = opts.tls_handshake_first and not opts.tls_handshake_first_fallback
            if opts.allow_non_tls and not first_only:
                log.info("TLS available for client connections")
            else:
                log.info("TLS required for client connections")
            if first_only:
                log.warning(
                    'Clients that are not using "TLS Handshake First" option will fail to connect'
                )
        self._write_pid_and_ports()
        log.info("Server is ready")
        for hook in self.ready_hooks:
            hook()

    async def _start_client_listener(self) -> None:
        opts = self.options
        host, port = opts.host, 0 if opts.port == -1 else opts.port
        sock = bind(
            host,
            port,
            lambda err: f"Error listening on port: {join_host_port(host, port)}, {go_quote(err)}",
            backlog=1024,
        )
        # The INFO needs the port; a client may connect as soon as the server serves.
        self.port = int(sock.getsockname()[1])
        self._build_info_base()
        # With TLS every connection drives its own handshake (INFO first or handshake_first).
        client_class = Client if self.tls_context is None else TLSClient
        try:
            self._listener = await self.loop.create_server(
                lambda: client_class(self),
                sock=sock,
                backlog=1024,
            )
        except BaseException:
            sock.close()
            raise

    async def _start_websocket_listener(self) -> None:
        from pynatsd.server.websocket import start_websocket_listener

        self._ws_listener = await start_websocket_listener(self)
        self.websocket_port = bound_port(self._ws_listener)
        scheme = "wss" if self.websocket_tls else "ws"
        log.info(
            "Listening for websocket clients on %s://%s:%d",
            scheme,
            self.websocket_host,
            self.websocket_port,
        )
        if not self.websocket_tls:
            log.warning("Websocket not configured with TLS. DO NOT USE IN PRODUCTION!")

    async def _abort_start(self, started: list[ServerPart]) -> None:
        """A failed start: close what was opened, quietly (nats-server exits on the spot)."""
        self.running = False
        self.accepting = False
        for listener in (self._listener, self._ws_listener):
            if listener is not None:
                listener.close()
        self._listener = self._ws_listener = None
        for part in reversed(started):
            with contextlib.suppress(Exception):
                await part.stop()
        if self._shutdown_done is not None:
            self._shutdown_done.set()

    def _log_banner(self) -> None:
        log.info("Starting nats-server")
        log.info("  Version:  %s (pynatsd %s)", COMPAT_VERSION, __version__)
        log.info("  Git:      [pynatsd]")
        log.info("  Name:     %s", self.server_name)
        log.info("  ID:       %s", self.server_id)
        if self.options.config_file:
            digest = f" ({self.config_digest})" if self.config_digest else ""
            log.info("Using configuration file: %s%s", self.options.config_file, digest)

    def _write_pid_and_ports(self) -> None:
        opts = self.options
        if opts.pid_file:
            with open(opts.pid_file, "w") as f:
                f.write(str(os.getpid()))
        if opts.ports_file_dir:
            exe = os.path.basename(sys.argv[0]) or "pynatsd"
            path = os.path.join(opts.ports_file_dir, f"{exe}_{os.getpid()}.ports")
            host = self.client_url.split("//", 1)[1].rsplit(":", 1)[0]
            ports: dict[str, list[str]] = {"nats": [f"nats://{host}:{self.port}"]}
            if self.http_port:
                scheme = "https" if opts.https_port else "http"
                ports["monitoring"] = [f"{scheme}://{host}:{self.http_port}"]
            if self.websocket_port:
                ports["websocket"] = [f"ws://{host}:{self.websocket_port}"]
            with open(path, "w") as f:
                json.dump(ports, f)
            self._ports_file = path

    async def shutdown(self) -> None:
        if not self.running:
            return
        self.running = False
        self.accepting = False
        log.info("Initiating Shutdown...")
        if self._listener is not None:
            self._listener.close()
        if self._ws_listener is not None:
            self._ws_listener.close()
            self._ws_listener = None
        for client in list(self.clients.values()):
            client.close(CloseReason.SERVER_SHUTDOWN)
        for part in reversed(self.parts.values()):
            await part.stop()
        if self._listener is not None:
            # Do not wait for the listener's connections: they are closed above.
            self._listener = None
        if self._ports_file:
            with contextlib.suppress(OSError):
                os.unlink(self._ports_file)
        if self.options.pid_file:
            with contextlib.suppress(OSError):
                os.unlink(self.options.pid_file)
        log.info("Server Exiting..")
        if self._shutdown_done is not None:
            self._shutdown_done.set()

    async def wait_for_shutdown(self) -> None:
        assert self._shutdown_done is not None
        await self._shutdown_done.wait()

    async def lame_duck_mode(self) -> None:
        """Stop accepting, tell clients (`ldm`), then close them over the lame duck duration
        and shut down, as nats-server does on SIGUSR2; with no client left, shut down now."""
        if self.lame_duck or not self.running:
            return
        log.info("Entering lame duck mode, stop accepting new clients")
        self.lame_duck = True
        self.accepting = False
        for hook in self.lame_duck_hooks:
            hook()
        for listener in (self._listener, self._ws_listener):
            if listener is not None:
                listener.close()
        if not self.clients:
            await self.shutdown()
            return
        self.send_async_info(ldm=True)
        opts = self.options
        await asyncio.sleep(opts.lame_duck_grace_period)
        clients = list(self.clients.values())
        if clients and self.running:
            log.info("Closing existing clients")
            # nats-server spreads the closes over what is left of the duration (at least a
            # second), at most a second apart, each pause a random half to whole interval.
            spread = opts.lame_duck_duration - opts.lame_duck_grace_period
            interval = min((spread if spread > 0 else 1.0) / len(clients), 1.0)
            for i, client in enumerate(clients):
                client.close(CloseReason.SERVER_SHUTDOWN)
                if i < len(clients) - 1:
                    await asyncio.sleep(random.uniform(interval / 2, interval))
                    if not self.running:
                        return
        await self.shutdown()

    async def __aenter__(self) -> Server:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.shutdown()
