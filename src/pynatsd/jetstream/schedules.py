"""Message schedules (ADR-51): a stream with `allow_msg_schedules` holds messages carrying a
`Nats-Schedule` and produces new messages from them on time, into the same stream.

Corresponds to nats-server's `server/scheduler.go` (`MsgScheduling`, `parseMsgSchedule`), the
schedule checks of `processJetStreamMsg` in `stream.go` and the stores' `runMsgScheduling`.

- `check_publish`: the checks a published message with `Nats-Schedule*` headers passes, in
  nats-server's order and with its errors; a schedule gets `Nats-Rollup: sub` (one schedule
  per subject: a new one replaces the old).
- `MsgScheduling`: per stream, the schedule of each subject (its sequence and next time), a
  heap of due times and one timer (at least 250 ms away, as nats-server keeps it, so that
  schedules do not slow ingest). Streams without `allow_msg_schedules` have none: nothing is
  added per message for them.
- Patterns: `@at <RFC 3339>` (once, then the schedule is purged: the produced message carries
  `Nats-Schedule-Next: purge`), `@every <Go duration>` (at least 1 s), six-field cron
  (`cron.py`) and `@yearly`/`@annually`/`@monthly`/`@weekly`/`@daily`/`@midnight`/`@hourly`;
  `Nats-Schedule-Time-Zone` for cron only.
- After a restart the schedules are read back from the stored messages (the store is the
  record; a produced message with `Nats-Schedule-Next` says where its schedule had got to), so
  a crash loses none and fires none twice.
"""

from __future__ import annotations

import contextlib
import heapq
import zoneinfo
from datetime import UTC, datetime, tzinfo
from typing import TYPE_CHECKING

from pynatsd.gofmt import format_go_time, parse_go_time
from pynatsd.jetstream.cron import CronError, next_cron
from pynatsd.jetstream.errors import ApiError, js_error
from pynatsd.jetstream.ttl import parse_message_ttl
from pynatsd.jetstream.util import now_ns, parse_go_duration
from pynatsd.logger import log
from pynatsd.protocol.headers import header_value
from pynatsd.subjects import is_valid_publish_subject, subjects_collide

if TYPE_CHECKING:
    import asyncio

    from pynatsd.jetstream.stream import Stream

__all__ = ["MsgScheduling", "check_publish", "parse_msg_schedule"]

NS = 1_000_000_000
_MIN_FIRE_IN = 250_000_000  # nats-server's floor between two runs of the scheduler
_EMPTY_HEADER_LEN = len(b"NATS/1.0\r\n\r\n")
_PREDEFINED = {
    "@yearly": "0 0 0 1 1 *",
    "@annually": "0 0 0 1 1 *",
    "@monthly": "0 0 0 1 * *",
    "@weekly": "0 0 0 * * 0",
    "@daily": "0 0 0 * * *",
    "@midnight": "0 0 0 * * *",
    "@hourly": "0 0 * * * *",
}
_PURGE = "purge"


class _Invalid(Exception):
    pass


def _location(header: bytes) -> tzinfo | None:
    """Go's time.LoadLocation of `Nats-Schedule-Time-Zone`; None when the header is absent."""
    name = header_value(header, "Nats-Schedule-Time-Zone")
    if name is None:
        return None
    if not name:
        raise js_error("MessageSchedulesTimeZoneInvalid")
    if name == "UTC":
        return UTC
    if name == "Local":
        return datetime.now().astimezone().tzinfo
    try:
        return zoneinfo.ZoneInfo(name)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError):
        raise js_error("MessageSchedulesTimeZoneInvalid") from None


