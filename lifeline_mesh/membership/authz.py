"""The mesh's authorizer: the caller's identity from its verified certificate, its role,
and the refusals (other mesh, revoked, a reader that would write).

The caller's identity comes only from the certificate TLS verified (the gRPC auth context,
read into a :class:`~lifeline_mesh.transport.authz.PeerIdentity`), never from a message.
What each :class:`~lifeline_mesh.transport.authz.MeshRole` may do is
``transport.authz.ROLE_ACCESS``; a revoked node is refused on every call, from this node's
revocation list. :class:`MeshAuthorizer` is the transport's ``Authorizer`` for every
service of a node with TLS (sync sessions, Watch, Membership); its refusals travel as gRPC
status codes through the one table in ``transport/errors.py``.

A certificate's expiry is checked on every call too: TLS checks it only in the handshake,
and a connection outlives it (a CI runner's Watch call keeps its connection open past
``--job-ttl``), decision 0131.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from dataclasses import replace

from lifeline.errors import NotAuthenticated, PeerError, PermissionDenied
from lifeline.wording import noun
from lifeline_mesh.home.mesh_state import MEMBERS, REVOCATIONS
from lifeline_mesh.home.node_home import NodeHome
from lifeline_mesh.membership.certs import CertIdentity, identity_from_cert
from lifeline_mesh.membership.registry import Registry
from lifeline_mesh.membership.revocation import RevocationList
from lifeline_mesh.transport.authz import ROLE_ACCESS, Access, MeshRole, PeerIdentity

__all__ = ["MeshAuthorizer", "authorize", "cert_identity"]


def cert_identity(peer: PeerIdentity) -> CertIdentity:
    """The caller's verified identity (node id, mesh id, role) from its auth context."""
    pems = peer.auth_context.get("x509_pem_cert") or ()
    if not pems:
        raise NotAuthenticated(
            "caller presented no client certificate; only mesh members may call this — "
            "join with `lifeline-mesh join -`"
        )
    try:
        return identity_from_cert(pems[0])
    except PeerError as exc:
        raise NotAuthenticated(str(exc)) from exc


def authorize(node_id: str, role: MeshRole, access: Access, revoked_at: str | None = None) -> None:
    """Raise PermissionDenied unless a node of ``role`` may have ``access``."""
    if revoked_at is not None:
        raise PermissionDenied(f"node {node_id} was revoked at {revoked_at}; it may not connect")
    if access not in ROLE_ACCESS[role]:
        raise PermissionDenied(
            f"node {node_id} has role {role.value!r}, which may not {access.value}; "
            "ask a mesh member to invite it with --role member"
        )


class MeshAuthorizer:
    """Checks callers against this node's mesh id, revocations and members registry.

    Files are re-read when they change, so a revocation imported by sync applies to the
    next call without a restart.
    """

    def __init__(
        self,
        home: NodeHome,
        mesh_id: str,
        clock: Callable[[], dt.datetime] = lambda: dt.datetime.now(dt.UTC),
    ) -> None:
        self.home = home
        self.mesh_id = mesh_id
        self.clock = clock
        self._stamp: tuple[int, int] | None = None
        self._revoked = RevocationList({})
        self._roles: dict[str, MeshRole] = {}

    def _refresh(self) -> None:
        state = self.home.documents  # files, or a hub's database (read again every 2 s)
        stamp = (state.stamp(REVOCATIONS), state.stamp(MEMBERS))
        if stamp != self._stamp:
            self._revoked = RevocationList.load(self.home)
            registry = Registry.load(self.home) if stamp[1] else None
            members = registry.members.values() if registry else []
            self._roles = {m.node_id: m.role for m in members}
            self._stamp = (stamp[0], stamp[1])

    def check(self, peer: CertIdentity, access: Access) -> CertIdentity:
        """The caller, with the role it holds here; PermissionDenied when refused."""
        if peer.mesh_id != self.mesh_id:
            raise PermissionDenied(
                f"node {peer.node_id} holds a certificate of mesh {peer.mesh_id}, not ours "
                f"({self.mesh_id})"
            )
        if peer.expires is not None and peer.expires <= self.clock():
            # The handshake found it valid; the connection has outlived it.
            raise NotAuthenticated(
                f"node {peer.node_id}'s certificate expired at "
                f"{peer.expires.isoformat(timespec='seconds')}; connect again with a valid "
                "one (a CI runner: a new job enrolls a new runner)"
            )
        self._refresh()
        # The registry may narrow a role after the certificate was issued, never widen it:
        # a members list copied from a peer must not turn a reader into a writer.
        roles = {peer.role, self._roles.get(peer.node_id, peer.role)}
        role = MeshRole.READER if MeshRole.READER in roles else peer.role
        authorize(peer.node_id, role, access, self._revoked.revoked_at(peer.node_id))
        return replace(peer, role=role)

    def may_send(self, node_id: str, served: CertIdentity | None) -> str | None:
        """Why the node ``node_id``, dialed by us (``served``: the certificate it served
        with, when known), may not send us items — a reader — or None. A caller is checked
        by :meth:`check`; a node we dial must be held to the same rule, or a reader gets its
        writes in by being dialed (a static peer, a watch-back, a plain ``sync``)."""
        self._refresh()
        role = served.role if served is not None else self._roles.get(node_id)
        if role is None:
            return None  # neither served nor listed: the session's signers decide
        if self._roles.get(node_id) is MeshRole.READER:
            role = MeshRole.READER  # narrowed since the certificate, never widened
        try:
            authorize(node_id, role, Access.WRITE)
        except PermissionDenied as exc:
            return str(exc)
        return None

    def caller(self, peer: PeerIdentity, access: Access) -> CertIdentity:
        """Who ``peer`` is, once allowed ``access``: NotAuthenticated without a mesh
        certificate, PermissionDenied when refused."""
        return self.check(cert_identity(peer), access)

    async def authenticate(self, peer: PeerIdentity) -> None:
        """The transport's first check: a certificate of our mesh, not revoked."""
        self.caller(peer, Access.READ)

    async def authorize(self, peer: PeerIdentity, line: str, access: Access) -> None:
        """The transport's hook: the same check for every line, but for a node whose
        certificate names its only lines (a CI runner's, decision 0120)."""
        who = self.caller(peer, access)
        if not who.may_use(line):
            raise PermissionDenied(
                f"node {who.node_id} may use only {noun(len(who.lines), 'line')} "
                f"{', '.join(who.lines)}, not "
                f"{line!r} (its CI credential {who.credential or '?'!r} names them); mint "
                "the credential with that line in --lines to let its jobs use it"
            )
