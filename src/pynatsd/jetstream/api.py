"""The JetStream JSON API on `$JS.API.>`: request subjects to handlers, replies in
nats-server's shapes (`server/jetstream_api.go`)."""

from __future__ import annotations

import base64
import json
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from pynatsd.jetstream import errors
from pynatsd.jetstream.config import (
    check_stream_update,
    consumer_filters,
    normalize_consumer_config,
    normalize_stream_config,
    stream_config_reply,
    stream_configs_equal,
)
from pynatsd.jetstream.consumer import check_workqueue
from pynatsd.jetstream.errors import ApiError
from pynatsd.jetstream.stream import Stream
from pynatsd.jetstream.util import go_json, now_ns, rfc3339_ns
from pynatsd.logger import log
from pynatsd.protocol.events import Pub
from pynatsd.protocol.headers import append_headers
from pynatsd.server.subscription import InternalSubscription
from pynatsd.subjects import match_literal, subjects_collide

if TYPE_CHECKING:
    from pynatsd.jetstream.manager import AccountJetStream
    from pynatsd.server.client import Client

_PREFIX = "io.nats.jetstream.api.v1."
_NAMES_LIMIT = 1024
_LIST_LIMIT = 256
_NOT_FOUND_DIRECT = b"NATS/1.0 404 Message Not Found\r\n\r\n"

Handler = Callable[[list[str], bytes, str], dict[str, Any] | None]


def _decode_body(body: bytes) -> dict[str, Any]:
    if not body.strip():
        return {}
    try:
        data = json.loads(body)
    except ValueError as e:
        raise errors.invalid_json(str(e)) from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise errors.invalid_json("json: cannot unmarshal into Go value of type object")
    return data


