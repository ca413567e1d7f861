"""Server options: one dataclass whose defaults equal nats-server's.

The command line (`pynatsd.cli`) and the configuration file (`pynatsd.config`) both produce an
`Options`; the server only ever reads this object. Durations are seconds (floats), sizes bytes.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

DEFAULT_PORT = 4222
DEFAULT_HOST = "0.0.0.0"
MAX_PAYLOAD = 1024 * 1024
MAX_CONTROL_LINE = 4096
MAX_PENDING = 64 * 1024 * 1024
MAX_CONNECTIONS = 64 * 1024
PING_INTERVAL = 120.0
PING_MAX = 2
WRITE_DEADLINE = 10.0
AUTH_TIMEOUT = 2.0
LAME_DUCK_DURATION = 120.0
LAME_DUCK_GRACE_PERIOD = 10.0
MAX_CLOSED_CLIENTS = 10000
# The first PING after connect is sent after min(ping_interval, this), to measure RTT early.
FIRST_PING_INTERVAL = 2.0


# allow_responses defaults (nats-server DEFAULT_ALLOW_RESPONSE_MAX_MSGS / _EXPIRATION).
ALLOW_RESPONSE_MAX_MSGS = 1
ALLOW_RESPONSE_EXPIRATION = 120.0
# TLS handshake timeout (nats-server TLS_TIMEOUT) and handshake_first "auto" fallback delay.
TLS_TIMEOUT = 2.0
TLS_HANDSHAKE_FIRST_FALLBACK_DELAY = 0.05
# Response threshold of a service export (nats-server DEFAULT_SERVICE_EXPORT_RESPONSE_THRESHOLD).
SERVICE_EXPORT_RESPONSE_THRESHOLD = 120.0
# Account limits: -1 is "no limit" (jwt.NoLimit), as in nats-server.
NO_LIMIT = -1
CONNECT_ERROR_REPORTS = 3600
RECONNECT_ERROR_REPORTS = 1
JETSTREAM_SYNC_INTERVAL = 120.0


@dataclass(slots=True)
class SubjectPermission:
    """Subjects a user may (allow) or may not (deny) use; None means "no list given"."""

    allow: list[str] | None = None
    deny: list[str] | None = None


@dataclass(slots=True)
class ResponsePermission:
    """allow_responses: replies allowed to requests received, `max_msgs` within `expires` s."""

    max_msgs: int = ALLOW_RESPONSE_MAX_MSGS
    expires: float = ALLOW_RESPONSE_EXPIRATION


@dataclass(slots=True)
class Permissions:
    """A user's publish/subscribe permissions, as in an `authorization` block."""

    publish: SubjectPermission | None = None
    subscribe: SubjectPermission | None = None
    response: ResponsePermission | None = None


@dataclass(slots=True)
class User:
    """A user allowed to connect (username/password or nkey)."""

    username: str = ""
    password: str = ""
    nkey: str = ""
    account: str = "$G"
    permissions: Permissions | None = None
    # Upper-case connection types (STANDARD, WEBSOCKET, LEAFNODE, MQTT, ...); None allows all.
    allowed_connection_types: set[str] | None = None


@dataclass(slots=True)
class StreamExport:
    """`exports: [{stream: "pub.>", accounts: [B]}]`: messages other accounts may import.

    `accounts` None is a public export; a list restricts it to those accounts (an empty list,
    from a token-required export in an account JWT, to none)."""

    subject: str
    accounts: list[str] | None = None
    account_token_position: int = 0


@dataclass(slots=True)
class ServiceExport:
    """`exports: [{service: "help", response: stream}]`: requests other accounts may send."""

    subject: str
    accounts: list[str] | None = None
    # "Singleton" (one reply), "Stream" or "Chunked": how long the reply mapping lives.
    response_type: str = "Singleton"
    response_threshold: float = SERVICE_EXPORT_RESPONSE_THRESHOLD
    latency_subject: str = ""
    latency_sampling: int = 0  # percent; 0 with a latency subject means "from headers"
    account_token_position: int = 0
    allow_trace: bool = False


@dataclass(slots=True)
class StreamImport:
    """`imports: [{stream: {account: A, subject: "pub.>"}, prefix: p}]`.

    `to` is the subject (pattern) the messages get in the importing account: `prefix.subject`
    with a prefix, the `to` mapping, or the exported subject itself."""

    account: str
    subject: str
    to: str = ""
    prefix: str = ""
    allow_trace: bool = False


