"""Subject transforms: nats-server's `server/subject_transform.go` (and `ValidateMapping` from
`server/sublist.go`), the one implementation behind account subject mappings
(`pynatsd.mappings`) and JetStream's stream `subject_transform`, source transforms and
republish.

A transform maps subjects that match its source onto its destination. A destination token is a
literal, a `>` (the rest of the subject, when the source ends in `>`), `$N` or
`{{wildcard(N)}}` (the N-th `*` of the source), or a function:
`{{partition(n[,N...])}}` (an FNV-1a hash of the named wildcard tokens, or of the whole subject,
modulo n), `{{splitFromLeft(N,i)}}`, `{{splitFromRight(N,i)}}`, `{{sliceFromLeft(N,n)}}`,
`{{sliceFromRight(N,n)}}`, `{{split(N,sep)}}`, `{{left(N,n)}}`, `{{right(N,n)}}` and
`{{random(n)}}`. Function names take either case for their first letter of each word, as Go's
regular expressions do.

Go's quirks are kept on purpose: the functions cut tokens by bytes, not characters; a wildcard
index of 0 (or below) names the first token; a literal source accepts only `partition` and
`random`; `$x` with no number after the `$` is a literal.
"""

from __future__ import annotations

import random
import re
from typing import AnyStr

from pynatsd.subjects import is_subset_match_tokens

__all__ = [
    "SubjectTransform",
    "TransformError",
    "transform_tokenize",
    "validate_mapping",
]


class TransformError(ValueError):
    """A source/destination pair nats-server refuses; `str()` is Go's error text."""


# Error texts (server/errors.go).
ERR_BAD_SUBJECT = "invalid subject"
_INVALID = "invalid mapping destination"
ERR_INVALID_TRANSFORM = f"{_INVALID}: invalid transform"
ERR_NOT_USING_ALL_WILDCARDS = f"{_INVALID}: not using all of the token wildcard(s)"
ERR_UNKNOWN_FUNCTION = f"{_INVALID}: unknown function"
ERR_INDEX_OUT_OF_RANGE = f"{_INVALID}: wildcard index out of range"
ERR_NOT_ENOUGH_ARGS = f"{_INVALID}: not enough arguments passed to the function"
ERR_INVALID_ARG = f"{_INVALID}: function argument is invalid or in the wrong format"
ERR_TOO_MANY_ARGS = f"{_INVALID}: too many arguments passed to the function"
ERR_NOT_SUPPORTED_FOR_IMPORT = (
    f"{_INVALID}: the only mapping function allowed for import transforms is {{{{Wildcard()}}}}"
)


def _destination_error(token: str, err: str) -> TransformError:
    """mappingDestinationErr: the error, and the token it is about."""
    return TransformError(f"{err} in {token}" if token else err)


# Token kinds (the Go enum).
NO_TRANSFORM = 0
PARTITION = 2
WILDCARD = 3
SPLIT_FROM_LEFT = 4
SPLIT_FROM_RIGHT = 5
SLICE_FROM_LEFT = 6
SLICE_FROM_RIGHT = 7
SPLIT = 8
LEFT = 9
RIGHT = 10
RANDOM = 11

# Go's RE2 `\s` is ASCII whitespace without \v.
_S = r"[\t\n\f\r ]"


def _function(name: str) -> re.Pattern[str]:
    # `[pP]artition`: the first letter of each word in either case, as nats-server spells them.
    words = re.findall(r"[A-Z]?[a-z]+", name)
    spelled = "".join(f"[{w[0].lower()}{w[0].upper()}]{w[1:]}" for w in words)
    return re.compile(rf"{{{{{_S}*{spelled}{_S}*\((.*)\){_S}*}}}}")


_PARTITION = _function("Partition")
_WILDCARD = _function("Wildcard")
_SPLIT_FROM_LEFT = _function("SplitFromLeft")
_SPLIT_FROM_RIGHT = _function("SplitFromRight")
_SLICE_FROM_LEFT = _function("SliceFromLeft")
_SLICE_FROM_RIGHT = _function("SliceFromRight")
_SPLIT = _function("Split")
_LEFT = _function("Left")
_RIGHT = _function("Right")
_RANDOM = _function("Random")
_COMMA = re.compile(rf",{_S}*")
# The functions ValidateMapping knows (nats-server v2.15.1 lists left and right too).
_VALIDATED = (
    _PARTITION,
    _WILDCARD,
    _SPLIT_FROM_LEFT,
    _SPLIT_FROM_RIGHT,
    _SLICE_FROM_LEFT,
    _SLICE_FROM_RIGHT,
    _SPLIT,
    _LEFT,
    _RIGHT,
    _RANDOM,
)
_INDEX_INT_FUNCTIONS = (
    (_SPLIT_FROM_LEFT, SPLIT_FROM_LEFT),
    (_SPLIT_FROM_RIGHT, SPLIT_FROM_RIGHT),
    (_SLICE_FROM_LEFT, SLICE_FROM_LEFT),
    (_SLICE_FROM_RIGHT, SLICE_FROM_RIGHT),
    (_RIGHT, RIGHT),
    (_LEFT, LEFT),
)
_ATOI = re.compile(r"[+-]?[0-9]+")
_INT64 = 1 << 63
_INT32 = 1 << 31


