"""The JetStream JSON API on `$JS.API.>`: request subjects to handlers, replies in nats-server's
shapes and order of checks (`server/jetstream_api.go`).

Direct gets (`$JS.API.DIRECT.GET.<stream>[.<subject>]`) are subscribed by each stream that
allows them and pull requests (`$JS.API.CONSUMER.MSG.NEXT.<stream>.<consumer>`) by each
consumer, as in nats-server: a request for a stream or consumer that does not exist then finds
nobody and the requester gets "no responders" instead of waiting for a timeout.
"""

from __future__ import annotations

import base64
import copy
import json
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from pynatsd.jetstream import advisories, direct, errors, snapshot
from pynatsd.jetstream.config import (
    STREAM_IDENTITY_HEADER,
    api_level_unmet,
    ephemeral_name,
    has_path_separators,
    valid_name,
)
from pynatsd.jetstream.consumer_checks import (
    GROUP_NAME,
    check_consumer_config,
    check_consumer_update,
    check_workqueue,
    partition_unique,
    sourcing_consumer,
)
from pynatsd.jetstream.consumer_config import (
    ConsumerConfig,
    consumers_equal,
    decode_consumer_request,
    set_consumer_defaults,
    set_static_consumer_metadata,
)
from pynatsd.jetstream.errors import ApiError, js_error
from pynatsd.jetstream.gostruct import decode, decode_int, json_kind, unmarshal_error
from pynatsd.jetstream.stream import Stream
from pynatsd.jetstream.stream_checks import check_stream_config, check_stream_update
from pynatsd.jetstream.stream_config import (
    StreamConfig,
    decode_stream_request,
    set_static_stream_metadata,
    stream_configs_equal,
)
from pynatsd.jetstream.util import (
    API_TYPE_PREFIX,
    format_go_time,
    go_json,
    go_json_syntax_error,
    go_unmarshal_syntax_error,
    now_ns,
    parse_go_time,
    rfc3339_ns,
)
from pynatsd.logger import log
from pynatsd.protocol.events import Pub
from pynatsd.protocol.headers import header_value
from pynatsd.server.subscription import InternalSubscription
from pynatsd.subjects import is_valid_publish_subject, subjects_collide

if TYPE_CHECKING:
    from pynatsd.jetstream.consumer import Consumer
    from pynatsd.jetstream.manager import AccountJetStream
    from pynatsd.server.client import Client

_PREFIX = API_TYPE_PREFIX
_NAMES_LIMIT = 1024
_LIST_LIMIT = 256

# The API subjects this layer answers (every one but the per-stream direct gets and the
# per-consumer pull requests, which their owners subscribe).
API_SUBJECTS = (
    "$JS.API.*",
    "$JS.API.STREAM.>",
    "$JS.API.CONSUMER.*",
    "$JS.API.CONSUMER.CREATE.>",
    "$JS.API.CONSUMER.DURABLE.>",
    "$JS.API.CONSUMER.INFO.>",
    "$JS.API.CONSUMER.DELETE.>",
    "$JS.API.CONSUMER.NAMES.>",
    "$JS.API.CONSUMER.LIST.>",
    "$JS.API.CONSUMER.PAUSE.>",
    "$JS.API.CONSUMER.RESET.>",
    "$JS.API.CONSUMER.UNPIN.>",
    "$JS.API.CONSUMER.LEADER.>",
    "$JS.API.ACCOUNT.>",
    "$JS.API.META.>",
    "$JS.API.SERVER.>",
)

Handler = Callable[[list[str], bytes, str], dict[str, Any] | None]

# Tokens after the route each API subject takes (nats-server subscribes `...CREATE.*`, so a
# request with more or fewer tokens finds nobody and is ignored): (min, max), None = any.
_ARITY: dict[tuple[str, ...], tuple[int, int | None]] = {
    ("INFO",): (0, 0),
    ("STREAM", "NAMES"): (0, 0),
    ("STREAM", "LIST"): (0, 0),
    ("CONSUMER", "CREATE"): (1, None),
    ("CONSUMER", "DURABLE", "CREATE"): (2, 2),
    ("CONSUMER", "INFO"): (2, 2),
    ("CONSUMER", "DELETE"): (2, 2),
    ("CONSUMER", "PAUSE"): (2, 2),
    ("CONSUMER", "UNPIN"): (2, 2),
    ("CONSUMER", "NAMES"): (1, 1),
    ("CONSUMER", "LIST"): (1, 1),
    ("CONSUMER", "LEADER", "STEPDOWN"): (2, 2),
}

# Fields an error reply still carries because their Go types have no `omitempty`.
_ERROR_EXTRAS: dict[str, dict[str, Any]] = {
    "stream_info_response": {"total": 0, "offset": 0, "limit": 0},
    "stream_purge_response": {"purged": 0},
    "stream_names_response": {"total": 0, "offset": 0, "limit": 0, "streams": None},
    "stream_list_response": {"total": 0, "offset": 0, "limit": 0, "streams": []},
    "consumer_names_response": {"total": 0, "offset": 0, "limit": 0, "consumers": []},
    "consumer_list_response": {"total": 0, "offset": 0, "limit": 0, "consumers": []},
    "consumer_pause_response": {"paused": False, "pause_until": "0001-01-01T00:00:00Z"},
    "stream_restore_response": {"deliver_subject": ""},
}


