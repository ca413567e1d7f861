"""Plain publishes are stored a turn of the event loop at a time, in one write (stream.py,
`_store_pending`): whatever comes after them in the same read (a publish with expectations, a
STREAM.INFO, a pull request, a purge) must still see them stored, in order, exactly as
nats-server answers the same bytes sent in one write."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from pynatsd.jetstream.store import file as file_mod
from support.jspair import go_server, py_server
from support.natsserver import nats_server_binary
from support.rawclient import RawClient

pytestmark = pytest.mark.skipif(nats_server_binary() is None, reason="nats-server not installed")

CONNECT = b'CONNECT {"verbose":false,"pedantic":false,"headers":true,"protocol":1}\r\n'


def pub(subject: str, reply: str, data: bytes = b"x") -> bytes:
    return b"PUB %s %s %d\r\n%s\r\n" % (subject.encode(), reply.encode(), len(data), data)


def hpub(subject: str, reply: str, header: bytes, data: bytes = b"h") -> bytes:
    size = len(header) + len(data)
    return b"HPUB %s %s %d %d\r\n%s%s\r\n" % (
        subject.encode(),
        reply.encode(),
        len(header),
        size,
        header,
        data,
    )


def replies(data: bytes) -> dict[str, dict[str, object]]:
    """The JSON body of every reply, by its reply subject (`r.<n>`)."""
    out: dict[str, dict[str, object]] = {}
    for m in re.finditer(rb"MSG (r\.\S+) \d+ (\d+)\r\n", data):
        start = m.end()
        body = data[start : start + int(m.group(2))]
        out[m.group(1).decode()] = json.loads(body)
    return out


async def with_stream(url: str) -> RawClient:
    """A raw client subscribed to `r.>`, after creating stream S on `s.>`."""
    client = await RawClient.connect(int(url.rsplit(":", 1)[1]))
    create = json.dumps({"name": "S", "subjects": ["s.>"]}).encode()
    await client.send(CONNECT + b"SUB r.> 1\r\n" + pub("$JS.API.STREAM.CREATE.S", "r.c", create))
    await client.read_until(b"MSG r.c")
    await client.read_all(quiet=0.2)
    return client


async def one_write(url: str) -> dict[str, dict[str, object]]:
    client = await with_stream(url)
    expect_5 = b"NATS/1.0\r\nNats-Expected-Last-Sequence: 5\r\n\r\n"
    expect_7 = b"NATS/1.0\r\nNats-Expected-Last-Sequence: 7\r\n\r\n"
    burst = b"".join(pub(f"s.{i % 2}", f"r.{i}") for i in range(1, 6))
    burst += hpub("s.h", "r.6", expect_5)  # sees the five before it
    burst += pub("s.0", "r.7")
    burst += pub("$JS.API.STREAM.INFO.S", "r.info", b"")
    burst += hpub("s.h", "r.8", expect_5)  # refused: the last sequence is 7 by now
    burst += pub("s.1", "r.9")
    burst += hpub("s.h", "r.10", expect_7)  # refused: 8
    burst += pub("$JS.API.STREAM.PURGE.S", "r.purge", b'{"filter":"s.0"}')
    burst += pub("s.0", "r.11")
    burst += pub("$JS.API.STREAM.INFO.S", "r.info2", b"")
    return await send_burst(client, burst, b"MSG r.info2", 14)


async def send_burst(
    client: RawClient, burst: bytes, last: bytes, count: int
) -> dict[str, dict[str, object]]:
    """Send `burst` in one write; the replies once `last` and `count` of them are in."""
    await client.send(burst)
    got = b""
    while last not in got or got.count(b"MSG r.") < count:
        got += await client.read_until(b"\r\n", timeout=10)
    got += (await client.read_all(quiet=0.3))[0]
    await client.close()
    return replies(got)


def _summary(found: dict[str, dict[str, object]]) -> dict[str, object]:
    def state(key: str) -> object:
        st = found[key]["state"]
        assert isinstance(st, dict)
        return {k: st[k] for k in ("messages", "first_seq", "last_seq", "num_subjects")}

    out: dict[str, object] = {}
    for key, body in found.items():
        if key.startswith("r.info"):
            out[key] = state(key)
        elif key == "r.purge":
            out[key] = body
        elif key != "r.c":
            error = body.get("error")
            if isinstance(error, dict):
                out[key] = {"err_code": error["err_code"]}
            elif body.get("duplicate"):
                out[key] = ("duplicate", body.get("seq"))
            else:
                out[key] = body.get("seq")
    return out


async def test_a_burst_in_one_write_as_nats_server(tmp_path: Path) -> None:
    """The PubAcks as nats-server's. Its API requests run on a queue of their own, so what its
    INFO and purge see of the publishes around them varies; pynatsd answers them in order,
    as before plain publishes waited for the end of the turn."""
    async with go_server(tmp_path / "go") as url:
        expected = _summary(await one_write(url))
    async with py_server(tmp_path / "py") as url:
        got = _summary(await one_write(url))
    api = ("r.info", "r.purge", "r.info2")
    assert {k: v for k, v in got.items() if k not in api} == {
        k: v for k, v in expected.items() if k not in api
    }
    assert got["r.6"] == 6 and got["r.9"] == 8 and got["r.11"] == 9
    assert got["r.8"] == got["r.10"] == {"err_code": 10071}
    assert got["r.info"] == {"messages": 7, "first_seq": 1, "last_seq": 7, "num_subjects": 3}
    purged = got["r.purge"]
    assert isinstance(purged, dict) and purged["purged"] == 3  # s.0: 2, 4 and 7
    assert got["r.info2"] == {"messages": 6, "first_seq": 1, "last_seq": 9, "num_subjects": 3}


async def test_a_failed_write_answers_every_publish_of_the_turn(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A full disk refuses the whole turn's batch: every publisher gets the store's error
    (as a single refused publish does), nothing is stored, and the stream goes on after."""
    async with py_server(tmp_path / "py") as url:
        client = await with_stream(url)

        def disk_full(fd: int, data: bytes, offset: int) -> int:
            raise OSError(28, "No space left on device")

        monkeypatch.setattr(file_mod, "_pwrite", disk_full)
        await client.send(b"".join(pub("s.a", f"r.{i}") for i in range(1, 11)))
        got = b""
        while got.count(b"MSG r.") < 10:
            got += await client.read_until(b"\r\n", timeout=10)
        got += (await client.read_all(quiet=0.2))[0]
        found = replies(got)
        assert sorted(found) == sorted(f"r.{i}" for i in range(1, 11))
        for body in found.values():
            assert body["error"] == {
                "code": 503,
                "err_code": 10077,
                "description": "insufficient resources",
            }
        monkeypatch.undo()
        await client.send(pub("s.a", "r.ok"))
        found = replies(await client.read_until(b"}\r\n"))
        assert found["r.ok"] == {"stream": "S", "seq": 1}
        await client.close()


