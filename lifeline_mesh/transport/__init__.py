"""gRPC for every service of a node: addresses, channels, the status table, the
authorization hook and roles, the sync server and client."""

from __future__ import annotations

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
