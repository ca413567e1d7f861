"""The `accounts` block (each account's users, limits, JetStream limits, exports and imports),
`system_account` and `no_system_account`, as nats-server's `parseAccounts` and
`parseJetStreamForAccount` (server/opts.go) read them, and the system account check
`configureAccounts` (server/server.go) makes at start-up. Exports and imports are read in
`exports_imports`.
"""

from __future__ import annotations

from pynatsd.auth.keys import PREFIX_ACCOUNT, is_valid_public_key
from pynatsd.config.exports_imports import (
    PendingExport,
    PendingImport,
    check_exports,
    check_imports,
    parse_exports,
    parse_imports,
)
from pynatsd.config.mappings import parse_mappings
from pynatsd.config.parser import ConfigError, Node, to_plain
from pynatsd.config.registry import (
    Abort,
    Loader,
    config_key,
    setters,
    unsupported,
    want_int,
    want_str,
)
from pynatsd.config.users import parse_permissions, parse_users
from pynatsd.config.values import go_quote, go_type
from pynatsd.options import AccountConfig, JetStreamAccountLimits, Options, User
from pynatsd.subjects import is_valid_publish_subject

GLOBAL_ACCOUNT = "$G"
SYSTEM_ACCOUNT = "$SYS"

setters(((("no_system_account", "no_system", "no_sys_acc"), "no_system_account", "boolean"),))

unsupported("accounts", "default_js_domain")


@config_key("system_account", "system")
def _apply_system_account(loader: Loader, name: str, node: Node) -> None:
    if not isinstance(node.value, str):
        raise loader.abort(node, "system account name must be a string")
    loader.opts.system_account = node.value


@config_key("accounts")
def _apply_accounts(loader: Loader, name: str, node: Node) -> None:
    value = node.value
    exports: list[PendingExport] = []
    imports: list[PendingImport] = []
    if isinstance(value, list):
        _apply_account_names(loader, value)
    elif isinstance(value, dict):
        opts = loader.opts
        known = {u.username for u in opts.users if u.username} | {
            u.nkey for u in opts.users if u.nkey
        }
        for account_name, entry in value.items():
            if entry.used_variable:
                continue
            if not isinstance(entry.value, dict):
                loader.error(entry, "Expected map entries for accounts")
                continue
            if account_name == GLOBAL_ACCOUNT:
                loader.error(entry, f'"{account_name}" is a Reserved Account')
                continue
            account = AccountConfig(account_name)
            opts.accounts[account_name] = account
            _parse_account(loader, account, entry.value, known, exports, imports)
    if loader.errors:
        # nats-server stops here when anything before failed: exports and imports are only
        # checked in a configuration that is otherwise valid.
        return
    check_exports(loader, node, exports)
    check_imports(loader, node, imports)


def _apply_account_names(loader: Loader, elements: list[Node]) -> None:
    """`accounts: [a, b]`: a plain list of account names."""
    seen: set[str] = set()
    for element in elements:
        account_name = want_str(loader, element)
        if account_name == GLOBAL_ACCOUNT:
            loader.error(element, f'"{account_name}" is a Reserved Account')
            continue
        if account_name in seen:
            loader.error(element, f"Duplicate Account Entry: {account_name}")
            continue
        seen.add(account_name)
        loader.opts.accounts[account_name] = AccountConfig(account_name)


def _parse_account(
    loader: Loader,
    account: AccountConfig,
    fields: dict[str, Node],
    known: set[str],
    exports: list[PendingExport],
    imports: list[PendingImport],
) -> None:
    users: list[User] = []
    nkeys: list[User] = []
    users_node: Node | None = None
    for key, entry in fields.items():
        lowered = key.lower()
        try:
            if lowered == "nkey":
                _parse_account_nkey(loader, account, entry)
            elif lowered == "imports":
                imports.extend(parse_imports(loader, account, entry))
            elif lowered == "exports":
                exports.extend(parse_exports(loader, account, entry))
            elif lowered == "jetstream":
                account.jetstream = _parse_account_jetstream(loader, entry)
            elif lowered == "users":
                users_node = entry
                users, nkeys = parse_users(loader, key, entry)
            elif lowered == "default_permissions":
                account.default_permissions = parse_permissions(loader, entry)
            elif lowered in ("mappings", "maps"):
                account.mappings = parse_mappings(loader, entry)
            elif lowered == "limits":
                _parse_account_limits(loader, account, entry)
            elif lowered in ("msg_trace", "trace_dest"):
                _parse_account_msg_trace(loader, account, key, entry)
            else:
                loader.unknown(key, entry)
        except Abort:
            continue
    if users or nkeys:
        assert users_node is not None
        _add_account_users(loader, account, users_node, users, nkeys, known)


