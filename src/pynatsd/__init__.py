"""pynatsd: a NATS server in Python, wire-compatible with nats-server.

Embedded use::

    async with pynatsd.Server(port=0) as server:
        nc = await nats.connect(server.client_url)
"""

from __future__ import annotations

__version__ = "0.1.0"

from pynatsd.embedded import Server, ThreadedServer
from pynatsd.options import Options

__all__ = ["Options", "Server", "ThreadedServer", "__version__"]
