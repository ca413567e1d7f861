"""Subject transforms (pynatsd.transform), with the rows of nats-server's
server/subject_transform_test.go, and a property test that a valid transform never raises."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pynatsd.subjects import is_subset_match
from pynatsd.transform import (
    SubjectTransform,
    TransformError,
    transform_tokenize,
    validate_mapping,
)

INT32_MAX = 2**31 - 1

# (src, dest, strict): NewSubjectTransformWithStrict refuses these.
SHOULD_ERR = [
    ("foo..", "bar", False),
    ("foo.*", "bar.*", False),
    ("foo.*", "bar.$2", False),
    ("foo.*", "bar.$1.>", False),
    ("foo.>", "bar.baz", False),
    ("foo.*.*", "bar.$2", True),
    ("foo.*", "foo.$foo", True),
    ("foo.*", "bar.{{Partition(2,1)}}", True),
    ("foo.*", "foo.{{wildcard(2)}}", False),
    ("foo.*", "foo.{{unimplemented(1)}}", False),
    ("foo.*", "foo.{{partition()}}", False),
    ("foo.*", "foo.{{random()}}", False),
    ("foo.*", "foo.{{wildcard(foo)}}", False),
    ("foo.*", "foo.{{wildcard()}}", False),
    ("foo.*", "foo.{{wildcard(1,2)}}", False),
    ("foo.*", "foo.{{ wildcard5) }}", False),
    ("foo.*", "foo.{{splitLeft(2,2}}", False),
    ("foo", "bla.{{wildcard(1)}}", False),
    ("foo.*", f"foo.{{{{partition({INT32_MAX + 1})}}}}", False),
    ("foo.*", f"foo.{{{{random({INT32_MAX + 1})}}}}", False),
]

SHOULD_BE_OK = [
    ("foo.*", "bar.{{Wildcard(1)}}", True),
    ("foo.*.*", "bar.$2", False),
    ("foo.*.*", "bar.{{wildcard(1)}}", False),
    ("foo.*.*", "bar.{{partition(1)}}", False),
    ("foo.*.*", "bar.{{random(5)}}", False),
    ("foo", "bar", False),
    ("foo.*.bar.*.baz", "req.$2.$1", False),
    ("baz.>", "mybaz.>", False),
    ("*", "{{splitfromleft(1,1)}}", False),
    ("", "prefix.>", False),
    ("*.*", "{{partition(10,1,2)}}", False),
    ("foo.*.*", "foo.{{wildcard(1)}}.{{wildcard(2)}}.{{partition(5,1,2)}}", False),
    ("foo.*", f"foo.{{{{partition({INT32_MAX})}}}}", False),
    ("foo.*", f"foo.{{{{random({INT32_MAX})}}}}", False),
    ("foo.bar", f"foo.{{{{random({INT32_MAX})}}}}", False),
    ("foo.bar", "baz.{{partition(10)}}", False),
]

# (src, dest, sample, expected)
SHOULD_MATCH = [
    ("", "prefix.>", "foo", "prefix.foo"),
    ("foo", "bar", "foo", "bar"),
    ("foo.*.bar.*.baz", "req.$2.$1", "foo.A.bar.B.baz", "req.B.A"),
    ("foo.*.bar.*.baz", "req.{{wildcard(2)}}.{{wildcard(1)}}", "foo.A.bar.B.baz", "req.B.A"),
    ("baz.>", "my.pre.>", "baz.1.2.3", "my.pre.1.2.3"),
    ("baz.>", "foo.bar.>", "baz.1.2.3", "foo.bar.1.2.3"),
    ("*", "foo.bar.$1", "foo", "foo.bar.foo"),
    ("*", "{{splitfromleft(1,3)}}", "12345", "123.45"),
    ("*", "{{SplitFromRight(1,3)}}", "12345", "12.345"),
    ("*", "{{SliceFromLeft(1,3)}}", "1234567890", "123.456.789.0"),
    ("*", "{{SliceFromRight(1,3)}}", "1234567890", "1.234.567.890"),
    ("*", "{{split(1,-)}}", "-abc-def--ghi-", "abc.def.ghi"),
    ("*", "{{split(1,-)}}", "abc-def--ghi-", "abc.def.ghi"),
    ("*.*", "{{split(2,-)}}.{{splitfromleft(1,2)}}", "foo.-abc-def--ghij-", "abc.def.ghij.fo.o"),
    ("*", "{{right(1,1)}}", "1234", "4"),
    ("*", "{{right(1,3)}}", "1234", "234"),
    ("*", "{{right(1,6)}}", "1234", "1234"),
    ("*", "{{left(1,1)}}", "1234", "1"),
    ("*", "{{left(1,3)}}", "1234", "123"),
    ("*", "{{left(1,6)}}", "1234", "1234"),
    ("*", "bar.{{partition(0)}}", "baz", "bar.0"),
    ("*", "bar.{{partition(10, 0)}}", "foo", "bar.3"),
    ("*.*", "bar.{{partition(10)}}", "foo.bar", "bar.6"),
    ("*", "bar.{{partition(10)}}", "foo", "bar.3"),
    ("*", "bar.{{partition(10)}}", "baz", "bar.0"),
    ("*", "bar.{{partition(10)}}", "qux", "bar.9"),
    ("*", "bar.{{random(0)}}", "qux", "bar.0"),
    ("foo.bar", "baz.{{partition(10)}}", "foo.bar", "baz.6"),
    ("foo.baz", "qux.{{partition(10)}}", "foo.baz", "qux.4"),
    ("test.subject", "result.{{partition(5)}}", "test.subject", "result.0"),
    # Beyond nats-server's table: the functions cut bytes, as Go does.
    ("*", "{{splitfromleft(1,1)}}", "ab", "a.b"),
    ("*", "{{ Partition ( 10 , 1 ) }}", "foo", "3"),
]

# (src, dest, Go's error text) for the texts clients and `nats-server -t` show.
ERROR_TEXTS = [
    ("foo.*", "bar.*", "invalid subject"),
    (
        "foo.*",
        "foo.{{wildcard(2)}}",
        "invalid mapping destination: wildcard index out of range in {{wildcard(2)}}: [2]",
    ),
    (
        "foo.*",
        "foo.{{unimplemented(1)}}",
        "invalid mapping destination: unknown function in {{unimplemented(1)}}",
    ),
    (
        "foo.*",
        "foo.{{partition()}}",
        "invalid mapping destination: function argument is invalid "
        "or in the wrong format in {{partition()}}",
    ),
    (
        "foo.*",
        "foo.{{wildcard()}}",
        "invalid mapping destination: not enough arguments passed to "
        "the function in {{wildcard()}}",
    ),
    (
        "foo.*",
        "foo.{{wildcard(1,2)}}",
        "invalid mapping destination: too many arguments passed "
        "to the function in {{wildcard(1,2)}}",
    ),
    (
        "foo",
        "bla.{{wildcard(1)}}",
        "invalid mapping destination: wildcard index out of range in {{wildcard(1)}}",
    ),
    ("foo.*", "foo..bar", "invalid mapping destination: invalid transform"),
    ("foo.*", "foo.>.bar", "invalid mapping destination: invalid transform in bar"),
    ("foo.*", "foo.b ar", "invalid mapping destination: invalid transform"),
    (
        "foo",
        "foo.{{left(1,1)}}",
        "invalid mapping destination: wildcard index out of range in {{left(1,1)}}",
    ),
]


@pytest.mark.parametrize(("src", "dest", "strict"), SHOULD_ERR)
def test_should_err(src: str, dest: str, strict: bool) -> None:
    with pytest.raises(TransformError):
        SubjectTransform(src, dest, strict)


@pytest.mark.parametrize(("src", "dest", "strict"), SHOULD_BE_OK)
def test_should_be_ok(src: str, dest: str, strict: bool) -> None:
    SubjectTransform(src, dest, strict)


@pytest.mark.parametrize(("src", "dest", "sample", "expected"), SHOULD_MATCH)
def test_should_match(src: str, dest: str, sample: str, expected: str) -> None:
    assert SubjectTransform(src, dest).apply(sample) == expected


def test_random_stays_in_range() -> None:
    tr = SubjectTransform("*", "bar.{{random(6)}}")
    assert not tr.fixed
    seen = {tr.apply("qux") for _ in range(200)}
    assert seen <= {f"bar.{i}" for i in range(6)}
    assert len(seen) > 1


def test_missing_token_does_not_raise() -> None:
    tr = SubjectTransform("foo.*", "one.two.{{wildcard(1)}}")
    assert tr.transform_tokens(["foo"]) == "one.two."


@pytest.mark.parametrize(("src", "dest", "text"), ERROR_TEXTS)
def test_validate_mapping_error_texts(src: str, dest: str, text: str) -> None:
    with pytest.raises(TransformError) as info:
        validate_mapping(src, dest)
    assert str(info.value) == text


def test_no_match() -> None:
    tr = SubjectTransform("foo.*", "bar.$1")
    assert tr.apply("baz.x") is None
    assert tr.apply("foo.*") is None  # not a literal subject
    assert tr.apply("foo.x") == "bar.x"
    assert SubjectTransform(">", ">").apply("a.b") == "a.b"


@pytest.mark.parametrize(
    ("subject", "expected"),
    [("foo", "foo"), ("foo.*.*", "foo.$1.$2"), ("*.>", "$1.>")],
)
def test_transform_tokenize(subject: str, expected: str) -> None:
    assert transform_tokenize(subject) == expected


@pytest.mark.parametrize(
    ("subject", "test", "expected"),
    [
        ("foo.*", ">", True),
        ("foo.*", "*.*", True),
        ("foo.*", "foo.*", True),
        ("foo.*", "foo.bar", False),
        ("foo.bar", "foo.*", True),
        ("foo.>", "foo.*", False),
        ("foo", "foo.>", False),
        ("foo.bar.baz", "foo.>", True),
    ],
)
def test_is_subset_match(subject: str, test: str, expected: bool) -> None:
    assert is_subset_match(subject, test) is expected


_token = st.text(
    alphabet=st.characters(blacklist_characters=". \t\r\n*>", blacklist_categories=("Cs",)),
    min_size=1,
    max_size=8,
)
_DESTS = [
    ("*.*", "x.$2.$1"),
    ("*.*", "{{partition(7,1,2)}}.{{wildcard(1)}}"),
    ("*.*", "{{splitFromLeft(1,2)}}.{{splitFromRight(2,3)}}"),
    ("*.*", "{{sliceFromLeft(1,2)}}.{{sliceFromRight(2,3)}}"),
    ("*.*", "{{split(1,a)}}.{{split(2,é)}}"),
    ("*.*", "{{left(1,2)}}.{{right(2,2)}}.{{random(3)}}"),
    ("*.>", "p.$1.>"),
    (">", "q.{{partition(4)}}.>"),
]


@settings(max_examples=200, deadline=None)
@given(tokens=st.lists(_token, min_size=2, max_size=5), which=st.integers(0, len(_DESTS) - 1))
def test_transform_never_raises(tokens: list[str], which: int) -> None:
    src, dest = _DESTS[which]
    tr = SubjectTransform(src, dest)
    subject = ".".join(tokens[:2] if src == "*.*" else tokens)
    out = tr.apply(subject)
    assert out is not None
    assert isinstance(out, str)
