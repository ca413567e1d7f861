"""Parsed configuration -> `pynatsd.options.Options`, as nats-server's `server/opts.go` does it.

This is the entry point: it dispatches every top-level key of a file through the key table of
`registry`, which each section module fills in when it is imported (one module per section:
`listen`, `authorization`, `operator`, `accounts`, `mappings`, `tls`, `jetstream`, `websocket`,
`cluster`, `gateway`, `leafnodes`, `mqtt`). Shared value readers live in `values` and `registry`.

Top-level keys are matched case-insensitively, with the real server's names and aliases. Keys that
nats-server knows but pynatsd does not implement yet (gateway, ...)
are accepted and ignored with a logged warning, so existing files still load. Anything else
that is unknown, of the wrong type or out of range is an error that names `file:line:col`.

Like nats-server, all errors are collected before failing, and some problems are only *warnings*
(a bare number where a duration is expected, an empty file, a long auth timeout): the server starts
with them, but `-t` reports them and fails. `load_config` returns them; `check_config` fails on
them as `-t` does.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

# Importing a section module registers its keys; the names are what other code imports here.
from pynatsd.config import (
    accounts,
    authorization,
    cluster,
    gateway,
    jetstream,  # noqa: F401
    leafnodes,
    listen,
    mappings,  # noqa: F401
    mqtt,
    operator,
    websocket,  # noqa: F401
)
from pynatsd.config.parser import ConfigError, Node, config_digest, parse_file_nodes
from pynatsd.config.registry import HANDLERS, UNSUPPORTED, Abort, Loader
from pynatsd.config.tls import apply_tls_flags
from pynatsd.options import TLS_TIMEOUT, Options

__all__ = [
    "ConfigErrors",
    "LoadedConfig",
    "apply_config",
    "apply_tls_flags",
    "check_config",
    "load_config",
    "load_options",
    "startup_errors",
]


class ConfigErrors(ConfigError):
    """Every error (and warning) found while applying a configuration; `str()` lists them one a
    line, warnings first, as nats-server prints them."""

    def __init__(self, errors: list[ConfigError], warnings: list[str]) -> None:
        self.errors = errors
        self.warnings = warnings
        first = errors[0] if errors else None
        super().__init__(
            first.reason if first else (warnings[0] if warnings else ""),
            first.file if first else None,
            first.line if first else 0,
            first.col if first else 0,
        )

    def __str__(self) -> str:
        return "\n".join([*self.warnings, *(str(e) for e in self.errors)])


@dataclass(slots=True)
class LoadedConfig:
    """The outcome of reading a configuration file."""

    options: Options
    warnings: list[str] = field(default_factory=list)
    # Keys accepted but not acted on because pynatsd does not implement them yet.
    ignored: list[str] = field(default_factory=list)
    digest: str = ""


# -- dispatch --------------------------------------------------------------------------------


def _apply(loader: Loader, parsed: Mapping[str, Node], source: str) -> None:
    """processConfigFileLine for every top-level key, then setBaselineOptions."""
    if not parsed:
        loader.warnings.append(f"{source}: config has no values or is empty")
    for name, node in parsed.items():
        lowered = name.lower()
        handler = HANDLERS.get(lowered)
        try:
            if handler is not None:
                handler(loader, name, node)
            elif lowered in UNSUPPORTED:
                loader.ignore(name, node, UNSUPPORTED[lowered])
            else:
                loader.unknown(name, node)
        except Abort:
            continue
    _settle_baseline(loader.opts)


def _settle_baseline(opts: Options) -> None:
    """What nats-server settles after reading the whole file (setBaselineOptions)."""
    if opts.tls_timeout <= 0:
        opts.tls_timeout = TLS_TIMEOUT
    if opts.tls and not opts.auth_timeout_set:
        # With TLS the default auth timeout covers the handshake too.
        opts.auth_timeout = opts.tls_timeout + 1.0
    cluster.settle(opts)
    leafnodes.settle(opts)
    gateway.settle(opts)


# -- public API ------------------------------------------------------------------------------


def _as_nodes(value: Any, file: str) -> Any:
    """Wrap plain values (from `parse()`) into position-less `Node`s."""
    if isinstance(value, Node):
        return value
    if isinstance(value, dict):
        return Node({k: _as_nodes(v, file) for k, v in value.items()}, file, 0, 0)
    if isinstance(value, list):
        return Node([_as_nodes(v, file) for v in value], file, 0, 0)
    return Node(value, file, 0, 0)


def apply_config(opts: Options, parsed: Mapping[str, Any], source: str = "<config>") -> list[str]:
    """Apply a parsed configuration to `opts` (in place) and return its warnings.

    `parsed` comes from `parse_nodes`/`parse_file_nodes` (errors then carry positions) or from
    `parse`. Raises `ConfigErrors` listing every problem if any key is invalid.
    """
    loader = Loader(opts)
    _apply(loader, {k: _as_nodes(v, source) for k, v in parsed.items()}, source)
    if loader.errors:
        raise ConfigErrors(loader.errors, loader.warnings)
    return loader.warnings


def load_config(path: str | os.PathLike[str], opts: Options | None = None) -> LoadedConfig:
    """Read, parse and apply the configuration file at `path` on top of `opts` (or defaults)."""
    source = os.fspath(path)
    nodes = parse_file_nodes(source)
    options = opts if opts is not None else Options()
    loader = Loader(options)
    _apply(loader, nodes, source)
    if loader.errors:
        raise ConfigErrors(loader.errors, loader.warnings)
    options.config_file = source
    return LoadedConfig(options, loader.warnings, loader.ignored, config_digest(nodes))


def load_options(path: str | os.PathLike[str]) -> tuple[Options, list[str]]:
    """Options from the configuration file at `path`, and the file's warnings."""
    loaded = load_config(path)
    return loaded.options, loaded.warnings


def check_config(path: str | os.PathLike[str]) -> LoadedConfig:
    """What `nats-server -t` does: like `load_config`, but warnings are errors too."""
    loaded = load_config(path)
    if loaded.warnings:
        raise ConfigErrors([], loaded.warnings)
    return loaded


def startup_errors(opts: Options) -> list[str]:
    """Checks nats-server makes when it starts rather than when it reads the file (`-t` skips
    them): limits that contradict each other, operator mode that combines with what it does not
    allow, a `no_auth_user` that names nobody and a system account that does not exist."""
    return [
        *listen.startup_problems(opts),
        *operator.startup_problems(opts),
        *authorization.startup_problems(opts),
        *accounts.startup_problems(opts),
        *cluster.startup_problems(opts),
        *leafnodes.startup_problems(opts),
        *gateway.startup_problems(opts),
        *mqtt.startup_problems(opts),
    ]
