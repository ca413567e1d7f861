"""A pull consumer reads the stream a run at a time within one delivery round: a message
removed while the round is under way must not be delivered from that run, and one that
arrives during the round is still delivered, in order."""

from __future__ import annotations

import asyncio
import contextlib
import json
from pathlib import Path

import nats

from pynatsd import Server
from pynatsd.jetstream import jetstream_of
from pynatsd.protocol.events import Pub
from pynatsd.server.accounts import GLOBAL_ACCOUNT
from pynatsd.server.subscription import InternalClient, InternalSubscription

INBOX = "_TEST.inbox"


async def _deliveries_with(
    tmp_path: Path, on_first: str, ack_policy: str = "none"
) -> tuple[list[int], list[int]]:
    """Fetch 10 from a stream of 10 into an inbox whose receiver, on the first message,
    either removes message 5 or publishes message 11 (synchronously, inside the round).
    Returns the delivered stream sequences and the stream's sequences afterwards."""
    async with Server(jetstream=True, store_dir=str(tmp_path)) as server:
        nc = await nats.connect(server.client_url)
        js = nc.jetstream()
        await js.add_stream(name="S", subjects=["s.>"])
        for i in range(10):
            await js.publish(f"s.{i}", b"%d" % i)
        await js.add_consumer("S", durable_name="c", ack_policy=ack_policy, inactive_threshold=None)
        jetstream = jetstream_of(server)
        assert jetstream is not None
        ajs = jetstream.accounts[GLOBAL_ACCOUNT]
        stream = ajs.streams["S"]
        got: list[int] = []
        done = asyncio.Event()

        def receive(sub: InternalSubscription, publisher: object, ev: Pub) -> None:
            if ev.header_size > 0:  # a status (408/409) ends the request
                done.set()
                return
            got.append(int(ev.reply.split(b".")[5]))
            if len(got) == 1:
                if on_first == "remove":
                    assert stream.remove_msg(5)
                else:
                    stream.process_message("s.new", b"", b"new")
            if len(got) == 10:
                done.set()

        sub = InternalSubscription(InternalClient(ajs.account, "test"), INBOX, receive)
        ajs.account.sublist.insert(sub)
        await nc.publish(
            "$JS.API.CONSUMER.MSG.NEXT.S.c",
            json.dumps({"batch": 10, "expires": 500_000_000}).encode(),
            reply=INBOX,
        )
        await asyncio.wait_for(done.wait(), 5)
        info = await js.stream_info("S")
        live = []
        for seq in range(1, info.state.last_seq + 1):
            with contextlib.suppress(nats.js.errors.NotFoundError):
                live.append((await js.get_msg("S", seq)).seq)
        await nc.close()
        return got, live


async def test_message_removed_during_the_round_is_not_delivered(tmp_path: Path) -> None:
    got, live = await _deliveries_with(tmp_path, "remove")
    assert live == [1, 2, 3, 4, 6, 7, 8, 9, 10]
    assert got == [1, 2, 3, 4, 6, 7, 8, 9, 10]


async def test_message_stored_during_the_round_is_delivered_in_order(tmp_path: Path) -> None:
    got, live = await _deliveries_with(tmp_path, "store", ack_policy="explicit")
    assert live == list(range(1, 12))
    assert got == list(range(1, 11))
