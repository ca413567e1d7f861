"""Free loopback ports, for servers started as separate processes (in-process servers take
port 0 and report the port they got)."""

from __future__ import annotations

import itertools
import os
import random
import socket
import time

LOOPBACK = "127.0.0.1"

# Ports are handed out below the kernel's ephemeral range (Linux: 32768-60999), where nothing
# binding port 0 or dialing out can take one between our check and the server's bind, and each
# pytest-xdist worker walks its own slice of it, so two workers never hand out the same port.
_LOW, _HIGH = 20000, 32000
_SLICES = 8


def _candidates() -> itertools.cycle[int]:
    worker = os.environ.get("PYTEST_XDIST_WORKER", "gw0").removeprefix("gw")
    index = int(worker) % _SLICES if worker.isdigit() else 0
    size = (_HIGH - _LOW) // _SLICES
    first = _LOW + index * size
    # A random start keeps separate test runs on one machine apart too.
    start = random.randrange(size)
    return itertools.cycle([first + (start + i) % size for i in range(size)])


_next_port = _candidates()


def free_port(host: str = LOOPBACK) -> int:
    """A TCP port that is free now and that this process has not handed out lately."""
    for port in _next_port:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            try:
                s.bind((host, port))
            except OSError:
                continue
            return port
    raise AssertionError("unreachable: the cycle never ends")


def wait_listening(port: int, timeout: float, host: str = LOOPBACK) -> bool:
    """Whether something accepts connections on `port` within `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            with socket.create_connection((host, port), timeout=1.0):
                return True
        except OSError:
            if time.monotonic() > deadline:
                return False
            time.sleep(0.05)
