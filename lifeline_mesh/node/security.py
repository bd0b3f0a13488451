"""How a node secures its transport, composed from its files (DESIGN §7).

``TransportSecurity.for_home`` reads the node's mesh certificate, key and CA: mutual TLS
with the membership authorizer, or — only with ``insecure`` and only on loopback — plain
text that lets every caller in. Signers known to the notary are the members registry plus,
for one session, the caller whose certificate TLS just verified. :class:`PeerPins` keeps
the node found serving at each address we dial, so what we send goes to that node or
nowhere, and rows announced there are taken only from it (decision 0046).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import grpc
from cryptography import x509

from lifeline.errors import ConfigError, PermissionDenied
from lifeline.wording import noun
from lifeline_mesh.home.node_home import NodeHome
from lifeline_mesh.membership import RevocationList
from lifeline_mesh.membership.authz import MeshAuthorizer, cert_identity
from lifeline_mesh.membership.ca import load_ca_cert
from lifeline_mesh.membership.certs import CertIdentity, identity_from_cert, mesh_id_of
from lifeline_mesh.membership.tls import (
    MAX_MESSAGE,
    channel_credentials,
    channel_options,
    server_credentials,
    serving_node,
)
from lifeline_mesh.notary.enrollment import EnrolledSigners
from lifeline_mesh.notary.signers import FileSigners, KnownSigners, SignerState, SignerStatus
from lifeline_mesh.transport.authz import (
    AllowAll,
    Authorizer,
    MeshRole,
    OwnUserOnly,
    PeerIdentity,
)
from lifeline_mesh.transport.channels import FRAME_HEADROOM, sized

__all__ = ["PeerPins", "SessionSigners", "TransportSecurity", "peer_node_id", "shared_options"]


def peer_node_id(peer: PeerIdentity) -> str | None:
    """The caller's node id from its verified certificate, or None without TLS."""
    if not peer.auth_context.get("x509_pem_cert"):
        return None
    return cert_identity(peer).node_id


class SessionSigners:
    """Known signers for one session: the registry, plus the authenticated caller."""

    def __init__(self, base: KnownSigners, extra: str | None) -> None:
        self._base = base
        self._extra = extra

    def status(self, node_id: str) -> SignerStatus:
        found = self._base.status(node_id)
        if found.state is SignerState.UNKNOWN and node_id == self._extra:
            return SignerStatus(SignerState.KNOWN)
        return found


def _no_certificate(home: NodeHome) -> str:
    """What to do when ``home`` has no mesh certificate: a hub process root (docs/hub.md)
    gets its credentials from `hub init`, a laptop from `init --new-mesh` or `join`."""
    if home.hub_binding_path.exists():
        return (
            f"{home.root} is a hub process root ({home.relative(home.hub_binding_path)}) with "
            "no mesh certificate: run `lifeline-mesh hub init --store URL` in it again to "
            "issue or copy its TLS credentials (with --new-mesh NAME if the hub is in no mesh "
            "yet; docs/hub.md)"
        )
    return (
        f"{home.root} has no mesh certificate: create a mesh with `lifeline-mesh init "
        "--new-mesh NAME` or join one with `lifeline-mesh join -` (or, on loopback "
        "only, pass --insecure)"
    )


@dataclass
class TransportSecurity:
    insecure: bool
    mesh_id: str | None = None
    authorizer: Authorizer = field(default_factory=AllowAll)
    server_credentials: grpc.ServerCredentials | None = None
    channel_credentials: grpc.ChannelCredentials | None = None
    channel_options: list[tuple[str, Any]] = field(default_factory=list)
    role: MeshRole = MeshRole.MEMBER  # this node's role, from its own certificate
    ca: x509.Certificate | None = None
    ephemeral: bool = False  # a CI runner: its certificate names the credential

    @classmethod
    def for_home(cls, home: NodeHome, *, insecure: bool) -> TransportSecurity:
        if insecure:
            return cls(insecure=True, authorizer=OwnUserOnly())
        if not home.in_mesh():
            raise ConfigError(_no_certificate(home))
        ca = load_ca_cert(home)
        mesh_id = mesh_id_of(ca)
        own = identity_from_cert(home.tls_cert_path.read_bytes())
        return cls(
            insecure=False,
            mesh_id=mesh_id,
            authorizer=MeshAuthorizer(home, mesh_id),
            server_credentials=server_credentials(home),
            channel_credentials=channel_credentials(home),
            channel_options=channel_options(),
            role=own.role,
            ca=ca,
            ephemeral=own.credential is not None,
        )

    def signers(self, home: NodeHome, local: str | None, caller: str | None) -> KnownSigners | None:
        """Without a mesh every valid signature is admitted; with one, members only — and
        the runners whose enrollment the session proves (decision 0024)."""
        if self.insecure:
            return None
        return EnrolledSigners(SessionSigners(FileSigners.current(home, local), caller), self.ca)


class PeerPins:
    """The node found serving at each peer address we dial (its certificate's node id)."""

    def __init__(self, home: NodeHome) -> None:
        self.home = home
        self.known: dict[str, str] = {}
        self.served: dict[str, CertIdentity] = {}  # node id: the certificate it served with

    async def pin(self, peer: str) -> list[tuple[str, Any]]:
        """Channel options that admit only the node serving at ``peer`` — refused when that
        node is revoked, so nothing of ours reaches a revoked node at an address we dial."""
        node_id = self.known.get(peer)
        if node_id is None:
            served = await asyncio.to_thread(serving_node, self.home, peer)
            node_id = served.node_id
            self.served[node_id] = served
        revoked = RevocationList.current(self.home).revoked_at(node_id)
        if revoked is not None:
            self.known.pop(peer, None)
            raise PermissionDenied(
                f"{peer} is served by node {node_id}, revoked at {revoked}: nothing is sent "
                "to it; drop the address from `serve --peer` and the node's config"
            )
        self.known[peer] = node_id
        return channel_options(node_id)

    def forget(self, peer: str) -> None:
        """Another node may serve there now: ask again at the next session."""
        self.known.pop(peer, None)

    def may_send(self, node_id: str | None, authorizer: Authorizer) -> str | None:
        """Why the node ``node_id`` we dialed may not send us items (a reader), or None
        (anyone in a lab mesh without TLS)."""
        if node_id is None or not isinstance(authorizer, MeshAuthorizer):
            return None
        return authorizer.may_send(node_id, self.served.get(node_id))

    def line_refused(self, node_id: str | None, line: str) -> str | None:
        """Why no session on ``line`` runs with the node ``node_id`` we dialed — its
        certificate names other lines only (a CI runner's, decision 0120) — or None."""
        served = self.served.get(node_id) if node_id is not None else None
        if served is None or served.may_use(line):
            return None
        return (
            f"node {node_id} may use only {noun(len(served.lines), 'line')} "
            f"{', '.join(served.lines)}: line {line!r} "
            "is neither sent to it nor taken from it"
        )

    def trusted(self, peer: str) -> bool:
        """Whether the node pinned at ``peer`` is known and not revoked."""
        node_id = self.known.get(peer)
        return node_id is not None and RevocationList.current(self.home).revoked_at(node_id) is None


def shared_options(
    options: Sequence[tuple[str, Any]], max_frame_bytes: int
) -> list[tuple[str, Any]]:
    """``options`` for a channel that every call to a peer shares (decision 0096): room
    for the largest of its messages — a membership list or a sync frame, whose own cap the
    session checks (``ClientChannel``)."""
    return sized(options, max(MAX_MESSAGE, max_frame_bytes + FRAME_HEADROOM))
