"""JetStream: persisted streams and consumers, with nats-server's JSON API on `$JS.API.>`."""

from __future__ import annotations

from pynatsd.jetstream.manager import AccountJetStream, JetStream

__all__ = ["AccountJetStream", "JetStream"]
