"""A process's resident memory, for tests that bound what a server keeps (Linux /proc)."""

from __future__ import annotations


def rss_bytes(pid: int | str = "self") -> int:
    """VmRSS of process `pid` (this process by default), in bytes."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise AssertionError(f"no VmRSS for {pid}")
