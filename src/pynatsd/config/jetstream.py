"""The `jetstream` block and the top-level `store_dir`, as nats-server's `parseJetStream`
(server/opts.go) reads them. An account's own `jetstream` limits are read in `accounts`.
"""

from __future__ import annotations

from pynatsd.config.parser import Node, to_plain
from pynatsd.config.registry import Loader, config_key
from pynatsd.config.values import NANOS, go_type, storage_size
from pynatsd.options import JETSTREAM_SYNC_INTERVAL

# Keys nats-server tunes JetStream with that pynatsd accepts and ignores.
_JETSTREAM_IGNORED = frozenset(
    {
        "key",
        "ek",
        "encryption_key",
        "prev_key",
        "prev_ek",
        "prev_encryption_key",
        "cipher",
        "extension_hint",
        "limits",
        "tpm",
        "max_outstanding_catchup",
        "max_buffered_size",
        "max_buffered_msgs",
        "request_queue_limit",
        "info_queue_limit",
        "meta_compact",
        "meta_compact_size",
        "meta_compact_sync",
        "max_concurrent_io",
    }
)


@config_key("store_dir", "storedir")
def _apply_store_dir(loader: Loader, name: str, node: Node) -> None:
    if loader.opts.store_dir:
        raise loader.abort(node, "Duplicate 'store_dir' configuration")
    loader.opts.store_dir = loader.string(name, node)


@config_key("jetstream")
def _apply_jetstream(loader: Loader, name: str, node: Node) -> None:
    value = node.value
    opts = loader.opts
    if isinstance(value, bool):
        opts.jetstream = value
    elif isinstance(value, str):
        state = value.lower()
        if state not in ("enabled", "enable", "disabled", "disable"):
            raise loader.abort(
                node, f"Expected 'enabled' or 'disabled' for string value, got '{value}'"
            )
        opts.jetstream = state.startswith("enable")
    elif isinstance(value, dict):
        enable = True
        for key, entry in value.items():
            enable = _apply_jetstream_entry(loader, key, entry, enable)
        opts.jetstream = enable
    else:
        raise loader.abort(
            node, f"Expected map, bool or string to define JetStream, got {go_type(value)}"
        )


def _apply_jetstream_entry(loader: Loader, key: str, node: Node, enable: bool) -> bool:
    opts = loader.opts
    lowered = key.lower()
    if lowered == "strict":
        if not isinstance(node.value, bool):
            raise loader.abort(
                node, f"Expected 'true' or 'false' for bool value, got '{to_plain(node.value)}'"
            )
        opts.jetstream_strict = node.value
    elif lowered in ("store", "store_dir", "storedir"):
        if opts.store_dir:
            raise loader.abort(node, "Duplicate 'store_dir' configuration")
        opts.store_dir = loader.string(key, node)
    elif lowered in ("sync", "sync_interval"):
        if isinstance(node.value, str) and node.value.lower() == "always":
            opts.jetstream_sync_interval, opts.jetstream_sync_always = JETSTREAM_SYNC_INTERVAL, True
        else:
            nanos = loader.duration(key, node, allow_seconds=True)
            opts.jetstream_sync_interval = nanos / NANOS
    elif lowered in ("max_memory_store", "max_mem_store", "max_mem", "max_file_store", "max_file"):
        _apply_jetstream_max_storage(loader, lowered, node)
    elif lowered == "domain":
        opts.jetstream_domain = loader.string(key, node)
    elif lowered in ("enable", "enabled"):
        enable = loader.boolean(key, node)
    elif lowered == "unique_tag":
        opts.jetstream_unique_tag = loader.string(key, node).strip().lower()
    elif lowered == "limits" and isinstance(node.value, dict):
        _apply_jetstream_limits(loader, key, node)
    elif lowered in _JETSTREAM_IGNORED:
        loader.ignore(f"jetstream.{key}", node, "JetStream tuning")
    else:
        loader.unknown(key, node)
    return enable


def _apply_jetstream_max_storage(loader: Loader, lowered: str, node: Node) -> None:
    label = "max_file_store" if "file" in lowered else "max_mem_store"
    try:
        size = storage_size(node.value)
    except ValueError as e:
        raise loader.abort(node, f"{label} {e}") from None
    if label == "max_mem_store":
        loader.opts.jetstream_max_memory = size
    else:
        loader.opts.jetstream_max_store = size


def _apply_jetstream_limits(loader: Loader, key: str, node: Node) -> None:
    """`limits {}`: the batch publishing limits are read (parseJetStreamLimitsBatch); the
    other limits are accepted and ignored."""
    assert isinstance(node.value, dict)
    for name, entry in node.value.items():
        if name.lower() != "batch" or not isinstance(entry.value, dict):
            loader.ignore(f"jetstream.{key}.{name}", entry, "JetStream tuning")
            continue
        opts = loader.opts
        for bkey, bnode in entry.value.items():
            low = bkey.lower()
            if low == "max_inflight_per_stream":
                opts.jetstream_batch_inflight_per_stream = loader.integer(bkey, bnode)
            elif low == "max_inflight_total":
                opts.jetstream_batch_inflight_total = loader.integer(bkey, bnode)
            elif low == "max_msgs":
                opts.jetstream_batch_max_msgs = loader.integer(bkey, bnode)
            elif low == "timeout":
                opts.jetstream_batch_timeout = (
                    loader.duration(bkey, bnode, allow_seconds=False) / NANOS
                )
            else:
                loader.unknown(bkey, bnode)
