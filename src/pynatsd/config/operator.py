"""Operator mode: `operator`, `resolver` (and its preload and pinned accounts), `trusted` and
`default_sentinel`, as nats-server's `processConfigFileLine` (server/opts.go) reads them, with
the start-up checks of `validateTrustedOperators` (server/jwt.go).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass

from pynatsd.auth.jwt import (
    JwtError,
    decode_account,
    decode_operator,
    decode_user,
    read_operator_jwt,
)
from pynatsd.auth.keys import PREFIX_ACCOUNT, PREFIX_OPERATOR, is_valid_public_key
from pynatsd.config.parser import Node
from pynatsd.config.registry import (
    Loader,
    config_key,
    string_or_list,
    unsupported,
    want_bool,
    want_int,
    want_str,
)
from pynatsd.config.values import go_type
from pynatsd.gofmt import parse_go_duration
from pynatsd.options import Options

_MEMORY_RESOLVER = re.compile(r"(?i)(MEM|MEMORY)\s*")
_URL_RESOLVER = re.compile(r'(?i)(?:URL)(?:\(\s*"?([^\s"]*)"?\s*\))?\s*')

unsupported("operator mode", "resolver_tls", "operators_resolver_tls")


@config_key("operator", "operators", "roots", "root", "root_operators", "root_operator")
def _apply_operator(loader: Loader, name: str, node: Node) -> None:
    opts = loader.opts
    sources = string_or_list(loader, node, "operators")
    opts.operator_jwts = []
    operators = []
    for source in sources:
        try:
            operator = read_operator_jwt(source)
        except FileNotFoundError:
            loader.error(
                node, f"error parsing operator JWT: open {source}: no such file or directory"
            )
            continue
        except (OSError, JwtError) as e:
            loader.error(node, f"error parsing operator JWT: {e}")
            continue
        opts.operator_jwts.append(operator.claims.token)
        operators.append(operator)
    if len(operators) == 1:
        # The operator's account server becomes the resolver unless one is configured (even
        # an empty URL, as nats-server does), and its system account the system account
        # unless `system_account` names one.
        if not opts.resolver:
            opts.resolver = "URL"
            opts.resolver_url = operators[0].account_server_url + "/accounts"
        if not opts.system_account:
            opts.system_account = operators[0].system_account


@config_key("resolver", "account_resolver", "accounts_resolver")
def _apply_resolver(loader: Loader, name: str, node: Node) -> None:
    opts = loader.opts
    value = node.value
    opts.resolver = opts.resolver_url = opts.resolver_dir = ""
    if isinstance(value, str):
        if _MEMORY_RESOLVER.search(value):
            opts.resolver = "MEMORY"
        elif (m := _URL_RESOLVER.search(value)) is not None:
            opts.resolver, opts.resolver_url = "URL", m.group(1) or ""
    elif isinstance(value, dict):
        _apply_resolver_map(loader, node, value)
    else:
        raise loader.abort(node, f"error parsing operator resolver, wrong type {go_type(value)}")
    if not opts.resolver:
        loader.error(
            node,
            'error parsing account resolver, should be MEM or  URL("url") or a map containing '
            "dir and type state=[FULL|CACHE])",
        )


@dataclass(slots=True)
class _ResolverMap:
    """The fields of a `resolver { ... }` map that decide whether it is valid."""

    directory: str = ""  # dir
    kind: str = ""  # type: MEM(ORY), FULL or CACHE
    delete: bool = False  # allow_delete
    hard_delete_set: bool = False  # whether hard_delete was given at all
    ttl: int = 0  # nanoseconds
    interval: int = 0  # nanoseconds


def _read_resolver_map(loader: Loader, node: Node, fields: dict[str, Node]) -> _ResolverMap:
    resolver = _ResolverMap()
    if "dir" in fields:
        resolver.directory = want_str(loader, fields["dir"])
    if "type" in fields:
        resolver.kind = want_str(loader, fields["type"])
    if "allow_delete" in fields:
        resolver.delete = want_bool(loader, fields["allow_delete"])
    if "hard_delete" in fields:
        want_bool(loader, fields["hard_delete"])
        resolver.hard_delete_set = True
    if "limit" in fields:
        want_int(loader, fields["limit"])
    for key in ("ttl", "interval", "timeout"):
        if key in fields:
            try:
                nanos = parse_go_duration(want_str(loader, fields[key]))
            except ValueError as e:
                raise loader.abort(node, str(e)) from None
            if key == "ttl":
                resolver.ttl = nanos
            elif key == "interval":
                resolver.interval = nanos
    return resolver


def _apply_resolver_map(loader: Loader, node: Node, fields: dict[str, Node]) -> None:
    opts = loader.opts
    resolver = _read_resolver_map(loader, node, fields)

    def check_dir() -> None:
        if not resolver.directory:
            loader.error(node, "dir has no value and needs to point to a directory")
        elif os.path.exists(resolver.directory) and not os.path.isdir(resolver.directory):
            loader.error(node, "dir needs to point to an accessible directory")

    upper = resolver.kind.upper()
    if upper == "CACHE":
        check_dir()
        if resolver.interval:
            loader.error(node, "CACHE does not accept sync")
        if resolver.delete:
            loader.error(node, "CACHE does not accept allow_delete")
        if resolver.hard_delete_set:
            loader.error(node, "CACHE does not accept hard_delete")
    elif upper == "FULL":
        check_dir()
        if resolver.ttl:
            loader.error(node, "FULL does not accept ttl")
        if resolver.hard_delete_set and not resolver.delete:
            loader.error(node, "hard_delete has no effect without delete")
    elif upper not in ("MEM", "MEMORY"):
        return
    opts.resolver = "MEMORY" if upper in ("MEM", "MEMORY") else upper
    opts.resolver_dir = resolver.directory if upper in ("FULL", "CACHE") else ""


@config_key("resolver_preload")
def _apply_resolver_preload(loader: Loader, name: str, node: Node) -> None:
    if not isinstance(node.value, dict):
        raise loader.abort(node, "preload should be a map of account_public_key:account_jwt")
    preload = loader.opts.resolver_preload
    preload.clear()
    for key, entry in node.value.items():
        if not isinstance(entry.value, str):
            loader.error(entry, "preload map value should be a string JWT")
            continue
        try:
            decode_account(entry.value)
        except JwtError:
            loader.error(entry, "invalid account JWT")
            continue
        preload[key] = entry.value


@config_key("resolver_pinned_accounts")
def _apply_resolver_pinned_accounts(loader: Loader, name: str, node: Node) -> None:
    loader.opts.resolver_pinned_accounts = string_or_list(loader, node, "resolver_pinned_accounts")


@config_key("trusted", "trusted_keys")
def _apply_trusted(loader: Loader, name: str, node: Node) -> None:
    keys = string_or_list(loader, node, "trusted")
    loader.opts.trusted_keys = keys
    for key in keys:
        if not is_valid_public_key(key, PREFIX_OPERATOR):
            loader.error(node, f'trust key "{key}" required to be a valid public operator nkey')


@config_key("default_sentinel")
def _apply_default_sentinel(loader: Loader, name: str, node: Node) -> None:
    loader.opts.default_sentinel = want_str(loader, node)


def startup_problems(opts: Options) -> list[str]:
    """validateTrustedOperators: what operator mode does not combine with."""
    if not opts.operator_jwts:
        if opts.default_sentinel:
            return ["default sentinel requires operators and accounts"]
        return []
    operators = []
    for token in opts.operator_jwts:
        try:
            operators.append(decode_operator(token))
        except JwtError as e:
            return [f"error parsing operator JWT: {e}"]
    if opts.default_sentinel:
        try:
            sentinel = decode_user(opts.default_sentinel)
        except JwtError:
            return ["default sentinel JWT not valid"]
        scoped = sentinel.issuer_account and sentinel.has_empty_permissions()
        if not sentinel.bearer_token and not scoped:
            return ["default sentinel must be a bearer token"]
    if not opts.resolver:
        return ["operators require an account resolver to be configured"]
    if opts.accounts:
        return ["operators do not allow Accounts to be configured directly"]
    if opts.users:
        return ["operators do not allow users to be configured directly"]
    if opts.trusted_keys:
        return ["conflicting options for 'TrustedKeys' and 'TrustedOperators'"]
    if opts.system_account:
        named = [op.system_account for op in operators if op.system_account]
        if named and opts.system_account not in named:
            return ["system_account in config and operator JWT must be identical"]
    elif not operators[0].system_account and opts.resolver in ("FULL", "CACHE"):
        return [
            "using nats based account resolver - the system account needs to be specified in "
            "configuration or the operator jwt"
        ]
    for key in opts.resolver_pinned_accounts:
        if not is_valid_public_key(key, PREFIX_ACCOUNT):
            return [f'pinned account key "{key}" is not a valid public account nkey']
    if opts.resolver == "URL":
        # nats-server would fetch account JWTs over HTTP; pynatsd does not (yet).
        return [
            f"URL account resolver ({opts.resolver_url}) is not supported by pynatsd; use "
            "resolver: MEMORY with resolver_preload, or a directory resolver"
        ]
    return []
