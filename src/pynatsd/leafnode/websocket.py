"""A leaf remote dialed over WebSocket (`ws://` and `wss://` remote URLs).

Corresponds to nats-server's `server/leafnode.go` `leafNodeSolicitWSConnection`: after the TCP
connection (and TLS for `wss://`) the leaf sends an HTTP upgrade for the `/leafnode` path, which
tells the hub's websocket listener to make a leaf connection of it rather than a client; from
then on the leaf protocol travels in binary frames, masked as any WebSocket client's, without
compression. The WebSocket protocol itself is the `websockets` library's sans-IO
`ClientProtocol`; this adapter feeds the frames' bytes to a `Leaf` as one stream.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from websockets.client import ClientProtocol
from websockets.frames import Frame
from websockets.http11 import Request, Response
from websockets.uri import parse_uri

from pynatsd.logger import log
from pynatsd.server.websocket import (
    LEAFNODE_PATH,
    MAX_MESSAGE,
    WebSocketTransport,
    carries_data,
    receive,
)

if TYPE_CHECKING:
    from pynatsd.leafnode.connection import Leaf

# How long the hub has to answer the upgrade (nats-server's default first_info_timeout, the
# deadline it sets on the handshake).
UPGRADE_WAIT = 1.0


def upgrade_uri(url: str, host: str, port: int) -> str:
    """The URI the upgrade asks for: the remote URL's path (if any) followed by `/leafnode`."""
    scheme = "wss" if url.lower().startswith("wss") else "ws"
    rest = url.split("://", 1)[1] if "://" in url else url
    path = rest.split("/", 1)[1] if "/" in rest else ""
    path = f"/{path.strip('/')}{LEAFNODE_PATH}" if path.strip("/") else LEAFNODE_PATH
    host_text = f"[{host}]" if ":" in host else host
    return f"{scheme}://{host_text}:{port}{path}"


class LeafWebSocket(asyncio.Protocol):
    """The TCP side of a leaf dialed over WebSocket: the upgrade, then the `Leaf` fed from data
    frames. `upgraded` resolves True once the hub accepted the upgrade, False otherwise."""

    def __init__(self, leaf: Leaf, uri: str) -> None:
        self.leaf = leaf
        self.ws = ClientProtocol(parse_uri(uri), max_size=MAX_MESSAGE)
        self.raw: asyncio.Transport | None = None
        self.upgraded: asyncio.Future[bool] = leaf.server.loop.create_future()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        raw: asyncio.Transport = transport  # type: ignore[assignment]
        self.raw = raw
        ws = self.ws
        ws.send_request(ws.connect())
        raw.write(b"".join(ws.data_to_send()))

    def data_received(self, data: bytes) -> None:
        assert self.raw is not None
        receive(self.ws, self.raw, data, self._event)

    def _event(self, event: Request | Response | Frame) -> None:
        if isinstance(event, Response):
            self._upgraded(event)
        elif isinstance(event, Frame) and carries_data(event) and self.upgraded.done():
            self.leaf.data_received(bytes(event.data))

    def _upgraded(self, response: Response) -> None:
        assert self.raw is not None
        if self.ws.handshake_exc is not None:
            log.error("Error soliciting websocket connection: invalid websocket connection")
            self._resolve(False)
            return
        self._resolve(True)
        self.leaf.websocket = True
        self.leaf.connection_made(WebSocketTransport(self.raw, self.ws))

    def _resolve(self, ok: bool) -> None:
        if not self.upgraded.done():
            self.upgraded.set_result(ok)

    def connection_lost(self, exc: Exception | None) -> None:
        if self.upgraded.done() and self.upgraded.result():
            self.leaf.connection_lost(exc)
        self._resolve(False)

    def pause_writing(self) -> None:
        self.leaf.pause_writing()

    def resume_writing(self) -> None:
        self.leaf.resume_writing()
