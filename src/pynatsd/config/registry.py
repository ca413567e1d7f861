"""The table of configuration keys, and the `Loader` every section reports through.

nats-server's `processConfigFileLine` (server/opts.go) is one long switch over the lower-cased
top-level key. Here that switch is a table: each section module registers its keys with
`@config_key` (or rows of `setters`), keys nats-server knows but pynatsd does not implement yet
are listed with `unsupported`, and `pynatsd.config.loader` dispatches every key of a file through
the table.

A handler reads its value through the `Loader`, which collects errors and warnings (nats-server
reports them all at once) and raises `Abort` to give up on the current key, as nats-server
recovers a panic per key.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from typing import Any, TypeVar

from pynatsd.config.parser import ConfigError, Node
from pynatsd.config.values import NANOS, go_type, shown
from pynatsd.gofmt import parse_go_duration
from pynatsd.options import Options

log = logging.getLogger("pynatsd.config")


class Abort(Exception):
    """Stop processing the current top-level key (nats-server recovers a panic per key)."""


class SkipKey(Exception):
    """An error was recorded for this key of a block; go on with the block's next key."""


Block = TypeVar("Block")


class Loader:
    """One configuration being applied to `opts`: what went wrong so far, and typed access to
    values that fails the way nats-server does."""

    def __init__(self, opts: Options) -> None:
        self.opts = opts
        self.errors: list[ConfigError] = []
        self.warnings: list[str] = []
        self.ignored: list[str] = []

    # -- reporting ---------------------------------------------------------------------------

    def error(self, node: Node, reason: str) -> None:
        self.errors.append(ConfigError(reason, node.file, node.line, node.col))

    def abort(self, node: Node, reason: str) -> Abort:
        self.error(node, reason)
        return Abort()

    def warn(self, node: Node, name: str, reason: str) -> None:
        self.warnings.append(f'{node.where}: invalid use of field "{name}": {reason}')

    def ignore(self, name: str, node: Node, what: str) -> None:
        self.ignored.append(name)
        log.warning("%s: %r is not supported by pynatsd yet (%s); ignored", node.where, name, what)

    def unknown(self, name: str, node: Node) -> None:
        if not node.used_variable:
            self.error(node, f'unknown field "{name}"')

    # -- typed access; a wrong type aborts the current key, like a failed Go type assertion --

    def _want(self, name: str, node: Node, kind: type | tuple[type, ...], what: str) -> Any:
        value = node.value
        if isinstance(value, kind) and not (isinstance(value, bool) and kind is int):
            return value
        raise self.abort(node, f'"{name}" must be {what}, got {go_type(value)}{shown(value)}')

    def string(self, name: str, node: Node) -> str:
        result: str = self._want(name, node, str, "a string")
        return result

    def integer(self, name: str, node: Node) -> int:
        result: int = self._want(name, node, int, "an integer")
        return result

    def boolean(self, name: str, node: Node) -> bool:
        result: bool = self._want(name, node, bool, "a boolean")
        return result

    def mapping(self, name: str, node: Node) -> dict[str, Node]:
        result: dict[str, Node] = self._want(name, node, dict, "a map")
        return result

    def array(self, name: str, node: Node) -> list[Node]:
        result: list[Node] = self._want(name, node, list, "an array")
        return result

    def duration(self, name: str, node: Node, *, allow_seconds: bool) -> int:
        """A duration string; with `allow_seconds`, a bare integer of seconds with a warning."""
        value = node.value
        if allow_seconds and isinstance(value, int) and not isinstance(value, bool):
            self.warn(node, name, f"{name} should be converted to a duration")
            return value * NANOS
        text = self.string(name, node)
        try:
            return parse_go_duration(text)
        except ValueError as e:
            raise self.abort(node, f"error parsing {name}: {e}") from None


# -- Go type assertions, for the sections whose messages are nats-server's panics ---------------


def conversion(node: Node, want: str) -> str:
    """The message of the panic a failed Go type assertion raises (nats-server reports it)."""
    return f"interface conversion: interface {{}} is {go_type(node.value)}, not {want}"


