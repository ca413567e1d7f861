"""The `mqtt` block: the MQTT listener, as nats-server's `parseMQTT` (server/opts.go) reads it.

pynatsd does not implement MQTT yet: the block is accepted, not validated, and ignored with a
logged warning, so files written for nats-server still load. Reading the block belongs here.
"""

from __future__ import annotations

from pynatsd.config.registry import unsupported

unsupported("MQTT", "mqtt")