@dataclass(slots=True)
class ServiceImport:
    """`imports: [{service: {account: A, subject: help}, to: ahelp}]`.

    Requests published on `to` in the importing account go to `subject` in `account`."""

    account: str
    subject: str
    to: str = ""
    share: bool = False


@dataclass(slots=True)
class AccountLimits:
    """`accounts.<A>.limits`; NO_LIMIT (-1) when not set, like nats-server."""

    max_connections: int = NO_LIMIT
    max_subscriptions: int = NO_LIMIT
    max_payload: int = NO_LIMIT
    max_leafnodes: int = NO_LIMIT


@dataclass(slots=True)
class JetStreamAccountLimits:
    """`accounts.<A>.jetstream`: enabled, with these limits (-1: unlimited / server's)."""

    max_memory: int = NO_LIMIT
    max_store: int = NO_LIMIT
    max_streams: int = NO_LIMIT
    max_consumers: int = NO_LIMIT
    max_ack_pending: int = NO_LIMIT
    memory_max_stream_bytes: int = NO_LIMIT
    store_max_stream_bytes: int = NO_LIMIT
    max_bytes_required: bool = False
    # Limits per replication tier ("R1", "R3"; an account JWT's `tiered_limits`). When set,
    # the limits above are unused (nats-server shows them as zeros) and a stream draws on the
    # tier of its replica count.
    tiers: dict[str, JetStreamAccountLimits] | None = None


@dataclass(frozen=True, slots=True)
class MapDest:
    """One destination of a subject mapping (nats-server's `MapDest`): `weight` in percent,
    as written; `cluster` scopes it to one cluster (a server outside a cluster ignores it)."""

    subject: str
    weight: int = 100
    cluster: str = ""


@dataclass(frozen=True, slots=True)
class SubjectMapping:
    """One entry of a `mappings {}` block: the source subject and where it goes."""

    source: str
    destinations: tuple[MapDest, ...]


@dataclass(slots=True)
class AccountConfig:
    """One account of the `accounts {}` block. Its users are in `Options.users` with
    `User.account` set to this account's name, as nats-server keeps them in one list."""

    name: str
    nkey: str = ""
    stream_exports: list[StreamExport] = field(default_factory=list)
    service_exports: list[ServiceExport] = field(default_factory=list)
    stream_imports: list[StreamImport] = field(default_factory=list)
    service_imports: list[ServiceImport] = field(default_factory=list)
    limits: AccountLimits = field(default_factory=AccountLimits)
    jetstream: JetStreamAccountLimits | None = None  # None: JetStream disabled for the account
    default_permissions: Permissions | None = None
    mappings: list[SubjectMapping] = field(default_factory=list)
    # Where traces of messages with a sampled `traceparent` go (`msg_trace`), and the
    # percentage of them traced.
    trace_dest: str = ""
    trace_sampling: int = 0
    # An account JWT's `name` (nats-server's nameTag): shown beside the key in logs and in
    # $SYS.REQ.USER.INFO.
    name_tag: str = ""


@dataclass(slots=True)
class TLSBlock:
    """A `tls {}` block of a connection between servers (nats-server's TLSConfigOpts as
    getTLSConfig reads it for routes): both sides verify, so a peer's certificate is always
    required, and the CA file verifies the peers we dial too."""

    cert_file: str = ""
    key_file: str = ""
    ca_file: str = ""
    insecure: bool = False  # dialing: skip verifying the peer's certificate (nats-server warns)
    timeout: float = 2.0  # seconds the handshake may take
    min_version: str = ""  # "1.2" or "1.3"; "" is TLS 1.2
    ciphers: list[str] = field(default_factory=list)  # Go cipher suite names
    pinned_certs: list[str] = field(default_factory=list)  # hex sha256 of SPKI DER


