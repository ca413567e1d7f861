"""`nats-server -t` beside pynatsd's configuration check: the same file to both, the error
lines compared without the program's name and the file's directory."""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

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


def nats_server_startup_error(path: Path) -> str:
    """What nats-server refuses to start with `path` for (a check made at start-up, not by
    `-t`): its error line without the program's name."""
    assert NATS_SERVER is not None
    real = subprocess.run(
        [NATS_SERVER, "-c", str(path), "-p", "-1"],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert real.returncode == 1
    return real.stderr.strip().removeprefix("nats-server: ")


def error_lines(text: str) -> set[str]:
    """The error lines of a check's output, as a set: nats-server reports errors in map order."""
    out = set()
    for line in text.splitlines():
        line = re.sub(r"^(nats-server|pynatsd): ", "", line.strip())
        line = re.sub(r"^\S*/", "", line)  # the file name alone
        if line and not line.startswith("configuration file"):
            out.add(line)
    return out


def assert_check_agrees(
    text: str, directory: Path, check: Callable[[str], object], error: type[Exception]
) -> None:
    """Write `text` as main.conf in `directory`; `check` (pynatsd's loader or -t check) must
    refuse it with the same error lines as `nats-server -t`, or accept it as nats-server does."""
    (directory / "main.conf").write_text(text)
    real = nats_server_test(directory)
    cwd = os.getcwd()
    os.chdir(directory)
    try:
        if real.returncode == 0:
            check("main.conf")
            return
        with pytest.raises(error) as info:
            check("main.conf")
    finally:
        os.chdir(cwd)
    assert error_lines(str(info.value)) == error_lines(real.stdout + real.stderr)
