"""The errors the `nats` data source raises. Each names the option or the cause, because Spark
wraps them in long Java stack traces and the first line is all most users read."""

from __future__ import annotations


class NatsSparkError(Exception):
    """Base class: every error of the data source starts with `nats:`."""

    def __init__(self, message: str) -> None:
        super().__init__(f"nats: {message}")


class OptionError(NatsSparkError, ValueError):
    """An option is unknown, missing, malformed or does not apply to this kind of query."""

    def __init__(self, option: str, message: str) -> None:
        self.option = option
        super().__init__(f"option '{option}': {message}")


class ConnectError(NatsSparkError, ConnectionError):
    """No server could be reached, or the server refused us (credentials, TLS)."""


class ProtocolError(NatsSparkError):
    """The server said something we cannot understand, or reported an error (-ERR)."""


class ConnectionLost(ProtocolError):
    """The server closed an established connection (restarted, or a node of a cluster left)."""


class RequestTimeout(NatsSparkError, TimeoutError):
    """A request or an ack did not arrive in time."""


class NoResponders(NatsSparkError):
    """Nobody listens on a request subject: for `$JS.API.*` it means JetStream is not enabled."""


class JetStreamError(NatsSparkError):
    """The JetStream API answered with an error object (code, err_code, description)."""

    def __init__(self, what: str, code: int, err_code: int, description: str) -> None:
        self.code = code
        self.err_code = err_code
        self.description = description
        super().__init__(f"{what}: {description} (code {code}, err_code {err_code})")


class StreamNotFound(NatsSparkError, LookupError):
    """The stream named by the `stream` option does not exist."""


class DataLossError(NatsSparkError):
    """Messages the query must read were already removed by the stream's retention."""
