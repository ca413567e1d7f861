"""A small HTTP/1.1 listener for the monitoring endpoints (GET only, JSON out).

nats-server's monitor port serves a handful of GET endpoints with no authentication; a full web
framework would cost start-up time (servers are restarted often in tests) for nothing we use.
"""

from __future__ import annotations

import asyncio
import json
import ssl
from collections.abc import Callable
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qsl, urlsplit

from pynatsd.gofmt import go_json_indent
from pynatsd.logger import log
from pynatsd.monitor import endpoints, gatewayz, leafz, routez
from pynatsd.monitor.dashboard.assets import EVENTS, PAGE, SECURITY_HEADERS, assets
from pynatsd.monitor.dashboard.feed import DashboardFeed
from pynatsd.monitor.dashboard.snapshot import snapshot
from pynatsd.monitor.endpoints import BadRequest
from pynatsd.monitor.https import HttpsListener
from pynatsd.server.listen import ListenError, bind, bound_port, join_host_port
from pynatsd.tls import server_context
from pynatsd.version import COMPAT_VERSION

if TYPE_CHECKING:
    from pynatsd.options import Options
    from pynatsd.server.client import Client
    from pynatsd.server.server import Server

_MAX_REQUEST = 64 * 1024
_REASONS = {
    200: "OK",
    400: "Bad Request",
    404: "Not Found",
    405: "Method Not Allowed",
    500: "Internal Server Error",
    503: "Service Unavailable",
}
_ROOT_PAGE = """<html lang="en">
<head><title>pynatsd monitoring</title></head>
<body>
<h1>pynatsd</h1>
<p>A NATS server in Python, wire-compatible with nats-server {version}.</p>
<ul>
{links}
</ul>
</body>
</html>
"""


# The JSON endpoints may be read from any origin, as nats-server allows; the dashboard's own
# responses are for its own page only.
_CORS = "Access-Control-Allow-Origin: *\r\n"
_EVENTS_WRITE_DEADLINE = 10.0  # seconds


def _https_context(opts: Options) -> ssl.SSLContext | None:
    """The monitoring port's TLS, when it is an HTTPS port (nats-server's `startMonitoring`):
    the client listener's certificate, never asking for a client certificate."""
    if opts.http_port and opts.https_port:
        raise ListenError(
            "Can't start monitoring: can't specify both HTTP "
            f"({opts.http_port}) and HTTPs ({opts.https_port}) ports"
        )
    if not opts.https_port:
        return None
    context = server_context(opts)
    if context is None:
        raise ListenError("Can't start monitoring: TLS cert and key required for HTTPS")
    context.verify_mode = ssl.CERT_NONE
    return context


def _path(target: str) -> str:
    return urlsplit(target).path.rstrip("/") or "/"