def _atoi(text: str) -> int:
    """strconv.Atoi (64-bit): an optional sign and ASCII digits, in range; else ValueError."""
    if not _ATOI.fullmatch(text):
        raise ValueError(text)
    value = int(text)
    if not -_INT64 <= value < _INT64:
        raise ValueError(text)
    return value


def _parse_int32(text: str) -> int:
    value = _atoi(text)
    if not -_INT32 <= value < _INT32:
        raise ValueError(text)
    return value


def _args(pattern: re.Pattern[str], token: str) -> list[str] | None:
    """getMappingFunctionArgs: the function's arguments split on commas, or None."""
    m = pattern.search(token)
    return _COMMA.split(m.group(1)) if m is not None else None


def _is_function_token(token: str) -> bool:
    return len(token) > 4 and token.startswith("{{") and token.endswith("}}")


# A destination token, parsed: (kind, source token indexes, int argument, string argument).
_Parsed = tuple[int, tuple[int, ...], int, str]


def _index_int_args(token: str, args: list[str], kind: int) -> _Parsed:
    """transformIndexIntArgsHelper: a wildcard index and an integer."""
    if len(args) < 2:
        raise _destination_error(token, ERR_NOT_ENOUGH_ARGS)
    if len(args) > 2:
        raise _destination_error(token, ERR_TOO_MANY_ARGS)
    try:
        index = _atoi(args[0].strip(" "))
        value = _parse_int32(args[1].strip(" "))
    except ValueError:
        raise _destination_error(token, ERR_INVALID_ARG) from None
    return kind, (index,), value, ""


def _max_int32_arg(token: str, text: str) -> int:
    try:
        value = _atoi(text.strip(" "))
    except ValueError:
        raise _destination_error(token, ERR_INVALID_ARG) from None
    if value > _INT32 - 1:
        raise _destination_error(token, ERR_INVALID_ARG)
    # Go keeps int32(value): wrap below the range as the conversion does.
    return (value + _INT32) % (1 << 32) - _INT32


def _place_holder(token: str) -> _Parsed:
    """indexPlaceHolders: what a destination token asks for."""
    if len(token) > 1:
        if token[0] == "$":
            # The old `$1` form; other `$` tokens are literals ($JS, $KV...).
            try:
                return WILDCARD, (_atoi(token[1:]),), -1, ""
            except ValueError:
                return NO_TRANSFORM, (-1,), -1, ""
        if _is_function_token(token):
            return _function_token(token)
    return NO_TRANSFORM, (-1,), -1, ""


def _function_token(token: str) -> _Parsed:
    args = _args(_WILDCARD, token)
    if args is not None:
        if len(args) == 1 and args[0] == "":
            raise _destination_error(token, ERR_NOT_ENOUGH_ARGS)
        if len(args) > 1:
            raise _destination_error(token, ERR_TOO_MANY_ARGS)
        try:
            return WILDCARD, (_atoi(args[0].strip(" ")),), -1, ""
        except ValueError:
            raise _destination_error(token, ERR_INVALID_ARG) from None
    args = _args(_PARTITION, token)
    if args is not None:
        count = _max_int32_arg(token, args[0])
        try:
            indexes = tuple(_atoi(a.strip(" ")) for a in args[1:])
        except ValueError:
            raise _destination_error(token, ERR_INVALID_ARG) from None
        return PARTITION, indexes, count, ""
    for pattern, kind in _INDEX_INT_FUNCTIONS:
        args = _args(pattern, token)
        if args is not None:
            return _index_int_args(token, args, kind)
    args = _args(_SPLIT, token)
    if args is not None:
        if len(args) < 2:
            raise _destination_error(token, ERR_NOT_ENOUGH_ARGS)
        if len(args) > 2:
            raise _destination_error(token, ERR_TOO_MANY_ARGS)
        try:
            index = _atoi(args[0].strip(" "))
        except ValueError:
            raise _destination_error(token, ERR_INVALID_ARG) from None
        if " " in args[1] or "." in args[1]:
            raise _destination_error(token, ERR_INVALID_ARG)
        return SPLIT, (index,), -1, args[1]
    args = _args(_RANDOM, token)
    if args is not None:
        if len(args) != 1:
            raise _destination_error(token, ERR_NOT_ENOUGH_ARGS)
        return RANDOM, (), _max_int32_arg(token, args[0]), ""
    raise _destination_error(token, ERR_UNKNOWN_FUNCTION)


