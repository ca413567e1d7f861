"""`select_starting_seq` alone: where a new consumer starts, by deliver policy."""

from __future__ import annotations

import pytest

from pynatsd.jetstream.consumer.start import select_starting_seq
from pynatsd.jetstream.consumer.state import ConsumerState
from pynatsd.jetstream.consumer_config import ConsumerConfig
from pynatsd.jetstream.store import StreamLimits, open_memory_store


@pytest.mark.parametrize(
    ("config", "filters", "sseq", "lss"),
    [
        (ConsumerConfig(deliver_policy="all"), [], 1, None),
        (ConsumerConfig(deliver_policy="last"), [], 5, None),
        (ConsumerConfig(deliver_policy="last"), ["a.1"], 4, None),
        (ConsumerConfig(deliver_policy="new"), [], 6, None),
        (ConsumerConfig(deliver_policy="by_start_sequence", opt_start_seq=3), [], 3, None),
        (ConsumerConfig(deliver_policy="last_per_subject"), [], 4, [4, 5]),
    ],
)
def test_the_deliver_policies(
    config: ConsumerConfig, filters: list[str], sseq: int, lss: list[int] | None
) -> None:
    store = open_memory_store(StreamLimits())
    for subject in ("a.1", "a.2", "a.1", "a.1", "a.2"):
        store.store_msg(subject, b"", b"x")
    state = ConsumerState()
    select_starting_seq(state, store, config, filters, 0)
    assert (state.sseq, state.lss, state.dseq, state.asflr) == (sseq, lss, 1, sseq - 1)


def test_an_empty_stream_starts_at_one() -> None:
    state = ConsumerState()
    store = open_memory_store(StreamLimits())
    select_starting_seq(state, store, ConsumerConfig(deliver_policy="new"), [], 0)
    assert state.sseq == 1
