"""Listening sockets, opened as nats-server opens them: one helper for every listener.

Corresponds to the `natsListen` / `net.Listen("tcp", host:port)` calls of nats-server: the
client port (`server.go`, AcceptLoop), monitoring (`monitor.go`, StartMonitoring), WebSocket
(`websocket.go`) and, to come, routes, leaf nodes, gateways and MQTT. What Go does, this does:

- A wildcard host (`0.0.0.0`, the default, or `::`) is one dual-stack socket on `[::]` that
  takes IPv4 and IPv6 clients alike (Go's "tcp" listener on a machine with IPv6); IPv4 clients
  then show as `::ffff:a.b.c.d`, which `peer_address` turns back into `a.b.c.d` as Go does. A
  host name is resolved and its first IPv4 address used (else its first address).
- A listener that cannot be opened raises `ListenError`, whose text is the line nats-server
  logs at [FTL] before it exits with status 1. Each listener words it its own way around Go's
  error (`listen tcp 0.0.0.0:4222: bind: address already in use`): the `fatal` argument.
"""

from __future__ import annotations

import asyncio
import os
import socket
from collections.abc import Callable
from typing import Any

# Hosts that mean "every interface".
WILDCARD_HOSTS = frozenset({"0.0.0.0", "::", ""})
_RESOLV_CONF = "/etc/resolv.conf"


class ListenError(Exception):
    """A listener could not be opened. `str(error)` is nats-server's [FTL] line for it, e.g.
    `Error listening on port: 0.0.0.0:4222, "listen tcp 0.0.0.0:4222: bind: address already
    in use"`."""


class GoListenError(OSError):
    """Go's `net.Listen` error text, before a listener words it (`listen tcp ...`)."""


def join_host_port(host: str, port: int) -> str:
    """Go's net.JoinHostPort: an IPv6 address goes in brackets."""
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def go_quote(text: str) -> str:
    """Go's %q of an error text (ASCII in practice)."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def unmap_ipv4(host: str) -> str:
    """`::ffff:127.0.0.1` (an IPv4 client of a dual-stack socket) as Go writes it: `127.0.0.1`."""
    if host.startswith("::ffff:") and "." in host:
        return host[7:]
    return host


def peer_address(transport: asyncio.BaseTransport) -> tuple[str, int] | None:
    """The client's address as nats-server reports it (client_ip, /connz, log prefixes)."""
    peer = transport.get_extra_info("peername")
    if isinstance(peer, tuple) and len(peer) >= 2:
        return unmap_ipv4(str(peer[0])), int(peer[1])
    return None


def listen_socket(host: str, port: int, backlog: int = 100) -> socket.socket:
    """A bound, listening, non-blocking socket for `host`:`port` (0: the kernel picks), or
    `GoListenError` with Go's text for why not."""
    address = join_host_port(host, port)
    if "[" in host or "]" in host:
        raise GoListenError(f"listen tcp: address {address}: missing port in address")
    if not 0 <= port <= 65535:
        raise GoListenError(f"listen tcp: address {port}: invalid port")
    family, sockaddr, dual_stack = _resolve(host, port)
    try:
        sock = socket.socket(family, socket.SOCK_STREAM)
    except OSError as e:
        raise GoListenError(f"listen tcp {address}: socket: {_errno_text(e)}") from e
    try:
        # Go sets SO_REUSEADDR on every listener: a restart need not wait out TIME_WAIT.
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if dual_stack:
            sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
        sock.bind(sockaddr)
        sock.listen(backlog)
        sock.setblocking(False)
    except OSError as e:
        sock.close()
        raise GoListenError(f"listen tcp {address}: bind: {_errno_text(e)}") from e
    return sock


async def listen(
    loop: asyncio.AbstractEventLoop,
    factory: Callable[[], asyncio.BaseProtocol],
    host: str,
    port: int,
    fatal: Callable[[str], str],
    *,
    backlog: int = 100,
    **server_kwargs: Any,
) -> asyncio.Server:
    """An asyncio server for `factory` on `host`:`port`; `ListenError(fatal(go_error))` when
    it cannot listen. `server_kwargs` go to `loop.create_server` (ssl, ...)."""
    sock = bind(host, port, fatal, backlog)
    try:
        return await loop.create_server(factory, sock=sock, backlog=backlog, **server_kwargs)
    except BaseException:
        sock.close()
        raise


def bind(host: str, port: int, fatal: Callable[[str], str], backlog: int = 100) -> socket.socket:
    """`listen_socket`, its error worded by the listener: `ListenError(fatal(go_error))`."""
    try:
        return listen_socket(host, port, backlog)
    except GoListenError as e:
        raise ListenError(fatal(str(e))) from None


def bound_port(server: asyncio.AbstractServer, default: int = 0) -> int:
    """The port a server listens on (the kernel's pick for port 0)."""
    sockets = getattr(server, "sockets", None)
    return int(sockets[0].getsockname()[1]) if sockets else default


# -- Go's address rules -----------------------------------------------------------------------


def _resolve(host: str, port: int) -> tuple[int, tuple[Any, ...], bool]:
    """(family, address to bind, dual-stack?) for a host as Go's listener picks it."""
    if host in WILDCARD_HOSTS:
        if socket.has_ipv6 and _ipv6_available():
            return socket.AF_INET6, ("::", port), True
        return socket.AF_INET, ("0.0.0.0", port), False
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as e:
        raise GoListenError(f"listen tcp: {_lookup_error(host)}") from e
    for family, _, _, _, sockaddr in infos:
        if family == socket.AF_INET:
            return family, sockaddr, False
    family, _, _, _, sockaddr = infos[0]
    return family, sockaddr, False


def _ipv6_available() -> bool:
    try:
        with socket.socket(socket.AF_INET6, socket.SOCK_STREAM):
            return True
    except OSError:
        return False


def _errno_text(e: OSError) -> str:
    """Go's text for an errno: the C library's, starting in lower case."""
    text = os.strerror(e.errno) if e.errno else str(e)
    return text[:1].lower() + text[1:]


def _lookup_error(host: str) -> str:
    """Go's resolver error for a name it cannot find. A name that is no domain name at all is
    refused without asking a name server; otherwise the error names the server asked."""
    if not _is_domain_name(host):
        return f"lookup {host}: no such host"
    return f"lookup {host} on {_first_nameserver()}: no such host"


def _is_domain_name(name: str) -> bool:
    """Go's isDomainName: RFC 1035 labels (letters, digits, `-`, `_`), and not all digits."""
    if not name or len(name) > 254 or (len(name) == 254 and not name.endswith(".")):
        return False
    non_numeric = False
    previous = "."
    label_length = 0
    for ch in name:
        if ch.isascii() and (ch.isalpha() or ch == "_"):
            non_numeric = True
            label_length += 1
        elif ch.isascii() and ch.isdigit():
            label_length += 1
        elif ch == "-":
            if previous == ".":
                return False
            label_length += 1
            non_numeric = True
        elif ch == ".":
            if previous in ".-" or label_length > 63 or label_length == 0:
                return False
            label_length = 0
        else:
            return False
        previous = ch
    return previous != "-" and label_length <= 63 and non_numeric


def _first_nameserver() -> str:
    try:
        with open(_RESOLV_CONF) as f:
            for line in f:
                fields = line.split()
                if len(fields) >= 2 and fields[0] == "nameserver":
                    return join_host_port(fields[1], 53)
    except OSError:
        pass
    return "127.0.0.1:53"
