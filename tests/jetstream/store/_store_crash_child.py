"""Child process of the kill -9 test: publishes with acks until it is killed.

Prints ``ready <last_seq>`` once open, then ``ack <seq> <digest>`` after each message is
durable, ``rm <seq>`` before a removal and ``del <seq>`` once the removal is durable. Each
payload ends with the SHA-256 of the rest, so the parent can tell a half-written record from a
whole one.
"""

from __future__ import annotations

import asyncio
import hashlib
import random
import sys
from typing import Any

from pynatsd.jetstream.store import StreamLimits, open_file_store

HDR = b"NATS/1.0\r\nNats-Msg-Id: %d\r\n\r\n"


def emit(line: str) -> None:
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


async def batches(directory: str, round_no: int, window: int) -> None:
    """As a stream stores one turn's simple publishes: `store_msgs` of up to `window`
    messages, each acked once its batch is durable."""
    store = open_file_store(directory, StreamLimits(), segment_bytes=16384)
    rnd = random.Random(round_no)
    emit(f"ready {store.state().last_seq}")
    i = 0
    while True:
        count = rnd.randrange(1, window + 1)
        datas = []
        for _ in range(count):
            body = rnd.randbytes(rnd.randrange(0, 400))
            datas.append(body + hashlib.sha256(body).digest())
        headers = [HDR % (i + k) if (i + k) % 3 == 0 else b"" for k in range(count)]
        subjects = [f"r{round_no}.{(i + k) % 5}" for k in range(count)]
        first, _ = store.store_msgs(subjects, headers, datas)
        done = asyncio.get_running_loop().create_future()
        whole = [h + d for h, d in zip(headers, datas, strict=True)]

        def acked(first: int = first, whole: list[bytes] = whole, done: Any = done) -> None:
            for k, msg in enumerate(whole):
                emit(f"ack {first + k} {hashlib.sha256(msg).hexdigest()[:16]}")
            done.set_result(None)

        store.when_durable(first + count - 1, acked)
        await done
        i += count


async def main(directory: str, round_no: int, window: int, kv: bool) -> None:
    # kv: one message per subject, so that old segments are compacted all the time.
    limits = StreamLimits(max_msgs_per_subject=1) if kv else StreamLimits()
    store = open_file_store(directory, limits, segment_bytes=16384)
    rnd = random.Random(round_no)
    sem = asyncio.Semaphore(window)
    emit(f"ready {store.state().last_seq}")
    i = 0
    while True:
        await sem.acquire()
        body = rnd.randbytes(rnd.randrange(0, 400))
        data = body + hashlib.sha256(body).digest()
        hdr = HDR % i if i % 3 == 0 else b""
        # In kv mode the key follows the sequence, so the newest five are five distinct keys.
        key = (store.state().last_seq + 1) % 5 if kv else i % 5
        seq, _ = store.store_msg(f"k.{key}" if kv else f"r{round_no}.{key}", hdr, data)
        digest = hashlib.sha256(hdr + data).hexdigest()[:16]

        def acked(seq: int = seq, digest: str = digest) -> None:
            emit(f"ack {seq} {digest}")
            sem.release()

        store.when_durable(seq, acked)
        if not kv and i % 40 == 39 and store.load_msg(seq - 20) is not None:
            # Announced first: once it is removed, the parent may no longer expect it.
            victim = seq - 20
            emit(f"rm {victim}")
            store.remove_msg(victim)
            store.when_durable(store.state().last_seq, lambda v=victim: emit(f"del {v}"))
        i += 1
        if i % 200 == 0:
            await asyncio.sleep(0)


if __name__ == "__main__":
    if sys.argv[4] == "batch":
        asyncio.run(batches(sys.argv[1], int(sys.argv[2]), int(sys.argv[3])))
    else:
        asyncio.run(main(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4] == "kv"))
