"""Users and permissions, as both the `authorization` block and an account's `users` write them.

The counterparts are nats-server's `parseUsers`, `parseAllowedConnectionTypes`,
`parseUserPermissions`, `parseVariablePermissions`, `parseSubjectPermission`,
`parsePermSubjects` and `parseAllowResponses` (server/opts.go), and the nkey check of
`nkeys.IsValidPublicUserKey`.
"""

from __future__ import annotations

import base64
import binascii

from pynatsd.config.parser import ConfigError, Node, to_plain
from pynatsd.config.registry import Loader
from pynatsd.config.values import NANOS, go_type
from pynatsd.gofmt import parse_go_duration
from pynatsd.options import Permissions, ResponsePermission, SubjectPermission, User
from pynatsd.subjects import is_valid_subject

_CONNECTION_TYPES = frozenset(
    {"STANDARD", "WEBSOCKET", "LEAFNODE", "LEAFNODE_WS", "MQTT", "MQTT_WS", "IN_PROCESS"}
)
_USER_NKEY_PREFIX = 20 << 3  # the byte that base32-encodes to a leading 'U'


def _crc16(data: bytes) -> int:
    crc = 0
    for byte in data:
        crc ^= byte << 8
        for _ in range(8):
            crc = ((crc << 1) ^ 0x1021) if crc & 0x8000 else crc << 1
            crc &= 0xFFFF
    return crc


def is_valid_user_nkey(key: str) -> bool:
    """A public user nkey: base32 of the 'U' prefix byte, 32 key bytes and a CRC16."""
    try:
        raw = base64.b32decode(key + "=" * (-len(key) % 8))
    except (binascii.Error, ValueError):
        return False
    if len(raw) != 35 or raw[0] != _USER_NKEY_PREFIX:
        return False
    return _crc16(raw[:-2]) == int.from_bytes(raw[-2:], "little")


# -- users ---------------------------------------------------------------------------------------


def parse_users(loader: Loader, key: str, node: Node) -> tuple[list[User], list[User]]:
    """A `users` array: (users with a name, users with an nkey)."""
    if not isinstance(node.value, list):
        raise loader.abort(node, f"Expected users field to be an array, got {to_plain(node.value)}")
    users: list[User] = []
    nkeys: list[User] = []
    for element in node.value:
        if not isinstance(element.value, dict):
            loader.error(
                element,
                f"Expected user entry to be a map/struct, got {to_plain(element.value)}",
            )
            continue
        user, last = _parse_user(loader, element, element.value)
        if not user.nkey and not user.username:
            raise loader.abort(last, "User entry requires a user")
        if user.nkey:
            if not is_valid_user_nkey(user.nkey):
                raise loader.abort(last, "Not a valid public nkey for a user")
            if user.username or user.password:
                raise loader.abort(last, "Nkey users do not take usernames or passwords")
            nkeys.append(user)
        else:
            users.append(user)
    return users, nkeys


def _parse_user(loader: Loader, element: Node, fields: dict[str, Node]) -> tuple[User, Node]:
    """One user entry, and its last field (where nats-server reports what the entry lacks)."""
    user = User()
    last = element
    for field_name, entry in fields.items():
        last = entry
        lowered = field_name.lower()
        if lowered == "nkey":
            user.nkey = loader.string(field_name, entry)
        elif lowered in ("user", "username"):
            user.username = loader.string(field_name, entry)
        elif lowered in ("pass", "password"):
            user.password = loader.string(field_name, entry)
        elif lowered in ("permission", "permissions", "authorization"):
            user.permissions = parse_permissions(loader, entry)
        elif lowered in ("allowed_connection_types", "connection_types", "clients"):
            user.allowed_connection_types = _connection_types(loader, field_name, entry)
        elif lowered == "proxy_required":
            loader.boolean(field_name, entry)
            loader.ignore(f"users.{field_name}", entry, "proxies")
        else:
            loader.unknown(field_name, entry)
    return user, last


def _connection_types(loader: Loader, key: str, node: Node) -> set[str] | None:
    value = node.value
    if isinstance(value, str):
        names = [value]
    elif isinstance(value, list):
        names = []
        for element in value:
            if isinstance(element.value, str):
                names.append(element.value)
            else:
                loader.error(
                    element,
                    "error parsing allowed connection types: unsupported type in array "
                    f"{go_type(element.value)}",
                )
    else:
        loader.error(
            node, f"error parsing allowed connection types: unsupported type {go_type(value)}"
        )
        return None
    wanted = [n.upper() for n in names]
    unknown = [n for n in wanted if n not in _CONNECTION_TYPES]
    if unknown:
        loader.error(node, "invalid connection types [" + " ".join(f'"{n}"' for n in unknown) + "]")
    return {n for n in wanted if n in _CONNECTION_TYPES}


