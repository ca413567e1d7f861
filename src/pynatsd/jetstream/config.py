"""What stream and consumer configurations share: nats-server's defaults and limits, name
checks, the server's own metadata keys and the pedantic-mode error.

The configurations themselves are typed: `StreamConfig` and its parts in `stream_config.py`
(checks in `stream_checks.py`), `ConsumerConfig` in `consumer_config.py` (checks in
`consumer_checks.py`), all decoded and encoded as Go structs by `gostruct.py`. The constants
are nats-server's (`server/stream.go`, `server/consumer.go`, `server/jetstream_versioning.go`).
"""

from __future__ import annotations

import re
import secrets
import string

from pynatsd.jetstream.errors import ApiError, js_error
from pynatsd.protocol.headers import header_value

NS = 1_000_000_000
MS = 1_000_000
DEFAULT_DUPLICATE_WINDOW = 120 * NS
DEFAULT_ACK_WAIT = 30 * NS
DEFAULT_MAX_WAITING = 512
DEFAULT_MAX_ACK_PENDING = 1000
DEFAULT_EPHEMERAL_INACTIVE = 5 * NS
DEFAULT_PINNED_TTL = 120 * NS
SERVER_VERSION = "2.15.1"
API_LEVEL = "5"
MAX_NAME_LEN = 255
MAX_DESCRIPTION_LEN = 4 * 1024
MAX_METADATA_LEN = 128 * 1024
STREAM_MAX_REPLICAS = 5
# The metadata keys the server sets itself in replies (setDynamic{Stream,Consumer}Metadata);
# `_nats.req.level` it sets when a config is stored (setStatic...Metadata).
DYNAMIC_METADATA = ("_nats.ver", "_nats.level")
# The request header with the lowest API level a client accepts (ADR-44's versioning).
REQUIRED_API_LEVEL_HEADER = "Nats-Required-Api-Level"
# The header in which a mirror or source names, and the origin answers, the origin stream's
# identity (tells a recreated stream from the one it followed).
STREAM_IDENTITY_HEADER = "Nats-Stream-Identity"
_LEVEL = re.compile(r"[+-]?[0-9]+")


def api_level_unmet(header: bytes) -> bool:
    """nats-server's errorOnRequiredApiLevel: the request names an API level above this
    server's, or one that is not a number."""
    level = header_value(header, REQUIRED_API_LEVEL_HEADER)
    if not level:
        return False
    return _LEVEL.fullmatch(level) is None or int(level) > int(API_LEVEL)


def valid_name(name: str) -> bool:
    """nats-server's isValidAssetName."""
    return bool(name) and not any(c in name for c in " \t\r\n\f.*>\\/")


def has_path_separators(name: str) -> bool:
    return "/" in name or "\\" in name


def pedantic_error(detail: str) -> ApiError:
    """What pedantic mode answers instead of silently fixing a value."""
    return js_error("Pedantic", err=detail)


def static_metadata(metadata: dict[str, str], level: int) -> dict[str, str]:
    """The user's metadata without the dynamic keys, plus `_nats.req.level`: the API level the
    features in use need (jetstream_versioning.go)."""
    out = {k: v for k, v in metadata.items() if k not in DYNAMIC_METADATA}
    out["_nats.req.level"] = str(level)
    return out


def reply_metadata(metadata: dict[str, str], full_metadata: bool) -> dict[str, str]:
    """The metadata as a reply shows it, in key order; info and create replies carry the
    server's own keys too."""
    out = dict(metadata)
    if full_metadata:
        out["_nats.level"] = API_LEVEL
        out["_nats.ver"] = SERVER_VERSION
    return dict(sorted(out.items()))


def ephemeral_name() -> str:
    """nats-server's createConsumerName: 8 characters of a hash of a fresh NUID."""
    alphabet = string.ascii_letters + string.digits
    return "".join(secrets.choice(alphabet) for _ in range(8))
