"""Shared test support: every helper that more than one test file needs, kept once.

Imported as `support` (pyproject's pytest `pythonpath` puts tests/ on sys.path):

- `ports`: free loopback ports.
- `configured`: pynatsd in this process, configured from configuration text.
- `natsserver`: where the real nats-server binary is (the reference for differential tests).
- `processes`: a server (nats-server or pynatsd) as a subprocess, started and waited for.
- `cluster`: a cluster of such processes (any mix of kinds) on loopback; kill -9, restart.
- `rawclient`: asyncio raw-protocol clients (bytes in, bytes out, no client library between).
- `recording`: a blocking client that records every byte a server sends (differential tests).
- `lineclient`: a blocking line-level client for CONNECT/PING exchanges (auth tests).
- `normalise`: makes two servers' output comparable (volatile INFO values, ack timestamps).
- `jwts`, `certs`: nkeys, NATS JWTs and X.509 certificates made per run.
- `jspair`: JetStream request scripts run side by side on nats-server and pynatsd.
- `spark`: data in and out of NATS through nats-py, for the Spark data source tests.
- `memory`: a process's resident memory (VmRSS).

No pytest fixtures live here (fixtures stay in conftest.py files and test modules); these are
plain functions and classes, usable from a REPL while debugging a mismatch.
"""