class MonitorServer:
    """The HTTP monitoring listener: a part of the server (`server.parts.ServerPart`)."""

    name = "monitor"

    def __init__(self, server: Server) -> None:
        self.server = server
        self._listener: asyncio.AbstractServer | HttpsListener | None = None
        base = server.options.http_base_path.rstrip("/")
        self.base = base
        routes: dict[str, Callable[[dict[str, str]], tuple[int, Any]]] = {
            "/varz": lambda q: (200, endpoints.varz(server)),
            "/connz": lambda q: (200, endpoints.connz(server, q)),
            "/subsz": lambda q: (200, endpoints.subsz(server, q)),
            "/subscriptionsz": lambda q: (200, endpoints.subsz(server, q)),
            "/healthz": lambda q: _healthz(server, q),
            "/jsz": lambda q: endpoints.jsz(server, q),
            "/accountz": lambda q: endpoints.accountz(server, q),
            "/routez": lambda q: (200, routez.routez(server, q)),
            "/gatewayz": lambda q: (200, gatewayz.gatewayz(server, q)),
            "/leafz": lambda q: (200, leafz.leafz(server, q)),
        }
        self.routes = {base + path: handler for path, handler in routes.items()}
        self.assets = assets(base)
        self.feed = DashboardFeed(lambda: snapshot(server, routes))

    async def start(self) -> None:
        server = self.server
        opts = server.options
        context = _https_context(opts)
        port = opts.https_port if context is not None else opts.http_port
        host = opts.http_host or opts.host
        sock = bind(
            host,
            0 if port == -1 else port,
            lambda err: f"Can't start monitoring: can't listen to the monitor port: {err}",
        )
        if context is None:
            self._listener = await asyncio.start_server(self._handle, sock=sock)
            server.http_port = bound_port(self._listener, port)
        else:
            self._listener = HttpsListener(sock, context, self._handle)
            self._listener.start()
            server.http_port = self._listener.port
        scheme = "https" if context is not None else "http"
        log.info("Starting %s monitor on %s", scheme, join_host_port(host, server.http_port))
        if server.closed_clients.maxlen:
            server.client_closed_hooks.append(self._remember_closed)

    def _remember_closed(self, client: Client) -> None:
        self.server.closed_clients.append(endpoints.closed_connection_info(self.server, client))

    async def stop(self) -> None:
        self.feed.close()
        if self._remember_closed in self.server.client_closed_hooks:
            self.server.client_closed_hooks.remove(self._remember_closed)
        if self._listener is not None:
            self._listener.close()
            self._listener = None

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                try:
                    head = await reader.readuntil(b"\r\n\r\n")
                except (asyncio.IncompleteReadError, asyncio.LimitOverrunError):
                    return
                if len(head) > _MAX_REQUEST:
                    return
                lines = head.decode("latin-1").split("\r\n")
                parts = lines[0].split(" ")
                if len(parts) != 3:
                    return
                method, target, _version = parts
                keep_alive = not any(
                    line.lower().startswith("connection:") and "close" in line.lower()
                    for line in lines[1:]
                )
                if method == "GET" and _path(target) == self.base + EVENTS:
                    await self._stream_events(writer)
                    return
                status, ctype, body = self._respond(method, target)
                reason = _REASONS.get(status, "OK")
                headers = (
                    f"HTTP/1.1 {status} {reason}\r\n"
                    f"Content-Type: {ctype}\r\n"
                    + (SECURITY_HEADERS if _path(target) in self.assets else _CORS)
                    + f"Content-Length: {len(body)}\r\n"
                    + ("" if keep_alive else "Connection: close\r\n")
                    + "\r\n"
                )
                writer.write(headers.encode() + (body if method != "HEAD" else b""))
                await writer.drain()
                if not keep_alive:
                    return
        except (ConnectionError, OSError):
            return
        finally:
            writer.close()

    async def _stream_events(self, writer: asyncio.StreamWriter) -> None:
        """The dashboard's event stream: headers, then an update a second until the page goes
        (a write fails) or the monitoring port stops."""
        writer.write(
            (
                "HTTP/1.1 200 OK\r\n"
                "Content-Type: text/event-stream\r\n"
                f"{SECURITY_HEADERS}"
                "Connection: close\r\n"
                "\r\n"
                "retry: 2000\n\n"
            ).encode()
        )
        queue = self.feed.subscribe()
        try:
            while (update := await queue.get()) is not None:
                writer.write(update)
                # A page that takes nothing for this long is gone: stop building for it.
                await asyncio.wait_for(writer.drain(), _EVENTS_WRITE_DEADLINE)
        except TimeoutError:
            return
        finally:
            self.feed.unsubscribe(queue)

    def _respond(self, method: str, target: str) -> tuple[int, str, bytes]:
        if method not in ("GET", "HEAD"):
            return 405, "text/plain; charset=utf-8", b"Method Not Allowed\n"
        url = urlsplit(target)
        path = _path(target)
        query = dict(parse_qsl(url.query, keep_blank_values=True))
        stats = self.server.http_req_stats
        handler = self.routes.get(path)
        if handler is None and path != self.base + "/metrics":
            asset = self.assets.get(path)
            if asset is not None:
                return 200, asset.content_type, asset.body
            if path in ("/", self.base or "/"):
                stats["/"] = stats.get("/", 0) + 1
                paths = [*self.routes, self.base + PAGE]
                links = "\n".join(f'<li><a href="{p}">{p}</a></li>' for p in paths)
                page = _ROOT_PAGE.format(version=COMPAT_VERSION, links=links)
                return 200, "text/html; charset=utf-8", page.encode()
            return 404, "text/plain; charset=utf-8", b"404 page not found\n"
        key = path[len(self.base) :] if self.base else path
        stats[key] = stats.get(key, 0) + 1
        if key == "/metrics":
            text = endpoints.metrics(self.server).encode()
            return 200, "text/plain; version=0.0.4; charset=utf-8", text
        assert handler is not None
        try:
            status, data = handler(query)
        except BadRequest as e:
            return 400, "text/plain; charset=utf-8", str(e).encode()
        except Exception:  # a monitoring bug must never take the server down
            log.exception("monitoring endpoint %s failed", path)
            return 500, "text/plain; charset=utf-8", b"internal error\n"
        return status, "application/json", go_json_indent(data)


def _healthz(server: Server, query: dict[str, str]) -> tuple[int, Any]:
    """/healthz over HTTP; a failing check is logged, as nats-server's HandleHealthz does."""
    status, data = endpoints.healthz(server, query)
    if data.get("error"):
        log.warning("Healthcheck failed: %s", json.dumps(data["error"]))
    elif data.get("errors"):
        log.warning("Healthcheck failed: %d errors", len(data["errors"]))
    return status, data
