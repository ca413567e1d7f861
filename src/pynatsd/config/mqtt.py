"""The `mqtt` block: the MQTT listener, as nats-server's `parseMQTT` (server/opts.go) reads it,
and the start-up checks of its `validateMQTTOptions` (server/mqtt.go).
"""

from __future__ import annotations

from pynatsd.config.authorization import parse_authorization
from pynatsd.config.cluster import _duration as parse_duration
from pynatsd.config.parser import Node
from pynatsd.config.registry import (
    Abort,
    Loader,
    config_key,
    want_bool,
    want_int,
    want_map,
    want_str,
)
from pynatsd.config.tls import read_tls_block
from pynatsd.config.values import go_atoi, split_host_port
from pynatsd.options import MQTTOptions, Options
from pynatsd.tls import TLSConfigError, server_context

# nats-server's error texts (errMQTT* in server/mqtt.go).
SERVER_NAME_MUST_BE_SET = "mqtt requires server name to be explicitly set"
NEEDS_JETSTREAM = "mqtt requires JetStream to be enabled if running in standalone mode"
USER_WITH_USERS = "mqtt authentication username not compatible with presence of users/nkeys"
TOKEN_WITH_USERS = "mqtt authentication token not compatible with presence of users/nkeys"


@config_key("mqtt")
def _apply_mqtt(loader: Loader, name: str, node: Node) -> None:
    mqtt = loader.opts.mqtt = loader.opts.mqtt or MQTTOptions()
    for field_name, entry in want_map(loader, node).items():
        try:
            _field(loader, mqtt, field_name.lower(), entry)
        except Abort:
            continue


def _field(loader: Loader, mqtt: MQTTOptions, key: str, entry: Node) -> None:
    if key == "listen":
        host, port = split_host_port(str(entry.value))
        mqtt.host = host or mqtt.host
        if port:
            mqtt.port = go_atoi(port)
    elif key == "port":
        mqtt.port = want_int(loader, entry)
    elif key in ("host", "net"):
        mqtt.host = want_str(loader, entry)
    elif key == "tls":
        # nats-server reads it with parseTLS, as the client listener's block.
        draft = read_tls_block(loader, entry)
        mqtt.tls_cert, mqtt.tls_key, mqtt.tls_ca_cert = draft.cert, draft.key, draft.ca
        mqtt.tls_verify, mqtt.tls_map = draft.verify, draft.tls_map
        mqtt.tls_pinned_certs = draft.pinned
        mqtt.tls_timeout = draft.timeout
        # nats-server builds the TLS configuration (and reads the files) while loading.
        files = Options(tls=True, tls_cert=draft.cert, tls_key=draft.key, tls_ca_cert=draft.ca)
        files.tls_min_version, files.tls_ciphers = draft.min_version, draft.ciphers
        try:
            server_context(files)
        except TLSConfigError as e:
            loader.error(entry, str(e))
    elif key in ("authorization", "authentication"):
        auth = parse_authorization(loader, key, entry)
        mqtt.username, mqtt.password, mqtt.token = auth.user, auth.password, auth.token
        mqtt.auth_timeout = auth.timeout
    elif key == "no_auth_user":
        mqtt.no_auth_user = want_str(loader, entry)
    elif key in ("ack_wait", "ackwait"):
        mqtt.ack_wait = parse_duration(loader, "ack_wait", entry)
    elif key in ("js_api_timeout", "api_timeout"):
        mqtt.js_api_timeout = parse_duration(loader, "js_api_timeout", entry)
    elif key in ("max_ack_pending", "max_pending", "max_inflight"):
        value = want_int(loader, entry)
        if value < 0 or value > 0xFFFF:
            loader.error(entry, f"invalid value {value}, should in [0..65535] range")
        else:
            mqtt.max_ack_pending = value
    elif key == "js_domain":
        mqtt.js_domain = want_str(loader, entry)
    elif key == "stream_replicas":
        mqtt.stream_replicas = want_int(loader, entry)
    elif key == "consumer_replicas":
        loader.warn(entry, key, "consumer replicas setting ignored in this server version")
    elif key == "consumer_memory_storage":
        mqtt.consumer_memory_storage = want_bool(loader, entry)
    elif key in ("consumer_inactive_threshold", "consumer_auto_cleanup"):
        mqtt.consumer_inactive_threshold = parse_duration(
            loader, "consumer_inactive_threshold", entry
        )
    elif key in ("reject_qos2_publish", "downgrade_qos2_subscribe"):
        setattr(mqtt, key, want_bool(loader, entry))
    else:
        loader.unknown(key, entry)


def startup_problems(opts: Options) -> list[str]:
    """validateMQTTOptions: what nats-server refuses to start with (a block without a port
    configures nothing)."""
    mqtt = opts.mqtt
    if mqtt is None or mqtt.port == 0:
        return []
    clustered = opts.cluster is not None and opts.cluster.port != 0
    gateway = opts.gateway is not None and opts.gateway.port != 0
    if not opts.server_name and (clustered or gateway):
        return [SERVER_NAME_MUST_BE_SET]
    if opts.users:
        if mqtt.username:
            return [USER_WITH_USERS]
        if mqtt.token:
            return [TOKEN_WITH_USERS]
    # A leaf node may reach a JetStream elsewhere (`js_domain`), so nats-server lets it be.
    leaf = opts.leafnodes is not None and (opts.leafnodes.port != 0 or opts.leafnodes.remotes)
    if not opts.jetstream and not (clustered or gateway or leaf):
        return [NEEDS_JETSTREAM]
    return []
