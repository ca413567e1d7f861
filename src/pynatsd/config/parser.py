"""Parser for the nats-server configuration format: lexer items -> nested Python values.

Values become `str`, `bool`, `int`, `float`, `datetime` (UTC), `list` and `dict`. Internally every
value is a `Node` that remembers where it was written, so the loader can say `file:line:col` when a
value is wrong; `parse()` and `parse_file()` strip the nodes for callers who only want data.

As in nats-server, a value in a map takes the position of its key, an array element keeps its own;
variables (`$name`) resolve against the enclosing maps, innermost first, then the environment, whose
value is itself parsed as a conf value; `include` reads another file relative to the including one
and merges its keys into the current map.
"""

from __future__ import annotations

import hashlib
import math
import os
import posixpath
import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from pynatsd.config.lexer import Item, ItemKind, lex
from pynatsd.gofmt import go_json

_INT64_MIN = -(1 << 63)
_INT64_MAX = (1 << 63) - 1
_SIZE_SUFFIXES = {
    "": 1,
    "k": 1000,
    "kb": 1 << 10,
    "ki": 1 << 10,
    "kib": 1 << 10,
    "m": 1000**2,
    "mb": 1 << 20,
    "mi": 1 << 20,
    "mib": 1 << 20,
    "g": 1000**3,
    "gb": 1 << 30,
    "gi": 1 << 30,
    "gib": 1 << 30,
    "t": 1000**4,
    "tb": 1 << 40,
    "ti": 1 << 40,
    "tib": 1 << 40,
    "p": 1000**5,
    "pb": 1 << 50,
    "pi": 1 << 50,
    "pib": 1 << 50,
    "e": 1000**6,
    "eb": 1 << 60,
    "ei": 1 << 60,
    "eib": 1 << 60,
}
_LEADING_INT = re.compile(r"[0-9-]*")
_DATETIME = re.compile(r"(\d{4})-(\d\d)-(\d\d)T(\d\d):(\d\d):(\d\d)Z\Z", re.ASCII)
# A bare `$2a$...` is a bcrypt hash, not a variable, so bcrypt passwords need no quotes.
_BCRYPT_PREFIX = "2a$"
# The key an environment variable's value is parsed under (as `pk=<value>`).
_ENV_KEY = "pk"


class ConfigError(Exception):
    """A configuration file could not be read, parsed or applied.

    `str()` gives `file:line:col: reason` when a position is known, like nats-server's messages.
    """

    def __init__(self, reason: str, file: str | None = None, line: int = 0, col: int = 0) -> None:
        super().__init__(reason)
        self.reason = reason
        self.file = file
        self.line = line
        self.col = col

    def __str__(self) -> str:
        if self.file is None:
            return self.reason
        return f"{self.file}:{self.line}:{self.col}: {self.reason}"


@dataclass(slots=True, eq=False)
class Node:
    """A parsed value and the place it was written.

    `value` is a scalar, a `list[Node]` or a `dict[str, Node]`. `used_variable` is set on a map
    entry that some `$name` referred to: nats-server does not report such entries as unknown keys.
    """

    value: Any
    file: str
    line: int
    col: int
    used_variable: bool = False

    @property
    def where(self) -> str:
        return f"{self.file}:{self.line}:{self.col}"

    def plain(self) -> Any:
        return to_plain(self.value)


