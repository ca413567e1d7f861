"""`nats-server -t` beside pynatsd's configuration check: the same file to both, the error
lines compared without the program's name and the file's directory."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

from support.natsserver import NATS_SERVER


def nats_server_test(directory: Path, name: str = "main.conf") -> subprocess.CompletedProcess[str]:
    """Run `nats-server -t -c <name>` in `directory` (where relative includes resolve)."""
    assert NATS_SERVER is not None
    return subprocess.run(
        [NATS_SERVER, "-t", "-c", name],
        cwd=directory,
        capture_output=True,
        text=True,
        timeout=30,
    )


def error_lines(text: str) -> set[str]:
    """The error lines of a check's output, as a set: nats-server reports errors in map order."""
    out = set()
    for line in text.splitlines():
        line = re.sub(r"^(nats-server|pynatsd): ", "", line.strip())
        line = re.sub(r"^\S*/", "", line)  # the file name alone
        if line and not line.startswith("configuration file"):
            out.add(line)
    return out
