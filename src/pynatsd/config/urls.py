"""Go's `net/url.Parse`, as far as route URLs need it: the parts of a URL and the reasons Go
refuses one (`missing protocol scheme`, `invalid port ":x" after host`, ...).

nats-server reads `cluster.routes`, `--routes` and `--cluster` with `url.Parse`, so a URL is
accepted or refused here exactly when Go would, and the `--cluster` errors quote Go's reasons.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from urllib.parse import unquote

from pynatsd.config.values import split_host_port

_SCHEME_FIRST = re.compile(r"[A-Za-z]")
_SCHEME_REST = re.compile(r"[A-Za-z0-9+.\-]")
# Characters a host may hold unescaped (Go's shouldEscape in encodeHost mode says no to these).
_HOST_SAFE = frozenset(
    "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.~!$&'()*+,;=:[]<>\"%"
)
_USERINFO_SAFE = frozenset(
    "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-._:~!$&'()*+,;=%@"
)


@dataclass(frozen=True, slots=True)
class GoURL:
    """A parsed URL: `host` is Go's `URL.Host` (hostname and optional port)."""

    scheme: str = ""
    username: str | None = None  # None: no userinfo at all
    password: str | None = None  # None: no password (Go's `Password()` reports it missing)
    host: str = ""
    path: str = ""

    @property
    def hostname(self) -> str:
        host = self.host
        if host.startswith("["):
            return host[1 : host.find("]")]
        return host.rsplit(":", 1)[0] if ":" in host else host

    @property
    def port(self) -> str:
        host = self.host
        colon = host.rfind(":")
        if colon < 0 or "]" in host[colon:]:
            return ""
        return host[colon + 1 :]


class URLError(ValueError):
    """Go's `*url.Error` for Parse: `parse "<url>": <reason>`."""

    def __init__(self, url: str, reason: str) -> None:
        super().__init__(f'parse "{url}": {reason}')
        self.reason = reason


def parse_url(text: str) -> GoURL:
    """Go's url.Parse (without the fragment, which route URLs never carry)."""
    if any(ord(ch) < 0x20 or ord(ch) == 0x7F for ch in text):
        raise URLError(text, "net/url: invalid control character in URL")
    rest = text.split("#", 1)[0]
    scheme, rest = _scheme(text, rest)
    rest = rest.split("?", 1)[0]
    if not rest.startswith("/") and scheme:
        return GoURL(scheme=scheme.lower(), path="")  # opaque: "nats:foo"
    if not scheme:
        segment = rest.split("/", 1)[0]
        if ":" in segment:
            raise URLError(text, "first path segment in URL cannot contain colon")
    username = password = None
    host = ""
    if rest.startswith("//"):
        authority, slash, path = rest[2:].partition("/")
        rest = slash + path
        at = authority.rfind("@")
        if at >= 0:
            userinfo, authority = authority[:at], authority[at + 1 :]
            if any(ch not in _USERINFO_SAFE for ch in userinfo if ord(ch) < 0x80):
                raise URLError(text, "net/url: invalid userinfo")
            user, colon, secret = userinfo.partition(":")
            username = _unescape(text, user)
            password = _unescape(text, secret) if colon else None
        host = _host(text, authority)
    _unescape(text, rest)
    return GoURL(scheme.lower(), username, password, host, rest)


def _scheme(text: str, rest: str) -> tuple[str, str]:
    for i, ch in enumerate(rest):
        if _SCHEME_FIRST.fullmatch(ch):
            continue
        if _SCHEME_REST.fullmatch(ch):
            if i == 0:
                return "", rest
            continue
        if ch == ":":
            if i == 0:
                raise URLError(text, "missing protocol scheme")
            return rest[:i], rest[i + 1 :]
        return "", rest
    return "", rest


def _host(text: str, host: str) -> str:
    if host.startswith("["):
        close = host.rfind("]")
        if close < 0:
            raise URLError(text, "missing ']' in host")
        port = host[close + 1 :]
        if port and (not port.startswith(":") or (port != ":" and not port[1:].isdigit())):
            raise URLError(text, f'invalid port "{port}" after host')
    else:
        colon = host.rfind(":")
        if colon >= 0:
            port = host[colon:]
            if port != ":" and not (port[1:].isascii() and port[1:].isdigit()):
                raise URLError(text, f'invalid port "{port}" after host')
    for ch in host:
        if ord(ch) < 0x80 and ch not in _HOST_SAFE:
            raise URLError(text, f'invalid character "{ch}" in host name')
    return _unescape(text, host)


def _unescape(text: str, part: str) -> str:
    """`part` with its %XX escapes decoded, refused as Go refuses a bad escape."""
    i = part.find("%")
    while i >= 0:
        escape = part[i : i + 3]
        if len(escape) < 3 or not all(c in "0123456789abcdefABCDEF" for c in escape[1:]):
            raise URLError(text, f'invalid URL escape "{escape}"')
        i = part.find("%", i + 3)
    return unquote(part)


def host_port_error(address: str) -> str | None:
    """Go's net.SplitHostPort error text for `address` (`address h: missing port in address`),
    None when it splits."""
    try:
        split_host_port(address)
    except ValueError as e:
        return f"address {address}: {e}" if address else str(e)
    return None
