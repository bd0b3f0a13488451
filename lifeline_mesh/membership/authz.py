"""Who is calling, and may they: identity from the verified certificate, roles, refusals.

The server takes the caller's identity only from the certificate TLS verified (gRPC auth
context), never from a message. A member reads and writes shared lines; a reader only
receives. A revoked node is refused on every call, from this node's revocation list.
Refusals are PeerError subclasses mapped to gRPC status codes by one table, and on the
client side :func:`peer_error_from_rpc` turns a failed call back into a clear PeerError.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Literal

import grpc

from lifeline.errors import NotAuthenticated, PeerError, PermissionDenied
from lifeline_mesh.home.node_home import NodeHome
from lifeline_mesh.membership.certs import CertIdentity, identity_from_cert
from lifeline_mesh.membership.registry import Registry
from lifeline_mesh.membership.revocation import RevocationList
from lifeline_mesh.transport.errors import not_lifeline_mesh

__all__ = [
    "Action",
    "Authorizer",
    "NotAuthenticated",
    "PermissionDenied",
    "authorize",
    "cert_identity_from_context",
    "identity_from_context",
    "peer_error_from_rpc",
    "status_for",
]

Action = Literal["read", "write"]
_ALLOWED: dict[str, frozenset[str]] = {
    "member": frozenset({"read", "write"}),
    "reader": frozenset({"read"}),
}


def status_for(exc: PeerError) -> grpc.StatusCode:
    """The one table from our refusals to gRPC status codes."""
    if isinstance(exc, NotAuthenticated):
        return grpc.StatusCode.UNAUTHENTICATED
    if isinstance(exc, PermissionDenied):
        return grpc.StatusCode.PERMISSION_DENIED
    return grpc.StatusCode.FAILED_PRECONDITION


def identity_from_context(context: Any) -> tuple[str, str]:
    """``(node_id, mesh_id)`` of the caller, from the certificate TLS verified."""
    peer = cert_identity_from_context(context)
    return peer.node_id, peer.mesh_id


def cert_identity_from_context(context: Any) -> CertIdentity:
    """The caller's verified identity (node id, mesh id, role) from ``auth_context()``."""
    auth = context.auth_context()
    pems = auth.get("x509_pem_cert") or []
    if not pems:
        raise NotAuthenticated(
            "caller presented no client certificate; only mesh members may call this — "
            "join with `lifeline-mesh join -`"
        )
    try:
        return identity_from_cert(pems[0])
    except PeerError as exc:
        raise NotAuthenticated(str(exc)) from exc


def authorize(node_id: str, role: str, action: Action, revoked_at: str | None = None) -> None:
    """Raise PermissionDenied unless a node of ``role`` may do ``action``."""
    if revoked_at is not None:
        raise PermissionDenied(f"node {node_id} was revoked at {revoked_at}; it may not connect")
    if action not in _ALLOWED.get(role, frozenset()):
        raise PermissionDenied(
            f"node {node_id} has role {role!r}, which may not {action}; "
            "ask a mesh member to invite it with --role member"
        )


class Authorizer:
    """Checks callers against this node's mesh id, revocations and members registry.

    Files are re-read when they change, so a revocation imported by sync applies to the
    next call without a restart.
    """

    def __init__(self, home: NodeHome, mesh_id: str) -> None:
        self.home = home
        self.mesh_id = mesh_id
        self._stamp: tuple[int, int] | None = None
        self._revoked = RevocationList({})
        self._roles: dict[str, str] = {}

    def _refresh(self) -> None:
        paths = [self.home.revocations_path, self.home.members_path]
        stamp = (*(p.stat().st_mtime_ns if p.exists() else 0 for p in paths),)
        if stamp != self._stamp:
            self._revoked = RevocationList.load(self.home)
            registry = Registry.load(self.home) if paths[1].exists() else None
            members = registry.members.values() if registry else []
            self._roles = {m.node_id: m.role for m in members}
            self._stamp = (stamp[0], stamp[1])

    def check(self, peer: CertIdentity, action: Action) -> CertIdentity:
        if peer.mesh_id != self.mesh_id:
            raise PermissionDenied(
                f"node {peer.node_id} holds a certificate of mesh {peer.mesh_id}, not ours "
                f"({self.mesh_id})"
            )
        self._refresh()
        # The registry may narrow a role after the certificate was issued, never widen it:
        # a members list copied from a peer must not turn a reader into a writer.
        roles = {peer.role, self._roles.get(peer.node_id, peer.role)}
        role = "reader" if "reader" in roles else peer.role
        authorize(peer.node_id, role, action, self._revoked.revoked_at(peer.node_id))
        return replace(peer, role=role)

    def check_node(self, node_id: str, action: Action) -> None:
        """For callers that hold only a node id: role from the registry, unknown → refused."""
        self._refresh()
        role = self._roles.get(node_id)
        if role is None:
            raise PermissionDenied(f"node {node_id} is not in this node's members list")
        authorize(node_id, role, action, self._revoked.revoked_at(node_id))

    def __call__(self, context: Any, action: Action) -> CertIdentity:
        return self.check(cert_identity_from_context(context), action)


_HANDSHAKE_HINTS = (
    "handshake",
    "ssl",
    "certificate",
    "tls",
    "alert",
    "socket closed",
    "verification",
)


def peer_error_from_rpc(exc: grpc.RpcError, target: str) -> PeerError:
    """Turn a failed call into a PeerError that says refused, not merely unavailable."""
    code = exc.code() if hasattr(exc, "code") else None
    details = (exc.details() if hasattr(exc, "details") else None) or str(exc)
    if code == grpc.StatusCode.UNAUTHENTICATED:
        return NotAuthenticated(f"{target} refused us as not authenticated: {details}")
    if code == grpc.StatusCode.PERMISSION_DENIED:
        return PermissionDenied(f"{target} refused us: {details}")
    if code == grpc.StatusCode.DEADLINE_EXCEEDED:
        return PeerError(f"{target} timed out ({details}); is it overloaded or far away?")
    lowered = details.lower()
    if code == grpc.StatusCode.UNAVAILABLE and (wrong := not_lifeline_mesh(details, target)):
        return wrong
    if code == grpc.StatusCode.UNAVAILABLE and any(h in lowered for h in _HANDSHAKE_HINTS):
        return NotAuthenticated(
            f"refused: {target} and this node do not trust each other (TLS handshake failed: "
            f"{_reason(details)}) — not a member of this mesh, a certificate of another mesh, "
            "or a revoked node; check `lifeline-mesh members` on both sides"
        )
    if code == grpc.StatusCode.UNAVAILABLE:
        return PeerError(f"{target} is unreachable ({details}); is the node running?")
    return PeerError(f"{target} failed the call: {code} {details}")


def _reason(details: str) -> str:
    """The informative tail of gRPC's handshake error (e.g. CERTIFICATE_VERIFY_FAILED ...)."""
    for marker in ("SSL_ERROR_SSL: ", "Tls handshake failed "):
        if marker in details:
            tail = details.split(marker, 1)[1]
            return tail.split(":", 2)[-1].strip(" :OK") if "error:" in tail else tail.strip()
    return details.strip()
