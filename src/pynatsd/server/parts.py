"""The optional parts of a server (JetStream, monitoring; later cluster routes, leaf nodes,
gateways, MQTT), as the core server sees them.

nats-server starts them from `Server.Start` one after the other; here the composition root
(`pynatsd.assembly`) builds them and attaches them to a `Server`, which starts them in the
order attached and stops them in reverse. The core server knows them only by this interface,
so `server/` imports none of the packages that implement them.
"""

from __future__ import annotations

from typing import Protocol


class ServerPart(Protocol):
    # The part's name in `Server.parts` ("jetstream", "monitor", ...).
    name: str

    async def start(self) -> None:
        """Start serving; called once the client listener is bound and before clients are
        accepted."""

    async def stop(self) -> None:
        """Stop serving; called during shutdown, after every client is closed."""
