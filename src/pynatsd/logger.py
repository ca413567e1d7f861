"""Logging in nats-server's line format: `[pid] 2026/11/22 01:23:16.123456 [INF] message`.

Levels map to the real server's tags: DEBUG -> DBG, INFO -> INF, WARNING -> WRN, ERROR -> ERR,
CRITICAL -> FTL, and TRACE (a level below DEBUG) -> TRC for protocol tracing.
"""

from __future__ import annotations

import logging
import logging.handlers
import os
import sys
import time

TRACE = 5
logging.addLevelName(TRACE, "TRACE")

_TAGS = {
    TRACE: "TRC",
    logging.DEBUG: "DBG",
    logging.INFO: "INF",
    logging.WARNING: "WRN",
    logging.ERROR: "ERR",
    logging.CRITICAL: "FTL",
}

log = logging.getLogger("pynatsd")


class NatsFormatter(logging.Formatter):
    def __init__(self, logtime: bool = True, utc: bool = False) -> None:
        super().__init__()
        self.logtime = logtime
        self.utc = utc
        self.pid = os.getpid()

    def format(self, record: logging.LogRecord) -> str:
        tag = _TAGS.get(record.levelno, "INF")
        msg = record.getMessage()
        if not self.logtime:
            return f"[{self.pid}] [{tag}] {msg}"
        t = record.created
        tm = time.gmtime(t) if self.utc else time.localtime(t)
        micros = int((t - int(t)) * 1_000_000)
        stamp = time.strftime("%Y/%m/%d %H:%M:%S", tm)
        return f"[{self.pid}] {stamp}.{micros:06d} [{tag}] {msg}"


def configure(
    debug: bool = False,
    trace: bool = False,
    logtime: bool = True,
    utc: bool = False,
    log_file: str = "",
    size_limit: int = 0,
    max_num: int = 0,
) -> logging.Handler:
    """Install one handler on the `pynatsd` logger, replacing any earlier one."""
    for h in list(log.handlers):
        log.removeHandler(h)
        h.close()
    handler: logging.Handler
    if log_file:
        if size_limit > 0:
            handler = logging.handlers.RotatingFileHandler(
                log_file, maxBytes=size_limit, backupCount=max(max_num, 1)
            )
        else:
            handler = logging.handlers.WatchedFileHandler(log_file)
    else:
        handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(NatsFormatter(logtime=logtime, utc=utc))
    log.addHandler(handler)
    log.propagate = False
    if trace:
        log.setLevel(TRACE)
    elif debug:
        log.setLevel(logging.DEBUG)
    else:
        log.setLevel(logging.INFO)
    return handler
