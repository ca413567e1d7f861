"""`ConsumerState`, the saved and reported state of a consumer, alone."""

from __future__ import annotations

from pynatsd.jetstream.consumer.state import ConsumerState, Pending


def test_a_new_consumer_starts_with_nothing_delivered() -> None:
    state = ConsumerState()
    state.start_at(5)
    assert (state.sseq, state.dseq, state.adflr, state.asflr, state.delivered_sseq) == (
        5, 1, 0, 4, 4,
    )  # fmt: skip
    assert state.delivered_json() == {"consumer_seq": 0, "stream_seq": 4}
    assert state.ack_floor_json() == {"consumer_seq": 0, "stream_seq": 4}


def test_the_saved_state_comes_back_as_it_was() -> None:
    state = ConsumerState(sseq=9, dseq=7, delivered_sseq=8, adflr=3, asflr=4, lss=[10, 12])
    state.pending = {5: Pending(4, 111), 8: Pending(6, 222)}
    state.rdc = {5: 2}
    state.lss_resume = 12
    stored = state.stored()
    assert stored["delivered"] == [6, 8]
    assert stored["pending"] == {"5": [4, 111], "8": [6, 222]}
    again = ConsumerState()
    again.restore(stored)
    assert again == state


def test_older_saved_state_without_the_newer_fields() -> None:
    state = ConsumerState()
    state.restore({"delivered": [3, 10], "ack_floor": [2, 9], "pending": {"10": [3, 5]}})
    assert (state.sseq, state.dseq, state.delivered_sseq) == (1, 4, 10)
    assert (state.adflr, state.asflr, state.rdc, state.lss) == (2, 9, {}, None)
    assert state.pending == {10: Pending(3, 5)}


def test_a_reset_forgets_what_was_pending_and_counts_from_one() -> None:
    state = ConsumerState(sseq=20, dseq=15, adflr=10, asflr=12, ldt=5, lat=6)
    state.pending[13] = Pending(11, 1)
    state.rdc[13] = 1
    state.reset_to(4)
    assert state == ConsumerState(sseq=4, dseq=1, delivered_sseq=3, adflr=0, asflr=3)


def test_info_shows_the_last_activity_when_there_was_some() -> None:
    state = ConsumerState(dseq=3, delivered_sseq=2, ldt=1_700_000_000_000_000_000, lat=0)
    assert state.delivered_json() == {
        "consumer_seq": 2,
        "stream_seq": 2,
        "last_active": "2023-11-14T22:13:20Z",
    }
    assert "last_active" not in state.ack_floor_json()
