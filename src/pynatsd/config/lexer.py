"""Lexer for the nats-server configuration format (the `conf` package of nats-server).

The format is loose: `key = value`, `key: value` and `key value` all work, maps and arrays nest,
strings may be bare, and a value ends at a new line, `;` or `,`. Because the real server's lexer
decides what is valid, this lexer reproduces its state machine decision for decision, including the
odd corners (a bare integer directly before `]` turns into a string, a raw block that ends at EOF
keeps its `)`), so that a file is accepted here exactly when nats-server accepts it.

Positions follow nats-server too: lines count new lines, columns are byte offsets from the
previous new line (so they are 1-based on every line but the first, where they are 0-based), and a
value item's column is computed from its end. Error messages quote these numbers, so users can
compare them directly.

Work is O(bytes): the input is walked once, runs of ordinary characters are skipped with regular
expressions, and nothing already read is scanned again except the one character backed up.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Callable, Iterator
from typing import NamedTuple

# nats-server's lexer returns rune 0 both at the end of input and for a NUL byte, and several
# states treat the two the same; we keep that by returning NUL for both.
EOF = "\0"

_State = Callable[[], "_State | None"]


class ItemKind(enum.Enum):
    ERROR = "error"
    EOF = "eof"
    KEY = "key"
    TEXT = "text"
    STRING = "string"
    BOOL = "bool"
    INTEGER = "integer"
    FLOAT = "float"
    DATETIME = "datetime"
    ARRAY_START = "array_start"
    ARRAY_END = "array_end"
    MAP_START = "map_start"
    MAP_END = "map_end"
    COMMENT_START = "comment_start"
    VARIABLE = "variable"
    INCLUDE = "include"


class Item(NamedTuple):
    kind: ItemKind
    value: str
    line: int
    col: int


_BOOLS = frozenset({"true", "false", "on", "off", "yes", "no"})
_NUMBER_SUFFIXES = frozenset("kKmMgGtTpPeE")
_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", '"': '"', "\\": "\\"}
_HEX2 = re.compile(r"[0-9a-fA-F]{2}\Z")
_DATE_TAIL = "00-00T00:00:00Z"  # after "YYYY-"; '0' stands for any digit

# Runs that cannot end the current token, for the fast paths. Non-ASCII stops every run so that
# the rune-aware slow path sees it (a non-ASCII rune may be a Unicode space).
_BARE_KEY_RUN = re.compile(r"[^\t\n\v\f\r :=\x00\x80-\xff]+")
_MAP_KEY_RUN = _BARE_KEY_RUN
_COMMENT_RUN = re.compile(r"[^\n\r\x00\x80-\xff]+")
_DQ_RUN = re.compile(r'[^"\\\x00\x80-\xff]+')
_SQ_RUN = re.compile(r"[^'\x00\x80-\xff]+")
_BARE_STRING_RUN = re.compile(r"[^\\\t\n\r ;,\]}'\x00\x80-\xff]+")
_RAW_BLOCK_RUN = re.compile(r"[^)\x00\x80-\xff]+")


def is_space(r: str) -> bool:
    """Go's unicode.IsSpace (Python's str.isspace also counts \\x1c-\\x1f, Go does not)."""
    if r <= "\xff":
        return r in "\t\n\v\f\r \x85\xa0"
    return r.isspace()


def _is_ws(r: str) -> bool:
    return r == " " or r == "\t"


def _is_nl(r: str) -> bool:
    return r == "\n" or r == "\r"


def _is_digit(r: str) -> bool:
    # Go's unicode.IsDigit is the Nd category, which is what isdecimal tests.
    return r.isdecimal()


def _is_key_sep(r: str) -> bool:
    return r == "=" or r == ":"


def _show(r: str) -> str:
    """How a rune appears in an error message."""
    if r == "\n":
        return "\\n"
    if r == EOF:
        return "EOF"
    return r


def to_text(raw: str) -> str:
    """Turn a byte string held as Latin-1 into text; invalid UTF-8 survives as surrogates."""
    return raw.encode("latin-1").decode("utf-8", "surrogateescape")


class Lexer:
    """Turns conf text into `Item`s, lazily, so errors surface in the order the parser meets them.

    The input is held as bytes decoded as Latin-1 so that every index is a byte offset, as in the
    Go implementation; runes are decoded on the fly where a state looks at one.
    """

    def __init__(self, data: bytes) -> None:
        self._raw = data
        self._s = data.decode("latin-1")
        self._n = len(self._s)
        self._start = 0
        self._pos = 0
        self._width = 0
        self._line = 1
        self._lstart = 0  # offset of the last '\n' read
        self._ilstart = 0  # _lstart when the current item started
        self._stack: list[_State] = []
        self._parts: list[str] = []  # string pieces already unescaped
        self._string_state: _State = self._bare_string
        self._items: list[Item] = []

    def items(self) -> Iterator[Item]:
        state: _State | None = self._top
        while state is not None:
            state = state()
            if self._items:
                yield from self._items
                self._items.clear()

    # -- primitives ------------------------------------------------------------------------

    def _next(self) -> str:
        pos = self._pos
        if pos >= self._n:
            self._width = 0
            return EOF
        c = self._s[pos]
        if c < "\x80":
            if c == "\n":
                self._line += 1
                self._lstart = pos
            self._width = 1
            self._pos = pos + 1
            return c
        r, width = self._decode_rune(pos)
        self._width = width
        self._pos = pos + width
        return r

    def _decode_rune(self, pos: int) -> tuple[str, int]:
        lead = self._raw[pos]
        size = 2 if 0xC2 <= lead <= 0xDF else 3 if 0xE0 <= lead <= 0xEF else 4
        if lead < 0xC2 or lead > 0xF4:
            return "\ufffd", 1
        try:
            return self._raw[pos : pos + size].decode("utf-8"), size
        except UnicodeDecodeError:
            return "\ufffd", 1

    def _backup(self) -> None:
        self._pos -= self._width
        if self._pos < self._n and self._s[self._pos] == "\n":
            self._line -= 1

    def _peek(self) -> str:
        r = self._next()
        self._backup()
        return r

    def _skip_run(self, run: re.Pattern[str]) -> None:
        """Consume a run of plain characters at once, keeping line bookkeeping exact."""
        m = run.match(self._s, self._pos)
        if m is None:
            return
        end = m.end()
        nl = self._s.count("\n", self._pos, end)
        if nl:
            self._line += nl
            self._lstart = self._s.rfind("\n", self._pos, end)
        self._pos = end
        self._width = 1

    def _ignore(self) -> None:
        self._start = self._pos
        self._ilstart = self._lstart

    def _push(self, state: _State) -> None:
        self._stack.append(state)

    def _pop(self) -> _State | None:
        if not self._stack:
            return self._error("BUG in lexer: no states to pop.")
        return self._stack.pop()

    def _emit(self, kind: ItemKind) -> None:
        raw = "".join(self._parts) + self._s[self._start : self._pos]
        col = self._pos - self._ilstart - len(raw)
        self._items.append(Item(kind, to_text(raw), self._line, col))
        self._start = self._pos
        self._ilstart = self._lstart

    def _emit_string(self) -> None:
        self._emit(ItemKind.STRING)
        self._parts = []

    def _error(self, message: str) -> _State | None:
        """Report an error; the lexer stops (the returned next state is None)."""
        self._items.append(Item(ItemKind.ERROR, message, self._line, self._pos - self._lstart))
        return None

    def _eof_or_error(self) -> _State | None:
        """End of input where a new entry could start: fine unless something was half read."""
        if self._pos > self._start:
            return self._error("Unexpected EOF.")
        self._emit(ItemKind.EOF)
        return None

    def _comment(self, back_to: _State) -> _State:
        self._push(back_to)
        return self._comment_start

    def _maybe_comment(self, back_to: _State) -> bool:
        """After a '/', consume a second '/' and push `back_to`; else leave the input as it was."""
        if self._next() == "/":
            self._push(back_to)
            return True
        self._backup()
        return False

    # -- top level and `{ ... }` blocks around the whole file ---------------------------------

    def _top(self) -> _State | None:
        r = self._next()
        if is_space(r):
            self._ignore()
            return self._top
        if r == "{":
            self._push(self._top)
            self._ignore()
            return self._block_start
        if r == "#":
            return self._comment(self._top)
        if r == "/":
            if self._maybe_comment(self._top):
                return self._comment_start
            return self._eof_or_error()
        if r == EOF:
            return self._eof_or_error()
        self._backup()
        self._push(self._top_value_end)
        return self._key_start

    def _top_value_end(self) -> _State | None:
        r = self._next()
        if r == "#":
            return self._comment(self._top)
        if r == "/":
            if self._maybe_comment(self._top):
                return self._comment_start
            return self._top_value_end  # a lone '/' is skipped like a blank
        if _is_ws(r):
            return self._top_value_end
        if _is_nl(r) or r == EOF or r in ";,}":
            self._ignore()
            return self._top
        return self._error(
            "Expected a top-level value to end with a new line, comment or EOF, "
            f"but got '{_show(r)}' instead."
        )

    def _block_start(self) -> _State | None:
        r = self._next()
        if is_space(r):
            self._ignore()
            return self._block_start
        if r == "{":
            self._push(self._block_end)
            self._ignore()
            return self._block_start
        if r == "}":
            self._ignore()
            return self._pop()
        if r == "#":
            return self._comment(self._block_start)
        if r == "/":
            if self._maybe_comment(self._block_start):
                return self._comment_start
            return self._eof_or_error()
        if r == EOF:
            return self._eof_or_error()
        self._backup()
        self._push(self._block_value_end)
        return self._key_start

    def _block_value_end(self) -> _State | None:
        r = self._next()
        if r == "#":
            return self._comment(self._block_value_end)
        if r == "/":
            if self._maybe_comment(self._block_value_end):
                return self._comment_start
            return self._block_value_end
        if _is_ws(r):
            return self._block_value_end
        if _is_nl(r) or r == ";" or r == ",":
            self._ignore()
            return self._block_start
        if r == "}":
            self._backup()
            return self._block_end
        return self._error(
            "Expected a block-level value to end with a new line, comment or EOF, "
            f"but got '{_show(r)}' instead."
        )

    def _block_end(self) -> _State | None:
        r = self._next()
        if r == "#":
            return self._comment(self._block_start)
        if r == "/":
            if self._maybe_comment(self._block_start):
                return self._comment_start
            return self._block_end
        if _is_nl(r) or _is_ws(r):
            return self._block_end
        if r == ";" or r == ",":
            self._ignore()
            return self._block_start
        if r == "}":
            self._ignore()
            return self._pop()
        return self._error(
            f"Expected a block-level to end with a '}}', but got '{_show(r)}' instead."
        )

    # -- keys at top/block level ---------------------------------------------------------------

    def _key_start(self) -> _State | None:
        r = self._peek()
        if _is_key_sep(r):
            return self._error(f"Unexpected key separator '{r}'")
        if is_space(r):
            self._next()
            self._ignore()
            return self._key_start
        if r == '"' or r == "'":
            self._next()
            self._ignore()
            return self._quoted_key(r)
        self._ignore()
        self._next()
        return self._bare_key

    def _quoted_key(self, quote: str) -> _State:
        run = _DQ_KEY_RUN if quote == '"' else _SQ_KEY_RUN

        def state() -> _State | None:
            self._skip_run(run)
            r = self._peek()
            if r == quote:
                self._emit(ItemKind.KEY)
                self._next()
                self._ignore()
                return self._key_end
            if r == EOF:
                return self._eof_or_error()
            self._next()
            return state

        return state

    def _bare_key(self) -> _State | None:
        self._skip_run(_BARE_KEY_RUN)
        r = self._peek()
        if is_space(r):
            return self._keyword_or_key(self._key_end, None)
        if _is_key_sep(r) or r == EOF:
            self._emit(ItemKind.KEY)
            return self._key_end
        self._next()
        return self._bare_key

    def _keyword_or_key(self, key_end: _State, after_include: _State | None) -> _State:
        if self._s[self._start : self._pos].lower() == "include":
            self._ignore()
            if after_include is not None:
                self._push(after_include)
            return self._include_start
        self._emit(ItemKind.KEY)
        return key_end

    def _key_end(self) -> _State | None:
        # Blanks here include new lines: a key and its value may sit on different lines.
        r = self._next()
        if is_space(r):
            self._ignore()
            return self._key_end
        if _is_key_sep(r):
            self._ignore()
            return self._value
        if r == EOF:
            self._emit(ItemKind.EOF)
            return None
        self._backup()
        return self._value

    # -- include -------------------------------------------------------------------------------

    def _include_start(self) -> _State | None:
        r = self._next()
        if _is_ws(r):
            self._ignore()
            return self._include_start
        self._backup()
        return self._include

    def _include(self) -> _State | None:
        r = self._next()
        if r == "'" or r == '"':
            self._ignore()
            return self._quoted_include(r)
        problem = {
            "[": "start of an array",
            "{": "start of a map",
            "(": "start of a block",
            "-": "start of a number",
            "\\": "escape sequence",
            "\n": "new line",
            "\r": "new line",
        }.get(r)
        if problem is None and _is_digit(r):
            problem = "start of a number"
        if problem is not None:
            return self._error(f"Expected include value but found {problem}")
        self._backup()
        return self._bare_include

    def _quoted_include(self, quote: str) -> _State:
        what = "double quoted" if quote == '"' else "quoted"

        def state() -> _State | None:
            r = self._next()
            if r == quote:
                self._backup()
                self._emit(ItemKind.INCLUDE)
                self._next()
                self._ignore()
                return self._pop()
            if r == EOF:
                return self._error(f"Unexpected EOF in {what} include")
            return state

        return state

    def _bare_include(self) -> _State | None:
        r = self._next()
        if _is_nl(r) or r == EOF or r == ";" or r == "}" or _is_ws(r):
            self._backup()
            self._emit(ItemKind.INCLUDE)
            return self._pop()
        if r == "'":
            self._backup()
            self._emit(ItemKind.INCLUDE)
            self._next()
            self._ignore()
            return self._pop()
        return self._bare_include

    # -- values --------------------------------------------------------------------------------

    def _value(self) -> _State | None:
        # Blanks may precede a value, new lines may not (arrays and maps skip those themselves).
        r = self._next()
        if _is_ws(r):
            self._ignore()
            return self._value
        if r == "[":
            self._ignore()
            self._emit(ItemKind.ARRAY_START)
            return self._array_value
        if r == "{":
            self._ignore()
            self._emit(ItemKind.MAP_START)
            return self._map_key_start
        if r == "'":
            self._ignore()
            return self._sq_string
        if r == '"':
            self._ignore()
            self._string_state = self._dq_string
            return self._dq_string
        if r == "-":
            return self._neg_number_start
        if r == "(":
            self._ignore()
            return self._raw_block
        if _is_digit(r):
            self._backup()
            return self._number_start
        if r == ".":
            return self._error("Floats must start with a digit")
        if _is_nl(r):
            return self._error("Expected value but found new line")
        self._backup()
        self._string_state = self._bare_string
        return self._bare_string

    def _array_value(self) -> _State | None:
        r = self._next()
        if is_space(r):
            self._ignore()
            return self._array_value
        if r == "#":
            return self._comment(self._array_value)
        if r == "/" and self._maybe_comment(self._array_value):
            return self._comment_start
        if r == "/" or r == ",":
            return self._error("Unexpected array value terminator ','.")
        if r == "]":
            return self._array_end
        self._backup()
        self._push(self._array_value_end)
        return self._value

    def _array_value_end(self) -> _State | None:
        r = self._next()
        if _is_ws(r):
            self._ignore()
            return self._array_value_end
        if r == "#":
            return self._comment(self._array_value_end)
        if r == "/" and self._maybe_comment(self._array_value_end):
            return self._comment_start
        if r == "/" or r == "," or _is_nl(r):
            self._ignore()
            return self._array_value
        if r == "]":
            return self._array_end
        return self._error(
            'Expected an array value terminator "," or an array terminator "]", '
            f"but got '{_show(r)}' instead."
        )

    def _array_end(self) -> _State | None:
        self._ignore()
        self._emit(ItemKind.ARRAY_END)
        return self._pop()

    # -- maps (values written `{ ... }`) -------------------------------------------------------

    def _map_key_start(self) -> _State | None:
        r = self._peek()
        if _is_key_sep(r):
            return self._error(f"Unexpected key separator '{r}'.")
        if r == "]":
            return self._error("Unexpected array end ']' processing map.")
        if is_space(r):
            self._next()
            self._ignore()
            return self._map_key_start
        if r == "}":
            self._next()
            self._ignore()
            return self._map_end
        if r == "#":
            self._next()
            return self._comment(self._map_key_start)
        if r == "/":
            self._next()
            if self._maybe_comment(self._map_key_start):
                return self._comment_start
            # nats-server drops a lone leading '/' from a map key; so do we.
        elif r == '"' or r == "'":
            self._next()
            self._ignore()
            return self._map_quoted_key(r)
        elif r == EOF:
            return self._error("Unexpected EOF processing map.")
        self._ignore()
        self._next()
        return self._map_key

    def _map_quoted_key(self, quote: str) -> _State:
        run = _DQ_KEY_RUN if quote == '"' else _SQ_KEY_RUN
        what = "double quoted" if quote == '"' else "quoted"

        def state() -> _State | None:
            self._skip_run(run)
            r = self._peek()
            if r == EOF:
                return self._error(f"Unexpected EOF processing {what} map key.")
            if r == quote:
                self._emit(ItemKind.KEY)
                self._next()
                self._ignore()
                return self._map_key_end
            self._next()
            return state

        return state

    def _map_key(self) -> _State | None:
        self._skip_run(_MAP_KEY_RUN)
        r = self._peek()
        if r == EOF:
            return self._error("Unexpected EOF processing map key.")
        if is_space(r):
            return self._keyword_or_key(self._map_key_end, self._map_value_end)
        if _is_key_sep(r):
            self._emit(ItemKind.KEY)
            return self._map_key_end
        self._next()
        return self._map_key

    def _map_key_end(self) -> _State | None:
        r = self._next()
        if is_space(r):
            self._ignore()
            return self._map_key_end
        if _is_key_sep(r):
            self._ignore()
            return self._map_value
        self._backup()
        return self._map_value

    def _map_value(self) -> _State | None:
        r = self._next()
        if is_space(r):
            self._ignore()
            return self._map_value
        if r == ",":
            return self._error('Unexpected map value terminator ",".')
        if r == "}":
            self._ignore()
            return self._map_end
        self._backup()
        self._push(self._map_value_end)
        return self._value

    def _map_value_end(self) -> _State | None:
        r = self._next()
        if _is_ws(r):
            self._ignore()
            return self._map_value_end
        if r == "#":
            return self._comment(self._map_value_end)
        if r == "/" and self._maybe_comment(self._map_value_end):
            return self._comment_start
        if r == "/" or r == ";" or r == "," or _is_nl(r):
            self._ignore()
            return self._map_key_start
        if r == "}":
            self._ignore()
            return self._map_end
        return self._error(
            'Expected a map value terminator "," or a map terminator "}", '
            f"but got '{_show(r)}' instead."
        )

    def _map_end(self) -> _State | None:
        self._ignore()
        self._emit(ItemKind.MAP_END)
        return self._pop()

    # -- strings -------------------------------------------------------------------------------

    def _sq_string(self) -> _State | None:
        # Single quotes: no escapes at all.
        self._skip_run(_SQ_RUN)
        r = self._next()
        if r == "'":
            self._backup()
            self._emit(ItemKind.STRING)
            self._next()
            self._ignore()
            return self._pop()
        if r == EOF:
            return self._eof_or_error()
        return self._sq_string

    def _dq_string(self) -> _State | None:
        self._skip_run(_DQ_RUN)
        r = self._next()
        if r == "\\":
            self._cut_part()
            return self._escape
        if r == '"':
            self._backup()
            self._emit_string()
            self._next()
            self._ignore()
            return self._pop()
        if r == EOF:
            return self._eof_or_error()
        return self._dq_string

    def _bare_string(self) -> _State | None:
        self._skip_run(_BARE_STRING_RUN)
        r = self._next()
        if r == "\\":
            self._cut_part()
            return self._escape
        if _is_nl(r) or r == EOF or r in ";,]}" or _is_ws(r):
            self._backup()
            self._emit_bare()
            return self._pop()
        if r == "'":
            self._backup()
            self._emit_string()
            self._next()
            self._ignore()
            return self._pop()
        return self._bare_string

    def _emit_bare(self) -> None:
        if self._parts:
            self._emit_string()
        elif self._s[self._start : self._pos].lower() in _BOOLS:
            self._emit(ItemKind.BOOL)
        elif self._start < self._n and self._s[self._start] == "$":
            self._start += 1
            self._emit(ItemKind.VARIABLE)
        else:
            self._emit_string()

    def _cut_part(self) -> None:
        """Keep the text read so far (minus the backslash just read) as a finished piece."""
        self._parts.append(self._s[self._start : self._pos - 1])
        self._start = self._pos

    def _add_part(self, text: str) -> _State:
        self._parts.append(text)
        self._start = self._pos
        return self._string_state

    def _escape(self) -> _State | None:
        r = self._next()
        if r == "x":
            return self._hex_escape
        if r in _ESCAPES and r != EOF:
            return self._add_part(_ESCAPES[r])
        return self._error(
            f"Invalid escape character '{_show(r)}'. Only the following escape characters are "
            'allowed: \\xXX, \\t, \\n, \\r, \\", \\\\.'
        )

    def _hex_escape(self) -> _State | None:
        for _ in range(2):
            if _is_nl(self._next()):
                return self._error(
                    "Expected two hexadecimal digits after '\\x', but hit end of line"
                )
        digits = self._s[self._pos - 2 : self._pos]
        if _HEX2.match(digits) is None:
            return self._error(
                "Expected two hexadecimal digits after '\\x', "
                f"but got '{digits.encode('latin-1').decode('utf-8', 'replace')}'"
            )
        # One byte, held as a Latin-1 character like the rest of the input.
        return self._add_part(chr(int(digits, 16)))

    def _raw_block(self) -> _State | None:
        # `key (` ... `)`: raw text, ended by a ')' alone at the start of a line.
        self._skip_run(_RAW_BLOCK_RUN)
        r = self._next()
        if r == ")":
            self._backup()
            self._backup()
            if self._next() != "\n":
                self._next()
                return self._raw_block
            self._next()
            after = self._next()
            if after == "\n" or after == EOF:
                self._backup()
                self._backup()
                self._emit(ItemKind.STRING)
                self._next()
                self._ignore()
                return self._pop()
            self._backup()
            return self._raw_block
        if r == EOF:
            return self._error("Unexpected EOF processing block.")
        return self._raw_block

    # -- numbers, dates, and strings that start with a digit ---------------------------------

    def _number_start(self) -> _State | None:
        r = self._next()
        if not _is_digit(r):
            if r == ".":
                return self._error("Floats must start with a digit, not '.'.")
            return self._error(f"Expected a digit but got '{_show(r)}'.")
        return self._number

    def _number(self) -> _State | None:
        r = self._next()
        if r == "-":
            if self._pos - self._start != 5:
                return self._error("All ISO8601 dates must be in full Zulu form.")
            return self._date_after_year
        if _is_digit(r):
            return self._number
        if r == ".":
            return self._float_start
        if r in _NUMBER_SUFFIXES:
            return self._convenient_number
        # nats-server does not list ']' here, so `[1, 2]` makes "2]" a string; we follow.
        if not (_is_nl(r) or r == EOF or r in "};," or _is_ws(r)):
            self._string_state = self._bare_string
            return self._bare_string
        self._backup()
        self._emit(ItemKind.INTEGER)
        return self._pop()

    def _convenient_number(self) -> _State | None:
        r = self._next()
        if r in "bBiI" and r != EOF:
            return self._convenient_number
        self._backup()
        if _is_nl(r) or r == EOF or r in "};," or _is_ws(r) or _is_digit(r):
            self._emit(ItemKind.INTEGER)
            return self._pop()
        self._string_state = self._bare_string
        return self._bare_string

    def _date_after_year(self) -> _State | None:
        for want in _DATE_TAIL:
            r = self._next()
            if want == "0":
                if not _is_digit(r):
                    return self._error(
                        f"Expected digit in ISO8601 datetime, but found '{_show(r)}' instead."
                    )
            elif r != want:
                return self._error(
                    f"Expected '{want}' in ISO8601 datetime, but found '{_show(r)}' instead."
                )
        self._emit(ItemKind.DATETIME)
        return self._pop()

    def _neg_number_start(self) -> _State | None:
        r = self._next()
        if not _is_digit(r):
            if r == ".":
                return self._error("Floats must start with a digit, not '.'.")
            return self._error(f"Expected a digit but got '{_show(r)}'.")
        return self._neg_number

    def _neg_number(self) -> _State | None:
        r = self._next()
        if _is_digit(r):
            return self._neg_number
        if r == ".":
            return self._float_start
        if r in _NUMBER_SUFFIXES:
            return self._convenient_number
        self._backup()
        self._emit(ItemKind.INTEGER)
        return self._pop()

    def _float_start(self) -> _State | None:
        r = self._next()
        if not _is_digit(r):
            return self._error(
                f"Floats must have a digit after the '.', but got '{_show(r)}' instead."
            )
        return self._float

    def _float(self) -> _State | None:
        r = self._next()
        if _is_digit(r):
            return self._float
        if r == ".":
            return self._ip_addr  # a second '.' means this was never a float
        self._backup()
        self._emit(ItemKind.FLOAT)
        return self._pop()

    def _ip_addr(self) -> _State | None:
        r = self._next()
        if _is_digit(r) or (r in ".:-" and r != EOF):
            return self._ip_addr
        self._backup()
        self._emit(ItemKind.STRING)
        return self._pop()

    # -- comments ------------------------------------------------------------------------------

    def _comment_start(self) -> _State | None:
        self._ignore()
        self._emit(ItemKind.COMMENT_START)
        return self._comment_text

    def _comment_text(self) -> _State | None:
        self._skip_run(_COMMENT_RUN)
        r = self._peek()
        if _is_nl(r) or r == EOF:
            self._emit(ItemKind.TEXT)
            return self._pop()
        self._next()
        return self._comment_text


_DQ_KEY_RUN = re.compile(r'[^"\x00\x80-\xff]+')
_SQ_KEY_RUN = _SQ_RUN


def lex(data: bytes) -> Iterator[Item]:
    """The items of `data`, ending with an EOF or an ERROR item."""
    return Lexer(data).items()
