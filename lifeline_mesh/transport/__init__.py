"""gRPC transport of mesh sync: addresses, status mapping, authorization hook, server, client."""

from __future__ import annotations

from lifeline_mesh.transport.authz import Access, AllowAll, Authorizer, PeerIdentity
from lifeline_mesh.transport.client import sync_line
from lifeline_mesh.transport.errors import Refused
from lifeline_mesh.transport.server import SyncServer

__all__ = [
    "Access",
    "AllowAll",
    "Authorizer",
    "PeerIdentity",
    "Refused",
    "SyncServer",
    "sync_line",
]
