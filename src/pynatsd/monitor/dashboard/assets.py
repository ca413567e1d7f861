"""The dashboard page's files, served from the package (no nats-server counterpart).

Everything the page needs ships in `static/`: it loads nothing from outside the machine, and
its Content-Security-Policy tells the browser so (only this origin, for scripts, styles and the
event stream).
"""

from __future__ import annotations

import html
from dataclasses import dataclass
from functools import cache
from importlib import resources

PAGE = "/dashboard"
EVENTS = "/dashboard/events"

_TYPES = {
    "html": "text/html; charset=utf-8",
    "js": "text/javascript; charset=utf-8",
    "css": "text/css; charset=utf-8",
    "svg": "image/svg+xml",
}
_FILES = ("dashboard.js", "dashboard.css", "favicon.svg")

# Sent with every dashboard response: same origin only, nothing inline, no framing.
SECURITY_HEADERS = (
    "Content-Security-Policy: default-src 'none'; script-src 'self'; style-src 'self'; "
    "connect-src 'self'; img-src 'self'; base-uri 'none'; form-action 'none'; "
    "frame-ancestors 'none'\r\n"
    "X-Content-Type-Options: nosniff\r\n"
    "Cache-Control: no-store\r\n"
)


@dataclass(frozen=True, slots=True)
class Asset:
    content_type: str
    body: bytes


@cache
def _read(name: str) -> str:
    return resources.files(__package__).joinpath("static", name).read_text(encoding="utf-8")


def assets(base: str) -> dict[str, Asset]:
    """The page and its files by path, under the monitoring port's base path."""
    page = _read("index.html").replace("__BASE__", html.escape(base, quote=True))
    table = {base + PAGE: Asset(_TYPES["html"], page.encode())}
    for name in _FILES:
        table[f"{base}{PAGE}/{name}"] = Asset(_TYPES[name.rsplit(".", 1)[1]], _read(name).encode())
    return table
