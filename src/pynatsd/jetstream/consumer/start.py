"""Where a new consumer starts in its stream: nats-server's selectStartingSeqNo
(`server/consumer.go`), from the deliver policy, the filters and what the stream holds."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pynatsd.jetstream.util import parse_go_time

if TYPE_CHECKING:
    from pynatsd.jetstream.consumer.state import ConsumerState
    from pynatsd.jetstream.consumer_config import ConsumerConfig
    from pynatsd.jetstream.store.base import StreamStore


def select_starting_seq(
    state: ConsumerState,
    store: StreamStore,
    cfg: ConsumerConfig,
    filters: list[str],
    max_msgs_per_subject: int,
) -> None:
    """Go's selectStartingSeqNo: set `state` to deliver from the first message the deliver
    policy asks for (`max_msgs_per_subject`: the stream's limit, 1 makes `last_per_subject`
    the same as `all`)."""
    st = store.state()
    opt_seq = cfg.opt_start_seq
    policy = cfg.deliver_policy
    sseq = 0
    if opt_seq == 0:
        if policy == "all":
            sseq = st.first_seq
        elif policy == "last":
            if not filters:
                sseq = st.last_seq
            else:
                for f in filters:
                    msg = store.load_last_msg(f)
                    if msg is not None and msg.seq > sseq:
                        sseq = msg.seq
        elif policy == "last_per_subject":
            if max_msgs_per_subject == 1:
                sseq = st.first_seq
            else:
                seqs = multi_last_seqs(store, filters)
                state.lss = seqs
                state.lss_resume = st.last_seq
                sseq = seqs[0] if seqs else st.last_seq
        elif cfg.opt_start_time:
            try:
                ts = parse_go_time(cfg.opt_start_time)[0]
            except ValueError:
                ts = 0
            sseq = store.seq_for_time(ts)
        else:
            sseq = st.last_seq + 1
    else:
        sseq = opt_seq
    if st.first_seq == 0 and opt_seq == 0:
        sseq = 1
    elif sseq > st.last_seq and opt_seq == 0:
        sseq = st.last_seq + 1
    elif sseq < st.first_seq:
        sseq = st.first_seq
    state.start_at(sseq)


def multi_last_seqs(store: StreamStore, filters: list[str]) -> list[int]:
    """The last sequence of every subject matching the filters, sorted (MultiLastSeqs)."""
    seqs: set[int] = set()
    for f in filters or [">"]:
        for subject in store.subjects_state(f):
            msg = store.load_last_msg(subject)
            if msg is not None:
                seqs.add(msg.seq)
    return sorted(seqs)
