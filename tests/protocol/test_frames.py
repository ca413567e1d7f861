"""Frame builders produce exactly the bytes nats-server v2.15.1 writes.

Every expected value below was captured from the real server on loopback (see the facts file,
section 1.1), so a difference here is a wire incompatibility, not a style choice.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pynatsd import native
from pynatsd.protocol import errors
from pynatsd.protocol import frames as frames_module
from pynatsd.protocol.frames import (
    CRLF,
    OK_FRAME,
    PING_FRAME,
    PONG_FRAME,
    err_frame,
    hmsg_frame,
    info_frame,
    msg_frame,
    msg_head,
    no_responders_frame,
    pulled_msg_frame,
    status_header,
    stored_msg_frame,
)


def test_constant_frames() -> None:
    assert PING_FRAME == b"PING\r\n"
    assert PONG_FRAME == b"PONG\r\n"
    assert OK_FRAME == b"+OK\r\n"
    assert CRLF == b"\r\n"


@pytest.mark.parametrize(
    ("info", "expected"),
    [
        # nats-server writes compact JSON, keeps key order, and puts a space before the CRLF.
        (
            {"server_id": "N1", "version": "2.15.1", "proto": 1, "headers": True},
            b'INFO {"server_id":"N1","version":"2.15.1","proto":1,"headers":true} \r\n',
        ),
        (
            {"max_payload": 1048576, "jetstream": False, "connect_urls": ["a:1", "b:2"]},
            b'INFO {"max_payload":1048576,"jetstream":false,"connect_urls":["a:1","b:2"]} \r\n',
        ),
        ({}, b"INFO {} \r\n"),
    ],
    ids=["basic", "list-and-false", "empty"],
)
def test_info_frame(info: dict[str, Any], expected: bytes) -> None:
    frame = info_frame(info)
    assert frame == expected
    # And it must stay one line that a client can decode.
    assert frame.count(b"\n") == 1
    assert json.loads(frame[5:-3]) == info


def test_info_frame_escapes_like_go() -> None:
    # Captured from nats-server v2.15.1 started with --name 'a<b>&é\u2028x'.
    frame = info_frame({"server_name": "a<b>&é\u2028x"})
    assert frame == b'INFO {"server_name":"a\\u003cb\\u003e\\u0026\xc3\xa9\\u2028x"} \r\n'


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (errors.UNKNOWN_PROTOCOL_OPERATION, b"-ERR 'Unknown Protocol Operation'\r\n"),
        (errors.MAXIMUM_CONTROL_LINE_EXCEEDED, b"-ERR 'maximum control line exceeded'\r\n"),
        (errors.MAXIMUM_PAYLOAD_VIOLATION, b"-ERR 'Maximum Payload Violation'\r\n"),
        (errors.AUTHORIZATION_VIOLATION, b"-ERR 'Authorization Violation'\r\n"),
        (errors.STALE_CONNECTION, b"-ERR 'Stale Connection'\r\n"),
        # Go's %q puts double quotes inside the single-quoted text.
        (
            errors.permissions_publish("foo"),
            b"-ERR 'Permissions Violation for Publish to \"foo\"'\r\n",
        ),
        (
            errors.permissions_subscribe("foo", "q"),
            b'-ERR \'Permissions Violation for Subscription to "foo" using queue "q"\'\r\n',
        ),
    ],
)
def test_err_frame(text: str, expected: bytes) -> None:
    assert err_frame(text) == expected


@pytest.mark.parametrize(
    ("subject", "sid", "reply", "payload", "expected"),
    [
        (b"foo", b"7", b"", b"hi", b"MSG foo 7 2\r\nhi\r\n"),
        (b"foo", b"7", b"r", b"hi", b"MSG foo 7 r 2\r\nhi\r\n"),
        (b"foo", b"1", b"", b"", b"MSG foo 1 0\r\n\r\n"),
        # A payload holding CRLF is framed by its size, never escaped.
        (b"a.b", b"12", b"_INBOX.x", b"x\r\ny", b"MSG a.b 12 _INBOX.x 4\r\nx\r\ny\r\n"),
    ],
    ids=["plain", "reply", "empty", "crlf-in-payload"],
)
def test_msg_frame(
    subject: bytes, sid: bytes, reply: bytes, payload: bytes, expected: bytes
) -> None:
    assert msg_frame(subject, sid, reply, payload) == expected


@pytest.mark.parametrize(
    ("reply", "expected"),
    [
        (b"", b"HMSG foo 7 12 14\r\nNATS/1.0\r\n\r\nhi\r\n"),
        (b"r", b"HMSG foo 7 r 12 14\r\nNATS/1.0\r\n\r\nhi\r\n"),
    ],
    ids=["plain", "reply"],
)
def test_hmsg_frame(reply: bytes, expected: bytes) -> None:
    # Bytes captured from nats-server for `HPUB foo [r] 12 14\r\nNATS/1.0\r\n\r\nhi\r\n`.
    assert hmsg_frame(b"foo", b"7", reply, 12, b"NATS/1.0\r\n\r\nhi") == expected


@pytest.mark.parametrize(
    ("code", "description", "headers", "expected"),
    [
        (503, "", None, b"NATS/1.0 503\r\n\r\n"),
        (404, "No Messages", None, b"NATS/1.0 404 No Messages\r\n\r\n"),
        (408, "Request Timeout", None, b"NATS/1.0 408 Request Timeout\r\n\r\n"),
        (503, "", {"Nats-Subject": "foo"}, b"NATS/1.0 503\r\nNats-Subject: foo\r\n\r\n"),
    ],
)
def test_status_header(
    code: int, description: str, headers: dict[str, str] | None, expected: bytes
) -> None:
    assert status_header(code, description, headers) == expected


@pytest.mark.parametrize(
    ("reply", "sid", "subject", "expected"),
    [
        # Captured from nats-server: SUB _INBOX.x 7, then PUB foo _INBOX.x 0 with no subscriber.
        (
            b"_INBOX.x",
            b"7",
            b"foo",
            b"HMSG _INBOX.x 7 35 35\r\nNATS/1.0 503\r\nNats-Subject: foo\r\n\r\n\r\n",
        ),
        (
            b"_INBOX.abc.1",
            b"42",
            b"svc.time",
            b"HMSG _INBOX.abc.1 42 40 40\r\nNATS/1.0 503\r\nNats-Subject: svc.time\r\n\r\n\r\n",
        ),
    ],
)
def test_no_responders_frame(reply: bytes, sid: bytes, subject: bytes, expected: bytes) -> None:
    frame = no_responders_frame(reply, sid, subject)
    assert frame == expected
    # The header length and the total length are equal: the body is empty.
    head, _, rest = frame.partition(b"\r\n")
    hdr_len, total_len = head.split()[-2:]
    assert hdr_len == total_len
    assert int(total_len) == len(rest) - 2


# The parts of one message, as the builders take them.
given_message_parts = given(
    subject=st.binary(min_size=1, max_size=20),
    sid=st.binary(min_size=1, max_size=5),
    reply=st.binary(max_size=20),
    header=st.one_of(st.just(b""), st.binary(min_size=1, max_size=40)),
    data=st.binary(max_size=60),
)


@given_message_parts
def test_stored_msg_frame_is_the_msg_head_frame(
    subject: bytes, sid: bytes, reply: bytes, header: bytes, data: bytes
) -> None:
    # The one-pass builder of JetStream's deliveries writes what the general builder writes.
    if header:
        expected = hmsg_frame(subject, sid, reply, len(header), header + data)
    else:
        expected = msg_frame(subject, sid, reply, data)
    assert stored_msg_frame(subject, sid, reply, header, data) == expected


@given_message_parts
def test_pulled_msg_frame_is_the_stored_frame_with_its_ack_reply(
    subject: bytes, sid: bytes, reply: bytes, header: bytes, data: bytes
) -> None:
    # The pull consumer's builder writes the reply itself: the bytes stored_msg_frame writes
    # when handed that reply.
    prefix = b"$JS.ACK.S.C."
    seq, dseq, ts, pending = len(reply) + 1, len(data) + 1, 1_700_000_000_123_456_789, len(sid)
    ack = b"%s1.%d.%d.%d.%d" % (prefix, seq, dseq, ts, pending)
    expected = stored_msg_frame(subject, sid, ack, header, data)
    assert pulled_msg_frame(subject, sid, prefix, seq, dseq, ts, pending, header, data) == expected


def test_msg_head_copies_sizes_as_written() -> None:
    # nats-server copies the publisher's size text: `PUB foo 05` is delivered as `MSG foo 1 05`.
    assert msg_head(b"foo", b"1", b"", b"05") == b"MSG foo 1 05\r\n"
    assert msg_head(b"foo", b"1", b"r", b"014", b"012") == b"HMSG foo 1 r 012 014\r\n"


_PURE = native.load_pure("pynatsd.protocol.frames")


@pytest.mark.skipif(not native.select().compiled, reason="the pure-Python path is active")
@given_message_parts
def test_compiled_frames_are_the_pure_frames(
    subject: bytes, sid: bytes, reply: bytes, header: bytes, data: bytes
) -> None:
    assert native.is_compiled(frames_module)
    size = b"%d" % len(data)
    for name, args in [
        ("msg_head", (subject, sid, reply, size)),
        ("msg_head", (subject, sid, reply, size, b"%d" % len(header))),
        ("msg_frame", (subject, sid, reply, data)),
        ("hmsg_frame", (subject, sid, reply, len(header), header + data)),
        ("stored_msg_frame", (subject, sid, reply, header, data)),
        ("pulled_msg_frame", (subject, sid, reply, 1, 2, 3, 4, header, data)),
        ("no_responders_frame", (reply, sid, subject)),
    ]:
        assert getattr(frames_module, name)(*args) == getattr(_PURE, name)(*args), name
