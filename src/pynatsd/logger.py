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
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pynatsd.options import Options

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


class TimestampRotatingFileHandler(logging.handlers.RotatingFileHandler):
    """Size-limited log file rotated as nats-server does: the full file is renamed with a
    `.YYYY.MM.DD.HH.MM.SS.micros` suffix, and with `max_num` set only that many are kept."""

    def __init__(self, filename: str, max_bytes: int, max_num: int) -> None:
        super().__init__(filename, maxBytes=max_bytes, backupCount=0)
        self.max_num = max_num

    def doRollover(self) -> None:
        if self.stream:
            self.stream.close()
            self.stream = None
        now = time.time()
        stamp = time.strftime("%Y.%m.%d.%H.%M.%S", time.localtime(now))
        micros = int((now - int(now)) * 1_000_000)
        os.replace(self.baseFilename, f"{self.baseFilename}.{stamp}.{micros:06d}")
        if self.max_num > 0:
            directory, base = os.path.split(self.baseFilename)
            rotated = sorted(
                name for name in os.listdir(directory or ".") if name.startswith(base + ".")
            )
            for name in rotated[: max(len(rotated) - self.max_num, 0)]:
                os.unlink(os.path.join(directory, name))
        self.stream = self._open()


def _syslog_handler(remote: str) -> logging.Handler:
    """Local syslog, or `udp://host:port`, `tcp://host:port`, `syslog://host:port`."""
    import socket

    if not remote:
        address: str | tuple[str, int] = (
            "/dev/log"
            if os.path.exists("/dev/log")
            else (
                "localhost",
                514,
            )
        )
        return logging.handlers.SysLogHandler(address=address)
    scheme, _, rest = remote.partition("://")
    host, _, port = rest.rpartition(":")
    kind = socket.SOCK_STREAM if scheme == "tcp" else socket.SOCK_DGRAM
    return logging.handlers.SysLogHandler(address=(host, int(port or 514)), socktype=kind)


def configure(
    debug: bool = False,
    trace: bool = False,
    logtime: bool = True,
    utc: bool = False,
    log_file: str = "",
    size_limit: int = 0,
    max_num: int = 0,
    syslog: bool = False,
    remote_syslog: str = "",
) -> logging.Handler:
    """Install one handler on the `pynatsd` logger, replacing any earlier one."""
    for h in list(log.handlers):
        log.removeHandler(h)
        h.close()
    handler: logging.Handler
    if syslog or remote_syslog:
        handler = _syslog_handler(remote_syslog)
        # syslog stamps its own time; the level tag and message are what it needs from us.
        logtime = False
    elif log_file:
        if size_limit > 0:
            handler = TimestampRotatingFileHandler(log_file, size_limit, max_num)
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


def configure_from_options(opts: Options) -> logging.Handler:
    """Logging as the options say: at start, on SIGUSR1 (reopen the log file) and on a reload
    that changes a logging option (nats-server's `ConfigureLogger`)."""
    return configure(
        debug=opts.debug,
        trace=opts.trace,
        logtime=opts.logtime,
        utc=opts.logtime_utc,
        log_file=opts.log_file,
        size_limit=opts.log_size_limit,
        max_num=opts.log_max_num,
        syslog=opts.syslog,
        remote_syslog=opts.remote_syslog,
    )
