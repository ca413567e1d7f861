"""The `gateway` block: connections between clusters (a supercluster), as nats-server's
`parseGateway` (server/opts.go) reads it.

pynatsd does not implement gateways yet: the block is accepted, not validated, and ignored with a
logged warning, so files written for nats-server still load. Reading the block belongs here.
"""

from __future__ import annotations

from pynatsd.config.registry import unsupported

unsupported("gateways", "gateway")
