"""System account services: the server answering requests on `$SYS.REQ.>`.

Corresponds to nats-server's `server/events.go`: `initEventTracking` (the subscriptions),
`zReq` (the `{"server": ..., "data": ...}` envelope and its errors), `statszReq`, `idzReq`,
`userInfoReq`, `connsRequest`, and `registerSystemImports` (the services every account reaches
in its own subject space). The data is the monitor's (`monitor/endpoints.py`), as nats-server's
handlers call its HTTP endpoints' functions.

- `$SYS.REQ.SERVER.PING.<NAME>` and `$SYS.REQ.SERVER.<server id>.<NAME>` in the system
  account: STATSZ, IDZ, VARZ, CONNZ, SUBSZ, JSZ, HEALTHZ, ACCOUNTZ, ROUTEZ, GATEWAYZ, LEAFZ,
  IPQUEUESZ, RAFTZ, PROFILEZ; `$SYS.REQ.SERVER.PING` is STATSZ.
- `$SYS.REQ.ACCOUNT.<account>.<NAME>` in the system account: SUBSZ, CONNZ, LEAFZ, JSZ, INFO,
  STATZ, CONNS; `$SYS.REQ.ACCOUNT.PING.STATZ` for every account with connections.
- In every other account (nats-server's service imports from the system account):
  `$SYS.REQ.USER.INFO` (the requester's user, account, permissions and expiry),
  `$SYS.REQ.ACCOUNT.PING.CONNZ` and `$SYS.REQ.SERVER.PING.CONNZ` (its own connections),
  `$SYS.REQ.ACCOUNT.PING.STATZ` (its own statistics). The system account answers
  `$SYS.REQ.USER.INFO` too.

A request's body, when there is one, is the JSON options of the endpoint plus the filters
every server applies (`server_name`, `host`, `cluster`, `tags`, `domain`, `exact_match`); a
server the filters leave out does not answer.
"""

from __future__ import annotations

import asyncio
import json
import secrets
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from pynatsd.gofmt import go_json, rfc3339, rfc3339_ns
from pynatsd.jetstream import jetstream_of
from pynatsd.leafnode import leafnodes_of
from pynatsd.monitor import endpoints, gatewayz
from pynatsd.monitor.endpoints import BadRequest
from pynatsd.monitor.leafz import leafz_of
from pynatsd.protocol.errors import CloseReason
from pynatsd.protocol.frames import info_frame
from pynatsd.server import events
from pynatsd.server.delivery import Stats
from pynatsd.server.events import CONNS_TYPE, server_info
from pynatsd.server.subscription import InternalClient, InternalSubscription

if TYPE_CHECKING:
    from pynatsd.options import Permissions, SubjectPermission
    from pynatsd.protocol.events import Pub
    from pynatsd.server.accounts import Account
    from pynatsd.server.client import Client
    from pynatsd.server.delivery import Receiver
    from pynatsd.server.server import Server

_MAX_UINT64 = (1 << 64) - 1
# nats-server's eventsHBInterval: how often an account's counts repeat while it is in use.
CONNS_REPEAT = 30.0


STATSZ_FIRST = 0.25  # nats-server's first STATSZ after start-up
STATSZ_INTERVAL = 10.0  # and then at most this far apart (statsz_interval)


class Skip(Exception):  # nats-server's errSkipZreq
    """The request is not for this server (or has nothing to report): no reply at all."""


class Refused(Exception):
    """A command that failed (KICK, LDM): an error reply without `data` (nats-server's
    handler returns an untyped nil beside the error)."""


# (options) -> data; raises BadRequest (a 500 with its text) or Skip.
Handler = Callable[[dict[str, Any]], Any]


