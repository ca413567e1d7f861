"""Small real stand-ins for what a consumer's parts see of the world: an event loop whose
timers fire when a test says so, the account's JetStream that records what it sends, a
stream over a real memory store, and a consumer that owns nothing but what the parts' own
protocols name. Each part's test builds only the part it tests (and, for the pump, the
parts it drives) around these."""

from __future__ import annotations

from collections import deque
from typing import Any

from pynatsd.jetstream.consumer.state import ConsumerState
from pynatsd.jetstream.consumer_config import ConsumerConfig
from pynatsd.jetstream.store import StreamLimits, open_memory_store
from pynatsd.jetstream.stream_config import StreamConfig
from pynatsd.server.accounts import Account

NS = 1_000_000_000


class Timer:
    def __init__(self, loop: FakeLoop, delay: float, callback: Any, args: tuple[Any, ...]):
        self.loop, self.delay, self.callback, self.args = loop, delay, callback, args
        self.cancelled = False

    def cancel(self) -> None:
        self.cancelled = True


class FakeLoop:
    """call_later/call_soon that only record; `fire()` runs what is due, in order."""

    def __init__(self) -> None:
        self.timers: list[Timer] = []

    def call_later(self, delay: float, callback: Any, *args: Any) -> Timer:
        timer = Timer(self, delay, callback, args)
        self.timers.append(timer)
        return timer

    def call_soon(self, callback: Any, *args: Any) -> Timer:
        return self.call_later(0.0, callback, *args)

    def pending(self) -> list[Timer]:
        return [t for t in self.timers if not t.cancelled]

    def fire(self) -> int:
        """Run every timer not cancelled (once); returns how many ran."""
        due, self.timers = self.pending(), []
        for t in due:
            t.callback(*t.args)
        return len(due)


class FakeServer:
    def __init__(self) -> None:
        self.flushes = 0

    def flush_soon(self) -> None:
        self.flushes += 1


class FakeHost:
    """The account's JetStream (a `ConsumerHost`): what is sent is recorded."""

    def __init__(self) -> None:
        self.loop = FakeLoop()
        self.account = Account("A")
        self.server = FakeServer()
        self.replies: list[tuple[str | bytes, bytes, bytes]] = []
        # (to, shown subject, reply, header, data)
        self.sent: list[tuple[str, str, bytes, bytes, bytes]] = []
        self.pushed: list[tuple[str, str, bytes, bytes, bytes]] = []
        self.interest: set[str] = set()  # subjects someone listens on
        self.delivery_interest = False
        self.deleted: list[str] = []

    def reply(self, subject: str | bytes, data: bytes, header: bytes = b"") -> None:
        self.replies.append((subject, data, header))

    def deliver(self, inbox: str, subject: str, reply: bytes, header: bytes, data: bytes) -> bool:
        self.sent.append((inbox, subject, reply, header, data))
        return True

    def deliver_push(
        self, deliver_subject: str, subject: str, reply: bytes, header: bytes, data: bytes
    ) -> bool:
        self.pushed.append((deliver_subject, subject, reply, header, data))
        return True

    def deliver_to(
        self, sub: Any, subject: bytes, reply: bytes, header: bytes, data: bytes
    ) -> bool:
        return False  # no known subscriber: the parts fall back to `deliver`

    def has_interest(self, subject: str) -> bool:
        return subject in self.interest

    def has_delivery_interest(self, subject: str, group: str) -> bool:
        return self.delivery_interest

    def delete_consumer(self, stream: Any, name: str) -> bool:
        self.deleted.append(name)
        return True


class FakeStream:
    """A stream (a `ConsumedStream`) over a real memory store."""

    def __init__(self, retention: str = "limits", subjects: list[str] | None = None) -> None:
        self.name = "S"
        self.config = StreamConfig(name="S", subjects=subjects or ["s.>"], retention=retention)
        self.store = open_memory_store(StreamLimits())
        self.acked: list[int] = []

    def add(self, subject: str, data: bytes = b"x", header: bytes = b"") -> int:
        seq: int = self.store.store_msg(subject, header, data)[0]
        return seq

    def on_acked(self, consumer: Any, seq: int) -> None:
        self.acked.append(seq)

    def identity(self) -> str:
        return "identity"


class FakeConsumer:
    """What the parts take their consumer for, and nothing more: every protocol's members,
    answered from plain fields, with calls to the other parts recorded."""

    def __init__(self, config: ConsumerConfig | None = None, **kw: Any) -> None:
        self.name = "C"
        self.config = config or ConsumerConfig(
            **{"ack_policy": "explicit", "ack_wait": 30 * NS, **kw}
        )
        self.stream = FakeStream()
        self.ajs = FakeHost()
        self.state = ConsumerState()
        self.closed = False
        self.active = False
        self.dthresh = 0
        self.filters = self.config.filters()
        self.pacing = None
        self.waiting: deque[Any] = deque()
        self.pending_count = 0  # what num_pending() answers
        self.calls: list[tuple[Any, ...]] = []  # what the part asked of its owner

    @property
    def push(self) -> bool:
        return bool(self.config.deliver_subject)

    def wants(self, subject: str) -> bool:
        return not self.filters or subject in self.filters or self.filters == [">"]

    def paused(self) -> bool:
        return False

    def signal(self) -> None:
        self.calls.append(("signal",))

    def save(self) -> None:
        self.calls.append(("save",))

    def pump_round(self) -> None:
        self.calls.append(("pump",))

    def num_pending(self) -> int:
        return self.pending_count

    def backlog(self) -> int:
        return self.pending_count

    def process_next_request(self, reply: str, body: bytes) -> None:
        self.calls.append(("next", reply, body))

    def accept_priority_request(self, reply: str, pg: Any) -> bool:
        return True

    def add_prioritized(self, wr: Any) -> None:
        self.waiting.append(wr)

    def ack(self, sseq: int, dseq: int = 0) -> bool:
        self.calls.append(("ack", sseq, dseq))
        return True

    def ack_activity(self) -> None:
        self.calls.append(("activity",))

    def interest_lost(self) -> None:
        self.calls.append(("interest_lost",))

    def info_reply(self, full_metadata: bool = True) -> dict[str, Any]:
        return {"name": self.name}

    def forget_delivered(self) -> None:
        self.calls.append(("forget_delivered",))

    def load_next(self, start: int) -> Any:
        return self.stream.store.load_next_msg("", start)

    def new_pin_id(self) -> str:
        return f"pin{len(self.calls)}"

    def advise_ack(self, dseq: int, sseq: int, dc: int, delivered_ns: int) -> None:
        self.calls.append(("advise_ack", dseq, sseq, dc))

    def advise_nak(self, dseq: int, sseq: int, dc: int) -> None:
        self.calls.append(("advise_nak", dseq, sseq, dc))

    def advise_terminated(self, dseq: int, sseq: int, dc: int, reason: str) -> None:
        self.calls.append(("advise_terminated", dseq, sseq, dc, reason))

    def advise_max_deliver(self, sseq: int, dc: int) -> None:
        self.calls.append(("advise_max_deliver", sseq, dc))

    def advise_pinned(self, group: str, pin_id: str) -> None:
        self.calls.append(("pinned", group, pin_id))

    def advise_unpinned(self, group: str, reason: str) -> None:
        self.calls.append(("unpinned", group, reason))

    def called(self, name: str) -> list[tuple[Any, ...]]:
        return [c for c in self.calls if c[0] == name]
