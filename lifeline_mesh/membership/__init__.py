"""Membership: the mesh CA, invites and joins, revocations, mTLS credentials, the authorizer.

Public API for the node and the notary; see docs/security.md for the model.
"""

from __future__ import annotations

from lifeline_mesh.membership.authz import MeshAuthorizer, authorize, cert_identity
from lifeline_mesh.membership.ca import MeshCA, MeshInfo, create_mesh
from lifeline_mesh.membership.certs import CertIdentity, identity_from_cert
from lifeline_mesh.membership.invite import Token, issue_invite, parse_duration
from lifeline_mesh.membership.registry import Member, Registry
from lifeline_mesh.membership.revocation import (
    Revocation,
    RevocationList,
    export_revocations,
    import_revocations,
    revoke,
    signer_status,
)
from lifeline_mesh.membership.tls import (
    channel_credentials,
    channel_options,
    join_server_credentials,
    server_credentials,
)

__all__ = [
    "CertIdentity",
    "Member",
    "MeshAuthorizer",
    "MeshCA",
    "MeshInfo",
    "Registry",
    "Revocation",
    "RevocationList",
    "Token",
    "authorize",
    "cert_identity",
    "channel_credentials",
    "channel_options",
    "create_mesh",
    "export_revocations",
    "identity_from_cert",
    "import_revocations",
    "issue_invite",
    "join_server_credentials",
    "parse_duration",
    "revoke",
    "server_credentials",
    "signer_status",
]
