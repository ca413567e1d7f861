"""A consumer's state: where delivery stands, the ack floor, what waits for an ack.

nats-server keeps these in its `consumer` struct (`server/consumer.go`: o.sseq, o.dseq,
o.adflr, o.asflr, o.pending, o.rdc, o.lss) and saves them as a `ConsumerState`
(`server/store.go`). Here they are one dataclass that every part of the consumer reads and
moves (`acks.py` the floor and the pending map, `pump.py` the sequences), which the consumer
saves (`stored`, `restore`) and reports (`delivered_json`, `ack_floor_json`); the ack floor
moves here (`move_ack_floor`), whoever acknowledged. Where a field
keeps Go's name, its comment says what the name means.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pynatsd.jetstream.util import rfc3339_ns

NS = 1_000_000_000
MS = 1_000_000


@dataclass(slots=True)
class Pending:
    """A delivered message waiting for its acknowledgement (Go's Pending)."""

    dseq: int  # delivery sequence of the first delivery
    ts: int  # when last delivered (ns); the ack wait runs from here


@dataclass(slots=True)
class ConsumerState:
    """Go's ConsumerState plus where the stream walk stands. No behaviour beyond moving
    its own fields together (the ack floor, a reset, saving and reporting)."""

    sseq: int = 1  # Go's o.sseq, stream sequence: the next stream message to look at
    dseq: int = 1  # Go's o.dseq, delivery (consumer) sequence: what the next delivery gets
    delivered_sseq: int = 0  # stream seq of the last first-time delivery
    adflr: int = 0  # Go's adflr: ack floor, delivery sequence (all at or below are acked)
    asflr: int = 0  # Go's asflr: ack floor, stream sequence
    pending: dict[int, Pending] = field(default_factory=dict)  # stream seq -> awaiting ack
    rdc: dict[int, int] = field(default_factory=dict)  # Go's rdc: redeliveries per stream seq
    lss: list[int] | None = None  # Go's lss: last-per-subject skip list, seqs to send
    lss_resume: int = 0  # where the stream walk resumes once `lss` is used up
    ldt: int = 0  # Go's ldt: last delivery time (ns)
    lat: int = 0  # Go's lat: last ack time (ns)

    def start_at(self, sseq: int) -> None:
        """A new consumer delivers from stream sequence `sseq` on, nothing delivered yet."""
        self.sseq = sseq
        self.dseq = 1
        self.adflr = 0
        self.asflr = sseq - 1
        self.delivered_sseq = sseq - 1

    def reset_to(self, seq: int) -> None:
        """Go's resetLocalStartingSeq: deliver from `seq` on, nothing pending, deliveries
        counted from 1 again."""
        self.pending.clear()
        self.rdc.clear()
        self.sseq, self.dseq = seq, 1
        self.adflr, self.asflr = 0, seq - 1
        self.delivered_sseq = seq - 1
        self.ldt = self.lat = 0

    def acked_floor(self, p: Pending, sseq: int) -> None:
        """The ack floor once `p`, the pending message at `sseq`, is acknowledged (explicit
        policy). move_ack_floor's usual case first: acks in delivery order, the next message
        still pending."""
        if p.dseq == self.adflr + 1 and self.pending:
            nxt = self.pending.get(sseq + 1)
            if nxt is not None and nxt.dseq > 0:
                self.adflr, self.asflr = nxt.dseq - 1, sseq
                return
        self.move_ack_floor(p.dseq, sseq)

    def move_ack_floor(self, dseq: int, sseq: int) -> None:
        """The ack floor once delivery `dseq` of stream sequence `sseq` no longer waits for
        its ack (acknowledged, terminated, gone)."""
        pending = self.pending
        if not pending:
            self.adflr = self.dseq - 1
            self.asflr = self.sseq - 1
        elif dseq == self.adflr + 1:
            self.adflr, self.asflr = dseq, sseq
            for ss in range(sseq + 1, self.sseq):
                p = pending.get(ss)
                if p is not None:
                    if p.dseq > 0:
                        self.adflr, self.asflr = p.dseq - 1, ss - 1
                    break

    def stored(self) -> dict[str, Any]:
        """The fields of the consumer's saved state (after its name, config and creation)."""
        return {
            "next_sseq": self.sseq,
            "next_dseq": self.dseq,
            "delivered": [self.dseq - 1, self.delivered_sseq],
            "ack_floor": [self.adflr, self.asflr],
            "pending": {str(s): [p.dseq, p.ts] for s, p in self.pending.items()},
            "redelivered": {str(s): n for s, n in self.rdc.items()},
            "lss": self.lss,
            "lss_resume": self.lss_resume,
        }

    def restore(self, data: dict[str, Any]) -> None:
        """The state `stored` saved."""
        self.sseq = int(data.get("next_sseq", 1))
        delivered = data.get("delivered", [0, 0])
        self.dseq = int(data.get("next_dseq", delivered[0] + 1))
        self.delivered_sseq = int(delivered[1])
        self.adflr, self.asflr = (int(x) for x in data.get("ack_floor", [0, 0]))
        self.pending = {int(s): Pending(int(v[0]), int(v[1])) for s, v in data["pending"].items()}
        self.rdc = {int(s): int(n) for s, n in data.get("redelivered", {}).items()}
        lss = data.get("lss")
        self.lss = list(lss) if lss else None
        self.lss_resume = int(data.get("lss_resume", 0))

    def delivered_json(self) -> dict[str, Any]:
        """Consumer info's `delivered` (Go's SequenceInfo)."""
        out: dict[str, Any] = {
            "consumer_seq": max(self.dseq, 1) - 1,
            "stream_seq": self.delivered_sseq,
        }
        if self.ldt:
            out["last_active"] = rfc3339_ns(self.ldt)
        return out

    def ack_floor_json(self) -> dict[str, Any]:
        """Consumer info's `ack_floor`."""
        out: dict[str, Any] = {"consumer_seq": self.adflr, "stream_seq": self.asflr}
        if self.lat:
            out["last_active"] = rfc3339_ns(self.lat)
        return out
