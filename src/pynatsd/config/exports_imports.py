"""An account's `exports` and `imports`, as nats-server's `parseAccountExports`,
`parseAccountImports`, `parseExportStreamOrService` and `parseImportStreamOrService`
(server/opts.go) read them, and the checks it makes once every account is known: the export
approves the importer (`checkStreamExportApproved`, `checkServiceExportApproved`), the import
adds no cycle (`AddStreamImport`, `AddServiceImport`, server/accounts.go).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from pynatsd.config.parser import Node
from pynatsd.config.registry import (
    Abort,
    Loader,
    want_bool,
    want_int,
    want_list,
    want_map,
    want_str,
)
from pynatsd.config.values import NANOS, go_atoi, go_quote, go_type
from pynatsd.gofmt import parse_go_duration
from pynatsd.options import AccountConfig, ServiceExport, ServiceImport, StreamExport, StreamImport
from pynatsd.subjects import is_subset_match, is_valid_subject, subjects_collide

_DEFAULT_LATENCY_SAMPLING = 100  # percent of requests whose latency is reported


@dataclass(slots=True)
class PendingExport:
    """An export read from an account, checked once every account is known."""

    account: AccountConfig
    export: StreamExport | ServiceExport


@dataclass(slots=True)
class PendingImport:
    """An import read from an account, checked once every account is known."""

    account: AccountConfig
    stream: StreamImport | None = None
    service: ServiceImport | None = None


# -- exports ---------------------------------------------------------------------------------------


def parse_exports(loader: Loader, account: AccountConfig, node: Node) -> list[PendingExport]:
    if not isinstance(node.value, list):
        raise loader.abort(node, f"Exports should be an array, got {go_type(node.value)}")
    out = []
    for element in node.value:
        try:
            pending = _parse_export(loader, account, element)
        except Abort:
            continue
        if pending is not None:
            out.append(pending)
    return out


@dataclass(slots=True)
class _ExportDraft:
    """One export entry while its fields are read, in the order they are written."""

    stream: StreamExport | None = None
    service: ServiceExport | None = None
    accounts: list[str] | None = None
    response: str | None = None  # Singleton, Stream or Chunked
    response_node: Node | None = None
    threshold: float | None = None  # seconds
    latency: tuple[str, int] | None = None  # (subject, sampling percent)
    latency_node: Node | None = None
    position: int = 0  # account_token_position
    allow_trace: bool | None = None
    trace_node: Node | None = None


def _parse_export(loader: Loader, account: AccountConfig, node: Node) -> PendingExport | None:
    if not isinstance(node.value, dict):
        raise loader.abort(
            node, f"Export Items should be a map with type entry, got {go_type(node.value)}"
        )
    draft = _ExportDraft()
    for key, entry in node.value.items():
        read = _EXPORT_FIELDS.get(key.lower())
        if read is not None:
            read(loader, draft, entry)
        elif not entry.used_variable:
            loader.error(entry, f'unknown field "{key}"')
    service, stream = draft.service, draft.stream
    if service is not None:
        if draft.response is not None:
            service.response_type = draft.response
        if draft.threshold is not None:
            service.response_threshold = draft.threshold
        if draft.latency is not None:
            service.latency_subject, service.latency_sampling = draft.latency
        if draft.allow_trace is not None:
            service.allow_trace = draft.allow_trace
        service.account_token_position = draft.position
        return PendingExport(account, service)
    if stream is not None:
        stream.account_token_position = draft.position
        return PendingExport(account, stream)
    return None


def _export_stream(loader: Loader, draft: _ExportDraft, entry: Node) -> None:
    if draft.service is not None:
        loader.error(entry, f"Detected stream {go_quote(entry.value)} but already saw a service")
        return
    for seen, what in ((draft.response_node, "response"), (draft.latency_node, "latency")):
        if seen is not None:
            loader.error(seen, f"Detected {what} directive on non-service")
    if draft.trace_node is not None:
        loader.error(draft.trace_node, "Detected allow_trace directive on non-service")
    if draft.response_node or draft.latency_node or draft.trace_node:
        return
    if not isinstance(entry.value, str):
        loader.error(entry, f"Expected stream name to be string, got {go_type(entry.value)}")
        return
    draft.stream = StreamExport(entry.value, draft.accounts)


def _export_service(loader: Loader, draft: _ExportDraft, entry: Node) -> None:
    if draft.stream is not None:
        loader.error(entry, f"Detected service {go_quote(entry.value)} but already saw a stream")
        return
    if not isinstance(entry.value, str):
        loader.error(entry, f"Expected service name to be string, got {go_type(entry.value)}")
        return
    draft.service = ServiceExport(entry.value, draft.accounts)


def _export_response(loader: Loader, draft: _ExportDraft, entry: Node) -> None:
    if draft.response_node is not None:
        loader.error(entry, "Duplicate response type definition")
        return
    draft.response_node = entry
    if not isinstance(entry.value, str):
        loader.error(entry, f"Expected response type to be string, got {go_type(entry.value)}")
        return
    kind = {"single": "Singleton", "singleton": "Singleton", "stream": "Stream"}.get(
        entry.value.lower()
    ) or {"chunk": "Chunked", "chunked": "Chunked"}.get(entry.value.lower())
    if kind is None:
        loader.error(entry, f'Unknown response type: "{entry.value}"')
        return
    draft.response = kind
    if draft.stream is not None:
        loader.error(entry, "Detected response directive on non-service")


def _export_threshold(loader: Loader, draft: _ExportDraft, entry: Node) -> None:
    if draft.threshold is not None:
        loader.error(entry, "Duplicate response threshold detected")
        return
    if not isinstance(entry.value, str):
        loader.error(
            entry,
            "Expected response threshold to be a parseable time duration, "
            f"got {go_type(entry.value)}",
        )
        return
    try:
        draft.threshold = parse_go_duration(entry.value) / NANOS
    except ValueError:
        loader.error(
            entry,
            f'Expected response threshold to be a parseable time duration, got "{entry.value}"',
        )
        return
    if draft.stream is not None:
        loader.error(entry, "Detected response directive on non-service")


def _export_accounts(loader: Loader, draft: _ExportDraft, entry: Node) -> None:
    # An empty list is no list (a public export), as a nil slice in nats-server.
    draft.accounts = [want_str(loader, e) for e in want_list(loader, entry)] or None
    if draft.stream is not None:
        draft.stream.accounts = draft.accounts
    elif draft.service is not None:
        draft.service.accounts = draft.accounts


def _export_latency(loader: Loader, draft: _ExportDraft, entry: Node) -> None:
    draft.latency_node = entry
    try:
        draft.latency = _parse_latency(loader, entry)
    except Abort:
        return
    if draft.stream is not None:
        loader.error(entry, "Detected latency directive on non-service")


def _export_position(loader: Loader, draft: _ExportDraft, entry: Node) -> None:
    draft.position = want_int(loader, entry)


def _export_allow_trace(loader: Loader, draft: _ExportDraft, entry: Node) -> None:
    draft.trace_node = entry
    draft.allow_trace = want_bool(loader, entry)
    if draft.stream is not None:
        loader.error(entry, "Detected allow_trace directive on non-service")


_ExportField = Callable[[Loader, _ExportDraft, Node], None]

# Lower-cased field of an export entry -> how it is read.
_EXPORT_FIELDS: dict[str, _ExportField] = {
    "stream": _export_stream,
    "service": _export_service,
    "response": _export_response,
    "response_type": _export_response,
    "threshold": _export_threshold,
    "response_threshold": _export_threshold,
    "response_max_time": _export_threshold,
    "response_time": _export_threshold,
    "accounts": _export_accounts,
    "latency": _export_latency,
    "account_token_position": _export_position,
    "allow_trace": _export_allow_trace,
}


def _parse_latency(loader: Loader, node: Node) -> tuple[str, int]:
    value = node.value
    if isinstance(value, str):
        return value, _DEFAULT_LATENCY_SAMPLING
    if not isinstance(value, dict):
        raise loader.abort(
            node,
            f"Expected latency entry to be a map/struct or string, got {go_type(value)}",
        )
    sampling = _DEFAULT_LATENCY_SAMPLING
    if "sampling" in value:
        sampling = _latency_sampling(loader, value["sampling"])
    if "subject" not in value:
        raise loader.abort(node, "Latency subject required, but missing")
    subject = value["subject"]
    if not isinstance(subject.value, str):
        raise loader.abort(subject, "Expected latency subject to be a string, got string")
    return subject.value, sampling


def _latency_sampling(loader: Loader, entry: Node) -> int:
    """A sampling percentage: 1-100 (a number or "50%"), or "headers" (0)."""
    sample = entry.value
    if isinstance(sample, str):
        if sample.strip().lower() == "headers":
            return 0
        try:
            percent = go_atoi(sample.removesuffix("%"))
        except ValueError:
            raise loader.abort(
                entry,
                "Failed to parse latency sample: strconv.Atoi: parsing "
                f'"{sample.removesuffix("%")}": invalid syntax',
            ) from None
    elif isinstance(sample, int) and not isinstance(sample, bool):
        percent = sample
    else:
        raise loader.abort(
            entry,
            f"Expected latency sample to be a string or map/struct, got {go_type(sample)}",
        )
    if not 1 <= percent <= 100:
        raise loader.abort(entry, "bad sampling percentage, should be 1-100")
    return percent


# -- imports ---------------------------------------------------------------------------------------


def parse_imports(loader: Loader, account: AccountConfig, node: Node) -> list[PendingImport]:
    if not isinstance(node.value, list):
        raise loader.abort(node, f"Imports should be an array, got {go_type(node.value)}")
    out: list[PendingImport] = []
    by_local: dict[str, list[ServiceImport]] = {}
    for element in node.value:
        try:
            pending = _parse_import(loader, account, element)
        except Abort:
            continue
        if pending is None:
            continue
        service = pending.service
        if service is not None:
            clash = next(
                (s for s in by_local.get(service.to, []) if s.account == service.account), None
            )
            if clash is not None:
                loader.error(
                    element,
                    f'Duplicate service import subject "{service.to}", previously used in '
                    f'import for account "{clash.account}", subject "{clash.subject}"',
                )
                continue
            by_local.setdefault(service.to, []).append(service)
        out.append(pending)
    return out


@dataclass(slots=True)
class _ImportDraft:
    """One import entry while its fields are read, in the order they are written."""

    stream: StreamImport | None = None
    service: ServiceImport | None = None
    prefix: str = ""
    to: str = ""
    share: bool = False
    allow_trace: bool | None = None
    trace_node: Node | None = None


def _parse_import(loader: Loader, account: AccountConfig, node: Node) -> PendingImport | None:
    if not isinstance(node.value, dict):
        raise loader.abort(
            node, f"Import Items should be a map with type entry, got {go_type(node.value)}"
        )
    draft = _ImportDraft()
    for key, entry in node.value.items():
        read = _IMPORT_FIELDS.get(key.lower())
        if read is not None:
            read(loader, draft, entry)
        elif not entry.used_variable:
            loader.error(entry, f'unknown field "{key}"')
    if draft.stream is not None:
        return PendingImport(account, stream=draft.stream)
    if draft.service is not None:
        return PendingImport(account, service=draft.service)
    return None


def _import_source(loader: Loader, node: Node) -> tuple[str, str]:
    account = subject = ""
    for key, entry in want_map(loader, node).items():
        lowered = key.lower()
        if lowered == "account":
            account = want_str(loader, entry)
        elif lowered == "subject":
            subject = want_str(loader, entry)
        elif not entry.used_variable:
            loader.error(entry, f'unknown field "{key}"')
    if not account or not subject:
        raise loader.abort(node, "Expect an account name and a subject")
    return account, subject


def _import_stream(loader: Loader, draft: _ImportDraft, entry: Node) -> None:
    if draft.service is not None:
        loader.error(entry, "Detected stream but already saw a service")
        return
    if not isinstance(entry.value, dict):
        loader.error(entry, f"Stream entry should be an account map, got {go_type(entry.value)}")
        return
    try:
        source, subject = _import_source(loader, entry)
    except Abort:
        return
    draft.stream = StreamImport(source, subject, to=draft.to, prefix=draft.prefix)
    if draft.allow_trace is not None:
        draft.stream.allow_trace = draft.allow_trace


def _import_service(loader: Loader, draft: _ImportDraft, entry: Node) -> None:
    if draft.stream is not None:
        loader.error(entry, "Detected service but already saw a stream")
        return
    if draft.trace_node is not None:
        loader.error(draft.trace_node, "Detected allow_trace directive on a non-stream")
        return
    if not isinstance(entry.value, dict):
        loader.error(entry, f"Service entry should be an account map, got {go_type(entry.value)}")
        return
    try:
        source, subject = _import_source(loader, entry)
    except Abort:
        return
    draft.service = ServiceImport(source, subject, to=draft.to or subject, share=draft.share)


def _import_prefix(loader: Loader, draft: _ImportDraft, entry: Node) -> None:
    draft.prefix = want_str(loader, entry)
    if draft.stream is not None:
        draft.stream.prefix = draft.prefix


def _import_to(loader: Loader, draft: _ImportDraft, entry: Node) -> None:
    draft.to = want_str(loader, entry)
    if draft.service is not None:
        draft.service.to = draft.to
    if draft.stream is not None:
        draft.stream.to = draft.to
        if draft.stream.prefix:
            loader.error(entry, "Stream import can not have a 'prefix' and a 'to' property")


def _import_share(loader: Loader, draft: _ImportDraft, entry: Node) -> None:
    draft.share = want_bool(loader, entry)
    if draft.service is not None:
        draft.service.share = draft.share


def _import_allow_trace(loader: Loader, draft: _ImportDraft, entry: Node) -> None:
    if draft.service is not None:
        loader.error(entry, "Detected allow_trace directive on a non-stream")
        return
    draft.allow_trace, draft.trace_node = want_bool(loader, entry), entry
    if draft.stream is not None:
        draft.stream.allow_trace = draft.allow_trace


_ImportField = Callable[[Loader, _ImportDraft, Node], None]

# Lower-cased field of an import entry -> how it is read.
_IMPORT_FIELDS: dict[str, _ImportField] = {
    "stream": _import_stream,
    "service": _import_service,
    "prefix": _import_prefix,
    "to": _import_to,
    "share": _import_share,
    "allow_trace": _import_allow_trace,
}


# -- checks once every account is known ----------------------------------------------------------


def _subject_is_literal(subject: str) -> bool:
    return not any(t in ("*", ">") for t in subject.split("."))


def _export_allows(
    exports: list[StreamExport] | list[ServiceExport], importer: str, subject: str
) -> bool:
    """checkStreamExportApproved / checkServiceExportApproved: an export equal to the imported
    subject decides; else the first export the subject is a subset of."""
    if not is_valid_subject(subject):
        return False
    tokens = subject.split(".")
    exact = [e for e in exports if e.subject == subject]
    candidates = exact or [e for e in exports if is_subset_match(subject, e.subject)]
    if not candidates:
        return False
    export = candidates[0]
    position = export.account_token_position
    if export.accounts is None and position == 0:
        return True
    if position > 0:
        return not exact and position <= len(tokens) and tokens[position - 1] == importer
    return importer in export.accounts if export.accounts else False


def check_exports(loader: Loader, node: Node, exports: list[PendingExport]) -> None:
    """Add each export to its account, once its allowed importers are known to exist."""
    opts = loader.opts
    for pending in exports:
        export = pending.export
        kind = "service" if isinstance(export, ServiceExport) else "stream"
        valid = []
        for name in export.accounts or []:
            if name not in opts.accounts:
                loader.error(node, f'"{name}" account not defined for {kind} export')
                continue
            valid.append(name)
        if export.accounts is not None:
            export.accounts = valid
        position = export.account_token_position
        if position > 0:
            tokens = export.subject.split(".")
            if len(tokens) < position or tokens[position - 1] != "*":
                loader.error(
                    node,
                    f'Error adding {kind} export "{export.subject}": sublist: invalid subject',
                )
                continue
        if isinstance(export, ServiceExport):
            if export.latency_subject and opts.no_system_account:
                loader.error(
                    node,
                    f'Error adding service latency sampling for "{export.subject}": '
                    "system account not setup",
                )
                continue
            pending.account.service_exports.append(export)
        else:
            pending.account.stream_exports.append(export)


def check_imports(loader: Loader, node: Node, imports: list[PendingImport]) -> None:
    """Add each import to its account, if the exporting account approves it."""
    accounts = loader.opts.accounts
    for pending in imports:
        stream, service = pending.stream, pending.service
        if stream is not None:
            source = accounts.get(stream.account)
            if source is None:
                loader.error(node, f'"{stream.account}" account not defined for stream import')
                continue
            problem = _add_stream_import(pending.account, source, stream)
            if problem:
                loader.error(node, f'Error adding stream import "{stream.subject}": {problem}')
        elif service is not None:
            source = accounts.get(service.account)
            if source is None:
                loader.error(node, f'"{service.account}" account not defined for service import')
                continue
            problem = _add_service_import(pending.account, source, service, accounts)
            if problem:
                loader.error(node, f'Error adding service import "{service.subject}": {problem}')


def _add_stream_import(account: AccountConfig, source: AccountConfig, imp: StreamImport) -> str:
    if not _export_allows(source.stream_exports, account.name, imp.subject):
        return "stream import not authorized"
    if imp.prefix:
        if not _subject_is_literal(imp.prefix):
            return "stream import prefix can not contain wildcard tokens"
        prefix = imp.prefix if imp.prefix.endswith(".") else imp.prefix + "."
        imp.to = prefix + imp.subject
    elif not imp.to:
        imp.to = imp.subject
    visited = {account.name}
    for subject in (imp.to, imp.subject):
        if _stream_cycle(source, subject, visited, {}):
            return "import forms a cycle"
    if any(s.account == source.name and s.subject == imp.subject for s in account.stream_imports):
        return "stream import already exists"
    account.stream_imports.append(imp)
    return ""


def _stream_cycle(
    account: AccountConfig, to: str, visited: set[str], accounts: Mapping[str, AccountConfig]
) -> bool:
    if not any(is_subset_match(to, e.subject) for e in account.stream_exports):
        return False
    for imp in account.stream_imports:
        if subjects_collide(to, imp.to):
            if imp.account in visited:
                return True
            visited.add(account.name)
            nxt = accounts.get(imp.account)
            subject = imp.to if is_subset_match(imp.to, to) else to
            if nxt is not None and _stream_cycle(nxt, subject, visited, accounts):
                return True
    return False


def _add_service_import(
    account: AccountConfig,
    source: AccountConfig,
    imp: ServiceImport,
    accounts: Mapping[str, AccountConfig],
) -> str:
    local, remote = imp.to or imp.subject, imp.subject
    imp.to = local
    if not is_valid_subject(local) or not is_valid_subject(remote):
        return "sublist: invalid subject"
    if not _export_allows(source.service_exports, account.name, remote):
        return "service import not authorized"
    if _service_cycle(source, local, {account.name}, accounts):
        return "import forms a cycle"
    account.service_imports.append(imp)
    return ""


def _service_cycle(
    account: AccountConfig, local: str, visited: set[str], accounts: Mapping[str, AccountConfig]
) -> bool:
    for imp in account.service_imports:
        if subjects_collide(local, imp.subject):
            if imp.account in visited:
                return True
            visited.add(account.name)
            nxt = accounts.get(imp.account)
            subject = imp.to if is_subset_match(imp.to, local) else local
            if nxt is not None and _service_cycle(nxt, subject, visited, accounts):
                return True
    return False
