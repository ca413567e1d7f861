"""JetStream stream storage: a memory store and a crash-safe file store behind one interface.

>>> store = open_memory_store(StreamLimits(max_msgs=1000))
>>> store.store_msg("orders.1", b"", b"hello")[0]
1

See docs/jetstream-store.md for the on-disk format, recovery and the durability policy.
"""

from __future__ import annotations

from .base import (
    ConsumerStateStore,
    InsufficientResourcesError,
    MaxBytesError,
    MaxMsgsError,
    MaxMsgsPerSubjectError,
    MsgTooLargeError,
    SequenceMismatchError,
    StoreClosedError,
    StoredMsg,
    StoreError,
    StreamLimits,
    StreamState,
    StreamStore,
)
from .file import DamageReport, FileConsumerStateStore, FileStore, open_file_store
from .memory import MemoryConsumerStateStore, MemoryStore, open_memory_store

__all__ = [
    "ConsumerStateStore",
    "DamageReport",
    "FileConsumerStateStore",
    "FileStore",
    "InsufficientResourcesError",
    "MaxBytesError",
    "MaxMsgsError",
    "MaxMsgsPerSubjectError",
    "MemoryConsumerStateStore",
    "MemoryStore",
    "MsgTooLargeError",
    "SequenceMismatchError",
    "StoreClosedError",
    "StoreError",
    "StoredMsg",
    "StreamLimits",
    "StreamState",
    "StreamStore",
    "open_file_store",
    "open_memory_store",
]