class SystemServices:
    """The part that answers system requests; attached by `pynatsd.assembly` unless the
    configuration turns the system account off."""

    name = "system"

    def __init__(self, server: Server) -> None:
        self.server = server
        self._subs: list[InternalSubscription] = []
        # The traffic of each account's closed connections (nats-server's account stats last
        # the account's life; the open connections keep their own).
        self._closed: dict[str, Stats] = {}
        # The 30 s repeat of each account's connection counts while it has connections.
        self._conns_timers: dict[str, asyncio.TimerHandle] = {}
        # The STATSZ heartbeat of a server in a cluster (heartbeatStatsz): its next delay.
        self._statsz_timer: asyncio.TimerHandle | None = None
        self._statsz_delay = STATSZ_FIRST

    # -- lifecycle -------------------------------------------------------------------------------

    async def start(self) -> None:
        server = self.server
        system = server.system_account
        owner = InternalClient(system, "system")
        servers = self._server_services()
        for name, handler in servers.items():
            for subject in (
                f"$SYS.REQ.SERVER.PING.{name}",
                f"$SYS.REQ.SERVER.{server.server_id}.{name}",
            ):
                self._subscribe(owner, subject, self._z(handler, raw=name == "IDZ", key=_key(name)))
        ping = self._z(servers["STATSZ"], key="statsz")

        def on_ping(sub: InternalSubscription, publisher: Receiver | None, msg: Pub) -> None:
            # A ping without a reply asks for our STATSZ on its own subject (a new JetStream
            # meta leader sends one: its peers' STATSZ make them placeable).
            if msg.reply:
                ping(sub, publisher, msg)
            elif "cluster" in self.server.parts:
                self._send_statsz()

        self._subscribe(owner, "$SYS.REQ.SERVER.PING", on_ping)
        # Commands to this server only: close a client, or tell it the server is going away.
        for name, command in (("KICK", self._kick), ("LDM", self._ldm)):
            subject = f"$SYS.REQ.SERVER.{server.server_id}.{name}"
            self._subscribe(owner, subject, self._command(command))
        for name, account_handler in self._account_services().items():
            self._subscribe(owner, f"$SYS.REQ.ACCOUNT.*.{name}", self._for_account(account_handler))
        self._subscribe(owner, "$SYS.REQ.ACCOUNT.PING.STATZ", self._z(self._all_accounts_statz))
        self._subscribe(owner, "$SYS.REQ.ACCOUNT.*.CONNS", self._conns)
        for account in list(server.accounts.values()):
            self._import_into(account)
        server.account_added_hooks.append(self._import_into)
        server.client_closed_hooks.append(self._client_closed)
        server.account_conns_hooks.append(self._conns_changed)
        if "cluster" in server.parts:
            loop = asyncio.get_running_loop()
            self._statsz_timer = loop.call_later(self._statsz_delay, self._statsz_heartbeat)
        if server.closed_clients.maxlen and "monitor" not in server.parts:
            # nats-server keeps closed connections (CONNZ state closed) with or without the
            # HTTP monitor; when it runs, the monitor records them.
            server.client_closed_hooks.append(self._remember_closed)

    async def stop(self) -> None:
        if self._statsz_timer is not None:
            self._statsz_timer.cancel()
            self._statsz_timer = None
        if self._import_into in self.server.account_added_hooks:
            self.server.account_added_hooks.remove(self._import_into)
        if self._conns_changed in self.server.account_conns_hooks:
            self.server.account_conns_hooks.remove(self._conns_changed)
        for timer in self._conns_timers.values():
            timer.cancel()
        self._conns_timers.clear()
        for hook in (self._client_closed, self._remember_closed):
            if hook in self.server.client_closed_hooks:
                self.server.client_closed_hooks.remove(hook)
        for sub in self._subs:
            if not sub.closed:
                sub.closed = True
                sub.client.account.sublist.remove(sub)
        self._subs = []

    def _statsz_heartbeat(self) -> None:
        """STATSZ on `$SYS.SERVER.<id>.STATSZ`: first after 250 ms, the wait doubling up to
        10 s, as nats-server's heartbeatStatsz (its peers learn its JetStream from it)."""
        self._send_statsz()
        self._statsz_delay = min(self._statsz_delay * 2, STATSZ_INTERVAL)
        loop = asyncio.get_running_loop()
        self._statsz_timer = loop.call_later(self._statsz_delay, self._statsz_heartbeat)

    def _send_statsz(self) -> None:
        server = self.server
        body = {"server": server_info(server), "statsz": self._statsz()}
        subject = f"$SYS.SERVER.{server.server_id}.STATSZ"
        server.publish_internal(server.system_account, subject, "", b"", go_json(body))

    def _remember_closed(self, client: Client) -> None:
        self.server.closed_clients.append(endpoints.closed_connection_info(self.server, client))

    def _conns_changed(self, account: Account) -> None:
        """accConnsUpdate: the counts now, and again every 30 s while there are connections
        (each update restarts the wait)."""
        if account is self.server.global_account:
            return
        stat = self._account_stat(account)
        events.account_conns(self.server, account, stat)
        timer = self._conns_timers.pop(account.name, None)
        if timer is not None:
            timer.cancel()
        if stat["total_conns"]:
            loop = asyncio.get_running_loop()
            later = loop.call_later(CONNS_REPEAT, self._conns_changed, account)
            self._conns_timers[account.name] = later

    def _client_closed(self, client: Client) -> None:
        totals = self._closed.get(client.account.name)
        if totals is None:
            totals = self._closed[client.account.name] = Stats()
        totals.add(client.stats)

    def _subscribe(self, owner: InternalClient, subject: str, callback: Any) -> None:
        sub = InternalSubscription(owner, subject, callback)
        owner.account.sublist.insert(sub)
        self._subs.append(sub)

    def _import_into(self, account: Account) -> None:
        """registerSystemImports: what an account reaches of the system account's services."""
        owner = InternalClient(account, "system-imports")
        self._subscribe(owner, "$SYS.REQ.USER.INFO", self._user_info)
        if account is self.server.system_account:
            return
        name = account.name
        connz = self._z(lambda opts: self._account_connz(name, opts))
        self._subscribe(owner, "$SYS.REQ.ACCOUNT.PING.CONNZ", connz)
        self._subscribe(owner, "$SYS.REQ.SERVER.PING.CONNZ", connz)
        statz = self._z(lambda opts: self._account_statz(name, opts))
        self._subscribe(owner, "$SYS.REQ.ACCOUNT.PING.STATZ", statz)

    # -- the envelope ----------------------------------------------------------------------------

    def _reply(self, account: Account, reply: bytes, body: dict[str, Any]) -> None:
        self.server.publish_internal(account, reply, "", b"", go_json(body))

    def _z(self, handler: Handler, raw: bool = False, key: str = "data") -> Any:
        """zReq: decode the options, apply the server filters, answer with the envelope."""

        def on_request(sub: InternalSubscription, publisher: Receiver | None, msg: Pub) -> None:
            if not msg.reply:
                return
            account = sub.client.account
            hs = msg.header_size
            body = msg.payload[hs:] if hs > 0 else msg.payload
            opts: dict[str, Any] = {}
            if body:
                try:
                    decoded = json.loads(body)
                except ValueError as e:
                    error = {"code": 400, "description": _go_json_error(body, e)}
                    self._reply(
                        account, msg.reply, {"server": server_info(self.server), "error": error}
                    )
                    return
                opts = decoded if isinstance(decoded, dict) else {}
                if self._filtered(opts):
                    return
            try:
                data = handler(opts)
            except Skip:
                return
            except Refused as e:
                refusal = {"code": 500, "description": str(e)}
                self._reply(
                    account, msg.reply, {"server": server_info(self.server), "error": refusal}
                )
                return
            except BadRequest as e:
                error = {"code": 500, "description": str(e)}
                self._reply(
                    account,
                    msg.reply,
                    {"server": server_info(self.server), "data": None, "error": error},
                )
                return
            if raw:
                self._reply(account, msg.reply, data)
            elif data is None:
                self._reply(account, msg.reply, {"server": server_info(self.server)})
            else:
                self._reply(account, msg.reply, {"server": server_info(self.server), key: data})

        return on_request

    def _filtered(self, opts: dict[str, Any]) -> bool:
        """filterRequest: True when the request names servers this one is not."""
        server = self.server
        name, host = str(opts.get("server_name") or ""), str(opts.get("host") or "")
        cluster = str(opts.get("cluster") or "")
        mine = (server.server_name, server.options.host, "")
        if opts.get("exact_match"):
            if (name and name != mine[0]) or (host and host != mine[1]) or cluster:
                return True
        elif (name and name not in mine[0]) or (host and host not in mine[1]) or cluster:
            return True
        if opts.get("tags"):
            return True  # pynatsd has no server tags
        domain = str(opts.get("domain") or "")
        return bool(domain) and domain != server.options.jetstream_domain

    def _for_account(self, handler: Callable[[str, dict[str, Any]], Any]) -> Any:
        """A `$SYS.REQ.ACCOUNT.<account>.<NAME>` request: the account from the subject."""

        def on_request(sub: InternalSubscription, publisher: Receiver | None, msg: Pub) -> None:
            account = msg.subject.decode("utf-8", "surrogateescape").split(".")[3]
            self._z(lambda opts: handler(account, opts))(sub, publisher, msg)

        return on_request

    # -- $SYS.REQ.SERVER.<id>.KICK / LDM ---------------------------------------------------------

    def _command(self, command: Callable[[int], None]) -> Any:
        """kickClient, ldmClient: `{"cid": N}`; a body that is not JSON gets no reply."""
        respond = self._z(lambda opts: command(_int(opts.get("cid"))))

        def on_request(sub: InternalSubscription, publisher: Receiver | None, msg: Pub) -> None:
            hs = msg.header_size
            try:
                json.loads(msg.payload[hs:] if hs > 0 else msg.payload)
            except ValueError:
                return
            respond(sub, publisher, msg)

        return on_request

    def _kick(self, cid: int) -> None:
        """DisconnectClientByID: close the connection (reason "Kicked")."""
        client = self.server.clients.get(cid)
        if client is None:
            raise Refused("no such client or leafnode id")
        client.close(CloseReason.KICKED)

    def _ldm(self, cid: int) -> None:
        """LDMClientByID: an INFO with `ldm` to one client, as lame duck mode sends to all."""
        client = self.server.clients.get(cid)
        if client is None:
            raise Refused("no such client id")
        if client.protocol < 1 or not client.first_pong_sent:
            raise Refused(
                "client does not support Lame Duck Mode or is not ready to receive the notification"
            )
        info: dict[str, Any] = {}
        for key, value in self.server.client_info(client).items():
            if key == "api_lvl":
                info["ldm"] = True  # where nats-server's Info struct has it
            info[key] = value
        client.send_now(info_frame(info))

    # -- $SYS.REQ.SERVER -------------------------------------------------------------------------

    def _server_services(self) -> dict[str, Handler]:
        server = self.server
        return {
            "IDZ": lambda opts: {
                "name": server.server_name,
                "host": server.options.host,
                "id": server.server_id,
            },
            "STATSZ": lambda opts: self._statsz(),
            "VARZ": lambda opts: endpoints.varz(server),
            "SUBSZ": lambda opts: endpoints.subsz(server, _subsz_query(opts)),
            "CONNZ": lambda opts: endpoints.connz(server, _connz_query(opts)),
            "ROUTEZ": lambda opts: endpoints.empty_routez(server),
            "GATEWAYZ": lambda opts: gatewayz.gatewayz(server, {}),
            "LEAFZ": lambda opts: leafz_of(
                server, bool(opts.get("subscriptions")), str(opts.get("account") or "")
            ),
            "ACCOUNTZ": self._accountz,
            "JSZ": lambda opts: endpoints.jsz(server, _jsz_query(opts))[1],
            "HEALTHZ": self._healthz,
            # No internal queues and no RAFT groups on a single pynatsd server.
            "IPQUEUESZ": lambda opts: {},
            "RAFTZ": lambda opts: {},
            "PROFILEZ": _profilez,
        }

    def _statsz(self) -> dict[str, Any]:
        server = self.server
        varz = endpoints.varz(server)
        sent = {"msgs": varz["out_msgs"], "bytes": varz["out_bytes"]}
        received = {"msgs": varz["in_msgs"], "bytes": varz["in_bytes"]}
        out: dict[str, Any] = {
            "start": varz["start"],
            "mem": varz["mem"],
            "cores": varz["cores"],
            "cpu": varz["cpu"],
            "connections": varz["connections"],
            "total_connections": varz["total_connections"],
            "active_accounts": sum(1 for a in server.accounts.values() if a.num_clients),
            "subscriptions": varz["subscriptions"],
            "sent": sent,
            "sent_to_clients": dict(sent),
            "received": received,
            "received_from_clients": dict(received),
            "slow_consumers": varz["slow_consumers"],
            "active_servers": 1,
        }
        if varz["jetstream"]:
            jetstream = dict(varz["jetstream"])
            jetstream["config"] = {k: v for k, v in jetstream["config"].items() if k != "store_dir"}
            out["jetstream"] = jetstream
        out["gomaxprocs"] = varz["gomaxprocs"]
        return out

    def _accountz(self, opts: dict[str, Any]) -> Any:
        return endpoints.accountz(self.server, {"acc": str(opts.get("account") or "")})[1]

    def _healthz(self, opts: dict[str, Any]) -> Any:
        query = {
            k: "true" for k in ("js-enabled-only", "js-server-only", "js-enabled") if opts.get(k)
        }
        status, data = endpoints.healthz(self.server, query)
        return {"status": data.pop("status"), "status_code": status, **data}

    # -- $SYS.REQ.ACCOUNT ------------------------------------------------------------------------

    def _account_services(self) -> dict[str, Callable[[str, dict[str, Any]], Any]]:
        server = self.server
        return {
            "SUBSZ": lambda acc, opts: endpoints.subsz(
                server, {**_subsz_query(opts), "subs": "1", "acc": acc}
            ),
            "CONNZ": self._account_connz,
            "LEAFZ": lambda acc, opts: leafz_of(server, bool(opts.get("subscriptions")), acc),
            "JSZ": self._account_jsz,
            "INFO": self._account_info,
            "STATZ": self._account_statz,
        }

    def _account_connz(self, account: str, opts: dict[str, Any]) -> Any:
        server = self.server
        if account not in server.accounts:
            # Connz for an unknown account: only the paging and the time are filled in.
            offset = max(_int(opts.get("offset")), 0)
            limit = _int(opts.get("limit")) if _int(opts.get("limit")) > 0 else 1024
            return {
                "server_id": "",
                "now": rfc3339(time.time()),
                "num_connections": 0,
                "total": 0,
                "offset": offset,
                "limit": limit,
                "connections": None,
            }
        return endpoints.connz(server, {**_connz_query(opts), "acc": account})

    def _account_info(self, account: str, opts: dict[str, Any]) -> Any:
        if account not in self.server.accounts:
            raise BadRequest(f"Account {account} does not exist")
        return endpoints.accountz(self.server, {"acc": account})[1]["account_detail"]

    def _account_jsz(self, account: str, opts: dict[str, Any]) -> Any:
        """JszAccount: the account's JetStream usage as an AccountDetail."""
        js = jetstream_of(self.server)
        if js is None:
            raise BadRequest("jetstream not enabled")
        acc = self.server.accounts.get(account)
        if acc is None:
            raise BadRequest(f'account "{account}" not found')
        ajs = js.accounts.get(account)
        if ajs is None:
            raise BadRequest(f'account "{account}" not jetstream enabled')
        memory, storage, _ = ajs.usage()
        config = acc.config
        limits = ajs.declared
        tiered = limits.tiers is not None
        return {
            "name": config.name_tag if config is not None and config.name_tag else account,
            "id": account,
            "memory": memory,
            "storage": storage,
            # uint64 of the default tier's limits (so -1, "unlimited", is 2^64-1), 0 when tiered.
            "reserved_memory": 0 if tiered else limits.max_memory & _MAX_UINT64,
            "reserved_storage": 0 if tiered else limits.max_store & _MAX_UINT64,
            "accounts": 0,
            "ha_assets": 0,
            "api": {"level": 0, "total": ajs.api_total, "errors": ajs.api_errors},
        }

    def _account_stat(self, account: Account) -> dict[str, Any]:
        """Account.statz: the account's connections, and its traffic since it started."""
        totals = Stats()
        closed = self._closed.get(account.name)
        if closed is not None:
            totals.add(closed)
        conns = 0
        for client in self.server.clients.values():
            if client.account is account and client.connected:
                conns += 1
                totals.add(client.stats)
        leafs = leafnodes_of(self.server)
        leafnodes = len(leafs.account_leafs(account)) if leafs is not None else 0
        zero = {"msgs": 0, "bytes": 0}
        config = account.config
        return {
            "acc": account.name,
            "name": config.name_tag if config is not None and config.name_tag else account.name,
            "conns": conns,
            "leafnodes": leafnodes,
            "total_conns": conns + leafnodes,
            "num_subscriptions": account.sublist.count(),
            "sent": {
                "msgs": totals.out_msgs,
                "bytes": totals.out_bytes,
                "gateways": dict(zero),
                "routes": dict(zero),
                "leafs": dict(zero),
            },
            "received": {
                "msgs": totals.in_msgs,
                "bytes": totals.in_bytes,
                "gateways": dict(zero),
                "routes": dict(zero),
                "leafs": dict(zero),
            },
            "slow_consumers": 0,
        }

    def _statz(self, accounts: list[Account], include_unused: bool) -> dict[str, Any]:
        stats = [
            self._account_stat(a)
            for a in accounts
            if include_unused or any(c.account is a for c in self.server.clients.values())
        ]
        if not stats and not include_unused:
            raise Skip
        return {
            "server_id": self.server.server_id,
            "now": rfc3339(time.time()),
            "account_statz": stats,
        }

    def _account_statz(self, account: str, opts: dict[str, Any]) -> Any:
        if account == "PING":
            raise Skip  # $SYS.REQ.ACCOUNT.PING.STATZ has its own handler
        acc = self.server.accounts.get(account)
        return self._statz([acc] if acc is not None else [], opts.get("include_unused") is True)

    def _all_accounts_statz(self, opts: dict[str, Any]) -> Any:
        server = self.server
        names = opts.get("accounts")
        if isinstance(names, list) and names:
            accounts = [server.accounts[n] for n in names if n in server.accounts]
        else:
            accounts = list(server.accounts.values())
        return self._statz(accounts, opts.get("include_unused") is True)

    def _conns(self, sub: InternalSubscription, publisher: Receiver | None, msg: Pub) -> None:
        """connsRequest: the account's connection counts as an advisory, only from a server
        where the account has local connections. A body must name the same account."""
        account = msg.subject.decode("utf-8", "surrogateescape").split(".")[3]
        hs = msg.header_size
        body = msg.payload[hs:] if hs > 0 else msg.payload
        if body:
            try:
                request = json.loads(body)
            except ValueError:
                return
            if not isinstance(request, dict) or request.get("acc") != account:
                return
        acc = self.server.accounts.get(account)
        if acc is None or not msg.reply:
            return
        if not any(c.account is acc for c in self.server.clients.values()):
            return
        advisory = {
            "type": CONNS_TYPE,
            "id": secrets.token_hex(11),
            "timestamp": rfc3339_ns(time.time_ns()),
            "server": server_info(self.server),
            **self._account_stat(acc),
        }
        self._reply(sub.client.account, msg.reply, advisory)

    # -- $SYS.REQ.USER.INFO ----------------------------------------------------------------------

    def _user_info(self, sub: InternalSubscription, publisher: Receiver | None, msg: Pub) -> None:
        """userInfoReq: the requesting connection's user, account, permissions and expiry."""
        if not msg.reply or publisher is None:
            return
        account = sub.client.account
        client: Any = publisher
        config = account.config
        data: dict[str, Any] = {
            "user": getattr(client, "auth_user", ""),
            "account": account.name,
            "account_name": config.name_tag
            if config is not None and config.name_tag
            else account.name,
        }
        if getattr(client, "name_tag", ""):
            data["user_name"] = client.name_tag
        perms = public_permissions(getattr(client.perms, "permissions", None))
        if perms is not None:
            data["permissions"] = perms
        expires = getattr(client, "claim_expires", 0.0)
        if expires:
            # time.Until(c.expires), truncated to the second, in nanoseconds.
            data["expires"] = max(int(expires - time.time()), 0) * 1_000_000_000
        body = {"server": server_info(self.server), "data": data}
        self._reply(account, msg.reply, body)