def _decode_body(body: bytes, struct: str = "JSApiStreamNamesRequest") -> dict[str, Any]:
    """A request body as Go's decoder reads it into `server.<struct>`."""
    if not body.strip():
        return {}
    text = body.decode("utf-8", "replace")
    try:
        data = json.loads(text)
    except ValueError as e:
        raise errors.invalid_json(go_json_syntax_error(text, e)) from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise errors.invalid_json(
            f"json: cannot unmarshal {json_kind(data)} into Go value of type server.{struct}"
        )
    return data


def _paged_body(body: bytes, struct: str) -> dict[str, Any]:
    """Requests with optional parameters (names, lists, info, purge): nats-server reads the
    body only when it looks like a JSON object or array, and ignores anything else."""
    if body.lstrip(b" \t\r\n")[:1] not in (b"{", b"["):
        return {}
    return _decode_body(body, struct)


def _is_empty_request(body: bytes) -> bool:
    """nats-server's isEmptyRequest: nothing, or an empty JSON object."""
    if not body or body == b"{}":
        return True
    try:
        data = json.loads(body)
    except ValueError:
        return False
    return isinstance(data, dict) and not data


def _require_empty(body: bytes) -> None:
    if not _is_empty_request(body):
        raise js_error("NotEmptyRequest")


def _int_field(req: dict[str, Any], key: str, struct: str, go_type: str = "uint64") -> int:
    value = req.get(key)
    return 0 if value is None else decode_int(value, f"{struct}.{key}", go_type)


def _str_field(req: dict[str, Any], key: str, struct: str) -> str:
    value = req.get(key)
    if value is None:
        return ""
    if not isinstance(value, str):
        raise unmarshal_error(value, f"{struct}.{key}", "string")
    return value


def _bool_field(req: dict[str, Any], key: str, struct: str) -> bool:
    value = req.get(key)
    if value is None:
        return False
    if not isinstance(value, bool):
        raise unmarshal_error(value, f"{struct}.{key}", "bool")
    return value


def _check_fields(req: dict[str, Any], allowed: tuple[str, ...]) -> None:
    for key in req:
        if key not in allowed:
            raise errors.invalid_json(f'json: unknown field "{key}"')


def _cluster_only(rest: list[str], body: bytes, reply: str) -> dict[str, Any]:
    """A request only clustered JetStream answers (a leader stepdown): on one server it fails
    as nats-server's does (clustered JetStream takes it in cluster/clustered.py)."""
    raise js_error("ClusterRequired")


def names_matching(configs: dict[str, list[str]], subject: str) -> list[str]:
    """The stream names, sorted, whose subjects collide with `subject` ("" takes all): what a
    names or list request with a subject filter gets."""
    return sorted(
        name
        for name, subjects in configs.items()
        if not subject or any(subjects_collide(subject, x) for x in subjects)
    )


def purge_stream(stream: Stream, subject: str, seq: int, keep: int) -> dict[str, Any]:
    """The purge itself and its response."""
    purged = stream.purge(subject=subject, seq=seq, keep=keep)
    return {"success": True, "purged": purged}


def delete_message(stream: Stream, seq: int, erase: bool) -> dict[str, Any]:
    """The message delete itself and its response; ApiError when there is no such message."""
    if not stream.remove_msg(seq, erase=erase):
        if seq > stream.store.state().last_seq:
            raise errors.stream_msg_delete_failed("stream store EOF")
        raise errors.sequence_not_found(seq)
    return {"success": True}


