"""A small synchronous NATS client connection: a blocking socket, the client side of the protocol,
and callbacks per subscription.

Why not nats-py here: Spark calls our code from plain threads with no event loop, and the hot paths
(reading a sequence range, publishing a window of acked messages) are bulk loops. Measured on this
project's 2-core box, 200k stored 100-byte messages pulled with `$JS.API.CONSUMER.MSG.NEXT`: this
connection 0.67-0.71 s (~290k msgs/s) against nats-py with a callback subscription 1.2-1.9 s and
nats-py's `PullSubscription.fetch()` 3-5x slower still; acked JetStream publishes with a window of
4000: ~115k msgs/s here against ~38k with nats-py's `publish_async`. docs/spark.md has the figures.

The parser keeps a receive buffer and an offset into it: each byte is examined a bounded number of
times (a partial frame is re-examined only from its control line), so the work is O(bytes received).
Messages are handed to the subscription's callback as they are parsed, without queues or objects
per message, which is where the time went in the async clients. A subscription may also take runs
of plain `MSG` frames in bulk (`runs`): they are parsed by Arrow kernels (frames.py) at about
0.7 us per message against 1.7 us one by one, which is how pulled messages and publish acks come.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import random
import re
import secrets
import socket
import ssl
import time
from collections.abc import Callable
from typing import Any

from pynatsd.spark.errors import (
    ConnectError,
    ConnectionLost,
    NoResponders,
    ProtocolError,
    RequestTimeout,
)
from pynatsd.spark.frames import MsgRun, msg_run
from pynatsd.spark.options import ConnectOptions, ServerAddress

# (subject, reply, header block or b"", payload). The header block includes the `NATS/1.0` line.
MsgCallback = Callable[[bytes, bytes, bytes, bytes], None]
RunCallback = Callable[[MsgRun], None]

_RECV_SIZE = 1 << 20
# A subscription with a run callback gets its runs of MSG frames parsed in bulk (frames.py) when
# at least this many bytes wait, looking at most this far ahead at a time.
_RUN_MIN_BYTES = 4096
_RUN_WINDOW = 1 << 19
_CREDS_BLOCK = re.compile(rb"-{3,}[^\n]*-{3,}\r?\n(.+?)\r?\n\s*-{3,}[^\n]*-{3,}", re.S)


def new_inbox() -> str:
    return "_INBOX." + secrets.token_hex(11)


def status_of(header: bytes) -> int:
    """The status code of a header block (`NATS/1.0 404 No Messages`), 0 when there is none."""
    end = header.find(b"\r\n")
    line = header[:end] if end >= 0 else header
    if len(line) >= 12 and line[8:9] == b" ":
        try:
            return int(line[9:12])
        except ValueError:
            return 0
    return 0


class Connection:
    """One client connection. Not thread-safe: one thread drives it (`run`, `request`)."""

    def __init__(self, options: ConnectOptions) -> None:
        self.options = options
        self.server: ServerAddress | None = None
        self.info: dict[str, Any] = {}
        self._sock: socket.socket | None = None
        self._buf = b""
        self._pos = 0
        self._subs: dict[bytes, MsgCallback] = {}
        self._run_sid = b""
        self._run_callback: RunCallback | None = None
        self._run_replies = True
        self._next_sid = 1
        self._pongs = 0
        self._closed = False
        self._inbox_prefix = b""
        self._replies: dict[bytes, tuple[bytes, bytes]] = {}
        self._next_token = 0
        self.bytes_received = 0  # lets bulk readers size their requests without per-message work

    # --- connecting --------------------------------------------------------------------------

    @classmethod
    def open(cls, options: ConnectOptions) -> Connection:
        conn = cls(options)
        conn.connect()
        return conn

    def connect(self) -> None:
        """Connect to one of the servers, tried in random order (as NATS clients do, so that the
        tasks of a job spread over a cluster's nodes); an unreachable one is skipped."""
        errors = []
        for server in random.sample(self.options.servers, len(self.options.servers)):
            try:
                self._connect_to(server)
                self.server = server
                return
            except ConnectError as e:
                # Credentials or TLS refused: another server of the same cluster would refuse too.
                self.close()
                raise e
            except (OSError, ProtocolError, TimeoutError) as e:
                self.close()
                errors.append(f"{server}: {e}")
        raise ConnectError("cannot connect to any server (option 'servers'): " + "; ".join(errors))

    def _connect_to(self, server: ServerAddress) -> None:
        self._closed = False
        self._buf, self._pos = b"", 0
        timeout = self.options.connect_timeout
        sock = socket.create_connection((server.host, server.port), timeout=timeout)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._sock = sock
        line = self._read_line(time.monotonic() + timeout)
        if not line.startswith(b"INFO "):
            raise ProtocolError(f"expected INFO from {server}, got {line[:80]!r}")
        self.info = json.loads(line[5:])
        if self.info.get("tls_required") or self.options.wants_tls:
            self._sock = self._tls_wrap(sock, server)
        connect = self._connect_fields(server)
        self._send(b"CONNECT " + json.dumps(connect).encode() + b"\r\nPING\r\n")
        # The server answers PONG when it accepts us, or -ERR (then closes) when it does not.
        deadline = time.monotonic() + timeout
        while True:
            line = self._read_line(deadline)
            if line == b"PONG":
                return
            if line.startswith(b"-ERR"):
                reason = line[4:].strip().strip(b"'").decode(errors="replace")
                raise ConnectError(
                    f"{server} refused the connection: {reason} (check the "
                    "options nats.user/nats.password/nats.token/nats.creds/"
                    "nats.nkey_seed and tls.*)"
                )
            if line.startswith(b"PING"):
                self._send(b"PONG\r\n")

    def _tls_wrap(self, sock: socket.socket, server: ServerAddress) -> socket.socket:
        opts = self.options
        try:
            context = ssl.create_default_context(cafile=opts.tls_ca or None)
            if opts.tls_cert:
                context.load_cert_chain(opts.tls_cert, opts.tls_key)
            return context.wrap_socket(sock, server_hostname=server.host)
        except ssl.SSLError as e:
            raise ConnectError(
                f"TLS handshake with {server} failed: {e} (options tls.ca, tls.cert, tls.key)"
            ) from e
        except OSError as e:
            raise ConnectError(f"TLS setup for {server} failed: {e}") from e

    def _connect_fields(self, server: ServerAddress) -> dict[str, Any]:
        opts = self.options
        fields: dict[str, Any] = {
            "verbose": False,
            "pedantic": False,
            "headers": True,
            "no_responders": True,
            "protocol": 1,
            "lang": "python-pynatsd-spark",
            "version": "0.1.0",
            "name": opts.name,
        }
        user, password = opts.user or server.user, opts.password or server.password
        if user:
            fields["user"], fields["pass"] = user, password
        if opts.token:
            fields["auth_token"] = opts.token
        nonce = str(self.info.get("nonce", "")).encode()
        if opts.creds:
            jwt, seed = _read_creds(opts.creds)
            fields["jwt"] = jwt.decode()
            fields["sig"] = _sign(seed, nonce)
        elif opts.nkey_seed:
            seed = _read_seed(opts.nkey_seed)
            fields["nkey"] = _public_key(seed)
            fields["sig"] = _sign(seed, nonce)
        return fields

    # --- sending -----------------------------------------------------------------------------

    def _send(self, data: bytes | memoryview) -> None:
        if self._sock is None:
            raise ProtocolError("connection is closed")
        self._sock.sendall(data)

    def send(self, data: bytes | memoryview) -> None:
        """Raw protocol bytes, already framed (see `pub_frame`)."""
        self._send(data)

    def publish(self, subject: str, payload: bytes, reply: str = "", header: bytes = b"") -> None:
        self._send(pub_frame(subject.encode(), payload, reply.encode(), header))

    def subscribe(
        self,
        subject: str,
        callback: MsgCallback,
        queue: str = "",
        runs: RunCallback | None = None,
        runs_have_replies: bool = True,
    ) -> bytes:
        """`callback` per message; with `runs`, runs of plain `MSG` frames (with a reply
        subject, or without one when not `runs_have_replies`) go to `runs` in bulk instead
        (one such subscription at a time: the latest)."""
        sid = str(self._next_sid).encode()
        self._next_sid += 1
        self._subs[sid] = callback
        if runs is not None:
            self._run_sid, self._run_callback = sid, runs
            self._run_replies = runs_have_replies
        q = b" " + queue.encode() if queue else b""
        self._send(b"SUB " + subject.encode() + q + b" " + sid + b"\r\n")
        return sid

    def unsubscribe(self, sid: bytes) -> None:
        self._subs.pop(sid, None)
        if sid == self._run_sid:
            self._run_sid, self._run_callback = b"", None
        if self._sock is not None and not self._closed:
            self._send(b"UNSUB " + sid + b"\r\n")

    def flush(self, timeout: float) -> None:
        """Round trip a PING: every frame sent before it has been processed by the server."""
        want = self._pongs + 1
        self._send(b"PING\r\n")
        self.run(lambda: self._pongs >= want, timeout, "flush (PING/PONG)")

    # --- receiving ---------------------------------------------------------------------------

    def run(self, until: Callable[[], bool], timeout: float, what: str) -> None:
        """Read and dispatch frames until `until()` holds; RequestTimeout after `timeout` s."""
        deadline = time.monotonic() + timeout
        self._process()
        while not until():
            self._receive(deadline, what)
            self._process()

    def poll(self, timeout: float) -> bool:
        """Dispatch whatever arrives within `timeout` s (at most one read); False on timeout."""
        self._process()
        try:
            self._receive(time.monotonic() + timeout, "poll")
        except RequestTimeout:
            return False
        self._process()
        return True

    def _receive(self, deadline: float, what: str) -> None:
        sock = self._sock
        if sock is None:
            raise ProtocolError("connection is closed")
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise RequestTimeout(
                f"timed out waiting for {what} from {self.server} (option 'requestTimeout')"
            )
        sock.settimeout(remaining)
        try:
            chunk = sock.recv(_RECV_SIZE)
        except TimeoutError:
            raise RequestTimeout(
                f"timed out waiting for {what} from {self.server} (option 'requestTimeout')"
            ) from None
        if not chunk:
            self._closed = True
            raise ConnectionLost(f"{self.server} closed the connection")
        self.bytes_received += len(chunk)
        if self._pos < len(self._buf):
            self._buf = self._buf[self._pos :] + chunk
        else:
            self._buf = chunk
        self._pos = 0

    def _read_line(self, deadline: float) -> bytes:
        while True:
            eol = self._buf.find(b"\r\n", self._pos)
            if eol >= 0:
                line = self._buf[self._pos : eol]
                self._pos = eol + 2
                return line
            self._receive(deadline, "the server's greeting")

    def _process(self) -> None:
        """Parse every complete frame in the buffer and dispatch it. The offset is stored before
        each dispatch, so a callback that raises leaves the connection consistent. Callbacks must
        not read from the connection themselves (they may send)."""
        buf, pos, subs = self._buf, self._pos, self._subs
        n = len(buf)
        bulk = True  # until a bulk attempt finds mostly other frames in this buffer
        while pos < n:
            runs = self._run_callback
            if (
                runs is not None
                and bulk
                and n - pos >= _RUN_MIN_BYTES
                and buf.startswith(b"MSG ", pos)  # a status HMSG or a PING: no run here
            ):
                end = min(n, pos + _RUN_WINDOW)
                after, run = msg_run(buf, pos, end, self._run_sid, self._run_replies)
                # Bulk parsing costs about the bytes it looks at: when most of them were not
                # a run, the rest of this buffer goes frame by frame (O(bytes) either way).
                bulk = 2 * (after - pos) >= end - pos
                if run is not None:
                    self._pos = pos = after
                    runs(run)
                    continue
            eol = buf.find(b"\r\n", pos)
            if eol < 0:
                break
            op = buf[pos]
            if op == 77:  # MSG <subject> <sid> [reply] <size>
                args = buf[pos + 4 : eol].split(b" ")
                start = eol + 2
                end = start + int(args[-1])
                if end + 2 > n:
                    break
                cb = subs.get(args[1])
                self._pos = pos = end + 2
                if cb is not None:
                    cb(args[0], args[2] if len(args) == 4 else b"", b"", buf[start:end])
            elif op == 72:  # HMSG <subject> <sid> [reply] <header size> <total size>
                args = buf[pos + 5 : eol].split(b" ")
                start = eol + 2
                hend = start + int(args[-2])
                end = start + int(args[-1])
                if end + 2 > n:
                    break
                cb = subs.get(args[1])
                self._pos = pos = end + 2
                if cb is not None:
                    cb(args[0], args[2] if len(args) == 5 else b"", buf[start:hend], buf[hend:end])
            else:
                line = buf[pos:eol]
                self._pos = pos = eol + 2
                self._control(line)
        self._buf, self._pos = buf, pos

    def _control(self, line: bytes) -> None:
        if line == b"PING":
            self._send(b"PONG\r\n")
        elif line == b"PONG":
            self._pongs += 1
        elif line.startswith(b"-ERR"):
            reason = line[4:].strip().strip(b"'").decode(errors="replace")
            # Permission violations leave the connection open; anything else closes it.
            raise ProtocolError(f"server error from {self.server}: {reason}")
        elif line.startswith(b"INFO ") or line == b"+OK" or not line:
            pass
        else:
            raise ProtocolError(f"unexpected frame from {self.server}: {line[:80]!r}")

    # --- request / reply ---------------------------------------------------------------------

    def request(
        self, subject: str, payload: bytes, timeout: float | None = None, header: bytes = b""
    ) -> tuple[bytes, bytes]:
        """Publish with a reply subject and wait for the first answer: (header, payload).
        NoResponders when nobody listens (the server's 503 status)."""
        if not self._inbox_prefix:
            self._inbox_prefix = new_inbox().encode() + b"."
            self.subscribe(self._inbox_prefix.decode() + "*", self._on_reply)
            # In a cluster the answer may come from another node (a JetStream leader): once the
            # server has our SUB, its interest is on the routes ahead of the request.
            self.flush(self.options.request_timeout)
        self._next_token += 1
        token = str(self._next_token).encode()
        self._send(pub_frame(subject.encode(), payload, self._inbox_prefix + token, header))
        wait = self.options.request_timeout if timeout is None else timeout
        self.run(lambda: token in self._replies, wait, f"a reply on {subject}")
        hdr, data = self._replies.pop(token)
        if hdr and status_of(hdr) == 503:
            raise NoResponders(f"no responders on {subject}")
        return hdr, data

    def _on_reply(self, subject: bytes, reply: bytes, header: bytes, payload: bytes) -> None:
        token = subject[len(self._inbox_prefix) :]
        self._replies[token] = (header, payload)

    def close(self) -> None:
        sock, self._sock = self._sock, None
        self._closed = True
        self._subs.clear()
        self._run_sid, self._run_callback = b"", None
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.close()

    def __enter__(self) -> Connection:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def pub_frame(subject: bytes, payload: bytes, reply: bytes = b"", header: bytes = b"") -> bytes:
    r = b" " + reply if reply else b""
    if header:
        return b"HPUB %s%s %d %d\r\n%s%s\r\n" % (
            subject,
            r,
            len(header),
            len(header) + len(payload),
            header,
            payload,
        )
    return b"PUB %s%s %d\r\n%s\r\n" % (subject, r, len(payload), payload)


# --- nkeys / creds -----------------------------------------------------------------------------


def _read_creds(path: str) -> tuple[bytes, bytes]:
    with open(path, "rb") as f:
        blocks = _CREDS_BLOCK.findall(f.read())
    if len(blocks) < 2:
        raise ConnectError(f"option 'nats.creds': {path!r} holds no user JWT and seed")
    return blocks[0].strip(), blocks[1].strip()


def _read_seed(value: str) -> bytes:
    if os.path.isfile(value):
        with open(value, "rb") as f:
            text = f.read()
        for line in text.splitlines():
            if line.strip().startswith(b"SU"):
                return line.strip()
        raise ConnectError(f"option 'nats.nkey_seed': no user seed (SU...) in {value!r}")
    return value.encode()


def _sign(seed: bytes, nonce: bytes) -> str:
    import nkeys  # only for nkey and creds logins

    try:
        key = nkeys.from_seed(bytearray(seed))
    except Exception as e:
        raise ConnectError(f"invalid nkey seed: {e}") from e
    return base64.urlsafe_b64encode(key.sign(nonce)).rstrip(b"=").decode()


def _public_key(seed: bytes) -> str:
    import nkeys

    public: bytes = nkeys.from_seed(bytearray(seed)).public_key
    return public.decode()
