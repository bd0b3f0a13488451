"""gRPC for every service of a node: addresses, channels, the status table, the
authorization hook and roles, the sync server and client."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from lifeline_mesh.transport.authz import Access, AllowAll, Authorizer, MeshRole, PeerIdentity
    from lifeline_mesh.transport.client import sync_line
    from lifeline_mesh.transport.errors import Refused
    from lifeline_mesh.transport.server import SyncServer

__all__ = [
    "Access",
    "AllowAll",
    "Authorizer",
    "MeshRole",
    "PeerIdentity",
    "Refused",
    "SyncServer",
    "sync_line",
]

# Where each name lives: imported when first asked for, so that importing one module of
# the package (``transport.authz``) does not load gRPC's client and server for it.
_HOME = {
    "Access": "lifeline_mesh.transport.authz",
    "AllowAll": "lifeline_mesh.transport.authz",
    "Authorizer": "lifeline_mesh.transport.authz",
    "MeshRole": "lifeline_mesh.transport.authz",
    "PeerIdentity": "lifeline_mesh.transport.authz",
    "Refused": "lifeline_mesh.transport.errors",
    "SyncServer": "lifeline_mesh.transport.server",
    "sync_line": "lifeline_mesh.transport.client",
}


def __getattr__(name: str) -> Any:
    module = _HOME.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # asked once
    return value
