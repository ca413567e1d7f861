"""A gateway connection on a gateway with `tls {}` (or a remote with its own): the TLS
handshake before anything else, then the gateway protocol inside it (cluster/link_tls.py).

Corresponds to the TLS step of nats-server's `createGateway` (`server/gateway.go`): "Creating
outbound gateway connection" or "Processing inbound gateway connection" is logged first, then
the handshake is made (an outbound connection with its remote's TLS configuration, verifying
the URL's host or, for an IP, the remote's first host name: `tlsName`; an inbound one with the
gateway's), and only then does the accepting side send its INFO. The pinned certificates are
always the gateway block's.
"""

from __future__ import annotations

import ssl

from pynatsd.cluster.link_tls import TLSLink
from pynatsd.gateway.connection import GatewayConnection


class TLSGatewayConnection(TLSLink, GatewayConnection):
    """A gateway connection whose bytes are TLS records from the first one."""

    tls_kind = "gateway"

    def tls_setup(self) -> tuple[ssl.SSLContext, str | None, float]:
        remote = self.remote
        if remote is not None:
            assert remote.tls is not None
            return remote.tls.dial, remote.tls_server_name(self.url), remote.tls_timeout
        gateway_tls = self.gateway.tls
        assert gateway_tls is not None
        return gateway_tls.accept, None, gateway_tls.block.timeout

    def tls_pins(self) -> list[str]:
        gateway_tls = self.gateway.tls
        return gateway_tls.block.pinned_certs if gateway_tls is not None else []
