"""Account subject mappings (pynatsd.mappings): nats-server's AddWeightedMappings checks and
weights, and selectMappedSubject's choice."""

from __future__ import annotations

from collections import Counter

import pytest

from pynatsd.mappings import MappingError, SubjectMappings, build_mapping
from pynatsd.options import MapDest, SubjectMapping


def _m(source: str, *dests: tuple[str, int] | tuple[str, int, str]) -> SubjectMapping:
    return SubjectMapping(source, tuple(MapDest(*d) for d in dests))


@pytest.mark.parametrize(
    ("source", "dests", "text"),
    [
        ("a b", [("x", 100)], "invalid subject"),
        ("foo", [("x", 50), ("x", 50)], 'duplicate entry for "x"'),
        ("foo", [("x", 101)], "individual weights need to be <= 100"),
        ("foo", [("x", 60), ("y", 50)], "total weight needs to be <= 100"),
        (
            "foo.*",
            [("bar.$2", 100)],
            "invalid mapping destination: wildcard index out of range in $2: [2]",
        ),
    ],
)
def test_refused(source: str, dests: list[tuple[str, int]], text: str) -> None:
    with pytest.raises(MappingError) as info:
        build_mapping(source, [MapDest(*d) for d in dests])
    assert str(info.value) == text


def test_weights_topped_up_with_the_source_and_made_cumulative() -> None:
    m = build_mapping("foo.*", [MapDest("a.$1", 60), MapDest("b.$1", 30)])
    assert [(d.transform.dest, d.weight) for d in m.destinations] == [
        ("foo.$1", 10),
        ("b.$1", 40),
        ("a.$1", 100),
    ]
    # A cluster's destinations are settled apart (and unused outside a cluster).
    m = build_mapping("c", [MapDest("c.east", 100, "east")])
    assert [(d.transform.dest, d.weight) for d in m.destinations] == [("c", 100)]
    assert [(d.transform.dest, d.weight) for d in m.cluster_destinations["east"]] == [
        ("c.east", 100)
    ]


def test_first_matching_mapping_wins_and_fixed_choices_are_marked() -> None:
    maps = SubjectMappings([_m("foo.*", ("wild.$1", 100)), _m("foo.bar", ("lit", 100))])
    assert maps.select("foo.bar") == ("wild.bar", True)
    assert maps.select("other") is None
    assert maps.map_subject("other") == "other"
    random_dest = SubjectMappings([_m("r", ("r.{{random(3)}}", 100))])
    subject, fixed = random_dest.select("r") or ("", True)
    assert subject.startswith("r.") and not fixed


def test_literal_partition_hashes_an_empty_key_when_matched_first() -> None:
    # nats-server tokenizes the subject only once a mapping needs it: a literal mapping matched
    # first partitions the empty key (fnv32a("") % 5 == 1), a later one the subject.
    first = SubjectMappings([_m("lpart", ("lpart.{{partition(5)}}", 100))])
    assert first.map_subject("lpart") == "lpart.1"
    later = SubjectMappings([_m("x.*", ("y", 100)), _m("lpart", ("lpart.{{partition(5)}}", 100))])
    assert later.map_subject("lpart") != "" and later.select("lpart") is not None


def test_a_listed_source_drops_the_rest() -> None:
    maps = SubjectMappings([_m("d", ("d.kept", 30), ("d", 0))])
    seen = Counter(maps.map_subject("d") for _ in range(2000))
    assert set(seen) == {"d.kept", ""}
    assert 0.25 < seen["d.kept"] / 2000 < 0.35


def test_a_later_entry_replaces_one_with_the_same_source() -> None:
    maps = SubjectMappings([_m("a", ("b", 100)), _m("c", ("d", 100)), _m("a", ("e", 100))])
    assert [m.source for m in maps.mappings] == ["a", "c"]
    assert maps.map_subject("a") == "e"


def test_describe_as_accountz() -> None:
    maps = SubjectMappings([_m("w", ("w.a", 60), ("w.b", 30)), _m("c", ("c.e", 100, "east"))])
    assert maps.describe() == {
        "c": [
            {"subject": "c", "weight": 100},
            {"subject": "c.e", "weight": 100, "cluster": "east"},
        ],
        "w": [
            {"subject": "w", "weight": 10},
            {"subject": "w.b", "weight": 40},
            {"subject": "w.a", "weight": 100},
        ],
    }
