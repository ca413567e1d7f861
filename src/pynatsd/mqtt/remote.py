"""MQTT's JetStream requests to another server's JetStream, in the domain the mqtt block's
`js_domain` names.

Corresponds to nats-server's `mqttJSA` (server/mqtt.go): a leaf node without JetStream for the
account (or with another domain than `js_domain`) sends every JetStream API request MQTT makes
as a NATS request to `$JS.<domain>.API.<request>` and publishes to its streams with a reply
subject for the PubAck; the replies come back on `$MQTT.JSA.<server hash>.<kind>.<token>`
(the kinds are nats-server's: `SL` stream lookup, `SC` stream create, `ML` message load, `MS`
message store, `SP` session persist, `MD` message delete, `CC` consumer create, `CD` consumer
delete), across the leaf connection, to one internal subscription of the account. Each call
returns a future the caller awaits before it answers its client (CONNACK, SUBACK, PUBACK), as
nats-server's `newRequest` waits for its reply.
"""

from __future__ import annotations

import asyncio
import json
from typing import TYPE_CHECKING, Any

from pynatsd.gofmt import go_duration
from pynatsd.jetstream.advisories import new_nuid
from pynatsd.mqtt.store import client_id_hash
from pynatsd.server.subscription import InternalClient, InternalSubscription

if TYPE_CHECKING:
    from pynatsd.protocol.events import Pub
    from pynatsd.server.accounts import Account
    from pynatsd.server.server import Server

# The reply of one request: its header block and body.
Reply = tuple[bytes, bytes]


class RemoteTimeout(Exception):
    """No reply within the mqtt block's `js_api_timeout`."""


class RemoteJetStream:
    """Requests of one account's MQTT to `$JS.<domain>.API`, and their replies."""

    def __init__(self, server: Server, account: Account, domain: str, timeout: float) -> None:
        self.server = server
        self.account = account
        self.api = f"$JS.{domain}.API."
        self.timeout = timeout
        self._prefix = f"$MQTT.JSA.{client_id_hash(server.options.server_name)}."
        self._nuid = new_nuid()
        self._next = 0
        self._waiting: dict[str, asyncio.Future[Reply]] = {}
        owner = InternalClient(account, "mqtt:jsa")
        self._sub = InternalSubscription(owner, self._prefix + ">", self._on_reply)
        account.sublist.insert(self._sub)

    def close(self) -> None:
        self.account.sublist.remove(self._sub)
        for future in self._waiting.values():
            future.cancel()
        self._waiting.clear()

    def _on_reply(self, sub: InternalSubscription, client: Any, msg: Pub) -> None:
        token = msg.subject.decode().rpartition(".")[2]
        future = self._waiting.pop(token, None)
        if future is None or future.done():
            return
        raw = bytes(msg.payload)
        size = msg.header_size
        future.set_result((raw[:size], raw[size:]) if size > 0 else (b"", raw))

    def _send(self, kind: str, subject: str, header: bytes, body: bytes) -> asyncio.Future[Reply]:
        self._next += 1
        token = f"{self._nuid}{self._next}"
        reply = f"{self._prefix}{kind}.{token}"
        future: asyncio.Future[Reply] = self.server.loop.create_future()
        self._waiting[token] = future
        loop = self.server.loop
        loop.call_later(self.timeout, self._expire, token, kind, subject, reply, loop.time())
        self.server.publish_internal(self.account, subject, reply, header, body)
        return future

    def _expire(self, token: str, kind: str, subject: str, reply: str, sent: float) -> None:
        future = self._waiting.pop(token, None)
        if future is not None and not future.done():
            waited = go_duration(self.server.loop.time() - sent)
            text = f'timeout after {waited}: request type "{kind}" on "{subject}" (reply="{reply}")'
            future.set_exception(RemoteTimeout(text))

    def request(
        self, kind: str, api: str, body: dict[str, Any] | None = None
    ) -> asyncio.Future[Reply]:
        """A JetStream API request (`STREAM.CREATE.$MQTT_sess`, ...), its body as JSON."""
        data = b"" if body is None else json.dumps(body).encode()
        return self._send(kind, self.api + api, b"", data)

    def publish(self, kind: str, subject: str, header: bytes, data: bytes) -> asyncio.Future[Reply]:
        """A message for one of the MQTT streams; the reply is the stream's PubAck."""
        return self._send(kind, subject, header, data)


def reply_json(reply: Reply) -> dict[str, Any]:
    """A JetStream API reply's JSON object ({} when it is not one)."""
    try:
        value = json.loads(reply[1])
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}
