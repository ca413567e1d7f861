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
class Options:
    """Everything the server can be told; defaults are nats-server v2.15.1's."""

    host: str = DEFAULT_HOST
    port: int = DEFAULT_PORT
    server_name: str = ""
    client_advertise: str = ""

    http_host: str = ""
    http_port: int = 0
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

    def copy(self) -> Options:
        return dataclasses.replace(self)

    @property
    def auth_required(self) -> bool:
        return bool(self.username or self.authorization or self.users)
