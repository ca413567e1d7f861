"""The `leafnodes` block (alias `leaf`): leaf node connections, accepted and solicited, as
nats-server's `parseLeafNodes` (server/opts.go) reads it.

pynatsd does not implement leaf nodes yet: the block is accepted, not validated, and ignored with a
logged warning, so files written for nats-server still load. Reading the block belongs here.
"""

from __future__ import annotations

from pynatsd.config.registry import unsupported

unsupported("leaf nodes", "leaf", "leafnodes")