def public_permissions(perms: Permissions | None) -> dict[str, Any] | None:
    """client.publicPermissions: the connection's permissions as nats-server shows them."""
    if perms is None:
        return None

    def lists(perm: SubjectPermission | None) -> dict[str, list[str]]:
        out: dict[str, list[str]] = {}
        if perm is not None and perm.allow:
            out["allow"] = list(perm.allow)
        if perm is not None and perm.deny:
            out["deny"] = list(perm.deny)
        return out

    out: dict[str, Any] = {"publish": lists(perms.publish), "subscribe": lists(perms.subscribe)}
    if perms.response is not None:
        out["responses"] = {
            "max": perms.response.max_msgs,
            "ttl": int(perms.response.expires * 1_000_000_000),
        }
    return out


def _profilez(opts: dict[str, Any]) -> dict[str, Any]:
    """profilez: Go's runtime profiles by name; pynatsd has none of them."""
    name = opts.get("name")
    if not name:
        return {"profile": None, "error": "Profile name not specified"}
    return {"profile": None, "error": f"Profile {json.dumps(str(name))} not found"}


def _key(name: str) -> str:
    return "statsz" if name == "STATSZ" else "data"


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _flag(opts: dict[str, Any], key: str) -> str:
    return "true" if opts.get(key) is True else ""