def want_str(loader: Loader, node: Node) -> str:
    if not isinstance(node.value, str):
        raise loader.abort(node, conversion(node, "string"))
    return node.value


def want_int(loader: Loader, node: Node) -> int:
    if isinstance(node.value, bool) or not isinstance(node.value, int):
        raise loader.abort(node, conversion(node, "int64"))
    return node.value


def want_bool(loader: Loader, node: Node) -> bool:
    if not isinstance(node.value, bool):
        raise loader.abort(node, conversion(node, "bool"))
    return node.value


def want_map(loader: Loader, node: Node) -> dict[str, Node]:
    if not isinstance(node.value, dict):
        raise loader.abort(node, conversion(node, "map[string]interface {}"))
    return node.value


def want_list(loader: Loader, node: Node) -> list[Node]:
    if not isinstance(node.value, list):
        raise loader.abort(node, conversion(node, "[]interface {}"))
    return node.value


def string_or_list(loader: Loader, node: Node, what: str) -> list[str]:
    """A string or an array of strings (operators, trusted keys, pinned accounts, origins)."""
    value = node.value
    if isinstance(value, str):
        return [value]
    if not isinstance(value, list):
        raise loader.abort(node, f"error parsing {what}: unsupported type {go_type(value)}")
    out = []
    for element in value:
        if not isinstance(element.value, str):
            loader.error(
                element,
                f"error parsing {what}: unsupported type in array {go_type(element.value)}",
            )
            continue
        out.append(element.value)
    return out


# -- the table -----------------------------------------------------------------------------------

Handler = Callable[[Loader, str, Node], None]

# Lower-cased top-level key -> its handler; every section module adds its rows on import.
HANDLERS: dict[str, Handler] = {}
# Lower-cased top-level key -> what pynatsd does not implement yet (named in the warning).
UNSUPPORTED: dict[str, str] = {}


def config_key(*names: str) -> Callable[[Handler], Handler]:
    """Register the decorated handler for the top-level keys `names` (lower case)."""

    def register(handler: Handler) -> Handler:
        for name in names:
            _claim(name)
            HANDLERS[name] = handler
        return handler

    return register


def unsupported(what: str, *names: str) -> None:
    """Accept the top-level keys `names` and ignore them with a warning naming `what`."""
    for name in names:
        _claim(name)
        UNSUPPORTED[name] = what


def setter(attribute: str, kind: str) -> Handler:
    """A handler that reads the value as `kind` (a `Loader` accessor) into `Options.attribute`."""

    def handler(loader: Loader, name: str, node: Node) -> None:
        value = getattr(loader, kind)(name, node)
        setattr(loader.opts, attribute, value)

    return handler


def setters(rows: Iterable[tuple[tuple[str, ...], str, str]]) -> None:
    """Register plain keys from rows of (key and its aliases, `Options` attribute, kind)."""
    for names, attribute, kind in rows:
        config_key(*names)(setter(attribute, kind))


def _claim(name: str) -> None:
    # Two sections claiming one key would make the outcome depend on import order.
    if name in HANDLERS or name in UNSUPPORTED:
        raise RuntimeError(f"configuration key {name!r} is registered twice")


def read_block(
    loader: Loader,
    fields: Mapping[str, Callable[[Loader, Block, str, Node], None]],
    block: Block,
    node: Node,
) -> None:
    """Read the keys of a map-valued block (`cluster {}`, `gateway {}`, `leafnodes {}`) into
    `block`, each through its reader in `fields` (keyed lower-case): an unknown key is an error,
    a reader's `SkipKey` goes on with the next key, and a failed type assertion (`Abort`) gives
    up on the rest of the block, as nats-server does."""
    for key, entry in node.value.items():
        read = fields.get(key.lower())
        if read is None:
            loader.unknown(key, entry)
            continue
        try:
            read(loader, block, key, entry)
        except SkipKey:
            continue
        except Abort:
            return
