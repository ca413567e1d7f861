"""Accounts: isolated subject spaces, each with its own SubList, joined only by exports and
imports.

Corresponds to nats-server's `server/accounts.go`. Clients without an account are in the global
account `$G`. An import is wired as an internal subscription:

- a stream import is a subscription in the exporting account on the exported subject whose
  callback publishes each message into the importing account (under the import's prefix or `to`);
- a service import is a subscription in the importing account on its local subject whose
  callback forwards the request into the exporting account, with a reply subject `_R_.<id>` that
  is itself subscribed in the exporter and carries responses back to the requester's inbox
  (once for a singleton service, for two minutes for streamed/chunked responses).
"""

from __future__ import annotations

import secrets
from typing import TYPE_CHECKING

from pynatsd.logger import log
from pynatsd.mappings import MappingError, SubjectMappings
from pynatsd.server.msgtrace import disable_trace, redirect_trace
from pynatsd.subjects import is_literal, is_subset_match
from pynatsd.sublist import SubList

if TYPE_CHECKING:
    from collections.abc import Sequence

    from pynatsd.options import (
        AccountConfig,
        ServiceExport,
        ServiceImport,
        StreamImport,
        SubjectMapping,
    )
    from pynatsd.protocol.events import Pub
    from pynatsd.server.client import Client
    from pynatsd.server.delivery import Receiver
    from pynatsd.server.msgtrace import MsgTrace
    from pynatsd.server.routed import StreamImportSubscription
    from pynatsd.server.server import Server
    from pynatsd.server.subscription import InternalSubscription, Subscription

GLOBAL_ACCOUNT = "$G"
SYSTEM_ACCOUNT = "$SYS"
# How long a streamed service response keeps its reply route open (nats-server's default TTL).
RESPONSE_TTL = 120.0


class Account:
    __slots__ = (
        "config",
        "import_subs",
        "mappings",
        "name",
        "num_clients",
        "stream_import_subs",
        "sublist",
    )

    def __init__(self, name: str, cache: bool = True) -> None:
        self.name = name
        self.sublist: SubList[Subscription] = SubList(cache=cache)
        self.config: AccountConfig | None = None
        self.num_clients = 0
        self.import_subs: list[InternalSubscription] = []
        # The stream imports of other accounts wired into this account's SubList (see
        # server/routed.py); empty, the usual case, costs routed deliveries one test.
        self.stream_import_subs: list[StreamImportSubscription] = []
        # Subject mappings applied to what clients publish here; None (the usual case, one
        # cheap test per publish) when the account has none.
        self.mappings: SubjectMappings | None = None

    def set_mappings(self, config: Sequence[SubjectMapping]) -> None:
        """Install the account's mappings (at start and on every reload). A change bumps the
        SubList generation: delivery plans made under the old mappings are dropped."""
        current = self.mappings.config if self.mappings is not None else ()
        if tuple(config) == current:
            return
        try:
            self.mappings = SubjectMappings(config) if config else None
        except MappingError as e:  # checked when the configuration was read
            log.error("Account %s: subject mappings not installed: %s", self.name, e)
            self.mappings = None
        self.sublist.genid += 1

    @property
    def max_connections(self) -> int:
        return self.config.limits.max_connections if self.config is not None else -1

    def __repr__(self) -> str:
        return f"<Account {self.name}>"


def _exported_to(exports: list[object], subject: str, importer: str) -> bool:
    for export in exports:
        export_subject: str = getattr(export, "subject", "")
        accounts: list[str] | None = getattr(export, "accounts", None)
        if accounts is not None and importer not in accounts:
            continue
        if subject == export_subject or is_subset_match(subject, export_subject):
            return True
    return False


def install_mappings(server: Server) -> None:
    """Every account's subject mappings from the configuration: the top-level `mappings` are
    the global account's, an account's own block (or JWT) its."""
    for account in server.accounts.values():
        if account is server.global_account:
            # nats-server updates $G only from a configuration that has a `mappings` block:
            # a reload that drops the block keeps the mappings in force.
            if server.options.mappings is not None:
                account.set_mappings(server.options.mappings)
        else:
            account.set_mappings(account.config.mappings if account.config is not None else ())


