"""JetStream on one server of a cluster, and the moment a second one shows up.

The servers learn of each other's JetStream through the route INFO's `jetstream` flag
(nats-server's `Info.JetStream`, which every Go server sends too). While this server is the
only JetStream server of its cluster it serves every stream itself, and the other servers
reach its API, streams and consumers through the routes as any service. When a second
JetStream server appears, JetStream becomes clustered (jetstream/cluster/clustered.py): both
are members of the meta group and serve together.

Without a system account there is no meta group (its traffic lives there), and the old rule
applies: exactly one server keeps serving, the first by server name, then by server id. Both
sides of a route see both INFOs, so both come to the same answer without talking; the other
stops its JetStream (the store stays on disk) until it restarts and says so at [ERR], in
`/healthz` and in `/jsz`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pynatsd.logger import log

if TYPE_CHECKING:
    from pynatsd.jetstream.manager import JetStream

_NO_RAFT = (
    "pynatsd has no clustered JetStream (RAFT) yet: JetStream may be enabled on one server "
    "of a cluster only"
)


class JetStreamPeers:
    """The other JetStream-enabled servers of the cluster, as their route INFOs announce them,
    and the decision which server serves JetStream (`JetStream.standing_down` once it is not
    this one)."""

    def __init__(self, js: JetStream) -> None:
        self.js = js
        self.others: dict[str, str] = {}  # server_id -> server_name, JetStream-enabled peers

    def peer_changed(self, server_id: str, info: dict[str, Any] | None) -> None:
        """A peer joined the cluster (with its route INFO) or left it (None)."""
        if info is None:
            self.others.pop(server_id, None)
            if not self.others:
                self.js.conflict = ""  # the other JetStream server left (a stop stays)
            return
        if not info.get("jetstream") or server_id in self.others:
            return
        name = str(info.get("server_name") or server_id)
        self.others[server_id] = name
        js = self.js
        if js.clustered is not None:
            # Clustered JetStream: every JetStream server serves, through the meta group.
            js.clustered.activate(f'JetStream is also enabled on server "{name}"')
            return
        server = js.server
        cluster = server.cluster_name
        if js.standing_down:
            log.error(
                'Server "%s" in cluster "%s" also has JetStream enabled; JetStream on this '
                "server stays stopped. %s",
                name,
                cluster,
                _NO_RAFT,
            )
            return
        if (name, server_id) < (server.server_name, server.server_id):
            js.stand_down(
                f'JetStream is served by server "{name}" in cluster "{cluster}": JetStream is '
                "enabled on more than one server of the cluster"
            )
            log.error(
                'Server "%s" in cluster "%s" also has JetStream enabled and serves it (the first '
                "by server name); JetStream on this server is stopped until it restarts. %s",
                name,
                cluster,
                _NO_RAFT,
            )
            return
        js.conflict = (
            f'JetStream is also enabled on server "{name}" in cluster "{cluster}", which does '
            "not serve it: this server does"
        )
        log.error(
            'Server "%s" in cluster "%s" also has JetStream enabled; it does not serve it, this '
            "server does (the first by server name). %s",
            name,
            cluster,
            _NO_RAFT,
        )
