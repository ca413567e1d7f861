"""The composition root: a server with the optional parts its options ask for.

nats-server's `Server.Start` starts monitoring, JetStream and the other listeners itself; here
the core server (`pynatsd.server`) knows none of them, and this module (used by `pynatsd.Server`
for embedding and by the command line's runner) attaches them. Cluster routes, leaf nodes,
gateways and MQTT plug in here the same way.
"""

from __future__ import annotations

from pynatsd.cluster import Cluster
from pynatsd.config.gateway import gateway_enabled
from pynatsd.gateway import Gateway
from pynatsd.jetstream import JetStream
from pynatsd.leafnode import LeafNodes
from pynatsd.monitor.http import MonitorServer
from pynatsd.monitor.system_services import SystemServices
from pynatsd.mqtt.part import MQTT
from pynatsd.server.server import Server


def attach_parts(server: Server) -> None:
    """Attach what `server.options` enables, in nats-server's start-up order: the HTTP monitor,
    the system account's services, JetStream, the cluster's routes, the gateways, leaf nodes,
    then MQTT. Each of the cluster, the gateways and the leaf nodes chains its interest watcher
    onto the account SubLists when it starts, in this order; the gateways set themselves on
    the cluster, so they come after it."""
    opts = server.options
    if opts.http_port or opts.https_port:
        server.add_part(MonitorServer(server))
    if not opts.no_system_account:
        server.add_part(SystemServices(server))
    if opts.jetstream:
        server.add_part(JetStream(server))
    # A cluster block (or flag) without a port serves no routes, as in nats-server.
    if opts.cluster is not None and opts.cluster.port != 0:
        server.add_part(Cluster(server))
    if gateway_enabled(opts):
        server.add_part(Gateway(server))
    leafnodes = opts.leafnodes
    if leafnodes is not None and (leafnodes.port != 0 or leafnodes.remotes):
        server.add_part(LeafNodes(server))
    if opts.mqtt is not None and opts.mqtt.port != 0:
        server.add_part(MQTT(server))
