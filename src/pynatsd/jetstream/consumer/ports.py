"""What a consumer's parts use of the world around the consumer: its stream and its account's
JetStream, each as a small protocol.

The parts (`acks.py`, `waiting.py`, `priority.py`, `pump.py`, `flow.py`, `count.py`,
`reset.py`) never import `stream.py` or `manager.py`: they see the stream as a
`ConsumedStream` and the account's JetStream (`manager.AccountJetStream`) as a `ConsumerHost`,
and a test hands them small fakes of both. Each part also names, in a protocol of its own
module, what it uses of the `Consumer` that owns it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    import asyncio

    from pynatsd.jetstream.store.base import StreamStore
    from pynatsd.jetstream.stream_config import StreamConfig
    from pynatsd.server.accounts import Account
    from pynatsd.server.server import Server
    from pynatsd.server.subscription import Subscription


class ConsumedStream(Protocol):
    """The stream a consumer reads (`stream.Stream`)."""

    @property
    def name(self) -> str: ...

    @property
    def store(self) -> StreamStore: ...

    @property
    def config(self) -> StreamConfig: ...

    def on_acked(self, consumer: Any, seq: int) -> None:
        """`consumer` acknowledged (or, with ack none, was handed) `seq`: a work-queue or an
        interest stream may drop it."""

    def identity(self) -> str: ...


class ConsumerHost(Protocol):
    """The account's JetStream as a consumer uses it (`manager.AccountJetStream`): the event
    loop, replies and deliveries, interest."""

    @property
    def loop(self) -> asyncio.AbstractEventLoop: ...

    @property
    def account(self) -> Account: ...

    @property
    def server(self) -> Server: ...

    def reply(self, subject: str | bytes, data: bytes, header: bytes = b"") -> None: ...

    def deliver(
        self, inbox: str, subject: str, reply: bytes, header: bytes, data: bytes
    ) -> bool: ...

    def deliver_push(
        self, deliver_subject: str, subject: str, reply: bytes, header: bytes, data: bytes
    ) -> bool: ...

    def deliver_to(
        self, sub: Subscription, subject: bytes, reply: bytes, header: bytes, data: bytes
    ) -> bool: ...

    def has_interest(self, subject: str) -> bool: ...
