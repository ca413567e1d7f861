"""A JetStream consumer (nats-server's `server/consumer.go`): `Consumer` and its parts, one
module each (see consumer.py)."""

from __future__ import annotations

from pynatsd.jetstream.consumer.consumer import Consumer

__all__ = ["Consumer"]
