"""Small helpers shared by the JetStream modules: stream hashes, Go's JSON decode errors.

The Go-compatible time, duration and JSON formats live in pynatsd.gofmt; the names the
JetStream modules import from here are re-exported below so that they keep working.
"""

from __future__ import annotations

import hashlib
import time

from pynatsd import gofmt
from pynatsd.gofmt import GO_ZERO_TIME as ZERO_TIME
from pynatsd.gofmt import format_go_time, go_json, parse_go_time, rfc3339_ns

# The JetStream modules call it with nanoseconds, as gofmt.go_duration_ns takes them.
go_duration = gofmt.go_duration_ns

__all__ = [
    "ZERO_TIME",
    "format_go_time",
    "go_duration",
    "go_hash",
    "go_json",
    "go_json_syntax_error",
    "go_unmarshal_syntax_error",
    "now_ns",
    "parse_go_duration",
    "parse_go_time",
    "rfc3339_ns",
]


def now_ns() -> int:
    return time.time_ns()


def parse_go_duration(text: str) -> int | None:
    """Go's time.ParseDuration in nanoseconds (surrounding blanks ignored); None when `text`
    is not a duration, for the callers that then try another reading (Nats-TTL, -NAK)."""
    try:
        return gofmt.parse_go_duration(text.strip())
    except ValueError:
        return None


_DIGITS = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"


# The `type` of every JetStream API response starts with this.
API_TYPE_PREFIX = "io.nats.jetstream.api.v1."


def go_hash(name: str, size: int = 8) -> str:
    """nats-server's getHash: the first `size` bytes of SHA-256, each as a base-62 digit."""
    digest = hashlib.sha256(name.encode()).digest()
    return "".join(_DIGITS[b % 62] for b in digest[:size])


def go_json_syntax_error(text: str, e: ValueError) -> str:
    """The text of the error Go's JSON decoder gives for malformed input, as nats-server puts
    it after "invalid JSON: " (Python's decoder finds the same position; the words differ)."""
    pos = getattr(e, "pos", None)
    msg = str(e)
    if not isinstance(pos, int):
        return msg
    stripped_end = len(text.rstrip())
    if pos >= stripped_end and "Extra data" not in msg:
        return "unexpected EOF"
    ch = text[pos]
    if "Expecting value" in msg and ch in "tfn":
        literal = {"t": "true", "f": "false", "n": "null"}[ch]
        for i, want in enumerate(literal):
            j = pos + i
            if j >= len(text):
                return "unexpected EOF"
            if text[j] != want:
                return (
                    f"invalid character {_go_char(text[j])} in literal {literal} "
                    f"(expecting {_go_char(want)}) at offset {j + 1}"
                )
    if "Extra data" in msg or "Expecting value" in msg:
        context = "looking for beginning of value"
    elif "Expecting property name" in msg:
        context = "looking for beginning of object key string"
    elif "Expecting ':' delimiter" in msg:
        context = "after object key"
    elif "Expecting ',' delimiter" in msg:
        context = _after_element(text, pos)
    else:
        return msg
    return f"invalid character {_go_char(ch)} {context} at offset {pos + 1}"


def go_unmarshal_syntax_error(text: str, e: ValueError) -> str:
    """The same for Go's json.Unmarshal (the handlers that decode a whole body at once): its
    SyntaxError names no offset, and a cut-off body is "unexpected end of JSON input"."""
    msg = go_json_syntax_error(text, e)
    if msg == "unexpected EOF":
        return "unexpected end of JSON input"
    head, sep, tail = msg.rpartition(" at offset ")
    return head if sep and tail.isdigit() else msg


def _after_element(text: str, pos: int) -> str:
    """Inside an object or an array? (what Go's error names after a missing comma)"""
    depth: list[str] = []
    in_str = esc = False
    for ch in text[:pos]:
        if in_str:
            if esc:
                esc = False
            elif ch == "\\":
                esc = True
            elif ch == '"':
                in_str = False
        elif ch == '"':
            in_str = True
        elif ch in "[{":
            depth.append(ch)
        elif ch in "]}" and depth:
            depth.pop()
    if depth and depth[-1] == "[":
        return "after array element"
    return "after object key:value pair"


def _go_char(ch: str) -> str:
    """Go's quoteChar: 'x', with \' and \" escaped as Go writes them."""
    if ch == "'":
        return "'\\''"
    if ch == '"':
        return "'\"'"
    return f"'{ch}'"
