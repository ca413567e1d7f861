"""NATS message headers: `NATS/1.0[ status[ description]]\\r\\nKey: Value\\r\\n...\\r\\n`."""

from __future__ import annotations

_PREFIX = b"NATS/1.0"


def parse_headers(block: bytes) -> dict[str, list[str]]:
    """Header lines as {key: [values]}; keys keep their case as sent (nats-server matches the
    JetStream headers it reads, such as `Nats-Msg-Id`, case-sensitively). A malformed block
    gives what could be read."""
    out: dict[str, list[str]] = {}
    if not block.startswith(_PREFIX):
        return out
    for line in block.split(b"\r\n")[1:]:
        if not line:
            continue
        key, sep, value = line.partition(b":")
        if not sep:
            continue
        out.setdefault(key.decode("utf-8", "replace").strip(), []).append(
            value.decode("utf-8", "replace").strip()
        )
    return out


_NEEDLES: dict[str, bytes] = {}


def header_value(block: bytes, key: str) -> str | None:
    """The first value of `key`, without building the whole map (the common case: one lookup)."""
    if not block:
        return None
    needle = _NEEDLES.get(key)
    if needle is None:
        needle = b"\r\n" + key.encode() + b":"
        if len(_NEEDLES) < 256:  # the keys the server itself asks for
            _NEEDLES[key] = needle
    i = block.find(needle)
    if i < 0:
        return None
    start = i + len(needle)
    end = block.find(b"\r\n", start)
    return block[start : end if end >= 0 else len(block)].decode("utf-8", "replace").strip()


def build_headers(
    headers: dict[str, str] | list[tuple[str, str]], status: str = "", description: str = ""
) -> bytes:
    first = (
        "NATS/1.0" + (f" {status}" if status else "") + (f" {description}" if description else "")
    )
    items = headers.items() if isinstance(headers, dict) else headers
    lines = [first, *(f"{k}: {v}" for k, v in items)]
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


def append_headers(block: bytes, extra: list[tuple[str, str]]) -> bytes:
    """`block` (possibly empty) with more header lines added before its final blank line."""
    lines = "".join(f"{k}: {v}\r\n" for k, v in extra).encode()
    if not block:
        return b"NATS/1.0\r\n" + lines + b"\r\n"
    return block[:-2] + lines + b"\r\n"
