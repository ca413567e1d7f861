"""Version numbers: pynatsd's own, and the nats-server release whose protocol it speaks."""

from __future__ import annotations

__version__ = "0.1.0"
# The nats-server release whose protocol and behaviour pynatsd implements. Clients choose their
# code paths by the INFO `version`, so pynatsd reports this one; `go` names pynatsd itself.
COMPAT_VERSION = "2.15.1"
PROTO_VERSION = 1
# The JetStream API level nats-server 2.15 announces (INFO `api_lvl`).
JS_API_LEVEL = 5