@dataclass(slots=True)
class ClusterOptions:
    """The `cluster {}` block and the `--cluster*`/`--routes` flags (nats-server's
    ClusterOpts): routes to the other servers of a cluster."""

    name: str = ""  # "" until set: a dynamic (generated) name that adopts a configured one
    host: str = "0.0.0.0"
    port: int = 0  # the route listener's port; -1 picks a free one
    advertise: str = ""  # host:port announced to peers instead of the listen address
    no_advertise: bool = False  # keep our client URLs out of route INFO and clients' connect_urls
    routes: list[str] = field(default_factory=list)  # explicit route URLs, solicited forever
    connect_retries: int = 0  # extra attempts for implicit (gossiped) routes
    connect_backoff: bool = False  # double the retry delay up to 30 s instead of a fixed 1 s
    username: str = ""  # `authorization { user, password }`: what peers must send in CONNECT
    password: str = ""
    auth_timeout: float = 2.0
    tls_timeout: float = 2.0
    tls: TLSBlock | None = None  # `tls {}`: every route connection is TLS, both ways
    # Route permissions: `import` is what peers may send us (publish), `export` what we send
    # them (subscribe interest).
    permissions: Permissions | None = None
    pool_size: int = 3  # nats-server's default; -1 disables pooling and pinned accounts
    accounts: list[str] = field(default_factory=list)  # accounts pinned to their own route
    compression: str = "accept"  # routes never start compression; pynatsd declines it
    ping_interval: float = 30.0  # capped at 30 s for routes, as nats-server does
    ping_max: int = 2
    write_deadline: float = 0.0  # 0: the server's write_deadline
    write_timeout: str = ""  # "": the server's write_timeout policy


@dataclass(slots=True)
class LeafUser:
    """A `leafnodes { authorization { users: [...] } }` entry: a leaf that sends this user and
    password is bound to `account` ("" for the global account)."""

    username: str = ""
    password: str = ""
    account: str = ""


@dataclass(slots=True)
class RemoteLeafOptions:
    """One `leafnodes { remotes: [...] }` entry (nats-server's RemoteLeafOpts): a hub this
    server dials as a leaf, binding `local_account` to the account the hub gives it."""

    urls: list[str] = field(default_factory=list)
    local_account: str = ""  # "": the global account
    credentials: str = ""  # a .creds file: user JWT and nkey seed
    nkey: str = ""  # a user nkey seed that signs the hub's nonce
    deny_imports: list[str] = field(default_factory=list)  # subjects not taken from the hub
    deny_exports: list[str] = field(default_factory=list)  # subjects not sent to the hub
    hub: bool = False  # declare ourselves the hub on this connection
    no_randomize: bool = False
    name: str = ""
    disabled: bool = False
    compression: str = ""  # pynatsd never compresses a leaf link (see docs/leafnodes.md)
    # The remote's `tls {}` block: TLS after the hub's INFO (also when the hub requires it).
    tls: bool = False
    tls_cert: str = ""
    tls_key: str = ""
    tls_ca_cert: str = ""
    tls_insecure: bool = False  # skip verifying the hub's certificate
    tls_timeout: float = 0.0
    tls_handshake_first: bool = False  # TLS at once, before the hub's INFO


@dataclass(slots=True)
class LeafNodeOptions:
    """The `leafnodes {}` block (nats-server's LeafNodeOpts): the listener leafs dial (the hub
    role) and the remotes this server dials (the leaf role)."""

    host: str = ""
    port: int = 0  # 0: no listener; -1 picks a free port
    username: str = ""  # `authorization { user, password }`: the one user leafs must send
    password: str = ""
    nkey: str = ""  # `authorization { nkey }`: the one nkey leafs must sign with
    account: str = ""  # the account the single user or nkey binds to
    users: list[LeafUser] = field(default_factory=list)
    auth_timeout: float = 0.0
    tls_timeout: float = 0.0
    # The listener's `tls {}` block, as the client one (`Options.tls*`): leafs are told
    # `tls_required` in the INFO and upgrade after it. None: plain text.
    tls: Options | None = None
    advertise: str = ""
    no_advertise: bool = False
    min_version: str = ""
    compression: str = ""
    isolate_leafnode_interest: bool = False
    reconnect_interval: float = 1.0  # how soon a remote is dialed again (nats-server's 1 s)
    dial_timeout: float = 1.0
    write_deadline: float = 0.0
    remotes: list[RemoteLeafOptions] = field(default_factory=list)


@dataclass(slots=True)
class RemoteGatewayOptions:
    """One entry of `gateway { gateways: [...] }` (nats-server's RemoteGatewayOpts): a remote
    cluster to dial, by its gateway name and URLs."""

    name: str = ""
    urls: list[str] = field(default_factory=list)
    # Its own `tls {}` (its dials use it instead of the gateway's), and that block's timeout.
    tls: TLSBlock | None = None
    tls_timeout: float = 0.0


