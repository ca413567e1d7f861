"""Mirrors and sources: a stream that copies the messages of other streams of its account.

nats-server does this with an internal push consumer per origin, flow-controlled across the
account (or domain) boundary. On one server the origin's store is right here, so a `Source`
reads it directly: it remembers the next origin sequence to copy, and the origin stream tells
its followers when it stored something new. Copies go through the target stream's normal
publish path (limits, retention, consumers), flagged as server-placed.

Sourced messages carry nats-server's `Nats-Stream-Source: <origin> <seq> <filter> <dest>
<subject>` header, which also tells a restarted server where to resume. A mirror keeps the
origin's sequence numbers while the origin has no interior gaps (its first sequence is matched
with a purge of the empty mirror); gaps are copied as skipped sequences when small and otherwise
close up (documented in docs/jetstream.md).

A source with `external` names its origin by an API prefix: nats-server sends its consumer
requests there and takes the deliveries on a subject under the deliver prefix. Here the prefix
is followed as such a request would go, through a service import of another account's
`$JS.API`, and the origin there is read only if a stream import brings the deliver prefix's
messages back unchanged, as nats-server needs. Anything else (a domain prefix of this very
server among them, which nats-server 2.15 does not answer either) leaves the source empty.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pynatsd.jetstream.gostruct import encode
from pynatsd.jetstream.store.base import StoredMsg
from pynatsd.jetstream.util import go_hash, now_ns, parse_go_time
from pynatsd.logger import log
from pynatsd.protocol.headers import append_headers, header_value
from pynatsd.server.accounts import service_import_target, stream_import_delivers
from pynatsd.transform import SubjectTransform

if TYPE_CHECKING:
    from pynatsd.jetstream.manager import AccountJetStream
    from pynatsd.jetstream.stream import Stream
    from pynatsd.jetstream.stream_config import StreamSource

# Messages copied per turn of the event loop.
_BUDGET = 1000
# How far back a restarted source looks for the last copied message.
_RESUME_SCAN = 100_000
# Interior gaps up to this size are reproduced in a mirror by skipping sequences.
_MAX_SKIP = 10_000


class Source:
    def __init__(self, target: Stream, cfg: StreamSource, mirror: bool) -> None:
        self.target = target
        self.cfg = cfg
        self.is_mirror = mirror
        self.origin_name: str = cfg.name
        self.next_seq = 0  # next origin sequence to copy; 0 = not positioned yet
        self.last_active = 0
        self._origin: Stream | None = None
        self._scheduled = False
        self._stopped = False
        self.transforms: list[SubjectTransform] = []
        filters: list[str] = []
        for tr in cfg.subject_transforms or []:
            src = tr.src or ">"
            filters.append(src)
            self.transforms.append(SubjectTransform(src, tr.dest or src))
        if not self.transforms and cfg.filter_subject:
            filters.append(cfg.filter_subject)
        self.filters = filters
        self.iname = self._compose_iname()

    def _compose_iname(self) -> str:
        """nats-server's composeIName: the origin (with a hash of an external API prefix),
        the filters and the destinations."""
        name = self.origin_name
        if self.cfg.external is not None:
            name += ":" + go_hash(self.cfg.external.api)
        if self.cfg.consumer is not None:
            name += ":C=" + go_hash(self.cfg.consumer.name)
        if self.transforms:
            src = "\f".join(t.src for t in self.transforms)
            dest = "\f".join(t.dest for t in self.transforms)
        else:
            src = self.cfg.filter_subject or ">"
            dest = ">"
        return f"{name} {src} {dest}"

    # -- lifecycle -------------------------------------------------------------------------------

    def start(self) -> None:
        if self._stopped or self._origin is not None:
            return
        ajs = self._origin_account()
        origin = ajs.streams.get(self.origin_name) if ajs is not None else None
        if origin is None or origin is self.target:
            return
        self._origin = origin
        origin.followers.add(self)
        if self.next_seq == 0:
            self.next_seq = self._starting_seq(origin)
        self.signal()

    @property
    def origin(self) -> Stream | None:
        return self._origin

    def _origin_account(self) -> AccountJetStream | None:
        """The JetStream account the origin lives in: the target's own, or the one an
        `external` API prefix leads to (None if it leads nowhere that can deliver here)."""
        ajs = self.target.ajs
        ext = self.cfg.external
        if ext is None:
            return ajs
        probe = f"{ext.api}.CONSUMER.CREATE.{self.origin_name}".replace("..", ".")
        server = ajs.server
        account, subject = service_import_target(server, ajs.account, probe)
        if account is ajs.account or not subject.startswith("$JS.API."):
            # nats-server 2.15 does not answer a stream's own requests on its domain's
            # prefix: such a source stays empty, as does one whose prefix leads nowhere.
            return None
        owner = ajs.js.accounts.get(account.name)
        if owner is None or not owner.enabled:
            return None
        # The consumer's deliveries are published in the origin's account.
        deliver = f"{ext.deliver}.S.x".replace("..", ".")
        if not ext.deliver or not stream_import_delivers(server, ajs.account, account, deliver):
            return None
        return owner

    def detach(self) -> None:
        if self._origin is not None:
            self._origin.followers.discard(self)
        self._origin = None

    def stop(self) -> None:
        self._stopped = True
        self.detach()

    def _starting_seq(self, origin: Stream) -> int:
        target_store = self.target.store
        if self.is_mirror:
            last = target_store.state().last_seq
            if last:
                return last + 1
            first = origin.store.state().first_seq
            start = self.cfg.opt_start_seq or first or 1
            if self.cfg.opt_start_time:
                start = origin.store.seq_for_time(parse_go_time(self.cfg.opt_start_time)[0])
            if start > 1 and target_store.state().last_seq == 0:
                target_store.purge(seq=start)
            return max(start, 1)
        resumed = self._resume_from_headers()
        if resumed:
            return resumed
        if self.cfg.opt_start_seq:
            return int(self.cfg.opt_start_seq)
        if self.cfg.opt_start_time:
            return origin.store.seq_for_time(parse_go_time(self.cfg.opt_start_time)[0])
        return max(origin.store.state().first_seq, 1)

    def _resume_from_headers(self) -> int:
        """The origin sequence after the last one this source copied (scanning the target's
        newest messages for our `Nats-Stream-Source` header), or 0."""
        store = self.target.store
        st = store.state()
        seq = st.last_seq
        floor = max(st.first_seq, seq - _RESUME_SCAN)
        while seq >= floor and seq > 0:
            msg = store.load_prev_msg("", seq)
            if msg is None:
                break
            seq = msg.seq - 1
            value = header_value(msg.header, "Nats-Stream-Source") if msg.header else None
            if not value:
                continue
            fields = value.split(" ")
            if len(fields) >= 4 and f"{fields[0]} {fields[2]} {fields[3]}" == self.iname:
                try:
                    return int(fields[1]) + 1
                except ValueError:
                    return 0
        return 0

    # -- copying ---------------------------------------------------------------------------------

    def signal(self) -> None:
        if not self._scheduled and not self._stopped:
            self._scheduled = True
            self.target.ajs.loop.call_soon(self._pump)

    def _pump(self) -> None:
        self._scheduled = False
        origin = self._origin
        if origin is None or self._stopped or self.target.closed or origin.closed:
            return
        budget = _BUDGET
        while budget > 0:
            msg = self._next(origin)
            if msg is None:
                return
            try:
                self._copy(msg)
            except Exception as e:  # a refused copy (limits) must not stop the others
                log.debug("JetStream %s: source %s: %s", self.target.name, self.iname, e)
            self.next_seq = msg.seq + 1
            self.last_active = now_ns()
            budget -= 1
        self.signal()

    def _next(self, origin: Stream) -> StoredMsg | None:
        store = origin.store
        if not self.filters:
            return store.load_next_msg("", self.next_seq)
        best: StoredMsg | None = None
        for f in self.filters:
            msg = store.load_next_msg(f, self.next_seq)
            if msg is not None and (best is None or msg.seq < best.seq):
                best = msg
        return best

    def _subject_for(self, subject: str) -> str:
        for tr in self.transforms:
            out = tr.apply(subject)
            if out is not None:
                return out
        return subject

    def _copy(self, msg: StoredMsg) -> None:
        target = self.target
        subject = self._subject_for(msg.subject)
        header = _strip_headers(msg.header)
        if self.is_mirror:
            self._skip_to(msg.seq)
            target.store_sourced(msg, subject, header)
            return
        parts = self.iname.split(" ")
        ident = self._origin_identity()
        value = f"{parts[0]} {msg.seq} {parts[1]} {parts[2]} {msg.subject} {ident}".rstrip()
        header = append_headers(header, [("Nats-Stream-Source", value)])
        target.store_sourced(msg, subject, header)

    def _origin_identity(self) -> str:
        return self._origin.identity() if self._origin is not None else ""

    def _skip_to(self, seq: int) -> None:
        """Keep a mirror's sequence numbers equal to the origin's across a small gap."""
        store = self.target.store
        st = store.state()
        if st.last_seq == 0 and seq > 1:
            store.purge(seq=seq)
            return
        gap = seq - st.last_seq - 1
        if 0 < gap <= _MAX_SKIP:
            for _ in range(gap):
                s, _ = store.store_msg("_skip_", b"", b"")
                store.remove_msg(s)

    # -- reporting -------------------------------------------------------------------------------

    def info(self) -> dict[str, Any]:
        """nats-server's StreamSourceInfo: lag counts what matches and is not copied yet (0
        before the first copy, as Go knows nothing then), `seq` the last origin sequence a
        source copied."""
        lag = 0
        if self._origin is not None and self.last_active:
            store = self._origin.store
            start = max(self.next_seq, 1)
            if not self.filters:
                lag = store.num_pending(start, "")
            else:
                subjects: set[str] = set()
                for f in self.filters:
                    subjects.update(store.subjects_state(f))
                lag = sum(store.num_pending(start, s) for s in subjects)
        out: dict[str, Any] = {"name": self.origin_name}
        if self.cfg.external is not None:
            out["external"] = encode(self.cfg.external)
        out["lag"] = lag
        if not self.is_mirror and self.next_seq > 1 and self.last_active:
            out["seq"] = self.next_seq - 1
        out["active"] = now_ns() - self.last_active if self.last_active else -1
        if self.cfg.filter_subject:
            out["filter_subject"] = self.cfg.filter_subject
        if self.cfg.subject_transforms:
            out["subject_transforms"] = [encode(t) for t in self.cfg.subject_transforms]
        return out


def _strip_headers(header: bytes) -> bytes:
    """Drop what must not travel with a copy (Go removes the source header, the publish
    expectations and batch headers)."""
    if not header:
        return b""
    lines = header.split(b"\r\n")
    kept = [
        ln
        for ln in lines[1:]
        if ln
        and not ln.startswith(b"Nats-Stream-Source:")
        and not ln.startswith(b"Nats-Expected-")
        and not ln.startswith(b"Nats-Batch-")
    ]
    if not kept:
        return b""
    return b"\r\n".join([lines[0], *kept, b"", b""])
