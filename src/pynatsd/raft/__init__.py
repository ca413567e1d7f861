"""RAFT as nats-server's NRG ("NATS RAFT Groups", `server/raft.go`).

The groups, their wire format on the system account's `$NRG.>` subjects and their files in the
store directory are nats-server's, so a pynatsd node can be a peer in the same group as Go nodes.

- `wire`: the binary encodings of entries, append entries, votes and their responses, the peer
  state and the term-and-vote record (sans-IO, no imports of the server).
- `node`: the sans-IO state machine of one group member: messages and timer expiries in,
  messages, timer requests, commits and leader changes out.
- `log`: the write-ahead log of one group (memory or file).
- `files`: the group directory's `peers.idx`, `tav.idx` and snapshots, in nats-server's layout.
- `group`: a group opened from its directory (bootstrapped or recovered), as nats-server does.
- `transport`: the thin asyncio layer that carries a node's messages on `$NRG.>` subjects.
"""
