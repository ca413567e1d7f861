"""The nats-server configuration file format for pynatsd.

`parse`/`parse_file` turn conf text into Python values (`lexer` and `parser`, after nats-server's
`conf/lex.go` and `conf/parse.go`); `load_options`/`load_config` turn a file into `Options`
(`loader`, after `server/opts.go`, with one module per section of the file: `listen`,
`authorization`, `accounts`, `tls`, `jetstream`, ...). See docs/configuration.md.
"""

from pynatsd.config.loader import (
    ConfigErrors,
    LoadedConfig,
    apply_config,
    check_config,
    load_config,
    load_options,
    startup_errors,
)
from pynatsd.config.parser import (
    ConfigError,
    Node,
    config_digest,
    parse,
    parse_file,
    parse_file_nodes,
    parse_nodes,
)

__all__ = [
    "ConfigError",
    "ConfigErrors",
    "LoadedConfig",
    "Node",
    "apply_config",
    "check_config",
    "config_digest",
    "load_config",
    "load_options",
    "parse",
    "parse_file",
    "parse_file_nodes",
    "parse_nodes",
    "startup_errors",
]