@dataclass(slots=True)
class GatewayOptions:
    """The `gateway {}` block (nats-server's GatewayOpts): connections to the other clusters
    of a super-cluster."""

    name: str = ""  # this cluster's gateway name (it becomes the cluster name)
    host: str = ""
    port: int = 0  # the gateway listener's port; -1 picks a free one
    advertise: str = ""  # host:port announced instead of the listen address
    username: str = ""  # `authorization { user, password }`: what remotes send in CONNECT
    password: str = ""
    auth_timeout: float = 0.0
    tls_timeout: float = 0.0
    tls: TLSBlock | None = None  # `tls {}`: every gateway connection is TLS, both ways
    connect_retries: int = 0  # extra attempts for implicit (gossiped) gateways
    connect_backoff: bool = False
    gateways: list[RemoteGatewayOptions] = field(default_factory=list)
    reject_unknown: bool = False  # refuse inbound gateways that are not configured
    write_deadline: float = 0.0
    write_timeout: str = ""


@dataclass(slots=True)
class MQTTOptions:
    """The `mqtt {}` block and `--mqtt_port` (nats-server's MQTTOpts)."""

    host: str = ""  # "": the server's host
    port: int = 0  # -1 picks a free one
    tls_cert: str = ""
    tls_key: str = ""
    tls_ca_cert: str = ""
    tls_verify: bool = False  # `verify`: a client certificate is required and verified
    tls_map: bool = False  # `verify_and_map`: the certificate names the user (MQTT's alone)
    tls_pinned_certs: list[str] = field(default_factory=list)  # hex sha256 of SPKI DER
    tls_timeout: float = 0.0  # seconds the TLS handshake may take; 0: the default (2 s)
    # `authorization { user, password, token, timeout }`: MQTT's own credentials, which
    # replace the server's for MQTT clients (nats-server's authOverride).
    username: str = ""
    password: str = ""
    token: str = ""
    auth_timeout: float = 0.0  # 0: the server's auth_timeout
    no_auth_user: str = ""
    ack_wait: float = 30.0  # seconds before an unacknowledged QoS 1/2 message is sent again
    max_ack_pending: int = 1024  # QoS 1/2 messages in flight per subscription
    js_api_timeout: float = 5.0
    js_domain: str = ""
    stream_replicas: int = 0
    consumer_replicas: int = 0
    consumer_memory_storage: bool = False
    consumer_inactive_threshold: float = 0.0
    reject_qos2_publish: bool = False
    downgrade_qos2_subscribe: bool = False