# -- permissions ---------------------------------------------------------------------------------


def parse_permissions(loader: Loader, node: Node) -> Permissions | None:
    """A `permissions` map (publish, subscribe, allow_responses); None when it is not a map."""
    if not isinstance(node.value, dict):
        loader.error(node, f"Expected permissions to be a map/struct, got {to_plain(node.value)}")
        return None
    perms = Permissions()
    for key, entry in node.value.items():
        lowered = key.lower()
        if lowered in ("pub", "publish", "import"):
            perms.publish = _subject_permission(loader, entry, allow_queue=False)
        elif lowered in ("sub", "subscribe", "export"):
            perms.subscribe = _subject_permission(loader, entry, allow_queue=True)
        elif lowered in ("publish_allow_responses", "allow_responses"):
            if isinstance(entry.value, bool):
                perms.response = ResponsePermission() if entry.value else None
            else:
                perms.response = _response_permission(loader, entry)
            if perms.response is not None:
                # Responses alone turn off the blanket "publish anything" of no allow list.
                perms.publish = perms.publish or SubjectPermission()
                if perms.publish.allow is None:
                    perms.publish.allow = []
        elif not entry.used_variable:
            loader.error(entry, f'Unknown field "{key}" parsing permissions')
    return perms


def _subject_permission(
    loader: Loader, node: Node, *, allow_queue: bool
) -> SubjectPermission | None:
    if not isinstance(node.value, dict):
        # nats-server reports a bad subject of a bare list without a position.
        return SubjectPermission(allow=_subjects(loader, node, allow_queue, positioned=False))
    if not node.value:
        return None  # `{}` sets nothing, as in nats-server
    permission = SubjectPermission()
    for key, entry in node.value.items():
        lowered = key.lower()
        if lowered == "allow":
            permission.allow = _subjects(loader, entry, allow_queue)
        elif lowered == "deny":
            permission.deny = _subjects(loader, entry, allow_queue)
        elif not entry.used_variable:
            loader.error(
                entry,
                f'Unknown field name "{key}" parsing subject permissions, '
                "only 'allow' or 'deny' are permitted",
            )
    return permission


def _subjects(
    loader: Loader, node: Node, allow_queue: bool, *, positioned: bool = True
) -> list[str] | None:
    value = node.value
    if isinstance(value, str):
        subjects = [value]
    elif isinstance(value, list):
        subjects = []
        for element in value:
            if not isinstance(element.value, str):
                loader.error(element, "Subject in permissions array cannot be cast to string")
                return None
            subjects.append(element.value)
    else:
        loader.error(
            node,
            "Expected subject permissions to be a subject, or array of subjects, "
            f"got {go_type(value)}",
        )
        return None
    problem = _check_subjects(subjects, allow_queue)
    if problem:
        if positioned:
            loader.error(node, problem)
        else:
            loader.errors.append(ConfigError(problem))
        return None
    # An empty array is no list at all in nats-server (a nil slice), not "nothing allowed".
    return subjects or None


def _check_subjects(subjects: list[str], allow_queue: bool) -> str:
    for subject in subjects:
        if is_valid_subject(subject):
            continue
        # A subscribe permission may name a queue group: "subject queue".
        parts = subject.split()
        if not allow_queue or len(parts) != 2:
            return f'subject "{subject}" is not a valid subject'
        if not is_valid_subject(parts[0]):
            return f'subject "{parts[0]}" is not a valid subject'
        if not is_valid_subject(parts[1]):
            return f'queue "{parts[1]}" is not a valid queue'
    return ""


def _response_permission(loader: Loader, node: Node) -> ResponsePermission | None:
    if not isinstance(node.value, dict):
        loader.error(node, "error parsing response permissions, expected a boolean or a map")
        return None
    permission = ResponsePermission()
    for key, entry in node.value.items():
        lowered = key.lower()
        if lowered in ("max", "max_msgs", "max_messages", "max_responses"):
            # Negative means unlimited; 0 keeps the default.
            permission.max_msgs = loader.integer(key, entry) or permission.max_msgs
        elif lowered in ("expires", "expiration", "ttl"):
            if not isinstance(entry.value, str):
                loader.error(entry, "error parsing expires, not a duration string")
                return None
            try:
                nanos = parse_go_duration(entry.value)
            except ValueError as e:
                loader.error(entry, f"error parsing expires: {e}")
                return None
            permission.expires = nanos / NANOS or permission.expires
        elif not entry.used_variable:
            loader.error(entry, f'Unknown field "{key}" parsing permissions')
    return permission
