"""Clustering: routes between servers (nats-server's `route.go`), as an optional part."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pynatsd.cluster.cluster import Cluster

if TYPE_CHECKING:
    from pynatsd.server.server import Server

__all__ = ["Cluster", "cluster_of"]


def cluster_of(server: Server) -> Cluster | None:
    """The server's cluster part, if it has one (for the monitor)."""
    part = server.parts.get("cluster")
    return part if isinstance(part, Cluster) else None
