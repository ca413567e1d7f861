"""One dashboard update: the monitoring endpoints' data, in one JSON object.

No nats-server counterpart (the page is pynatsd's own); every number comes from the data
functions behind `/varz`, `/connz`, `/subsz`, `/accountz`, `/jsz`, `/routez`, `/leafz` and
`/gatewayz` (`monitor.go`), called as the HTTP endpoints call them, so the page and the JSON
endpoints never disagree. Counters are sent as they are: the page turns two updates into rates,
which costs the server nothing.
"""

from __future__ import annotations

import itertools
import resource
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from pynatsd.jetstream import jetstream_of
from pynatsd.monitor import endpoints

if TYPE_CHECKING:
    from pynatsd.server.server import Server

# An endpoint's handler as the HTTP table holds it: query in, (status, JSON data) out.
Handler = Callable[[dict[str, str]], tuple[int, Any]]

# Bounds that keep one update small whatever the server holds; the page says when it shows
# fewer than there are.
MAX_CONNECTIONS = 500
MAX_CLOSED = 25
MAX_ACCOUNTS = 50

# The /varz sections that are non-empty when a part is configured, and the endpoint that
# describes its connections: the page shows a section exactly when the update has its key.
# A closed connection's record keeps its subscriptions for /connz; the page lists none.
_CLOSED_LEFT_OUT = frozenset(("_subjects", "subscriptions_list_detail"))

_OPTIONAL_ENDPOINTS = (("cluster", "routez", "/routez"), ("leaf", "leafz", "/leafz"))
_GATEWAY = ("gateway", "gatewayz", "/gatewayz")


def snapshot(server: Server, handlers: Mapping[str, Handler]) -> dict[str, Any]:
    """Everything one page update shows. `handlers` maps an endpoint path (without the base
    path) to the function the monitoring port answers it with."""
    varz = endpoints.varz(server)
    usage = resource.getrusage(resource.RUSAGE_SELF)
    out: dict[str, Any] = {
        "time": time.time(),
        # Process CPU seconds: the page's CPU figure is the rate between two updates (/varz
        # `cpu` is the average since start).
        "cpu_seconds": usage.ru_utime + usage.ru_stime,
        "varz": varz,
        "connz": endpoints.connz(server, {"auth": "1", "limit": str(MAX_CONNECTIONS)}),
        "closed": _recent_closed(server),
        "subsz": endpoints.subsz(server, {}),
        "accounts": _accounts(server),
    }
    if jetstream_of(server) is not None:
        out["jsz"] = endpoints.jsz(server, {"consumers": "1"})[1]
    for section, key, path in (*_OPTIONAL_ENDPOINTS, _GATEWAY):
        handler = handlers.get(path)
        if varz.get(section) and handler is not None:
            out[key] = handler({})[1]
    if varz.get("mqtt"):
        out["mqtt"] = {
            "config": varz["mqtt"],
            "clients": [c for c in out["connz"]["connections"] if c.get("mqtt_client")],
        }
    return out


def _recent_closed(server: Server) -> list[dict[str, Any]]:
    """The newest closed connections, newest first, as `/connz?state=closed` lists them."""
    newest = itertools.islice(reversed(server.closed_clients), MAX_CLOSED)
    return [{k: v for k, v in record.items() if k not in _CLOSED_LEFT_OUT} for record in newest]


def _accounts(server: Server) -> list[dict[str, Any]]:
    names = endpoints.accountz(server, {})[1]["accounts"][:MAX_ACCOUNTS]
    rows = []
    for name in names:
        detail = endpoints.accountz(server, {"acc": name})[1]["account_detail"]
        rows.append(
            {
                "name": name,
                "connections": detail["client_connections"],
                "leafnodes": detail["leafnode_connections"],
                "subscriptions": detail["subscriptions"],
                "jetstream": detail["jetstream_enabled"],
            }
        )
    return rows
