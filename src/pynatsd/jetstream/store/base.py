"""The stream store interface: the types every store speaks, and the errors it raises.

Names follow nats-server's JSON (``StreamConfig`` limits, the stream ``state``) so that one
vocabulary runs from the store to the API replies. Two implementations live beside this module:
:mod:`.memory` (a dict of messages) and :mod:`.file` (segment files of checksummed records).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NamedTuple, Protocol

__all__ = [
    "ConsumerStateStore",
    "InsufficientResourcesError",
    "MaxBytesError",
    "MaxMsgsError",
    "MaxMsgsPerSubjectError",
    "MsgTooLargeError",
    "SequenceMismatchError",
    "StoreClosedError",
    "StoreError",
    "StoredMsg",
    "StreamLimits",
    "StreamState",
    "StreamStore",
]


class StoredMsg(NamedTuple):
    """One stored message, exactly as it was published (a named tuple: one is built for every
    message a consumer reads, and a tuple is the cheapest immutable record to build)."""

    seq: int
    subject: str
    header: bytes
    """The raw header block, ``NATS/1.0\\r\\n`` to the final blank line; b"" if none."""
    data: bytes
    ts: int
    """Nanoseconds since the Unix epoch."""


@dataclass(slots=True)
class StreamLimits:
    """The limits of a stream, named as in the server's JSON ``StreamConfig``.

    -1 (counts, sizes) and 0 (``max_age``) mean unlimited, as in nats-server.
    """

    max_msgs: int = -1
    max_bytes: int = -1
    max_age: int = 0
    """Nanoseconds."""
    max_msgs_per_subject: int = -1
    max_msg_size: int = -1
    discard: str = "old"
    """``"old"`` drops the oldest messages to make room; ``"new"`` refuses the new message."""
    discard_new_per_subject: bool = False


@dataclass(slots=True)
class StreamState:
    """A stream's ``state`` as the server reports it in ``STREAM.INFO``."""

    messages: int
    bytes: int
    first_seq: int
    first_ts: int
    last_seq: int
    last_ts: int
    num_deleted: int
    num_subjects: int
    consumer_count: int = 0


class StoreError(Exception):
    """A store refused an operation. ``description`` is nats-server's text for the same error."""

    description: str = "store error"

    def __init__(self, description: str | None = None) -> None:
        if description is not None:
            self.description = description
        super().__init__(self.description)


# The descriptions are nats-server's own error strings (server/store.go and the JetStream API
# errors), so the API layer can put them in a reply unchanged.
class MaxMsgsError(StoreError):
    description = "maximum messages exceeded"


class MaxBytesError(StoreError):
    description = "maximum bytes exceeded"


class MaxMsgsPerSubjectError(StoreError):
    description = "maximum messages per subject exceeded"


class MsgTooLargeError(StoreError):
    description = "message size exceeds maximum allowed"


class InsufficientResourcesError(StoreError):
    """The disk is full (ENOSPC, EDQUOT) or another write error: nothing was stored."""

    description = "insufficient resources"


class StoreClosedError(StoreError):
    description = "store is closed"


class SequenceMismatchError(StoreError):
    """ErrSequenceMismatch: a skip (or a catch-up's message) does not follow the last
    sequence."""

    description = "expected sequence does not match store"


class ConsumerStateStore(Protocol):
    """Persisted consumer state (delivered, ack floor, pending, redelivered) as a JSON-able dict."""

    def save(self, state: dict[str, Any]) -> None: ...
    def load(self) -> dict[str, Any] | None: ...
    def flush(self) -> None: ...
    def delete(self) -> None: ...


class StreamStore(Protocol):
    """What the JetStream API layer needs from a stream's storage. See docs/jetstream-store.md."""

    @property
    def limits(self) -> StreamLimits: ...
    def store_msg(
        self, subject: str, header: bytes, data: bytes, ts: int | None = None
    ) -> tuple[int, int]: ...
    @property
    def unlimited(self) -> bool: ...
    def store_msgs(
        self, subjects: list[str], headers: list[bytes], datas: list[bytes]
    ) -> tuple[int, int]: ...
    def when_durable(self, seq: int, callback: Callable[[], None]) -> None: ...
    def load_msg(self, seq: int) -> StoredMsg | None: ...
    def load_next_msg(self, filter_subject: str, start_seq: int) -> StoredMsg | None: ...
    def load_next_msgs(
        self, filter_subject: str, start_seq: int, limit: int
    ) -> list[StoredMsg]: ...
    def load_last_msg(self, filter_subject: str) -> StoredMsg | None: ...
    def load_prev_msg(self, filter_subject: str, start_seq: int) -> StoredMsg | None: ...
    def remove_msg(self, seq: int, erase: bool = False) -> bool: ...
    def skip_msgs(self, first: int, num: int) -> None: ...
    def purge(self, subject: str = "", seq: int = 0, keep: int = 0) -> int: ...
    def state(self) -> StreamState: ...
    def deleted_seqs(self) -> list[int]: ...
    def subjects_state(self, filter_subject: str = ">") -> dict[str, int]: ...
    def num_pending(
        self, start_seq: int, filter_subject: str = "", last_per_subject: bool = False
    ) -> int: ...
    def seq_for_time(self, ts: int) -> int: ...
    def msg_ts(self, seq: int) -> int | None: ...
    def change_mark(self) -> tuple[int, int]: ...
    def update_limits(self, limits: StreamLimits) -> None: ...
    def expire(self, now: int | None = None) -> None: ...
    def next_expiry(self) -> int | None: ...
    def consumer_state_store(self, name: str) -> ConsumerStateStore: ...
    def consumer_names(self) -> list[str]: ...
    def flush(self) -> None: ...
    def close(self) -> None: ...
    def delete(self) -> None: ...