def _connz_query(opts: dict[str, Any]) -> dict[str, str]:
    """ConnzOptions (JSON) as the /connz query endpoints.connz reads."""
    query: dict[str, str] = {}
    if opts.get("sort"):
        query["sort"] = str(opts["sort"])
    if opts.get("subscriptions_detail") is True:
        query["subs"] = "detail"
    elif opts.get("subscriptions") is True:
        query["subs"] = "true"
    query["auth"] = _flag(opts, "auth")
    for key in ("offset", "limit", "cid"):
        if _int(opts.get(key)):
            query[key] = str(_int(opts[key]))
    state = opts.get("state")
    if isinstance(state, int) and not isinstance(state, bool):
        query["state"] = {0: "open", 1: "closed", 2: "any"}.get(state, "open")
    for key, name in (("user", "user"), ("acc", "acc")):
        if opts.get(key):
            query[name] = str(opts[key])
    return query


def _subsz_query(opts: dict[str, Any]) -> dict[str, str]:
    query: dict[str, str] = {"subs": _flag(opts, "subscriptions")}
    for key in ("offset", "limit"):
        if _int(opts.get(key)):
            query[key] = str(_int(opts[key]))
    if opts.get("account"):
        query["acc"] = str(opts["account"])
    if opts.get("test"):
        query["test"] = str(opts["test"])
    return query