def _parse_account_msg_trace(loader: Loader, account: AccountConfig, key: str, entry: Node) -> None:
    """`msg_trace: "subject"` or `msg_trace { dest: subject, sampling: 50% }`: where the traces
    of messages with a sampled `traceparent` header go (nats-server's parseAccountMsgTrace)."""
    value = entry.value
    if isinstance(value, str):
        _set_trace_dest(loader, account, key, entry)
    elif isinstance(value, dict):
        for field_name, node in value.items():
            lowered = field_name.lower()
            if lowered == "dest":
                _set_trace_dest(loader, account, field_name, node)
            elif lowered == "sampling":
                account.trace_sampling = _trace_sampling(loader, field_name, node)
            elif not node.used_variable:
                raise loader.abort(
                    node,
                    f"Unknown field {go_quote(field_name)} parsing account message trace "
                    f"map/struct {go_quote(key)}",
                )
    else:
        raise loader.abort(
            entry,
            f"Expected account message trace {go_quote(key)} to be a string or a "
            f"map/struct, got {go_type(to_plain(value))}",
        )
    if account.trace_dest and account.trace_sampling == 0:
        account.trace_sampling = 100
    elif account.trace_sampling > 0 and not account.trace_dest:
        loader.warnings.append(
            f"{entry.where}: Trace destination sampling ignored since no destination was set"
        )
        account.trace_sampling = 0


def _set_trace_dest(loader: Loader, account: AccountConfig, key: str, node: Node) -> None:
    dest = node.value
    if not isinstance(dest, str):
        raise loader.abort(
            node, f"Field {go_quote(key)} should be a string, got {go_type(to_plain(dest))}"
        )
    if not is_valid_publish_subject(dest):
        raise loader.abort(node, f"Trace destination {go_quote(dest)} is not valid")
    account.trace_dest = dest


def _trace_sampling(loader: Loader, key: str, node: Node) -> int:
    value = node.value
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise loader.abort(
            node,
            f"Trace destination sampling field {go_quote(key)} should be an integer or a "
            f"percentage, got {go_type(to_plain(value))}",
        )
    if isinstance(value, str):
        text = value.removesuffix("%")
        try:
            value = int(text, 10)
        except ValueError:
            raise loader.abort(
                node, f"Invalid trace destination sampling value {go_quote(node.value)}"
            ) from None
    if value <= 0 or value > 100:
        # Spelled as nats-server spells it.
        raise loader.abort(
            node, f"Ttrace destination sampling value {value} is invalid, needs to be [1..100]"
        )
    return value


def _parse_account_nkey(loader: Loader, account: AccountConfig, entry: Node) -> None:
    nkey = entry.value
    if not isinstance(nkey, str) or not is_valid_public_key(nkey, PREFIX_ACCOUNT):
        loader.error(entry, f"Not a valid public nkey for an account: {go_quote(nkey)}")
        return
    account.nkey = nkey


def _add_account_users(
    loader: Loader,
    account: AccountConfig,
    users_node: Node,
    users: list[User],
    nkeys: list[User],
    known: set[str],
) -> None:
    """An account's users join the server's, bound to the account; `known` are the names and
    nkeys taken so far."""
    opts = loader.opts
    if opts.username:
        loader.error(users_node, "Can not have a single user/pass and accounts")
        return
    if opts.authorization:
        loader.error(users_node, "Can not have a token and accounts")
        return
    for user in [*users, *nkeys]:
        if user.permissions is None and account.default_permissions is not None:
            user.permissions = account.default_permissions
    for user in nkeys:
        if user.nkey in known:
            loader.error(users_node, f'Duplicate nkey "{user.nkey}" detected')
            continue
        known.add(user.nkey)
        user.account = account.name
        opts.users.append(user)
    for user in users:
        if user.username in known:
            loader.error(users_node, f'Duplicate user "{user.username}" detected')
            continue
        known.add(user.username)
        user.account = account.name
        opts.users.append(user)


