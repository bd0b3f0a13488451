"""Node certificates: what they carry and how an identity is read back from one.

grpcio cannot handshake with ed25519 TLS keys, so a node's TLS key is P-256 and its
certificate, issued by the mesh CA, names the node's ed25519 node id, the mesh id and the
role in URI SANs (``lifeline-mesh://node/<id>``); an ephemeral CI runner's also names the
credential that enrolled it (``lifeline-mesh://credential/<name>``, decision 0024) and the
only lines it may use (``lifeline-mesh://line/<name>``, one each, decision 0120), and the
CA holder's names ``lifeline-mesh://ca-holder`` (decision 0047). TLS
hostname checks need a DNS name: every node certificate also carries the common name
``lifeline-mesh`` (channels override the target name to it, since certificates name nodes,
not IP addresses) and ``<node id>.node``.
"""

from __future__ import annotations

import datetime as dt
import hashlib
from dataclasses import dataclass, field

from cryptography import x509
from cryptography.hazmat.primitives import serialization

from lifeline.errors import PeerError
from lifeline_mesh.home.identity import parse_node_id
from lifeline_mesh.transport.authz import MeshRole

__all__ = [
    "TARGET_NAME",
    "URI_CA_HOLDER",
    "URI_CREDENTIAL",
    "URI_LINE",
    "URI_MESH",
    "URI_NODE",
    "URI_ROLE",
    "CertIdentity",
    "fingerprint",
    "identity_from_cert",
    "mesh_id_of",
    "node_dns_name",
]

TARGET_NAME = "lifeline-mesh"
URI_NODE = "lifeline-mesh://node/"
URI_MESH = "lifeline-mesh://mesh/"
URI_ROLE = "lifeline-mesh://role/"
URI_CREDENTIAL = "lifeline-mesh://credential/"
URI_LINE = "lifeline-mesh://line/"  # one per line a runner may use; none: every line
URI_CA_HOLDER = "lifeline-mesh://ca-holder"


def node_dns_name(node_id: str) -> str:
    return f"{node_id}.node.{TARGET_NAME}"


def fingerprint(cert: x509.Certificate) -> bytes:
    """SHA-256 of the DER certificate: what an invite pins."""
    return hashlib.sha256(cert.public_bytes(serialization.Encoding.DER)).digest()


def mesh_id_of(ca_cert: x509.Certificate) -> str:
    """The mesh id: 16 hex digits of sha256 over the CA public key (stable across renewals)."""
    spki = ca_cert.public_key().public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    return hashlib.sha256(spki).hexdigest()[:16]


@dataclass(frozen=True, slots=True)
class CertIdentity:
    node_id: str
    mesh_id: str
    role: MeshRole
    credential: str | None = None  # the CI credential that enrolled an ephemeral runner
    ca_holder: bool = False  # the CA named this node its holder (decision 0047)
    # The only lines it may read or write, when the CA named any (a CI credential's
    # ``--lines``, decision 0120); empty: every line its role allows.
    lines: tuple[str, ...] = ()
    # When the certificate stops being valid (None: not read from one). TLS checks it only
    # in the handshake; the authorizer checks it on every call (decision 0131).
    expires: dt.datetime | None = field(default=None, compare=False)

    def may_use(self, line: str) -> bool:
        return not self.lines or line in self.lines


def identity_from_cert(pem: bytes) -> CertIdentity:
    """Read node id, mesh id and role from a node certificate (already verified by TLS)."""
    try:
        cert = x509.load_pem_x509_certificate(pem)
        san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except (ValueError, x509.ExtensionNotFound) as exc:
        raise PeerError(
            f"peer certificate is not a lifeline-mesh node certificate ({exc})"
        ) from exc
    uris = san.get_values_for_type(x509.UniformResourceIdentifier)
    found = {
        prefix: next((u[len(prefix) :] for u in uris if u.startswith(prefix)), None)
        for prefix in (URI_NODE, URI_MESH, URI_ROLE, URI_CREDENTIAL)
    }
    node_id, mesh_id = found[URI_NODE], found[URI_MESH]
    if node_id is None or mesh_id is None:
        raise PeerError(
            f"peer certificate {cert.subject.rfc4514_string()!r} names no node id or mesh id; "
            "it was not issued by `lifeline-mesh join`"
        )
    role = found[URI_ROLE] or MeshRole.READER
    if role not in tuple(MeshRole):
        raise PeerError(f"peer certificate names role {role!r}, which this node does not know")
    return CertIdentity(
        node_id=parse_node_id(node_id),
        mesh_id=mesh_id,
        role=MeshRole(role),
        credential=found[URI_CREDENTIAL],
        ca_holder=URI_CA_HOLDER in uris,
        lines=tuple(sorted({u[len(URI_LINE) :] for u in uris if u.startswith(URI_LINE)})),
        expires=cert.not_valid_after_utc,
    )
