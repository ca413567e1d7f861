"""Subject transforms for streams (`subject_transform`, source and mirror `subject_transforms`,
`republish`): nats-server's `server/subject_transform.go`, the part streams use.

A destination token is a literal, a `>` (the rest of the subject), `$N` or `{{wildcard(N)}}`
(the N-th `*` of the source), `{{partition(N[,i...])}}`, `{{splitFromLeft(i,n)}}`,
`{{splitFromRight(i,n)}}`, `{{sliceFromLeft(i,n)}}`, `{{sliceFromRight(i,n)}}`,
`{{split(i,sep)}}`, `{{left(i,n)}}` and `{{right(i,n)}}`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from pynatsd.subjects import match_literal

__all__ = ["SubjectTransform", "TransformError", "validate_mapping"]


class TransformError(ValueError):
    """A source/destination pair nats-server refuses; the text is Go's."""


_INVALID = "invalid mapping destination: invalid transform"
_UNKNOWN = "invalid mapping destination: unknown function"
_FUNC = re.compile(r"^{{\s*([a-zA-Z]+)\s*\((.*)\)\s*}}$")
_FUNCS = {
    "partition",
    "wildcard",
    "splitfromleft",
    "splitfromright",
    "slicefromleft",
    "slicefromright",
    "split",
    "left",
    "right",
    "random",
}


def validate_mapping(src: str, dest: str) -> None:
    """nats-server's ValidateMapping: raise TransformError when `dest` is not usable."""
    if not dest:
        return
    seen_fwc = False
    for t in dest.split("."):
        if not t or seen_fwc:
            raise TransformError(f"{_INVALID} in {t}" if t else _INVALID)
        if len(t) > 4 and t.startswith("{{") and t.endswith("}}"):
            m = _FUNC.match(t)
            if m is None or m.group(1).lower() not in _FUNCS:
                raise TransformError(f"{_UNKNOWN} in {t}")
            continue
        if t == ">":
            seen_fwc = True
        elif any(c in t for c in "\t\n\f\r "):
            raise TransformError(_INVALID)
    SubjectTransform(src, dest)


@dataclass(slots=True)
class _Token:
    kind: str  # "literal", "fwc" or a function name
    text: str = ""
    indexes: tuple[int, ...] = ()
    arg: int = 0
    sarg: str = ""


def _fnv32a(data: bytes) -> int:
    h = 0x811C9DC5
    for b in data:
        h = ((h ^ b) * 0x01000193) & 0xFFFFFFFF
    return h


class SubjectTransform:
    """One source -> destination mapping; `apply` returns None when the source does not match."""

    def __init__(self, src: str, dest: str) -> None:
        self.src = src or ">"
        self.dest = dest
        stoks = self.src.split(".")
        dtoks = dest.split(".") if dest else []
        if any(not t for t in stoks) or any(not t for t in dtoks):
            raise TransformError("invalid subject")
        if (">" in stoks) != (">" in dtoks) or "*" in dtoks:
            raise TransformError("invalid subject")
        self._stoks = stoks
        # Positions of the source's `*` tokens, 1-based as the destination refers to them.
        self._pwcs = [i for i, t in enumerate(stoks) if t == "*"]
        self._tokens = [self._parse(t) for t in dtoks]
        self._identity = self.src == ">" and dest in (">", "")

    def _wildcard_index(self, text: str) -> int:
        try:
            n = int(text.strip())
        except ValueError:
            raise TransformError(f"{_INVALID} in {text}") from None
        if n < 1 or n > len(self._pwcs):
            raise TransformError(
                f"invalid mapping destination: wildcard index out of range in {text}"
            )
        return self._pwcs[n - 1]

    def _parse(self, token: str) -> _Token:
        if token == ">":
            return _Token("fwc")
        if len(token) > 1 and token[0] == "$" and token[1:].isdigit():
            return _Token("wildcard", indexes=(self._wildcard_index(token[1:]),))
        m = _FUNC.match(token)
        if m is None:
            return _Token("literal", token)
        name = m.group(1).lower()
        args = [a.strip() for a in m.group(2).split(",")] if m.group(2).strip() else []
        try:
            if name == "wildcard" and len(args) == 1:
                return _Token("wildcard", indexes=(self._wildcard_index(args[0]),))
            if name == "partition" and args:
                idx = tuple(self._wildcard_index(a) for a in args[1:])
                return _Token("partition", indexes=idx, arg=int(args[0]))
            sized = ("splitfromleft", "splitfromright", "slicefromleft", "slicefromright")
            if name in (*sized, "left", "right") and len(args) == 2:
                return _Token(name, indexes=(self._wildcard_index(args[0]),), arg=int(args[1]))
            if name == "split" and len(args) == 2:
                return _Token(name, indexes=(self._wildcard_index(args[0]),), sarg=args[1])
            if name == "random" and len(args) == 1:
                return _Token(name, arg=int(args[0]))
        except ValueError:
            raise TransformError(f"{_INVALID} in {token}") from None
        raise TransformError(f"invalid mapping destination: wrong number of arguments in {token}")

    def matches(self, subject: str) -> bool:
        return self.src == ">" or match_literal(subject, self.src)

    def apply(self, subject: str) -> str | None:
        if not self.matches(subject):
            return None
        if self._identity or not self.dest:
            return subject
        tokens = subject.split(".")
        out: list[str] = []
        for t in self._tokens:
            if t.kind == "fwc":
                out.extend(tokens[len(self._stoks) - 1 :])
                continue
            out.append(self._render(t, tokens))
        return ".".join(out)

    def _render(self, t: _Token, tokens: list[str]) -> str:
        kind = t.kind
        if kind == "literal":
            return t.text
        if kind == "random":
            import random

            return str(random.randrange(t.arg)) if t.arg > 0 else "0"
        if kind == "partition":
            key = (
                "".join(tokens[i] for i in t.indexes) if t.indexes else ".".join(tokens)
            ).encode()
            return str(_fnv32a(key) % t.arg) if t.arg > 0 else "0"
        src = tokens[t.indexes[0]] if t.indexes and t.indexes[0] < len(tokens) else ""
        n = t.arg
        if kind == "wildcard":
            return src
        if kind == "splitfromleft":
            return f"{src[:n]}.{src[n:]}" if 0 < n < len(src) else src
        if kind == "splitfromright":
            return f"{src[: len(src) - n]}.{src[len(src) - n :]}" if 0 < n < len(src) else src
        if kind == "slicefromleft":
            if not 0 < n < len(src):
                return src
            return ".".join(src[i : i + n] for i in range(0, len(src), n))
        if kind == "slicefromright":
            if not 0 < n < len(src):
                return src
            r = len(src) % n
            parts = [src[:r]] if r else []
            parts += [src[i : i + n] for i in range(r, len(src), n)]
            return ".".join(parts)
        if kind == "split":
            return ".".join(p for p in src.split(t.sarg) if p)
        if kind == "left":
            return src[:n] if 0 < n < len(src) else src
        if kind == "right":
            return src[len(src) - n :] if 0 < n < len(src) else src
        raise AssertionError(kind)
