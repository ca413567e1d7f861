"""The count of a consumer's messages not yet delivered (Go's o.npc, `num_pending`).

Each ack reply carries it, so it is asked for once per message delivered. With one literal
filter (or none) the store counts in O(log n) (`consumer_config.cheap_filters`): the count is
kept while the store has not changed (a delivery takes one off) and counted again once it has.
With a wildcard or several filters it is counted once and then kept up to date (a delivery -1,
a new matching message +1; anything else, such as a purge or a limit dropping messages,
forgets it): a count over every subject per message would be quadratic. What the count
needs of its consumer is a `CountOwner`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from pynatsd.jetstream.consumer_config import cheap_filters

if TYPE_CHECKING:
    from pynatsd.jetstream.consumer.ports import ConsumedStream
    from pynatsd.jetstream.consumer.state import ConsumerState


class CountOwner(Protocol):
    """What the count uses of its consumer."""

    @property
    def stream(self) -> ConsumedStream: ...

    @property
    def state(self) -> ConsumerState:
        """Where the stream walk stands (`sseq`, the skip list)."""

    @property
    def filters(self) -> list[str]: ...


class PendingCount:
    """Messages matching the filters at or after where delivery stands."""

    def __init__(self, owner: CountOwner) -> None:
        self._owner = owner
        self._state = owner.state
        self._stream = owner.stream
        # Go's npc (num pending count): None when it must be counted afresh. The pump moves
        # it along a delivery (one fewer; one more when a message is put back).
        self.npc: int | None = None
        self._mark = (0, 0)  # the store's change_mark() when `npc` was counted (cheap filters)
        self.cheap = cheap_filters(owner.filters)  # the store counts it in O(log n)

    def refilter(self) -> None:
        """The consumer's filters changed."""
        self.cheap = cheap_filters(self._owner.filters)
        self.npc = None

    def forget(self) -> None:
        """Count afresh next time (the stream changed under the count)."""
        self.npc = None

    def num_pending(self) -> int:
        """Messages not yet delivered, the skip list's included."""
        lss = self._state.lss
        extra = len(lss) if lss is not None else 0
        if self.cheap:
            mark = self._stream.store.change_mark()
            if self.npc is None or mark != self._mark:
                self.npc = self._count()
                self._mark = mark
            return extra + self.npc
        if self.npc is None:
            self.npc = self._count()
        return extra + self.npc

    def start(self) -> int:
        """The first stream sequence the count covers."""
        state = self._state
        return state.lss_resume + 1 if state.lss is not None else state.sseq

    def _count(self) -> int:
        store = self._stream.store
        start = self.start()
        filters = self._owner.filters
        if not filters:
            return store.num_pending(start, "")
        if len(filters) == 1:
            return store.num_pending(start, filters[0])
        subjects: set[str] = set()
        for f in filters:
            subjects.update(store.subjects_state(f))
        return sum(store.num_pending(start, subject) for subject in subjects)
