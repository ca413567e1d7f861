"""The `cluster` block: routes to the other servers of a cluster, as nats-server's
`parseCluster` (server/opts.go) reads it.

pynatsd does not implement clustering yet: the block is accepted, not validated, and ignored with a
logged warning, so files written for nats-server still load. Reading the block belongs here.
"""

from __future__ import annotations

from pynatsd.config.registry import unsupported

unsupported("clustering", "cluster")
