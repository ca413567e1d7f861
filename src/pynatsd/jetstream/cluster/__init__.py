"""Clustered JetStream (nats-server's `server/jetstream_cluster.go`), on NRG (`pynatsd.raft`).

- `assignments`: the meta group's entries (stream and consumer assignments: an op byte and
  nats-server's JSON) and its snapshot, and the map of assignments every member keeps.
- `meta`: this server's member of the cluster-wide meta group `_meta_`.
"""