def wire_imports(server: Server) -> None:
    """(Re)install the internal subscriptions that carry every configured import."""
    from pynatsd.server.subscription import InternalClient

    for account in server.accounts.values():
        for sub in account.import_subs:
            sub.closed = True
            # The owner records the account whose SubList holds the subscription.
            holder: Account = sub.client.account
            holder.sublist.remove(sub)
        account.import_subs = []
        account.stream_import_subs = []
    for importer in list(server.accounts.values()):
        config = importer.config
        if config is None:
            continue
        for imp in config.stream_imports:
            _wire_stream_import(server, importer, imp, InternalClient)
        for simp in config.service_imports:
            _wire_service_import(server, importer, simp, InternalClient)


def _wire_stream_import(
    server: Server, importer: Account, imp: StreamImport, owner_cls: type
) -> None:
    from pynatsd.server.routed import StreamImportSubscription

    exporter = server.accounts.get(imp.account)
    if exporter is None or exporter.config is None:
        log.warning("stream import of %q from unknown account %q", imp.subject, imp.account)
        return
    if not _exported_to(list(exporter.config.stream_exports), imp.subject, importer.name):
        log.warning("stream import of %q from %q is not exported", imp.subject, imp.account)
        return

    def to_importer(subject: str) -> str:
        if imp.prefix:
            return f"{imp.prefix}.{subject}"
        if imp.to:
            return _map_subject(subject, imp.subject, imp.to)
        return subject

    def forward(
        sub: Subscription, publisher: Receiver | None, ev: Pub, trace: MsgTrace | None = None
    ) -> None:
        subject = to_importer(ev.subject.decode("utf-8", "surrogateescape"))
        hs = ev.header_size
        header = ev.payload[:hs] if hs > 0 else b""
        data = ev.payload[hs:] if hs > 0 else ev.payload
        reply = ev.reply.decode("utf-8", "surrogateescape")
        if trace is None:
            server.publish_internal(importer, subject, reply, header, data)
            return
        # A traced message: each receiver in the importing account is reported behind the
        # import; the receivers themselves only if the import allows tracing.
        trace.through_import(importer.name, subject, imp.allow_trace, shadow)
        try:
            server.publish_internal(importer, subject, reply, header, data, trace)
        finally:
            trace.imported()

    def shadow(subscribed: str) -> str:
        """A subscription in the importing account as the exporter sees it (nats-server's
        shadow subscription): the import's subject if that is literal, else the subscribed
        subject with the import's prefix or mapping undone."""
        if is_literal(imp.subject):
            return imp.subject
        if imp.prefix:
            return subscribed.removeprefix(imp.prefix + ".")
        if imp.to:
            return _map_subject(subscribed, imp.to, imp.subject)
        return subscribed

    owner = owner_cls(exporter, f"import:{importer.name}")
    sub = StreamImportSubscription(owner, imp.subject, forward, importer, to_importer)
    sub.traced = forward
    exporter.sublist.insert(sub)
    importer.import_subs.append(sub)
    exporter.stream_import_subs.append(sub)


def _service_export(exporter: Account, subject: str, importer: str) -> ServiceExport | None:
    assert exporter.config is not None
    for export in exporter.config.service_exports:
        if export.accounts is not None and importer not in export.accounts:
            continue
        if subject == export.subject or is_subset_match(subject, export.subject):
            return export
    return None