class JetStreamApi:
    def __init__(self, ajs: AccountJetStream) -> None:
        self.ajs = ajs
        # (tokens after $JS.API., response type, handler, needs exact token count or None)
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
            ("CONSUMER", "CREATE"): ("consumer_create_response", self.consumer_create),
            ("CONSUMER", "DURABLE", "CREATE"): (
                "consumer_create_response",
                self.consumer_durable_create,
            ),
            ("CONSUMER", "INFO"): ("consumer_info_response", self.consumer_info),
            ("CONSUMER", "DELETE"): ("consumer_delete_response", self.consumer_delete),
            ("CONSUMER", "NAMES"): ("consumer_names_response", self.consumer_names),
            ("CONSUMER", "LIST"): ("consumer_list_response", self.consumer_list),
        }

    # -- dispatch --------------------------------------------------------------------------------

    def on_request(self, sub: InternalSubscription, publisher: Client | None, ev: Pub) -> None:
        subject = ev.subject.decode("utf-8", "surrogateescape")
        reply = ev.reply.decode("utf-8", "surrogateescape")
        hs = ev.header_size
        body = ev.payload[hs:] if hs > 0 else ev.payload
        tokens = subject.split(".")[2:]
        if not tokens:
            return
        if tokens[0] == "DIRECT" and len(tokens) >= 3 and tokens[1] == "GET":
            self.direct_get(tokens[2:], body, reply)
            return
        if tokens[:3] == ["CONSUMER", "MSG", "NEXT"]:
            self.consumer_next(tokens[3:], body, reply)
            return
        route = None
        rest: list[str] = []
        for n in (3, 2, 1):
            key = tuple(tokens[:n])
            if key in self.routes:
                route = self.routes[key]
                rest = tokens[n:]
                break
        if route is None:
            return  # nats-server ignores unknown API subjects
        if not reply:
            return
        rtype, handler = route
        self.ajs.api_total += 1
        try:
            result = handler(rest, body, reply)
        except ApiError as e:
            self.ajs.api_errors += 1
            result = {"error": e.to_json()}
            if rtype == "stream_info_response":
                result.update({"total": 0, "offset": 0, "limit": 0})
        except Exception:  # a bug in one request must not take the server down
            log.exception("JetStream API %s failed", subject)
            self.ajs.api_errors += 1
            result = {"error": errors.ApiError(500, 10000, "internal error").to_json()}
        if result is None:
            return
        self.ajs.reply(reply, go_json({"type": _PREFIX + rtype, **result}))

    # -- account ---------------------------------------------------------------------------------

    def account_info(self, rest: list[str], body: bytes, reply: str) -> dict[str, Any]:
        if rest:
            raise errors.bad_request()
        memory, storage, consumers = self.ajs.usage()
        js = self.ajs.js
        out: dict[str, Any] = {
            "memory": memory,
            "storage": storage,
            "reserved_memory": 0,
            "reserved_storage": 0,
            "streams": len(self.ajs.streams),
            "consumers": consumers,
            "limits": {
                "max_memory": -1,
                "max_storage": -1,
                "max_streams": -1,
                "max_consumers": -1,
                "max_ack_pending": -1,
                "memory_max_stream_bytes": -1,
                "storage_max_stream_bytes": -1,
                "max_bytes_required": False,
            },
        }
        if js.domain:
            out["domain"] = js.domain
        out["api"] = {"level": 5, "total": self.ajs.api_total, "errors": self.ajs.api_errors}
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

    def stream_create(self, rest: list[str], body: bytes, reply: str) -> dict[str, Any]:
        name = self._stream_name(rest)
        raw = _decode_body(body)
        if raw.get("name", "") != name:
            raise errors.stream_mismatch()
        config = normalize_stream_config(raw)
        existing = self.ajs.streams.get(name)
        if existing is not None:
            if not stream_configs_equal(existing.config, config):
                raise errors.stream_name_exist()
            stream = existing
            did_create = False
        else:
            stream = self.ajs.add_stream(config)
            did_create = True
        out = stream.info()
        out["ts"] = rfc3339_ns(now_ns())
        if did_create:
            out["did_create"] = True
        return out

    def stream_update(self, rest: list[str], body: bytes, reply: str) -> dict[str, Any]:
        name = self._stream_name(rest)
        raw = _decode_body(body)
        if raw.get("name", "") != name:
            raise errors.stream_mismatch()
        config = normalize_stream_config(raw)
        stream = self._stream(name)
        check_stream_update(stream.config, config)
        self.ajs.update_stream(stream, config)
        out = stream.info()
        out["ts"] = rfc3339_ns(now_ns())
        return out

    def stream_info(self, rest: list[str], body: bytes, reply: str) -> dict[str, Any]:
        name = self._stream_name(rest)
        req = _decode_body(body)
        stream = self._stream(name)
        info = stream.info(subjects_filter=str(req.get("subjects_filter") or ""))
        out: dict[str, Any] = {"total": 0, "offset": 0, "limit": 0}
        out.update(info)
        out["cluster"] = {"leader": self.ajs.server.server_name}
        out["ts"] = rfc3339_ns(now_ns())
        return out

    def stream_delete(self, rest: list[str], body: bytes, reply: str) -> dict[str, Any]:
        stream = self._stream(self._stream_name(rest))
        self.ajs.delete_stream(stream)
        return {"success": True}

    def stream_purge(self, rest: list[str], body: bytes, reply: str) -> dict[str, Any]:
        stream = self._stream(self._stream_name(rest))
        req = _decode_body(body)
        if stream.config["sealed"]:
            raise errors.stream_sealed()
        if stream.config["deny_purge"]:
            raise errors.stream_purge_failed("stream purge is not permitted")
        subject = str(req.get("filter") or "")
        seq = int(req.get("seq") or 0)
        keep = int(req.get("keep") or 0)
        if seq and keep:
            raise errors.bad_request()
        purged = stream.store.purge(subject=subject, seq=seq, keep=keep)
        for consumer in stream.consumers.values():
            first = stream.store.state().first_seq
            if consumer.next_sseq < first:
                consumer.next_sseq = first
            for s in [s for s in consumer.state.pending if stream.store.load_msg(s) is None]:
                consumer.state.pending.pop(s, None)
            consumer.save()
        return {"success": True, "purged": purged}

    def _filtered_streams(self, req: dict[str, Any]) -> list[Stream]:
        subject = str(req.get("subject") or "")
        streams = sorted(self.ajs.streams.values(), key=lambda s: s.name)
        if subject:
            streams = [
                s
                for s in streams
                if any(subjects_collide(subject, x) for x in s.config["subjects"])
            ]
        return streams

    def stream_names(self, rest: list[str], body: bytes, reply: str) -> dict[str, Any]:
        if rest:
            raise errors.bad_request()
        req = _decode_body(body)
        offset = max(int(req.get("offset") or 0), 0)
        streams = self._filtered_streams(req)
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
        req = _decode_body(body)
        offset = max(int(req.get("offset") or 0), 0)
        streams = self._filtered_streams(req)
        page = streams[offset : offset + _LIST_LIMIT]
        now = rfc3339_ns(now_ns())
        items = []
        for s in page:
            info = s.info(full_metadata=False)
            info["ts"] = now
            items.append(info)
        return {"total": len(streams), "offset": offset, "limit": _LIST_LIMIT, "streams": items}

    def stream_msg_get(self, rest: list[str], body: bytes, reply: str) -> dict[str, Any]:
        stream = self._stream(self._stream_name(rest))
        req = _decode_body(body)
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

    def _lookup(self, stream: Stream, req: dict[str, Any]) -> Any:
        store = stream.store
        seq = int(req.get("seq") or 0)
        last_by = str(req.get("last_by_subj") or "")
        next_by = str(req.get("next_by_subj") or "")
        if last_by:
            return store.load_last_msg(last_by)
        if next_by:
            return store.load_next_msg(next_by, max(seq, 1))
        if seq:
            return store.load_msg(seq)
        raise errors.bad_request()

    def stream_msg_delete(self, rest: list[str], body: bytes, reply: str) -> dict[str, Any]:
        stream = self._stream(self._stream_name(rest))
        req = _decode_body(body)
        if stream.config["sealed"]:
            raise errors.stream_sealed()
        if stream.config["deny_delete"]:
            raise errors.stream_msg_delete_failed("message delete not permitted")
        seq = int(req.get("seq") or 0)
        if seq <= 0:
            raise errors.bad_request()
        if not stream.store.remove_msg(seq, erase=not req.get("no_erase")):
            if seq > stream.store.state().last_seq:
                raise errors.stream_msg_delete_failed("stream store EOF")
            raise errors.stream_msg_delete_failed("no message found")
        for consumer in stream.consumers.values():
            if consumer.state.pending.pop(seq, None) is not None:
                consumer.save()
        return {"success": True}

    # -- direct get ------------------------------------------------------------------------------

    def direct_get(self, tokens: list[str], body: bytes, reply: str) -> None:
        if not reply:
            return
        stream = self.ajs.streams.get(tokens[0])
        if stream is None or not stream.config["allow_direct"]:
            return  # not served: the requester sees no responders, as with nats-server
        self.ajs.api_total += 1
        try:
            if len(tokens) > 1:
                req: dict[str, Any] = {"last_by_subj": ".".join(tokens[1:])}
            else:
                req = _decode_body(body)
        except ApiError:
            self._direct_status(reply, b"NATS/1.0 408 Bad Request\r\n\r\n")
            return
        batch = int(req.get("batch") or 0)
        if batch > 0:
            self._direct_batch(stream, req, reply, batch)
            return
        try:
            msg = self._lookup(stream, req)
        except ApiError:
            self._direct_status(reply, b"NATS/1.0 408 Bad Request\r\n\r\n")
            return
        if msg is None:
            self._direct_status(reply, _NOT_FOUND_DIRECT)
            return
        self._direct_send(stream, msg, reply, [])

    def _direct_send(
        self, stream: Stream, msg: Any, reply: str, extra: list[tuple[str, str]]
    ) -> None:
        header = append_headers(
            msg.header,
            [
                ("Nats-Stream", stream.name),
                ("Nats-Subject", msg.subject),
                ("Nats-Sequence", str(msg.seq)),
                ("Nats-Time-Stamp", rfc3339_ns(msg.ts)),
                *extra,
            ],
        )
        self.ajs.reply(reply, msg.data, header)

    def _direct_batch(self, stream: Stream, req: dict[str, Any], reply: str, batch: int) -> None:
        store = stream.store
        subject = str(req.get("next_by_subj") or "")
        seq = max(int(req.get("seq") or 0), 1)
        sent = 0
        last = 0
        while sent < batch:
            msg = store.load_next_msg(subject, seq)
            if msg is None:
                break
            pending = store.num_pending(msg.seq + 1, subject)
            self._direct_send(
                stream,
                msg,
                reply,
                [("Nats-Num-Pending", str(pending)), ("Nats-Last-Sequence", str(last))],
            )
            last = msg.seq
            seq = msg.seq + 1
            sent += 1
        if sent == 0:
            self._direct_status(reply, _NOT_FOUND_DIRECT)
            return
        pending = store.num_pending(seq, subject)
        eob = (
            f"NATS/1.0 204 EOB\r\nNats-Num-Pending: {pending}\r\nNats-Last-Sequence: {last}\r\n\r\n"
        ).encode()
        self._direct_status(reply, eob)

    def _direct_status(self, reply: str, header: bytes) -> None:
        self.ajs.reply(reply, b"", header)

    # -- consumers -------------------------------------------------------------------------------

    def consumer_create(self, rest: list[str], body: bytes, reply: str) -> dict[str, Any]:
        if not rest:
            raise errors.bad_request()
        stream_name = rest[0]
        name = rest[1] if len(rest) > 1 else ""
        filter_subject = ".".join(rest[2:]) if len(rest) > 2 else ""
        return self._create_consumer(stream_name, name, filter_subject, body, durable=False)

    def consumer_durable_create(self, rest: list[str], body: bytes, reply: str) -> dict[str, Any]:
        if len(rest) != 2:
            raise errors.bad_request()
        return self._create_consumer(rest[0], rest[1], "", body, durable=True)

    def _create_consumer(
        self, stream_name: str, name: str, filter_subject: str, body: bytes, durable: bool
    ) -> dict[str, Any]:
        req = _decode_body(body)
        for key in req:
            if key not in ("stream_name", "config", "action", "pedantic"):
                raise errors.invalid_json(f'json: unknown field "{key}"')
        if req.get("stream_name", "") != stream_name:
            raise errors.stream_mismatch()
        raw = req.get("config")
        if not isinstance(raw, dict):
            raise errors.consumer_config_required()
        raw = dict(raw)
        if durable:
            if raw.get("durable_name") and raw["durable_name"] != name:
                raise errors.consumer_create(
                    "consumer name in subject does not match durable name in request"
                )
            raw["durable_name"] = name
        if filter_subject:
            if raw.get("filter_subject") and raw["filter_subject"] != filter_subject:
                raise errors.consumer_filter_mismatch()
            raw["filter_subject"] = filter_subject
        stream = self._stream(stream_name)
        config = normalize_consumer_config(raw, name)
        action = str(req.get("action") or "")
        existing = stream.consumers.get(config["name"])
        if existing is not None:
            if action == "create" and _consumer_differs(existing.config, config):
                raise errors.consumer_already_exists()
            if _consumer_differs(existing.config, config):
                existing.config = {**config, "name": existing.name}
                existing.filters = consumer_filters(existing.config)
                existing.save()
            out = existing.info()
            out["ts"] = rfc3339_ns(now_ns())
            return out
        if action == "update":
            raise errors.consumer_does_not_exist()
        check_workqueue(stream, config)
        consumer = self.ajs.add_consumer(stream, config)
        out = consumer.info()
        out["ts"] = rfc3339_ns(now_ns())
        return out

    def _consumer(self, rest: list[str]) -> Any:
        if len(rest) != 2:
            raise errors.bad_request()
        stream = self._stream(rest[0])
        consumer = stream.consumers.get(rest[1])
        if consumer is None:
            raise errors.consumer_not_found()
        return consumer

    def consumer_info(self, rest: list[str], body: bytes, reply: str) -> dict[str, Any]:
        consumer = self._consumer(rest)
        out: dict[str, Any] = consumer.info()
        out["ts"] = rfc3339_ns(now_ns())
        return out

    def consumer_delete(self, rest: list[str], body: bytes, reply: str) -> dict[str, Any]:
        consumer = self._consumer(rest)
        self.ajs.delete_consumer(consumer.stream, consumer.name)
        return {"success": True}

    def consumer_names(self, rest: list[str], body: bytes, reply: str) -> dict[str, Any]:
        if len(rest) != 1:
            raise errors.bad_request()
        stream = self._stream(rest[0])
        req = _decode_body(body)
        offset = max(int(req.get("offset") or 0), 0)
        names = sorted(stream.consumers)
        return {
            "total": len(names),
            "offset": offset,
            "limit": _NAMES_LIMIT,
            "consumers": names[offset : offset + _NAMES_LIMIT],
        }

    def consumer_list(self, rest: list[str], body: bytes, reply: str) -> dict[str, Any]:
        if len(rest) != 1:
            raise errors.bad_request()
        stream = self._stream(rest[0])
        req = _decode_body(body)
        offset = max(int(req.get("offset") or 0), 0)
        consumers = [stream.consumers[n] for n in sorted(stream.consumers)]
        now = rfc3339_ns(now_ns())
        items = []
        for c in consumers[offset : offset + _LIST_LIMIT]:
            info = c.info()
            info["ts"] = now
            items.append(info)
        return {"total": len(consumers), "offset": offset, "limit": _LIST_LIMIT, "consumers": items}

    def consumer_next(self, rest: list[str], body: bytes, reply: str) -> None:
        if len(rest) != 2:
            return
        stream = self.ajs.streams.get(rest[0])
        consumer = stream.consumers.get(rest[1]) if stream is not None else None
        if consumer is None:
            if reply:
                self.ajs.reply(reply, b"", b"NATS/1.0 404 No Messages\r\n\r\n")
            return
        consumer.process_next_request(reply, body)


def _consumer_differs(a: dict[str, Any], b: dict[str, Any]) -> bool:
    skip = {"name", "metadata"}
    return {k: v for k, v in a.items() if k not in skip} != {
        k: v for k, v in b.items() if k not in skip
    }


def stream_matches(stream: Stream, subject: str) -> bool:
    return any(match_literal(subject, s) for s in stream.config["subjects"])


__all__ = ["JetStreamApi", "stream_config_reply"]
