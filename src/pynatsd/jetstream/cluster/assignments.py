"""The meta group's state: which streams and consumers exist and where they live.

Every member of `_meta_` applies the same committed entries (`applyMetaEntries`), each one
`EntryNormal` whose first byte is the op and the rest nats-server's JSON with a trailing newline
(`encodeAddStreamAssignment` and its kin); a consumer assignment may come as an S2 framed stream
(op 9). The snapshot (`encodeMetaSnapshot`) is an S2 block of a JSON array of the streams, each
with its consumers under `Consumers`; no streams at all is zero bytes.

Assignments are kept as nats-server's JSON objects, so what a Go leader assigned is what a
snapshot of ours carries back to it, key for key.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from enum import IntEnum
from typing import Any

from pynatsd.s2 import S2Error, S2Reader, decode_block


class MetaOp(IntEnum):
    """entryOp values the meta group uses (the numbering is shared with stream groups)."""

    ASSIGN_STREAM = 0
    ASSIGN_CONSUMER = 1
    REMOVE_STREAM = 2
    REMOVE_CONSUMER = 3
    ASSIGN_COMPRESSED_CONSUMER = 9
    UPDATE_STREAM = 11


class MetaEntryError(ValueError):
    """An entry the meta layer cannot apply (nats-server: "unknown meta entry op type", or a
    JSON decoding error, both logged and the entry skipped)."""


@dataclass(slots=True)
class StreamAssignment:
    """streamAssignment: `raw` is the JSON object as the leader sent it."""

    raw: dict[str, Any]
    consumers: dict[str, dict[str, Any]] = field(default_factory=dict)

    @property
    def account(self) -> str:
        return account_of(self.raw)

    @property
    def name(self) -> str:
        return str(self.raw.get("stream", {}).get("name", ""))

    @property
    def group(self) -> dict[str, Any]:
        group = self.raw.get("group")
        return group if isinstance(group, dict) else {}


def account_of(assignment: dict[str, Any]) -> str:
    """serviceAccount: the client's `svc` if set, else its `acc`."""
    client = assignment.get("client") or {}
    return str(client.get("svc") or client.get("acc") or "")


def created_ns(text: Any) -> int:
    """An assignment's `created` (Go's RFC 3339 time) in Unix ns; now when absent or bad."""
    from pynatsd.gofmt import parse_go_time
    from pynatsd.jetstream.util import now_ns

    try:
        return parse_go_time(str(text))[0] if text else now_ns()
    except ValueError:
        return now_ns()


def encode_entry(op: MetaOp, assignment: dict[str, Any]) -> bytes:
    return bytes((op,)) + json.dumps(assignment, separators=(",", ":")).encode() + b"\n"


def decode_entry(data: bytes) -> tuple[MetaOp, dict[str, Any]]:
    if not data:
        raise MetaEntryError("empty meta entry")
    try:
        op = MetaOp(data[0])
    except ValueError:
        raise MetaEntryError(f"unknown meta entry op type: {data[0]}") from None
    body = data[1:]
    if op is MetaOp.ASSIGN_COMPRESSED_CONSUMER:
        try:
            reader = S2Reader()
            body = b"".join(reader.feed(body))
        except S2Error as e:
            raise MetaEntryError(f"compressed consumer assignment: {e}") from None
        op = MetaOp.ASSIGN_CONSUMER
    try:
        assignment = json.loads(body)
    except ValueError as e:
        raise MetaEntryError(f"meta entry {op.name}: {e}") from None
    if not isinstance(assignment, dict):
        raise MetaEntryError(f"meta entry {op.name}: not an object")
    return op, assignment


class MetaState:
    """Account -> stream name -> assignment, with each stream's consumers."""

    def __init__(self) -> None:
        self.streams: dict[str, dict[str, StreamAssignment]] = {}

    def stream(self, account: str, name: str) -> StreamAssignment | None:
        return self.streams.get(account, {}).get(name)

    def count(self) -> tuple[int, int]:
        streams = [sa for account in self.streams.values() for sa in account.values()]
        return len(streams), sum(len(sa.consumers) for sa in streams)

    def apply(self, op: MetaOp, assignment: dict[str, Any]) -> None:
        account = account_of(assignment)
        if op in (MetaOp.ASSIGN_STREAM, MetaOp.UPDATE_STREAM):
            sa = StreamAssignment(assignment)
            current = self.stream(account, sa.name)
            if current is not None:
                sa.consumers = current.consumers
            self.streams.setdefault(account, {})[sa.name] = sa
        elif op is MetaOp.REMOVE_STREAM:
            name = str(assignment.get("stream", {}).get("name", ""))
            self.streams.get(account, {}).pop(name, None)
        elif op in (MetaOp.ASSIGN_CONSUMER, MetaOp.REMOVE_CONSUMER):
            owner = self.stream(account, str(assignment.get("stream", "")))
            if owner is None:
                return
            name = str(assignment.get("name", ""))
            if op is MetaOp.ASSIGN_CONSUMER:
                owner.consumers[name] = assignment
            else:
                owner.consumers.pop(name, None)

    def load_snapshot(self, data: bytes) -> None:
        """applyMetaSnapshot: the snapshot replaces the map."""
        self.streams = {}
        if not data:
            return
        try:
            decoded = json.loads(decode_block(data))
        except (S2Error, ValueError) as e:
            raise MetaEntryError(f"meta snapshot: {e}") from None
        for item in decoded or ():
            consumers = item.pop("Consumers", None) or []
            sa = StreamAssignment(item)
            for ca in consumers:
                if not ca.get("stream"):
                    ca["stream"] = sa.name
                sa.consumers[str(ca.get("name", ""))] = ca
            self.streams.setdefault(sa.account, {})[sa.name] = sa
