"""JetStream: persisted streams and consumers, with nats-server's JSON API on `$JS.API.>`."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pynatsd.jetstream.manager import AccountJetStream, JetStream

if TYPE_CHECKING:
    from pynatsd.server.server import Server

__all__ = ["AccountJetStream", "JetStream", "jetstream_of"]


def jetstream_of(server: Server) -> JetStream | None:
    """The server's JetStream when it runs (the composition root attaches it as a part)."""
    part = server.parts.get(JetStream.name)
    return part if isinstance(part, JetStream) else None
