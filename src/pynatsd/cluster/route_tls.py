"""A route connection on a cluster with `tls {}`: the TLS handshake before anything else, then
the route protocol inside it (cluster/link_tls.py).

Corresponds to the TLS step of nats-server's `createRoute` (`server/route.go`): the dialing
side verifies the peer against the CA file and the route URL's host (or, for an IP, the first
host name among the configured routes: `routeTLSName`); "Route connection created" is logged
once the handshake is done.

The plain `Route` pays nothing for this: the cluster makes `TLSRoute`s only when TLS is on.
"""

from __future__ import annotations

import ssl

from pynatsd.cluster.link_tls import TLSLink
from pynatsd.cluster.route import Route


class TLSRoute(TLSLink, Route):
    """A route whose bytes are TLS records from the first one."""

    tls_kind = "route"

    def tls_setup(self) -> tuple[ssl.SSLContext, str | None, float]:
        peer_tls = self.cluster.tls
        assert peer_tls is not None
        if self.solicited:
            return peer_tls.dial, self.cluster.tls_server_name(self.url), peer_tls.block.timeout
        return peer_tls.accept, None, peer_tls.block.timeout

    def tls_pins(self) -> list[str]:
        peer_tls = self.cluster.tls
        assert peer_tls is not None
        return peer_tls.block.pinned_certs