def _wire_service_import(
    server: Server, importer: Account, imp: ServiceImport, owner_cls: type
) -> None:
    from pynatsd.server.subscription import InternalSubscription

    exporter = server.accounts.get(imp.account)
    if exporter is None or exporter.config is None:
        log.warning("service import of %q from unknown account %q", imp.subject, imp.account)
        return
    export = _service_export(exporter, imp.subject, importer.name)
    if export is None:
        log.warning("service import of %q from %q is not exported", imp.subject, imp.account)
        return
    local = imp.to or imp.subject
    singleton = export.response_type.lower() == "singleton"
    responder_owner = owner_cls(exporter, f"responses:{importer.name}")

    def request(
        sub: Subscription, publisher: Receiver | None, ev: Pub, trace: MsgTrace | None = None
    ) -> None:
        subject = ev.subject.decode("utf-8", "surrogateescape")
        remote = _map_subject(subject, local, imp.subject) if local != imp.subject else subject
        if exporter.mappings is not None:
            # nats-server applies the exporter's mappings to a service import's subject (the
            # trace's `si` event names the subject they chose; there is no `sm` event).
            remote = exporter.mappings.map_subject(remote)
        if trace is not None:
            trace.service_import(exporter.name, subject, remote)
            if not export.allow_trace:
                # The trace stops at the import: trace only, the request goes no further;
                # otherwise it goes on untraced, with its trace destination switched off.
                if trace.only:
                    return
                ev = disable_trace(ev)
                trace = None
            else:
                # nats-server points the destination the exporter sees at a response import
                # back to the tracer, for servers further on; with no server further on, it
                # is removed at once, so the name alone is left.
                ev = redirect_trace(ev, _response_subject())
        hs = ev.header_size
        header = ev.payload[:hs] if hs > 0 else b""
        data = ev.payload[hs:] if hs > 0 else ev.payload
        reply = ev.reply.decode("utf-8", "surrogateescape")
        mapped = ""
        if reply:
            mapped = _response_subject()
            route = InternalSubscription(responder_owner, mapped, _respond)
            route_target[id(route)] = reply
            exporter.sublist.insert(route)
            ttl = None if singleton else RESPONSE_TTL
            if ttl is not None:
                server.loop.call_later(ttl, _drop, route)
        server.publish_internal(exporter, remote, mapped, header, data, trace)

    route_target: dict[int, str] = {}

    def _drop(route: InternalSubscription) -> None:
        if not route.closed:
            route.closed = True
            exporter.sublist.remove(route)
        route_target.pop(id(route), None)

    def _respond(route: InternalSubscription, publisher: Client | None, ev: Pub) -> None:
        target = route_target.get(id(route))
        if target is None:
            return
        hs = ev.header_size
        header = ev.payload[:hs] if hs > 0 else b""
        data = ev.payload[hs:] if hs > 0 else ev.payload
        if singleton:
            _drop(route)
        if ev.subject != route.subject_bytes:
            # A JetStream delivery to a pull request's reply shows the stream subject and
            # carries its ack reply: the requester gets it as it is (nats-server's pa.deliver).
            from pynatsd.server.routed import deliver_routed

            deliver_routed(importer, target, ev)
            server.flush_soon()
            return
        server.publish_internal(importer, target, "", header, data)

    owner = owner_cls(importer, f"service:{imp.account}")
    sub = InternalSubscription(owner, local, request)
    sub.traced = request
    importer.sublist.insert(sub)
    importer.import_subs.append(sub)


def _response_subject() -> str:
    """A reply subject of a service import (`_R_.` is reserved for them)."""
    return f"_R_.{secrets.token_hex(6)}.{secrets.token_hex(4)}"


def _map_subject(subject: str, src: str, dst: str) -> str:
    """Map a subject matched by `src` onto `dst`: literal tokens replaced, wildcard tokens kept."""
    if src == dst:
        return subject
    tokens = subject.split(".")
    src_tokens = src.split(".")
    dst_tokens = dst.split(".")
    wild = [tokens[i] for i, t in enumerate(src_tokens) if t == "*"]
    tail = tokens[len(src_tokens) - 1 :] if src_tokens[-1] == ">" else []
    out: list[str] = []
    it = iter(wild)
    for t in dst_tokens:
        if t == "*":
            out.append(next(it, "*"))
        elif t == ">":
            out.extend(tail)
        else:
            out.append(t)
    return ".".join(out)


def service_import_target(server: Server, importer: Account, subject: str) -> tuple[Account, str]:
    """Where a request on `subject` in `importer` goes: the exporting account and the subject
    there, through the first service import that covers it; the importer itself otherwise
    (for JetStream's `external` API prefixes, which nats-server follows as any request)."""
    config = importer.config
    for imp in config.service_imports if config is not None else ():
        local = imp.to or imp.subject
        if subject != local and not is_subset_match(subject, local):
            continue
        exporter = server.accounts.get(imp.account)
        if exporter is None or exporter.config is None:
            continue
        if _service_export(exporter, imp.subject, importer.name) is None:
            continue
        return exporter, _map_subject(subject, local, imp.subject)
    return importer, subject


def stream_import_delivers(
    server: Server, importer: Account, exporter: Account, subject: str
) -> bool:
    """Whether a message published on `subject` in `exporter` reaches `importer` under the
    same subject, through one of its stream imports."""
    config = importer.config
    for imp in config.stream_imports if config is not None else ():
        if imp.account != exporter.name or imp.prefix or (imp.to and imp.to != imp.subject):
            continue
        if subject != imp.subject and not is_subset_match(subject, imp.subject):
            continue
        if exporter.config is not None and _exported_to(
            list(exporter.config.stream_exports), imp.subject, importer.name
        ):
            return True
    return False
