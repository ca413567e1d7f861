"""Leaf nodes (nats-server's `leafnode.go`), as an optional part: this server as a leaf of a
remote NATS system, as a hub that leafs dial, or both."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pynatsd.leafnode.leafnodes import LeafNodes

if TYPE_CHECKING:
    from pynatsd.server.server import Server

__all__ = ["LeafNodes", "leafnodes_of"]


def leafnodes_of(server: Server) -> LeafNodes | None:
    """The server's leaf nodes part, if it has one (for the monitor)."""
    part = server.parts.get("leafnodes")
    return part if isinstance(part, LeafNodes) else None
