"""How a node secures its transport, composed from its files (DESIGN §7).

``TransportSecurity.for_home`` reads the node's mesh certificate, key and CA: mutual TLS
with the membership authorizer, or — only with ``insecure`` and only on loopback — plain
text that lets every caller in. Signers known to the notary are the members registry plus,
for one session, the caller whose certificate TLS just verified.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import grpc
from cryptography import x509

from lifeline.errors import ConfigError
from lifeline_mesh.home.node_home import NodeHome
from lifeline_mesh.membership.authz import MeshAuthorizer, cert_identity
from lifeline_mesh.membership.ca import load_ca_cert
from lifeline_mesh.membership.certs import identity_from_cert, mesh_id_of
from lifeline_mesh.membership.tls import channel_credentials, channel_options, server_credentials
from lifeline_mesh.notary.enrollment import EnrolledSigners
from lifeline_mesh.notary.signers import FileSigners, KnownSigners, SignerState, SignerStatus
from lifeline_mesh.transport.authz import AllowAll, Authorizer, MeshRole, PeerIdentity

__all__ = ["SessionSigners", "TransportSecurity", "peer_node_id"]


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
            return cls(insecure=True)
        if not home.in_mesh():
            raise ConfigError(
                f"{home.root} has no mesh certificate: create a mesh with `lifeline-mesh init "
                "--new-mesh NAME` or join one with `lifeline-mesh join -` (or, on loopback "
                "only, pass --insecure)"
            )
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
        return EnrolledSigners(SessionSigners(FileSigners.load(home, local), caller), self.ca)
