"""Makes two servers' output comparable, byte for byte where it can.

Only the values of volatile INFO fields are replaced, and the timestamp in JetStream ack subjects;
key order, JSON spelling and framing (`INFO {...} \\r\\n`) stay byte-exact, and nothing else is
touched.
"""

from __future__ import annotations

import json

# INFO fields whose values differ between two runs (or two servers) without saying anything about
# compatibility. client_ip and host are left alone on purpose: on loopback both are 127.0.0.1.
VOLATILE_INFO_KEYS = frozenset(
    {"server_id", "server_name", "xkey", "client_id", "port", "go", "git_commit", "nonce"}
)


def _skip_ws(text: str, pos: int) -> int:
    while pos < len(text) and text[pos] in " \t\r\n":
        pos += 1
    return pos


_DECODER = json.JSONDecoder()


def _normalise_info_json(text: str) -> str:
    """Replace volatile top-level values in an INFO object, keeping every other byte as is.

    The object is walked with the json module's own scanners, so keys are found by parsing, not by
    regex, and the spans between values (spacing, order) are copied unchanged. A string value
    becomes "<key>", a number becomes 0, so a changed JSON type would still show.
    """
    pos = _skip_ws(text, 0)
    if not text.startswith("{", pos):
        return text
    out: list[str] = [text[: pos + 1]]
    pos += 1
    while True:
        key_start = _skip_ws(text, pos)
        if text.startswith("}", key_start):
            out.append(text[pos:])
            return "".join(out)
        if not text.startswith('"', key_start):
            return text
        key, after_key = _DECODER.raw_decode(text, key_start)
        colon = _skip_ws(text, after_key)
        if not text.startswith(":", colon):
            return text
        value_start = _skip_ws(text, colon + 1)
        value, value_end = _DECODER.raw_decode(text, value_start)
        out.append(text[pos:value_start])
        if key in VOLATILE_INFO_KEYS and isinstance(value, str):
            out.append(json.dumps(f"<{key}>"))
        elif key in VOLATILE_INFO_KEYS and isinstance(value, int | float):
            out.append("0")
        else:
            out.append(text[value_start:value_end])
        pos = _skip_ws(text, value_end)
        if text.startswith(",", pos):
            out.append(text[value_end : pos + 1])
            pos += 1
        else:
            out.append(text[value_end:pos])


def normalise_info_line(line: bytes) -> bytes:
    """Normalise one line that starts with `INFO ` (line ending included, kept as sent)."""
    body_end = len(line)
    for ending in (b"\r\n", b"\n"):
        if line.endswith(ending):
            body_end = len(line) - len(ending)
            break
    head, body, tail = line[:5], line[5:body_end], line[body_end:]
    # Only the JSON value is rewritten; whatever follows it (the real server's space before
    # CRLF) stays part of the compared bytes.
    try:
        text = body.decode()
        start = _skip_ws(text, 0)
        _, end = _DECODER.raw_decode(text, start)
    except (UnicodeDecodeError, ValueError):
        return line
    fixed = text[:start] + _normalise_info_json(text[start:end]) + text[end:]
    return head + fixed.encode() + tail


def split_frames(data: bytes) -> list[bytes]:
    """Cut a server-to-client stream into frames (control line plus payload for MSG/HMSG).

    A trailing partial frame is returned as it is, so nothing received is ever dropped.
    """
    frames: list[bytes] = []
    pos = 0
    while pos < len(data):
        nl = data.find(b"\n", pos)
        if nl < 0:
            frames.append(data[pos:])
            break
        line_end = nl + 1
        words = data[pos:line_end].split()
        op = words[0].upper() if words else b""
        size = 0
        if op in (b"MSG", b"HMSG") and len(words) >= 4:
            try:
                size = int(words[-1]) + 2  # payload plus its CRLF
            except ValueError:
                size = 0
        end = min(len(data), line_end + size)
        frames.append(data[pos:end])
        pos = end
    return frames


def normalise_js_ack_time(frame: bytes) -> bytes:
    """A JetStream delivery's ack subject carries the time it was stored
    (`$JS.ACK.<stream>.<consumer>.<dc>.<sseq>.<dseq>.<ts>.<pending>`): that one token is
    replaced, everything else is kept."""
    start = frame.find(b" $JS.ACK.")
    if start < 0 or not frame.startswith((b"MSG ", b"HMSG ")):
        return frame
    end = frame.find(b" ", start + 1)
    tokens = frame[start + 1 : end].split(b".")
    if len(tokens) != 9:
        return frame
    tokens[7] = b"<ts>"
    return frame[: start + 1] + b".".join(tokens) + frame[end:]


def normalise(data: bytes) -> bytes:
    """Normalise every INFO frame in a server-to-client stream, and the timestamp in JetStream
    ack subjects; other bytes are kept exactly."""
    return b"".join(
        normalise_info_line(f) if f.startswith(b"INFO ") else normalise_js_ack_time(f)
        for f in split_frames(data)
    )
