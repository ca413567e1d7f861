"""Gateways: connections between clusters that make a super-cluster (nats-server's
`gateway.go`), as an optional part."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pynatsd.gateway.gateway import Gateway

if TYPE_CHECKING:
    from pynatsd.server.server import Server

__all__ = ["Gateway", "gateway_of"]


def gateway_of(server: Server) -> Gateway | None:
    """The server's gateway part, if it has one (for the monitor)."""
    part = server.parts.get("gateway")
    return part if isinstance(part, Gateway) else None
