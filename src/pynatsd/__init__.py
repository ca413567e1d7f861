"""pynatsd: a NATS server in Python, wire-compatible with nats-server.

Embedded use::

    async with pynatsd.Server(port=0) as server:
        nc = await nats.connect(server.client_url)
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pynatsd.version import __version__

if TYPE_CHECKING:
    from pynatsd.embedded import Server, ThreadedServer
    from pynatsd.options import Options
    from pynatsd.server.listen import ListenError

__all__ = ["ListenError", "Options", "Server", "ThreadedServer", "__version__"]


def __getattr__(name: str) -> Any:
    # Imported on first use: `pynatsd.spark` runs inside every Spark worker and needs none of
    # the server.
    if name in ("Server", "ThreadedServer"):
        from pynatsd import embedded

        return getattr(embedded, name)
    if name == "Options":
        from pynatsd.options import Options

        return Options
    if name == "ListenError":
        from pynatsd.server.listen import ListenError

        return ListenError
    raise AttributeError(f"module 'pynatsd' has no attribute {name!r}")
