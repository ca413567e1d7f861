"""WebSocket transport: the NATS protocol carried in WebSocket frames (nats.ws, nats.js, nats.py
with `ws://`).

Corresponds to nats-server's `server/websocket.go`. The WebSocket protocol itself (handshake,
framing, masking, ping/pong, close) is the `websockets` library's sans-IO `ServerProtocol`; this
module only adapts it to asyncio and to `Client`: the bytes of every data frame go to the
client's parser as one stream, and everything the client writes leaves as one binary frame per
flush.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from http import HTTPStatus
from typing import TYPE_CHECKING, Any

from websockets.exceptions import InvalidState
from websockets.frames import Frame, Opcode
from websockets.http11 import Request, Response
from websockets.protocol import Protocol
from websockets.server import ServerProtocol

from pynatsd.logger import log
from pynatsd.server.client import Client
from pynatsd.server.listen import listen

if TYPE_CHECKING:
    from pynatsd.server.server import Server

# Largest WebSocket message accepted; nats-server bounds a frame by max_payload plus headroom.
MAX_MESSAGE = 64 * 1024 * 1024
# The path a leaf node's upgrade asks for (nats-server's leafNodeWSPath).
LEAFNODE_PATH = "/leafnode"
# The path an MQTT client's upgrade asks for (nats-server's mqttWSPath), and the header
# nats-server's answer to it always carries, whatever the request offered (wsMQTTSecProto).
MQTT_PATH = "/mqtt"
MQTT_PROTOCOL_HEADER = ("Sec-Websocket-Protocol", "mqtt")
_DATA = (Opcode.BINARY, Opcode.TEXT, Opcode.CONT)


def carries_data(frame: Frame) -> bool:
    """A data frame (its bytes belong to the protocol stream), not a control frame."""
    return frame.opcode in _DATA


def receive(
    ws: Protocol,
    raw: asyncio.Transport,
    data: bytes,
    handle: Callable[[Request | Response | Frame], None],
) -> None:
    """Bytes read from `raw` into `ws`: each event it yields to `handle`, then what the
    WebSocket protocol answers (pongs, the close handshake) back out, closing `raw` when the
    protocol is done with it."""
    ws.receive_data(data)
    for event in ws.events_received():
        handle(event)
    out = ws.data_to_send()
    if out:
        raw.write(b"".join(out))
    if ws.close_expected() or ws.handshake_exc is not None:
        raw.close()


class WebSocketTransport(asyncio.Transport):
    """What a `Client` (or a leaf dialed over WebSocket) writes to: frames outgoing bytes,
    otherwise the TCP transport."""

    def __init__(self, raw: asyncio.Transport, ws: Protocol) -> None:
        super().__init__()
        self._raw = raw
        self._ws = ws

    def write(self, data: bytes | bytearray | memoryview) -> None:
        if not data:
            return  # as on TCP, nothing is sent (an MQTT server's empty greeting)
        try:
            self._ws.send_binary(bytes(data))
        except InvalidState:
            return  # the WebSocket is closing: nothing more may be sent
        self._raw.write(b"".join(self._ws.data_to_send()))

    def close(self) -> None:
        try:
            self._ws.send_close(1000)
            self._raw.write(b"".join(self._ws.data_to_send()))
        except InvalidState:
            pass
        self._raw.close()

    def abort(self) -> None:
        self._raw.abort()

    def is_closing(self) -> bool:
        return self._raw.is_closing()

    def get_write_buffer_size(self) -> int:
        return self._raw.get_write_buffer_size()

    def set_write_buffer_limits(self, high: int | None = None, low: int | None = None) -> None:
        self._raw.set_write_buffer_limits(high, low)

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return self._raw.get_extra_info(name, default)

    def pause_reading(self) -> None:
        self._raw.pause_reading()

    def resume_reading(self) -> None:
        self._raw.resume_reading()


class WebSocketConnection(asyncio.Protocol):
    """One WebSocket connection: the HTTP upgrade, then a `Client` fed from data frames."""

    def __init__(self, server: Server) -> None:
        self.server = server
        self.ws = ServerProtocol(max_size=MAX_MESSAGE)
        self.raw: asyncio.Transport | None = None
        # What the frames' bytes go to: a Client, or a leaf connection on `/leafnode`.
        self.client: asyncio.Protocol | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.raw = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        assert self.raw is not None
        receive(self.ws, self.raw, data, self._event)

    def _event(self, event: Request | Response | Frame) -> None:
        if isinstance(event, Request):
            self._upgrade(event)
        elif isinstance(event, Frame) and self.client is not None and carries_data(event):
            self.client.data_received(bytes(event.data))

    def _upgrade(self, request: Request) -> None:
        assert self.raw is not None
        path = request.path.split("?", 1)[0]  # Go's EscapedPath: no query
        mqtt = path.endswith(MQTT_PATH)
        if mqtt and self.server.websocket_mqtt is None:
            # nats-server checks this before anything else of the request.
            self._refuse(404, "mqtt websocket endpoint not enabled")
            return
        response = self.ws.accept(request)
        if mqtt and response.status_code == 101:
            response.headers[MQTT_PROTOCOL_HEADER[0]] = MQTT_PROTOCOL_HEADER[1]
        self.ws.send_response(response)
        self.raw.write(b"".join(self.ws.data_to_send()))
        if response.status_code != 101:
            log.error("WebSocket handshake refused: %s", response.reason_phrase)
            self.raw.close()
            return
        self.client = self._endpoint(path, mqtt)
        self.client.connection_made(WebSocketTransport(self.raw, self.ws))

    def _refuse(self, status: int, why: str) -> None:
        """nats-server's wsReturnHTTPError: the status text as the body, the reason logged."""
        assert self.raw is not None
        response = self.ws.reject(status, HTTPStatus(status).phrase + "\n")
        response.headers["Sec-Websocket-Version"] = "13"
        response.headers["X-Content-Type-Options"] = "nosniff"
        del response.headers["Connection"]  # Go's http.Error sets none
        self.ws.send_response(response)
        self.raw.write(b"".join(self.ws.data_to_send()))
        peer = self.raw.get_extra_info("peername")
        where = f"{peer[0]}:{peer[1]} - " if peer else ""
        log.error("%swebsocket handshake error: %s", where, why)
        self.raw.close()

    def _endpoint(self, path: str, mqtt: bool) -> asyncio.Protocol:
        """nats-server's wsUpgrade: a path ending in `/leafnode` is a leaf node dialing in (when
        this server takes leafs), one ending in `/mqtt` an MQTT client, anything else a
        client."""
        leaf = self.server.websocket_leaf
        if leaf is not None and path.endswith(LEAFNODE_PATH):
            return leaf()
        if mqtt and self.server.websocket_mqtt is not None:
            return self.server.websocket_mqtt()
        client = Client(self.server)
        client.websocket = True
        return client

    def connection_lost(self, exc: Exception | None) -> None:
        if self.client is not None:
            self.client.connection_lost(exc)

    def pause_writing(self) -> None:
        if self.client is not None:
            self.client.pause_writing()

    def resume_writing(self) -> None:
        if self.client is not None:
            self.client.resume_writing()


async def start_websocket_listener(server: Server) -> asyncio.Server:
    opts = server.options
    ssl_context = None
    if server.websocket_tls:
        from pynatsd.tls import listener_context

        ssl_context = listener_context(
            opts.websocket_tls_cert, opts.websocket_tls_key, opts.websocket_tls_ca_cert
        )
    port = 0 if opts.websocket_port == -1 else opts.websocket_port
    return await listen(
        server.loop,
        lambda: WebSocketConnection(server),
        server.websocket_host,
        port,
        lambda err: f"Unable to listen for websocket connections: {err}",
        ssl=ssl_context,
    )
