"""pynatsd in the test's own process, configured from configuration text as a user's file would
be (the path through the config loader, unlike keyword options), on a free loopback port."""

from __future__ import annotations

from pathlib import Path

import pynatsd
from pynatsd.config import load_config


def server_from_config(directory: Path, conf: str) -> pynatsd.Server:
    """A server (not started: use `async with`) from `conf`, written to directory/server.conf;
    the client listener goes to 127.0.0.1 on a port the kernel picks."""
    path = directory / "server.conf"
    path.write_text(conf)
    opts = load_config(path).options
    opts.host, opts.port = "127.0.0.1", 0
    return pynatsd.Server(opts)
