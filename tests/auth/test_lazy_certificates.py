"""cryptography's x509 is imported only by a server that maps certificates to users: it is
a tenth of a second of every start-up otherwise (nats.py's reconnect tests restart servers
and give them about that long)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pynatsd

SCRIPT = """
import asyncio, sys
import pynatsd
from pynatsd.config import load_config

async def main(conf):
    options = load_config(conf).options if conf else None
    async with pynatsd.Server(options, port=0):
        pass

asyncio.run(main(sys.argv[1] if len(sys.argv) > 1 else None))
print(any(name.split(".")[0] == "cryptography" for name in sys.modules))
"""


def _imports_cryptography(*args: str) -> bool:
    env_path = str(Path(pynatsd.__file__).parents[1])
    out = subprocess.run(
        [sys.executable, "-c", SCRIPT, *args],
        capture_output=True,
        text=True,
        timeout=60,
        env={"PYTHONPATH": env_path, "PATH": "/usr/bin:/bin"},
        check=True,
    )
    return out.stdout.strip().splitlines()[-1] == "True"


def test_a_plain_server_does_not_import_cryptography() -> None:
    assert not _imports_cryptography()


def test_a_server_with_users_does_not_import_cryptography(tmp_path: Path) -> None:
    conf = tmp_path / "users.conf"
    conf.write_text(
        'port: -1\nauthorization { users = [{user: "a", password: "b"}, {user: "CN=x"}] }\n'
    )
    assert not _imports_cryptography(str(conf))
