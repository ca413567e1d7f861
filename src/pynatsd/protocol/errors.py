"""Protocol error texts, spelled exactly as nats-server sends them (inside `-ERR '...'`)."""

from __future__ import annotations

UNKNOWN_PROTOCOL_OPERATION = "Unknown Protocol Operation"
AUTHORIZATION_VIOLATION = "Authorization Violation"
AUTHENTICATION_TIMEOUT = "Authentication Timeout"
AUTHENTICATION_EXPIRED = "User Authentication Expired"
ACCOUNT_AUTHENTICATION_EXPIRED = "Account Authentication Expired"
MAXIMUM_PAYLOAD_VIOLATION = "Maximum Payload Violation"
MAXIMUM_CONTROL_LINE_EXCEEDED = "maximum control line exceeded"
MAXIMUM_CONNECTIONS_EXCEEDED = "maximum connections exceeded"
MAXIMUM_ACCOUNT_CONNECTIONS_EXCEEDED = "maximum account active connections exceeded"
MAXIMUM_SUBSCRIPTIONS_EXCEEDED = "maximum subscriptions exceeded"
STALE_CONNECTION = "Stale Connection"
INVALID_CLIENT_PROTOCOL = "invalid client protocol"
NO_RESPONDERS_REQUIRES_HEADERS = "no responders requires headers support"
SECURE_CONNECTION_TLS_REQUIRED = "Secure Connection - TLS Required"
CONNECTION_THROTTLING = "Connection throttling is active. Please try again later."
INVALID_SUBJECT = "Invalid Subject"
INVALID_PUBLISH_SUBJECT = "Invalid Publish Subject"


def permissions_publish(subject: str) -> str:
    return f'Permissions Violation for Publish to "{subject}"'


def permissions_publish_reply(reply: str) -> str:
    return f'Permissions Violation for Publish with Reply of "{reply}"'


def permissions_subscribe(subject: str, queue: str | None = None) -> str:
    if queue:
        return f'Permissions Violation for Subscription to "{subject}" using queue "{queue}"'
    return f'Permissions Violation for Subscription to "{subject}"'


def permissions_subscribe_removed(subject: str, queue: str | None, sid: str) -> str:
    """A reload took the permission away: the subscription is removed (client.go's
    processSubsOnConfigReload)."""
    if queue:
        return (
            f'Permissions Violation for Subscription to "{subject}" using queue "{queue}" '
            f'(sid "{sid}")'
        )
    return f'Permissions Violation for Subscription to "{subject}" (sid "{sid}")'


def permissions_subscribe_tokens(subject: str) -> str:
    return f'Permissions Violation for Subscription to "{subject}", too many tokens'


# Close reasons, as /connz?state=closed reports them (nats-server's ClosedState strings).
class CloseReason:
    CLIENT_CLOSED = "Client Closed"
    AUTHENTICATION_TIMEOUT = "Authentication Timeout"
    AUTHENTICATION_VIOLATION = "Authentication Failure"
    SLOW_CONSUMER_PENDING_BYTES = "Slow Consumer (Pending Bytes)"
    SLOW_CONSUMER_WRITE_DEADLINE = "Slow Consumer (Write Deadline)"
    WRITE_ERROR = "Write Error"
    READ_ERROR = "Read Error"
    PARSE_ERROR = "Parse Error"
    STALE_CONNECTION = "Stale Connection"
    PROTOCOL_VIOLATION = "Protocol Violation"
    BAD_CLIENT_PROTOCOL_VERSION = "Bad Client Protocol Version"
    MAX_CONNECTIONS_EXCEEDED = "Maximum Connections Exceeded"
    MAX_PAYLOAD_EXCEEDED = "Maximum Message Payload Exceeded"
    MAX_CONTROL_LINE_EXCEEDED = "Maximum Control Line Exceeded"
    MAX_SUBSCRIPTIONS_EXCEEDED = "Maximum Subscriptions Exceeded"
    SERVER_SHUTDOWN = "Server Shutdown"
    MISSING_ACCOUNT = "Missing Account"
    ROUTE_REMOVED = "Route Removed"
    AUTHENTICATION_EXPIRED = "Authentication Expired"
    MESSAGE_HEADER_VIOLATION = "Message Header Violation"
    NO_RESPONDERS_REQUIRES_HEADERS = "No Responders Requires Headers"
    LAME_DUCK_MODE = "Lame Duck Mode"
    KICKED = "Kicked"
    TLS_HANDSHAKE_ERROR = "TLS Handshake Failure"
    WRONG_PORT = "Wrong Port"
