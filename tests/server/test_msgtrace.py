"""Message tracing's parts alone (server/msgtrace.py): which header blocks ask for a trace, the
header rewrites, and the Snappy framing of compressed events. The behaviour as a whole is
compared with nats-server in test_msgtrace_vs_nats_server.py."""

from __future__ import annotations

import pytest

from pynatsd.s2 import crc32c
from pynatsd.server.msgtrace import (
    TRACE_DEST_DISABLED,
    set_header,
    snappy_frames,
    trace_headers,
)

HDR = "NATS/1.0\r\n"
DEST = "Nats-Trace-Dest"
PARENT = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7"

# nats-server's TestMsgTraceGenHeaderMap, row for row: (block, headers, only traceparent).
GEN_HEADER_MAP = [
    ("Nats-Trace-Dest: val\r\n", {}, False),
    (HDR + "Header1: val1\r\nHeader2: val2\r\n", {}, False),
    (HDR + "Some-Prefix-" + DEST + ": some value\r\n", {}, False),
    (HDR + DEST + "-Some-Suffix: some value\r\n", {}, False),
    (HDR + DEST + " : some value\r\n", {}, False),
    (HDR + DEST + ": bogus", {}, False),
    (HDR + DEST + ":      \r\n", {}, False),
    (HDR + "Some-Prefix-traceparent: " + PARENT + "-01\r\n", {}, False),
    (HDR + "traceparent-Some-Suffix: " + PARENT + "-01\r\n", {}, False),
    (HDR + "traceparent : " + PARENT + "-01\r\n", {}, False),
    (HDR + "traceparent: " + PARENT + "-01", {}, False),
    (HDR + "traceparent:      \r\n", {}, False),
    (
        HDR + DEST + ": some.dest\r\nSome-Header: some value\r\n",
        {"Some-Header": ["some value"], DEST: ["some.dest"]},
        False,
    ),
    (
        HDR + "Some-Header: some value\r\n" + DEST + ": some.dest\r\n",
        {"Some-Header": ["some value"], DEST: ["some.dest"]},
        False,
    ),
    (
        HDR + DEST + ": some.dest\r\nSome-Header: some value\r\n" + DEST + ": some.dest.2",
        {"Some-Header": ["some value"], DEST: ["some.dest"]},
        False,
    ),
    (
        HDR + DEST + ": some.dest\r\n: bogus\r\nSome-Header: some value\r\n",
        {"Some-Header": ["some value"], DEST: ["some.dest"]},
        False,
    ),
    (HDR + DEST + ": some.dest\r\nSome-Header: bogus", {DEST: ["some.dest"]}, False),
    (HDR + DEST + ":    some.dest   \r\n", {DEST: ["some.dest"]}, False),
    (
        HDR + DEST + ": some.dest\r\ntraceparent: " + PARENT + "-01\r\nSome-Header: some value\r\n",
        {"Some-Header": ["some value"], DEST: ["some.dest"], "traceparent": [PARENT + "-01"]},
        False,
    ),
    (HDR + "traceparent: 00-4bf92f3577b34da6a3ce929d0e0e4736-01\r\n", {}, False),
    (
        HDR + "traceparent: " + PARENT + "-01\r\nSome-Header: some value\r\n",
        {"Some-Header": ["some value"], "traceparent": [PARENT + "-01"]},
        True,
    ),
    (
        HDR + "Some-Header: v1\r\ntraceparent: " + PARENT + "-01\r\nSome-Header: v2\r\n",
        {"Some-Header": ["v1", "v2"], "traceparent": [PARENT + "-01"]},
        True,
    ),
    (
        HDR + "traceparent: " + PARENT + "-27\r\n",
        {"traceparent": [PARENT + "-27"]},
        True,
    ),
    (
        HDR + "traceparent:     " + PARENT + "-01   \r\n",
        {"traceparent": [PARENT + "-01"]},
        True,
    ),
    (HDR + "TrAcEpArEnT: " + PARENT + "-01\r\n", {"TrAcEpArEnT": [PARENT + "-01"]}, True),
    (HDR + "traceparent: " + PARENT + "-00\r\nSome-Header: some value\r\n", {}, False),
    (HDR + "traceparent: " + PARENT + "-22\r\n", {}, False),
    # Beyond nats-server's table: the flags are a signed byte, a disabled destination ends it.
    (HDR + "traceparent: " + PARENT + "-ff\r\n", {}, False),
    (HDR + DEST + ": " + TRACE_DEST_DISABLED + "\r\ntraceparent: " + PARENT + "-01\r\n", {}, False),
]