@dataclass(slots=True)
class Options:
    """Everything the server can be told; defaults are nats-server v2.15.1's."""

    host: str = DEFAULT_HOST
    port: int = DEFAULT_PORT
    server_name: str = ""
    client_advertise: str = ""

    http_host: str = ""
    http_port: int = 0
    # The monitoring port over TLS (the `tls` block's certificate, no client certificates
    # asked for); exclusive with http_port, as in nats-server.
    https_port: int = 0
    http_base_path: str = ""

    max_payload: int = MAX_PAYLOAD
    max_control_line: int = MAX_CONTROL_LINE
    max_pending: int = MAX_PENDING
    # -1 means "reject every client" (a config value of 0), as in nats-server.
    max_connections: int = MAX_CONNECTIONS
    max_subscriptions: int = 0
    max_sub_tokens: int = 0
    ping_interval: float = PING_INTERVAL
    ping_max: int = PING_MAX
    write_deadline: float = WRITE_DEADLINE
    no_header_support: bool = False
    disable_sublist_cache: bool = False
    max_closed_clients: int = MAX_CLOSED_CLIENTS
    max_traced_msg_len: int = 0

    # Simple authentication (--user/--pass, --auth) and users lists.
    username: str = ""
    password: str = ""
    authorization: str = ""
    auth_timeout: float = AUTH_TIMEOUT
    users: list[User] = field(default_factory=list)
    no_auth_user: str = ""

    lame_duck_duration: float = LAME_DUCK_DURATION
    lame_duck_grace_period: float = LAME_DUCK_GRACE_PERIOD

    debug: bool = False
    trace: bool = False
    trace_verbose: bool = False
    logtime: bool = True
    logtime_utc: bool = False
    log_file: str = ""
    log_size_limit: int = 0
    log_max_num: int = 0
    syslog: bool = False
    remote_syslog: str = ""

    pid_file: str = ""
    ports_file_dir: str = ""
    config_file: str = ""
    server_tags: list[str] = field(default_factory=list)

    jetstream: bool = False
    store_dir: str = ""

    # Added for the configuration file (pynatsd.config); same defaults as nats-server.
    trace_headers: bool = False
    write_timeout: str = "default"  # policy on a write deadline: default, close or retry
    system_account: str = ""  # empty: the server's default ($SYS)
    no_system_account: bool = False
    connect_error_reports: int = CONNECT_ERROR_REPORTS
    reconnect_error_reports: int = RECONNECT_ERROR_REPORTS
    server_metadata: dict[str, str] = field(default_factory=dict)
    no_fast_producer_stall: bool = False
    jetstream_max_memory: int = -1  # -1: not set, sized by the server as nats-server does
    jetstream_max_store: int = -1
    jetstream_domain: str = ""
    jetstream_strict: bool = True
    jetstream_sync_interval: float = JETSTREAM_SYNC_INTERVAL
    jetstream_sync_always: bool = False
    jetstream_unique_tag: str = ""
    # `jetstream { limits { batch { ... } } }`: 0 keeps nats-server's defaults.
    jetstream_batch_inflight_per_stream: int = 0
    jetstream_batch_inflight_total: int = 0
    jetstream_batch_max_msgs: int = 0
    jetstream_batch_timeout: float = 0.0

    # Accounts (`accounts {}`); users of an account are in `users` with `User.account` set.
    accounts: dict[str, AccountConfig] = field(default_factory=dict)
    # The top-level `mappings {}`: subject mappings of the global account ($G); None when the
    # file has no such block (a reload then leaves $G's mappings as they are, as nats-server).
    mappings: list[SubjectMapping] | None = None

    # Operator (decentralized JWT) mode: operator JWTs (raw, verified when loaded), the keys
    # they trust, the account resolver and its preloaded account JWTs (public key -> JWT).
    operator_jwts: list[str] = field(default_factory=list)
    trusted_keys: list[str] = field(default_factory=list)
    resolver: str = ""  # "", "MEMORY", "URL", "FULL" or "CACHE"
    resolver_url: str = ""
    resolver_dir: str = ""
    resolver_preload: dict[str, str] = field(default_factory=dict)
    resolver_pinned_accounts: list[str] = field(default_factory=list)
    default_sentinel: str = ""

    # Clustering (the `cluster {}` block, `--cluster`, `--routes`); None: not clustered.
    cluster: ClusterOptions | None = None
    # Leaf nodes (the `leafnodes {}` block); None: no leaf listener and no remotes.
    leafnodes: LeafNodeOptions | None = None
    # Gateways to other clusters (the `gateway {}` block); None: no gateway.
    gateway: GatewayOptions | None = None
    # The MQTT listener (the `mqtt {}` block, `--mqtt_port`); None: no MQTT.
    mqtt: MQTTOptions | None = None

    # WebSocket listener (the `websocket {}` block): the same protocol in WebSocket frames.
    websocket_host: str = ""
    websocket_port: int = 0
    websocket_no_tls: bool = False
    websocket_tls_cert: str = ""
    websocket_tls_key: str = ""
    websocket_tls_ca_cert: str = ""
    websocket_compression: bool = False
    websocket_same_origin: bool = False
    websocket_allowed_origins: list[str] = field(default_factory=list)

    # TLS for client connections (`--tls*` flags or the `tls {}` block).
    tls: bool = False
    tls_cert: str = ""
    tls_key: str = ""
    tls_ca_cert: str = ""
    tls_verify: bool = False
    tls_map: bool = False  # verify_and_map: the certificate names the user
    tls_timeout: float = TLS_TIMEOUT
    tls_handshake_first: bool = False
    tls_handshake_first_fallback: float = 0.0  # > 0: "auto", fall back to INFO first after it
    tls_min_version: str = ""  # "1.2" or "1.3"; "" is TLS 1.2
    tls_ciphers: list[str] = field(default_factory=list)  # Go cipher suite names
    tls_pinned_certs: list[str] = field(default_factory=list)  # hex sha256 of SPKI DER
    tls_rate_limit: int = 0
    allow_non_tls: bool = False
    # True when `authorization { timeout }` was given; otherwise TLS raises the auth timeout
    # to tls_timeout + 1 s, as nats-server does.
    auth_timeout_set: bool = False

    def copy(self) -> Options:
        return dataclasses.replace(self)

    @property
    def auth_required(self) -> bool:
        return bool(self.username or self.authorization or self.users)
