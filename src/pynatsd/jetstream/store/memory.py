"""The memory store: messages live in the index itself; nothing survives a restart."""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterable
from typing import Any

from ._core import Rec, StoreCore
from .base import StoredMsg, StreamLimits

__all__ = ["MemoryConsumerStateStore", "MemoryStore", "open_memory_store"]


class MemoryStore(StoreCore):
    """A stream store in memory, sized as nats-server's memstore counts bytes."""

    def _msg_size(self, slen: int, hlen: int, dlen: int) -> int:
        # memStoreMsgSize: subject + header + data + 16 (seq and timestamp).
        return slen + hlen + dlen + 16

    def _io_store(
        self,
        seq: int,
        subject: str,
        header: bytes,
        data: bytes,
        ts: int,
        size: int,
        floor: int,
        tombs: list[int],
    ) -> Rec:
        return (subject, ts, size, StoredMsg(seq, subject, bytes(header), bytes(data), ts))

    def _io_remove(self, floor: int, tombs: list[int], erase: Iterable[int] = ()) -> None:
        pass

    def _io_purge_all(self, floor: int, last: int) -> None:
        pass

    def _io_skip(self, last: int, ts: int, floor: int) -> None:
        pass

    def _io_read(self, seq: int, rec: Rec) -> StoredMsg | None:
        msg: StoredMsg = rec[3]
        return msg

    def when_durable(self, seq: int, callback: Callable[[], None]) -> None:
        """Memory is as durable as it gets: call back at once."""
        callback()

    def consumer_state_store(self, name: str) -> MemoryConsumerStateStore:
        self._check_consumer_name(name)
        store = self._consumers.get(name)
        if store is None:
            store = self._consumers[name] = MemoryConsumerStateStore(self, name)
        assert isinstance(store, MemoryConsumerStateStore)
        return store

    def flush(self) -> None:
        pass

    def close(self) -> None:
        self._closed = True

    def delete(self) -> None:
        self._closed = True
        self._recs = {}
        self._subjects = {}
        self._subj_gen += 1
        self._dmap = []
        self._consumers = {}


class MemoryConsumerStateStore:
    """Consumer state of a memory stream: kept as a deep copy, so later edits by the caller do
    not leak in."""

    def __init__(self, owner: MemoryStore, name: str) -> None:
        self._owner = owner
        self._name = name
        self._state: dict[str, Any] | None = None

    def save(self, state: dict[str, Any]) -> None:
        self._state = copy.deepcopy(state)

    def load(self) -> dict[str, Any] | None:
        return None if self._state is None else copy.deepcopy(self._state)

    def flush(self) -> None:
        pass

    def delete(self) -> None:
        self._state = None
        self._owner._forget_consumer(self._name)


def open_memory_store(limits: StreamLimits) -> MemoryStore:
    """A new, empty memory store."""
    return MemoryStore(limits)