def to_plain(value: Any) -> Any:
    """Strip `Node`s from a parsed value, recursively."""
    if isinstance(value, Node):
        value = value.value
    if isinstance(value, dict):
        return {k: to_plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [to_plain(v) for v in value]
    return value


@dataclass(slots=True)
class _Key:
    name: str
    line: int
    col: int


class _Parser:
    def __init__(
        self,
        data: bytes,
        file: str,
        base_dir: str,
        env_refs: set[str],
        includes: tuple[str, ...],
    ) -> None:
        self._items = lex(data)
        self._file = file
        self._base_dir = base_dir
        self._env_refs = env_refs  # variables being resolved from the environment (cycle check)
        self._includes = includes  # files being parsed, outermost first (cycle check)
        self.mapping: dict[str, Node] = {}
        self._contexts: list[dict[str, Node] | list[Node]] = [self.mapping]
        self._keys: list[_Key] = []

    def run(self) -> dict[str, Node]:
        previous: Item | None = None
        for item in self._items:
            if item.kind is ItemKind.EOF:
                # A trailing '}' may lex as a key; nats-server allows it for JSON-like files.
                if previous is not None and previous.kind is ItemKind.KEY and previous.value != "}":
                    raise self._error(
                        f'config is invalid: key "{previous.value}" has no value', item
                    )
                break
            previous = item
            self._process(item)
        return self.mapping

    def _error(self, reason: str, item: Item) -> ConfigError:
        return ConfigError(reason, self._file, item.line, item.col)

    def _node(self, value: Any, item: Item) -> Node:
        return Node(value, self._file, item.line, item.col)

    def _process(self, item: Item) -> None:
        kind = item.kind
        if kind is ItemKind.ERROR:
            raise self._error(item.value, item)
        if kind is ItemKind.KEY:
            self._keys.append(_Key(item.value, item.line, item.col))
        elif kind is ItemKind.MAP_START or kind is ItemKind.ARRAY_START:
            self._contexts.append({} if kind is ItemKind.MAP_START else [])
        elif kind is ItemKind.MAP_END or kind is ItemKind.ARRAY_END:
            self._set_value(self._node(self._contexts.pop(), item))
        elif kind is ItemKind.STRING:
            self._set_value(self._node(item.value, item))
        elif kind is ItemKind.BOOL:
            self._set_value(self._node(item.value.lower() in ("true", "yes", "on"), item))
        elif kind is ItemKind.INTEGER:
            number = self._integer(item)
            # nats-server silently drops an integer with an unknown suffix such as `1kbb`.
            if number is not None:
                self._set_value(self._node(number, item))
        elif kind is ItemKind.FLOAT:
            self._set_value(self._node(self._float(item), item))
        elif kind is ItemKind.DATETIME:
            self._set_value(self._node(self._datetime(item), item))
        elif kind is ItemKind.VARIABLE:
            self._set_value(self._variable(item))
        elif kind is ItemKind.INCLUDE:
            self._include(item)
        # Comments carry no data.

    def _set_value(self, node: Node) -> None:
        context = self._contexts[-1]
        if isinstance(context, list):
            context.append(node)
            return
        if not self._keys:
            raise ConfigError("value without a key", self._file, node.line, node.col)
        key = self._keys.pop()
        # Report a map entry at its key: that is where a reader looks first.
        node.line, node.col = key.line, key.col
        context[key.name] = node

    def _integer(self, item: Item) -> int | None:
        text = item.value
        digits = _LEADING_INT.match(text)
        assert digits is not None
        try:
            number = int(digits.group())
        except ValueError:
            raise self._error(f"expected integer, but got '{text}'", item) from None
        if not _INT64_MIN <= number <= _INT64_MAX:
            raise self._error(f"integer '{text}' is out of the range", item)
        factor = _SIZE_SUFFIXES.get(text[digits.end() :].strip().lower())
        if factor is None:
            return None
        # Go multiplies in int64 and wraps on overflow; keep the same number.
        return (number * factor - _INT64_MIN) % (1 << 64) + _INT64_MIN

    def _float(self, item: Item) -> float:
        try:
            number = float(item.value)
        except ValueError:
            raise self._error(f"expected float, but got '{item.value}'", item) from None
        if math.isinf(number):
            raise self._error(f"float '{item.value}' is out of the range", item)
        return number

    def _datetime(self, item: Item) -> datetime:
        m = _DATETIME.match(item.value)
        try:
            if m is None:
                raise ValueError(item.value)
            year, month, day, hour, minute, second = (int(part) for part in m.groups())
            return datetime(year, month, day, hour, minute, second, tzinfo=UTC)
        except ValueError:
            raise self._error(
                f"expected Zulu formatted DateTime, but got '{item.value}'", item
            ) from None

    def _variable(self, item: Item) -> Node:
        name = item.value
        if name.startswith(_BCRYPT_PREFIX):
            return self._node("$" + name, item)
        for context in reversed(self._contexts):
            if isinstance(context, dict) and name in context:
                found = context[name]
                found.used_variable = True
                return self._node(found.value, item)
        if name in self._env_refs:
            raise self._error(
                f"variable reference for '{name}' on line {item.line} could not be parsed: "
                f"variable reference cycle for '{name}'",
                item,
            )
        env_value = os.environ.get(name)
        if env_value is None:
            raise self._error(
                f"variable reference for '{name}' on line {item.line} can not be found", item
            )
        self._env_refs.add(name)
        try:
            sub = _Parser(
                f"{_ENV_KEY}={env_value}".encode("utf-8", "surrogateescape"),
                f"${name}",
                self._base_dir,
                self._env_refs,
                self._includes,
            )
            parsed = sub.run()
        except ConfigError as e:
            raise self._error(
                f"variable reference for '{name}' on line {item.line} could not be parsed: "
                f"{e.reason}",
                item,
            ) from None
        finally:
            self._env_refs.discard(name)
        if _ENV_KEY not in parsed:
            raise self._error(
                f"variable reference for '{name}' on line {item.line} can not be found", item
            )
        # Positions inside the environment text mean nothing to the reader of this file.
        node = _restamp(parsed[_ENV_KEY], self._file, item.line, item.col)
        return node

    def _include(self, item: Item) -> None:
        path = go_join(self._base_dir, item.value)
        try:
            included = _parse_path(path, self._env_refs, self._includes)
        except ConfigError as e:
            raise self._error(f"error parsing include file '{item.value}', {e}", item) from None
        for name, node in included.items():
            self._keys.append(_Key(name, node.line, node.col))
            self._set_value(node)


def _restamp(node: Node, file: str, line: int, col: int) -> Node:
    node.file, node.line, node.col = file, line, col
    if isinstance(node.value, dict):
        for child in node.value.values():
            _restamp(child, file, line, col)
    elif isinstance(node.value, list):
        for child in node.value:
            _restamp(child, file, line, col)
    return node


def go_join(directory: str, name: str) -> str:
    """Go's filepath.Join on POSIX: an absolute `name` is still joined under `directory`.

    nats-server resolves includes this way, so `include /etc/x.conf` in `/srv/nats.conf` means
    `/srv/etc/x.conf`; we keep that so a file is read the same by both servers.
    """
    joined = "/".join(part for part in (directory, name) if part)
    if not joined:
        return ""
    cleaned = posixpath.normpath(joined)
    # normpath keeps a leading '//' (POSIX allows it to mean something); Go's Clean does not.
    return "/" + cleaned.lstrip("/") if cleaned.startswith("//") else cleaned


def _read(path: str) -> bytes:
    try:
        with open(path, "rb") as f:
            return f.read()
    except IsADirectoryError:
        raise ConfigError(f"read {path}: is a directory") from None
    except OSError as e:
        reason = (e.strerror or str(e)).lower()
        raise ConfigError(f"open {path}: {reason}") from None


def _parse_path(path: str, env_refs: set[str], includes: tuple[str, ...]) -> dict[str, Node]:
    real = os.path.realpath(path)
    if real in includes:
        chain = " -> ".join((*includes[includes.index(real) :], real))
        raise ConfigError(f"include cycle: {chain}")
    data = _read(path)
    base_dir = posixpath.dirname(path) or "."
    return _Parser(data, path, base_dir, env_refs, (*includes, real)).run()


def _guard_depth(run: Any) -> Any:
    try:
        return run()
    except RecursionError:
        raise ConfigError("configuration is nested too deeply") from None


def _encode(text: str) -> bytes:
    try:
        return text.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:
        return text.encode("utf-8", "surrogatepass")


def parse_nodes(text: str | bytes, filename: str | None = None) -> dict[str, Node]:
    """Parse conf text into `Node`s (values with positions). Includes resolve from `filename`'s
    directory, or from the current directory without one."""
    data = text if isinstance(text, bytes) else _encode(text)
    shown = "<string>" if filename is None else filename
    base_dir = "." if filename is None else posixpath.dirname(filename) or "."
    includes = () if filename is None else (os.path.realpath(filename),)
    result: dict[str, Node] = _guard_depth(
        lambda: _Parser(data, shown, base_dir, set(), includes).run()
    )
    return result


def parse_file_nodes(path: str | os.PathLike[str]) -> dict[str, Node]:
    """Read and parse a configuration file into `Node`s."""
    result: dict[str, Node] = _guard_depth(lambda: _parse_path(os.fspath(path), set(), ()))
    return result


def parse(text: str | bytes, filename: str | None = None) -> dict[str, Any]:
    """Parse conf text into plain Python values."""
    nodes = parse_nodes(text, filename)
    result: dict[str, Any] = _guard_depth(lambda: to_plain(nodes))
    return result


def parse_file(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Read and parse a configuration file into plain Python values."""
    nodes = parse_file_nodes(path)
    result: dict[str, Any] = _guard_depth(lambda: to_plain(nodes))
    return result


# -- digest -------------------------------------------------------------------------------------


def config_digest(source: Mapping[str, Any] | str | os.PathLike[str]) -> str:
    """`sha256:<hex>` of a configuration, as nats-server prints it for `-t` and reports it as
    `config_digest` in /varz. `source` is a parsed map, or the path of a file to parse.

    nats-server hashes Go's JSON encoding of the parsed map (a Go map: sorted keys; a trailing
    new line), so comments and layout do not change the digest; values do."""
    parsed = source if isinstance(source, Mapping) else parse_file(source)
    encoded = go_json(_sorted_keys(to_plain(dict(parsed)))) + b"\n"
    return "sha256:" + hashlib.sha256(encoded).hexdigest()


def _sorted_keys(value: Any) -> Any:
    if isinstance(value, dict):
        return {key: _sorted_keys(value[key]) for key in sorted(value)}
    if isinstance(value, list):
        return [_sorted_keys(element) for element in value]
    return value