class JetStreamApi:
    def __init__(self, ajs: AccountJetStream) -> None:
        self.ajs = ajs
        self.requester: Client | None = None  # who made the request being handled
        self.request_header = b""  # the header block of the request being handled
        self.current_reply = ""  # and its reply subject
        self.reply_header = b""  # a header block for its reply, set by the handler
        self.routes: dict[tuple[str, ...], tuple[str, Handler]] = {
            ("INFO",): ("account_info_response", self.account_info),
            ("STREAM", "CREATE"): ("stream_create_response", self.stream_create),
            ("STREAM", "UPDATE"): ("stream_update_response", self.stream_update),
            ("STREAM", "INFO"): ("stream_info_response", self.stream_info),
            ("STREAM", "DELETE"): ("stream_delete_response", self.stream_delete),
            ("STREAM", "PURGE"): ("stream_purge_response", self.stream_purge),
            ("STREAM", "NAMES"): ("stream_names_response", self.stream_names),
            ("STREAM", "LIST"): ("stream_list_response", self.stream_list),
            ("STREAM", "MSG", "GET"): ("stream_msg_get_response", self.stream_msg_get),
            ("STREAM", "MSG", "DELETE"): ("stream_msg_delete_response", self.stream_msg_delete),
            ("STREAM", "SNAPSHOT"): ("stream_snapshot_response", self.stream_snapshot),
            ("STREAM", "RESTORE"): ("stream_restore_response", self.stream_restore),
            ("CONSUMER", "CREATE"): ("consumer_create_response", self.consumer_create),
            ("CONSUMER", "DURABLE", "CREATE"): (
                "consumer_create_response",
                self.consumer_durable_create,
            ),
            ("CONSUMER", "INFO"): ("consumer_info_response", self.consumer_info),
            ("CONSUMER", "DELETE"): ("consumer_delete_response", self.consumer_delete),
            ("CONSUMER", "NAMES"): ("consumer_names_response", self.consumer_names),
            ("CONSUMER", "LIST"): ("consumer_list_response", self.consumer_list),
            ("CONSUMER", "PAUSE"): ("consumer_pause_response", self.consumer_pause),
            ("CONSUMER", "UNPIN"): ("consumer_unpin_response", self.consumer_unpin),
            ("STREAM", "LEADER", "STEPDOWN"): ("stream_leader_stepdown_response", _cluster_only),
            ("CONSUMER", "LEADER", "STEPDOWN"): (
                "consumer_leader_stepdown_response",
                _cluster_only,
            ),
        }

    # -- dispatch --------------------------------------------------------------------------------

    def on_request(self, sub: InternalSubscription, publisher: Client | None, ev: Pub) -> None:
        self._handle(ev, publisher, from_system=False)

    def handle_system_request(self, ev: Pub, publisher: Client | None) -> None:
        """A request another server forwarded through `$SYS` (cluster/system_api.py): the
        answer goes back there."""
        self._handle(ev, publisher, from_system=True)

    def _handle(self, ev: Pub, publisher: Client | None, from_system: bool) -> None:
        subject = ev.subject.decode("utf-8", "surrogateescape")
        reply = ev.reply.decode("utf-8", "surrogateescape")
        hs = ev.header_size
        body = ev.payload[hs:] if hs > 0 else ev.payload
        tokens = subject.split(".")[2 if subject.startswith("$JS.API.") else 3 :]
        if not tokens:
            return
        route = None
        rest: list[str] = []
        for n in (3, 2, 1):
            key = tuple(tokens[:n])
            if key in self.routes:
                route = self.routes[key]
                rest = tokens[n:]
                lo, hi = _ARITY.get(key, (1, 1))
                if len(rest) < lo or (hi is not None and len(rest) > hi):
                    return
                break
        if route is None:
            return  # nats-server ignores unknown API subjects
        if not reply:
            return
        rtype, handler = route
        cluster = self.ajs.js.clustered
        if cluster is not None and cluster.active:
            # Clustered: one server of the cluster answers each request (cluster/clustered.py).
            chosen = cluster.handler(self, key, rest, handler)
            if chosen is None:
                if not from_system:
                    cluster.forward(self.ajs, ev, publisher)
                return
            handler = chosen
        failed = False
        self.requester = publisher  # for the handlers whose advisories name the client
        self.request_header = ev.payload[:hs] if hs > 0 else b""
        self.current_reply = reply
        self.reply_header = b""
        try:
            if hs > 0 and api_level_unmet(ev.payload[:hs]):
                raise js_error("RequiredApiLevel")
            if not self.ajs.enabled:
                raise errors.not_enabled_for_account()
            result = handler(rest, body, reply)
        except errors.ResponseLater:
            result = None
        except ApiError as e:
            failed = True
            result = {"error": e.to_json(), **_ERROR_EXTRAS.get(rtype, {})}
        except Exception:  # a bug in one request must not take the server down
            log.exception("JetStream API %s failed", subject)
            failed = True
            result = {"error": errors.ApiError(500, 10000, "internal error").to_json()}
        # nats-server counts a request once it is handled (the INFO reply shows the earlier).
        self.ajs.api_total += 1
        if failed:
            self.ajs.api_errors += 1
        if result is None:
            return
        response = go_json({"type": _PREFIX + rtype, **result})
        header = b"" if failed else self.reply_header
        if from_system:
            server = self.ajs.server
            server.publish_internal(server.system_account, reply, "", header, response)
        else:
            self.ajs.reply(reply, response, header)
        advisories.api_audit(self.ajs, publisher, subject, body, response)

    # -- account ---------------------------------------------------------------------------------

    def account_info(self, rest: list[str], body: bytes, reply: str) -> dict[str, Any]:
        if rest:
            raise errors.bad_request()
        memory, storage, consumers = self.ajs.usage()
        out: dict[str, Any] = {
            "memory": memory,
            "storage": storage,
            "reserved_memory": self.ajs.reserved("memory"),
            "reserved_storage": self.ajs.reserved("file"),
            "streams": len(self.ajs.streams),
            "consumers": consumers,
            "limits": self.ajs.limits_json(),
        }
        if self.ajs.domain:
            out["domain"] = self.ajs.domain
        out["api"] = {
            "level": 5,
            "total": self.ajs.api_total,
            "errors": self.ajs.api_errors,
        }
        tiers = self.ajs.tiers_json()
        if tiers is not None:
            out["tiers"] = tiers
        return out

    # -- streams ---------------------------------------------------------------------------------

    def _stream(self, name: str) -> Stream:
        stream = self.ajs.streams.get(name)
        if stream is None:
            raise errors.stream_not_found()
        return stream

    def _stream_name(self, rest: list[str]) -> str:
        if len(rest) != 1:
            raise errors.bad_request()
        return rest[0]

    def decode_stream_config(self, rest: list[str], body: bytes) -> tuple[StreamConfig, bool]:
        name = self._stream_name(rest)
        raw = _decode_body(body, "StreamConfigRequest")
        config, pedantic = decode_stream_request(raw)
        set_static_stream_metadata(config)
        if name != config.name:
            raise errors.stream_mismatch()
        if has_path_separators(name):
            raise errors.stream_name_path_separators()
        return config, pedantic

    def stream_create(self, rest: list[str], body: bytes, reply: str) -> dict[str, Any]:
        config, pedantic = self.decode_stream_config(rest, body)
        if config.sealed:
            raise errors.stream_invalid_config("stream configuration for create can not be sealed")
        if config.mirror_direct and config.mirror is None:
            raise errors.stream_invalid_config("stream has no mirror but does have mirror direct")
        self.ajs.check_stream_limits(config)
        config = check_stream_config(config, pedantic, self.ajs.stream_configs())
        self.ajs.check_max_bytes(config)
        if config.num_replicas > 1:
            raise errors.replicas_not_supported()
        existing = self.ajs.streams.get(config.name)
        if existing is not None:
            if not stream_configs_equal(existing.config, config):
                raise errors.stream_name_exist()
            out = existing.info()
            out["ts"] = rfc3339_ns(now_ns())
            out["did_create"] = True  # nats-server says so for an identical repeat too
            return out
        stream = self.ajs.add_stream(config)
        out = stream.info()
        out["ts"] = rfc3339_ns(now_ns())
        out["did_create"] = True
        return out

    def stream_update(self, rest: list[str], body: bytes, reply: str) -> dict[str, Any]:
        config, pedantic = self.decode_stream_config(rest, body)
        stream = self._stream(config.name)
        config = check_stream_config(config, pedantic, self.ajs.stream_configs())
        self.ajs.check_max_bytes(config)
        check_stream_update(stream.config, config)
        self._check_consumer_limits_update(stream, config)
        self.ajs.update_stream(stream, config)
        out = self._with_domain(stream.info())
        out["ts"] = rfc3339_ns(now_ns())
        return out

    def _with_domain(self, info: dict[str, Any]) -> dict[str, Any]:
        """Go's StreamInfo.Domain, after `state`: the info, update and list replies carry it
        (the create reply does not)."""
        if not self.ajs.domain:
            return info
        out: dict[str, Any] = {}
        for key, value in info.items():
            out[key] = value
            if key == "state":
                out["domain"] = self.ajs.domain
        return out

    @staticmethod
    def _check_consumer_limits_update(stream: Stream, config: StreamConfig) -> None:
        old, new = stream.config.consumer_limits, config.consumer_limits
        threshold, pending = new.inactive_threshold, new.max_ack_pending
        if (threshold <= 0 or threshold == old.inactive_threshold) and (
            pending <= 0 or pending == old.max_ack_pending
        ):
            return
        bad = [
            c.name
            for c in stream.consumers.values()
            if (threshold > 0 and c.config.inactive_threshold > threshold)
            or (pending > 0 and c.config.max_ack_pending > pending)
        ]
        if bad:
            raise errors.stream_invalid_config(
                f"change to limits violates consumers: {', '.join(bad)}"
            )

    def stream_info(self, rest: list[str], body: bytes, reply: str) -> dict[str, Any]:
        name = self._stream_name(rest)
        self._stream(name)  # nats-server looks the stream up before reading the request
        req = _paged_body(body, "JSApiStreamInfoRequest")
        _check_fields(req, ("deleted_details", "subjects_filter", "offset"))
        subjects_filter = _str_field(req, "subjects_filter", "JSApiStreamInfoRequest")
        details = req.get("deleted_details")
        offset = _int_field(req, "offset", "JSApiStreamInfoRequest", "int")
        stream = self._stream(name)
        info = stream.info(subjects_filter=subjects_filter, deleted_details=bool(details))
        out: dict[str, Any] = {"total": 0, "offset": 0, "limit": 0}
        subjects = info["state"].get("subjects")
        if subjects:
            names = sorted(subjects)
            page = names[offset : offset + 100_000]
            info["state"]["subjects"] = {s: subjects[s] for s in page}
            out = {"total": len(names), "offset": offset, "limit": 100_000}
        for key, value in info.items():
            out[key] = value
            if key == "state":  # Go's StreamInfo order: config, created, state, domain, cluster
                if self.ajs.domain:
                    out["domain"] = self.ajs.domain
                out["cluster"] = {"leader": self.ajs.server.server_name}
        out["ts"] = rfc3339_ns(now_ns())
        return out

    def stream_snapshot(self, rest: list[str], body: bytes, reply: str) -> dict[str, Any]:
        """nats-server's jsStreamSnapshotRequest, in its order of checks."""
        name = self._stream_name(rest)
        if _is_empty_request(body):
            raise errors.bad_request()
        stream = self._stream(name)
        struct = "JSApiStreamSnapshotRequest"
        req = _decode_body(body, struct)
        _check_fields(req, ("deliver_subject", "no_consumers", "chunk_size", "window_size", "jsck"))
        deliver = _str_field(req, "deliver_subject", struct)
        chunk_size = _int_field(req, "chunk_size", struct, "int")
        window_size = _int_field(req, "window_size", struct, "int")
        no_consumers = _bool_field(req, "no_consumers", struct)
        _bool_field(req, "jsck", struct)
        if not is_valid_publish_subject(deliver):
            raise js_error("SnapshotDeliverSubjectInvalid")
        request = snapshot.SnapshotRequest(deliver, chunk_size, window_size, no_consumers)
        return snapshot.start_snapshot(stream, request, self.requester)

    def stream_restore(self, rest: list[str], body: bytes, reply: str) -> dict[str, Any]:
        """nats-server's jsStreamRestoreRequest, in its order of checks."""
        name = self._stream_name(rest)
        if _is_empty_request(body):
            raise errors.bad_request()
        req = _decode_body(body, "JSApiStreamRestoreRequest")
        _check_fields(req, ("config", "state"))
        raw = req.get("config") or {}
        if not isinstance(raw, dict):
            raise unmarshal_error(raw, "JSApiStreamRestoreRequest.config", "server.StreamConfig")
        config, _ = decode_stream_request(raw)
        if not config.name:
            config.name = name
        if config.name != name:
            raise errors.stream_mismatch()
        if has_path_separators(name):
            raise errors.stream_name_path_separators()
        set_static_stream_metadata(config)
        config = check_stream_config(config, False, self.ajs.stream_configs())
        self.ajs.check_stream_limits(config)
        if name in self.ajs.streams:
            raise js_error("StreamNameExistRestoreFailed")
        return snapshot.start_restore(self.ajs, config, self.requester)

    def stream_delete(self, rest: list[str], body: bytes, reply: str) -> dict[str, Any]:
        _require_empty(body)
        stream = self._stream(self._stream_name(rest))
        self.ajs.delete_stream(stream)
        return {"success": True}

    def stream_purge(self, rest: list[str], body: bytes, reply: str) -> dict[str, Any]:
        stream, subject, seq, keep = self.purge_request(rest, body)
        return purge_stream(stream, subject, seq, keep)

    def purge_request(self, rest: list[str], body: bytes) -> tuple[Stream, str, int, int]:
        """A purge request checked: (stream, filter, seq, keep). A clustered stream's leader
        proposes what it finds here and every replica runs `purge_stream`."""
        stream = self._stream(self._stream_name(rest))
        req = _paged_body(body, "JSApiStreamPurgeRequest")
        _check_fields(req, ("filter", "seq", "keep"))
        subject = _str_field(req, "filter", "JSApiStreamPurgeRequest")
        seq = _int_field(req, "seq", "JSApiStreamPurgeRequest")
        keep = _int_field(req, "keep", "JSApiStreamPurgeRequest")
        if stream.config.sealed:
            raise errors.stream_sealed()
        if stream.config.deny_purge:
            raise errors.stream_purge_failed("stream purge not permitted")
        if seq and keep:
            raise errors.bad_request()
        return stream, subject, seq, keep

    def _filtered_streams(self, req: dict[str, Any], struct: str) -> list[Stream]:
        subject = _str_field(req, "subject", struct)
        streams = self.ajs.streams
        configs = {name: stream.config.subjects for name, stream in streams.items()}
        return [streams[name] for name in names_matching(configs, subject)]

    def list_request(self, body: bytes, struct: str) -> tuple[int, str]:
        """A names or list request's (offset, subject filter), checked as nats-server does."""
        req = _paged_body(body, struct)
        _check_fields(req, ("offset", "subject"))
        offset = max(_int_field(req, "offset", struct, "int"), 0)
        return offset, _str_field(req, "subject", struct)

    def stream_names(self, rest: list[str], body: bytes, reply: str) -> dict[str, Any]:
        if rest:
            raise errors.bad_request()
        req = _paged_body(body, "JSApiStreamNamesRequest")
        _check_fields(req, ("offset", "subject"))
        offset = max(_int_field(req, "offset", "JSApiStreamNamesRequest", "int"), 0)
        streams = self._filtered_streams(req, "JSApiStreamNamesRequest")
        page = streams[offset : offset + _NAMES_LIMIT]
        return {
            "total": len(streams),
            "offset": offset,
            "limit": _NAMES_LIMIT,
            "streams": [s.name for s in page],
        }

    def stream_list(self, rest: list[str], body: bytes, reply: str) -> dict[str, Any]:
        if rest:
            raise errors.bad_request()
        req = _paged_body(body, "JSApiStreamListRequest")
        _check_fields(req, ("offset", "subject"))
        offset = max(_int_field(req, "offset", "JSApiStreamListRequest", "int"), 0)
        streams = self._filtered_streams(req, "JSApiStreamListRequest")
        page = streams[offset : offset + _LIST_LIMIT]
        now = rfc3339_ns(now_ns())
        items = []
        for s in page:
            info = self._with_domain(s.info(full_metadata=False))
            info["ts"] = now
            items.append(info)
        return {"total": len(streams), "offset": offset, "limit": _LIST_LIMIT, "streams": items}

    def stream_msg_get(self, rest: list[str], body: bytes, reply: str) -> dict[str, Any]:
        name = self._stream_name(rest)
        if _is_empty_request(body):
            raise errors.bad_request()
        req = _decode_body(body, "JSApiMsgGetRequest")
        self._check_get_request(req, direct=False)
        stream = self._stream(name)
        msg = self._lookup(stream, req)
        if msg is None:
            raise errors.no_message_found()
        message: dict[str, Any] = {"subject": msg.subject, "seq": msg.seq}
        if msg.header:
            message["hdrs"] = base64.b64encode(msg.header).decode()
        if msg.data:
            message["data"] = base64.b64encode(msg.data).decode()
        message["time"] = rfc3339_ns(msg.ts)
        return {"message": message}

    @staticmethod
    def _check_get_request(req: dict[str, Any], direct: bool) -> None:
        struct = "JSApiMsgGetRequest"
        _check_fields(
            req,
            (
                "seq",
                "last_by_subj",
                "next_by_subj",
                "batch",
                "max_bytes",
                "start_time",
                "multi_last",
                "up_to_seq",
                "up_to_time",
                "no_hdr",
            ),
        )
        seq = _int_field(req, "seq", struct)
        last_for = _str_field(req, "last_by_subj", struct)
        next_for = _str_field(req, "next_by_subj", struct)
        start_time = req.get("start_time")
        if not direct and (req.get("batch") or req.get("max_bytes")):
            raise errors.bad_request()
        if (
            (seq > 0 and last_for)
            or (seq == 0 and not last_for and not next_for and start_time is None)
            or (seq > 0 and start_time is not None)
            or (start_time is not None and last_for)
            or (last_for and next_for)
        ):
            raise errors.bad_request()

    @staticmethod
    def _lookup(stream: Stream, req: dict[str, Any]) -> Any:
        store = stream.store
        seq = int(req.get("seq") or 0)
        last_by = str(req.get("last_by_subj") or "")
        next_by = str(req.get("next_by_subj") or "")
        start_time = req.get("start_time")
        if last_by:
            return store.load_last_msg(last_by)
        if start_time is not None:
            try:
                seq = store.seq_for_time(parse_go_time(str(start_time))[0])
            except ValueError:
                raise errors.bad_request() from None
        if next_by:
            return store.load_next_msg(next_by, max(seq, 1))
        if start_time is not None:
            return store.load_next_msg("", max(seq, 1))
        return store.load_msg(seq)

    def stream_msg_delete(self, rest: list[str], body: bytes, reply: str) -> dict[str, Any]:
        stream, seq, erase = self.msg_delete_request(rest, body)
        return delete_message(stream, seq, erase)

    def msg_delete_request(self, rest: list[str], body: bytes) -> tuple[Stream, int, bool]:
        """A message delete checked: (stream, seq, erase); see `purge_request`."""
        name = self._stream_name(rest)
        if _is_empty_request(body):
            raise errors.bad_request()
        req = _decode_body(body, "JSApiMsgDeleteRequest")
        stream = self._stream(name)
        _check_fields(req, ("seq", "no_erase"))
        seq = _int_field(req, "seq", "JSApiMsgDeleteRequest")
        if stream.config.sealed:
            raise errors.stream_sealed()
        if stream.config.deny_delete:
            raise errors.stream_msg_delete_failed("message delete not permitted")
        if seq <= 0:
            raise errors.stream_msg_delete_failed("no message found")
        return stream, seq, not req.get("no_erase")

    # -- direct get ------------------------------------------------------------------------------

    def direct_get(
        self, stream: Stream, subject: str, body: bytes, reply: str, header: bytes = b""
    ) -> None:
        """`$JS.API.DIRECT.GET.<stream>` and `.<stream>.<subject>` (see jetstream/direct.py)."""
        if not reply:
            return
        ajs = self.ajs

        def send(header: bytes, data: bytes) -> None:
            ajs.reply(reply, data, header)

        if header and api_level_unmet(header):
            send(direct.REQUIRED_API_LEVEL, b"")
            return

        max_pending = ajs.server.options.max_pending
        if subject:
            direct.direct_get_last(stream, subject, body, max_pending, send)
        else:
            direct.direct_get(stream, body, max_pending, send)

    # -- consumers -------------------------------------------------------------------------------

    def consumer_create(self, rest: list[str], body: bytes, reply: str) -> dict[str, Any] | None:
        return self._create_consumer(rest, body, legacy_durable=False)

    def consumer_durable_create(
        self, rest: list[str], body: bytes, reply: str
    ) -> dict[str, Any] | None:
        return self._create_consumer(rest, body, legacy_durable=True)

    def _create_consumer(
        self, rest: list[str], body: bytes, legacy_durable: bool
    ) -> dict[str, Any] | None:
        """nats-server's jsConsumerCreateRequest, single server."""
        if not rest:
            return None
        raw = _decode_body(body, "CreateConsumerRequest")
        stream_name_req, config, action, pedantic = decode_consumer_request(raw)
        filtered = ""
        if legacy_durable:
            if len(rest) != 2:
                raise js_error("ConsumerDurableNameNotInSubject")
            stream_name, name = rest[0], rest[1]
        elif len(rest) == 1:
            stream_name = rest[0]
            name = config.name if config is not None else ""
        else:
            stream_name, name = rest[0], rest[1]
            if len(rest) > 2:
                filtered = ".".join(rest[2:])
        if stream_name != stream_name_req:
            raise errors.stream_mismatch()
        if name and has_path_separators(name):
            raise errors.consumer_name_path_separators()
        if config is None:
            # The request's config is a struct, not a pointer: absent means all defaults.
            config = ConsumerConfig.from_json({})
        if legacy_durable:
            if not config.durable_name:
                raise js_error("ConsumerDurableNameNotSet")
            if name != config.durable_name:
                raise js_error("ConsumerDurableNameNotMatchSubject")
            config.name = name
        elif len(rest) > 1:
            if config.durable_name and name != config.durable_name:
                raise js_error("ConsumerDurableNameNotMatchSubject")
            config.name = name
        elif config.durable_name:
            raise js_error("ConsumerEphemeralWithDurableName")
        if filtered and config.filter_subjects:
            raise js_error("ConsumerMultipleFiltersNotAllowed")
        if filtered and config.filter_subject != filtered:
            raise errors.consumer_filter_mismatch()
        stream = self._stream(stream_name)
        if config.num_replicas > 1 and stream.replicator is None:
            raise errors.replicas_not_supported()
        if config.direct and config.sourcing and config.name:
            sourcing_consumer(stream, config)
        identity = ""
        if config.direct or config.sourcing:
            # A mirror or source tells a recreated origin by its identity.
            identity = stream.identity()
            asked = header_value(self.request_header, STREAM_IDENTITY_HEADER)
            if asked and asked != identity:
                raise js_error("ConsumerStreamIdentityMismatch", msg=identity)
        existing_name = config.durable_name or config.name
        existing = stream.consumers.get(existing_name) if existing_name else None
        if existing is not None:
            # An existing consumer keeps its pause (only CONSUMER.PAUSE changes it).
            config.pause_until = existing.config.pause_until
            if config.sourcing and config.durable_name:
                # A durable sourcing consumer set up again keeps where it started.
                config.deliver_policy = existing.config.deliver_policy
                config.opt_start_seq = existing.config.opt_start_seq
                config.opt_start_time = existing.config.opt_start_time
        set_static_consumer_metadata(config)
        consumer = self._add_consumer(stream, config, action, pedantic)
        out = consumer.info_reply()
        if identity:
            self.reply_header = f"NATS/1.0\r\n{STREAM_IDENTITY_HEADER}: {identity}\r\n\r\n".encode()
        if advisories.paused_ahead(consumer):
            advisories.consumer_pause(consumer)  # nats-server: after every create while paused
        return out

    def _add_consumer(
        self, stream: Stream, config: ConsumerConfig, action: str, pedantic: bool
    ) -> Consumer:
        """nats-server's addConsumerWithAssignmentAndMode, single server."""
        acc_max_ack_pending = self.ajs.limit("max_ack_pending")
        set_consumer_defaults(config, stream.config, pedantic, acc_max_ack_pending)
        check_consumer_config(config, stream.config, acc_max_ack_pending)
        name = config.durable_name or config.name
        if name:
            existing = stream.consumers.get(name)
            if existing is not None:
                if action == "create" and not consumers_equal(existing.config, config):
                    raise js_error("ConsumerAlreadyExists")
                if stream.config.retention == "workqueue":
                    partition_unique(stream, name, config.filters())
                if consumers_equal(existing.config, config):
                    return existing
                try:
                    check_consumer_update(
                        existing.config,
                        config,
                        existing.push and existing.active,
                    )
                except ApiError:
                    raise
                existing.update_config(config)
                return existing
        if action == "update":
            raise js_error("ConsumerDoesNotExist")
        max_consumers = stream.config.max_consumers
        acc_max = self.ajs.limit("max_consumers")
        if max_consumers <= 0 or (0 < acc_max < max_consumers):
            max_consumers = acc_max
        # Consumers of other streams' mirrors and sources do not count (numLimitableConsumers).
        limitable = sum(1 for c in stream.consumers.values() if not c.config.sourcing)
        if max_consumers > 0 and limitable >= max_consumers:
            raise js_error("MaximumConsumersLimit")
        check_workqueue(stream, config)
        if config.durable_name and len(config.durable_name) > 255:
            raise js_error("ConsumerNameTooLong", max=255)
        if not name:
            # Legacy ephemeral: a generated name, which nats-server does not echo in the config.
            while True:
                name = ephemeral_name()
                if name not in stream.consumers:
                    break
        if not valid_name(name):
            raise js_error("ConsumerBadDurableName")
        return self.ajs.add_consumer(stream, config, name)

    def _consumer(self, rest: list[str]) -> Consumer:
        if len(rest) != 2:
            raise errors.bad_request()
        stream = self._stream(rest[0])
        consumer = stream.consumers.get(rest[1])
        if consumer is None:
            raise errors.consumer_not_found()
        return consumer

    def consumer_info(self, rest: list[str], body: bytes, reply: str) -> dict[str, Any]:
        _require_empty(body)
        return self._consumer(rest).info_reply()

    def consumer_delete(self, rest: list[str], body: bytes, reply: str) -> dict[str, Any]:
        _require_empty(body)
        consumer = self._consumer(rest)
        self.ajs.delete_consumer(consumer.stream, consumer.name)
        return {"success": True}

    def consumer_pause(self, rest: list[str], body: bytes, reply: str) -> dict[str, Any]:
        req = _paged_body(body, "JSApiConsumerPauseRequest")
        _check_fields(req, ("pause_until",))
        until_text = req.get("pause_until")
        ns = 0
        zero = True
        if until_text is not None:
            parsed = decode(ConsumerConfig, {"pause_until": until_text}, "JSApiConsumerPause")
            ns, _ = parse_go_time(parsed.pause_until)
            zero = parsed.pause_until == "0001-01-01T00:00:00Z"
        consumer = self._consumer(rest)
        until = "" if zero else format_go_time(ns, 0)
        cfg = copy.copy(consumer.config)
        cfg.pause_until = until
        set_static_consumer_metadata(cfg)
        consumer.config.metadata = cfg.metadata
        consumer.set_pause(until)
        out: dict[str, Any] = {
            "paused": False,
            "pause_until": "0001-01-01T00:00:00Z" if zero else format_go_time(ns, 0),
        }
        remaining = ns - now_ns()
        if not zero and remaining > 0:
            out["paused"] = True
            out["pause_remaining"] = remaining
        return out

    def consumer_unpin(self, rest: list[str], body: bytes, reply: str) -> dict[str, Any]:
        """nats-server's jsConsumerUnpinRequest: end the pin of a pinned_client group."""
        text = body.decode("utf-8", "replace")
        try:
            req = json.loads(text)
        except ValueError as e:
            raise errors.invalid_json(go_unmarshal_syntax_error(text, e)) from None
        if req is not None and not isinstance(req, dict):
            raise errors.invalid_json(
                f"json: cannot unmarshal {json_kind(req)} into Go value of type "
                "server.JSApiConsumerUnpinRequest"
            )
        group = None
        if req:
            # Go's json.Unmarshal: unknown fields ignored, names matched in any case.
            group = req.get("group")
            if group is None:
                group = next((v for k, v in req.items() if k.lower() == "group"), None)
        if group is not None and not isinstance(group, str):
            raise unmarshal_error(group, "JSApiConsumerUnpinRequest.group", "string")
        if not group:
            raise errors.invalid_json("consumer group not specified")
        if not GROUP_NAME.fullmatch(group):
            raise js_error("ConsumerInvalidGroupName")
        consumer = self._consumer(rest)
        if group not in consumer.config.priority_groups:
            raise js_error("ConsumerInvalidPriorityGroup")
        consumer.unpin(group)
        return {}

    def consumer_names(self, rest: list[str], body: bytes, reply: str) -> dict[str, Any]:
        if len(rest) != 1:
            raise errors.bad_request()
        req = _paged_body(body, "JSApiConsumersRequest")
        _check_fields(req, ("offset",))
        offset = max(_int_field(req, "offset", "JSApiConsumersRequest", "int"), 0)
        stream = self._stream(rest[0])
        names = sorted(public_consumers(stream))
        return {
            "total": len(names),
            "offset": offset,
            "limit": _NAMES_LIMIT,
            "consumers": names[offset : offset + _NAMES_LIMIT],
        }

    def consumer_list(self, rest: list[str], body: bytes, reply: str) -> dict[str, Any]:
        if len(rest) != 1:
            raise errors.bad_request()
        req = _paged_body(body, "JSApiConsumersRequest")
        _check_fields(req, ("offset",))
        offset = max(_int_field(req, "offset", "JSApiConsumersRequest", "int"), 0)
        stream = self._stream(rest[0])
        consumers = [stream.consumers[n] for n in sorted(public_consumers(stream))]
        page = consumers[offset : offset + _LIST_LIMIT]
        items = [c.info_reply(full_metadata=False) for c in page]
        return {"total": len(consumers), "offset": offset, "limit": _LIST_LIMIT, "consumers": items}


def public_consumers(stream: Stream) -> list[str]:
    """The names of a stream's consumers but the direct ones (other streams' mirrors and
    sources), which nats-server neither lists nor counts (getPublicConsumers)."""
    return [name for name, c in stream.consumers.items() if not c.config.direct]


__all__ = ["API_SUBJECTS", "JetStreamApi"]
