"""A directory a test fills and then makes read-only, also as root (who ignores permissions):
a small tmpfs remounted read-only, or, for anyone else, `chmod a-w`."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest


def _run(*argv: str) -> bool:
    return subprocess.run(argv, capture_output=True).returncode == 0


@contextmanager
def read_only_later(base: Path) -> Iterator[tuple[Path, Callable[[], None]]]:
    """Yields (directory, make_read_only); skips the test when neither way is available."""
    path = base / "ro"
    path.mkdir()
    if os.geteuid() != 0:
        try:
            yield path, lambda: _chmod_tree(path, 0o555)
        finally:
            _chmod_tree(path, 0o755)
        return
    if not _run("mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(path)):
        pytest.skip("cannot mount a tmpfs here")
    try:

        def make_read_only() -> None:
            if not _run("mount", "-o", "remount,ro", str(path)):
                pytest.skip("cannot remount a tmpfs read-only here")

        yield path, make_read_only
    finally:
        _run("umount", str(path))


def _chmod_tree(path: Path, mode: int) -> None:
    for root, dirs, _files in os.walk(path):
        for name in dirs:
            os.chmod(os.path.join(root, name), mode)
    os.chmod(path, mode)