def ids(msg_id: str, stream: str = "") -> bytes:
    header = b"NATS/1.0\r\nNats-Msg-Id: %s\r\n" % msg_id.encode()
    if stream:
        header += b"Nats-Expected-Stream: %s\r\n" % stream.encode()
    return header + b"\r\n"


async def id_burst(url: str) -> dict[str, dict[str, object]]:
    """Publishes with the Spark writer's headers, sent in one write: they join the turn's
    group, except a repeated id (in the group, or stored before), a wrong expected stream
    and headers the group does not check."""
    client = await with_stream(url)
    await client.send(hpub("s.a", "r.1", ids("one", "S")))
    await client.read_until(b"MSG r.1")
    burst = hpub("s.a", "r.2", ids("two", "S"))
    burst += pub("s.b", "r.3")
    burst += hpub("s.a", "r.4", ids("two"))  # a duplicate of r.2, in the same group
    burst += hpub("s.a", "r.5", ids("one", "S"))  # a duplicate of r.1, stored before
    burst += hpub("s.a", "r.6", ids("three", "T"))  # the wrong stream
    burst += hpub("s.a", "r.7", ids("three", "S"))
    burst += hpub("s.a", "r.8", b"NATS/1.0\r\nNats-Msg-Id:  four\r\nX-App: 1\r\n\r\n")
    burst += hpub("s.a", "r.9", ids("four"))  # the id is read without the leading blanks
    burst += hpub("s.a", "r.10", ids("five")[:-2] + b"Nats-Expected-Last-Msg-Id: four\r\n\r\n")
    burst += hpub("s.a", "r.11", ids("six")[:-2] + b"Nats-Expected-Last-Msg-Id: four\r\n\r\n")
    burst += pub("s.c", "r.12")
    burst += pub("$JS.API.STREAM.INFO.S", "r.info", b"")
    return await send_burst(client, burst, b"MSG r.info", 12)


async def test_message_ids_in_one_write_as_nats_server(tmp_path: Path) -> None:
    async with go_server(tmp_path / "go") as url:
        expected = _summary(await id_burst(url))
    async with py_server(tmp_path / "py") as url:
        got = _summary(await id_burst(url))
    info = got.pop("r.info")
    expected.pop("r.info")
    assert got == expected
    assert got["r.4"] == ("duplicate", 2) and got["r.5"] == ("duplicate", 1)
    assert got["r.9"] == ("duplicate", 5) and got["r.10"] == 6 and got["r.12"] == 7
    assert got["r.6"] == {"err_code": 10060} and got["r.11"] == {"err_code": 10070}
    assert info == {"messages": 7, "first_seq": 1, "last_seq": 7, "num_subjects": 3}