def _subject_info(subject: str) -> tuple[bool, list[str], int, bool]:
    """subjectInfo: valid, tokens, number of `*`, has `>` (no whitespace test)."""
    if not subject:
        return False, [], 0, False
    pwcs = 0
    fwc = False
    tokens = subject.split(".")
    for t in tokens:
        if not t or fwc:
            return False, [], 0, False
        if t == ">":
            fwc = True
        elif t == "*":
            pwcs += 1
    return True, tokens, pwcs, fwc


def _fnv32a(data: bytes) -> int:
    h = 0x811C9DC5
    for b in data:
        h = ((h ^ b) * 0x01000193) & 0xFFFFFFFF
    return h


def _raw(text: str) -> bytes:
    return text.encode("utf-8", "surrogateescape")


def _text(raw: bytes) -> str:
    return raw.decode("utf-8", "surrogateescape")


class SubjectTransform:
    """One source -> destination transform (nats-server's `subjectTransform`). Construction
    raises `TransformError` with nats-server's text when the pair is not usable; `strict` is
    for import mappings, which must be reversible."""

    __slots__ = ("_kinds", "_steps", "dest", "dtoks", "fixed", "src", "stoks")

    def __init__(self, src: str, dest: str, strict: bool = False) -> None:
        if not dest:
            # nats-server returns no transform at all; callers check for an empty destination.
            raise TransformError(ERR_BAD_SUBJECT)
        src = src or ">"
        src_ok, stokens, npwcs, src_fwc = _subject_info(src)
        dest_ok, dtokens, dest_pwcs, dest_fwc = _subject_info(dest)
        if not src_ok or not dest_ok or dest_pwcs > 0 or src_fwc != dest_fwc:
            raise TransformError(ERR_BAD_SUBJECT)
        steps: list[_Parsed] = []
        if npwcs > 0 or src_fwc:
            # 1-based wildcard number -> position of that `*` among the source tokens.
            positions: dict[int, int] = {}
            for i, t in enumerate(stokens):
                if t == "*":
                    positions[len(positions) + 1] = i
            used = 0
            for token in dtokens:
                kind, indexes, value, text = _place_holder(token)
                if strict and kind not in (NO_TRANSFORM, WILDCARD):
                    raise _destination_error(token, ERR_NOT_SUPPORTED_FOR_IMPORT)
                if kind in (NO_TRANSFORM, RANDOM):
                    steps.append((kind, indexes, value, text))
                    continue
                used += len(indexes)
                for index in indexes:
                    if index > npwcs:
                        raise _destination_error(f"{token}: [{index}]", ERR_INDEX_OUT_OF_RANGE)
                # Go reads a map here: an index of 0 or less finds position 0.
                steps.append((kind, tuple(positions.get(i, 0) for i in indexes), value, text))
            if strict and used < npwcs:
                raise _destination_error(dest, ERR_NOT_USING_ALL_WILDCARDS)
        else:
            for token in dtokens:
                kind, _, value, _ = _place_holder(token)
                if kind == NO_TRANSFORM:
                    steps.append((NO_TRANSFORM, (-1,), -1, ""))
                elif kind in (RANDOM, PARTITION):
                    steps.append((kind, (), value, ""))
                else:
                    raise _destination_error(token, ERR_INDEX_OUT_OF_RANGE)
        self.src = src
        self.dest = dest
        self.stoks = stokens
        self.dtoks = dtokens
        self._steps = steps
        self._kinds = [s[0] for s in steps]
        # The same subject always gives the same result (no `random`): a delivery plan may
        # remember it.
        self.fixed = RANDOM not in self._kinds

    def __repr__(self) -> str:
        return f"SubjectTransform({self.src!r}, {self.dest!r})"

    def matches(self, subject: str) -> bool:
        return self.src == ">" or is_subset_match_tokens(subject.split("."), self.src.split("."))

    def apply(self, subject: str) -> str | None:
        """Match: the transformed subject when `subject` is a literal subject the source
        matches, else None."""
        if self.src == ">" and self.dest == ">":
            return subject
        tokens = subject.split(".")
        if any(not t or t == "*" or t == ">" for t in tokens):
            return None
        if self.src == ">" or is_subset_match_tokens(tokens, self.src.split(".")):
            return self.transform_tokens(tokens)
        return None

    def transform(self, subject: str) -> str:
        """TransformSubject: transform without checking that the source matches."""
        return self.transform_tokens(subject.split("."))

    def transform_tokens(self, tokens: list[str]) -> str:
        """TransformTokenizedSubject."""
        out: list[str] = []
        last = len(self._steps) - 1
        dtoks = self.dtoks
        for i, (kind, indexes, value, text) in enumerate(self._steps):
            if kind == NO_TRANSFORM:
                if dtoks[i] == ">":
                    break
                out.append(dtoks[i])
            elif kind == WILDCARD:
                if indexes and indexes[0] < len(tokens):
                    out.append(tokens[indexes[0]])
            elif kind == PARTITION:
                if indexes:
                    key = _raw("".join(tokens[j] for j in indexes))
                else:
                    key = _raw(".".join(tokens))
                out.append(_partition(key, value))
            elif kind == RANDOM:
                out.append(str(random.getrandbits(31) % abs(value)) if value else "0")
            else:
                out.append(_cut(kind, tokens[indexes[0]], value, text))
            if i < last:
                out.append(".")
        if dtoks[-1] == ">":
            out.append(".".join(tokens[len(self.stoks) - 1 :]))
        return "".join(out)


