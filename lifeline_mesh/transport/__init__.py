"""gRPC for every service of a node: addresses, channels, the status table, the
authorization hook and roles, the sync server and client."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping
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
    "lazy_exports",
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


def lazy_exports(package: str, homes: Mapping[str, str]) -> Callable[[str], Any]:
    """A package's ``__getattr__`` (PEP 562) for the names of ``homes`` (name -> the module
    that defines it): each is imported when first asked for, then kept in the package."""
    namespace = sys.modules[package].__dict__

    def exported(name: str) -> Any:
        module = homes.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = namespace[name] = getattr(importlib.import_module(module), name)
        return value

    return exported


__getattr__ = lazy_exports(__name__, _HOME)
