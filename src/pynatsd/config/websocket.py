"""The `websocket` block: the WebSocket listener, as nats-server's `parseWebsocket`
(server/opts.go) reads it. pynatsd reads `port`, `host`/`listen`, `no_tls`, `tls {}` (the
certificate files), `compression`, `same_origin` and `allowed_origins`; the rest is accepted and
logged as not supported.
"""

from __future__ import annotations

from pynatsd.config.parser import Node
from pynatsd.config.registry import Loader, config_key, conversion, string_or_list, want_map
from pynatsd.config.values import go_atoi, split_host_port

# Lower-cased field of the block's `tls` map -> the websocket_tls_* option it sets.
_TLS_FILES = {"cert_file": "cert", "key_file": "key", "ca_file": "ca_cert"}


@config_key("websocket", "ws")
def _apply_websocket(loader: Loader, name: str, node: Node) -> None:
    opts = loader.opts
    for field_name, entry in want_map(loader, node).items():
        lowered = field_name.lower()
        value = entry.value
        if lowered == "port":
            if not isinstance(value, int) or isinstance(value, bool):
                raise loader.abort(entry, conversion(entry, "int64"))
            opts.websocket_port = value
        elif lowered in ("host", "net"):
            opts.websocket_host = str(value)
        elif lowered == "listen":
            host, port = split_host_port(str(value))
            opts.websocket_host = host or opts.websocket_host
            if port:
                opts.websocket_port = go_atoi(port)
        elif lowered in ("no_tls", "compression", "same_origin"):
            if not isinstance(value, bool):
                raise loader.abort(entry, conversion(entry, "bool"))
            setattr(opts, f"websocket_{lowered}", value)
        elif lowered == "allowed_origins":
            opts.websocket_allowed_origins = string_or_list(loader, entry, "allowed_origins")
        elif lowered == "tls":
            for tls_name, tls_entry in want_map(loader, entry).items():
                option = _TLS_FILES.get(tls_name.lower())
                if option is not None:
                    setattr(opts, f"websocket_tls_{option}", str(tls_entry.value))
        else:
            loader.ignore(f"websocket.{field_name}", entry, "WebSocket")