def _round_second(ns: int) -> int:
    return (ns + NS // 2) // NS * NS  # Go's Round(time.Second): halves away from zero


def parse_msg_schedule(pattern: str, loc: tzinfo | None, ts: int) -> tuple[int, int, bool]:
    """(next time in ns, its UTC offset in seconds, repeats); 0 for an empty pattern. Raises
    _Invalid for a pattern nats-server refuses."""
    if not pattern:
        return 0, 0, False
    now = now_ns()
    if pattern.startswith("@at "):
        if loc is not None:
            raise _Invalid
        try:
            at, offset = parse_go_time(pattern[4:])
        except ValueError:
            raise _Invalid from None
        return at, offset, False
    if pattern.startswith("@every "):
        if loc is not None:
            raise _Invalid
        every = parse_go_duration(pattern[7:])
        if every is None or every < NS:
            raise _Invalid
        # After a pause (a restart) it fires once, not once per missed interval.
        nxt = _round_second(ts) + every
        if nxt < now:
            nxt = _round_second(now) + every
        return nxt, 0, True
    cron = _PREDEFINED.get(pattern, pattern)
    zone = loc or UTC
    try:
        nxt = next_cron(cron, ts, zone)
        if nxt < now:
            nxt = next_cron(cron, _round_second(now), zone)
    except CronError:
        raise _Invalid from None
    delta = zone.utcoffset(datetime.fromtimestamp(nxt // NS, zone))
    return nxt, int(delta.total_seconds()) if delta is not None else 0, True


def next_schedule(header: bytes, ts: int) -> tuple[int, int, bool]:
    """nats-server's nextMessageSchedule: (next, offset, repeats) of the header's schedule;
    ApiError for an invalid time zone or pattern."""
    loc = _location(header)
    try:
        return parse_msg_schedule(header_value(header, "Nats-Schedule") or "", loc, ts)
    except _Invalid:
        raise js_error("MessageSchedulesPatternInvalid") from None


def _ttl_ok(text: str) -> bool:
    try:
        parse_message_ttl(text)
    except ApiError:
        return False
    return True


def check_publish(stream: Stream, subject: str, header: bytes) -> bytes:
    """A client's message whose header has `Nats-Schedule*` keys, checked as nats-server does
    (processJetStreamMsg); returns the header to store (a schedule gets `Nats-Rollup: sub`)."""
    cfg = stream.config
    allowed = cfg.allow_msg_schedules
    try:
        when, _, _ = next_schedule(header, now_ns())
    except ApiError:
        if not allowed:
            raise js_error("MessageSchedulesDisabled") from None
        raise
    if when:
        if not allowed:
            raise js_error("MessageSchedulesDisabled")
        ttl = header_value(header, "Nats-Schedule-TTL") or ""
        if ttl and not _ttl_ok(ttl):
            raise js_error("MessageSchedulesTTLInvalid")
        rollup = header_value(header, "Nats-Schedule-Rollup") or ""
        if rollup and rollup != "sub":
            raise js_error("MessageSchedulesRollupInvalid")
        if ttl and not cfg.allow_msg_ttl:
            raise js_error("MessageTTLDisabled")
        target = header_value(header, "Nats-Schedule-Target") or ""
        if not target or not is_valid_publish_subject(target) or target == subject:
            raise js_error("MessageSchedulesTargetInvalid")
        source = header_value(header, "Nats-Schedule-Source") or ""
        if source and (source in (target, subject) or not is_valid_publish_subject(source)):
            raise js_error("MessageSchedulesSourceInvalid")
        if not any(subjects_collide(s, target) for s in cfg.subjects):
            raise js_error("MessageSchedulesTargetInvalid")
        if source and not any(subjects_collide(s, source) for s in cfg.subjects):
            raise js_error("MessageSchedulesSourceInvalid")
        own_rollup = header_value(header, "Nats-Rollup") or ""
        if not own_rollup:
            header = _gen_header(header, "Nats-Rollup", "sub")
        elif own_rollup != "sub":
            raise js_error("MessageSchedulesRollupInvalid")
    schedule_next = header_value(header, "Nats-Schedule-Next") or ""
    scheduler = header_value(header, "Nats-Scheduler") or ""
    if schedule_next:
        # A client may only stop a schedule: `Nats-Schedule-Next: purge` with the schedule's
        # subject in `Nats-Scheduler`, published on another subject.
        if schedule_next != _PURGE:
            raise js_error("MessageSchedulesSchedulerInvalid")
        if not scheduler or scheduler == subject or not is_valid_publish_subject(scheduler):
            raise js_error("MessageSchedulesSchedulerInvalid")
        if not allowed:
            raise js_error("MessageSchedulesDisabled")
        last = stream.store.load_last_msg(scheduler)
        if last is not None and not header_value(last.header, "Nats-Schedule"):
            raise js_error("MessageSchedulesSchedulerInvalid")
    elif scheduler:
        raise js_error("MessageSchedulesSchedulerInvalid")
    return header


# -- header editing as nats-server's client.go helpers do it ---------------------------------------


def _gen_header(header: bytes, key: str, value: str) -> bytes:
    """genHeader: one more line before the final blank line."""
    base = header[:-2] if len(header) > 2 else b"NATS/1.0\r\n"
    return base + f"{key}: {value}\r\n\r\n".encode()


def _remove(header: bytes, key: bytes, prefix: bool) -> bytes:
    """removeHeaderIfPresent (`prefix` False: the exact key) and removeHeaderIfPrefixPresent."""
    lines = header.split(b"\r\n")
    kept = [lines[0]]
    for line in lines[1:]:
        if line.startswith(key) and (prefix or line[len(key) : len(key) + 1] == b":"):
            continue
        kept.append(line)
    out = b"\r\n".join(kept)
    return b"" if len(out) <= _EMPTY_HEADER_LEN else out


def _produced_header(header: bytes) -> bytes:
    """The source header less what would stop the produced message from being stored."""
    if not header:
        return b""
    header = _remove(header, b"Nats-Schedule", True)  # and Nats-Schedule-*, Nats-Scheduler
    if header:
        header = _remove(header, b"Nats-Expected-", True)
    for key in (b"Nats-Msg-Id", b"Nats-TTL", b"Nats-Rollup"):
        if header:
            header = _remove(header, key, False)
    return header


# -- the schedules of one stream -------------------------------------------------------------------


class MsgScheduling:
    """The schedules of one stream (nats-server's MsgScheduling over its timed hash wheel)."""

    def __init__(self, stream: Stream) -> None:
        self.stream = stream
        # subject -> (seq of the schedule message, next time in ns)
        self.schedules: dict[str, tuple[int, int]] = {}
        self._seq_subject: dict[int, str] = {}
        self._due: list[tuple[int, int]] = []  # (time, seq); stale entries skipped
        self._timer: asyncio.TimerHandle | None = None
        self._deadline = 0
        self._running = False
        self.closed = False

    # -- bookkeeping --

    def _add(self, seq: int, subject: str, when: int) -> None:
        old = self.schedules.get(subject)
        if old is not None:
            self._seq_subject.pop(old[0], None)
        self.schedules[subject] = (seq, when)
        self._seq_subject[seq] = subject
        self._push(when, seq)

    def _push(self, when: int, seq: int) -> None:
        """Heap (when, seq), already recorded in `schedules`."""
        due = self._due
        if len(due) > 2 * len(self.schedules) + 64:
            # Replaced schedules leave their entries behind until due: drop them now and then,
            # so that a schedule rewritten often does not grow the heap without end.
            due[:] = [(w, q) for q, w in self.schedules.values()]
            heapq.heapify(due)
            return
        heapq.heappush(due, (when, seq))

    def _remove_subject(self, subject: str) -> None:
        old = self.schedules.pop(subject, None)
        if old is not None:
            self._seq_subject.pop(old[0], None)

    def _update(self, subject: str, when: int) -> None:
        old = self.schedules.get(subject)
        if old is not None:
            self.schedules[subject] = (old[0], when)
            self._push(when, old[0])

    def stored(self, seq: int, subject: str, header: bytes, ts: int) -> None:
        """A message was stored (the store's part of nats-server's storeRawMsg, and the purge
        of processJetStreamMsgWithRollup)."""
        if header and b"\r\nNats-Schedule" in header:
            self._note(seq, subject, header, ts)
            self._reset_timer()
            if header_value(header, "Nats-Schedule-Next") == _PURGE:
                scheduler = header_value(header, "Nats-Scheduler")
                cfg = self.stream.config
                if scheduler and cfg.allow_rollup_hdrs and not cfg.deny_purge:
                    self.stream.purge(subject=scheduler)
        elif subject in self.schedules:
            self._remove_subject(subject)  # a plain message replaces the schedule

    def _note(self, seq: int, subject: str, header: bytes, ts: int) -> None:
        try:
            when = next_schedule(header, ts)[0]
        except ApiError:
            when = 0
        scheduler = header_value(header, "Nats-Scheduler") or ""
        if when:
            self._add(seq, subject, when)
        elif not scheduler:
            self._remove_subject(subject)
        following = header_value(header, "Nats-Schedule-Next") or ""
        if following and following != _PURGE and scheduler:
            with contextlib.suppress(ValueError):
                self._update(scheduler, parse_go_time(following)[0])
        elif following == _PURGE and scheduler:
            # Where the purge of the schedule did not make it to disk before a crash, the
            # produced message still says it is done.
            old = self.schedules.get(scheduler)
            if old is not None and old[0] < seq:
                self._remove_subject(scheduler)

    def rebuild(self) -> None:
        """After a restart (or when schedules are switched on): read the schedules back from
        the stored messages, in order, as they were noted when stored."""
        store = self.stream.store
        seq = max(store.state().first_seq, 1)
        while True:
            msg = store.load_next_msg("", seq)
            if msg is None:
                break
            seq = msg.seq + 1
            if msg.header and b"\r\nNats-Schedule" in msg.header:
                self._note(msg.seq, msg.subject, msg.header, msg.ts)
            elif msg.subject in self.schedules:
                self._remove_subject(msg.subject)
        self._reset_timer()

    # -- the timer --

    def _reset_timer(self) -> None:
        if self._running or self.closed:
            return
        due = self._due
        while due:
            when, seq = due[0]
            subject = self._seq_subject.get(seq)
            if subject is not None and self.schedules.get(subject) == (seq, when):
                break
            heapq.heappop(due)  # replaced, updated or removed since
        if not due:
            if self._timer is not None:
                self._timer.cancel()
                self._timer = None
            self._deadline = 0
            return
        now = now_ns()
        fire_in = max(due[0][0] - now, _MIN_FIRE_IN)
        deadline = now + fire_in
        # A later deadline does not move the timer, or a busy stream could postpone it forever.
        if self._timer is not None and self._deadline and deadline > self._deadline:
            return
        if self._timer is not None:
            self._timer.cancel()
        self._deadline = deadline
        self._timer = self.stream.ajs.loop.call_later(fire_in / NS, self._run)

    def _run(self) -> None:
        self._timer = None
        self._deadline = 0
        if self.closed or self.stream.closed:
            return
        self._running = True
        try:
            self._fire_due()
        finally:
            self._running = False
        self._reset_timer()

    def _fire_due(self) -> None:
        now = now_ns()
        found: dict[int, tuple[int, int, str]] = {}
        while self._due and self._due[0][0] <= now:
            when, seq = heapq.heappop(self._due)
            subject = self._seq_subject.get(seq)
            if subject is not None and self.schedules.get(subject) == (seq, when):
                found[seq] = (seq, when, subject)
        due = sorted(found.values())  # by sequence, as nats-server sorts what its wheel gives
        store = self.stream.store
        for seq, when, subject in due:
            msg = store.load_msg(seq)
            if msg is None or msg.subject != subject:
                self._remove_subject(subject)
                continue
            header = msg.header
            target = header_value(header, "Nats-Schedule-Target") or ""
            ttl = header_value(header, "Nats-Schedule-TTL") or ""
            try:
                nxt, offset, repeat = next_schedule(header, when)
                if not nxt or not target or (ttl and not _ttl_ok(ttl)):
                    raise _Invalid
            except (ApiError, _Invalid):
                self._remove_subject(subject)
                continue
            rollup = header_value(header, "Nats-Schedule-Rollup") or ""
            source = header_value(header, "Nats-Schedule-Source") or ""
            body_from = msg
            if source:
                # No message on the source subject: the schedule's own body and headers.
                body_from = store.load_last_msg(source) or msg
            out = _produced_header(body_from.header)
            out = _gen_header(out, "Nats-Scheduler", subject)
            out = _gen_header(
                out, "Nats-Schedule-Next", format_go_time(nxt, offset) if repeat else _PURGE
            )
            if ttl:
                out = _gen_header(out, "Nats-TTL", ttl)
            if rollup:
                out = _gen_header(out, "Nats-Rollup", rollup)
            try:
                self.stream.process_message(target, out, body_from.data, sourced=True)
            except ApiError as e:
                # nats-server leaves such a schedule in flight, never to fire again until a new
                # schedule replaces it.
                log.warning(
                    "JetStream %s: scheduled message from %s: %s",
                    self.stream.name,
                    subject,
                    e.description,
                )
                self._remove_subject(subject)
                continue
            if not repeat:
                self._remove_subject(subject)
            elif self.schedules.get(subject) == (seq, when):
                # The produced message was not kept (interest retention without interest):
                # the schedule goes on all the same.
                self._update(subject, nxt)

    def stop(self) -> None:
        self.closed = True
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
