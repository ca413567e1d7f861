"""pynatsd: a NATS server in Python, wire-compatible with nats-server.

Embedded use::

    async with pynatsd.Server(port=0) as server:
        nc = await nats.connect(server.client_url)

    async with pynatsd.Cluster(size=3) as cluster:
        nc = await nats.connect(cluster.client_urls[0])
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pynatsd import native
from pynatsd.version import __version__

# Compiled or pure-Python hot path, decided before any of those modules is imported.
native.select()

if TYPE_CHECKING:
    from pynatsd.embedded import Cluster, Server, ThreadedCluster, ThreadedServer
    from pynatsd.options import Options
    from pynatsd.server.listen import ListenError

__all__ = [
    "Cluster",
    "ListenError",
    "Options",
    "Server",
    "ThreadedCluster",
    "ThreadedServer",
    "__version__",
]


def __getattr__(name: str) -> Any:
    # Imported on first use: `pynatsd.spark` runs inside every Spark worker and needs none of
    # the server.
    if name in ("Server", "ThreadedServer", "Cluster", "ThreadedCluster"):
        from pynatsd import embedded

        return getattr(embedded, name)
    if name == "Options":
        from pynatsd.options import Options

        return Options
    if name == "ListenError":
        from pynatsd.server.listen import ListenError

        return ListenError
    raise AttributeError(f"module 'pynatsd' has no attribute {name!r}")
