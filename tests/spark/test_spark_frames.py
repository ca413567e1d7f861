"""Frames parsed in bulk (pynatsd.spark.frames) give what the frame-by-frame parser gives: the
same messages, in the same order, whatever else the buffer holds."""

from __future__ import annotations

import pyarrow as pa
import pytest

from pynatsd.spark import client, wire
from pynatsd.spark.frames import msg_run
from pynatsd.spark.options import ConnectOptions, parse_servers

PREFIX = b"$JS.ACK.S.c."


def _msg(seq: int, payload: bytes = b"", sid: bytes = b"7", subject: bytes = b"s.x") -> bytes:
    payload = payload or b"p%d" % seq
    reply = PREFIX + b"1.%d.%d.%d.%d" % (seq, seq, seq * 1000, 1000 - seq)
    return b"MSG %s %s %s %d\r\n%s\r\n" % (subject, sid, reply, len(payload), payload)


def test_a_run_stops_at_the_first_frame_it_cannot_take() -> None:
    head = _msg(1) + _msg(2, b"a b c")
    for tail in (
        b"HMSG s 7 r 12 12\r\nNATS/1.0\r\n\r\n\r\n",  # a status
        b"PING\r\n",
        _msg(3, b"with\r\ncrlf"),
        _msg(3, sid=b"8"),  # another subscription
        b"MSG s 7 5\r\nabcde\r\n",  # no reply subject
        _msg(3)[:-1],  # partial
    ):
        buf = b"xx" + head + tail + _msg(9)
        after, run = msg_run(buf, 2, len(buf), b"7")
        assert after == 2 + len(head)
        assert run is not None
        assert run.subjects.to_pylist() == [b"s.x", b"s.x"]
        assert run.payloads.to_pylist() == [b"p1", b"a b c"]
        assert run.replies.to_pylist()[1] == PREFIX + b"1.2.2.2000.998"
    assert msg_run(b"PING\r\n" + head, 0, 6 + len(head), b"7") == (0, None)
    # The end bound cuts like a partial frame.
    after, run = msg_run(head, 0, len(head) - 1, b"7")
    assert after == len(_msg(1)) and run is not None and len(run) == 1


def test_acks_without_reply_subjects_run_too() -> None:
    acks = b"".join(b"MSG _INBOX.a 3 %d\r\n%s\r\n" % (len(p), p) for p in (b"{}", b"{ }"))
    after, run = msg_run(acks, 0, len(acks), b"3", with_reply=False)
    assert after == len(acks) and run is not None and run.replies is None
    assert run.payloads.to_pylist() == [b"{}", b"{ }"]
    assert msg_run(acks, 0, len(acks), b"3") == (0, None)


def _connection(buf: bytes, pull: client._RangePull, bulk: bool) -> wire.Connection:
    conn = wire.Connection(ConnectOptions(servers=parse_servers("127.0.0.1:1")))
    conn._buf = buf
    conn._subs[b"7"] = pull.on_msg
    if bulk:
        conn._run_sid, conn._run_callback = b"7", pull.on_run
    return conn


@pytest.mark.parametrize("end", [10_000, 1500])
def test_a_range_read_in_bulk_reads_what_one_by_one_does(end: int) -> None:
    # Runs and other frames mixed, as a pull's answer and its end-of-batch status arrive.
    parts = [_msg(seq, b"x" * (seq % 50)) for seq in range(1, 2000)]
    parts.insert(700, b"HMSG s 7 12 12\r\nNATS/1.0 100\r\n\r\n\r\n")  # a heartbeat
    parts.insert(900, _msg(900, b"crlf\r\ninside"))
    del parts[901]
    buf = b"".join(parts)
    pulls = []
    for bulk in (False, True):
        pull = client._RangePull(end, False, ())
        pull.on_consumer("S", "c")
        conn = _connection(buf, pull, bulk)
        conn._process()
        pulls.append(pull)
    one, many = (p.chunk.columns() for p in pulls)
    for column in ("subjects", "payloads", "seqs", "times_ns"):
        assert getattr(many, column).equals(getattr(one, column))
    assert len(pulls[1].chunk) == min(end, 2000) - 1
    for name in ("first_seq", "last_seq", "done", "received", "outstanding"):
        assert getattr(pulls[1], name) == getattr(pulls[0], name), name


def test_bulk_acks_count_duplicates_and_say_a_failure_once() -> None:
    payloads = [b'{"stream":"S","seq":%d}' % i for i in range(300)]
    payloads[10] = b'{"stream":"S","seq":10,"duplicate":true}'
    payloads[200] = b'{"error":{"code":503,"err_code":10077,"description":"x"}}'
    payloads[250] = b'{"error":{"code":400,"err_code":10060,"description":"y"}}'
    acks = client._Acks()
    acks.on_run(
        type("Run", (), {"payloads": pa.array(payloads, pa.binary()), "__len__": lambda s: 300})()
    )
    assert acks.received == 300 and acks.duplicates == 1
    assert str(acks.error) == "nats: publish: x (code 503, err_code 10077)"