@pytest.mark.parametrize(("block", "headers", "external"), GEN_HEADER_MAP)
def test_which_headers_ask_for_a_trace(
    block: str, headers: dict[str, list[str]], external: bool
) -> None:
    found, only_parent = trace_headers(block.encode())
    # nats-server's own table leaves the second Nats-Trace-Dest value out of its expectation
    # and compares only the first values; so does this one.
    assert {k: v[: len(headers.get(k, v))] for k, v in found.items()} == headers
    assert only_parent is external


@pytest.mark.parametrize(
    ("block", "expected"),
    [
        (
            b"NATS/1.0\r\nNats-Trace-Dest: a.b\r\nX: 1\r\n\r\n",
            b"NATS/1.0\r\nNats-Trace-Dest: trace disabled\r\nX: 1\r\n\r\n",
        ),
        (
            b"NATS/1.0\r\nNats-Trace-Dest:a.b\r\n\r\n",
            b"NATS/1.0\r\nNats-Trace-Dest:trace disabled\r\n\r\n",
        ),
        (
            b"NATS/1.0\r\nX: 1\r\n\r\n",
            b"NATS/1.0\r\nX: 1\r\nNats-Trace-Dest: trace disabled\r\n\r\n",
        ),
        (
            b"NATS/1.0\r\nX-Nats-Trace-Dest: a\r\n\r\n",
            b"NATS/1.0\r\nX-Nats-Trace-Dest: a\r\nNats-Trace-Dest: trace disabled\r\n\r\n",
        ),
    ],
)
def test_a_stored_message_has_its_trace_switched_off(block: bytes, expected: bytes) -> None:
    assert set_header(block, "Nats-Trace-Dest", TRACE_DEST_DISABLED) == expected


def test_crc32c_is_castagnoli() -> None:
    assert crc32c(b"123456789") == 0xE3069283


def test_snappy_framing_of_uncompressed_chunks() -> None:
    data = bytes(range(256)) * 300  # more than one 64 KiB chunk
    framed = snappy_frames(data)
    assert framed.startswith(b"\xff\x06\x00\x00sNaPpY")
    pos, out = 10, b""
    while pos < len(framed):
        kind, length = framed[pos], int.from_bytes(framed[pos + 1 : pos + 4], "little")
        assert kind == 0x01
        masked = int.from_bytes(framed[pos + 4 : pos + 8], "little")
        chunk = framed[pos + 8 : pos + 4 + length]
        crc = crc32c(chunk)
        assert masked == (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF
        out += chunk
        pos += 4 + length
    assert out == data


def test_an_hpub_never_takes_a_delivery_plan() -> None:
    """Plans are keyed by the PUB line; the parser gives an HPUB none, so every HPUB reaches
    the session's slow path, where the trace header is looked for."""
    from pynatsd.protocol.events import Pub
    from pynatsd.protocol.parser import Parser

    parser = Parser(headers=True)
    block = b"NATS/1.0\r\nNats-Trace-Dest: t\r\n\r\n"
    frame = b"HPUB foo %d %d\r\n%shi\r\n" % (len(block), len(block) + 2, block)
    events = parser.feed(b"PUB foo 2\r\nhi\r\n" + frame * 2)
    pubs = [ev for ev in events if isinstance(ev, Pub)]
    assert [bool(ev.line) for ev in pubs] == [True, False, False]
