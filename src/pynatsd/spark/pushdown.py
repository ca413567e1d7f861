"""Filter pushdown: the filters of a batch read on `subject`, `seq` and `timestamp` become the
read's consumer configuration (filter subjects, the start sequence, the end of the range), so
the server sends only what they select.

No nats-server counterpart: this is Spark's `DataSourceReader.pushFilters` (PySpark 4.1+) mapped
onto a JetStream consumer. A filter is *pushed* (Spark drops it) only when the read then returns
exactly the rows it selects: equality and `IN` on literal subjects, `LIKE 'a.b.%'` (a prefix
ending in a dot, read as the filter `a.b.>`), and comparisons of `seq`. Comparisons of
`timestamp` narrow the range too, but Spark still applies them: message times are only as
monotonic as the server's clock."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from typing import Any

from pyspark.sql.datasource import (
    EqualTo,
    Filter,
    GreaterThan,
    GreaterThanOrEqual,
    In,
    LessThan,
    LessThanOrEqual,
    StringStartsWith,
)

from pynatsd.subjects import is_literal, is_subset_match, is_valid_subject

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_US = timedelta(microseconds=1)
_NO_END = 2**63


@dataclass(frozen=True)
class Pushed:
    """What the filters ask of the read: subjects (None: not narrowed), a sequence range
    [seq_start, seq_end) and a time range [time_start_ns, time_end_ns)."""

    subjects: tuple[str, ...] | None = None
    seq_start: int = 1
    seq_end: int = _NO_END
    time_start_ns: int = 0
    time_end_ns: int = _NO_END
    described: tuple[str, ...] = ()

    @property
    def empty(self) -> bool:
        """Nothing can match (`subject IN ()`, `seq > 5 AND seq < 3`, ...)."""
        return (
            self.subjects == ()
            or self.seq_end <= self.seq_start
            or self.time_end_ns <= self.time_start_ns
        )

    def describe(self) -> str:
        return ", ".join(self.described) if self.described else "nothing"


def _column(f: Filter) -> str:
    attribute: tuple[str, ...] = getattr(f, "attribute", ())
    return attribute[0] if len(attribute) == 1 else ""


def _subjects(f: Filter) -> tuple[str, ...] | None:
    """The NATS filter subjects selecting exactly the rows of `f`, None if there are none."""
    if isinstance(f, EqualTo | In):
        values = f.value if isinstance(f, In) else (f.value,)
        if not all(isinstance(v, str) and is_valid_subject(v) and is_literal(v) for v in values):
            return None
        return tuple(dict.fromkeys(values))  # distinct, in order: filter_subjects must not overlap
    if isinstance(f, StringStartsWith):
        prefix = f.value
        if prefix.endswith(".") and is_valid_subject(prefix + ">") and is_literal(prefix[:-1]):
            return (prefix + ">",)
    return None


def _within(subjects: tuple[str, ...], option: tuple[str, ...]) -> tuple[str, ...] | None:
    """Pushed subjects under the `subject` option: each must lie inside one of its filters
    (else the consumer could not express the intersection, and nothing is pushed)."""
    if not option:
        return subjects
    if all(any(is_subset_match(s, o) for o in option) for s in subjects):
        return subjects
    return None


def _micros(value: Any) -> int | None:
    if not isinstance(value, datetime):
        return None
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    return int((value - _EPOCH) // _US)


def push_filters(
    filters: Iterable[Filter], option_subjects: tuple[str, ...]
) -> tuple[Pushed, list[Filter]]:
    """The pushed read, and the filters Spark must still apply."""
    pushed = Pushed()
    remaining: list[Filter] = []
    for f in filters:
        column = _column(f)
        value = getattr(f, "value", None)
        if column == "subject" and pushed.subjects is None:
            subjects = _subjects(f)
            if subjects is not None:
                subjects = _within(subjects, option_subjects)
            if subjects is not None:
                pushed = replace(pushed, subjects=subjects, described=(*pushed.described, _text(f)))
                continue
        elif column == "seq" and isinstance(value, int) and not isinstance(value, bool):
            narrowed = _seq_range(pushed, f)
            if narrowed is not None:
                pushed = replace(narrowed, described=(*narrowed.described, _text(f)))
                continue
        elif column == "timestamp":
            narrowed = _time_range(pushed, f)
            if narrowed is not None:
                pushed = replace(narrowed, described=(*narrowed.described, _text(f)))
        remaining.append(f)
    return pushed, remaining


def _seq_range(p: Pushed, f: Filter) -> Pushed | None:
    v: int = f.value  # type: ignore[attr-defined]
    if isinstance(f, EqualTo):
        return replace(p, seq_start=max(p.seq_start, v), seq_end=min(p.seq_end, v + 1))
    if isinstance(f, GreaterThan):
        return replace(p, seq_start=max(p.seq_start, v + 1))
    if isinstance(f, GreaterThanOrEqual):
        return replace(p, seq_start=max(p.seq_start, v))
    if isinstance(f, LessThan):
        return replace(p, seq_end=min(p.seq_end, v))
    if isinstance(f, LessThanOrEqual):
        return replace(p, seq_end=min(p.seq_end, v + 1))
    return None


def _time_range(p: Pushed, f: Filter) -> Pushed | None:
    # The column holds the server's nanoseconds truncated to microseconds.
    us = _micros(getattr(f, "value", None))
    if us is None:
        return None
    if isinstance(f, GreaterThan):
        return replace(p, time_start_ns=max(p.time_start_ns, (us + 1) * 1000))
    if isinstance(f, GreaterThanOrEqual):
        return replace(p, time_start_ns=max(p.time_start_ns, us * 1000))
    if isinstance(f, LessThan):
        return replace(p, time_end_ns=min(p.time_end_ns, us * 1000))
    if isinstance(f, LessThanOrEqual):
        return replace(p, time_end_ns=min(p.time_end_ns, (us + 1) * 1000))
    return None


def _text(f: Filter) -> str:
    value = getattr(f, "value", None)
    if isinstance(value, datetime):
        value = value.astimezone(UTC).isoformat()
    return f"{type(f).__name__}({_column(f)}, {value!r})"
