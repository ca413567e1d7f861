"""Authentication and authorization: who may connect, publish and subscribe.

- `Authenticator` (authenticator.py): checks a CONNECT against the configuration: tokens, users
  and passwords (bcrypt too), nkeys, operator-mode JWTs, no_auth_user, TLS certificate mapping.
- `PermissionChecker` (permissions.py): one connection's publish/subscribe permissions.
- `jwt`, `keys`, `certs`: NATS JWTs, nkeys and client certificates.

See docs/security.md.
"""

from pynatsd.auth.authenticator import CONNECTION_TYPES, Authenticator, AuthResult, is_bcrypt
from pynatsd.auth.keys import new_nonce
from pynatsd.auth.permissions import SYS_QUEUE, PermissionChecker

__all__ = [
    "CONNECTION_TYPES",
    "SYS_QUEUE",
    "AuthResult",
    "Authenticator",
    "PermissionChecker",
    "is_bcrypt",
    "new_nonce",
]
