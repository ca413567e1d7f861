"""Route permissions: what a server accepts from its peers and announces to them.

Corresponds to nats-server's `setRoutePermissions`, `canImport`, `canExport` and
`importFilter` (`server/route.go`), and their changes: `reloadClusterPermissions`
(`server/reload.go`) and `updateRemoteRoutePerms`. `cluster { permissions { import, export }
}` are a route's publish and subscribe permissions: `import` is what this server takes in, so
local interest is announced to a peer (RS+/RS-) only for subjects it may import; `export` is
what it sends out, so a peer's RS+ for a subject it may not export is ignored, and a message on
a subject the export deny list names is not sent even through a wider subscription the peer was
allowed (`deny_delivery`). A message that arrives (RMSG) is never checked: the peer only sends
what it was told about. The INFO a server sends its routes carries its own `import` and
`export`.

A reload that changes them sends every route the new INFO, announces the local interest it may
import now and could not before (RS+) and withdraws what it no longer may (RS-), and forgets
the peers' interest it may no longer export. A peer whose INFO brings a wider `export` is sent
the local interest that it now lets through.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pynatsd.auth import PermissionChecker
from pynatsd.cluster.protocol import rs_minus_frame, rs_plus_frame
from pynatsd.options import Permissions, SubjectPermission

if TYPE_CHECKING:
    from pynatsd.cluster.cluster import Cluster
    from pynatsd.cluster.route import Route


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


def importable(imports: PermissionChecker, subject: bytes) -> bool:
    """May local interest in `subject` be announced to the peers (canImport)?"""
    return not imports.publish_restricted or imports.allowed_by_rules(
        subject.decode("utf-8", "surrogateescape")
    )


def _exportable(perms: PermissionChecker, subject: bytes) -> bool:
    return not perms.sub_restricted or perms.can_subscribe(
        subject.decode("utf-8", "surrogateescape")
    )


def reload_permissions(cluster: Cluster, perms: Permissions | None) -> None:
    """This server's route permissions changed (nats-server's reloadClusterPermissions)."""
    was, now = cluster.imports, route_permissions(perms)
    cluster.imports = now
    info = cluster.info_frame()
    for route in cluster.connections():
        exports = route.perms = route_permissions(perms)

        def denied(key: tuple[bytes, bytes, bytes], exports: PermissionChecker = exports) -> bool:
            return not _exportable(exports, key[1])

        route.drop_interest(which=denied)
        frames = [info]
        for wire, subject, queue, n in cluster.carried_interest(route):
            then, later = importable(was, subject), importable(now, subject)
            if later and not then:
                frames.append(rs_plus_frame(wire, subject, queue, n))
            elif then and not later:
                frames.append(rs_minus_frame(wire, subject, queue))
        route.send_now(b"".join(frames))


def _export_checker(export: Any) -> PermissionChecker:
    """A checker of a peer's `export` as its INFO gives it."""
    if not isinstance(export, dict):
        return PermissionChecker(None)
    allow, deny = export.get("allow"), export.get("deny")
    return PermissionChecker(
        Permissions(subscribe=SubjectPermission(allow=allow or None, deny=deny or None))
    )


def export_changed(cluster: Cluster, route: Route, was: Any, now: Any) -> None:
    """A peer's `export` changed (nats-server's updateRemoteRoutePerms): the local interest
    it lets through now and did not before, and that this server may import, is announced."""
    then, later = _export_checker(was), _export_checker(now)
    frames = [
        rs_plus_frame(wire, subject, queue, n)
        for wire, subject, queue, n in cluster.carried_interest(route)
        if _exportable(later, subject)
        and not _exportable(then, subject)
        and importable(cluster.imports, subject)
    ]
    if frames:
        route.send_now(b"".join(frames))
