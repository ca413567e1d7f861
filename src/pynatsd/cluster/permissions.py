"""Route permissions: what a server accepts from its peers and announces to them.

Corresponds to nats-server's `setRoutePermissions`, `canImport`, `canExport` and
`importFilter` (`server/route.go`). `cluster { permissions { import, export } }` are a route's
publish and subscribe permissions: `import` is what this server takes in, so local interest is
announced to a peer (RS+/RS-) only for subjects it may import; `export` is what it sends out,
so a peer's RS+ for a subject it may not export is ignored, and a message on a subject the
export deny list names is not sent even through a wider subscription the peer was allowed
(`deny_delivery`). A message that arrives (RMSG) is never checked: the peer only sends what it
was told about. The INFO a server sends its routes carries its own `import` and `export`.
"""

from __future__ import annotations

from typing import Any

from pynatsd.auth import PermissionChecker
from pynatsd.options import Permissions, SubjectPermission


def route_permissions(perms: Permissions | None) -> PermissionChecker:
    """One route's checker (its own caches and delivery filter): import is publish, export is
    subscribe, as the configuration reads them."""
    return PermissionChecker(perms)


def subject_permission_json(permission: SubjectPermission | None) -> dict[str, Any] | None:
    """nats-server's SubjectPermission in JSON (`allow` and `deny`, each left out when empty);
    None for no permission at all."""
    if permission is None:
        return None
    out: dict[str, Any] = {}
    if permission.allow:
        out["allow"] = list(permission.allow)
    if permission.deny:
        out["deny"] = list(permission.deny)
    return out


def info_fields(perms: Permissions | None) -> dict[str, Any]:
    """The `import` and `export` of a route INFO (or of /routez), those that are set."""
    if perms is None:
        return {}
    out: dict[str, Any] = {}
    for key, permission in (("import", perms.publish), ("export", perms.subscribe)):
        value = subject_permission_json(permission)
        if value is not None:
            out[key] = value
    return out
