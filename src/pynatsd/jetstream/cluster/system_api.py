"""The JetStream API as nats-server carries it between the servers of a cluster: through the
system account.

nats-server answers `$JS.API.>` in `$SYS`; every JetStream account imports it as a service,
so a request a client makes in its account is published again in `$SYS` by the client's own
server, with a `Nats-Request-Info` header naming the account and a `_R_.…` reply that leads
back to the client. A Go node therefore never sees a request in the client's account, and
answers only what reaches it in `$SYS`.

pynatsd nodes answer requests in the account itself (each subscribes there, the routes carry
the interest). For nats-server nodes in the same cluster, a pynatsd node also:
- forwards each request one of its own clients made, and that it does not answer itself, into
  `$SYS` as a service import would, and hands the answer back to the client;
- answers the requests nats-server nodes forward into `$SYS`, in the account the header names,
  with the reply published in `$SYS`.
A forwarded request carries `Pynatsd-Forwarded`, so other pynatsd nodes (which had the request
in the account already) leave it alone; nats-server ignores headers it does not know.
"""

from __future__ import annotations

import json
import secrets
from typing import TYPE_CHECKING, Any

from pynatsd.jetstream.errors import ApiError
from pynatsd.jetstream.util import API_TYPE_PREFIX, go_json
from pynatsd.logger import log
from pynatsd.protocol.headers import header_value
from pynatsd.server.msgtrace import set_header
from pynatsd.server.subscription import InternalClient, InternalSubscription

if TYPE_CHECKING:
    from pynatsd.jetstream.manager import AccountJetStream, JetStream
    from pynatsd.protocol.events import Pub
    from pynatsd.server.client import Client

REQUEST_INFO = "Nats-Request-Info"  # ClientInfoHdr
META_STEPDOWN = b"$JS.API.META.LEADER.STEPDOWN"
FORWARDED = "Pynatsd-Forwarded"
RESPONSE_TTL = 30.0  # a forwarded request's reply route lives this long at most


class SystemApi:
    """This server's end of the JetStream API in `$SYS`."""

    def __init__(self, js: JetStream) -> None:
        self.js = js
        server = js.server
        self._owner = InternalClient(server.system_account, "jetstream-system-api")
        self._subs: list[InternalSubscription] = []
        self._prefix = f"_R_.{secrets.token_hex(3)}"
        # token -> (account JetStream, the client's own reply)
        self._replies: dict[str, tuple[AccountJetStream, str]] = {}

    def start(self) -> None:
        system = self.js.server.system_account
        for subject, callback in (
            ("$JS.API.>", self._on_system_request),
            (self._prefix + ".*", self._on_response),
        ):
            sub = InternalSubscription(self._owner, subject, callback)
            system.sublist.insert(sub)
            self._subs.append(sub)

    def stop(self) -> None:
        system = self.js.server.system_account
        for sub in self._subs:
            if not sub.closed:
                sub.closed = True
                system.sublist.remove(sub)
        self._subs = []

    # ----- a request of one of our clients, for whoever answers it in $SYS
    def forward(self, ajs: AccountJetStream, msg: Pub, publisher: Client | None) -> None:
        """A service import's publish: the request in `$SYS`, its reply routed back."""
        server = self.js.server
        hs = msg.header_size
        header = bytes(msg.payload[:hs]) if hs > 0 else b""
        body = msg.payload[hs:] if hs > 0 else msg.payload
        info: dict[str, Any] = {"acc": ajs.account.name, "server": server.server_name}
        if server.cluster_name:
            info["cluster"] = server.cluster_name
        block = header or b"NATS/1.0\r\n\r\n"
        block = set_header(block, REQUEST_INFO, json.dumps(info, separators=(",", ":")))
        block = set_header(block, FORWARDED, "1")
        reply = ""
        if msg.reply:
            token = secrets.token_hex(6)
            reply = f"{self._prefix}.{token}"
            self._replies[token] = (ajs, msg.reply.decode("utf-8", "surrogateescape"))
            ajs.loop.call_later(RESPONSE_TTL, self._replies.pop, token, None)
        server.publish_internal(server.system_account, msg.subject, reply, block, bytes(body))

    def _on_response(self, sub: InternalSubscription, publisher: Client | None, msg: Pub) -> None:
        token = msg.subject.rsplit(b".", 1)[-1].decode()
        target = self._replies.pop(token, None)
        if target is None:
            return
        ajs, reply = target
        hs = msg.header_size
        header = bytes(msg.payload[:hs]) if hs > 0 else b""
        ajs.reply(reply, bytes(msg.payload[hs:] if hs > 0 else msg.payload), header)

    def _meta_stepdown(self, msg: Pub, header: bytes) -> None:
        """jsLeaderStepDownRequest: a system user asks the meta leader to hand over."""
        clustered = self.js.clustered
        meta = self.js.meta
        if clustered is None or meta is None or not meta.is_leader or meta.node is None:
            return
        body = bytes(msg.payload[len(header) :])
        result: dict[str, Any] = {"success": True}
        try:
            preferred = clustered.preferred_peer(body)
        except ApiError as e:
            result = {"error": e.to_json()}
        else:
            meta.node.step_down(preferred)
        server = self.js.server
        data = go_json({"type": API_TYPE_PREFIX + "meta_leader_stepdown_response", **result})
        if msg.reply:
            server.publish_internal(server.system_account, msg.reply, "", b"", data)
        if meta.transport is not None:
            meta.transport.pump()

    # ----- a request nats-server forwarded into $SYS
    def _on_system_request(
        self, sub: InternalSubscription, publisher: Client | None, msg: Pub
    ) -> None:
        if publisher is None:
            return  # our own forward
        hs = msg.header_size
        header = bytes(msg.payload[:hs]) if hs > 0 else b""
        if msg.subject == META_STEPDOWN:
            self._meta_stepdown(msg, header)
            return
        if not header or header_value(header, FORWARDED) is not None:
            return  # a pynatsd node forwarded it: we had it in the account already
        text = header_value(header, REQUEST_INFO)
        if not text:
            return
        try:
            info = json.loads(text)
        except ValueError:
            log.warning("JetStream: a $SYS API request with a bad %s header", REQUEST_INFO)
            return
        account = str(info.get("svc") or info.get("acc") or "")
        ajs = self.js.accounts.get(account)
        api = ajs.api if ajs is not None else None
        if api is not None:
            api.handle_system_request(msg, publisher)