def _partition(key: bytes, buckets: int) -> str:
    if buckets == 0:
        return "0"
    # uint32(numBuckets): a negative count wraps, as in Go.
    return str(_fnv32a(key) % (buckets & 0xFFFFFFFF))


def _cut(kind: int, token: str, n: int, sep: str) -> str:
    """The functions that cut one source token, on its bytes as Go does."""
    if kind == SPLIT:
        return _split(token, sep)
    if token.isascii():
        return _cut_sequence(kind, token, n, ".")
    return _text(_cut_sequence(kind, _raw(token), n, b"."))


def _cut_sequence(kind: int, token: AnyStr, n: int, dot: AnyStr) -> AnyStr:
    size = len(token)
    if not 0 < n < size:
        # Too short to cut at that size: the token as it is.
        return token
    if kind == SPLIT_FROM_LEFT:
        return token[:n] + dot + token[n:]
    if kind == SPLIT_FROM_RIGHT:
        return token[: size - n] + dot + token[size - n :]
    if kind == LEFT:
        return token[:n]
    if kind == RIGHT:
        return token[size - n :]
    if kind == SLICE_FROM_LEFT:
        return dot.join([token[i : i + n] for i in range(0, size, n)])
    # SLICE_FROM_RIGHT
    rest = size % n
    parts = [token[:rest]] if rest else []
    parts.extend(token[i : i + n] for i in range(rest, size, n))
    return dot.join(parts)


def _split(token: str, sep: str) -> str:
    # strings.Split, then nats-server's rule for the dots between the non-empty pieces.
    if sep:
        splits = token.split(sep)
    else:
        splits = list(token)  # Go splits into UTF-8 sequences (surrogate-escaped bytes alone)
        if not splits:
            return ""
    out: list[str] = []
    for j, piece in enumerate(splits):
        if piece:
            out.append(piece)
        if j < len(splits) - 1 and splits[j + 1] and not (j == 0 and not piece):
            out.append(".")
    return "".join(out)


def validate_mapping(src: str, dest: str) -> None:
    """ValidateMapping: raise TransformError when `dest` is not a usable mapping destination
    for `src` (an empty destination is)."""
    if not dest:
        return
    seen_fwc = False
    for t in dest.split("."):
        if not t or seen_fwc:
            raise _destination_error(t, ERR_INVALID_TRANSFORM)
        if _is_function_token(t):
            if not any(p.search(t) for p in _VALIDATED):
                raise _destination_error(t, ERR_UNKNOWN_FUNCTION)
            continue
        if t == ">":
            seen_fwc = True
        elif any(c in t for c in "\t\n\f\r "):
            raise TransformError(ERR_INVALID_TRANSFORM)
    SubjectTransform(src, dest)


def transform_tokenize(subject: str) -> str:
    """transformTokenize: `foo.*.*` -> `foo.$1.$2`, the identity destination of a source."""
    out = []
    n = 1
    for token in subject.split("."):
        if token == "*":
            out.append(f"${n}")
            n += 1
        else:
            out.append(token)
    return ".".join(out)
