"""Helpers shared by the codecs of `entries` and `snapshots`: Go's integer encodings and
arithmetic, a varint reader that fails the way nats-server's helpers fail, Go strings as text,
and Go's `encoding/json` decoding of a JSON object into a struct (`json.Unmarshal`: keys
matched exactly or else case-insensitively, unknown keys ignored, null leaving a field as it
was, a value of the wrong JSON type an error).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from pynatsd.raft.wire import put_uvarint, read_uvarint

MASK64 = (1 << 64) - 1


class EntryError(ValueError):
    """An entry nats-server would refuse to decode (its error text where it has one)."""


BAD_ENTRY = "jetstream cluster bad replicated entry"  # errBadEntryOp


# -- integers ---------------------------------------------------------------------------------


def u64(value: int, what: str) -> int:
    if not 0 <= value <= MASK64:
        raise EntryError(f"{what} out of range for a uint64: {value}")
    return value


def i64(value: int, what: str) -> int:
    if not -(1 << 63) <= value < 1 << 63:
        raise EntryError(f"{what} out of range for an int64: {value}")
    return value


def wrap_i64(value: int) -> int:
    """Go's int64 arithmetic: wrap to two's complement."""
    value &= MASK64
    return value - (1 << 64) if value >> 63 else value


def put_varint(value: int) -> bytes:
    """binary.PutVarint (zig-zag)."""
    zigzag = (value << 1) & MASK64
    return put_uvarint(zigzag ^ MASK64 if value < 0 else zigzag)


def read_varint(buf: bytes | memoryview, pos: int) -> tuple[int, int]:
    """binary.Varint from `pos`: (value, bytes read), bytes read <= 0 when there is none."""
    zigzag, n = read_uvarint(buf, pos)
    value = zigzag >> 1
    return (~value if zigzag & 1 else value), n


class Cursor:
    """A reader of uvarints and varints that, like nats-server's `readU64`/`readSeq` helpers,
    goes dead on the first failure (`failed`) and then reads zeros."""

    __slots__ = ("buf", "pos")

    def __init__(self, buf: bytes | memoryview, pos: int) -> None:
        self.buf = buf
        self.pos = pos

    @property
    def failed(self) -> bool:
        return self.pos < 0

    def uvarint(self) -> int:
        if self.pos < 0:
            return 0
        value, n = read_uvarint(self.buf, self.pos)
        if n <= 0:
            self.pos = -1
            return 0
        self.pos += n
        return value

    def varint(self) -> int:
        if self.pos < 0:
            return 0
        value, n = read_varint(self.buf, self.pos)
        if n <= 0:
            self.pos = -1
            return -1
        self.pos += n
        return value

    def text(self) -> str | None:
        """A uvarint length and that many bytes (a source name or identity), None if short."""
        size = self.uvarint()
        if self.pos < 0 or len(self.buf) - self.pos < size:
            self.pos = -1
            return None
        start, self.pos = self.pos, self.pos + size
        return go_text(self.buf[start : self.pos])


def go_text(raw: bytes | memoryview) -> str:
    """A Go string's bytes as text that encodes back to the same bytes."""
    return bytes(raw).decode("utf-8", "surrogateescape")


def go_bytes(text: str) -> bytes:
    return text.encode("utf-8", "surrogateescape")


def op_body(data: bytes, ops: tuple[int, ...], what: str) -> memoryview:
    if not data:
        raise EntryError(BAD_ENTRY)
    if data[0] not in ops:
        raise EntryError(f"not {what}: op {data[0]}")
    return memoryview(data)[1:]


# -- Go's encoding/json, for the JSON entries ----------------------------------------------------


class JsonObject(list[tuple[str, Any]]):
    """A JSON object as its key/value pairs in order, repeated keys kept (Go applies each)."""


class _Negative(int):
    """An integer written with a minus sign (`-0` too), which no uint64 takes."""


def _parse_int(text: str) -> int:
    return _Negative(int(text)) if text.startswith("-") else int(text)


def _no_constant(text: str) -> Any:
    raise ValueError(f"invalid character {text[0]!r} looking for beginning of value")


def parse_json(body: bytes | memoryview, what: str) -> Any:
    """json.Unmarshal's view of `body`: one JSON value, whitespace around it."""
    try:
        return json.loads(
            bytes(body).decode("utf-8", "replace"),
            object_pairs_hook=JsonObject,
            parse_int=_parse_int,
            parse_constant=_no_constant,
        )
    except (ValueError, RecursionError) as e:
        raise EntryError(f"{what}: {e}") from None


def _plain(value: Any) -> Any:
    """Parsed JSON as dicts and lists (repeated keys: the last wins)."""
    if isinstance(value, JsonObject):
        return {key: _plain(item) for key, item in value}
    if isinstance(value, list):
        return [_plain(item) for item in value]
    return value


def _kind(value: Any) -> str:
    if isinstance(value, JsonObject):
        return "object"
    if isinstance(value, list):
        return "array"
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, str):
        return "string"
    return "number"


def type_error(value: Any, where: str, go_type: str) -> EntryError:
    return EntryError(f"json: cannot unmarshal {_kind(value)} into Go {where} of type {go_type}")


# A field's decoder: (JSON value, value so far, where) -> new value. Go leaves a plain field as
# it was on null and sets a pointer or slice to nil.
FieldDecoder = Callable[[Any, Any, str], Any]


def go_uint64(value: Any, previous: Any, where: str) -> Any:
    if value is None:
        return previous
    if type(value) is not int or not 0 <= value <= MASK64:
        raise type_error(value, where, "uint64")
    return value


def go_string(value: Any, previous: Any, where: str) -> Any:
    if value is None:
        return previous
    if not isinstance(value, str):
        raise type_error(value, where, "string")
    return value


def go_bool(value: Any, previous: Any, where: str) -> Any:
    if value is None:
        return previous
    if not isinstance(value, bool):
        raise type_error(value, where, "bool")
    return value


def go_object(value: Any, previous: Any, where: str) -> Any:
    """A *ClientInfo, kept as the JSON object it came as."""
    if value is None:
        return None
    if not isinstance(value, JsonObject):
        raise type_error(value, where, "*server.ClientInfo")
    return _plain(value)


def go_uint64_slice(value: Any, previous: Any, where: str) -> Any:
    if value is None:
        return None
    if not isinstance(value, list) or isinstance(value, JsonObject):
        raise type_error(value, where, "[]uint64")
    return [go_uint64(item, 0, where) for item in value]


def go_struct(
    value: Any,
    fields: dict[str, FieldDecoder],
    go_type: str,
    previous: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Go's decoding of a JSON object into a struct whose fields are `fields` (JSON name ->
    decoder): each key in turn, matched exactly or else case-insensitively, unknown keys
    ignored; null decodes to the struct unchanged. Returns the fields that were set."""
    out = dict(previous or {})
    if value is None:
        return out
    if not isinstance(value, JsonObject):
        raise type_error(value, "value", go_type)
    folded = {name.casefold(): name for name in fields}
    for key, item in value:
        name = key if key in fields else folded.get(key.casefold())
        if name is not None:
            out[name] = fields[name](item, out.get(name), f"struct field {go_type}.{name}")
    return out
