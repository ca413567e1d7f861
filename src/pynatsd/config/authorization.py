"""The `authorization` block (a user/password, a token, a users array, default permissions) and
`no_auth_user`, as nats-server's `parseAuthorization` (server/opts.go) reads them, with the
`no_auth_user` check `validateNoAuthUser` (server/auth.go) makes at start-up.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from pynatsd.config.parser import Node
from pynatsd.config.registry import Loader, config_key, setters
from pynatsd.config.users import parse_permissions, parse_users
from pynatsd.config.values import NANOS
from pynatsd.gofmt import parse_go_duration
from pynatsd.options import AUTH_TIMEOUT, Options, Permissions, User

_HIGH_AUTH_TIMEOUT = 60.0

setters(((("no_auth_user",), "no_auth_user", "string"),))


@dataclass(slots=True)
class _Auth:
    user: str = ""
    password: str = ""
    token: str = ""
    timeout: float = 0.0
    users: list[User] | None = None
    nkeys: list[User] = field(default_factory=list)
    default_permissions: Permissions | None = None


@config_key("authorization")
def _apply_authorization(loader: Loader, name: str, node: Node) -> None:
    auth = _parse_authorization(loader, name, node)
    opts = loader.opts
    opts.username, opts.password, opts.authorization = auth.user, auth.password, auth.token
    # 0 (or no timeout) means the default, as nats-server fills it in at start-up.
    opts.auth_timeout = auth.timeout or AUTH_TIMEOUT
    opts.auth_timeout_set = auth.timeout > 0
    if (auth.user or auth.password) and auth.token:
        raise loader.abort(node, "Cannot have a user/pass and token")
    # Users from `accounts {}` (read first) count as a users array too.
    if auth.users is not None or opts.users:
        if auth.user:
            raise loader.abort(node, "Can not have a single user/pass and a users array")
        if auth.token:
            raise loader.abort(node, "Can not have a token and a users array")
    seen = {u.username for u in opts.users if u.username} | {u.nkey for u in opts.users if u.nkey}
    for user in auth.users or []:
        if user.username in seen:
            raise loader.abort(node, f'Duplicate user "{user.username}" detected')
        seen.add(user.username)
        opts.users.append(user)
    for user in auth.nkeys:
        if user.nkey in seen:
            raise loader.abort(node, f'Duplicate nkey "{user.nkey}" detected')
        seen.add(user.nkey)
        opts.users.append(user)


def parse_authorization(loader: Loader, name: str, node: Node) -> _Auth:
    """An `authorization` map as nats-server's parseAuthorization reads it (the cluster block
    has one too)."""
    return _parse_authorization(loader, name, node)


def _parse_authorization(loader: Loader, name: str, node: Node) -> _Auth:
    auth = _Auth()
    for key, entry in loader.mapping(name, node).items():
        lowered = key.lower()
        if lowered in ("user", "username"):
            auth.user = loader.string(key, entry)
        elif lowered in ("pass", "password"):
            auth.password = loader.string(key, entry)
        elif lowered == "token":
            auth.token = loader.string(key, entry)
        elif lowered == "timeout":
            auth.timeout = _auth_timeout(loader, key, entry)
        elif lowered == "users":
            auth.users, auth.nkeys = parse_users(loader, key, entry)
        elif lowered in ("default_permission", "default_permissions", "permissions"):
            auth.default_permissions = parse_permissions(loader, entry)
        elif lowered in ("auth_callout", "auth_hook"):
            loader.ignore(f"{name}.{key}", entry, "auth callout")
        elif lowered == "proxy_required":
            loader.boolean(key, entry)
            loader.ignore(f"{name}.{key}", entry, "proxies")
        else:
            loader.unknown(key, entry)
    if auth.default_permissions is not None:
        for user in [*(auth.users or []), *auth.nkeys]:
            if user.permissions is None:
                user.permissions = auth.default_permissions
    return auth


def _auth_timeout(loader: Loader, key: str, node: Node) -> float:
    value = node.value
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise loader.abort(node, "error parsing authorization config, 'timeout' wrong type")
    if isinstance(value, str):
        try:
            seconds = parse_go_duration(value) / NANOS
        except ValueError as e:
            raise loader.abort(node, f"error parsing authorization config, 'timeout' {e}") from None
    else:
        seconds = float(value)
    if seconds > _HIGH_AUTH_TIMEOUT:
        loader.warn(
            node,
            key,
            f"timeout of {value} ({seconds:f} seconds) is high, consider keeping it under 60 "
            "seconds. possibly caused by unquoted duration; use '1m' instead of 1m, for example",
        )
    return seconds


def startup_problems(opts: Options) -> list[str]:
    """validateNoAuthUser: `no_auth_user` must name a configured user or nkey."""
    if not opts.no_auth_user:
        return []
    if opts.operator_jwts:
        return ["no_auth_user not compatible with Trusted Operator"]
    if not opts.users:
        return [f'no_auth_user: "{opts.no_auth_user}" present, but users/nkeys are not defined']
    if not any(opts.no_auth_user in (u.username, u.nkey) for u in opts.users):
        return [
            f'no_auth_user: "{opts.no_auth_user}" not present as user or nkey in '
            "authorization block or account configuration"
        ]
    return []