def _jsz_query(opts: dict[str, Any]) -> dict[str, str]:
    query = {key: _flag(opts, key) for key in ("accounts", "streams", "config")}
    query["consumers"] = _flag(opts, "consumer")
    if opts.get("account"):
        query["acc"] = str(opts["account"])
    return query


# json.JSONDecodeError's complaint -> what Go's encoding/json scanner says it was looking for.
_GO_CONTEXT = {
    "Expecting property name enclosed in double quotes": (
        "looking for beginning of object key string"
    ),
    "Expecting value": "looking for beginning of value",
    "Expecting ':' delimiter": "after object key",
    "Extra data": "after top-level value",
}


def _go_json_error(body: bytes, error: ValueError) -> str:
    """The text of Go's json.Unmarshal syntax error for `body` (the common cases)."""
    pos = getattr(error, "pos", len(body))
    text = body.decode("utf-8", "replace")
    if pos >= len(text.rstrip()):
        return "unexpected end of JSON input"
    char = text[pos]
    quoted = "'\\''" if char == "'" else f"'{char}'"
    message = getattr(error, "msg", "")
    context = _GO_CONTEXT.get(message)
    if context is None and message == "Expecting ',' delimiter":
        # Inside an object or an array: the innermost bracket still open says which.
        depth: list[str] = []
        for c in text[:pos]:
            if c in "{[":
                depth.append(c)
            elif c in "}]" and depth:
                depth.pop()
        inside = depth[-1] if depth else "{"
        context = "after object key:value pair" if inside == "{" else "after array element"
    return f"invalid character {quoted} {context or 'looking for beginning of value'}"
