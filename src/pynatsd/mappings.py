"""Account subject mappings: nats-server's `AddWeightedMappings` and `selectMappedSubject`
(server/accounts.go).

An account's mappings rewrite the subject of every message a client publishes in it, before
permissions are checked and subscribers matched. A mapping has a source subject (wildcards
allowed) and one or more destinations (`pynatsd.transform` transforms), each with a weight in
percent; weights below 100 in total are topped up with the source itself (the message keeps its
subject that often), unless the source is listed among the destinations (then the rest of the
time the message is dropped). A destination scoped to a cluster is used only by servers of that
cluster: pynatsd runs outside any cluster, so it uses the unscoped destinations, as nats-server
does then.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pynatsd.options import MapDest, SubjectMapping
from pynatsd.subjects import is_subset_match_tokens, is_valid_subject
from pynatsd.transform import (
    ERR_BAD_SUBJECT,
    SubjectTransform,
    TransformError,
    transform_tokenize,
    validate_mapping,
)

__all__ = ["Mapping", "MappingError", "SubjectMappings", "build_mapping"]


class MappingError(ValueError):
    """A mapping nats-server's AddWeightedMappings refuses; `str()` is its text."""


@dataclass(frozen=True, slots=True)
class Destination:
    transform: SubjectTransform
    weight: int  # cumulative: this destination is chosen for a draw in [previous, weight)


@dataclass(frozen=True, slots=True)
class Mapping:
    source: str
    wildcard: bool
    destinations: tuple[Destination, ...]
    # Cluster name -> its own destinations (kept for /accountz; unused outside a cluster).
    cluster_destinations: dict[str, tuple[Destination, ...]]

    @property
    def source_tokens(self) -> list[str]:
        return self.source.split(".")


def build_mapping(source: str, dests: Sequence[MapDest]) -> Mapping:
    """AddWeightedMappings: check the destinations and settle their weights; raise
    MappingError with nats-server's text."""
    if not is_valid_subject(source):
        raise MappingError(ERR_BAD_SUBJECT)
    wildcard = any(t in ("*", ">") for t in source.split("."))
    seen: set[str] = set()
    totals: dict[str, int] = {}
    plain: list[tuple[SubjectTransform, int]] = []
    scoped: dict[str, list[tuple[SubjectTransform, int]]] = {}
    for d in dests:
        if d.subject in seen:
            raise MappingError(f'duplicate entry for "{d.subject}"')
        seen.add(d.subject)
        if d.weight > 100:
            raise MappingError("individual weights need to be <= 100")
        totals[d.cluster] = totals.get(d.cluster, 0) + d.weight
        if totals[d.cluster] > 100:
            raise MappingError("total weight needs to be <= 100")
        try:
            validate_mapping(source, d.subject)
            transform = SubjectTransform(source, d.subject)
        except TransformError as e:
            raise MappingError(str(e)) from None
        if d.cluster:
            scoped.setdefault(d.cluster, []).append((transform, d.weight))
        else:
            plain.append((transform, d.weight))
    return Mapping(
        source,
        wildcard,
        _settle(source, wildcard, plain, source in seen),
        {c: _settle(source, wildcard, ds, source in seen) for c, ds in scoped.items()},
    )


def _settle(
    source: str, wildcard: bool, dests: list[tuple[SubjectTransform, int]], listed: bool
) -> tuple[Destination, ...]:
    """processDestinations: top up with the source, sort by weight, make weights cumulative."""
    total = sum(w for _, w in dests)
    if total != 100 and not listed:
        identity = transform_tokenize(source) if wildcard else source
        dests = [*dests, (SubjectTransform(source, identity), 100 - total if dests else 100)]
    dests = sorted(dests, key=lambda d: d[1])
    out = []
    cumulative = 0
    for transform, weight in dests:
        cumulative += weight
        out.append(Destination(transform, cumulative))
    return tuple(out)


class SubjectMappings:
    """One account's mappings, in the order they were added (the first that matches a subject
    is used)."""

    __slots__ = ("config", "mappings")

    def __init__(self, config: Sequence[SubjectMapping]) -> None:
        # What they were built from, to tell whether a reload changed them.
        self.config = tuple(config)
        by_source: dict[str, Mapping] = {}
        for entry in config:
            # A later entry for the same source replaces the earlier one in its place.
            by_source[entry.source] = build_mapping(entry.source, entry.destinations)
        self.mappings = tuple(by_source.values())

    def select(self, subject: str) -> tuple[str, bool] | None:
        """selectMappedSubject: (the new subject, True when the same subject always maps the
        same way), or None when no mapping applies. The new subject is empty when a weighted
        mapping that lists its source drops the message."""
        tokens: list[str] | None = None
        found: Mapping | None = None
        for m in self.mappings:
            if not m.wildcard and m.source == subject:
                found = m
                break
            if tokens is None:
                tokens = subject.split(".")
            if is_subset_match_tokens(tokens, m.source_tokens):
                found = m
                break
        if found is None:
            return None
        dests = found.destinations
        if len(dests) == 1 and dests[0].weight == 100:
            transform = dests[0].transform
            # nats-server hands the transform the tokens split so far: none when the first
            # mapping tried matched the subject literally (a partition of the whole subject
            # then hashes an empty key).
            return transform.transform_tokens(tokens or []), transform.fixed
        draw = random.randrange(100)
        for d in dests:
            if draw < d.weight:
                return d.transform.transform_tokens(tokens or []), False
        return "", False

    def map_subject(self, subject: str) -> str:
        """The subject a message published on `subject` goes to."""
        selected = self.select(subject)
        return subject if selected is None else selected[0]

    def describe(self) -> dict[str, list[dict[str, Any]]]:
        """The `mappings` of /accountz?acc=X: each source's destinations with their
        cumulative weights, as nats-server shows them."""
        out: dict[str, list[dict[str, Any]]] = {}
        for m in self.mappings:
            items: list[dict[str, Any]] = [
                {"subject": d.transform.dest, "weight": d.weight} for d in m.destinations
            ]
            for cluster, dests in m.cluster_destinations.items():
                items.extend(
                    {"subject": d.transform.dest, "weight": d.weight, "cluster": cluster}
                    for d in dests
                )
            out[m.source] = items
        return dict(sorted(out.items()))