def _parse_account_limits(loader: Loader, account: AccountConfig, node: Node) -> None:
    if not isinstance(node.value, dict):
        raise loader.abort(
            node, f"Expected account limits to be a map/struct, got {to_plain(node.value)}"
        )
    limits = account.limits
    for key, entry in node.value.items():
        lowered = key.lower()
        if lowered in ("max_connections", "max_conn"):
            limits.max_connections = want_int(loader, entry)
        elif lowered in ("max_subscriptions", "max_subs"):
            limits.max_subscriptions = want_int(loader, entry)
        elif lowered in ("max_payload", "max_pay"):
            limits.max_payload = want_int(loader, entry)
        elif lowered in ("max_leafnodes", "max_leafs"):
            limits.max_leafnodes = want_int(loader, entry)
        elif not entry.used_variable:
            loader.error(entry, f'Unknown field "{key}" parsing account limits')


# Lower-cased key of an account's `jetstream` map -> JetStreamAccountLimits attribute.
_JS_ACCOUNT_SIZES = {
    "max_memory": "max_memory",
    "max_mem": "max_memory",
    "mem": "max_memory",
    "memory": "max_memory",
    "max_store": "max_store",
    "max_file": "max_store",
    "max_disk": "max_store",
    "store": "max_store",
    "disk": "max_store",
    "max_streams": "max_streams",
    "streams": "max_streams",
    "max_consumers": "max_consumers",
    "consumers": "max_consumers",
    "mem_max_stream_bytes": "memory_max_stream_bytes",
    "memory_max_stream_bytes": "memory_max_stream_bytes",
    "disk_max_stream_bytes": "store_max_stream_bytes",
    "store_max_stream_bytes": "store_max_stream_bytes",
    "max_ack_pending": "max_ack_pending",
}


def _parse_account_jetstream(loader: Loader, node: Node) -> JetStreamAccountLimits | None:
    value = node.value
    if isinstance(value, bool):
        return JetStreamAccountLimits() if value else None
    # nats-server reports these two without a position (it has lost the token by then).
    if isinstance(value, str):
        state = value.lower()
        if state in ("enabled", "enable"):
            return JetStreamAccountLimits()
        if state in ("disabled", "disable"):
            return None
        loader.errors.append(
            ConfigError(f"Expected 'enabled' or 'disabled' for string value, got '{value}'")
        )
        raise Abort()
    if not isinstance(value, dict):
        loader.errors.append(
            ConfigError(f"Expected map, bool or string to define JetStream, got {go_type(value)}")
        )
        raise Abort()
    return _parse_account_jetstream_limits(loader, value)


def _parse_account_jetstream_limits(
    loader: Loader, fields: dict[str, Node]
) -> JetStreamAccountLimits:
    limits = JetStreamAccountLimits()
    for key, entry in fields.items():
        lowered = key.lower()
        shown = to_plain(entry.value)
        if lowered in _JS_ACCOUNT_SIZES:
            if isinstance(entry.value, bool) or not isinstance(entry.value, int):
                raise loader.abort(entry, f'Expected a parseable size for "{key}", got {shown}')
            setattr(limits, _JS_ACCOUNT_SIZES[lowered], entry.value)
        elif lowered in ("max_bytes_required", "max_stream_bytes", "max_bytes"):
            if not isinstance(entry.value, bool):
                raise loader.abort(entry, f'Expected a parseable bool for "{key}", got {shown}')
            limits.max_bytes_required = entry.value
        elif lowered == "cluster_traffic":
            if entry.value not in ("system", "owner", ""):
                raise loader.abort(
                    entry, f"Expected 'system' or 'owner' string value for \"{key}\", got {shown}"
                )
        elif not entry.used_variable:
            loader.error(entry, f'unknown field "{key}"')
    return limits


def startup_problems(opts: Options) -> list[str]:
    """configureAccounts: a `system_account` must name an account (or `$SYS`)."""
    system = opts.system_account
    if (
        system
        and not opts.operator_jwts
        and not opts.trusted_keys
        and system != SYSTEM_ACCOUNT
        and system not in opts.accounts
    ):
        return ["error resolving system account: account missing"]
    return []
